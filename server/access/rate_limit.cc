#include "server/access/rate_limit.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/statusor.h"
#include "server/observability/metrics.h"
#include "server/rpc/status_util.h"
#include "server/store/redis_store.h"

namespace glimpse::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr double kMaxRate = 1e6;
constexpr double kMaxBurst = 1e9;
// Past this many local buckets, full ones (indistinguishable from absent ones) are dropped.
constexpr size_t kSweepAbove = 4096;
constexpr int64_t kWarnEveryNs = 10'000'000'000;

}  // namespace

absl::Status CheckRateLimitOptions(const RateLimitOptions& o) {
  if (!std::isfinite(o.rate) || o.rate < 0 || o.rate > kMaxRate) {
    return absl::InvalidArgumentError(fmt::format(
        "--tenant-rate must be a number of jobs per second in [0, {}] (0 = no limit), got {}",
        kMaxRate, o.rate));
  }
  if (!std::isfinite(o.burst) || (o.burst != 0 && (o.burst < 1 || o.burst > kMaxBurst))) {
    return absl::InvalidArgumentError(
        fmt::format("--tenant-burst must be 0 (= max(1, --tenant-rate)) or in [1, {}] (a job "
                    "takes one token), got {}",
                    kMaxBurst, o.burst));
  }
  if (o.burst != 0 && o.rate == 0) {
    return absl::InvalidArgumentError(fmt::format(
        "--tenant-burst={} needs --tenant-rate above 0 (--tenant-rate=0 means no limit)", o.burst));
  }
  return absl::OkStatus();
}

RateLimiter::RateLimiter(const RateLimitOptions& options, RedisStore* redis)
    : rate_(options.rate),
      burst_(options.burst != 0 ? options.burst : std::max(1.0, options.rate)),
      redis_(redis) {}

bool RateLimiter::TakeLocal(const std::string& tenant, SteadyClock::time_point now) {
  std::lock_guard lock(mu_);
  if (buckets_.size() > kSweepAbove) {
    std::erase_if(buckets_, [&](const auto& kv) {
      const double s = std::chrono::duration<double>(now - kv.second.at).count();
      return kv.second.tokens + s * rate_ >= burst_;
    });
  }
  auto [it, fresh] = buckets_.try_emplace(tenant, Bucket{burst_, now});
  Bucket& b = it->second;
  if (!fresh && now > b.at) {
    const double s = std::chrono::duration<double>(now - b.at).count();
    b.tokens = std::min(burst_, b.tokens + s * rate_);
    b.at = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

absl::Status RateLimiter::Decide(const std::string& tenant, bool allowed) const {
  if (allowed) return absl::OkStatus();
  RecordTenantRefused(tenant, "rate");
  return absl::ResourceExhaustedError(
      fmt::format("tenant \"{}\" is over --tenant-rate={} jobs/s (burst {}); retry later", tenant,
                  rate_, burst_));
}

void RateLimiter::FellBack(const absl::Status& why) {
  fallbacks_.fetch_add(1);
  RecordRateLimitFallback();
  const int64_t now = SteadyClock::now().time_since_epoch().count();
  int64_t last = last_warn_ns_.load();
  if ((last == INT64_MIN || now - last >= kWarnEveryNs) &&
      last_warn_ns_.compare_exchange_strong(last, now)) {
    spdlog::warn("--tenant-rate: this replica's own buckets decide while Redis fails ({})",
                 MessageOf(why));
  }
}

void RateLimiter::Take(const std::string& tenant, std::function<void(absl::Status)> done) {
  if (!enabled()) return done(absl::OkStatus());
  if (redis_ == nullptr) return done(Decide(tenant, TakeLocal(tenant, SteadyClock::now())));
  // A round trip to Redis: on its pool, never on gRPC's threads.
  redis_->pool().Post([this, tenant, done = std::move(done)] {
    absl::StatusOr<bool> shared =
        redis_->reachable() ? redis_->TakeRateToken(tenant, rate_, burst_)
                            : absl::UnavailableError("Redis unreachable at the last health check");
    if (shared.ok()) return done(Decide(tenant, *shared));
    FellBack(shared.status());
    done(Decide(tenant, TakeLocal(tenant, SteadyClock::now())));
  });
}

}  // namespace glimpse::server
