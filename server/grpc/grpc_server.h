// GrpcServer: the gRPC endpoint: the inference service and the health service on one port, plaintext or TLS
// (server certificate and key, and with a client CA, mutual TLS that requires client certificates).
//
//   GrpcServer::Options options;
//   options.address = "0.0.0.0:0";                    // port 0: any free port (see port())
//   options.manager = manager.get();
//   CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> server, GrpcServer::Start(options));
//   ...
//   server->Shutdown(absl::Now() + absl::Seconds(30));  // ends health watches, waits for RPCs in flight
#ifndef CONVOY_SERVER_GRPC_GRPC_SERVER_H_
#define CONVOY_SERVER_GRPC_GRPC_SERVER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/grpc/async_server.h"
#include "server/grpc/health_service.h"
#include "server/grpc/inference_service.h"
#include "server/repository/model_manager.h"

namespace convoy::grpc_server {

// "NAME=INTEGER" entries (--grpc_channel_args) as channel arguments; INVALID_ARGUMENT naming the entry for one
// without '=', a name outside gRPC's "grpc." namespace, or a value that is not a 32-bit integer.
absl::StatusOr<std::vector<std::pair<std::string, int>>> ParseChannelArgs(const std::vector<std::string>& entries);

enum class InferPath { kCallback, kAsync };
// "async" or "callback"; INVALID_ARGUMENT naming --grpc_infer_path for anything else.
absl::StatusOr<InferPath> ParseInferPath(absl::string_view name);

class GrpcServer {
 public:
  struct Options {
    std::string address = "0.0.0.0:8001";
    repository::ModelManager* manager = nullptr;  // required; not owned; must outlive the server
    int max_message_bytes = 64 << 20;             // both directions
    // PEM text (not paths). Both empty: plaintext. client_ca_pem set: clients must present a certificate it signed.
    std::string tls_cert_pem;
    std::string tls_key_pem;
    std::string tls_client_ca_pem;
    std::string server_version = "0.1.0";
    bool on_gpu = false;
    // gRPC core channel arguments for the server's transport, integer-valued (e.g. {"grpc.http2.lookahead_bytes",
    // 1 << 20}), set after Convoy's own so they can override them; docs/performance.md ("The edge's cost per
    // request") says which ones were measured. ParseChannelArgs reads them from --grpc_channel_args.
    std::vector<std::pair<std::string, int>> channel_args;
    // How the RPCs are served (--grpc_infer_path): kCallback, every RPC on gRPC's callback API (gRPC's threads read
    // the calls and run the handlers), or kAsync, every RPC of both services on its completion-queue API with one
    // poller thread of the server's own and none of gRPC's callback threads (async_server.h). The same handlers
    // either way; docs/server.md says when to choose which, docs/performance.md ("The edge's cost per request")
    // what each measured.
    InferPath infer_path = InferPath::kCallback;
  };

  // UNAVAILABLE naming the address when it cannot listen; INVALID_ARGUMENT for half a TLS configuration.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const Options& options);
  ~GrpcServer();

  int port() const { return port_; }
  bool tls() const { return tls_; }
  HealthService& health() { return *health_; }
  InferPath infer_path() const { return async_ != nullptr ? InferPath::kAsync : InferPath::kCallback; }
  // Calls the client cancelled (or whose deadline passed) before they were answered, as the async path saw them (0
  // on the callback path).
  int64_t cancelled_calls() const { return async_ != nullptr ? async_->cancelled_calls() : 0; }

  // Ends every health Watch, stops accepting calls, waits for calls in flight until `deadline`, then cancels the
  // rest. Later calls do nothing.
  void Shutdown(absl::Time deadline);

 private:
  GrpcServer() = default;
  // What the model manager's listener calls; cleared at shutdown so a late state change never reaches a destroyed
  // health service.
  struct HealthLink {
    convoy::Mutex mu;
    HealthService* health ABSL_GUARDED_BY(mu) = nullptr;
  };

  std::unique_ptr<InferenceService> inference_;
  std::unique_ptr<HealthService> health_;
  std::shared_ptr<HealthLink> health_link_ = std::make_shared<HealthLink>();
  std::unique_ptr<AsyncServer> async_;  // kAsync only; its completion queue outlives server_
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool tls_ = false;
  bool shut_down_ = false;
};

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_GRPC_SERVER_H_
