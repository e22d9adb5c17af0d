// The one place where absl::Status becomes grpc::Status.
//
//   absl::Status s = Annotate(ctx.status(), "opening the GL context");  // "opening ...: <message>"
//   grpc::Status answer = ToGrpcStatus(s);  // same code, same message
//   spdlog::warn("{}: {}", GrpcCodeName(answer.error_code()), MessageOf(s));
#ifndef GLIMPSE_SERVER_RPC_STATUS_UTIL_H_
#define GLIMPSE_SERVER_RPC_STATUS_UTIL_H_

#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace glimpse::server {

// Same code (absl and gRPC share the canonical numbering), same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The status's message as a std::string_view (Debian's Abseil has its own string_view).
inline std::string_view MessageOf(const absl::Status& status) {
  return {status.message().data(), status.message().size()};
}

// The same status with "context: " before its message.
absl::Status Annotate(const absl::Status& status, std::string_view context);

// "INVALID_ARGUMENT" etc., for logs.
std::string GrpcCodeName(grpc::StatusCode code);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_RPC_STATUS_UTIL_H_
