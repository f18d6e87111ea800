// ConnectionInputs: what the HTTP server adds to each accepted connection's input, where libevent 2.1's evhttp
// offers no hook between accepting a connection and handing over a complete request (evhttp_set_newreqcb is 2.2's):
//
//  - Large reads. libevent 2.1 reads a socket at most 4 KiB per call (EVBUFFER_MAX_READ is fixed in 2.1; 2.2 added
//    evbuffer_set_max_read, and bufferevent_set_max_single_read does not lift it), one call per event-loop
//    iteration: a 588 KiB body took ~147 iterations of epoll, FIONREAD and readv. When the socket's bufferevent has
//    added bytes to the connection's input buffer, the callback here reads what else the socket already holds (up
//    to `max_read_bytes` per callback) straight into the same buffer, so evhttp sees the body in a few pieces. Only
//    for a plain socket: a TLS connection's socket carries ciphertext, which its OpenSSL bufferevent reads itself.
//  - The request's first byte. The time the first bytes of a request arrived on its connection, so the server's
//    request clock starts there and the `receive` phase (first byte to complete body) is measured. A request whose
//    bytes arrived with the previous one's (pipelining) starts when the previous one was handed over.
//
// Everything runs on the event loop thread. Records are keyed by the connection's input buffer and dropped when
// evhttp closes the connection (its close callback, registered at the first byte); a record whose connection never
// sent a byte is dropped after `forget_silent_after` (evhttp closes such a connection at its idle timeout; one that
// is still open then just loses the two services above).
//
//   inputs.Watch(bev, /*plain_socket=*/true);              // in evhttp's bufferevent callback
//   std::optional<absl::Time> start = inputs.TakeRequestStart(bev);   // in the request callback
#ifndef CONVOY_SERVER_HTTP_CONNECTION_INPUT_H_
#define CONVOY_SERVER_HTTP_CONNECTION_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>

#include "absl/time/clock.h"
#include "absl/time/time.h"

struct bufferevent;
struct evbuffer;
struct evbuffer_cb_info;
struct evhttp_connection;

namespace convoy::http {

class ConnectionInputs {
 public:
  struct Options {
    // The most bytes one input callback reads beyond libevent's own read. Larger takes a large body in fewer loop
    // iterations; it bounds how long one connection holds the loop thread (1 MiB: ~0.1 ms of copying).
    size_t max_read_bytes = 1u << 20;
    // A connection that has sent nothing for this long is forgotten (see above).
    absl::Duration forget_silent_after = absl::Minutes(5);
    std::function<absl::Time()> clock = [] { return absl::Now(); };  // injectable for tests
  };
  explicit ConnectionInputs(const Options& options) : options_(options) {}
  ConnectionInputs(const ConnectionInputs&) = delete;
  ConnectionInputs& operator=(const ConnectionInputs&) = delete;

  // Starts watching `connection`'s input. `plain_socket`: large reads (the socket may be set later).
  void Watch(bufferevent* connection, bool plain_socket);

  // When the request just completed on `connection` began to arrive, and re-arms for the next request; nullopt for
  // a connection not watched (or forgotten).
  std::optional<absl::Time> TakeRequestStart(bufferevent* connection);

  // Bytes read by the large reads (tests and diagnostics).
  uint64_t extra_bytes_read() const { return extra_bytes_read_; }
  size_t watched() const { return connections_.size(); }

 private:
  struct Connection {
    bufferevent* bev = nullptr;
    bool plain_socket = false;
    bool reading = false;          // inside our own read (its bytes call the input callback again)
    bool close_registered = false;
    absl::Time watched_at;
    std::optional<absl::Time> first_byte;
  };
  static void OnInput(evbuffer* input, const evbuffer_cb_info* info, void* self);
  static void OnClose(evhttp_connection* connection, void* self);
  void ReadMore(evbuffer* input, Connection& connection);
  void ForgetSilent(absl::Time now);

  const Options options_;
  std::unordered_map<const evbuffer*, Connection> connections_;
  uint64_t extra_bytes_read_ = 0;
  absl::Time last_sweep_ = absl::InfinitePast();
};

}  // namespace convoy::http

#endif  // CONVOY_SERVER_HTTP_CONNECTION_INPUT_H_
