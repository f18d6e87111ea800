// Checks for the tests of QDQ plans: a plan's outputs against the reference interpreter's simulation of the QDQ graph
// (which quantizes in FP32 exactly as the graph defines it), in units of each output's quantization step.
//
// Tolerance. INT8 steps accumulate exactly and requantize with one FP32 product; the reference accumulates in double
// and quantizes the FP32 result. The two land on the same step except where a value lies within rounding error of a
// tie, where they may pick neighbouring steps, and a step that differs travels on to later layers: one flipped step in
// QuantizedBlockGraph's conv_a reaches up to 25 of a batch's 1024 outputs through the 3x3 convolutions after it
// (measured over 60 runs: 48 runs with no difference, the worst 25 of 1024). So every output must be within one step,
// and at least 99 % of them identical over all the runs of a test (counted per test, not per run).
//
//   IdenticalShare share;   // checked when it goes out of scope
//   for (int batch = 1; batch <= 3; ++batch) ExpectWithinOneStep(graph, plan, batch, {{"y", 4.0f / 255}}, share);
#ifndef CONVOY_SERVER_RUNTIME_QUANTIZED_PLAN_CHECKS_H_
#define CONVOY_SERVER_RUNTIME_QUANTIZED_PLAN_CHECKS_H_

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "server/runtime/graph.h"
#include "server/runtime/plan.h"

namespace convoy::runtime::testing {

// How many outputs equal the reference's, over all the runs of one test; expects at least 99 % (and some outputs)
// when destroyed.
class IdenticalShare {
 public:
  IdenticalShare() = default;
  IdenticalShare(const IdenticalShare&) = delete;
  IdenticalShare& operator=(const IdenticalShare&) = delete;
  ~IdenticalShare();
  void Add(size_t identical, size_t total) {
    identical_ += identical;
    total_ += total;
  }

 private:
  size_t identical_ = 0;
  size_t total_ = 0;
};

// Runs `plan` at `batch` on fresh uniform [-1, 1) values for the graph's input "x" (outputs poisoned with NaN) and
// compares each output with the reference, in units of the output's quantization step (`steps`, by output name):
// a failure for any output more than one step off; the identical ones are added to `share`.
void ExpectWithinOneStep(const Graph& graph, std::shared_ptr<const ExecutionPlan> plan, int batch,
                         const std::map<std::string, float>& steps, IdenticalShare& share);

}  // namespace convoy::runtime::testing

#endif  // CONVOY_SERVER_RUNTIME_QUANTIZED_PLAN_CHECKS_H_
