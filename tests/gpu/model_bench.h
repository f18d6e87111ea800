// The GPU check's whole-model phase ("model"): a ResNet-50 (torchvision's shape, random weights written by
// tests/gpu/resnet50_torch.py as a Convoy YAML graph + safetensors in --model_dir) loaded through ModelRuntime on the
// device in FP16 NHWC with a CUDA graph per batch size, as the server runs it:
//   - a correctness case: Convoy's FP16 logits on the reference input against PyTorch's FP32 logits of the same
//     weights (files written beside the model), max |error| / max |reference| within 5e-2 (FP16 activations and
//     weights through 53 layers of random weights: the measured error is printed);
//   - per batch size, images per second of ModelInstance::Run (host input to host output, what a request costs:
//     copies through the pinned staging buffers, the replayed CUDA graph), median of rounds after warm-up.
// The same run's PyTorch numbers come from resnet50_torch.py --bench (run_gpu_check.sh), on the same model.
#ifndef CONVOY_TESTS_GPU_MODEL_BENCH_H_
#define CONVOY_TESTS_GPU_MODEL_BENCH_H_

#include <string>
#include <vector>

#include "kernels/cuda/cuda_device.h"
#include "tests/gpu/case_runner.h"

namespace convoy::gpu_check {

struct ModelBenchOptions {
  std::string model_dir;                // holds model.yaml (+ its weights) and, optionally, reference_*.bin
  std::vector<int> batches = {1, 8, 32, 64};
  bool quick = false;                   // few timing runs (the emulated CI run on a tiny model)
};

void RunModelBench(const ModelBenchOptions& options, cuda::CudaDevice& device, CaseRunner& cases);

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_MODEL_BENCH_H_
