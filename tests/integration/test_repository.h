// A throw-away model repository for tests: copies of the sample models (model_repo/, a test data dependency) under
// the test's temp dir with configs the test writes, so each test shapes batching, queues and versions as it needs.
//
//   TestRepository repo;
//   repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
//   repo.AddBroken("broken");                       // a config that fails to parse
#ifndef CONVOY_TESTS_INTEGRATION_TEST_REPOSITORY_H_
#define CONVOY_TESTS_INTEGRATION_TEST_REPOSITORY_H_

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace convoy::testing {

// config.yaml of simple_cnn (input images [3,32,32] FP32, output probabilities [10]) with `extra` appended.
inline std::string SimpleCnnConfig(const std::string& name, int max_batch_size = 8,
                                   const std::string& extra = "dynamic_batching:\n  max_queue_delay_microseconds: 500\n") {
  return "name: " + name + "\nformat: convoy\nmax_batch_size: " + std::to_string(max_batch_size) +
         "\ninputs:\n  - name: images\n    datatype: FP32\n    dims: [3, 32, 32]\n"
         "outputs:\n  - name: probabilities\n    datatype: FP32\n    dims: [10]\n    labels: labels.txt\n" + extra;
}

// config.yaml of resnet_classifier (images [3,224,224] -> logits [1000]) with `extra` appended.
inline std::string ResnetConfig(const std::string& name, const std::string& extra) {
  return "name: " + name + "\nformat: onnx\nmax_batch_size: 16\ninputs:\n  - name: images\n    datatype: FP32\n"
         "    dims: [3, 224, 224]\noutputs:\n  - name: logits\n    datatype: FP32\n    dims: [1000]\n" + extra;
}

class TestRepository {
 public:
  TestRepository() {
    root_ = std::filesystem::path(::testing::TempDir()) / ("repo_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(root_);
  }
  ~TestRepository() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  const std::string path() const { return root_.string(); }

  void AddSimpleCnn(const std::string& name, const std::string& config, int version = 1) {
    const auto dir = root_ / name / std::to_string(version);
    std::filesystem::create_directories(dir);
    Copy("model_repo/simple_cnn/1/model.yaml", dir / "model.yaml");
    Copy("model_repo/simple_cnn/1/model.safetensors", dir / "model.safetensors");
    WriteConfig(name, config);
    std::ofstream labels(root_ / name / "labels.txt");
    for (int i = 0; i < 10; ++i) labels << "class_" << i << "\n";
  }
  void AddResnet(const std::string& name, const std::string& config) {
    const auto dir = root_ / name / "1";
    std::filesystem::create_directories(dir);
    Copy("model_repo/resnet_classifier/1/model.onnx", dir / "model.onnx");
    WriteConfig(name, config);
  }
  void AddBroken(const std::string& name) {
    std::filesystem::create_directories(root_ / name / "1");
    WriteConfig(name, "name: " + name + "\nformat: onnx\nmax_batch_size: lots\n");
  }
  void WriteConfig(const std::string& name, const std::string& config) {
    std::ofstream(root_ / name / "config.yaml") << config;
  }
  void Remove(const std::string& name) { std::filesystem::remove_all(root_ / name); }

 private:
  static void Copy(const std::string& from, const std::filesystem::path& to) {
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  }
  std::filesystem::path root_;
};

}  // namespace convoy::testing

#endif  // CONVOY_TESTS_INTEGRATION_TEST_REPOSITORY_H_
