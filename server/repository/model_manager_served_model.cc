#include "server/repository/model_manager_served_model.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace convoy::repository {
namespace {

batching::TimeoutAction ToBatchingAction(TimeoutAction action) {
  return action == TimeoutAction::kDelay ? batching::TimeoutAction::kDelay : batching::TimeoutAction::kReject;
}

batching::QueuePolicy ToBatchingQueuePolicy(const QueuePolicy& policy) {
  batching::QueuePolicy out;
  out.timeout_action = ToBatchingAction(policy.timeout_action);
  out.default_timeout = absl::Microseconds(policy.default_timeout_microseconds);
  out.allow_timeout_override = policy.allow_timeout_override;
  out.max_queue_size = policy.max_queue_size;
  return out;
}

int64_t ItemBytes(const runtime::TensorMetadata& t, bool batched) {
  int64_t n = 1;
  for (size_t i = batched ? 1 : 0; i < t.dims.size(); ++i) n *= std::max<int64_t>(t.dims[i], 0);
  return n * static_cast<int64_t>(DataTypeSize(t.datatype));
}

std::vector<int64_t> BatchDims(const runtime::TensorMetadata& t, int64_t batch, bool batched) {
  std::vector<int64_t> dims = t.dims;
  if (batched && !dims.empty()) dims[0] = batch;
  return dims;
}

}  // namespace

batching::BatchingPolicy PolicyFromConfig(const ModelConfig& config, const std::string& name) {
  batching::BatchingPolicy policy;
  policy.model_name = name;
  policy.max_batch_size = config.max_batch_size;
  // No dynamic_batching block: Triton's default scheduler, each request runs alone as it comes.
  policy.dynamic_batching = config.dynamic_batching.has_value();
  if (!policy.dynamic_batching) return policy;
  const DynamicBatchingConfig& db = *config.dynamic_batching;
  policy.preferred_batch_sizes = db.preferred_batch_size;
  policy.max_queue_delay = absl::Microseconds(db.max_queue_delay_microseconds);
  if (db.policy == BatchingPolicyKind::kAdaptive) {
    policy.formation = batching::BatchFormation::kAdaptive;
    policy.target_latency = absl::Microseconds(db.target_latency_microseconds);
    // With the adaptive policy the delay only caps its holds; absent, it has no cap of its own.
    if (!db.max_queue_delay_given) policy.max_queue_delay = absl::InfiniteDuration();
  }
  policy.preserve_ordering = db.preserve_ordering;
  policy.priority_levels = static_cast<uint64_t>(db.priority_levels);
  policy.default_priority_level = static_cast<uint64_t>(db.default_priority_level);
  policy.default_queue_policy = ToBatchingQueuePolicy(db.default_queue_policy);
  for (const auto& [level, queue] : db.priority_queue_policy) {
    policy.priority_queue_policy[static_cast<uint64_t>(level)] = ToBatchingQueuePolicy(queue);
  }
  return policy;
}

// Runs batches on the model's instances: gathers the requests' inputs into one batch (or uses a lone request's
// buffers as they are), runs the instance, and splits the outputs back into each request's payload.
class ServedModel::Executor final : public batching::BatchExecutor {
 public:
  Executor(ServedModel* model, std::vector<std::unique_ptr<runtime::ModelInstance>> instances)
      : model_(model), instances_(std::move(instances)) {}

  absl::Status ExecuteBatch(batching::Batch& batch, int instance) override {
    const runtime::ModelRuntime& rt = *model_->runtime_;
    const bool batched = rt.max_batch_size() > 0;
    int64_t total = 0;
    for (const auto& request : batch) total += request->batch_size();
    const absl::Time start = model_->clock_->Now();
    std::vector<HostBuffer> gathered_inputs;
    std::vector<TensorView> inputs;
    for (size_t i = 0; i < rt.inputs().size(); ++i) {
      const runtime::TensorMetadata& t = rt.inputs()[i];
      void* data = batch[0]->payload_as<InferencePayload>()->inputs[i].data();
      if (batch.size() > 1) {
        CONVOY_ASSIGN_OR_RETURN(HostBuffer buffer, HostBuffer::Allocate(ItemBytes(t, batched) * total));
        char* cursor = buffer.as<char>();
        for (const auto& request : batch) {
          const HostBuffer& part = request->payload_as<InferencePayload>()->inputs[i];
          std::memcpy(cursor, part.data(), part.size());
          cursor += part.size();
        }
        data = buffer.data();
        gathered_inputs.push_back(std::move(buffer));
      }
      inputs.push_back({TensorDesc(t.datatype, BatchDims(t, total, batched)), data});
    }
    std::vector<HostBuffer> output_buffers;
    std::vector<TensorView> outputs;
    for (const runtime::TensorMetadata& t : rt.outputs()) {
      CONVOY_ASSIGN_OR_RETURN(HostBuffer buffer, HostBuffer::Allocate(ItemBytes(t, batched) * total));
      outputs.push_back({TensorDesc(t.datatype, BatchDims(t, total, batched)), buffer.data()});
      output_buffers.push_back(std::move(buffer));
    }
    const absl::Time inputs_ready = model_->clock_->Now();
    CONVOY_RETURN_IF_ERROR(instances_[instance]->Run(static_cast<int>(total), inputs, outputs));
    const absl::Time ran = model_->clock_->Now();
    CONVOY_RETURN_IF_ERROR(SplitOutputs(batch, std::move(output_buffers), batched));
    const absl::Time done = model_->clock_->Now();
    for (const auto& request : batch) {
      InferencePayload* payload = request->payload_as<InferencePayload>();
      payload->compute_input = inputs_ready - start;
      payload->compute_infer = ran - inputs_ready;
      payload->compute_output = done - ran;
    }
    model_->RecordBatch(total, inputs_ready - start, ran - inputs_ready, done - ran);
    return absl::OkStatus();
  }

 private:
  absl::Status SplitOutputs(batching::Batch& batch, std::vector<HostBuffer> outputs, bool batched) {
    const runtime::ModelRuntime& rt = *model_->runtime_;
    if (batch.size() == 1) {
      batch[0]->payload_as<InferencePayload>()->outputs = std::move(outputs);
      return absl::OkStatus();
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      const int64_t item = ItemBytes(rt.outputs()[o], batched);
      const char* cursor = outputs[o].as<const char>();
      for (const auto& request : batch) {
        const int64_t bytes = item * request->batch_size();
        CONVOY_ASSIGN_OR_RETURN(HostBuffer part, HostBuffer::Allocate(bytes));
        std::memcpy(part.data(), cursor, bytes);
        cursor += bytes;
        request->payload_as<InferencePayload>()->outputs.push_back(std::move(part));
      }
    }
    return absl::OkStatus();
  }

  ServedModel* const model_;
  std::vector<std::unique_ptr<runtime::ModelInstance>> instances_;
};

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Load(const Options& options) {
  if (options.device == nullptr) return absl::InvalidArgumentError("ServedModel: no device");
  const absl::Time start = absl::Now();
  std::unique_ptr<ServedModel> model(new ServedModel());
  model->name_ = options.model_name;
  model->version_ = options.version;
  model->config_ = options.config;
  model->clock_ = options.clock;
  runtime::ModelRuntimeOptions runtime_options;
  runtime_options.model_path = options.model_path;
  runtime_options.config = options.config;
  runtime_options.device = options.device;
  runtime_options.log = options.load_log;
  CONVOY_ASSIGN_OR_RETURN(model->runtime_, runtime::ModelRuntime::Create(runtime_options));
  model->signature_ = model->runtime_->signature();
  model->signature_.name = model->name_;  // the name clients use (the repository folder)
  CONVOY_RETURN_IF_ERROR(model->LoadLabels(options));
  CONVOY_RETURN_IF_ERROR(model->StartBatcher(options));
  model->load_time_ = absl::Now() - start;
  if (model->reporter_ != nullptr) model->reporter_->RecordModelLoad(model->load_time_);
  return model;
}

absl::Status ServedModel::LoadLabels(const Options& options) {
  labels_.resize(runtime_->outputs().size());
  for (size_t o = 0; o < runtime_->outputs().size(); ++o) {
    for (const TensorConfig& t : config_.outputs) {
      if (t.name != runtime_->outputs()[o].name || t.labels_file.empty()) continue;
      const std::string path = options.model_directory + "/" + t.labels_file;
      std::ifstream in(path);
      if (!in) return absl::NotFoundError(absl::StrCat("output '", t.name, "': cannot read labels file ", path));
      for (std::string line; std::getline(in, line);) labels_[o].push_back(line);
    }
  }
  return absl::OkStatus();
}

absl::Status ServedModel::StartBatcher(const Options& options) {
  int64_t instance_count = 0;
  for (const InstanceGroupConfig& group : config_.instance_groups) instance_count += group.count;
  instance_count = std::max<int64_t>(instance_count, 1);
  std::vector<std::unique_ptr<runtime::ModelInstance>> instances;
  for (int64_t i = 0; i < instance_count; ++i) {
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<runtime::ModelInstance> instance, runtime_->CreateInstance());
    // With CUDA graphs, each serving instance records its own graphs for the warm-up batch sizes before READY, so
    // no request pays for a recording of those sizes.
    if (runtime_->records_graphs()) {
      CONVOY_RETURN_IF_ERROR(runtime_->WarmUp(*instance));
      if (options.load_log) {
        options.load_log(absl::StrCat(name_, ": instance ", i, " recorded ", instance->executor().recorded_batch_sizes(),
                                      " CUDA graph(s) during warm-up"));
      }
    }
    instances.push_back(std::move(instance));
  }
  const batching::BatchingPolicy policy = PolicyFromConfig(config_, name_);
  if (options.metrics != nullptr) {
    reporter_ = options.metrics->ForModel(name_, absl::StrCat(version_));
    reporter_->SetBatchingPolicy(policy.dynamic_batching ? batching::BatchFormationName(policy.formation) : "none",
                                 policy.target_latency);
    observer_ = std::make_unique<batching::BatchMetricsObserver>(reporter_.get());
  }
  executor_ = std::make_unique<Executor>(this, std::move(instances));
  batching::DynamicBatcher::Options batcher_options;
  batcher_options.policy = policy;
  batcher_options.instance_count = static_cast<int>(instance_count);
  batcher_options.executor = executor_.get();
  batcher_options.clock = clock_;
  batcher_options.observer = observer_.get();
  CONVOY_ASSIGN_OR_RETURN(batcher_, batching::DynamicBatcher::Create(batcher_options));
  return absl::OkStatus();
}

ServedModel::~ServedModel() {
  if (batcher_ != nullptr) batcher_->Shutdown(absl::Now()).IgnoreError();
  batcher_.reset();
}

absl::Status ServedModel::Infer(batching::BatchRequest::Spec spec, std::unique_ptr<InferencePayload>& payload,
                                Done done) {
  {
    convoy::MutexLock lock(&admit_mu_);
    if (draining_) {
      return absl::UnavailableError(absl::StrCat("model '", name_, "' version ", version_, " is unloading"));
    }
    ++admitting_;
  }
  const absl::Time arrival = clock_->Now();
  // The completion needs its own request (queue and dispatch times); the request is alive while it runs.
  auto self = std::make_shared<const batching::BatchRequest*>(nullptr);
  auto on_complete = [this, self, arrival, done = std::move(done)](absl::Status status) {
    const batching::BatchRequest& request = **self;
    RecordOutcome(request, status, arrival);
    done(status, *request.payload_as<InferencePayload>());
  };
  auto request = std::make_unique<batching::BatchRequest>(std::move(spec), std::move(payload), std::move(on_complete));
  *self = request.get();
  absl::Status enqueued = batcher_->Enqueue(request);
  {
    convoy::MutexLock lock(&admit_mu_);
    --admitting_;
  }
  if (!enqueued.ok()) {
    convoy::MutexLock lock(&stats_mu_);
    stats_.fail.Add(absl::ZeroDuration());
  }
  return enqueued;
}

void ServedModel::RecordRejectedRequest(const absl::Status& status) {
  if (reporter_ != nullptr) reporter_->RecordFailure(metrics::FailureReasonFromStatus(status));
  convoy::MutexLock lock(&stats_mu_);
  stats_.fail.Add(absl::ZeroDuration());
}

void ServedModel::RecordEdge(metrics::EdgeProtocol protocol, const metrics::EdgeTimes& times) const {
  if (reporter_ != nullptr) reporter_->RecordEdge(protocol, times);
}

void ServedModel::RecordEdgeSend(metrics::EdgeProtocol protocol, absl::Duration send) const {
  if (reporter_ != nullptr) reporter_->RecordEdgeSend(protocol, send);
}

void ServedModel::RecordOutcome(const batching::BatchRequest& request, const absl::Status& status,
                                absl::Time arrival) {
  const absl::Time now = clock_->Now();
  const InferencePayload* payload = request.payload_as<InferencePayload>();
  convoy::MutexLock lock(&stats_mu_);
  if (!status.ok()) {
    stats_.fail.Add(now - arrival);
    return;
  }
  const absl::Duration queue = request.dispatch_time() - request.enqueue_time();
  stats_.success.Add(now - arrival);
  stats_.queue.Add(queue);
  stats_.compute_input.Add(payload->compute_input);
  stats_.compute_infer.Add(payload->compute_infer);
  stats_.compute_output.Add(payload->compute_output);
  stats_.inference_count += static_cast<uint64_t>(payload->batch_size);
  stats_.last_inference_ms = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now()));
  if (reporter_ != nullptr) {
    metrics::RequestTimings timings;
    timings.batch_size = payload->batch_size;
    timings.request = now - arrival;
    timings.queue = queue;
    timings.compute_input = payload->compute_input;
    timings.compute_infer = payload->compute_infer;
    timings.compute_output = payload->compute_output;
    reporter_->RecordSuccess(timings);
  }
}

void ServedModel::RecordBatch(int64_t batch_size, absl::Duration input, absl::Duration infer,
                              absl::Duration output) {
  if (reporter_ != nullptr) reporter_->RecordBatchExecution(batch_size, input + infer + output);
  convoy::MutexLock lock(&stats_mu_);
  ++stats_.execution_count;
  BatchSizeStat& stat = stats_.batch_stats[batch_size];
  stat.compute_input.Add(input);
  stat.compute_infer.Add(infer);
  stat.compute_output.Add(output);
}

absl::Status ServedModel::Drain(absl::Time deadline) {
  {
    convoy::MutexLock lock(&admit_mu_);
    draining_ = true;
    admit_mu_.Await(absl::Condition(
        +[](int* admitting) { return *admitting == 0; }, &admitting_));
  }
  return batcher_->Shutdown(deadline);
}

bool ServedModel::draining() const {
  convoy::MutexLock lock(&admit_mu_);
  return draining_;
}

batching::BatcherStats ServedModel::batcher_stats() const { return batcher_->stats(); }

ModelStats ServedModel::stats() const {
  convoy::MutexLock lock(&stats_mu_);
  return stats_;
}

}  // namespace convoy::repository
