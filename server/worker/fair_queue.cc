#include "server/worker/fair_queue.h"

namespace glimpse::server {
namespace {

// Weight of the newest run in the moving average of a method's nanoseconds per pixel.
constexpr double kNewRunWeight = 0.25;

}  // namespace

std::string_view PriorityName(Priority p) {
  return p == Priority::kBatch ? "batch" : "interactive";
}

std::optional<Priority> ParsePriority(std::string_view s) {
  if (s == "interactive") return Priority::kInteractive;
  if (s == "batch") return Priority::kBatch;
  return std::nullopt;
}

std::string_view PolicyName(SchedulerPolicy p) {
  return p == SchedulerPolicy::kFifo ? "fifo" : "fair";
}

std::optional<SchedulerPolicy> ParsePolicy(std::string_view s) {
  if (s == "fair") return SchedulerPolicy::kFair;
  if (s == "fifo") return SchedulerPolicy::kFifo;
  return std::nullopt;
}

std::string_view RefusalName(Refusal r) {
  switch (r) {
    case Refusal::kNone:
      return "none";
    case Refusal::kQueueFull:
      return "queue_full";
    case Refusal::kTenantQueueFull:
      return "tenant_queue_full";
  }
  return "unknown";
}

uint64_t CostModel::Estimate(std::string_view method, uint64_t pixels) const {
  auto it = ns_per_pixel_.find(method);
  const double per_pixel = it != ns_per_pixel_.end() ? it->second : kDefaultNsPerPixel;
  return uint64_t(per_pixel * double(std::max<uint64_t>(pixels, 1)));
}

void CostModel::Observe(std::string_view method, uint64_t pixels, uint64_t ns) {
  const double per_pixel = double(ns) / double(std::max<uint64_t>(pixels, 1));
  auto it = ns_per_pixel_.find(method);
  if (it == ns_per_pixel_.end()) {
    ns_per_pixel_.emplace(std::string(method), per_pixel);
  } else {
    it->second += kNewRunWeight * (per_pixel - it->second);
  }
}

}  // namespace glimpse::server
