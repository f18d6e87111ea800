#include "server/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace convoy::metrics {
namespace {

constexpr int kRequestTimeoutMs = 2000;
constexpr size_t kMaxRequestBytes = 16 * 1024;

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

bool WriteAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads until the end of the request head; false on timeout, close or an oversized head.
bool ReadRequestHead(int fd, std::string& head) {
  char buffer[2048];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, kRequestTimeoutMs) <= 0) return false;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    head.append(buffer, static_cast<size_t>(n));
    if (head.size() > kMaxRequestBytes) return false;
  }
  return true;
}

std::string Response(int code, const std::string& reason, const std::string& content_type, const std::string& body,
                     bool include_body) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", include_body ? body : "");
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Create(Options options) {
  if (!options.render) return absl::InvalidArgumentError("metrics endpoint needs a render function");
  absl::StatusOr<int> fd = Listen(options.listen_address);
  if (!fd.ok()) return fd.status();
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  getsockname(*fd, reinterpret_cast<sockaddr*>(&bound), &length);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    close(*fd);
    return absl::InternalError(absl::StrCat("metrics endpoint: pipe: ", std::strerror(errno)));
  }
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(options), *fd, wake[0], wake[1], ntohs(bound.sin_port)));
}

MetricsHttpServer::MetricsHttpServer(Options options, int listen_fd, int wake_read_fd, int wake_write_fd, int port)
    : options_(std::move(options)),
      listen_fd_(listen_fd),
      wake_read_fd_(wake_read_fd),
      wake_write_fd_(wake_write_fd),
      port_(port),
      thread_([this] { ServeLoop(); }) {}

MetricsHttpServer::~MetricsHttpServer() {
  const char stop = 1;
  while (write(wake_write_fd_, &stop, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(listen_fd_);
  close(wake_read_fd_);
  close(wake_write_fd_);
}

void MetricsHttpServer::ServeLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ServeConnection(fd);
    close(fd);
  }
}

void MetricsHttpServer::ServeConnection(int fd) {
  std::string head;
  if (!ReadRequestHead(fd, head)) return;
  const std::string request_line = head.substr(0, head.find_first_of("\r\n"));
  std::vector<std::string> parts = absl::StrSplit(request_line, ' ', absl::SkipEmpty());
  if (parts.size() < 2) {
    WriteAll(fd, Response(400, "Bad Request", "text/plain", "bad request line\n", true));
    return;
  }
  const std::string& method = parts[0];
  const std::string path = parts[1].substr(0, parts[1].find('?'));
  if (method != "GET" && method != "HEAD") {
    WriteAll(fd, Response(405, "Method Not Allowed", "text/plain", "only GET and HEAD\n", true));
    return;
  }
  if (path != options_.path) {
    WriteAll(fd, Response(404, "Not Found", "text/plain", absl::StrCat("metrics are at ", options_.path, "\n"), true));
    return;
  }
  WriteAll(fd, Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", options_.render(), method == "GET"));
}

}  // namespace convoy::metrics
