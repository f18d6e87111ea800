#include "server/http/connection_input.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <sys/ioctl.h>
#include <sys/uio.h>

#include <algorithm>

namespace convoy::http {

void ConnectionInputs::Watch(bufferevent* connection, bool plain_socket) {
  const absl::Time now = options_.clock();
  ForgetSilent(now);
  evbuffer* input = bufferevent_get_input(connection);
  // A new connection's input may reuse the address of a closed one's whose record was not dropped: replace it.
  Connection& record = connections_[input];
  record = Connection();
  record.bev = connection;
  record.plain_socket = plain_socket;
  record.watched_at = now;
  evbuffer_add_cb(input, &ConnectionInputs::OnInput, this);
}

std::optional<absl::Time> ConnectionInputs::TakeRequestStart(bufferevent* connection) {
  evbuffer* input = bufferevent_get_input(connection);
  auto it = connections_.find(input);
  if (it == connections_.end() || it->second.bev != connection) return std::nullopt;
  std::optional<absl::Time> start = it->second.first_byte;
  // Bytes of the next request already here (pipelined) start it now.
  it->second.first_byte.reset();
  if (evbuffer_get_length(input) > 0) it->second.first_byte = options_.clock();
  return start;
}

void ConnectionInputs::OnInput(evbuffer* input, const evbuffer_cb_info* info, void* self) {
  auto* inputs = static_cast<ConnectionInputs*>(self);
  if (info->n_added == 0) return;
  auto it = inputs->connections_.find(input);
  if (it == inputs->connections_.end()) return;  // forgotten: no large reads, no first byte
  Connection& connection = it->second;
  if (connection.reading) return;
  if (!connection.first_byte.has_value()) connection.first_byte = inputs->options_.clock();
  if (!connection.close_registered) {
    // evhttp's callbacks on the bufferevent carry its connection: drop the record when it closes.
    bufferevent_data_cb read_cb = nullptr, write_cb = nullptr;
    bufferevent_event_cb event_cb = nullptr;
    void* evcon = nullptr;
    bufferevent_getcb(connection.bev, &read_cb, &write_cb, &event_cb, &evcon);
    if (evcon != nullptr) {
      evhttp_connection_set_closecb(static_cast<evhttp_connection*>(evcon), &ConnectionInputs::OnClose, self);
      connection.close_registered = true;
    }
  }
  if (connection.plain_socket) inputs->ReadMore(input, connection);
}

// Reads what the socket holds into `input` (whose end libevent unfroze for its own read, which called us).
void ConnectionInputs::ReadMore(evbuffer* input, Connection& connection) {
  const evutil_socket_t fd = bufferevent_getfd(connection.bev);
  if (fd < 0) return;
  connection.reading = true;
  size_t budget = options_.max_read_bytes;
  while (budget > 0) {
    int available = 0;
    if (ioctl(fd, FIONREAD, &available) != 0 || available <= 0) break;
    const size_t want = std::min(budget, static_cast<size_t>(available));
    evbuffer_iovec space[2];
    const int pieces = evbuffer_reserve_space(input, static_cast<ev_ssize_t>(want), space, 2);
    if (pieces <= 0) break;  // the buffer's end is frozen (not called from libevent's read): leave it
    iovec vectors[2];
    size_t reserved = 0;
    for (int i = 0; i < pieces; ++i) {
      space[i].iov_len = std::min(space[i].iov_len, want - reserved);
      vectors[i] = {space[i].iov_base, space[i].iov_len};
      reserved += space[i].iov_len;
    }
    const ssize_t got = readv(fd, vectors, pieces);
    if (got <= 0) {  // EAGAIN, an error or the end: libevent's next read sees it
      evbuffer_commit_space(input, space, 0);
      break;
    }
    size_t left = static_cast<size_t>(got);
    int used = 0;
    for (; used < pieces && left > 0; ++used) {
      space[used].iov_len = std::min(space[used].iov_len, left);
      left -= space[used].iov_len;
    }
    evbuffer_commit_space(input, space, used);
    extra_bytes_read_ += static_cast<uint64_t>(got);
    budget -= static_cast<size_t>(got);
    if (static_cast<size_t>(got) < reserved) break;
  }
  connection.reading = false;
}

void ConnectionInputs::OnClose(evhttp_connection* connection, void* self) {
  auto* inputs = static_cast<ConnectionInputs*>(self);
  bufferevent* bev = evhttp_connection_get_bufferevent(connection);
  if (bev == nullptr) return;
  evbuffer* input = bufferevent_get_input(bev);
  auto it = inputs->connections_.find(input);
  if (it == inputs->connections_.end() || it->second.bev != bev) return;
  evbuffer_remove_cb(input, &ConnectionInputs::OnInput, self);
  inputs->connections_.erase(it);
}

// Drops, at most once a minute, the records of connections that never sent a byte within forget_silent_after.
void ConnectionInputs::ForgetSilent(absl::Time now) {
  if (now - last_sweep_ < absl::Minutes(1)) return;
  last_sweep_ = now;
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!it->second.close_registered && now - it->second.watched_at > options_.forget_silent_after) {
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace convoy::http
