// The algorithm registry: for each op, every algorithm of every backend, registered at static-initialization time.
//
//   CONVOY_REGISTER_ALGORITHM(Conv2dOp, CpuConv2dIm2colGemm);   // in the algorithm's .cc (library: alwayslink)
//   auto candidates = OpRegistry<Conv2dOp>::Global().Candidates(problem, Backend::kCpu);
//   auto best_guess = OpRegistry<Conv2dOp>::Global().Heuristic(problem, Backend::kCpu);
//
// Candidates() returns the algorithms that can implement the problem; Heuristic() picks the one with the highest
// HeuristicScore among them, ties going to the lowest positive EstimatedMicroseconds, then to the first registered —
// the cheap default when nothing is timed. HeuristicOrder() is every candidate in that order (what the heuristic
// falls back through when its first choice fails verification on the device).
#ifndef CONVOY_KERNELS_REGISTRY_REGISTRY_H_
#define CONVOY_KERNELS_REGISTRY_REGISTRY_H_

#include <algorithm>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/mutex.h"
#include "kernels/registry/algorithm.h"

namespace convoy {

template <typename Op>
class OpRegistry {
 public:
  using AlgorithmType = typename Op::AlgorithmType;
  using Problem = typename Op::Problem;

  static OpRegistry& Global() {
    static OpRegistry* registry = new OpRegistry();
    return *registry;
  }

  void Register(std::unique_ptr<AlgorithmType> algorithm) {
    convoy::MutexLock lock(&mu_);
    algorithms_.push_back(std::move(algorithm));
  }

  std::vector<const AlgorithmType*> All(Backend backend) const {
    convoy::MutexLock lock(&mu_);
    std::vector<const AlgorithmType*> out;
    for (const auto& a : algorithms_) {
      if (a->backend() == backend) out.push_back(a.get());
    }
    return out;
  }

  std::vector<const AlgorithmType*> Candidates(const Problem& problem, Backend backend) const {
    std::vector<const AlgorithmType*> out;
    for (const AlgorithmType* a : All(backend)) {
      if (a->CanImplement(problem).ok()) out.push_back(a);
    }
    return out;
  }

  // The algorithms that can implement the problem, best heuristic choice first (see above), or NOT_FOUND listing why
  // each one declined.
  absl::StatusOr<std::vector<const AlgorithmType*>> HeuristicOrder(const Problem& problem, Backend backend) const {
    struct Ranked {
      const AlgorithmType* algorithm;
      int score;
      double estimate;  // 0: none
      size_t index;
    };
    std::vector<Ranked> ranked;
    std::string reasons;
    for (const AlgorithmType* a : All(backend)) {
      absl::Status can = a->CanImplement(problem);
      if (!can.ok()) {
        absl::StrAppend(&reasons, "\n  ", a->name(), ": ", can.message());
        continue;
      }
      ranked.push_back({a, a->HeuristicScore(problem), a->EstimatedMicroseconds(problem), ranked.size()});
    }
    if (ranked.empty()) {
      return absl::NotFoundError(absl::StrCat("no ", BackendName(backend), " algorithm implements ",
                                              problem.ToString(), reasons.empty() ? " (none registered)" : reasons));
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
      if (a.score != b.score) return a.score > b.score;
      const bool a_estimated = a.estimate > 0, b_estimated = b.estimate > 0;
      if (a_estimated && b_estimated && a.estimate != b.estimate) return a.estimate < b.estimate;
      if (a_estimated != b_estimated) return a_estimated;
      return a.index < b.index;
    });
    std::vector<const AlgorithmType*> out;
    for (const Ranked& r : ranked) out.push_back(r.algorithm);
    return out;
  }

  // The heuristic's choice: the first of HeuristicOrder.
  absl::StatusOr<const AlgorithmType*> Heuristic(const Problem& problem, Backend backend) const {
    absl::StatusOr<std::vector<const AlgorithmType*>> order = HeuristicOrder(problem, backend);
    if (!order.ok()) return order.status();
    return order->front();
  }

  const AlgorithmType* Find(absl::string_view name) const {
    convoy::MutexLock lock(&mu_);
    for (const auto& a : algorithms_) {
      if (a->name() == name) return a.get();
    }
    return nullptr;
  }

 private:
  OpRegistry() = default;
  mutable convoy::Mutex mu_;
  std::vector<std::unique_ptr<AlgorithmType>> algorithms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy

#define CONVOY_REGISTER_ALGORITHM(Op, AlgorithmClass)                                           \
  static const bool convoy_registered_##AlgorithmClass = [] {                                   \
    ::convoy::OpRegistry<::convoy::Op>::Global().Register(std::make_unique<AlgorithmClass>()); \
    return true;                                                                                \
  }()

#endif  // CONVOY_KERNELS_REGISTRY_REGISTRY_H_
