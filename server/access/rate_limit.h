// A per-tenant rate limit on GPU jobs: a token bucket per tenant (the scheduler's tenant,
// server/worker/job_class.h) refilled at --tenant-rate tokens per second up to --tenant-burst; each
// call that queues GPU work takes one token before anything is queued, or is refused with
// RESOURCE_EXHAUSTED.
//
// With a RedisStore the buckets live in Redis (`glimpse:rate:<tenant>`), updated by one Lua
// script on Redis's own clock, so every replica sharing it enforces one limit for the cluster.
// Without one, or while Redis fails, each replica keeps its own buckets with the same rate and
// burst (a replica alone still limits); a fallback is counted and logged (at most every 10 s).
//
// Example:
//   RateLimiter limiter({.rate = 5, .burst = 5}, redis);   // redis may be nullptr
//   limiter.Take("analytics", [](absl::Status s) { /* OK: queue the job; else answer s */ });
#ifndef GLIMPSE_SERVER_ACCESS_RATE_LIMIT_H_
#define GLIMPSE_SERVER_ACCESS_RATE_LIMIT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"

namespace glimpse::server {

class RedisStore;

struct RateLimitOptions {
  double rate = 0;   // tokens (jobs) per second per tenant; 0 = no limit
  double burst = 0;  // the bucket's size; 0 = max(1, rate)
};

// OK, or INVALID_ARGUMENT naming the flag (--tenant-rate, --tenant-burst), its value and limits.
absl::Status CheckRateLimitOptions(const RateLimitOptions& options);

class RateLimiter {
 public:
  // REQUIRES: CheckRateLimitOptions(options) is OK. `redis` (may be nullptr) outlives this.
  RateLimiter(const RateLimitOptions& options, RedisStore* redis);
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  bool enabled() const { return rate_ > 0; }
  double rate() const { return rate_; }
  double burst() const { return burst_; }
  bool shared() const { return redis_ != nullptr; }

  // Takes one of `tenant`'s tokens, then calls `done` with OK, or RESOURCE_EXHAUSTED naming
  // the tenant and the flag. With Redis, `done` runs on Redis's pool; else on this thread.
  void Take(const std::string& tenant, std::function<void(absl::Status)> done);

  // This replica's own bucket: true if `tenant` had a token at `now` (and it is taken).
  bool TakeLocal(const std::string& tenant, std::chrono::steady_clock::time_point now);

  // Decisions made by the local bucket because Redis failed.
  uint64_t fallbacks() const { return fallbacks_.load(); }

 private:
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point at;
  };
  absl::Status Decide(const std::string& tenant, bool allowed) const;
  void FellBack(const absl::Status& why);

  const double rate_, burst_;
  RedisStore* const redis_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
  std::atomic<uint64_t> fallbacks_{0};
  std::atomic<int64_t> last_warn_ns_{INT64_MIN};
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ACCESS_RATE_LIMIT_H_
