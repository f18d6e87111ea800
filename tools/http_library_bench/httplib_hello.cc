// The same endpoint on cpp-httplib (a thread pool, blocking I/O per connection), for run.sh.
#include <httplib.h>

#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  httplib::Server server;
  server.set_payload_max_length(64 << 20);
  server.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"live\":true}", "application/json");
  });
  server.Post("/echo_size", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content("{\"bytes\":" + std::to_string(req.body.size()) + "}", "application/json");
  });
  server.listen("127.0.0.1", argc > 1 ? std::atoi(argv[1]) : 18081);
}
