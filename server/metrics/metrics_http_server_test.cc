#include "server/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::metrics {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads one response from `fd`: its head, then Content-Length bytes of body (none for a HEAD request), or up to
// the close when there is no Content-Length. The connection may stay open (keep-alive).
std::string ReadResponse(int fd, bool head_request) {
  std::string answer;
  char buffer[4096];
  size_t end = std::string::npos;
  size_t wanted = std::string::npos;
  while (true) {
    if (end == std::string::npos && (end = answer.find("\r\n\r\n")) != std::string::npos) {
      end += 4;
      const size_t at = answer.find("Content-Length: ");
      wanted = head_request ? 0 : at < end ? std::stoul(answer.substr(at + 16)) : std::string::npos;
    }
    if (end != std::string::npos && wanted != std::string::npos && answer.size() >= end + wanted) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  return answer;
}

// Sends `request` raw on a new connection and returns the one response.
std::string Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return "connect failed";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer = ReadResponse(fd, request.rfind("HEAD ", 0) == 0);
  close(fd);
  return answer;
}

TEST(MetricsHttpServerTest, ServesThePageAtItsPathOnly) {
  std::atomic<int> renders{0};
  const std::string page = "convoy_test_metric " + std::to_string(std::random_device{}()) + "\n";
  CONVOY_ASSERT_OK_AND_ASSIGN(auto server, MetricsHttpServer::Create({"127.0.0.1:0", "/metrics", [&] {
                                                                         renders.fetch_add(1);
                                                                         return page;
                                                                       }}));
  ASSERT_GT(server->port(), 0);
  const std::string ok = Exchange(server->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(ok, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(ok, HasSubstr("Content-Length: " + std::to_string(page.size()) + "\r\n"));
  EXPECT_EQ(ok.substr(ok.size() - page.size()), page);
  EXPECT_THAT(Exchange(server->port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n"), HasSubstr(page));
  const std::string head = Exchange(server->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK"));
  EXPECT_EQ(head.find(page), std::string::npos) << "HEAD must not send the body";
  EXPECT_THAT(Exchange(server->port(), "GET /other HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 404"));
  EXPECT_THAT(Exchange(server->port(), "POST /metrics HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(Exchange(server->port(), "nonsense\r\n\r\n"), StartsWith("HTTP/1.1 400"));
  EXPECT_EQ(renders.load(), 3);
}

TEST(MetricsHttpServerTest, ConcurrentScrapersAllGetThePage) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto server,
                              MetricsHttpServer::Create({"127.0.0.1:0", "/metrics", [] { return std::string(100000, 'x'); }}));
  std::vector<std::thread> clients;
  std::atomic<int> complete{0};
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      const std::string answer = Exchange(server->port(), "GET /metrics HTTP/1.1\r\n\r\n");
      if (answer.size() > 100000 && answer.find("200 OK") != std::string::npos) complete.fetch_add(1);
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(complete.load(), 8);
}

TEST(MetricsHttpServerTest, OneConnectionServesScrapeAfterScrape) {
  std::atomic<int> renders{0};
  CONVOY_ASSERT_OK_AND_ASSIGN(auto server, MetricsHttpServer::Create({"127.0.0.1:0", "/metrics", [&] {
                                                                         return "scrape " + std::to_string(++renders) +
                                                                                "\n";
                                                                       }}));
  const int fd = Connect(server->port());
  ASSERT_GE(fd, 0);
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int i = 1; i <= 5; ++i) {
    send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    const std::string answer = ReadResponse(fd, false);
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n"));
    EXPECT_THAT(answer, HasSubstr("scrape " + std::to_string(i) + "\n"));
  }
  close(fd);
}

TEST(MetricsHttpServerTest, SilentClientDoesNotBlockOthersForever) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto server,
                              MetricsHttpServer::Create({"127.0.0.1:0", "/metrics", [] { return std::string("m 1\n"); }}));
  const int idle = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(idle, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_THAT(Exchange(server->port(), "GET /metrics HTTP/1.1\r\n\r\n"), HasSubstr("m 1"));
  close(idle);
}

TEST(MetricsHttpServerTest, BadAddressesFailClearly) {
  auto render = [] { return std::string(); };
  EXPECT_THAT(MetricsHttpServer::Create({"nonsense", "/metrics", render}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not host:port")));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto taken, MetricsHttpServer::Create({"127.0.0.1:0", "/metrics", render}));
  EXPECT_THAT(MetricsHttpServer::Create({"127.0.0.1:" + std::to_string(taken->port()), "/metrics", render}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot listen on 127.0.0.1:")));
}

}  // namespace
}  // namespace convoy::metrics
