// Prometheus metrics of the server (prometheus-cpp), served over HTTP at /metrics.
//
// Counters and histograms of calls live in one process-wide registry that CallRecord::Log feeds
// (a few map look-ups per call, so it is always on); message bytes are counted by a gRPC server
// interceptor; queue, job and store figures are read from the server only when Prometheus
// scrapes, through a callback, so no other code has to report them. The README lists every
// metric.
//
//   RecordCall({.method = "Histogram", .code = grpc::StatusCode::OK, .analysis = "histogram",
//               .variant = "private_array", .gpu_ns = gpu_ns, .elapsed_ns = elapsed_ns});
//   absl::StatusOr<std::unique_ptr<MetricsEndpoint>> metrics = MetricsEndpoint::Start(
//       "0.0.0.0:9464", [w] { return ServerGauges{.queued_jobs = w->Stats().queue_length}; },
//       {{"renderer", w->device().renderer}});
//   if (!metrics.ok()) return metrics.status();  // the port is taken, ...
//   builder.experimental().SetInterceptorCreators(MetricsInterceptors());  // message bytes
#ifndef GLIMPSE_SERVER_OBSERVABILITY_METRICS_H_
#define GLIMPSE_SERVER_OBSERVABILITY_METRICS_H_

#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
class Collectable;
}  // namespace prometheus

namespace glimpse::server {

// One finished call. `analysis` and `variant` are empty unless the call ran a kernel.
struct CallSample {
  std::string_view method;
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string_view analysis, variant;
  uint64_t queue_ns = 0, gpu_ns = 0, elapsed_ns = 0;
};

// Figures read from the server at scrape time.
struct ServerGauges {
  uint64_t queued_jobs = 0, max_queue = 0;
  uint64_t jobs_run = 0, jobs_dropped = 0, jobs_rejected = 0;
  uint64_t stored_images = 0, stored_bytes = 0, store_budget_bytes = 0;
  uint64_t images_evicted = 0, images_expired = 0;
};

// Records a finished call into the process-wide registry. Any thread.
void RecordCall(const CallSample& call);
// Counts a call refused for its credentials; `reason` is a fixed word, never a credential.
void RecordUnauthenticated(std::string_view reason);
// One GPU job of `tenant` (its scheduling key, server/worker/job_class.h) ran: it waited `queue_ns`
// in the queue and held the GPU thread `run_ns`. Past kMaxTenantLabels distinct tenants, the rest
// share the label "_other".
void RecordTenantJob(std::string_view tenant, uint64_t queue_ns, uint64_t run_ns);
// A job of `tenant` was refused at the queue or dropped unrun; `reason` is a fixed word
// (rate, tenant_queue_full, queue_full, result_too_large, deadline_exceeded, cancelled,
// shutdown).
void RecordTenantRefused(std::string_view tenant, std::string_view reason);
// The rate limit (server/access/rate_limit.h) decided with this replica's own bucket because Redis
// failed.
void RecordRateLimitFallback();
inline constexpr size_t kMaxTenantLabels = 256;

// Upper bounds (seconds) of the latency, queue wait and GPU time histograms: 10 us to 50 s in
// 1-2-5 steps, so a GPU's tens of microseconds and llvmpipe's tens of milliseconds both land in
// buckets at most 2.5x wide.
const std::vector<double>& TimeBuckets();

// Interceptors that count the serialized bytes of every message of glimpse.v1.ImageAnalytics
// received and sent, by method: for ServerBuilder::experimental().SetInterceptorCreators.
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MetricsInterceptors();

// The HTTP endpoint: GET /metrics answers the process-wide registry plus the gauges, build and
// device info of one server.
class MetricsEndpoint {
 public:
  // Listens on `listen` (host:port; port 0 picks a free one). `gauges` is called on the
  // endpoint's threads at each scrape, until the endpoint is destroyed. `device` labels the
  // glimpse_device_info gauge.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listen, std::function<ServerGauges()> gauges,
      std::map<std::string, std::string> device);
  ~MetricsEndpoint();  // stops serving; no scrape runs after it returns
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }

 private:
  MetricsEndpoint() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> server_metrics_;
  int port_ = 0;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_OBSERVABILITY_METRICS_H_
