// A minimal HTTP/1.1 endpoint that serves one text page (the Prometheus exposition) at one path.
//
// Why not prometheus-cpp's Exposer: it runs on civetweb, whose Debian build gives its worker threads fixed 100 KiB
// stacks. glibc carves each thread's static TLS out of that stack, and the CUDA runtime linked statically into the
// server brings a 4 KiB-aligned TLS block, which left civetweb too little stack: the server crashed on the first
// scrape. This endpoint runs on one ordinary thread, answers GET and HEAD of `path` with the page `render()`
// returns (404 for other paths, 405 for other methods), closes each connection after the response, and gives up on a
// client that sends nothing useful within two seconds. Scrapes are served one at a time, which suits Prometheus.
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

namespace convoy::metrics {

class MetricsHttpServer {
 public:
  struct Options {
    std::string listen_address = "0.0.0.0:8002";  // host:port; port 0 takes any free port
    std::string path = "/metrics";
    std::function<std::string()> render;
  };

  // UNAVAILABLE naming the address when it cannot listen; INVALID_ARGUMENT for a malformed address.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Create(Options options);
  // Stops accepting and joins the serving thread.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

 private:
  MetricsHttpServer(Options options, int listen_fd, int wake_read_fd, int wake_write_fd, int port);
  void ServeLoop();
  void ServeConnection(int fd);

  const Options options_;
  const int listen_fd_;
  const int wake_read_fd_;   // the destructor writes to wake_write_fd_ to end ServeLoop
  const int wake_write_fd_;
  const int port_;
  std::thread thread_;
};

}  // namespace convoy::metrics

#endif  // CONVOY_SERVER_METRICS_METRICS_HTTP_SERVER_H_
