// What only the GPU worker's thread may touch: the GL context, the kernels and the GPU half of the
// image store. Neither GpuEnv nor GpuImages can be made outside GpuWorker, and jobs receive them
// only as arguments of their work on the worker, so gRPC and host threads have no way to reach
// the GL context.
//
//   // A job's work (Submit, server/analyses/runner.h), run on the worker thread:
//   auto work = [call, id, options](GpuEnv& env, Lease lease) -> absl::Status {
//     absl::StatusOr<const gpu::Image*> image = env.images.Use(id, call->record.tenant());
//     if (!image.ok()) return image.status();  // NOT_FOUND: unknown, evicted or expired
//     absl::StatusOr<gpu::HistogramResult> r = env.kernels.histogram.Run(**image, options);
//     if (!r.ok()) return r.status();
//     call->lease = std::move(lease);
//     call->Answer(absl::OkStatus());
//     return absl::OkStatus();
//   };
#ifndef GLIMPSE_SERVER_WORKER_GPU_ENV_H_
#define GLIMPSE_SERVER_WORKER_GPU_ENV_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "gpu/context.h"
#include "gpu/image.h"
#include "server/analyses/kernels.h"
#include "server/store/image_store.h"

namespace glimpse::server {

class GpuWorker;

// The textures of the image store.
class GpuImages {
 public:
  GpuImages(const GpuImages&) = delete;
  GpuImages& operator=(const GpuImages&) = delete;

  // See ImageStore's private members of the same names.
  absl::Status Reserve(uint64_t bytes, const std::string& tenant) {
    return store_.Reserve(bytes, tenant);
  }
  absl::StatusOr<StoredImageInfo> Put(gpu::Image image, std::string label, std::string origin,
                                      std::string tenant) {
    return store_.Put(std::move(image), std::move(label), std::move(origin), std::move(tenant));
  }
  absl::StatusOr<StoredImageInfo> PutAs(gpu::Image image, StoredImageInfo meta) {
    return store_.PutAs(std::move(image), std::move(meta));
  }
  absl::StatusOr<const gpu::Image*> Use(const std::string& id, const std::string& tenant,
                                        StoredImageInfo* info = nullptr) {
    return store_.Use(id, tenant, info);
  }

 private:
  friend class GpuWorker;
  explicit GpuImages(ImageStore& store) : store_(store) {}
  void Collect() { store_.Collect(); }
  void Clear() { store_.Clear(); }
  ImageStore& store_;
};

class GpuEnv {
 public:
  GpuEnv(const GpuEnv&) = delete;
  GpuEnv& operator=(const GpuEnv&) = delete;

  gpu::Context& ctx;
  Kernels& kernels;
  GpuImages& images;

 private:
  friend class GpuWorker;
  GpuEnv(gpu::Context& c, Kernels& k, GpuImages& i) : ctx(c), kernels(k), images(i) {}
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_WORKER_GPU_ENV_H_
