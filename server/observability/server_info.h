// GetServerInfo's answer: the device, the settings, and the usage of the queue, the image store
// and the result buffer, read from the parts that own them.
//
//   v1::ServerInfo info;
//   FillServerInfo(worker, limits, redis, access, rate, uptime, &info);
#ifndef GLIMPSE_SERVER_OBSERVABILITY_SERVER_INFO_H_
#define GLIMPSE_SERVER_OBSERVABILITY_SERVER_INFO_H_

#include <chrono>

#include "glimpse/v1/image_analytics.pb.h"
#include "server/access/access.h"
#include "server/access/rate_limit.h"
#include "server/rpc/limits.h"
#include "server/store/redis_store.h"
#include "server/worker/gpu_worker.h"

namespace glimpse::server {

// `redis`, `access` and `rate` may be null (not configured).
void FillServerInfo(GpuWorker& worker, const ServiceLimits& limits, RedisStore* redis,
                    const Access* access, const RateLimiter* rate,
                    std::chrono::steady_clock::duration uptime, v1::ServerInfo* info);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_OBSERVABILITY_SERVER_INFO_H_
