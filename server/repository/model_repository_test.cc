// Tests for repository scanning (version policies, per-model errors) and for loading the committed sample models
// end to end (import + optimize + reference interpreter).
#include "server/repository/model_repository.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/repository/model_loader.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::repository {
namespace {

namespace fs = std::filesystem;
using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

void WriteFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string Config(const std::string& name, const std::string& extra = "") {
  return "name: " + name + "\nformat: onnx\ninputs: [{name: x, dims: [3]}]\noutputs: [{name: y, dims: [3]}]\n" + extra;
}

class ScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("repo_" + std::to_string(std::random_device{}()));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(ScanTest, AppliesVersionPoliciesAndIsolatesBrokenModels) {
  WriteFile(root_ / "latest2/config.yaml", Config("latest2", "version_policy: {latest: 2}\n"));
  for (int v : {1, 3, 10}) WriteFile(root_ / "latest2" / std::to_string(v) / "model.onnx", "");
  WriteFile(root_ / "latest2/notes/model.onnx", "");  // not a version number: ignored
  WriteFile(root_ / "pick/config.yaml", Config("pick", "version_policy: {specific: [2]}\n"));
  for (int v : {1, 2}) WriteFile(root_ / "pick" / std::to_string(v) / "model.onnx", "");
  WriteFile(root_ / "typo/config.yaml", Config("typo", "max_batch: 4\n"));
  WriteFile(root_ / "empty/config.yaml", Config("empty"));
  CONVOY_ASSERT_OK_AND_ASSIGN(RepositoryScan scan, ScanModelRepository(root_.string()));
  ASSERT_EQ(scan.models.size(), 4u);
  const ScannedModel &empty = scan.models[0], &latest = scan.models[1], &pick = scan.models[2],
                     &typo = scan.models[3];
  EXPECT_THAT(empty.status, StatusIs(absl::StatusCode::kNotFound, HasSubstr("no version folder")));
  ASSERT_THAT(latest.status, IsOk());
  ASSERT_EQ(latest.versions.size(), 2u);
  EXPECT_EQ(latest.versions[0].version, 3);
  EXPECT_EQ(latest.versions[1].version, 10);
  EXPECT_EQ(latest.versions[1].model_path, (root_ / "latest2/10/model.onnx").string());
  ASSERT_THAT(pick.status, IsOk());
  ASSERT_EQ(pick.versions.size(), 1u);
  EXPECT_EQ(pick.versions[0].version, 2);
  EXPECT_THAT(typo.status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_batch: unknown field")));
}

TEST_F(ScanTest, NameMustMatchFolder) {
  WriteFile(root_ / "a/config.yaml", Config("b"));
  EXPECT_THAT(ScanModelDirectory((root_ / "a").string()).status, StatusIs(absl::StatusCode::kInvalidArgument,
                                                                          HasSubstr("differs from the folder name")));
}

TEST(SampleModelsTest, ScanAndRunBothSampleModels) {
  CONVOY_ASSERT_OK_AND_ASSIGN(RepositoryScan scan, ScanModelRepository("model_repo"));
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int ran = 0;
  for (const ScannedModel& model : scan.models) {
    if (model.name != "simple_cnn" && model.name != "resnet_classifier") continue;
    ASSERT_THAT(model.status, IsOk()) << model.name;
    ASSERT_FALSE(model.versions.empty());
    CONVOY_ASSERT_OK_AND_ASSIGN(LoadedGraph loaded, LoadGraphFile(model.versions.back().model_path, {}));
    const auto& input = model.config.inputs[0];
    runtime::Shape shape = {2};
    shape.insert(shape.end(), input.dims.begin(), input.dims.end());
    runtime::Tensor x = runtime::Tensor::Zeros(shape);
    for (float& v : x.data) v = dist(rng);
    CONVOY_ASSERT_OK_AND_ASSIGN(auto outputs, runtime::RunReference(loaded.graph, {{input.name, x}}));
    const runtime::Tensor& y = outputs.at(model.config.outputs[0].name);
    ASSERT_EQ(y.shape, (runtime::Shape{2, model.config.outputs[0].dims[0]})) << model.name;
    for (float v : y.data) ASSERT_TRUE(std::isfinite(v)) << model.name;
    if (model.name == "simple_cnn") {  // softmax output: each row sums to one
      for (int n = 0; n < 2; ++n) {
        double sum = 0;
        for (int k = 0; k < 10; ++k) sum += y.data[n * 10 + k];
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
    ++ran;
  }
  EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace convoy::repository
