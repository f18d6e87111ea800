// The child side of the GPU check's case protocol (see case_runner.h).
#include "tests/gpu/case_runner.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/cuda_status.h"

namespace convoy::gpu_check {

void PrintLine(absl::string_view line) {
  std::cout << line << "\n" << std::flush;
}

absl::Status CheckCudaContext() {
  // A sticky fault comes back from every call; a synchronization also surfaces an asynchronous one.
  if (const cudaError_t error = cudaDeviceSynchronize(); error != cudaSuccess) {
    return cuda::CudaStatus(error, "cudaDeviceSynchronize after the case");
  }
  void* probe = nullptr;
  if (const cudaError_t error = cudaMalloc(&probe, 256); error != cudaSuccess) {
    return cuda::CudaStatus(error, "cudaMalloc of 256 bytes after the case");
  }
  return cuda::CudaStatus(cudaFree(probe), "cudaFree after the case");
}

bool CaseRunner::Claim(const std::string& label) {
  const int index = next_++;
  if (index < resume_from_) return false;
  PrintLine(absl::StrCat("@@case ", index, " ", label));
  return true;
}

void CaseRunner::Close(int index) { PrintLine(absl::StrCat("@@end ", index)); }

bool CaseRunner::Run(const std::string& label, const std::function<absl::Status()>& body) {
  if (!Claim(label)) return true;
  return Report(label, next_ - 1, body());
}

bool CaseRunner::RunSetup(const std::string& label, const std::function<absl::Status()>& body) {
  const int index = next_;
  if (!Claim(label)) return body().ok();
  return Report(label, index, body());
}

bool CaseRunner::Report(const std::string& label, int index, const absl::Status& status) {
  if (status.ok()) {
    ++passed_;
    PrintLine(absl::StrCat("PASS ", label));
    Close(index);
    return true;
  }
  ++failed_;
  PrintLine(absl::StrCat("FAIL ", label, ": ", status.message()));
  Close(index);
  if (const absl::Status context = CheckCudaContext(); !context.ok()) {
    PrintLine(absl::StrCat("  the CUDA context is unusable after this case (", context.message(),
                           "): the rest of the phase continues in a new process"));
    std::exit(kContextLostExit);
  }
  return false;
}

void CaseRunner::Fail(const std::string& label, absl::string_view why) {
  if (!Claim(label)) return;
  ++failed_;
  PrintLine(absl::StrCat("FAIL ", label, ": ", why));
  Close(next_ - 1);
}

void CaseRunner::Skip(const std::string& label, absl::string_view why) {
  if (!Claim(label)) return;
  PrintLine(absl::StrCat("SKIP ", label, ": ", why));
  Close(next_ - 1);
}

}  // namespace convoy::gpu_check
