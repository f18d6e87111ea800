// convoy_server: the Convoy inference server. Placeholder until the server issue lands: it parses the final flags
// and reports what it would serve, so the README's run command is already the real one.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"

ABSL_FLAG(std::string, model_repository, "model_repo", "Path of the model repository.");
ABSL_FLAG(int, grpc_port, 8001, "Port of the KServe v2 gRPC service.");
ABSL_FLAG(int, metrics_port, 8002, "Port of the Prometheus /metrics endpoint.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::printf("convoy_server: model repository %s, gRPC port %d, metrics port %d (serving not implemented yet)\n",
              absl::GetFlag(FLAGS_model_repository).c_str(), absl::GetFlag(FLAGS_grpc_port),
              absl::GetFlag(FLAGS_metrics_port));
  return 0;
}
