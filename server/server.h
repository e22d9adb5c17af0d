// A running Glimpse server: the GPU worker, the service, health and reflection, on a port. Used by
// main(), the service tests and the Analyze fuzz target.
//
//   ServerOptions options;
//   options.listen = "127.0.0.1:0";  // a free port
//   absl::StatusOr<std::unique_ptr<GlimpseServer>> server = GlimpseServer::Start(options);
//   if (!server.ok()) return server.status();  // e.g. no GL context on --device
//   std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
//       StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials());
//   // ... calls on `channel` ...
//   (*server)->Shutdown(std::chrono::seconds(10));
#ifndef GLIMPSE_SERVER_SERVER_H_
#define GLIMPSE_SERVER_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/access/access.h"
#include "server/access/rate_limit.h"
#include "server/observability/metrics.h"
#include "server/rpc/callback_waker.h"
#include "server/service.h"
#include "server/store/redis_store.h"
#include "server/worker/gpu_worker.h"

namespace glimpse::server {

struct ServerOptions {
  std::string listen = "0.0.0.0:50051";  // "" = no port (start-up checks only)
  WorkerOptions worker;
  ServiceLimits limits;
  int max_connection_age_s = 300;           // 0 = never
  std::string tls_cert_file, tls_key_file;  // PEM; both or neither
  // PEM CA certificates: with TLS, clients must present a certificate they signed
  // (server/access/access.h says how its subject names the tenant). "" = no client certificates.
  std::string tls_client_ca_file;
  std::string tokens_file;  // `TENANT TOKEN` lines (server/access/access.h); "" = no tokens
  // The shared image store: redis.address "" = none (each replica keeps its own images).
  RedisOptions redis;
  // Per-tenant jobs per second (server/access/rate_limit.h): shared through `redis` when it is set.
  RateLimitOptions rate;
  std::string metrics_listen;  // host:port of the Prometheus /metrics; "" = off
};

class GlimpseServer {
 public:
  // Opens the GL context and prepares the kernels (errors are start-up errors), then listens.
  static absl::StatusOr<std::unique_ptr<GlimpseServer>> Start(const ServerOptions& options);
  ~GlimpseServer();  // Shutdown(0 s) if not done

  // The port it listens on (the one picked when `listen` ends in ":0"); 0 without `listen`.
  int port() const { return port_; }
  // The port /metrics is served on; 0 when metrics_listen is empty.
  int metrics_port() const { return metrics_ != nullptr ? metrics_->port() : 0; }

  // Reports NOT_SERVING, stops taking calls, lets queued and running calls finish within `grace`
  // (then cancels them), and frees the GPU. Idempotent.
  void Shutdown(std::chrono::seconds grace);

  // Re-reads the token file (on SIGHUP): a bad file keeps the tokens in use and says why.
  absl::Status ReloadTokens() { return access_->Reload(); }
  const Access& access() const { return *access_; }

  GpuWorker& worker() { return *worker_; }
  // True when a shared Redis is configured and answered its last check.
  bool redis_reachable() const { return redis_ != nullptr && redis_->reachable(); }
  ImageAnalyticsService& service() { return *service_; }

 private:
  GlimpseServer() = default;
  std::unique_ptr<GpuWorker> worker_;
  std::unique_ptr<RedisStore> redis_;
  std::unique_ptr<RateLimiter> rate_;  // its tasks on redis_'s pool end when Shutdown joins it
  std::unique_ptr<Access> access_;
  std::unique_ptr<ImageAnalyticsService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsEndpoint> metrics_;  // reads worker_: stopped before it goes
  std::unique_ptr<CallbackWaker> waker_;      // while the server takes calls
  int port_ = 0;
  bool shut_down_ = false;
};

inline constexpr char kServiceName[] = "glimpse.v1.ImageAnalytics";
// The health of the shared image store (SERVING while Redis answers; always without --redis),
// apart from the service's, so an orchestrator does not restart GPU pods for a Redis outage.
inline constexpr char kImageStoreHealthName[] = "glimpse.v1.ImageStore";

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_SERVER_H_
