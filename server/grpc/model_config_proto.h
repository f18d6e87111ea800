// A loaded model's configuration as Triton's ModelConfig message (what ModelConfig answers and perf_analyzer
// reads): name, platform and backend, max_batch_size, inputs and outputs as the runtime serves them (datatype,
// dims without the batch dimension, image format, labels file), dynamic_batching, instance_group and version policy.
#ifndef CONVOY_SERVER_GRPC_MODEL_CONFIG_PROTO_H_
#define CONVOY_SERVER_GRPC_MODEL_CONFIG_PROTO_H_

#include "proto/model_config.pb.h"
#include "server/repository/model_manager_served_model.h"

namespace convoy::grpc_server {

// "convoy_onnx" for ONNX models, "convoy_graph" for Convoy YAML graphs.
const char* PlatformName(const repository::ModelConfig& config);

inference::ModelConfig ToModelConfigProto(const repository::ServedModel& model, bool on_gpu);

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_MODEL_CONFIG_PROTO_H_
