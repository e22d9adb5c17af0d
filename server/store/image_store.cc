#include "server/store/image_store.h"

#include <random>

#include "absl/status/status.h"
#include "common/str.h"

namespace glimpse::server {

std::string NewImageId() {
  static std::mutex mu;
  static std::random_device device;  // getrandom(2) on Linux
  std::lock_guard lock(mu);
  std::string id;
  for (int i = 0; i < 4; ++i) StrAppend(&id, fmt::format("{:08x}", uint32_t{device()}));
  return id;
}

bool LooksLikeImageId(const std::string& s) {
  if (s.size() != 32) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

ImageStore::ImageStore(uint64_t budget_bytes, std::chrono::seconds ttl,
                       uint64_t tenant_budget_bytes)
    : budget_(budget_bytes), tenant_budget_(tenant_budget_bytes), ttl_(ttl) {}

ImageStore::~ImageStore() = default;

absl::Status ImageStore::NotFound(const std::string& id) {
  return absl::NotFoundError(
      StrCat("image_id ", id.empty() ? "\"\"" : id,
             " is not stored (never uploaded, deleted, evicted or expired)"));
}

StoredImageInfo ImageStore::InfoLocked(const Entry& e) const {
  StoredImageInfo info = e.info;
  if (ttl_.count() > 0) info.expires = info.last_used + ttl_;
  return info;
}

ImageStore::Map::iterator ImageStore::FindLocked(const std::string& id, const std::string& tenant) {
  auto it = images_.find(id);
  // Another tenant's image reads exactly as a missing one: no answer tells them apart.
  if (it == images_.end() || it->second.info.tenant != tenant) return images_.end();
  return it;
}

void ImageStore::EvictLocked(Map::iterator it) {
  used_ -= it->second.info.bytes;
  auto t = tenant_used_.find(it->second.info.tenant);
  if ((t->second -= it->second.info.bytes) == 0) tenant_used_.erase(t);
  lru_.erase(it->second.lru);
  graveyard_.push_back(std::move(it->second.image));
  images_.erase(it);
}

void ImageStore::ExpireLocked(Clock::time_point now) {
  if (ttl_.count() <= 0) return;
  // The least recently used are at the back.
  while (!lru_.empty()) {
    auto it = images_.find(lru_.back());
    if (now - it->second.last_used < ttl_) break;
    EvictLocked(it);
    ++evicted_;
    ++expired_;
  }
}

void ImageStore::EvictForLocked(uint64_t bytes, const std::string& tenant) {
  if (tenant_budget_ > 0) {
    // The tenant's own least recently used go first, so its share holds the new image.
    for (auto pos = lru_.end(); pos != lru_.begin();) {
      auto t = tenant_used_.find(tenant);
      if (t == tenant_used_.end() || t->second + bytes <= tenant_budget_) break;
      const auto victim = std::prev(pos);
      auto it = images_.find(*victim);
      if (it->second.info.tenant != tenant) {
        pos = victim;
        continue;
      }
      EvictLocked(it);  // erases `victim` only: `pos` stays valid
      ++evicted_;
    }
  }
  while (!lru_.empty() && used_ + bytes > budget_) {
    EvictLocked(images_.find(lru_.back()));
    ++evicted_;
  }
}

absl::Status ImageStore::Reserve(uint64_t bytes, const std::string& tenant) {
  if (bytes > budget_) {
    return absl::ResourceExhaustedError(StrCat("image of ", bytes,
                                               " bytes exceeds the image store's budget of ",
                                               budget_, " bytes (--store-bytes)"));
  }
  std::lock_guard lock(mu_);
  if (tenant_budget_ > 0 && bytes > tenant_budget_) {
    auto t = tenant_used_.find(tenant);
    return absl::ResourceExhaustedError(
        StrCat("image of ", bytes, " bytes exceeds tenant ", tenant.empty() ? "\"\"" : tenant,
               "'s share of the image store, ", tenant_budget_,
               " bytes (--tenant-store-bytes); the tenant holds ",
               t == tenant_used_.end() ? 0 : t->second, " bytes now"));
  }
  ExpireLocked(Clock::now());
  EvictForLocked(bytes, tenant);
  return absl::OkStatus();
}

absl::StatusOr<StoredImageInfo> ImageStore::Put(gpu::Image image, std::string label,
                                                std::string origin, std::string tenant) {
  StoredImageInfo meta;
  meta.label = std::move(label);
  meta.origin = std::move(origin);
  meta.tenant = std::move(tenant);
  return PutAs(std::move(image), std::move(meta));
}

absl::StatusOr<StoredImageInfo> ImageStore::PutAs(gpu::Image image, StoredImageInfo meta) {
  const uint64_t bytes = image.gpu_bytes();
  if (absl::Status s = Reserve(bytes, meta.tenant); !s.ok()) return s;
  std::lock_guard lock(mu_);
  if (auto it = images_.find(meta.id); it != images_.end()) {
    graveyard_.push_back(std::make_unique<gpu::Image>(std::move(image)));
    // Ids are 128 random bits, so a clash is the same image put twice (fetched from the shared
    // store by two calls at once), and both callers are its tenant.
    if (it->second.info.tenant != meta.tenant) return NotFound(meta.id);
    return InfoLocked(it->second);
  }
  EvictForLocked(bytes, meta.tenant);
  Entry e;
  e.info = std::move(meta);
  if (e.info.id.empty()) e.info.id = NewImageId();
  e.info.desc = image.desc();
  e.info.bytes = bytes;
  e.info.last_used = std::chrono::system_clock::now();
  if (e.info.created == std::chrono::system_clock::time_point{}) e.info.created = e.info.last_used;
  e.last_used = Clock::now();
  e.image = std::make_unique<gpu::Image>(std::move(image));
  lru_.push_front(e.info.id);
  e.lru = lru_.begin();
  used_ += bytes;
  tenant_used_[e.info.tenant] += bytes;
  const std::string id = e.info.id;
  auto [it, inserted] = images_.emplace(id, std::move(e));
  return InfoLocked(it->second);
}

absl::StatusOr<const gpu::Image*> ImageStore::Use(const std::string& id, const std::string& tenant,
                                                  StoredImageInfo* info) {
  std::lock_guard lock(mu_);
  const Clock::time_point now = Clock::now();
  ExpireLocked(now);
  auto it = FindLocked(id, tenant);
  if (it == images_.end()) return NotFound(id);
  Entry& e = it->second;
  e.last_used = now;
  e.info.last_used = std::chrono::system_clock::now();
  lru_.splice(lru_.begin(), lru_, e.lru);
  if (info != nullptr) *info = InfoLocked(e);
  return e.image.get();
}

void ImageStore::Collect() {
  std::vector<std::unique_ptr<gpu::Image>> dead;
  {
    std::lock_guard lock(mu_);
    ExpireLocked(Clock::now());
    dead.swap(graveyard_);
  }
  // Textures are deleted here, on the worker thread, outside the lock.
}

void ImageStore::Clear() {
  std::vector<std::unique_ptr<gpu::Image>> dead;
  {
    std::lock_guard lock(mu_);
    while (!lru_.empty()) EvictLocked(images_.find(lru_.back()));
    dead.swap(graveyard_);
  }
}

absl::StatusOr<StoredImageInfo> ImageStore::Info(const std::string& id, const std::string& tenant) {
  std::lock_guard lock(mu_);
  ExpireLocked(Clock::now());
  auto it = FindLocked(id, tenant);
  if (it == images_.end()) return NotFound(id);
  return InfoLocked(it->second);
}

std::vector<StoredImageInfo> ImageStore::List(const std::string& tenant) {
  std::lock_guard lock(mu_);
  ExpireLocked(Clock::now());
  std::vector<StoredImageInfo> out;
  for (const std::string& id : lru_) {
    const Entry& e = images_.at(id);
    if (e.info.tenant == tenant) out.push_back(InfoLocked(e));
  }
  return out;
}

uint64_t ImageStore::TenantBytes(const std::string& tenant) {
  std::lock_guard lock(mu_);
  ExpireLocked(Clock::now());
  auto t = tenant_used_.find(tenant);
  return t == tenant_used_.end() ? 0 : t->second;
}

absl::StatusOr<uint64_t> ImageStore::Erase(const std::string& id, const std::string& tenant) {
  std::lock_guard lock(mu_);
  ExpireLocked(Clock::now());
  auto it = FindLocked(id, tenant);
  if (it == images_.end()) return NotFound(id);
  const uint64_t bytes = it->second.info.bytes;
  EvictLocked(it);
  return bytes;
}

StoreUsage ImageStore::Usage() {
  std::lock_guard lock(mu_);
  ExpireLocked(Clock::now());
  return {.images = images_.size(),
          .bytes = used_,
          .budget = budget_,
          .evicted = evicted_,
          .expired = expired_};
}

}  // namespace glimpse::server
