#include "server/grpc/model_config_proto.h"

#include "absl/strings/str_cat.h"

namespace convoy::grpc_server {
namespace {

inference::DataType ToProtoType(DataType type) {
  switch (type) {
    case DataType::kFloat32: return inference::TYPE_FP32;
    case DataType::kFloat16: return inference::TYPE_FP16;
    case DataType::kBFloat16: return inference::TYPE_BF16;
    case DataType::kInt8: return inference::TYPE_INT8;
    case DataType::kUInt8: return inference::TYPE_UINT8;
    case DataType::kInt64: return inference::TYPE_INT64;
    case DataType::kInt32: return inference::TYPE_INT32;
  }
  return inference::TYPE_INVALID;
}

inference::ModelQueuePolicy ToProtoQueuePolicy(const batching::QueuePolicy& policy) {
  inference::ModelQueuePolicy out;
  out.set_timeout_action(policy.timeout_action == batching::TimeoutAction::kDelay ? inference::ModelQueuePolicy::DELAY
                                                                                  : inference::ModelQueuePolicy::REJECT);
  out.set_default_timeout_microseconds(
      static_cast<uint64_t>(absl::ToInt64Microseconds(policy.default_timeout)));
  out.set_allow_timeout_override(policy.allow_timeout_override);
  out.set_max_queue_size(static_cast<uint32_t>(policy.max_queue_size));
  return out;
}

void AddDynamicBatching(const repository::ServedModel& model, inference::ModelConfig& config) {
  if (!model.config().dynamic_batching.has_value()) return;
  const batching::BatchingPolicy& policy = model.policy();
  inference::ModelDynamicBatching* db = config.mutable_dynamic_batching();
  for (int64_t size : policy.preferred_batch_sizes) db->add_preferred_batch_size(static_cast<int32_t>(size));
  // An adaptive policy without a cap on its holds has no delay to report (Triton's field has no "unbounded").
  if (policy.max_queue_delay != absl::InfiniteDuration()) {
    db->set_max_queue_delay_microseconds(static_cast<uint64_t>(absl::ToInt64Microseconds(policy.max_queue_delay)));
  }
  // Triton's ModelDynamicBatching knows only the fixed delay: the policy travels in the config's parameters.
  (*config.mutable_parameters())["dynamic_batching.policy"].set_string_value(
      batching::BatchFormationName(policy.formation));
  if (policy.target_latency > absl::ZeroDuration()) {
    (*config.mutable_parameters())["dynamic_batching.target_latency_microseconds"].set_string_value(
        absl::StrCat(absl::ToInt64Microseconds(policy.target_latency)));
  }
  db->set_preserve_ordering(policy.preserve_ordering);
  db->set_priority_levels(policy.priority_levels);
  db->set_default_priority_level(policy.default_priority_level);
  *db->mutable_default_queue_policy() = ToProtoQueuePolicy(policy.default_queue_policy);
  for (const auto& [level, queue] : policy.priority_queue_policy) {
    (*db->mutable_priority_queue_policy())[level] = ToProtoQueuePolicy(queue);
  }
}

void AddVersionPolicy(const repository::VersionPolicy& policy, inference::ModelConfig& config) {
  inference::ModelVersionPolicy* out = config.mutable_version_policy();
  switch (policy.kind) {
    case repository::VersionPolicyKind::kLatest:
      out->mutable_latest()->set_num_versions(static_cast<uint32_t>(policy.latest_count));
      break;
    case repository::VersionPolicyKind::kAll:
      out->mutable_all();
      break;
    case repository::VersionPolicyKind::kSpecific:
      for (int64_t v : policy.versions) out->mutable_specific()->add_versions(v);
      break;
  }
}

}  // namespace

const char* PlatformName(const repository::ModelConfig& config) {
  return config.format == repository::ModelFormat::kOnnx ? "convoy_onnx" : "convoy_graph";
}

inference::ModelConfig ToModelConfigProto(const repository::ServedModel& model, bool on_gpu) {
  const runtime::ModelRuntime& rt = model.runtime();
  const bool batched = rt.max_batch_size() > 0;
  inference::ModelConfig config;
  config.set_name(model.name());
  config.set_platform(PlatformName(model.config()));
  config.set_backend("convoy");
  config.set_max_batch_size(rt.max_batch_size());
  for (const runtime::TensorMetadata& t : rt.inputs()) {
    inference::ModelInput* input = config.add_input();
    input->set_name(t.name);
    input->set_data_type(ToProtoType(t.datatype));
    for (size_t d = batched ? 1 : 0; d < t.dims.size(); ++d) input->add_dims(t.dims[d]);
    for (const repository::TensorConfig& c : model.config().inputs) {
      if (c.name == t.name && input->dims_size() == 3 && !c.preprocessing.has_value()) {
        input->set_format(c.layout == repository::TensorLayout::kNhwc ? inference::ModelInput::FORMAT_NHWC
                                                                      : inference::ModelInput::FORMAT_NCHW);
      }
    }
  }
  for (const runtime::TensorMetadata& t : rt.outputs()) {
    inference::ModelOutput* output = config.add_output();
    output->set_name(t.name);
    output->set_data_type(ToProtoType(t.datatype));
    for (size_t d = batched ? 1 : 0; d < t.dims.size(); ++d) output->add_dims(t.dims[d]);
    for (const repository::TensorConfig& c : model.config().outputs) {
      if (c.name == t.name) output->set_label_filename(c.labels_file);
    }
  }
  AddDynamicBatching(model, config);
  for (const repository::InstanceGroupConfig& group : model.config().instance_groups) {
    inference::ModelInstanceGroup* out = config.add_instance_group();
    out->set_name(model.name());
    out->set_count(static_cast<int32_t>(group.count));
    out->set_kind(on_gpu ? inference::ModelInstanceGroup::KIND_GPU : inference::ModelInstanceGroup::KIND_CPU);
    for (int64_t gpu : group.gpus) out->add_gpus(static_cast<int32_t>(gpu));
  }
  AddVersionPolicy(model.config().version_policy, config);
  return config;
}

}  // namespace convoy::grpc_server
