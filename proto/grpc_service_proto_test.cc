// Checks the generated C++ protocol code: the gRPC method paths clients call, the streaming shape of
// ModelStreamInfer and Health.Watch, and the field numbers raw tensors travel in on the wire (decoded as unknown
// fields, so the check does not trust the generated code it is checking). Field-by-field agreement with Triton's
// published protocol is checked in tests/python/test_proto_compat.py.
#include <cstdint>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/unknown_field_set.h"
#include "gtest/gtest.h"
#include "proto/grpc_service.grpc.pb.h"
#include "proto/health.grpc.pb.h"

namespace {

using ::google::protobuf::MethodDescriptor;
using ::google::protobuf::ServiceDescriptor;
using ::google::protobuf::UnknownField;
using ::google::protobuf::UnknownFieldSet;

std::string RandomBytes(std::mt19937& rng, int size) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(byte(rng));
  return bytes;
}

// The service as the generated descriptor pool knows it (reached through a message of the same file).
const ServiceDescriptor* InferenceService() {
  const ServiceDescriptor* service =
      inference::ModelInferRequest::descriptor()->file()->FindServiceByName("GRPCInferenceService");
  EXPECT_NE(service, nullptr);
  return service;
}

TEST(GrpcServiceProtoTest, ServiceHasTritonsFullNameAndEveryRequiredMethod) {
  const ServiceDescriptor* service = InferenceService();
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->full_name(), "inference.GRPCInferenceService");
  for (const char* name : {"ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
                           "ModelStreamInfer", "ModelConfig", "ModelStatistics", "RepositoryIndex",
                           "RepositoryModelLoad", "RepositoryModelUnload"}) {
    const MethodDescriptor* method = service->FindMethodByName(name);
    ASSERT_NE(method, nullptr) << name;
    EXPECT_EQ(method->input_type()->file()->package(), "inference") << name;
  }
}

TEST(GrpcServiceProtoTest, OnlyModelStreamInferStreams) {
  const ServiceDescriptor* service = InferenceService();
  ASSERT_NE(service, nullptr);
  for (int i = 0; i < service->method_count(); ++i) {
    const MethodDescriptor* method = service->method(i);
    const bool expect_stream = method->name() == "ModelStreamInfer";
    EXPECT_EQ(method->client_streaming(), expect_stream) << method->name();
    EXPECT_EQ(method->server_streaming(), expect_stream) << method->name();
  }
  EXPECT_EQ(service->FindMethodByName("ModelStreamInfer")->output_type()->full_name(),
            "inference.ModelStreamInferResponse");
}

TEST(GrpcServiceProtoTest, HealthServiceIsTheStandardOne) {
  const ServiceDescriptor* service =
      grpc::health::v1::HealthCheckRequest::descriptor()->file()->FindServiceByName("Health");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->full_name(), "grpc.health.v1.Health");
  ASSERT_NE(service->FindMethodByName("Check"), nullptr);
  const MethodDescriptor* watch = service->FindMethodByName("Watch");
  ASSERT_NE(watch, nullptr);
  EXPECT_FALSE(watch->client_streaming());
  EXPECT_TRUE(watch->server_streaming());
}

TEST(GrpcServiceProtoTest, RawInputContentsTravelInField7InInputOrder) {
  std::mt19937 rng(std::random_device{}());
  inference::ModelInferRequest request;
  request.set_model_name("resnet");
  const std::string first = RandomBytes(rng, 1 + static_cast<int>(rng() % 64));
  const std::string second = RandomBytes(rng, 1 + static_cast<int>(rng() % 64));
  request.add_raw_input_contents(first);
  request.add_raw_input_contents(second);

  UnknownFieldSet wire;
  ASSERT_TRUE(wire.ParseFromString(request.SerializeAsString()));
  std::vector<std::string> raw;
  for (int i = 0; i < wire.field_count(); ++i) {
    const UnknownField& field = wire.field(i);
    if (field.number() == 1) {
      EXPECT_EQ(field.length_delimited(), "resnet");
    } else if (field.number() == 7) {
      raw.push_back(field.length_delimited());
    }
  }
  EXPECT_THAT(raw, ::testing::ElementsAre(first, second));
}

TEST(GrpcServiceProtoTest, RawOutputContentsTravelInField6) {
  std::mt19937 rng(std::random_device{}());
  inference::ModelInferResponse response;
  const std::string output = RandomBytes(rng, 1 + static_cast<int>(rng() % 64));
  response.add_raw_output_contents(output);
  response.add_outputs()->set_name("logits");

  UnknownFieldSet wire;
  ASSERT_TRUE(wire.ParseFromString(response.SerializeAsString()));
  int raw_fields = 0;
  for (int i = 0; i < wire.field_count(); ++i) {
    if (wire.field(i).number() != 6) continue;
    ++raw_fields;
    EXPECT_EQ(wire.field(i).length_delimited(), output);
  }
  EXPECT_EQ(raw_fields, 1);
}

TEST(GrpcServiceProtoTest, PriorityParameterRoundTripsThroughTheParametersMap) {
  std::mt19937 rng(std::random_device{}());
  const uint64_t priority = 1 + rng() % 10;
  inference::ModelInferRequest request;
  (*request.mutable_parameters())["priority"].set_uint64_param(priority);
  inference::ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(request.SerializeAsString()));
  ASSERT_EQ(parsed.parameters().count("priority"), 1u);
  EXPECT_EQ(parsed.parameters().at("priority").parameter_choice_case(), inference::InferParameter::kUint64Param);
  EXPECT_EQ(parsed.parameters().at("priority").uint64_param(), priority);
}

}  // namespace
