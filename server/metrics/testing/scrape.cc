// Test helpers: plain HTTP GET on loopback and a small reader of the Prometheus text format. See scrape.h.
#include "server/metrics/testing/scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace convoy::metrics::testing {
namespace {

absl::StatusOr<std::string> ExchangeOnLoopback(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to 127.0.0.1:", port, ": ", error));
  }
  if (send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::InternalError("short send");
  }
  std::string response;
  char buffer[4096];
  ssize_t received = 0;
  while ((received = recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, received);
  close(fd);
  return response;
}

// "name{a=\"x\",b=\"y\"} 12.5" -> name, labels, value. False for comments and malformed lines.
bool ParseSampleLine(absl::string_view line, std::string* name, std::map<std::string, std::string>* labels,
                     double* value) {
  if (line.empty() || line[0] == '#') return false;
  const size_t brace = line.find('{');
  const size_t space = line.rfind(' ');
  if (space == absl::string_view::npos) return false;
  labels->clear();
  if (brace != absl::string_view::npos && brace < space) {
    *name = std::string(line.substr(0, brace));
    const size_t close_brace = line.rfind('}', space);
    if (close_brace == absl::string_view::npos) return false;
    for (absl::string_view pair : absl::StrSplit(line.substr(brace + 1, close_brace - brace - 1), "\",",
                                                 absl::SkipEmpty())) {
      const size_t equals = pair.find("=\"");
      if (equals == absl::string_view::npos) return false;
      absl::string_view raw_value = pair.substr(equals + 2);
      if (!raw_value.empty() && raw_value.back() == '"') raw_value.remove_suffix(1);
      (*labels)[std::string(pair.substr(0, equals))] = std::string(raw_value);
    }
  } else {
    *name = std::string(line.substr(0, space));
  }
  absl::string_view number = line.substr(space + 1);
  if (number == "+Inf") {
    *value = HUGE_VAL;
    return true;
  }
  return absl::SimpleAtod(number, value);
}

}  // namespace

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  auto response = ExchangeOnLoopback(
      port, absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
  if (!response.ok()) return response.status();
  const size_t header_end = response->find("\r\n\r\n");
  if (header_end == std::string::npos) return absl::DataLossError("no end of HTTP headers in the response");
  const std::string status_line = response->substr(0, response->find("\r\n"));
  if (status_line.find(" 200 ") == std::string::npos) {
    return absl::NotFoundError(absl::StrCat("GET ", path, ": ", status_line));
  }
  return response->substr(header_end + 4);
}

std::optional<double> SampleValue(const std::string& exposition, const std::string& name,
                                  const std::map<std::string, std::string>& labels) {
  std::string line_name;
  std::map<std::string, std::string> line_labels;
  double value = 0;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (ParseSampleLine(line, &line_name, &line_labels, &value) && line_name == name && line_labels == labels) {
      return value;
    }
  }
  return std::nullopt;
}

std::string FamilyType(const std::string& exposition, const std::string& name) {
  const std::string prefix = absl::StrCat("# TYPE ", name, " ");
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (absl::StartsWith(line, prefix)) return std::string(line.substr(prefix.size()));
  }
  return "";
}

}  // namespace convoy::metrics::testing
