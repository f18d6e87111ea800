// CPU spatial padding ("cpu.pad.copy"): constant, reflect and edge. The tensor is treated as planes of H x W
// "cells": a cell is one element in NCHW (N * C planes) and one pixel's C elements in NHWC (N planes). Each output
// row copies its source row's interior in one memcpy and fills the borders cell by cell. The constant cell (the pad
// value in the dtype, repeated per cell) is built once per Run in the workspace.
#ifndef CONVOY_KERNELS_CPU_PAD_H_
#define CONVOY_KERNELS_CPU_PAD_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuPadAlgorithm final : public PadAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.pad.copy"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const PadProblem& problem) const override { return problem.Validate(); }
  size_t WorkspaceBytes(const PadProblem& problem) const override;
  absl::Status Run(const PadProblem& problem, const PadArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_PAD_H_
