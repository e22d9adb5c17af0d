// Images kept on the GPU between calls: ids, a byte budget with least-recently-used eviction, and
// an idle time-to-live. Each image belongs to the tenant that stored it (server/access/access.h):
// every look-up names the caller's tenant, and another tenant's image is NOT_FOUND exactly as an id
// never stored is. A tenant's share (--tenant-store-bytes) bounds its bytes: storing past it
// evicts that tenant's own least recently used images, never another's.
//
//   ImageStore store(/*budget_bytes=*/uint64_t{2} << 30, std::chrono::seconds(3600));
//   absl::StatusOr<StoredImageInfo> info = store.Info(id, record.tenant());
//   if (!info.ok()) return info.status();  // NOT_FOUND, whoever else holds the id
//   for (const StoredImageInfo& i : store.List(record.tenant())) total_bytes += i.bytes;
//   absl::StatusOr<uint64_t> freed = store.Erase(id, record.tenant());
//   if (!freed.ok()) return freed.status();
//   // Storing and reading the pixels: GpuImages (server/worker/gpu_env.h), on the worker.
#ifndef GLIMPSE_SERVER_STORE_IMAGE_STORE_H_
#define GLIMPSE_SERVER_STORE_IMAGE_STORE_H_

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/image.h"

namespace glimpse::server {

using Clock = std::chrono::steady_clock;

struct StoredImageInfo {
  std::string id;
  gpu::ImageDesc desc;
  uint64_t bytes = 0;
  std::string label;
  std::string origin;  // "upload", "box_filter"
  std::string tenant;  // the owner; "" without access control
  std::chrono::system_clock::time_point created, last_used;
  std::chrono::system_clock::time_point expires;  // time_point{} when there is no TTL
};

struct StoreUsage {
  uint64_t images = 0;
  uint64_t bytes = 0;
  uint64_t budget = 0;
  uint64_t evicted = 0;  // evicted for room or expired, since start
  uint64_t expired = 0;  // of those, expired
};

// The catalogue of stored images, safe on any thread. The gpu::Image objects are created, used and
// destroyed only on the GPU worker thread, through GpuImages (server/worker/gpu_env.h), which only
// the worker can make: Erase and eviction move them to a graveyard that the worker frees.
class ImageStore {
 public:
  // ttl of zero: images never expire. tenant_budget_bytes of zero: no per-tenant share.
  ImageStore(uint64_t budget_bytes, std::chrono::seconds ttl, uint64_t tenant_budget_bytes = 0);
  ~ImageStore();
  ImageStore(const ImageStore&) = delete;
  ImageStore& operator=(const ImageStore&) = delete;

  // Every look-up is `tenant`'s: another tenant's id is NOT_FOUND.
  absl::StatusOr<StoredImageInfo> Info(const std::string& id, const std::string& tenant);
  // `tenant`'s images, most recently used first.
  std::vector<StoredImageInfo> List(const std::string& tenant);
  absl::StatusOr<uint64_t> Erase(const std::string& id, const std::string& tenant);  // bytes freed
  StoreUsage Usage();
  // The bytes `tenant` holds.
  uint64_t TenantBytes(const std::string& tenant);
  uint64_t tenant_budget() const { return tenant_budget_; }
  // NOT_FOUND naming the id.
  static absl::Status NotFound(const std::string& id);
  uint64_t budget() const { return budget_; }
  std::chrono::seconds ttl() const { return ttl_; }

 private:
  friend class GpuImages;

  // OK when an image of `bytes` can be stored for `tenant`, evicting least recently used images
  // as needed (the tenant's own first, to keep it within its share); RESOURCE_EXHAUSTED when it
  // exceeds the whole budget or the tenant's share. Call before allocating the texture.
  absl::Status Reserve(uint64_t bytes, const std::string& tenant);
  // Stores the image under a new random id (evicting as needed) for `tenant`.
  absl::StatusOr<StoredImageInfo> Put(gpu::Image image, std::string label, std::string origin,
                                      std::string tenant);
  // Stores the image with `meta`'s id (new when empty), label, origin, tenant and creation time
  // (now when unset). An id already stored keeps its image: the new one is freed.
  absl::StatusOr<StoredImageInfo> PutAs(gpu::Image image, StoredImageInfo meta);
  // `tenant`'s image for a call, marked as used now. The pointer stays valid until the next
  // Collect(). NOT_FOUND if unknown, another tenant's, deleted, evicted or expired.
  absl::StatusOr<const gpu::Image*> Use(const std::string& id, const std::string& tenant,
                                        StoredImageInfo* info = nullptr);
  // Frees the textures of erased, evicted and expired images.
  void Collect();
  // Frees every image.
  void Clear();

  struct Entry {
    StoredImageInfo info;
    std::unique_ptr<gpu::Image> image;
    Clock::time_point last_used;
    std::list<std::string>::iterator lru;  // position in lru_ (front = most recent)
  };
  using Map = std::unordered_map<std::string, Entry>;

  void ExpireLocked(Clock::time_point now);
  void EvictLocked(Map::iterator it);
  void EvictForLocked(uint64_t bytes, const std::string& tenant);
  // The entry of `id` if `tenant` owns it.
  Map::iterator FindLocked(const std::string& id, const std::string& tenant);
  StoredImageInfo InfoLocked(const Entry& e) const;

  const uint64_t budget_;
  const uint64_t tenant_budget_;
  const std::chrono::seconds ttl_;
  std::mutex mu_;
  Map images_;
  std::list<std::string> lru_;
  uint64_t used_ = 0;
  std::unordered_map<std::string, uint64_t> tenant_used_;  // tenants holding images only
  uint64_t evicted_ = 0, expired_ = 0;
  std::vector<std::unique_ptr<gpu::Image>> graveyard_;
};

// 32 lowercase hex digits from 128 bits of the operating system's random source.
std::string NewImageId();
// True for a string shaped like an image id.
bool LooksLikeImageId(const std::string& s);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_STORE_IMAGE_STORE_H_
