// UploadImage: a client stream of an encoded file or raw pixels, stored on the GPU. The stream's
// assembly and the storing are shared with Analyze, which takes an upload stream too.
//
//   UploadBuffer upload(limits, worker.device().limits, worker.staging(), "header");
//   // The stream's first message, then every message's bytes:
//   if (absl::Status s = upload.SetHeader(request.header(), record); !s.ok()) return s;
//   if (absl::Status s = upload.Append(request.chunk()); !s.ok()) return s;
//   // Once it has ended, on a host thread:
//   if (absl::Status s = upload.Complete(); !s.ok()) return s;
//   absl::StatusOr<std::shared_ptr<Input>> in = upload.TakeImage(record);
//   if (!in.ok()) return in.status();
//   // Then, on the worker: StoreHostImage(env, **in, StoredImageInfo{}, record).
#ifndef GLIMPSE_SERVER_INGEST_UPLOAD_H_
#define GLIMPSE_SERVER_INGEST_UPLOAD_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "gpu/image.h"
#include "server/analyses/runner.h"
#include "server/ingest/decode.h"
#include "server/ingest/image_ref.h"
#include "server/rpc/call.h"
#include "server/rpc/limits.h"
#include "server/worker/gpu_env.h"

namespace glimpse::server {

// An upload stream's header and bytes, checked against the limits as they arrive. `field` names
// the header in errors ("header", "header.upload").
class UploadBuffer {
 public:
  // `staging` (may be null): where large images are decoded or copied to (DecodedInput, RawInput).
  UploadBuffer(const ServiceLimits& limits, const gpu::DeviceLimits& device,
               gpu::StagingArena* staging, std::string field);

  absl::Status SetHeader(const v1::UploadHeader& header, CallRecord& record);
  absl::Status Append(const std::string& chunk);
  // Checks the total once the stream has ended.
  absl::Status Complete() const;
  // The pixels: raw bytes checked against the layout, or the file decoded, made an Input
  // (HostInput: widened for the device where it wants them so). Host work. Frees the bytes.
  absl::StatusOr<std::shared_ptr<Input>> TakeImage(CallRecord& record);
  const v1::UploadHeader& header() const { return header_; }
  uint64_t received() const { return data_.size(); }

 private:
  const ServiceLimits& limits_;
  const gpu::DeviceLimits& device_;
  gpu::StagingArena* const staging_;
  const std::string field_;
  v1::UploadHeader header_;
  gpu::ImageDesc raw_desc_;
  ingest::Orientation orientation_ = ingest::Orientation::kFromFile;  // an encoded file's
  std::string data_;
};

// The answer to an upload stream the client cancelled (or dropped) before it ended.
absl::Status CancelledMidUpload(uint64_t received_bytes);

// On the worker: uploads the host pixels of `in` (REQUIRES in.host; its widened rows where made)
// and stores them with `meta`'s id (a new one when empty), label, origin and creation time (now
// when unset), as the image of the call's tenant.
absl::StatusOr<StoredImageInfo> StoreHostImage(GpuEnv& env, const Input& in, StoredImageInfo meta,
                                               CallRecord& record);

grpc::ServerReadReactor<grpc::ByteBuffer>* ServeUpload(ServiceEnv& service,
                                                       grpc::CallbackServerContext* context,
                                                       v1::UploadImageResponse* response);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_INGEST_UPLOAD_H_
