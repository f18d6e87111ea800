// The one absl::Status -> HTTP status code conversion of the HTTP/REST edge (the gRPC edge's is
// server/grpc/grpc_status_util.h). It follows google.rpc.Code's documented HTTP mapping: a request the client got
// wrong is a 4xx (INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE 400; NOT_FOUND 404; ...), UNAVAILABLE is 503,
// DEADLINE_EXCEEDED 504, and only a server fault (INTERNAL, UNKNOWN, DATA_LOSS) is 500; those are logged.
#ifndef CONVOY_SERVER_HTTP_HTTP_STATUS_H_
#define CONVOY_SERVER_HTTP_HTTP_STATUS_H_

#include "absl/status/status.h"

namespace convoy::http {

int HttpStatusCode(const absl::Status& status);

// The reason phrase of an HTTP status code ("Bad Request"); "Unknown" for codes Convoy never sends.
const char* HttpReasonPhrase(int code);

}  // namespace convoy::http

#endif  // CONVOY_SERVER_HTTP_HTTP_STATUS_H_
