#include "server/grpc/grpc_status_util.h"

#include <cstdio>
#include <string>

namespace convoy::grpc_server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  if (status.code() == absl::StatusCode::kInternal || status.code() == absl::StatusCode::kUnknown) {
    std::fprintf(stderr, "level=error event=internal_error status=\"%s\"\n", status.ToString().c_str());
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace convoy::grpc_server
