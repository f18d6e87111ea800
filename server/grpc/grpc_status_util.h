// The one conversion from absl::Status (what all of Convoy returns) to grpc::Status (what the wire carries). The
// canonical codes are the same numbers; INTERNAL and UNKNOWN errors are also logged here with their cause, since
// the client only sees the message.
#ifndef CONVOY_SERVER_GRPC_GRPC_STATUS_UTIL_H_
#define CONVOY_SERVER_GRPC_GRPC_STATUS_UTIL_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace convoy::grpc_server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_GRPC_STATUS_UTIL_H_
