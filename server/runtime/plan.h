// The execution plan: an optimized Graph mapped onto kernels for one device and precision. Immutable once built
// (planner.h builds it), shared by every executor of a model (executor.h runs it).
//
// A plan is a list of tensors and a list of steps. Each PlanTensor is one buffer the plan reads or writes: a graph
// input, a step output, or an alias (a Flatten/Reshape/Identity view sharing its source's storage). Each PlanStep is
// one kernel call; for every batch size 1..max_batch_size it holds the concrete problem, the selected algorithm,
// its workspace size and (when the algorithm wants one) the packed filter. Weights live in device memory the plan
// owns. The memory plan (memory_planner.h) gives every tensor an arena offset per batch size.
//
// Thread safety: every method is const and the plan never changes after Build, so any number of executors may run
// one plan concurrently.
#ifndef CONVOY_SERVER_RUNTIME_PLAN_H_
#define CONVOY_SERVER_RUNTIME_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/common/dtype.h"
#include "kernels/common/tensor.h"
#include "kernels/registry/algorithm.h"
#include "kernels/registry/device.h"
#include "server/runtime/graph.h"
#include "server/runtime/memory_planner.h"

namespace convoy::runtime {

// What the kernels compute in. FP16 and BF16 convert the weights once at load and run every kernel in that type;
// TF32 computes in FP32 storage but lets conv and GEMM kernels use TF32 tensor-core products (allow_tf32).
// kAuto is a request, resolved before planning (ModelRuntime): bf16 on CPUs with BF16 compute (AMX or AVX512-BF16,
// where oneDNN's convolutions run BF16 with FP32 accumulation), fp32 everywhere else.
// kInt8 is a request too: ModelRuntime quantizes the graph (the model's own QDQ scales, or its calibration table:
// calibrated_quantization.h) and plans it in FP32, where the quantized convolutions and adds become INT8 steps.
enum class Precision : uint8_t { kFp32 = 0, kFp16, kBf16, kTf32, kAuto, kInt8 };
absl::string_view PrecisionName(Precision precision);  // "fp32", "fp16", "bf16", "tf32", "auto", "int8"
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
// kAuto -> kBf16 when `bf16_compute` (the device computes BF16 natively), else kFp32; any other precision as is.
Precision ResolvePrecision(Precision precision, bool bf16_compute);
DataType ComputeDataType(Precision precision);

struct PlanTensor {
  std::string name;
  Shape shape;                    // logical dims (N, C, H, W for images); dim 0 may be kBatch
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;  // how a rank-4 tensor lies in memory; rank-4 with H*W == 1 lies the same either way
  int alias_of = -1;              // the tensor whose storage this one views, or -1
  bool external = false;          // the executor binds caller memory instead of an arena slot (CPU inputs/outputs)

  std::vector<int64_t> Dims(int batch_size) const { return ConcreteShape(shape, batch_size); }
  size_t Bytes(int batch_size) const;
  TensorDesc Desc(int batch_size) const;
};

// Storage of every tensor for one run, indexed by tensor id.
using TensorPointers = absl::Span<void* const>;

// One kernel call of the plan.
class PlanStep {
 public:
  virtual ~PlanStep() = default;
  PlanStep(const PlanStep&) = delete;
  PlanStep& operator=(const PlanStep&) = delete;

  // The graph node it implements; inserted conversions are named "<tensor>:to_<dtype>_<layout>".
  const std::string& name() const { return name_; }
  convoy::OpKind op() const { return op_; }
  // Tensor ids read and written (constants are not tensors).
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }

  virtual size_t WorkspaceBytes(int batch_size) const = 0;
  virtual std::string ProblemString(int batch_size) const = 0;
  virtual absl::string_view AlgorithmName(int batch_size) const = 0;
  // The tuned median time of the selected algorithm, or 0 when it was chosen by heuristic.
  virtual double TunedMilliseconds(int batch_size) const = 0;
  // How the selected algorithm runs the step (its LaunchSummary: tiles, blocks, waves, split factor, estimated
  // time), or "" when it says nothing.
  virtual std::string LaunchSummary(int batch_size) const { return ""; }
  // Whether the selected algorithm's output for the step was verified on the device (kernels/registry/verification.h).
  virtual bool Verified(int batch_size) const { return false; }
  virtual absl::Status Run(int batch_size, TensorPointers tensors, Workspace workspace,
                           const ExecutionContext& context) const = 0;

 protected:
  PlanStep(std::string name, convoy::OpKind op, std::vector<int> inputs, std::vector<int> outputs)
      : name_(std::move(name)), op_(op), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}

 private:
  std::string name_;
  convoy::OpKind op_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
};

// A named graph input or output as the executor exchanges it: host-visible tensor `tensor` of the plan.
struct PlanBinding {
  std::string name;
  int tensor = -1;
};

// How one convolution, residual add, global average pool or Gemm of a QDQ model runs (quantized_conv_folding.h): in
// INT8 (its step's algorithm is a QuantizedConv2dOp / QuantizedAddOp one), or on the FP32 path with the quantization
// simulated, and why.
struct QuantizedLayerChoice {
  std::string node;
  bool add = false;  // a residual add; else a convolution (or, with pool_or_gemm, a pool or Gemm)
  bool int8 = false;
  std::string reason;  // why it stays FP32; empty for INT8
  bool pool_or_gemm = false;  // a global average pool or a Gemm (a classifier's tail)
  bool rounded_once = false;  // an add fused into its convolution with one rounding (int8_single_rounding_adds)
};

class ExecutionPlan {
 public:
  Device& device() const { return *device_; }
  Precision precision() const { return precision_; }
  Layout layout() const { return layout_; }
  // The plan runs any batch size in [1, max_batch_size]. A graph without a symbolic batch has max_batch_size 1.
  int max_batch_size() const { return max_batch_size_; }
  bool has_batch_dimension() const { return has_batch_dimension_; }

  const std::vector<PlanTensor>& tensors() const { return tensors_; }
  const std::vector<std::unique_ptr<PlanStep>>& steps() const { return steps_; }
  const std::vector<PlanBinding>& inputs() const { return inputs_; }
  const std::vector<PlanBinding>& outputs() const { return outputs_; }

  // The arena layout for `batch_size` (1-based, <= max_batch_size).
  const MemoryPlan& memory_plan(int batch_size) const { return memory_plans_[batch_size - 1]; }
  // Largest arena over all batch sizes, and largest workspace of any step at any batch size.
  size_t arena_bytes() const { return arena_bytes_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  size_t weight_bytes() const { return weight_bytes_; }

  // Every convolution and add next to a quantize-dequantize step (QDQ models), in graph order; empty for others.
  const std::vector<QuantizedLayerChoice>& quantized_layers() const { return quantized_layers_; }
  // "52 of 53 quantized convolutions and 16 of 16 quantized adds run INT8" (with the first FP32 one's reason), or ""
  // when the model has none.
  std::string QuantizationSummary() const;

  // Steps with their problems, algorithms and tuned times at `batch_size`, then the memory plan for each batch size.
  std::string ToString(int batch_size) const;

 private:
  friend class PlanBuilder;
  ExecutionPlan() = default;

  Device* device_ = nullptr;
  Precision precision_ = Precision::kFp32;
  Layout layout_ = Layout::kNCHW;
  int max_batch_size_ = 1;
  bool has_batch_dimension_ = false;
  std::vector<PlanTensor> tensors_;
  std::vector<std::unique_ptr<PlanStep>> steps_;
  std::vector<PlanBinding> inputs_;
  std::vector<PlanBinding> outputs_;
  std::vector<MemoryPlan> memory_plans_;
  std::vector<QuantizedLayerChoice> quantized_layers_;
  size_t arena_bytes_ = 0;
  size_t workspace_bytes_ = 0;
  size_t weight_bytes_ = 0;
  std::vector<DeviceAllocation> weights_;  // constants and packed filters, in device memory
  std::vector<std::unique_ptr<AlgorithmState>> algorithm_states_;  // Algorithm::Prepare per step and batch size
};

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_PLAN_H_
