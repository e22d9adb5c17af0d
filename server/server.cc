#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <map>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "common/str.h"
#include "server/request_warm_up.h"

namespace glimpse::server {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(StrCat(flag, ": cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ServerGauges Gauges(GpuWorker& worker) {
  const WorkerStats w = worker.Stats();
  const StoreUsage u = worker.store().Usage();
  return {.queued_jobs = w.queue_length,
          .max_queue = uint64_t(worker.max_queue()),
          .jobs_run = w.jobs_run,
          .jobs_dropped = w.jobs_dropped,
          .jobs_rejected = w.jobs_rejected,
          .stored_images = u.images,
          .stored_bytes = u.bytes,
          .store_budget_bytes = u.budget,
          .images_evicted = u.evicted - u.expired,
          .images_expired = u.expired};
}

std::map<std::string, std::string> DeviceLabels(const gpu::DeviceInfo& d) {
  return {{"platform", d.platform},
          {"vendor", d.vendor},
          {"renderer", d.renderer},
          {"gl_version", d.version},
          {"software", d.software ? "true" : "false"}};
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlimpseServer>> GlimpseServer::Start(const ServerOptions& options) {
  if (absl::Status s = CheckRateLimitOptions(options.rate); !s.ok()) return s;
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(options.tls_cert_file, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile(options.tls_key_file, "--tls-key");
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl(
        options.tls_client_ca_file.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    if (!options.tls_client_ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadFile(options.tls_client_ca_file, "--tls-client-ca");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    credentials = grpc::SslServerCredentials(ssl);
  } else if (!options.tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs TLS: give --tls-cert and --tls-key as well");
  }
  absl::StatusOr<std::unique_ptr<Access>> access =
      Access::Create({.tokens_file = options.tokens_file,
                      .client_certificates = !options.tls_client_ca_file.empty()});
  if (!access.ok()) return access.status();

  std::unique_ptr<GlimpseServer> s(new GlimpseServer());
  s->access_ = *std::move(access);
  absl::StatusOr<std::unique_ptr<GpuWorker>> worker = GpuWorker::Start(options.worker);
  if (!worker.ok()) return worker.status();
  s->worker_ = *std::move(worker);
  const gpu::DeviceInfo& d = s->worker_->device();
  spdlog::info("GL device: vendor \"{}\", renderer \"{}\", version \"{}\" ({}{})", d.vendor,
               d.renderer, d.version, d.platform, d.software ? ", software" : "");
  spdlog::info("GL subgroups: {}", gpu::DescribeSubgroups(d.limits));
  if (!options.redis.address.empty()) {
    RedisOptions redis = options.redis;
    redis.ttl = options.worker.image_ttl;
    absl::StatusOr<std::unique_ptr<RedisStore>> store = RedisStore::Create(redis);
    if (!store.ok()) return store.status();
    s->redis_ = *std::move(store);
    spdlog::info("shared image store: Redis at {}{}", redis.address,
                 redis.password.empty() ? "" : " (with AUTH)");
  }
  if (options.rate.rate > 0) {
    s->rate_ = std::make_unique<RateLimiter>(options.rate, s->redis_.get());
    spdlog::info("rate limit: {} jobs/s per tenant, burst {}, {}", s->rate_->rate(),
                 s->rate_->burst(),
                 s->rate_->shared() ? "shared through Redis" : "on this replica alone");
  }
  if (options.worker.warm_up) {
    const RequestWarmUp warm = WarmRequestPath(*s->worker_, options.limits);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(warm.took).count();
    if (warm.refused.empty() && warm.calls == 0) {
      spdlog::info("request path not warmed: every sample image is over --max-image-pixels");
    } else if (warm.refused.empty()) {
      spdlog::info("request path warmed in {} ms (each analysis once on sample images)", ms);
    } else {
      spdlog::warn(
          "request path warmed in {} ms, {} of {} sample calls refused (their first "
          "calls will be slower): {}",
          ms, warm.refused.size(), warm.calls, absl::StrJoin(warm.refused, "; "));
    }
  }
  s->service_ = std::make_unique<ImageAnalyticsService>(
      *s->worker_, options.limits, s->redis_.get(),
      s->access_->enabled() ? s->access_.get() : nullptr, s->rate_.get());
  if (s->redis_ != nullptr) {
    // The handlers hand the Redis pool tasks that read the service. gRPC orders the service's
    // construction before every handler through synchronization ThreadSanitizer cannot see; a
    // task posted here after it puts the same order through the pool's own queue, where it can.
    s->redis_->pool().Post([] {});
  }
  // Likewise for the GPU worker's jobs, which read the service too (ShareImage reads its Redis
  // store, null or not), through the worker's queue lock.
  s->worker_->OrderBeforeLaterJobs();
  if (!options.metrics_listen.empty()) {
    GpuWorker* w = s->worker_.get();
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> metrics = MetricsEndpoint::Start(
        options.metrics_listen, [w] { return Gauges(*w); }, DeviceLabels(d));
    if (!metrics.ok()) return metrics.status();
    s->metrics_ = *std::move(metrics);
    spdlog::info("metrics on {} (port {}), path /metrics", options.metrics_listen,
                 s->metrics_->port());
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!options.listen.empty()) {
    builder.AddListeningPort(options.listen, credentials, &s->port_);
  }
  builder.RegisterService(s->service_.get());
  if (!options.metrics_listen.empty()) {
    builder.experimental().SetInterceptorCreators(MetricsInterceptors());
  }
  builder.SetMaxReceiveMessageSize(
      int(std::min<uint64_t>(options.limits.max_message_bytes, uint64_t{INT32_MAX})));
  if (options.max_connection_age_s > 0) {
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_AGE_MS,
        int(std::min(options.max_connection_age_s, INT32_MAX / 1000)) * 1000);
    // Calls in flight when the age is reached get this long to finish.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 60 * 1000);
  }
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || (!options.listen.empty() && s->port_ == 0)) {
    return absl::UnavailableError(
        StrCat("cannot listen on ", options.listen, " (--listen): address in use or invalid?"));
  }
  s->waker_ = std::make_unique<CallbackWaker>();
  grpc::HealthCheckServiceInterface* health = s->server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(kServiceName, true);
  if (s->redis_ != nullptr) {
    s->redis_->SetOnHealth(
        [health](bool reachable) { health->SetServingStatus(kImageStoreHealthName, reachable); });
  } else {
    health->SetServingStatus(kImageStoreHealthName, true);
  }
  if (!options.listen.empty()) {
    spdlog::info("listening on {} (port {}){}", options.listen, s->port_,
                 options.tls_cert_file.empty()        ? ""
                 : options.tls_client_ca_file.empty() ? " with TLS"
                                                      : " with TLS and client certificates");
  }
  if (s->access_->enabled()) {
    spdlog::info("{}", s->access_->Describe());
  } else {
    spdlog::warn("{}", s->access_->Describe());
  }
  return s;
}

GlimpseServer::~GlimpseServer() { Shutdown(std::chrono::seconds(0)); }

void GlimpseServer::Shutdown(std::chrono::seconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    if (grpc::HealthCheckServiceInterface* h = server_->GetHealthCheckService()) {
      h->SetServingStatus(false);
    }
    const auto deadline = std::chrono::system_clock::now() + grace;
    // Returns once every call has been answered: the worker keeps running queued jobs meanwhile;
    // past the deadline gRPC cancels the rest, and the worker drops them unrun.
    server_->Shutdown(deadline);
    server_->Wait();
  }
  waker_.reset();
  if (worker_ != nullptr) worker_->Stop(std::chrono::steady_clock::now());
  // The store's health thread calls into the health service: it stops before the server goes.
  if (redis_ != nullptr) redis_->SetOnHealth([](bool) {});
  metrics_.reset();
  server_.reset();
  // The Redis pool's threads run the service's tasks: joined before the service goes.
  redis_.reset();
  service_.reset();
  worker_.reset();
}

}  // namespace glimpse::server
