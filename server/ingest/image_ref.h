// Images as the API names them: layouts and infos converted between the proto and gpu/, and the
// ImageRef of an analysis resolved in two steps (on the handler's thread, then on the worker).
//
//   // On the handler's thread (ResolveImageRef, server/store/shared_images.h, calls this):
//   absl::StatusOr<std::shared_ptr<const Input>> input = ReadImageRef(
//       request->image(), worker.device().limits, limits, worker.store(), call->record);
//   if (!input.ok()) return call->Answer(input.status());
//   // In the job, on the worker:
//   absl::StatusOr<std::unique_ptr<Acquired>> a = Acquire(env, **input, call->record);
//   if (!a.ok()) return a.status();
//   *response->mutable_image() = std::move((*a)->info);  // (*a)->image: the GPU image to analyse
#ifndef GLIMPSE_SERVER_INGEST_IMAGE_REF_H_
#define GLIMPSE_SERVER_INGEST_IMAGE_REF_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "gpu/image.h"
#include "server/ingest/decode.h"
#include "server/rpc/call.h"
#include "server/rpc/limits.h"
#include "server/rpc/wire.h"
#include "server/store/image_store.h"
#include "server/worker/gpu_env.h"

namespace glimpse::server {

v1::SampleFormat ToProto(gpu::SampleType t);
void FillInfo(const gpu::ImageDesc& d, v1::ImageInfo* info);
void FillInfo(const StoredImageInfo& s, v1::ImageInfo* info);

// A layout from the API, checked against the device and the server's limits.
absl::StatusOr<gpu::ImageDesc> DescFromLayout(const v1::ImageLayout& l, std::string_view field,
                                              const gpu::DeviceLimits& device,
                                              const ServiceLimits& limits);
// gpu/'s check of a decoded image's layout, its errors naming `field`.
absl::Status CheckDesc(const gpu::ImageDesc& d, std::string_view field,
                       const gpu::DeviceLimits& device);

// The input of an analysis as read on the handler's thread: an id (looked up in the store's
// catalogue, so its layout is known before the job is queued), or inline pixels, decoded there
// (they are small). Kept for the whole call, so later parts of a streamed result can find it.
struct Input {
  std::string image_id;
  // The id is a call's own copy of its image (Analyze), deleted when the call ends: responses
  // leave it out.
  bool anonymous = false;
  // Host pixels (desc, and rows in ImageDesc layout unless decoded straight into `widened` or
  // `staged`: then host->data is empty).
  std::optional<gpu::HostImage> host;
  // With `host`: its rows in staging memory (gpu/staging.h), laid out as `staged_rows`, written
  // there by the host thread that read them; uploaded from there as they are.
  gpu::StagingBlock staged;
  gpu::StagedRows staged_rows;
  // With `host`: its rows widened for the device's upload where it wants them so
  // (gpu::WidenForUpload), on the thread that read them rather than the GPU's.
  std::vector<uint8_t> widened;
  gpu::ImageDesc desc;
  // With `host`: an image fetched from the shared store (server/store/redis_store.h), put into the
  // GPU cache under its id by the first job that needs it, instead of being freed with the job.
  std::optional<StoredImageInfo> cache;
};
// An Input of host pixels, on the host thread that read them, with their rows widened for the
// device's upload where it wants them so (gpu::WidenForUpload): the one place that work is done,
// so that the GPU's thread only copies.
std::shared_ptr<Input> HostInput(gpu::HostImage host, const gpu::DeviceLimits& device);
// Raw pixels of a request (ImageDesc layout) made an Input: copied straight into staging memory
// in the upload's layout where `staging` has room and the image is worth it (WorthStaging), else
// as HostInput.
std::shared_ptr<Input> RawInput(const gpu::ImageDesc& desc, std::span<const uint8_t> pixels,
                                const gpu::DeviceLimits& device, gpu::StagingArena* staging);
// The same from the bytes where they arrived in the request, copied once.
std::shared_ptr<Input> RawInput(const gpu::ImageDesc& desc, const WireBytes& pixels,
                                const gpu::DeviceLimits& device, gpu::StagingArena* staging);
// An encoded file decoded into an Input on a host thread (DecodeEncodedFor: a 3-channel image goes
// straight into the device's widened rows where it takes them, host->data then empty), its
// layout checked against the device (errors naming `desc_field`), the decode's time and the
// image recorded. `field` names the bytes in the decoder's errors. Large images go into `staging`
// where it has room (DecodeEncodedFor). The file's EXIF orientation is applied or not as
// `orientation` says.
absl::StatusOr<std::shared_ptr<Input>> DecodedInput(
    std::span<const uint8_t> file, int desired_channels, ingest::Orientation orientation,
    const ServiceLimits& limits, const gpu::DeviceLimits& device, gpu::StagingArena* staging,
    std::string_view field, std::string_view desc_field, CallRecord& record);
// The host pixels of an Input that has them, in ImageDesc layout: its own, or narrowed from the
// widened rows it was decoded into (for the shared store, which keeps that layout).
std::shared_ptr<const gpu::HostImage> HostPixels(std::shared_ptr<const Input> in);

// `inline_bytes`: the bytes of an inline image (image.encoded.data or image.raw.data, then empty
// in `ref`) where they arrived in the request (ParseLeavingImageData), or nullptr.
absl::StatusOr<std::shared_ptr<const Input>> ReadImageRef(const v1::ImageRef& ref,
                                                          const gpu::DeviceLimits& device,
                                                          gpu::StagingArena* staging,
                                                          const ServiceLimits& limits,
                                                          ImageStore& store, CallRecord& record,
                                                          WireBytes* inline_bytes = nullptr);

// On the worker: the host pixels of `in` (REQUIRES in.host) uploaded, from staging memory where
// they are there, else from its rows (widened where made); the time recorded as the upload's.
absl::StatusOr<gpu::Image> UploadInput(GpuEnv& env, const Input& in, CallRecord& record);

// On the worker: the GPU image to analyse, and its info for the response.
struct Acquired {
  const gpu::Image* image = nullptr;
  gpu::Image owned;  // an inline image, freed with the job
  v1::ImageInfo info;
};
absl::StatusOr<std::unique_ptr<Acquired>> Acquire(GpuEnv& env, const Input& in, CallRecord& record);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_INGEST_IMAGE_REF_H_
