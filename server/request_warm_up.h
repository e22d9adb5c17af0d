// The request path warmed before a server reports SERVING: one call of each analysis, through
// gRPC, on images of a common size. The start-up's kernel warm-up (WorkerOptions::warm_up) builds
// and runs every GPU program; what a new server's first calls still paid after it (2-3x a warm
// call's server time, a few milliseconds) was the rest of the path's first use: memory touched for
// the first time on the GL thread, gRPC's first calls, lazily built tables. This is the replay of
// sample requests that model servers run at load for the same reason.
//
// The calls go through a server of their own that listens on no port (an in-process channel), with
// its own ImageAnalyticsService over the same GpuWorker: no access control or rate limit is
// involved, the calls write no log line and count in no per-call metric (CallRecording::kNone;
// their GPU jobs count in the worker's: ServerInfo.jobs_run, glimpse_jobs_total, and the
// scheduler's under the tenant kWarmUpClientKey), no image is stored, and nothing of it is
// reachable from outside.
#ifndef GLIMPSE_SERVER_REQUEST_WARM_UP_H_
#define GLIMPSE_SERVER_REQUEST_WARM_UP_H_

#include <chrono>
#include <string>
#include <vector>

#include "server/rpc/limits.h"
#include "server/worker/gpu_worker.h"

namespace glimpse::server {

// The scheduling key (metadata glimpse-client-key, server/worker/job_class.h) of the sample calls:
// the tenant label of their jobs in the scheduler's metrics.
inline constexpr char kWarmUpClientKey[] = "glimpse-warm-up";

struct RequestWarmUp {
  std::chrono::nanoseconds took{0};
  int calls = 0;                     // sample calls made
  std::vector<std::string> refused;  // each refused call and why, for the start-up's log
};

// Runs the calls, every one whatever the others did: the server's own limits may refuse a sample
// (a small --result-buffer-bytes), which costs that path its warm-up and nothing else. Samples
// over limits.max_image_pixels are not sent.
RequestWarmUp WarmRequestPath(GpuWorker& worker, const ServiceLimits& limits);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_REQUEST_WARM_UP_H_
