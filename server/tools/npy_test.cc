// Tests for the .npy reader and writer: round trips of random arrays in every supported dtype, NumPy's header
// alignment, float64 narrowing, and errors that name the file and the problem.
#include "server/tools/npy.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::tools {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

NpyArray RandomArray(DataType dtype, std::vector<int64_t> shape, std::mt19937& rng) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  int64_t count = 1;
  for (int64_t d : a.shape) count *= d;
  a.data.resize(count * DataTypeSize(dtype));
  for (auto& byte : a.data) byte = static_cast<uint8_t>(rng());
  if (dtype == DataType::kFloat32) {  // keep the values finite so == compares them
    for (int64_t i = 0; i < count; ++i) StoreFromFloat(a.data.data(), dtype, i, static_cast<float>(rng() % 1000) / 7);
  }
  return a;
}

TEST(NpyTest, RoundTripsEveryDtypeAndAlignsTheHeader) {
  std::mt19937 rng(std::random_device{}());
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kUInt8, DataType::kInt64}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{7}, {2, 3, 4, 5}, {}}) {
      const NpyArray a = RandomArray(dtype, shape, rng);
      const std::string bytes = SerializeNpy(a);
      const size_t header_end = 10 + (static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8);
      EXPECT_EQ(header_end % 64, 0u);
      CONVOY_ASSERT_OK_AND_ASSIGN(NpyArray b, ParseNpy(bytes, "mem"));
      EXPECT_EQ(b.dtype, a.dtype);
      EXPECT_EQ(b.shape, a.shape);
      EXPECT_EQ(b.data, a.data);
    }
  }
}

TEST(NpyTest, Bf16IsWrittenAsFloat32AndFloat64IsNarrowed) {
  NpyArray a;
  a.dtype = DataType::kBFloat16;
  a.shape = {3};
  a.data.resize(6);
  const float values[] = {1.5f, -2.25f, 1024.0f};
  for (int i = 0; i < 3; ++i) StoreFromFloat(a.data.data(), a.dtype, i, values[i]);
  CONVOY_ASSERT_OK_AND_ASSIGN(NpyArray b, ParseNpy(SerializeNpy(a), "mem"));
  ASSERT_EQ(b.dtype, DataType::kFloat32);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(LoadAsFloat(b.data.data(), b.dtype, i), values[i]);

  std::string f64 = SerializeNpy(b);
  f64.replace(f64.find("<f4"), 3, "<f8");
  f64.resize(f64.size() - 12);
  for (float v : values) {
    const double d = v;
    f64.append(reinterpret_cast<const char*>(&d), 8);
  }
  CONVOY_ASSERT_OK_AND_ASSIGN(NpyArray c, ParseNpy(f64, "mem"));
  EXPECT_EQ(c.dtype, DataType::kFloat32);
  EXPECT_EQ(c.data, b.data);
}

TEST(NpyTest, ErrorsNameTheFileAndTheProblem) {
  std::mt19937 rng(std::random_device{}());
  const std::string good = SerializeNpy(RandomArray(DataType::kFloat32, {2, 3}, rng));
  EXPECT_THAT(ParseNpy("PK\x03\x04 not numpy", "x.npy"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("x.npy: not a usable .npy file: missing")));
  EXPECT_THAT(ParseNpy(good.substr(0, good.size() - 4), "x.npy"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs 24 data bytes, the file has 20")));
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_THAT(ParseNpy(fortran, "x.npy"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Fortran")));
  std::string complex = good;
  complex.replace(complex.find("<f4"), 3, "<c8");
  EXPECT_THAT(ParseNpy(complex, "x.npy"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unsupported dtype '<c8'")));
  EXPECT_THAT(ReadNpyFile("/nonexistent/x.npy"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("x.npy")));
}

}  // namespace
}  // namespace convoy::tools
