// The shared image store: images kept in Redis, so any replica can serve any image. Each replica's
// GPU store is a cache in front of it (server/analyses/runner.h resolves ids through both).
//
// An image is one Redis hash, `glimpse:image:<id>` (`glimpse:tenant:<tenant>:image:<id>` for a
// tenant's image, server/access/access.h: the owner is kept in the key): field `meta` (a serialized
// v1::ImageInfo) and fields `c0`, `c1`, ... holding the raw pixels in chunks of at most 8 MiB, so
// an image of any size fits under Redis's 512 MB value limit, and one key carries one expiry
// (--image-ttl-s, idle: renewed on every use), is deleted with one DEL and evicted whole under
// memory pressure. `meta` is written last, so a reader never sees an image whose pixels are still
// being written.
//
// Every method blocks on the network: call them on host threads (pool()), never on the GPU
// worker. Connections are reused; each operation has the connection's timeout; an unreachable or
// slow Redis answers UNAVAILABLE naming Redis and its address, and the next operation reconnects.
//
//   RedisOptions options;
//   options.address = "redis:6379";
//   absl::StatusOr<std::unique_ptr<RedisStore>> redis = RedisStore::Create(options);
//   if (!redis.ok()) return redis.status();  // a malformed address; Redis itself is not asked yet
//   RedisStore& shared = **redis;
//   shared.pool().Post([&shared, id, tenant] {  // never on the GPU worker
//     absl::StatusOr<StoredImageInfo> meta = shared.Touch(id, tenant);
//     if (!meta.ok()) return;  // NOT_FOUND, or UNAVAILABLE naming Redis
//     absl::StatusOr<gpu::HostImage> pixels = shared.Get(*meta);
//   });
#ifndef GLIMPSE_SERVER_STORE_REDIS_STORE_H_
#define GLIMPSE_SERVER_STORE_REDIS_STORE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/image.h"
#include "server/store/image_store.h"
#include "server/worker/host_pool.h"

struct redisContext;

namespace glimpse::server {

struct RedisOptions {
  std::string address;                      // host:port
  std::string user;                         // ACL user (Redis 6+); empty: the default user
  std::string password;                     // empty: no AUTH
  std::chrono::milliseconds timeout{2000};  // connect, and each read or write
  std::chrono::seconds ttl{3600};           // idle expiry; 0 = never
  uint64_t chunk_bytes = uint64_t{8} << 20;
  int threads = 4;  // host threads for Redis I/O
};

class RedisStore {
 public:
  // Checks the address; connects lazily (a Redis down at start-up is not a start-up error).
  static absl::StatusOr<std::unique_ptr<RedisStore>> Create(const RedisOptions& options);
  ~RedisStore();
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // Writes the image (meta's id, tenant, label, origin, created).
  absl::Status Put(const StoredImageInfo& meta, const gpu::HostImage& image);
  // Renews the image's expiry and returns its description. NOT_FOUND if absent or another
  // tenant's.
  absl::StatusOr<StoredImageInfo> Touch(const std::string& id, const std::string& tenant);
  // The pixels of meta's image (meta's id and tenant). NOT_FOUND if absent (or a chunk went
  // missing).
  absl::StatusOr<gpu::HostImage> Get(const StoredImageInfo& meta);
  // Deletes the image; NOT_FOUND if absent or another tenant's.
  absl::Status Delete(const std::string& id, const std::string& tenant);
  // The tenant's images, most recently used first (last use from the remaining expiry).
  absl::StatusOr<std::vector<StoredImageInfo>> List(const std::string& tenant);
  absl::Status Ping();
  // Takes a token from `tenant`'s bucket (`glimpse:rate:<tenant>`: `rate` tokens a second up to
  // `burst`, on Redis's clock) in one atomic script: true if there was one.
  absl::StatusOr<bool> TakeRateToken(const std::string& tenant, double rate, double burst);

  // Host threads for the calls above.
  HostPool& pool() { return pool_; }
  const std::string& address() const { return options_.address; }
  // As of the last operation or health check (every second).
  bool reachable() const { return reachable_.load(); }
  // Called with the new state whenever reachability changes (and once at start).
  void SetOnHealth(std::function<void(bool)> on_health);

 private:
  explicit RedisStore(const RedisOptions& options);
  class Connection;
  absl::StatusOr<std::unique_ptr<Connection>> Take();
  void Give(std::unique_ptr<Connection> c);
  absl::Status Unavailable(const std::string& what) const;
  void Observe(bool ok);
  void HealthLoop();
  StoredImageInfo Decorate(StoredImageInfo info, int64_t pttl_ms) const;

  const RedisOptions options_;
  std::string host_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::atomic<bool> reachable_{false};
  std::function<void(bool)> on_health_;
  bool stopping_ = false;
  std::condition_variable cv_;
  std::thread health_;
  HostPool pool_;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_STORE_REDIS_STORE_H_
