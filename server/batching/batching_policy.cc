// Validation of a model's batching policy. See batching_policy.h.
#include "server/batching/batching_policy.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace convoy::batching {
namespace {

absl::Status ValidateQueuePolicy(const BatchingPolicy& policy, const QueuePolicy& queue, const std::string& which) {
  if (queue.max_queue_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("model '", policy.model_name, "': ", which,
                                                   " max_queue_size must be >= 0, got ", queue.max_queue_size));
  }
  if (queue.default_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", policy.model_name, "': ", which,
                                                   " default timeout must be >= 0, got ",
                                                   absl::FormatDuration(queue.default_timeout)));
  }
  return absl::OkStatus();
}

absl::Status ValidatePriorities(const BatchingPolicy& policy) {
  const std::string model = absl::StrCat("model '", policy.model_name, "': ");
  if (policy.priority_levels == 0 && policy.default_priority_level != 0) {
    return absl::InvalidArgumentError(absl::StrCat(model, "default_priority_level ", policy.default_priority_level,
                                                   " given but priority_levels is 0"));
  }
  if (policy.priority_levels > 0 &&
      (policy.default_priority_level < 1 || policy.default_priority_level > policy.priority_levels)) {
    return absl::InvalidArgumentError(absl::StrCat(model, "default_priority_level must be in 1..",
                                                   policy.priority_levels, ", got ", policy.default_priority_level));
  }
  for (const auto& [level, queue] : policy.priority_queue_policy) {
    if (level < 1 || level > policy.level_count()) {
      return absl::InvalidArgumentError(absl::StrCat(model, "priority_queue_policy for level ", level,
                                                     " but levels are 1..", policy.level_count()));
    }
    CONVOY_RETURN_IF_ERROR(ValidateQueuePolicy(policy, queue, absl::StrCat("level ", level)));
  }
  return ValidateQueuePolicy(policy, policy.default_queue_policy, "default queue policy");
}

}  // namespace

const char* BatchFormationName(BatchFormation formation) {
  return formation == BatchFormation::kAdaptive ? "adaptive" : "fixed";
}

const QueuePolicy& BatchingPolicy::PolicyForLevel(uint64_t level) const {
  const auto it = priority_queue_policy.find(level);
  return it == priority_queue_policy.end() ? default_queue_policy : it->second;
}

absl::Status ValidateBatchingPolicy(const BatchingPolicy& policy) {
  const std::string model = absl::StrCat("model '", policy.model_name, "': ");
  if (policy.max_batch_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(model, "max_batch_size must be >= 0, got ",
                                                   policy.max_batch_size));
  }
  for (int64_t size : policy.preferred_batch_sizes) {
    if (size < 1 || size > policy.max_batch_size) {
      return absl::InvalidArgumentError(absl::StrCat(model, "preferred batch size ", size, " is outside 1..",
                                                     policy.max_batch_size, " (max_batch_size)"));
    }
  }
  if (policy.max_queue_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(model, "max_queue_delay must be >= 0, got ",
                                                   absl::FormatDuration(policy.max_queue_delay)));
  }
  if (policy.target_latency < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(model, "target_latency must be >= 0, got ",
                                                   absl::FormatDuration(policy.target_latency)));
  }
  if (policy.formation != BatchFormation::kAdaptive && policy.target_latency > absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(model, "a target latency needs the adaptive policy"));
  }
  if (policy.formation == BatchFormation::kAdaptive && !policy.preferred_batch_sizes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(model, "the adaptive policy takes no preferred batch sizes (it "
                                                   "measures the execution time of every size)"));
  }
  return ValidatePriorities(policy);
}

}  // namespace convoy::batching
