#include "server/grpc/grpc_server.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace convoy::grpc_server {
namespace {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const GrpcServer::Options& options) {
  if (options.tls_cert_pem.empty() && options.tls_key_pem.empty()) {
    if (!options.tls_client_ca_pem.empty()) {
      return absl::InvalidArgumentError("TLS: a client CA needs a server certificate and key (--tls_cert, --tls_key)");
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert_pem.empty() || options.tls_key_pem.empty()) {
    return absl::InvalidArgumentError("TLS: both a server certificate and its key are needed (--tls_cert, --tls_key)");
  }
  grpc::SslServerCredentialsOptions ssl(options.tls_client_ca_pem.empty()
                                            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = options.tls_client_ca_pem;
  ssl.pem_key_cert_pairs.push_back({options.tls_key_pem, options.tls_cert_pem});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, int>>> ParseChannelArgs(const std::vector<std::string>& entries) {
  std::vector<std::pair<std::string, int>> args;
  for (const std::string& entry : entries) {
    const size_t eq = entry.find('=');
    int value = 0;
    if (eq == std::string::npos || !absl::StartsWith(entry, "grpc.") ||
        !absl::SimpleAtoi(absl::string_view(entry).substr(eq + 1), &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--grpc_channel_args: expected NAME=INTEGER with a gRPC channel argument name (grpc.*), got '", entry,
          "'"));
    }
    args.emplace_back(entry.substr(0, eq), value);
  }
  return args;
}

absl::StatusOr<InferPath> ParseInferPath(absl::string_view name) {
  if (name == "async") return InferPath::kAsync;
  if (name == "callback") return InferPath::kCallback;
  return absl::InvalidArgumentError(
      absl::StrCat("--grpc_infer_path: expected 'async' or 'callback', got '", name, "'"));
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const Options& options) {
  if (options.manager == nullptr) return absl::InvalidArgumentError("GrpcServer: no model manager");
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(options);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  InferenceService::Options service_options;
  service_options.manager = options.manager;
  service_options.server_version = options.server_version;
  service_options.on_gpu = options.on_gpu;
  server->inference_ = std::make_unique<InferenceService>(service_options);
  server->health_ = std::make_unique<HealthService>(options.manager);
  grpc::ServerBuilder builder;
  // gRPC would set SO_REUSEPORT: a second server started on a port another one listens on would then share that
  // port's connections with it silently. Off, the second one fails to start, naming the port (as Triton's default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.address, *credentials, &server->port_);
  if (options.infer_path == InferPath::kAsync) {
    server->async_ = std::make_unique<AsyncServer>(server->inference_.get(), server->health_.get(), &builder);
  } else {
    builder.RegisterService(server->inference_.get());
    builder.RegisterService(server->health_.get());
  }
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  for (const auto& [name, value] : options.channel_args) builder.AddChannelArgument(name, value);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    if (server->async_ != nullptr) {  // its queue must be shut down (after its server) and drained before it goes
      if (server->server_ != nullptr) server->server_->Shutdown();
      server->async_->Shutdown();
    }
    server->server_.reset();
    return absl::UnavailableError(absl::StrCat("gRPC: cannot listen on ", options.address));
  }
  if (server->async_ != nullptr) server->async_->Start();
  server->tls_ = !options.tls_cert_pem.empty();
  {
    convoy::MutexLock lock(&server->health_link_->mu);
    server->health_link_->health = server->health_.get();
  }
  options.manager->AddListener([link = server->health_link_] {
    convoy::MutexLock lock(&link->mu);
    if (link->health != nullptr) link->health->Refresh();
  });
  return server;
}

void GrpcServer::Shutdown(absl::Time deadline) {
  if (shut_down_ || server_ == nullptr) return;  // null: Start failed (e.g. the port is taken) before serving
  shut_down_ = true;
  {
    convoy::MutexLock lock(&health_link_->mu);
    health_link_->health = nullptr;
  }
  health_->Shutdown();
  server_->Shutdown(absl::ToChronoTime(deadline));  // at the deadline, cancels the calls still running
  if (async_ != nullptr) async_->Shutdown();         // waits for its calls still open (async_server.h)
  server_->Wait();
}

GrpcServer::~GrpcServer() { Shutdown(absl::Now()); }

}  // namespace convoy::grpc_server
