// A trivial KServe-shaped endpoint on libevent's evhttp (one event loop thread), for tools/http_library_bench/run.sh.
// GET /v2/health/live answers {"live":true}; POST /echo_size answers the body's byte count.
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include <cstdio>
#include <cstdlib>
#include <string>

static void Handle(evhttp_request* req, void*) {
  evbuffer* out = evbuffer_new();
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
  if (evhttp_request_get_command(req) == EVHTTP_REQ_POST) {
    const size_t n = evbuffer_get_length(evhttp_request_get_input_buffer(req));
    evbuffer_pullup(evhttp_request_get_input_buffer(req), -1);
    evbuffer_add_printf(out, "{\"bytes\":%zu}", n);
  } else {
    evbuffer_add_printf(out, "{\"live\":true}");
  }
  evhttp_send_reply(req, 200, "OK", out);
  evbuffer_free(out);
}

int main(int argc, char** argv) {
  event_base* base = event_base_new();
  evhttp* http = evhttp_new(base);
  evhttp_set_max_body_size(http, 64 << 20);
  evhttp_set_gencb(http, Handle, nullptr);
  if (evhttp_bind_socket(http, "127.0.0.1", argc > 1 ? std::atoi(argv[1]) : 18080) != 0) return 1;
  event_base_dispatch(base);
}
