#include "server/store/shared_images.h"

#include <utility>

#include "absl/status/status.h"
#include "common/str.h"
#include "server/analyses/runner.h"
#include "server/store/redis_store.h"

namespace glimpse::server {

void ResolveImageRef(ServiceEnv& service, const v1::ImageRef& ref, CallRecord& record,
                     InputReady next, WireBytes* inline_bytes) {
  if (ref.source_case() == v1::ImageRef::kEncoded) {
    // Decoding takes milliseconds: on the host pool, in parallel with other calls' decodes,
    // never on gRPC's threads. The request and the record outlive the task: the call is not
    // answered before `next` runs.
    return service.pool.Post([&service, &ref, &record, inline_bytes, next = std::move(next)] {
      next(ReadImageRef(ref, service.worker.device().limits, service.worker.staging(),
                        service.limits, service.worker.store(), record, inline_bytes));
    });
  }
  if (service.redis == nullptr || ref.source_case() != v1::ImageRef::kImageId) {
    return next(ReadImageRef(ref, service.worker.device().limits, service.worker.staging(),
                             service.limits, service.worker.store(), record, inline_bytes));
  }
  record.set_image(ref.image_id());
  service.redis->pool().Post(
      [&service, id = ref.image_id(), tenant = record.tenant(), next = std::move(next)] {
        ImageStore& cache = service.worker.store();
        absl::StatusOr<StoredImageInfo> shared = service.redis->Touch(id, tenant);
        absl::StatusOr<StoredImageInfo> cached = cache.Info(id, tenant);
        if (absl::IsNotFound(shared.status())) {
          // Deleted through another replica, or expired: this replica's copy goes too.
          if (cached.ok()) (void)cache.Erase(id, tenant);
          return next(shared.status());
        }
        auto in = std::make_shared<Input>();
        in->image_id = id;
        if (cached.ok()) {  // in the cache: serves even when Redis is unreachable
          in->desc = cached->desc;
          return next(std::shared_ptr<const Input>(std::move(in)));
        }
        if (!shared.ok()) return next(shared.status());
        absl::StatusOr<gpu::HostImage> pixels = service.redis->Get(*shared);
        if (!pixels.ok()) return next(pixels.status());
        in->desc = pixels->desc;
        in->host = *std::move(pixels);
        in->cache = *std::move(shared);
        next(std::shared_ptr<const Input>(std::move(in)));
      });
}

namespace {

// ShareImage's work on the shared store's pool, the pixels made there by `pixels`.
void Share(ServiceEnv& service, const StoredImageInfo& info,
           std::function<std::shared_ptr<const gpu::HostImage>()> pixels,
           std::function<void(absl::Status)> done) {
  if (service.redis == nullptr) return done(absl::OkStatus());
  service.redis->pool().Post([&service, info, pixels = std::move(pixels), done = std::move(done)] {
    absl::Status s = service.redis->Put(info, *pixels());
    if (!s.ok()) (void)service.worker.store().Erase(info.id, info.tenant);
    done(s);
  });
}

}  // namespace

void ShareImage(ServiceEnv& service, const StoredImageInfo& info,
                std::shared_ptr<const gpu::HostImage> pixels,
                std::function<void(absl::Status)> done) {
  Share(
      service, info, [pixels] { return pixels; }, std::move(done));
}

void ShareImage(ServiceEnv& service, const StoredImageInfo& info, std::shared_ptr<const Input> in,
                std::function<void(absl::Status)> done) {
  Share(
      service, info, [in] { return HostPixels(in); }, std::move(done));
}

void ImageInfoOf(ServiceEnv& service, const std::string& id, const std::string& tenant,
                 std::function<void(absl::StatusOr<StoredImageInfo>)> done) {
  if (service.redis == nullptr) return done(service.worker.store().Info(id, tenant));
  service.redis->pool().Post([&service, id, tenant, done = std::move(done)] {
    absl::StatusOr<StoredImageInfo> shared = service.redis->Touch(id, tenant);
    if (shared.ok() || absl::IsNotFound(shared.status())) {
      if (!shared.ok()) (void)service.worker.store().Erase(id, tenant);
      return done(shared);
    }
    absl::StatusOr<StoredImageInfo> cached = service.worker.store().Info(id, tenant);
    done(cached.ok() ? cached : shared);
  });
}

void ListAllImages(ServiceEnv& service, const std::string& tenant,
                   std::function<void(absl::StatusOr<std::vector<StoredImageInfo>>)> done) {
  if (service.redis == nullptr) return done(service.worker.store().List(tenant));
  service.redis->pool().Post(
      [&service, tenant, done = std::move(done)] { done(service.redis->List(tenant)); });
}

void DeleteEverywhere(ServiceEnv& service, const std::string& id, const std::string& tenant,
                      std::function<void(absl::StatusOr<uint64_t>)> done) {
  // The texture itself is freed by the worker thread at its next turn.
  absl::StatusOr<uint64_t> local = service.worker.store().Erase(id, tenant);
  if (service.redis == nullptr) return done(local);
  service.redis->pool().Post([&service, id, tenant, local, done = std::move(done)] {
    absl::StatusOr<StoredImageInfo> info = service.redis->Touch(id, tenant);
    absl::Status s = service.redis->Delete(id, tenant);
    if (!s.ok() && !absl::IsNotFound(s)) return done(s);
    if (s.ok()) return done(info.ok() ? info->bytes : local.value_or(0));
    done(local);
  });
}

}  // namespace glimpse::server
