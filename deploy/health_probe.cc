// convoy_health_probe: asks a Convoy server (or any gRPC server) for its health through the standard
// grpc.health.v1.Health/Check and exits 0 when the answer is SERVING, 1 for anything else (NOT_SERVING, an unknown
// service, no answer within the timeout, a refused connection). It is the container image's HEALTHCHECK and works
// for any orchestrator that can run a command; Kubernetes uses its native gRPC probes instead (deploy/kubernetes).
//
//   convoy_health_probe                                  # process health: service "" on localhost:8001, 2 s
//   convoy_health_probe --service=readiness              # every expected model READY
//   convoy_health_probe --service=resnet50 --timeout_ms=500
//   convoy_health_probe --address=convoy:8001 --tls_root_cert=/certs/ca.pem    # a server started with --tls_cert
//
// The server's health service names: "" and "liveness" (the process), "readiness" (every expected model READY), and
// each model's name (that model). One line on stdout says what was asked and what came back, for `docker inspect`.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "grpcpp/grpcpp.h"
#include "server/tools/flags_help.h"
#include "proto/health.grpc.pb.h"
#include "proto/health.pb.h"

ABSL_FLAG(std::string, address, "localhost:8001", "host:port of the server's gRPC endpoint.");
ABSL_FLAG(std::string, service, "", "Health service name: \"\", \"liveness\", \"readiness\" or a model name.");
ABSL_FLAG(int, timeout_ms, 2000, "Deadline of the Check call, connection included, in milliseconds.");
ABSL_FLAG(std::string, tls_root_cert, "",
          "PEM file of the CA that signed the server's certificate; when set, the probe speaks TLS.");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate, for a server started with --tls_client_ca.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");

namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr int kServing = 0;
constexpr int kNotServing = 1;

bool ReadFile(const std::string& path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *contents = buffer.str();
  return true;
}

// Plain-text credentials unless --tls_root_cert is set; nullptr (after printing why) when a PEM file is unreadable.
std::shared_ptr<grpc::ChannelCredentials> MakeCredentials() {
  const std::string root_path = absl::GetFlag(FLAGS_tls_root_cert);
  if (root_path.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  const std::pair<std::string, std::string*> files[] = {
      {root_path, &options.pem_root_certs},
      {absl::GetFlag(FLAGS_tls_cert), &options.pem_cert_chain},
      {absl::GetFlag(FLAGS_tls_key), &options.pem_private_key},
  };
  for (const auto& [path, contents] : files) {
    if (!path.empty() && !ReadFile(path, contents)) {
      std::printf("convoy_health_probe: cannot read %s\n", path.c_str());
      return nullptr;
    }
  }
  return grpc::SslCredentials(options);
}

const char* StatusName(HealthCheckResponse::ServingStatus status) {
  switch (status) {
    case HealthCheckResponse::SERVING: return "SERVING";
    case HealthCheckResponse::NOT_SERVING: return "NOT_SERVING";
    case HealthCheckResponse::SERVICE_UNKNOWN: return "SERVICE_UNKNOWN";
    default: return "UNKNOWN";
  }
}

}  // namespace

constexpr char kUsage[] = R"(usage: convoy_health_probe [--address=HOST:PORT] [--service=NAME] [--timeout_ms=N] [--tls_...]
Asks grpc.health.v1.Health/Check; exits 0 if the answer is SERVING, 1 otherwise. Services: "" and "liveness" (the
process), "readiness" (every expected model READY), a model's name (that model).)";

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  if (convoy::tools::PrintHelpIfAsked(argc, argv, kUsage, std::cout)) return 0;
  absl::ParseCommandLine(argc, argv);
  const std::string address = absl::GetFlag(FLAGS_address);
  const std::string service = absl::GetFlag(FLAGS_service);
  const int timeout_ms = absl::GetFlag(FLAGS_timeout_ms);

  std::shared_ptr<grpc::ChannelCredentials> credentials = MakeCredentials();
  if (credentials == nullptr) return kNotServing;
  std::unique_ptr<Health::Stub> stub = Health::NewStub(grpc::CreateChannel(address, credentials));

  grpc::ClientContext context;
  // Waits for the connection within the deadline instead of failing at once while the server is still binding.
  context.set_wait_for_ready(true);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);

  if (!status.ok()) {
    std::printf("convoy_health_probe: %s service \"%s\": gRPC error %d (%s) within %d ms\n", address.c_str(),
                service.c_str(), static_cast<int>(status.error_code()), status.error_message().c_str(), timeout_ms);
    return kNotServing;
  }
  std::printf("convoy_health_probe: %s service \"%s\": %s\n", address.c_str(), service.c_str(),
              StatusName(response.status()));
  return response.status() == HealthCheckResponse::SERVING ? kServing : kNotServing;
}
