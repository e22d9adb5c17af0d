// Stored images across replicas: the GPU store of this replica as a cache in front of the shared
// store on Redis (server/store/redis_store.h), when there is one. Without one, every function here
// is the GPU store alone, answered on the calling thread. With one, Redis I/O runs on the store's
// host threads and the continuation runs there; the GPU worker never waits for Redis.
//
//   ResolveImageRef(service, request->image(), call->record,
//                   [call](absl::StatusOr<std::shared_ptr<const Input>> input) {
//                     if (!input.ok()) return call->Answer(input.status());
//                     // (*input)->desc is known: size the result, queue the job.
//                   });
//   DeleteEverywhere(service, id, call->record.tenant(), [call](absl::StatusOr<uint64_t> freed) {
//     call->Answer(freed.status());
//   });
#ifndef GLIMPSE_SERVER_STORE_SHARED_IMAGES_H_
#define GLIMPSE_SERVER_STORE_SHARED_IMAGES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "server/ingest/image_ref.h"
#include "server/rpc/call.h"

namespace glimpse::server {

struct ServiceEnv;

using InputReady = std::function<void(absl::StatusOr<std::shared_ptr<const Input>>)>;

// Every id is looked up among the images of one tenant (the call's, CallRecord::tenant): another
// tenant's id answers NOT_FOUND as an unknown one does, in the GPU cache and the shared store.

// The input of an analysis (ReadImageRef), an id checked against the shared store: a deleted or
// expired id is NOT_FOUND here too (and leaves the cache), a use renews its expiry, and an id this
// replica does not hold is fetched for the GPU cache. With Redis unreachable, an id in the cache
// still serves; one that is not answers UNAVAILABLE naming Redis. An encoded image is decoded on
// the service's host pool, and `next` runs there. `inline_bytes`: the bytes of `ref`'s inline
// image where they were left in the received request (ParseLeavingImageData), else nullptr.
// REQUIRES: `ref`, `inline_bytes` and `record` live until `next` has run (the call is not
// answered before).
void ResolveImageRef(ServiceEnv& service, const v1::ImageRef& ref, CallRecord& record,
                     InputReady next, WireBytes* inline_bytes = nullptr);

// Writes a newly stored image to the shared store (nothing without one), then calls `done`. On
// failure the image also leaves the GPU cache, so no replica serves what others cannot.
void ShareImage(ServiceEnv& service, const StoredImageInfo& info,
                std::shared_ptr<const gpu::HostImage> pixels,
                std::function<void(absl::Status)> done);
// The same for an Input's host pixels (HostPixels: narrowed there, on the store's pool, when it
// was decoded straight into the device's widened rows).
void ShareImage(ServiceEnv& service, const StoredImageInfo& info, std::shared_ptr<const Input> in,
                std::function<void(absl::Status)> done);

// The catalogue calls: GetImageInfo, ListImages, DeleteImage.
void ImageInfoOf(ServiceEnv& service, const std::string& id, const std::string& tenant,
                 std::function<void(absl::StatusOr<StoredImageInfo>)> done);
// The tenant's images.
void ListAllImages(ServiceEnv& service, const std::string& tenant,
                   std::function<void(absl::StatusOr<std::vector<StoredImageInfo>>)> done);
// The bytes freed.
void DeleteEverywhere(ServiceEnv& service, const std::string& id, const std::string& tenant,
                      std::function<void(absl::StatusOr<uint64_t>)> done);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_STORE_SHARED_IMAGES_H_
