#include "server/observability/metrics.h"

#include <grpcpp/grpcpp.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

#include "common/str.h"
#include "server/rpc/status_util.h"

#ifndef GLIMPSE_VERSION
#error "GLIMPSE_VERSION must be defined by the build (the CMake project version)"
#endif

namespace glimpse::server {
namespace {

constexpr std::string_view kServicePrefix = "/glimpse.v1.ImageAnalytics/";

// Nanoseconds as the seconds Prometheus expects; the service test converts the calls' Timing
// fields the same way.
double Seconds(uint64_t ns) { return double(ns) * 1e-9; }

// The families fed while calls run. Created once and never destroyed: calls may still finish
// on gRPC's threads while the process exits.
class CallMetrics {
 public:
  static CallMetrics& Get() {
    static CallMetrics* const instance = new CallMetrics();
    return *instance;
  }

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  void Record(const CallSample& c) {
    const std::string code = GrpcCodeName(c.code);
    calls_.Add({{"method", std::string(c.method)}, {"code", code}}).Increment();
    if (c.analysis.empty()) return;
    Series& s = SeriesFor(c.analysis, c.variant);
    s.latency->Observe(Seconds(c.elapsed_ns));
    s.queue->Observe(Seconds(c.queue_ns));
    s.gpu->Observe(Seconds(c.gpu_ns));
  }

  void TenantJob(std::string_view tenant, uint64_t queue_ns, uint64_t run_ns) {
    TenantSeries& s = TenantSeriesFor(tenant);
    s.queue->Observe(Seconds(queue_ns));
    s.gpu->Increment(Seconds(run_ns));
    s.jobs->Increment();
  }

  void TenantRefused(std::string_view tenant, std::string_view reason) {
    std::string label;
    {
      std::lock_guard lock(mu_);
      label = TenantLabelLocked(tenant);
    }
    tenant_refused_.Add({{"tenant", label}, {"reason", std::string(reason)}}).Increment();
  }

  void RateFallback() { rate_fallbacks_.Add({}).Increment(); }

  void Unauthenticated(std::string_view reason) {
    unauthenticated_.Add({{"reason", std::string(reason)}}).Increment();
  }

  void AddBytes(std::string_view method, uint64_t received, uint64_t sent) {
    const prometheus::Labels labels = {{"method", std::string(method)}};
    if (received > 0) received_.Add(labels).Increment(double(received));
    if (sent > 0) sent_.Add(labels).Increment(double(sent));
  }

 private:
  struct Series {
    prometheus::Histogram *latency, *queue, *gpu;
  };
  struct TenantSeries {
    prometheus::Histogram* queue;
    prometheus::Counter *gpu, *jobs;
  };

  CallMetrics()
      : registry_(std::make_shared<prometheus::Registry>()),
        calls_(prometheus::BuildCounter()
                   .Name("glimpse_calls_total")
                   .Help("Calls of glimpse.v1.ImageAnalytics answered, by method and gRPC status "
                         "code")
                   .Register(*registry_)),
        latency_(prometheus::BuildHistogram()
                     .Name("glimpse_call_latency_seconds")
                     .Help("Time from a call's arrival to its answer, for calls that ran an "
                           "analysis, by analysis and variant")
                     .Register(*registry_)),
        queue_(prometheus::BuildHistogram()
                   .Name("glimpse_queue_wait_seconds")
                   .Help("Time a call's job waited for the GPU thread, by analysis and variant")
                   .Register(*registry_)),
        gpu_(prometheus::BuildHistogram()
                 .Name("glimpse_gpu_seconds")
                 .Help("GPU time of a call's kernel (timer query; glFinish and the CPU clock on "
                       "software renderers), by analysis and variant")
                 .Register(*registry_)),
        received_(prometheus::BuildCounter()
                      .Name("glimpse_received_bytes_total")
                      .Help("Serialized bytes of the request messages received, by method "
                            "(before HTTP/2 framing and compression)")
                      .Register(*registry_)),
        sent_(prometheus::BuildCounter()
                  .Name("glimpse_sent_bytes_total")
                  .Help("Serialized bytes of the response messages sent, by method (before "
                        "HTTP/2 framing and compression)")
                  .Register(*registry_)),
        unauthenticated_(prometheus::BuildCounter()
                             .Name("glimpse_unauthenticated_calls_total")
                             .Help("Calls refused for missing or invalid credentials, by reason: "
                                   "no_token, bad_token, no_certificate, bad_certificate")
                             .Register(*registry_)),
        tenant_queue_(prometheus::BuildHistogram()
                          .Name("glimpse_tenant_queue_wait_seconds")
                          .Help("Time a GPU job waited in the queue before it ran, by tenant "
                                "(the scheduler's tenant: access-control tenant, "
                                "glimpse-client-key or peer host)")
                          .Register(*registry_)),
        tenant_gpu_(prometheus::BuildCounter()
                        .Name("glimpse_tenant_gpu_seconds_total")
                        .Help("Time the GPU thread spent on a tenant's jobs (upload, kernels and "
                              "read-back): what the fair scheduler shares out by weight")
                        .Register(*registry_)),
        tenant_jobs_(prometheus::BuildCounter()
                         .Name("glimpse_tenant_jobs_total")
                         .Help("GPU jobs run, by tenant")
                         .Register(*registry_)),
        tenant_refused_(prometheus::BuildCounter()
                            .Name("glimpse_tenant_jobs_refused_total")
                            .Help("GPU jobs refused at the queue or dropped unrun, by tenant and "
                                  "reason: rate (--tenant-rate), tenant_queue_full, queue_full, "
                                  "result_too_large, deadline_exceeded, cancelled, shutdown")
                            .Register(*registry_)),
        rate_fallbacks_(prometheus::BuildCounter()
                            .Name("glimpse_tenant_rate_local_fallbacks_total")
                            .Help("--tenant-rate decisions made by this replica's own buckets "
                                  "because the shared Redis failed or was unreachable")
                            .Register(*registry_)) {}

  // The label of `tenant`: itself for the first kMaxTenantLabels tenants seen, then "_other", so
  // that callers named by their address cannot grow the registry without bound.
  std::string TenantLabelLocked(std::string_view tenant) {
    std::string name = tenant.empty() ? std::string("-") : std::string(tenant);
    if (tenant_labels_.count(name) > 0) return name;
    if (tenant_labels_.size() >= kMaxTenantLabels) return "_other";
    tenant_labels_.insert(name);
    return name;
  }

  TenantSeries& TenantSeriesFor(std::string_view tenant) {
    std::lock_guard lock(mu_);
    const std::string label = TenantLabelLocked(tenant);
    auto it = tenant_series_.find(label);
    if (it != tenant_series_.end()) return it->second;
    const prometheus::Labels labels = {{"tenant", label}};
    TenantSeries s{&tenant_queue_.Add(labels, TimeBuckets()), &tenant_gpu_.Add(labels),
                   &tenant_jobs_.Add(labels)};
    return tenant_series_.emplace(label, s).first->second;
  }

  // Family::Add builds a histogram before it looks for an existing one: keep the pointers.
  Series& SeriesFor(std::string_view analysis, std::string_view variant) {
    std::lock_guard lock(mu_);
    auto key = std::make_pair(std::string(analysis), std::string(variant));
    auto it = series_.find(key);
    if (it != series_.end()) return it->second;
    const prometheus::Labels labels = {{"analysis", key.first}, {"variant", key.second}};
    Series s{&latency_.Add(labels, TimeBuckets()), &queue_.Add(labels, TimeBuckets()),
             &gpu_.Add(labels, TimeBuckets())};
    return series_.emplace(std::move(key), s).first->second;
  }

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& calls_;
  prometheus::Family<prometheus::Histogram>&latency_, &queue_, &gpu_;
  prometheus::Family<prometheus::Counter>&received_, &sent_;
  prometheus::Family<prometheus::Counter>& unauthenticated_;
  prometheus::Family<prometheus::Histogram>& tenant_queue_;
  prometheus::Family<prometheus::Counter>&tenant_gpu_, &tenant_jobs_, &tenant_refused_;
  prometheus::Family<prometheus::Counter>& rate_fallbacks_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Series> series_;
  std::map<std::string, TenantSeries> tenant_series_;
  std::set<std::string> tenant_labels_;
};

// ---- bytes by method ------------------------------------------------------------------------

class BytesInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BytesInterceptor(std::string method) : method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using Hook = grpc::experimental::InterceptionHookPoints;
    uint64_t received = 0, sent = 0;
    if (methods->QueryInterceptionHookPoint(Hook::POST_RECV_MESSAGE)) {
      // Every ImageAnalytics method receives its requests as raw bytes, which the service parses
      // itself (server/service.h): the interceptor sees the bytes as they arrived.
      if (const void* m = methods->GetRecvMessage(); m != nullptr) {
        received = static_cast<const grpc::ByteBuffer*>(m)->Length();
      }
    }
    if (methods->QueryInterceptionHookPoint(Hook::PRE_SEND_MESSAGE)) {
      // Serializes the message here instead of later in the same batch: no extra work.
      if (const grpc::ByteBuffer* b = methods->GetSerializedSendMessage(); b != nullptr) {
        sent = b->Length();
      }
    }
    CallMetrics::Get().AddBytes(method_, received, sent);
    methods->Proceed();
  }

 private:
  const std::string method_;
};

class BytesInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    std::string_view method = info->method();
    if (method.substr(0, kServicePrefix.size()) != kServicePrefix) return nullptr;
    method.remove_prefix(kServicePrefix.size());
    return new BytesInterceptor(std::string(method));
  }
};

// ---- figures read at scrape time --------------------------------------------------------------

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type,
                                double value,
                                std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return {std::move(name), std::move(help), type, {std::move(m)}};
}

class ServerCollectable : public prometheus::Collectable {
 public:
  ServerCollectable(std::function<ServerGauges()> gauges, std::map<std::string, std::string> device)
      : gauges_(std::move(gauges)) {
    for (auto& [k, v] : device) device_.push_back({k, v});
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    const ServerGauges g = gauges_();
    std::vector<prometheus::MetricFamily> out;
    out.push_back(Family("glimpse_queued_jobs", "Jobs waiting for the GPU thread",
                         MetricType::Gauge, double(g.queued_jobs)));
    out.push_back(Family("glimpse_queue_capacity_jobs",
                         "Jobs that may wait before calls are refused (--max-queue)",
                         MetricType::Gauge, double(g.max_queue)));
    prometheus::MetricFamily jobs{
        "glimpse_jobs_total",
        "GPU jobs by outcome: run; dropped unrun (caller cancelled, deadline passed, shutdown); "
        "rejected (queue full)",
        MetricType::Counter,
        {}};
    for (const auto& [outcome, n] : {std::pair{"run", g.jobs_run},
                                     {"dropped", g.jobs_dropped},
                                     {"rejected", g.jobs_rejected}}) {
      prometheus::ClientMetric m;
      m.label = {{"outcome", outcome}};
      m.counter.value = double(n);
      jobs.metric.push_back(std::move(m));
    }
    out.push_back(std::move(jobs));
    out.push_back(Family("glimpse_stored_images", "Images held in the image store",
                         MetricType::Gauge, double(g.stored_images)));
    out.push_back(Family("glimpse_stored_bytes", "GPU bytes held by stored images",
                         MetricType::Gauge, double(g.stored_bytes)));
    out.push_back(Family("glimpse_store_budget_bytes",
                         "GPU bytes the image store may hold (--store-bytes)", MetricType::Gauge,
                         double(g.store_budget_bytes)));
    out.push_back(Family("glimpse_store_evictions_total",
                         "Stored images evicted to make room (least recently used first)",
                         MetricType::Counter, double(g.images_evicted)));
    out.push_back(Family("glimpse_store_expiries_total",
                         "Stored images freed after --image-ttl-s unused", MetricType::Counter,
                         double(g.images_expired)));
    out.push_back(Family("glimpse_build_info", "The server's build: always 1", MetricType::Gauge, 1,
                         {{"version", GLIMPSE_VERSION},
                          {"grpc_version", grpc::Version()},
                          {"compiler", __VERSION__}}));
    out.push_back(Family("glimpse_device_info", "The GL device the server runs on: always 1",
                         MetricType::Gauge, 1, device_));
    return out;
  }

 private:
  const std::function<ServerGauges()> gauges_;
  std::vector<prometheus::ClientMetric::Label> device_;
};

}  // namespace

void RecordCall(const CallSample& call) { CallMetrics::Get().Record(call); }

void RecordUnauthenticated(std::string_view reason) { CallMetrics::Get().Unauthenticated(reason); }

void RecordTenantJob(std::string_view tenant, uint64_t queue_ns, uint64_t run_ns) {
  CallMetrics::Get().TenantJob(tenant, queue_ns, run_ns);
}

void RecordTenantRefused(std::string_view tenant, std::string_view reason) {
  CallMetrics::Get().TenantRefused(tenant, reason);
}

void RecordRateLimitFallback() { CallMetrics::Get().RateFallback(); }

const std::vector<double>& TimeBuckets() {
  static const std::vector<double> kBuckets = {10e-6,  20e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3,
                                               2e-3,   5e-3,  10e-3, 20e-3,  50e-3,  100e-3, 200e-3,
                                               500e-3, 1,     2,     5,      10,     20,     50};
  return kBuckets;
}

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MetricsInterceptors() {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> v;
  v.push_back(std::make_unique<BytesInterceptorFactory>());
  return v;
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, std::function<ServerGauges()> gauges,
    std::map<std::string, std::string> device) {
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  try {
    // civetweb reads "host:port"; it wants IPv6 hosts in brackets, as gRPC does.
    e->exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& ex) {
    return absl::UnavailableError(StrCat("cannot serve metrics on \"", listen,
                                         "\" (--metrics-listen): ", ex.what(),
                                         "; expected host:port with a free port"));
  }
  const std::vector<int> ports = e->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        StrCat("cannot serve metrics on \"", listen, "\" (--metrics-listen): no port is open"));
  }
  e->port_ = ports.front();
  e->server_metrics_ = std::make_shared<ServerCollectable>(std::move(gauges), std::move(device));
  e->exposer_->RegisterCollectable(CallMetrics::Get().registry());
  e->exposer_->RegisterCollectable(e->server_metrics_);
  return e;
}

// The exposer's destructor stops civetweb, joining its threads, before the callback goes.
MetricsEndpoint::~MetricsEndpoint() { exposer_.reset(); }

}  // namespace glimpse::server
