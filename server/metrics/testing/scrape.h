// Test helpers for metrics: fetch a page over plain HTTP from a loopback port, and read sample values out of the
// Prometheus text format.
//
//   CONVOY_ASSERT_OK_AND_ASSIGN(std::string page, HttpGet(port, "/metrics"));
//   std::optional<double> ok = SampleValue(page, "nv_inference_request_success", {{"model", "m"}, {"version", "1"}});
#ifndef CONVOY_SERVER_METRICS_TESTING_SCRAPE_H_
#define CONVOY_SERVER_METRICS_TESTING_SCRAPE_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace convoy::metrics::testing {

// GET http://127.0.0.1:<port><path> (HTTP/1.0); the body when the status is 200, else an error naming the status.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

// The value of the sample `name` whose labels are exactly `labels` (in any order); nullopt when absent.
std::optional<double> SampleValue(const std::string& exposition, const std::string& name,
                                  const std::map<std::string, std::string>& labels);

// The `# TYPE` of metric family `name` ("counter", "gauge", "histogram", ...); empty when absent.
std::string FamilyType(const std::string& exposition, const std::string& name);

}  // namespace convoy::metrics::testing

#endif  // CONVOY_SERVER_METRICS_TESTING_SCRAPE_H_
