// The conv layers of torchvision's ResNet-18 and ResNet-50 at 224x224, each listed once with how often its model runs
// it, for the per-layer oneDNN benchmarks (onednn_brgconv_layers, quantized_conv_layers).
#ifndef CONVOY_KERNELS_BENCHMARKS_RESNET_CONV_LAYERS_H_
#define CONVOY_KERNELS_BENCHMARKS_RESNET_CONV_LAYERS_H_

#include <vector>

namespace convoy::benchmarks {

// Input channels, input height = width, output channels, kernel, stride, uses in the model, and the epilogue
// (0: bias + relu, 1: bias, 2: bias + residual + relu).
struct ResNetConvLayer {
  const char* model;
  int c, h, k, r, stride, count;
  int epi;
};

inline const std::vector<ResNetConvLayer>& ResNetConvLayers() {
  static const std::vector<ResNetConvLayer> layers = {
      {"resnet18", 3, 224, 64, 7, 2, 1, 0},
      {"resnet18", 64, 56, 64, 3, 1, 2, 0},
      {"resnet18", 64, 56, 64, 3, 1, 2, 2},
      {"resnet18", 64, 56, 128, 3, 2, 1, 0},
      {"resnet18", 128, 28, 128, 3, 1, 1, 0},
      {"resnet18", 128, 28, 128, 3, 1, 2, 2},
      {"resnet18", 64, 56, 128, 1, 2, 1, 1},
      {"resnet18", 128, 28, 256, 3, 2, 1, 0},
      {"resnet18", 256, 14, 256, 3, 1, 1, 0},
      {"resnet18", 256, 14, 256, 3, 1, 2, 2},
      {"resnet18", 128, 28, 256, 1, 2, 1, 1},
      {"resnet18", 256, 14, 512, 3, 2, 1, 0},
      {"resnet18", 512, 7, 512, 3, 1, 1, 0},
      {"resnet18", 512, 7, 512, 3, 1, 2, 2},
      {"resnet18", 256, 14, 512, 1, 2, 1, 1},
      {"resnet50", 3, 224, 64, 7, 2, 1, 0},
      {"resnet50", 64, 56, 64, 1, 1, 1, 0},
      {"resnet50", 256, 56, 64, 1, 1, 2, 0},
      {"resnet50", 64, 56, 64, 3, 1, 3, 0},
      {"resnet50", 64, 56, 256, 1, 1, 3, 2},
      {"resnet50", 64, 56, 256, 1, 1, 1, 1},
      {"resnet50", 256, 56, 128, 1, 1, 1, 0},
      {"resnet50", 128, 56, 128, 3, 2, 1, 0},
      {"resnet50", 256, 56, 512, 1, 2, 1, 1},
      {"resnet50", 512, 28, 128, 1, 1, 3, 0},
      {"resnet50", 128, 28, 128, 3, 1, 3, 0},
      {"resnet50", 128, 28, 512, 1, 1, 4, 2},
      {"resnet50", 512, 28, 256, 1, 1, 1, 0},
      {"resnet50", 256, 28, 256, 3, 2, 1, 0},
      {"resnet50", 512, 28, 1024, 1, 2, 1, 1},
      {"resnet50", 1024, 14, 256, 1, 1, 5, 0},
      {"resnet50", 256, 14, 256, 3, 1, 5, 0},
      {"resnet50", 256, 14, 1024, 1, 1, 6, 2},
      {"resnet50", 1024, 14, 512, 1, 1, 1, 0},
      {"resnet50", 512, 14, 512, 3, 2, 1, 0},
      {"resnet50", 1024, 14, 2048, 1, 2, 1, 1},
      {"resnet50", 2048, 7, 512, 1, 1, 2, 0},
      {"resnet50", 512, 7, 512, 3, 1, 2, 0},
      {"resnet50", 512, 7, 2048, 1, 1, 3, 2},
  };
  return layers;
}

}  // namespace convoy::benchmarks

#endif  // CONVOY_KERNELS_BENCHMARKS_RESNET_CONV_LAYERS_H_
