// The HTTP/1.1 endpoint that serves one text page (the Prometheus exposition) at one path, on libevent's evhttp (the
// library the HTTP/REST edge uses, server/http/; docs/server.md says why).
//
// Why not prometheus-cpp's Exposer: it runs on civetweb, whose Debian build gives its worker threads fixed 100 KiB
// stacks. glibc carves each thread's static TLS out of that stack, and the CUDA runtime linked statically into the
// server brings a 4 KiB-aligned TLS block, which left civetweb too little stack: the server crashed on the first
// scrape. This endpoint's one event loop runs on an ordinary std::thread (the default 8 MiB stack). It answers GET
// and HEAD of `path` (any query) with the page `render()` returns (404 for other paths, 405 for other methods, 400
// for what is not HTTP), serves any number of concurrent scrapers and keeps their connections alive between scrapes;
// a connection idle for `idle_timeout` is closed. Pages are rendered one at a time, on the loop thread.
//
//   auto server = MetricsHttpServer::Create({"0.0.0.0:8002", "/metrics", [&] { return registry.Scrape(); }});
//   int port = (*server)->port();   // the bound port (useful with port 0)
#ifndef CONVOY_SERVER_METRICS_METRICS_HTTP_SERVER_H_
#define CONVOY_SERVER_METRICS_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

struct event_base;
struct evhttp;
struct evhttp_request;

namespace convoy::metrics {

class MetricsHttpServer {
 public:
  struct Options {
    std::string listen_address = "0.0.0.0:8002";  // host:port; port 0 takes any free port
    std::string path = "/metrics";
    std::function<std::string()> render;
    int idle_timeout_seconds = 60;
  };

  // UNAVAILABLE naming the address when it cannot listen; INVALID_ARGUMENT for a malformed address.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Create(Options options);
  // Stops accepting and joins the serving thread.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

 private:
  explicit MetricsHttpServer(Options options);
  static void OnRequest(evhttp_request* req, void* self);

  const Options options_;
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace convoy::metrics

#endif  // CONVOY_SERVER_METRICS_METRICS_HTTP_SERVER_H_
