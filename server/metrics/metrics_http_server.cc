#include "server/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace convoy::metrics {
namespace {

constexpr size_t kMaxRequestHeaderBytes = 16 * 1024;
constexpr size_t kMaxRequestBodyBytes = 16 * 1024;

absl::Status SocketError(const std::string& what, const std::string& address) {
  return absl::UnavailableError(absl::StrCat("metrics endpoint cannot listen on ", address, ": ", what, ": ",
                                             std::strerror(errno)));
}

// Binds and listens on host:port; returns the socket.
absl::StatusOr<int> Listen(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics listen address '", address, "' is not host:port"));
  }
  std::string host = address.substr(0, colon);
  if (host.empty() || host == "*") host = "0.0.0.0";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    addrinfo hints{}, *found = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("metrics listen host '", host, "' does not resolve"));
    }
    addr.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
    freeaddrinfo(found);
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return SocketError("socket", address);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 16) != 0) {
    absl::Status status = SocketError("bind/listen", address);
    close(fd);
    return status;
  }
  return fd;
}

void Send(evhttp_request* req, int code, const char* reason, const char* content_type, const std::string& body) {
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", content_type);
  evbuffer* out = evbuffer_new();
  if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {  // the length of the page, without the page
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length", std::to_string(body.size()).c_str());
  } else {
    evbuffer_add(out, body.data(), body.size());
  }
  evhttp_send_reply(req, code, reason, out);
  evbuffer_free(out);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Create(Options options) {
  if (!options.render) return absl::InvalidArgumentError("metrics endpoint needs a render function");
  absl::StatusOr<int> fd = Listen(options.listen_address);
  if (!fd.ok()) return fd.status();
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  getsockname(*fd, reinterpret_cast<sockaddr*>(&bound), &length);
  static std::once_flag threads_once;
  std::call_once(threads_once, [] { evthread_use_pthreads(); });
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(std::move(options)));
  server->port_ = ntohs(bound.sin_port);
  server->base_ = event_base_new();
  server->http_ = server->base_ != nullptr ? evhttp_new(server->base_) : nullptr;
  if (server->http_ == nullptr) {
    close(*fd);
    return absl::InternalError("metrics endpoint: libevent could not create an event base");
  }
  evutil_make_socket_nonblocking(*fd);
  if (evhttp_accept_socket_with_handle(server->http_, *fd) == nullptr) {
    close(*fd);
    return SocketError("accept", server->options_.listen_address);
  }
  evhttp_set_allowed_methods(server->http_, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                                EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
  evhttp_set_max_headers_size(server->http_, kMaxRequestHeaderBytes);
  evhttp_set_max_body_size(server->http_, kMaxRequestBodyBytes);
  evhttp_set_timeout(server->http_, server->options_.idle_timeout_seconds);
  evhttp_set_gencb(server->http_, &MetricsHttpServer::OnRequest, server.get());
  server->thread_ = std::thread([base = server->base_] { event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY); });
  return server;
}

MetricsHttpServer::MetricsHttpServer(Options options) : options_(std::move(options)) {}

MetricsHttpServer::~MetricsHttpServer() {
  if (thread_.joinable()) {
    // An active event, not event_base_loopbreak: a break requested before the loop has started would be forgotten
    // when it starts.
    event* stop = event_new(base_, -1, 0, [](evutil_socket_t, short, void* base) {
      event_base_loopbreak(static_cast<event_base*>(base));
    }, base_);
    event_active(stop, EV_TIMEOUT, 0);
    thread_.join();
    event_free(stop);
  }
  if (http_ != nullptr) evhttp_free(http_);  // closes the listening socket and open connections
  if (base_ != nullptr) event_base_free(base_);
}

void MetricsHttpServer::OnRequest(evhttp_request* req, void* self) {
  const auto* server = static_cast<MetricsHttpServer*>(self);
  const evhttp_uri* uri = evhttp_request_get_evhttp_uri(req);
  const char* path = uri != nullptr ? evhttp_uri_get_path(uri) : nullptr;
  if (path == nullptr || server->options_.path != path) {
    return Send(req, 404, "Not Found", "text/plain", absl::StrCat("not found; metrics are at ",
                                                                  server->options_.path, "\n"));
  }
  const evhttp_cmd_type method = evhttp_request_get_command(req);
  if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
    return Send(req, 405, "Method Not Allowed", "text/plain", "use GET\n");
  }
  Send(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", server->options_.render());
}

}  // namespace convoy::metrics
