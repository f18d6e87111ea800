// ConnectionInputs on a real evhttp server and loopback socket: a large body arrives whole and in order through the
// large reads, the request's start is its first byte (stepped on an injected clock), and records go with their
// connections.
#include "server/http/connection_input.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace convoy::http {
namespace {

struct Server {
  event_base* base = nullptr;
  evhttp* http = nullptr;
  int port = 0;
  ConnectionInputs* inputs = nullptr;
  bool plain = true;
  std::string body;                      // of the last request
  std::optional<absl::Time> start;       // of the last request
  int requests = 0;
};

bufferevent* NewConnection(event_base* base, void* arg) {
  auto* server = static_cast<Server*>(arg);
  bufferevent* bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
  server->inputs->Watch(bev, server->plain);
  return bev;
}

void OnRequest(evhttp_request* req, void* arg) {
  auto* server = static_cast<Server*>(arg);
  server->start = server->inputs->TakeRequestStart(evhttp_connection_get_bufferevent(evhttp_request_get_connection(req)));
  evbuffer* in = evhttp_request_get_input_buffer(req);
  server->body.resize(evbuffer_get_length(in));
  evbuffer_copyout(in, server->body.data(), server->body.size());
  ++server->requests;
  evhttp_send_reply(req, 200, "OK", nullptr);
  event_base_loopbreak(server->base);
}

class ConnectionInputTest : public ::testing::Test {
 protected:
  // The inputs live in the fixture: evhttp_free in TearDown closes the connections still open, which reach them.
  ConnectionInputs& StartServer(const ConnectionInputs::Options& options, bool plain) {
    inputs_ = std::make_unique<ConnectionInputs>(options);
    server_.inputs = inputs_.get();
    server_.plain = plain;
    server_.base = event_base_new();
    server_.http = evhttp_new(server_.base);
    evhttp_set_max_body_size(server_.http, 64 << 20);
    evhttp_set_bevcb(server_.http, &NewConnection, &server_);
    evhttp_set_gencb(server_.http, &OnRequest, &server_);
    evhttp_bound_socket* bound = evhttp_bind_socket_with_handle(server_.http, "127.0.0.1", 0);
    EXPECT_NE(bound, nullptr);
    sockaddr_in address{};
    socklen_t length = sizeof(address);
    if (bound != nullptr) getsockname(evhttp_bound_socket_get_fd(bound), reinterpret_cast<sockaddr*>(&address), &length);
    server_.port = ntohs(address.sin_port);
    return *inputs_;
  }
  void TearDown() override {
    if (server_.http != nullptr) evhttp_free(server_.http);
    if (server_.base != nullptr) event_base_free(server_.base);
  }
  int Connect() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(server_.port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    return fd;
  }
  static void WriteAll(int fd, absl::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = write(fd, bytes.data(), bytes.size());
      ASSERT_GT(n, 0);
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  static std::string RandomBody(size_t size) {
    std::mt19937 rng(std::random_device{}());
    std::string body(size, '\0');
    for (char& c : body) c = static_cast<char>(rng());
    return body;
  }
  std::unique_ptr<ConnectionInputs> inputs_;
  Server server_;
};

// The client sends the head and a little body, waits until the server saw the first byte, steps the clock by 7 s
// and sends the rest: the request's start is the first byte's time, and the body is whole and in order.
TEST_F(ConnectionInputTest, LargeBodyArrivesWholeAndStartsAtItsFirstByte) {
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  std::atomic<int64_t> now_s{absl::ToUnixSeconds(t0)};
  std::atomic<int> clock_calls{0};
  ConnectionInputs::Options options;
  options.clock = [&] {
    ++clock_calls;
    return absl::FromUnixSeconds(now_s.load());
  };
  ConnectionInputs& inputs = StartServer(options, /*plain=*/true);
  const std::string body = RandomBody(602112 + std::random_device{}() % 4096);
  const int fd = Connect();
  std::thread client([&] {
    WriteAll(fd, absl::StrCat("POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(), "\r\n\r\n",
                              body.substr(0, 1000)));
    while (clock_calls.load() < 2) usleep(1000);  // Watch, then the first byte
    now_s += 7;
    WriteAll(fd, absl::string_view(body).substr(1000));
  });
  event_base_dispatch(server_.base);
  client.join();
  ASSERT_EQ(server_.requests, 1);
  EXPECT_TRUE(server_.body == body) << "body of " << server_.body.size() << " bytes differs from the "
                                    << body.size() << " sent";
  ASSERT_TRUE(server_.start.has_value());
  EXPECT_EQ(*server_.start, t0);
  // libevent alone reads 4 KiB per loop iteration; the large reads took most of the body.
  EXPECT_GT(inputs.extra_bytes_read(), body.size() / 2);
  EXPECT_EQ(inputs.watched(), 1u);
  close(fd);
  // evhttp sees the close on its next read and frees the connection: the record goes with it.
  for (int i = 0; i < 100 && inputs.watched() > 0; ++i) event_base_loop(server_.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
  EXPECT_EQ(inputs.watched(), 0u);
}

// Without large reads (a TLS connection's socket) the body still arrives whole, libevent reading it alone.
TEST_F(ConnectionInputTest, WithoutLargeReadsLibeventReadsTheBodyAlone) {
  ConnectionInputs& inputs = StartServer(ConnectionInputs::Options{}, /*plain=*/false);
  const std::string body = RandomBody(100000 + std::random_device{}() % 4096);
  const int fd = Connect();
  std::thread client([&] {
    WriteAll(fd, absl::StrCat("POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(), "\r\n\r\n", body));
  });
  event_base_dispatch(server_.base);
  client.join();
  ASSERT_EQ(server_.requests, 1);
  EXPECT_TRUE(server_.body == body);
  EXPECT_EQ(inputs.extra_bytes_read(), 0u);
  EXPECT_TRUE(server_.start.has_value());
  close(fd);
}

// Two requests on one keep-alive connection: each has its own start.
TEST_F(ConnectionInputTest, EachRequestOnAConnectionHasItsOwnStart) {
  std::atomic<int64_t> now_s{1000};
  ConnectionInputs::Options options;
  options.clock = [&] { return absl::FromUnixSeconds(now_s.load()); };
  StartServer(options, /*plain=*/true);
  const int fd = Connect();
  const std::string body = RandomBody(20000);
  const std::string request = absl::StrCat("POST /infer HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                                           "\r\n\r\n", body);
  WriteAll(fd, request);
  event_base_dispatch(server_.base);
  ASSERT_EQ(server_.requests, 1);
  EXPECT_EQ(server_.start, absl::FromUnixSeconds(1000));
  now_s = 2000;  // the reply goes out on the next loop iteration, with the next request read
  WriteAll(fd, request);
  event_base_dispatch(server_.base);
  ASSERT_EQ(server_.requests, 2);
  EXPECT_EQ(server_.start, absl::FromUnixSeconds(2000));
  EXPECT_TRUE(server_.body == body);
  close(fd);
}

}  // namespace
}  // namespace convoy::http
