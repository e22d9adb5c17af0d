// glimpse-server: serves the ImageAnalytics API on one GPU (or llvmpipe).
#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <future>
#include <optional>
#include <string>

#include "common/str.h"
#include "server/analyses/kernels.h"
#include "server/flags.h"
#include "server/host_memory.h"
#include "server/rpc/status_util.h"
#include "server/server.h"

namespace {

std::string EnvOr(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

constexpr int64_t kBig = int64_t{1} << 50;

// The flags' values. Every default is the options' own (server/server.h and what it holds) or the
// environment's; flags only override.
struct FlagValues {
  const glimpse::server::ServerOptions defaults;
  std::string listen = EnvOr("GLIMPSE_LISTEN", defaults.listen);
  std::string device = EnvOr("GLIMPSE_DEVICE", defaults.worker.device);
  std::string log_level = "info";
  int64_t max_queue = defaults.worker.max_queue;
  int64_t tenant_max_queued = defaults.worker.tenant_max_queued;
  std::string scheduler{glimpse::server::PolicyName(defaults.worker.scheduler)};
  int64_t max_image_pixels = int64_t(defaults.limits.max_image_pixels);
  int64_t max_upload_bytes = int64_t(defaults.limits.max_upload_bytes);
  int64_t store_bytes = int64_t(defaults.worker.store_bytes);
  int64_t image_ttl_s = defaults.worker.image_ttl.count();
  int64_t max_message_bytes = int64_t(defaults.limits.max_message_bytes);
  int64_t batch_in_flight = int64_t(defaults.limits.batch_in_flight);
  int64_t batch_pack_images = int64_t(defaults.limits.batch_pack_images);
  int64_t host_nice = defaults.limits.host_nice;
  int64_t max_connection_age_s = defaults.max_connection_age_s;
  int64_t shutdown_grace_s = 20;
  int64_t result_buffer_bytes = int64_t(defaults.worker.result_buffer_bytes);
  int64_t staging_bytes = -1;  // WorkerOptions::staging_bytes unset
  int64_t arena_keep_bytes = int64_t(glimpse::server::kArenaKeepBytes);
  std::string tls_cert, tls_key, tls_client_ca, tokens;
  int64_t tenant_store_bytes = int64_t(defaults.worker.tenant_store_bytes);
  std::string redis, redis_user = EnvOr("GLIMPSE_REDIS_USER", "");
  int64_t redis_timeout_ms = defaults.redis.timeout.count();
  std::string metrics_listen = EnvOr("GLIMPSE_METRICS_LISTEN", "");
  double tenant_rate = defaults.rate.rate, tenant_burst = defaults.rate.burst;
  const std::string warm_up_env = EnvOr("GLIMPSE_WARM_UP", defaults.worker.warm_up ? "1" : "0");
  int64_t warm_up = warm_up_env == "1";
  int64_t warm_up_threads = defaults.worker.warm_up_threads;
  int64_t pin_driver_threads = defaults.worker.pin_driver_threads;
  int64_t gpu_paths = defaults.worker.gpu_paths;
};

// Every flag of glimpse-server, bound to a field of `v`.
void DefineFlags(glimpse::server::FlagSet& flags, FlagValues& v) {
  flags.AddString("listen", &v.listen,
                  "listen address host:port (port 0 picks a free one); $GLIMPSE_LISTEN sets the "
                  "default");
  flags.AddString("device", &v.device,
                  "GL device: auto (the first GPU, else llvmpipe) | software (llvmpipe) | an EGL "
                  "device index; $GLIMPSE_DEVICE sets the default");
  flags.AddString("log-level", &v.log_level, "trace | debug | info | warn | error");
  flags.AddInt("max-queue", &v.max_queue, 1, 1 << 20,
               "GPU jobs that may wait; more calls get RESOURCE_EXHAUSTED at once");
  flags.AddInt("tenant-max-queued", &v.tenant_max_queued, 0, 1 << 20,
               "GPU jobs one tenant may have waiting; more of its calls get RESOURCE_EXHAUSTED "
               "while other tenants are still admitted (0 = no bound; --max-queue still holds)");
  flags.AddDouble("tenant-rate", &v.tenant_rate, 0, 1e6,
                  "GPU jobs per second each tenant may start (each call that queues GPU work is "
                  "one; an Analyze call is one, whatever its steps); past it RESOURCE_EXHAUSTED. "
                  "With --redis one limit for every replica sharing it (a token bucket in Redis); "
                  "without, or while Redis fails, this replica's own (0 = no limit)");
  flags.AddDouble("tenant-burst", &v.tenant_burst, 0, 1e9,
                  "jobs a tenant may start at once under --tenant-rate: the bucket's size, at "
                  "least 1 (0 = max(1, --tenant-rate))");
  flags.AddString("scheduler", &v.scheduler,
                  "order of the GPU queue: fair (tenants share the GPU by the weights of the "
                  "--tokens file; interactive before batch within a tenant) | fifo (first come, "
                  "first served; for comparisons)");
  flags.AddInt("max-image-pixels", &v.max_image_pixels, 1, kBig,
               "largest image in pixels, checked from the file header before decoding");
  flags.AddInt("max-upload-bytes", &v.max_upload_bytes, 1, kBig, "largest upload stream in bytes");
  flags.AddInt("store-bytes", &v.store_bytes, 0, kBig,
               "GPU memory budget of the image store; least recently used images are evicted");
  flags.AddInt("tenant-store-bytes", &v.tenant_store_bytes, 0, kBig,
               "each tenant's share of --store-bytes: storing past it evicts that tenant's own "
               "least recently used images, never another's; an image larger than it is "
               "RESOURCE_EXHAUSTED (0 = no share; without access control every caller is one "
               "tenant)");
  flags.AddInt("image-ttl-s", &v.image_ttl_s, 0, kBig,
               "stored images unused this many seconds are freed (0 = never)");
  flags.AddInt("result-buffer-bytes", &v.result_buffer_bytes, 1 << 16, kBig,
               "host memory for results waiting for their readers; a stream takes at most an "
               "eighth at a time (larger integral tables are made in parts as they are read), "
               "and jobs whose results do not fit wait in the queue");
  flags.AddInt("staging-bytes", &v.staging_bytes, -1, kBig,
               "the most host memory the decoders write images of over 1 MiB into and the GPU "
               "uploads from as it is (persistently mapped buffers, mapped 32 MiB at a time as "
               "large images arrive); an image that finds no room uses ordinary memory (-1 = "
               "auto: 32 MiB per decoding thread (one per usable CPU, at least 4), a 3840x2160 "
               "RGBA image each, at least 128 MiB and at most 1 GiB; 0 = none)");
  flags.AddInt("arena-keep-bytes", &v.arena_keep_bytes, 0, int64_t{1} << 30,
               "free memory each of the allocator's thread arenas keeps for the next call's "
               "result messages instead of handing it back (glibc's trim threshold): kept, it "
               "spares every large result a page fault per 4 KiB; 0 hands it back at once");
  flags.AddInt("max-message-bytes", &v.max_message_bytes, 1024, INT32_MAX,
               "largest single gRPC message accepted (inline images must fit)");
  flags.AddInt("batch-in-flight", &v.batch_in_flight, 1, 4096,
               "images one AnalyzeBatch call may have in flight (read and not yet answered and "
               "sent); the server reads no further image of that call until one is done");
  flags.AddInt("batch-pack-images", &v.batch_pack_images, 1, 4096,
               "AnalyzeBatch: at most this many small inline images' histograms (up to 512x512 "
               "each, of one format) run as one GPU job, with one upload, dispatch and read-back "
               "(1 = each image alone)");
  flags.AddInt("host-nice", &v.host_nice, 0, 19,
               "nice value of the decoding threads (and those encoding and streaming results "
               "out): above 0, the threads that feed the GPU and answer calls preempt a decode "
               "on a shared CPU instead of waiting behind it (on CPU renderers, where the "
               "renderer's threads share the CPUs with the decoders, this keeps both CPUs of a "
               "2-core server busy); 0 = as every other thread");
  flags.AddInt("max-connection-age-s", &v.max_connection_age_s, 0, INT32_MAX / 1000,
               "close connections (GOAWAY) after this many seconds, so clients behind a load "
               "balancer reconnect and spread (0 = never)");
  flags.AddInt("shutdown-grace-s", &v.shutdown_grace_s, 0, 3600,
               "on SIGTERM/SIGINT: stop taking calls, finish queued ones within this, exit 0");
  flags.AddString("tls-cert", &v.tls_cert, "PEM certificate chain file for TLS (with --tls-key)");
  flags.AddString("tls-key", &v.tls_key, "PEM private key file for TLS (with --tls-cert)");
  flags.AddString("tls-client-ca", &v.tls_client_ca,
                  "PEM CA certificate(s): with TLS, require client certificates signed by them "
                  "(mutual TLS). Without --tokens, the certificate's subject CN is the tenant; "
                  "with --tokens, the token is");
  flags.AddString("tokens", &v.tokens,
                  "file of `TENANT TOKEN [WEIGHT]` lines (# comments; WEIGHT: the tenant's share "
                  "of the GPU, default 1): calls need `authorization: Bearer "
                  "TOKEN` and see only their tenant's images; SIGHUP re-reads it (\"\" = no "
                  "tokens; with neither this nor --tls-client-ca, access control is off)");
  flags.AddString("redis", &v.redis,
                  "HOST:PORT of a Redis that holds every image, shared by the replicas pointed at "
                  "it: any replica serves any id, this one's GPU store becomes a cache in front of "
                  "it (\"\" = none). Password from $GLIMPSE_REDIS_PASSWORD");
  flags.AddString("redis-user", &v.redis_user,
                  "Redis ACL user for AUTH (Redis 6+); $GLIMPSE_REDIS_USER sets the default");
  flags.AddInt("redis-timeout-ms", &v.redis_timeout_ms, 10, 600000,
               "Redis connect and per-read/write timeout; past it, calls that need Redis answer "
               "UNAVAILABLE");
  flags.AddString("metrics-listen", &v.metrics_listen,
                  "serve Prometheus metrics at http://HOST:PORT/metrics (port 0 picks a free "
                  "one; empty = off); $GLIMPSE_METRICS_LISTEN sets the default");
  flags.AddInt("warm-up", &v.warm_up, 0, 1,
               "1: before reporting SERVING, build and run once every GPU program `auto` can "
               "pick, so no call pays for a shader compile (seconds with a shader cache on disk; "
               "on 2 llvmpipe cores with an empty one, about 50 s), then send each analysis once "
               "through the request path on sample images (under a second); 0: programs are "
               "built on first use; $GLIMPSE_WARM_UP sets the default");
  flags.AddInt("warm-up-threads", &v.warm_up_threads, 0, glimpse::server::kMaxWarmUpThreads,
               "contexts that compile the warm-up side by side, each on a thread of its own; the "
               "serving context gets the others' code from the driver's shader cache on disk, so "
               "this helps only where that cache is writable (0 = auto: on llvmpipe with Mesa's "
               "cache on, the CPUs this process may use, at most 8; else 1)");
  flags.AddInt("pin-driver-threads", &v.pin_driver_threads, 0, 1,
               "1: on CPU renderers (llvmpipe), pin the renderer's worker threads one per CPU "
               "this process may run on, so that no two of them share a CPU while another idles "
               "(the scheduler otherwise does so at times, halving the speed of whole runs of "
               "calls); 0: leave them to the scheduler");
  flags.AddInt("gpu-paths", &v.gpu_paths, 0, 1,
               "1: on a CPU renderer (llvmpipe), take a GPU's paths (the kernel variants `auto` "
               "picks on a GPU, uploads into plain textures, read-backs through pinned memory): "
               "slower there, for testing and profiling those paths on a machine without a GPU; "
               "no effect on a GPU");
}

// The server's options from the flags' values, or INVALID_ARGUMENT naming the flag.
absl::StatusOr<glimpse::server::ServerOptions> ToOptions(const FlagValues& v) {
  const std::optional<glimpse::server::SchedulerPolicy> policy =
      glimpse::server::ParsePolicy(v.scheduler);
  if (!policy) {
    return absl::InvalidArgumentError(
        glimpse::StrCat("--scheduler must be fair or fifo, got \"", v.scheduler, "\""));
  }
  glimpse::server::ServerOptions o;
  o.listen = v.listen;
  o.worker.device = v.device;
  o.worker.max_queue = int(v.max_queue);
  o.worker.tenant_max_queued = int(v.tenant_max_queued);
  o.worker.scheduler = *policy;
  o.worker.store_bytes = uint64_t(v.store_bytes);
  o.worker.tenant_store_bytes = uint64_t(v.tenant_store_bytes);
  o.worker.image_ttl = std::chrono::seconds(v.image_ttl_s);
  o.worker.result_buffer_bytes = uint64_t(v.result_buffer_bytes);
  if (v.staging_bytes >= 0) o.worker.staging_bytes = uint64_t(v.staging_bytes);
  o.worker.warm_up = v.warm_up != 0;
  o.worker.warm_up_threads = int(v.warm_up_threads);
  o.worker.pin_driver_threads = v.pin_driver_threads != 0;
  o.worker.gpu_paths = v.gpu_paths != 0;
  o.limits.max_image_pixels = uint64_t(v.max_image_pixels);
  o.limits.max_upload_bytes = uint64_t(v.max_upload_bytes);
  o.limits.max_message_bytes = uint64_t(v.max_message_bytes);
  o.limits.batch_in_flight = uint32_t(v.batch_in_flight);
  o.limits.batch_pack_images = uint32_t(v.batch_pack_images);
  o.limits.host_nice = int(v.host_nice);
  o.max_connection_age_s = int(v.max_connection_age_s);
  o.tls_cert_file = v.tls_cert;
  o.tls_key_file = v.tls_key;
  o.tls_client_ca_file = v.tls_client_ca;
  o.tokens_file = v.tokens;
  o.redis.address = v.redis;
  o.redis.user = v.redis_user;
  o.redis.password = EnvOr("GLIMPSE_REDIS_PASSWORD", "");
  o.redis.timeout = std::chrono::milliseconds(v.redis_timeout_ms);
  o.metrics_listen = v.metrics_listen;
  o.rate.rate = v.tenant_rate;
  o.rate.burst = v.tenant_burst;
  if (absl::Status s = glimpse::server::CheckRateLimitOptions(o.rate); !s.ok()) return s;
  return o;
}

// Parses the command line into `v`. Returns the exit code when the process should end now
// (--help: 0; a bad flag or environment variable: 2, the reason on stderr), else nothing.
std::optional<int> ParseCommandLine(int argc, char** argv, FlagValues& v) {
  if (v.warm_up_env != "0" && v.warm_up_env != "1") {
    std::fprintf(stderr, "glimpse-server: $GLIMPSE_WARM_UP must be 0 or 1, got \"%s\"\n",
                 v.warm_up_env.c_str());
    return 2;
  }
  glimpse::server::FlagSet flags(
      "glimpse-server: GPU image analytics over gRPC (service glimpse.v1.ImageAnalytics, plus\n"
      "grpc.health.v1.Health and server reflection).\n"
      "Usage: glimpse-server [--listen=0.0.0.0:50051] [--device=auto] [--flag=value ...]");
  DefineFlags(flags, v);
  if (std::string err = flags.Parse(argc, argv); !err.empty()) {
    std::fprintf(stderr, "glimpse-server: %s\n", err.c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  const spdlog::level::level_enum level = spdlog::level::from_str(v.log_level);
  if (level == spdlog::level::off && v.log_level != "off") {
    std::fprintf(stderr,
                 "glimpse-server: --log-level must be trace, debug, info, warn or error, got "
                 "\"%s\"\n",
                 v.log_level.c_str());
    return 2;
  }
  spdlog::set_level(level);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  FlagValues v;
  if (std::optional<int> exit_code = ParseCommandLine(argc, argv, v)) return *exit_code;
  absl::StatusOr<glimpse::server::ServerOptions> options = ToOptions(v);
  if (!options.ok()) {
    std::fprintf(stderr, "glimpse-server: %s\n",
                 std::string(glimpse::server::MessageOf(options.status())).c_str());
    return 2;
  }
  const glimpse::server::ServerOptions& o = *options;
  const std::string& tokens = v.tokens;
  const int64_t shutdown_grace_s = v.shutdown_grace_s;
  // Before any other thread: see server/host_memory.h.
  if (!glimpse::server::KeepLargeBlocksOutOfArenas(size_t(v.arena_keep_bytes))) {
    spdlog::warn(
        "the allocator refused a fixed mmap or trim threshold: freed buffers may stay "
        "resident, or be faulted in afresh");
  }

  // Threads started from here on inherit the blocked signals; this thread waits for them, so a
  // signal's work (a token reload, the shutdown) runs here, never in a signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Start-up (the warm-up above all) can take a minute on a CPU renderer. A SIGTERM or SIGINT
  // meanwhile ends the process at once, as an orchestrator stopping a starting pod expects, rather
  // than once it is up; a SIGHUP meanwhile re-reads the tokens once it is.
  std::future<absl::StatusOr<std::unique_ptr<glimpse::server::GlimpseServer>>> starting =
      std::async(std::launch::async, [&o] { return glimpse::server::GlimpseServer::Start(o); });
  bool reload_when_up = false;
  while (starting.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    const timespec poll{0, 100'000'000};
    const int early = sigtimedwait(&signals, nullptr, &poll);
    if (early == SIGINT || early == SIGTERM) {
      spdlog::info("{} received while starting: exiting", early == SIGINT ? "SIGINT" : "SIGTERM");
      spdlog::default_logger()->flush();
      std::_Exit(0);
    }
    reload_when_up = reload_when_up || early == SIGHUP;
  }
  absl::StatusOr<std::unique_ptr<glimpse::server::GlimpseServer>> server = starting.get();
  if (!server.ok()) {
    spdlog::error("cannot start: {}", glimpse::server::MessageOf(server.status()));
    return 1;
  }
  spdlog::info("serving; SIGTERM or SIGINT stops it (grace {} s){}", shutdown_grace_s,
               tokens.empty() ? "" : "; SIGHUP re-reads --tokens");
  auto reload = [&] {
    if (tokens.empty()) {
      spdlog::info("SIGHUP received: nothing to reload (no --tokens)");
    } else if (absl::Status s = (*server)->ReloadTokens(); s.ok()) {
      spdlog::info("SIGHUP received: {} token(s) loaded from {}", (*server)->access().tokens(),
                   tokens);
    } else {
      spdlog::error("SIGHUP received: keeping the tokens in use: {}",
                    glimpse::server::MessageOf(s));
    }
  };
  if (reload_when_up) reload();
  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) reload();
  spdlog::info("{} received: no new calls; finishing queued ones (up to {} s)",
               sig == SIGINT ? "SIGINT" : "SIGTERM", shutdown_grace_s);
  (*server)->Shutdown(std::chrono::seconds(shutdown_grace_s));
  spdlog::info("stopped");
  return 0;
}
