// The algorithm registry: for each op, every algorithm of every backend, registered at static-initialization time.
//
//   CONVOY_REGISTER_ALGORITHM(Conv2dOp, CpuConv2dIm2colGemm);   // in the algorithm's .cc (library: alwayslink)
//   auto candidates = OpRegistry<Conv2dOp>::Global().Candidates(problem, Backend::kCpu);
//   auto best_guess = OpRegistry<Conv2dOp>::Global().Heuristic(problem, Backend::kCpu);
//
// Candidates() returns the algorithms that can implement the problem; Heuristic() picks the one with the highest
// HeuristicScore among them (ties go to the first registered) — the cheap default when nothing is timed.
#ifndef CONVOY_KERNELS_REGISTRY_REGISTRY_H_
#define CONVOY_KERNELS_REGISTRY_REGISTRY_H_

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

  // The highest-scoring algorithm that can implement the problem, or NOT_FOUND listing why each one declined.
  absl::StatusOr<const AlgorithmType*> Heuristic(const Problem& problem, Backend backend) const {
    const AlgorithmType* best = nullptr;
    int best_score = 0;
    std::string reasons;
    for (const AlgorithmType* a : All(backend)) {
      absl::Status can = a->CanImplement(problem);
      if (!can.ok()) {
        absl::StrAppend(&reasons, "\n  ", a->name(), ": ", can.message());
        continue;
      }
      const int score = a->HeuristicScore(problem);
      if (best == nullptr || score > best_score) {
        best = a;
        best_score = score;
      }
    }
    if (best == nullptr) {
      return absl::NotFoundError(absl::StrCat("no ", BackendName(backend), " algorithm implements ",
                                              problem.ToString(), reasons.empty() ? " (none registered)" : reasons));
    }
    return best;
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
