// Images kept on the GPU between calls: ids, a byte budget with least-recently-used eviction, and
// an idle time-to-live.
#ifndef GLIMPSE_SERVER_IMAGE_STORE_H_
#define GLIMPSE_SERVER_IMAGE_STORE_H_

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
// destroyed only on the GPU worker thread, through GpuImages (server/gpu_env.h), which only the
// worker can make: Erase and eviction move them to a graveyard that the worker frees.
class ImageStore {
 public:
  // ttl of zero: images never expire.
  ImageStore(uint64_t budget_bytes, std::chrono::seconds ttl);
  ~ImageStore();
  ImageStore(const ImageStore&) = delete;
  ImageStore& operator=(const ImageStore&) = delete;

  absl::StatusOr<StoredImageInfo> Info(const std::string& id);
  std::vector<StoredImageInfo> List();                    // most recently used first
  absl::StatusOr<uint64_t> Erase(const std::string& id);  // the bytes freed
  StoreUsage Usage();
  // NOT_FOUND naming the id.
  static absl::Status NotFound(const std::string& id);
  uint64_t budget() const { return budget_; }
  std::chrono::seconds ttl() const { return ttl_; }

 private:
  friend class GpuImages;

  // OK when an image of `bytes` can be stored, evicting least recently used images as needed;
  // RESOURCE_EXHAUSTED when it exceeds the whole budget. Call before allocating the texture.
  absl::Status Reserve(uint64_t bytes);
  // Stores the image under a new random id (evicting as needed).
  absl::StatusOr<StoredImageInfo> Put(gpu::Image image, std::string label, std::string origin);
  // Stores the image with `meta`'s id (new when empty), label, origin and creation time (now when
  // unset). An id already stored keeps its image: the new one is freed.
  absl::StatusOr<StoredImageInfo> PutAs(gpu::Image image, StoredImageInfo meta);
  // The image for a call, marked as used now. The pointer stays valid until the next Collect().
  // NOT_FOUND if unknown, deleted, evicted or expired.
  absl::StatusOr<const gpu::Image*> Use(const std::string& id, StoredImageInfo* info = nullptr);
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
  void EvictForLocked(uint64_t bytes);
  StoredImageInfo InfoLocked(const Entry& e) const;

  const uint64_t budget_;
  const std::chrono::seconds ttl_;
  std::mutex mu_;
  Map images_;
  std::list<std::string> lru_;
  uint64_t used_ = 0;
  uint64_t evicted_ = 0, expired_ = 0;
  std::vector<std::unique_ptr<gpu::Image>> graveyard_;
};

// 32 lowercase hex digits from 128 bits of the operating system's random source.
std::string NewImageId();
// True for a string shaped like an image id.
bool LooksLikeImageId(const std::string& s);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_IMAGE_STORE_H_
