// Which tenant a call's GPU jobs are charged to, at what weight and priority
// (server/worker/fair_queue.h): read from the admitted tenant and the call's metadata.
//
//   tenant (access control on)      the tenant; glimpse-client-key is ignored
//   access control off              metadata `glimpse-client-key` if given, else the peer's host
//   metadata `glimpse-priority`     interactive (the default) | batch: order within the tenant
#ifndef GLIMPSE_SERVER_WORKER_JOB_CLASS_H_
#define GLIMPSE_SERVER_WORKER_JOB_CLASS_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/worker/fair_queue.h"

namespace glimpse::server {

inline constexpr char kPriorityMetadata[] = "glimpse-priority";
inline constexpr char kClientKeyMetadata[] = "glimpse-client-key";

// The host part of a gRPC peer string: "ipv4:10.0.0.1:5000" -> "10.0.0.1", "ipv6:[::1]:5000"
// -> "::1", "unix:/run/g.sock" -> "/run/g.sock"; anything else as it is ("" -> "unknown").
std::string PeerHost(std::string_view peer);

// The call's job class. `tenant` is the admitted tenant ("" when access control is off) and
// `weight` its weight. INVALID_ARGUMENT for a bad glimpse-priority or glimpse-client-key value.
absl::StatusOr<JobClass> ClassifyCall(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, std::string_view peer,
    const std::string& tenant, double weight);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_WORKER_JOB_CLASS_H_
