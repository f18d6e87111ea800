// HttpServer: the KServe v2 HTTP/REST protocol (as Triton serves it) on libevent's evhttp, beside the gRPC service
// and sharing its request path: requests become the protocol-neutral view (infer_json.h) and go through
// infer::StartInfer to the same batchers, checks, limits and metrics. docs/server.md lists every route and status.
//
//   GET  /v2/health/live | /v2/health/ready            {"live": true} / {"ready": true} (503 when not ready)
//   GET  /v2                                            server metadata
//   GET  /v2/models/{m}[/versions/{v}]                  model metadata
//   GET  /v2/models/{m}[/versions/{v}]/ready | /config  model readiness (200, else the lookup's error) / config
//   GET  /v2/models/{m}[/versions/{v}]/stats, /v2/models/stats  the statistics extension (gRPC's ModelStatistics)
//   POST /v2/models/{m}[/versions/{v}]/infer            JSON tensors or the binary tensor data extension
//
// Errors are {"error": "<message>"} with the status http_status.h maps (400 bad request, 404 unknown model, version
// or path, 405 wrong method with an Allow header, 503 unavailable). Two answers come from libevent itself, before a
// request reaches Convoy: 413 for a body over max_body_bytes or headers over max_header_bytes, and 400 for a request
// line or headers that are not HTTP/1.x.
//
// Compression (content_coding.h): a body sent with Content-Encoding gzip or deflate is inflated before it is parsed
// (413 when it inflates past max_body_bytes, 400 when it is corrupt, 415 for another coding); an infer response is
// compressed with the coding Accept-Encoding prefers.
//
// Threads: one event loop thread accepts, reads and writes, and answers every route but infer itself. An infer body
// is decoded (parsed, validated, photos decoded, tensors copied into the batch) and queued on a decode worker
// (worker_pool.h; small bodies on the loop thread); a completed request is encoded on the batcher thread that
// finished it and handed back to the loop to send. Keep-alive and pipelined requests are libevent's (one request
// of a connection at a time, in order).
//
//   HttpServer::Options options;
//   options.port = 0;                                    // any free port (see port())
//   options.manager = manager.get();
//   CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server, HttpServer::Start(options));
//   server->Shutdown(absl::Now() + absl::Seconds(30));  // stops accepting, waits for requests in flight
#ifndef CONVOY_SERVER_HTTP_HTTP_SERVER_H_
#define CONVOY_SERVER_HTTP_HTTP_SERVER_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/http/worker_pool.h"
#include "server/repository/model_manager.h"

struct bufferevent;
struct event_base;
struct evhttp;
struct evhttp_bound_socket;
struct evhttp_request;

namespace convoy::http {

class ConnectionInputs;
class LoopTasks;
class TlsContext;

class HttpServer {
 public:
  struct Options {
    std::string host = "0.0.0.0";
    int port = 8000;  // 0: any free port
    repository::ModelManager* manager = nullptr;  // required; not owned; must outlive the server
    std::string server_version = "0.1.0";
    bool on_gpu = false;  // instance_group kind reported by /config
    // Largest request body (JSON header plus binary data); larger ones get 413 without being read into memory.
    // JSON text takes 3-5x the bytes of the same tensor in binary.
    size_t max_body_bytes = 64u << 20;
    size_t max_header_bytes = 64u << 10;
    // A connection idle (or a request arriving) for longer is closed.
    absl::Duration idle_timeout = absl::Seconds(60);
    // Infer request bodies are decoded (JSON parsed, photos decoded and resized, tensors copied into the batch's
    // input buffers) on `decode_threads` worker threads, so the loop thread goes on serving other connections
    // meanwhile (worker_pool.h says how to size them). Requests waiting for a decode thread beyond
    // `max_queued_decodes` are answered 503 at once. Bodies of at most `inline_decode_bytes` (small JSON requests,
    // which decode in less time than a hand-off between threads costs) are decoded on the loop thread; photos
    // always go to a worker.
    int decode_threads = 2;
    size_t max_queued_decodes = 64;
    size_t inline_decode_bytes = 16u << 10;
    // TLS (HTTPS) when a certificate and key are given, as for gRPC and from the same PEM files (tls_context.h);
    // with a client CA, clients must present a certificate it signed (mutual TLS). Empty: plain HTTP.
    std::string tls_cert_pem;
    std::string tls_key_pem;
    std::string tls_client_ca_pem;
    // The most bytes the loop reads from one connection's socket per event beyond libevent 2.1's own 4 KiB
    // (connection_input.h); 0 reads as libevent alone does.
    size_t max_read_bytes = 1u << 20;
    // Tests only: runs on the decode worker before each body it decodes (a test holds it to keep a decode in flight).
    std::function<void()> before_worker_decode;
  };

  // UNAVAILABLE naming the address when it cannot listen; INVALID_ARGUMENT without a manager, with fewer than one
  // decode thread or queue place, or with TLS files OpenSSL cannot use (naming the flag and the reason).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const Options& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  bool tls() const { return tls_ != nullptr; }

  // Stops accepting connections, waits until the infer, load and unload requests in flight are answered or `deadline` passes, then
  // stops the loop. Idempotent.
  void Shutdown(absl::Time deadline);

 private:
  explicit HttpServer(const Options& options);
  static void OnRequest(evhttp_request* req, void* self);
  static bufferevent* NewConnection(event_base* base, void* self);
  void Route(evhttp_request* req);
  struct InferCall;
  struct InferReply;
  void Infer(evhttp_request* req, const std::string& model, const std::string& version,
             std::optional<absl::Time> first_byte, absl::Time received);
  void Decode(const std::shared_ptr<InferCall>& call);
  static bool ViewBinaryBody(InferCall* call, size_t length);
  // The model repository extension: POST /v2/repository/index, /v2/repository/models/{model}/load|unload.
  void RepositoryIndex(evhttp_request* req);
  void ModelControl(evhttp_request* req, const std::string& model, bool load);
  static void PostReply(const std::shared_ptr<LoopTasks>& tasks, HttpServer* server,
                        const std::shared_ptr<InferCall>& call, InferReply reply);
  // The send phase's timing (loop thread only).
  void TimeSend(evhttp_request* req, std::string model, std::string version, absl::Time posted);
  static void OnReplySent(evhttp_request* req, void* self);
  struct PendingSend {
    std::string model;
    std::string version;
    absl::Time posted;
  };
  std::unordered_map<evhttp_request*, PendingSend> sending_;

  const Options options_;
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  evhttp_bound_socket* bound_ = nullptr;  // the listening socket; used on the loop thread after Start
  std::shared_ptr<LoopTasks> tasks_;
  std::unique_ptr<WorkerPool> decode_workers_;
  // Loads and unloads run here, one at a time and off the loop thread (a load can take seconds).
  std::unique_ptr<WorkerPool> model_control_;
  std::unique_ptr<TlsContext> tls_;  // null: plain HTTP
  std::unique_ptr<ConnectionInputs> inputs_;  // large reads and first-byte times; loop thread only
  int port_ = 0;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> stopped_{false};
  std::thread loop_;
};

}  // namespace convoy::http

#endif  // CONVOY_SERVER_HTTP_HTTP_SERVER_H_
