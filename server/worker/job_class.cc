#include "server/worker/job_class.h"

#include "absl/status/status.h"
#include "common/str.h"
#include "server/access/access.h"

namespace glimpse::server {
namespace {

// The one value of metadata `key`; nullopt when absent, an error when sent more than once.
absl::StatusOr<std::optional<std::string_view>> OneValue(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, std::string_view key) {
  auto [first, last] = metadata.equal_range(grpc::string_ref(key.data(), key.size()));
  if (first == last) return std::nullopt;
  if (std::next(first) != last) {
    return absl::InvalidArgumentError(
        StrCat("metadata ", key, " must be sent at most once, got it more than once"));
  }
  return std::string_view(first->second.data(), first->second.size());
}

// At most this much of a bad value is quoted back.
std::string Quote(std::string_view v) {
  constexpr size_t kMax = 64;
  return StrCat("\"", v.substr(0, kMax), v.size() > kMax ? "...\"" : "\"");
}

}  // namespace

std::string PeerHost(std::string_view peer) {
  if (peer.empty()) return "unknown";
  for (std::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (peer.substr(0, scheme.size()) != scheme) continue;
    std::string_view rest = peer.substr(scheme.size());
    // gRPC writes the brackets of an IPv6 address as they are or %-escaped.
    for (auto [open, close] :
         {std::pair<std::string_view, std::string_view>{"[", "]"}, {"%5B", "%5D"}}) {
      if (rest.substr(0, open.size()) == open) {
        const size_t end = rest.find(close);
        if (end != std::string_view::npos)
          return std::string(rest.substr(open.size(), end - open.size()));
      }
    }
    const size_t colon = rest.rfind(':');
    return std::string(colon == std::string_view::npos ? rest : rest.substr(0, colon));
  }
  if (peer.substr(0, 5) == "unix:") return std::string(peer.substr(5));
  return std::string(peer);
}

absl::StatusOr<JobClass> ClassifyCall(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, std::string_view peer,
    const std::string& tenant, double weight) {
  JobClass c;
  c.weight = weight;
  absl::StatusOr<std::optional<std::string_view>> priority = OneValue(metadata, kPriorityMetadata);
  if (!priority.ok()) return priority.status();
  if (*priority) {
    std::optional<Priority> p = ParsePriority(**priority);
    if (!p) {
      return absl::InvalidArgumentError(StrCat("metadata ", kPriorityMetadata,
                                               " must be interactive or batch, got ",
                                               Quote(**priority)));
    }
    c.priority = *p;
  }
  if (!tenant.empty()) {
    c.tenant = tenant;
    return c;
  }
  absl::StatusOr<std::optional<std::string_view>> key = OneValue(metadata, kClientKeyMetadata);
  if (!key.ok()) return key.status();
  if (*key) {
    if (!IsTenantName(**key)) {
      return absl::InvalidArgumentError(StrCat("metadata ", kClientKeyMetadata,
                                               " must be 1 to 64 of A-Z a-z 0-9 . _ -, got ",
                                               Quote(**key)));
    }
    c.tenant = std::string(**key);
    return c;
  }
  c.tenant = PeerHost(peer);
  return c;
}

}  // namespace glimpse::server
