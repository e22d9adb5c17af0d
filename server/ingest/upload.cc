#include "server/ingest/upload.h"

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/str.h"
#include "server/ingest/image_codec.h"
#include "server/ingest/image_ref.h"
#include "server/rpc/status_util.h"
#include "server/rpc/wire.h"
#include "server/store/shared_images.h"

namespace glimpse::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Reads the stream on gRPC's threads, decodes on a host thread, stores on the worker.
class UploadReactor : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  UploadReactor(ServiceEnv& service, grpc::CallbackServerContext* context,
                v1::UploadImageResponse* response)
      : record("UploadImage"),
        service_(service),
        context_(context),
        response_(response),
        buffer_(service.limits, service.worker.device().limits, service.worker.staging(),
                "header") {
    if (absl::Status s = Admit(service, context, record); !s.ok()) {
      Answer(s);
      return;
    }
    // Storing the image is a GPU job: it takes a token, before any byte is read.
    TakeRateToken(service, record, [this](absl::Status rated) {
      if (!rated.ok()) return Answer(rated);
      StartRead(&wire_);
    });
  }

  // For the runner.
  CallRecord record;
  bool cancelled() const { return cancelled_.get(); }
  void Answer(const absl::Status& status) {
    *response_->mutable_timing() = record.Timing();
    const grpc::Status g = ToGrpcStatus(status);
    record.Log(g);
    Finish(g);
  }

 private:
  void OnReadDone(bool ok) override {
    if (!ok) {
      // A read also fails when the client cancels or goes away: nothing is decoded or queued
      // for it, and the bytes received are freed with the call.
      if (context_->IsCancelled()) return Answer(CancelledMidUpload(buffer_.received()));
      Received();  // the client has sent everything
      return;
    }
    if (absl::Status s = Take(); !s.ok()) return Answer(s);
    StartRead(&wire_);
  }

  // Takes one message of the stream.
  absl::Status Take() {
    if (absl::Status s =
            ParseMessage(wire_, StrCat("message ", messages_ + 1, " of the stream"), &request_);
        !s.ok()) {
      return s;
    }
    wire_.Clear();
    if (messages_++ == 0) {
      if (!request_.has_header()) {
        return absl::InvalidArgumentError(
            "header must be set in the first UploadImageRequest (encoded or raw)");
      }
      if (absl::Status s = buffer_.SetHeader(request_.header(), record); !s.ok()) return s;
    } else if (request_.has_header()) {
      return absl::InvalidArgumentError(
          StrCat("header must be sent only in the first message; message ", messages_, " has one"));
    }
    return buffer_.Append(request_.chunk());
  }

  // The stream is complete: decode on a host thread, then store on the GPU.
  void Received() {
    if (messages_ == 0) {
      return Answer(absl::InvalidArgumentError(
          "the upload stream had no header: it ended before its first message"));
    }
    if (absl::Status s = buffer_.Complete(); !s.ok()) return Answer(s);
    service_.pool.Post([this] { Decode(); });
  }

  void Decode() {
    absl::StatusOr<std::shared_ptr<Input>> read = buffer_.TakeImage(record);
    if (!read.ok()) return Answer(read.status());
    Submit(service_.worker, this, "UploadImage", context_->deadline(), 0,
           [this, in = *std::move(read)](GpuEnv& env, Lease) -> absl::Status {
             StoredImageInfo meta;
             meta.label = buffer_.header().label();
             meta.origin = "upload";
             absl::StatusOr<StoredImageInfo> stored =
                 StoreHostImage(env, *in, std::move(meta), record);
             if (!stored.ok()) return stored.status();
             FillInfo(*stored, response_->mutable_image());
             ShareImage(service_, *stored, in, [this](absl::Status s) { Answer(s); });
             return absl::OkStatus();
           });
  }

  void OnCancel() override { cancelled_.Set(); }
  void OnDone() override { delete this; }

  ServiceEnv& service_;
  grpc::CallbackServerContext* context_;
  v1::UploadImageResponse* response_;
  grpc::ByteBuffer wire_;  // the message being read, as received
  v1::UploadImageRequest request_;
  UploadBuffer buffer_;
  int64_t messages_ = 0;
  CancelFlag cancelled_;
};

}  // namespace

UploadBuffer::UploadBuffer(const ServiceLimits& limits, const gpu::DeviceLimits& device,
                           gpu::StagingArena* staging, std::string field)
    : limits_(limits), device_(device), staging_(staging), field_(std::move(field)) {}

absl::Status UploadBuffer::SetHeader(const v1::UploadHeader& header, CallRecord& record) {
  header_ = header;
  if (header_.total_bytes() > limits_.max_upload_bytes) {
    return absl::ResourceExhaustedError(
        StrCat(field_, ".total_bytes is ", header_.total_bytes(), ", over the server's limit of ",
               limits_.max_upload_bytes, " bytes per upload (--max-upload-bytes)"));
  }
  switch (header_.kind_case()) {
    case v1::UploadHeader::kEncoded: {
      if (absl::Status s = CheckDesiredChannels(header_.encoded().desired_channels(),
                                                StrCat(field_, ".encoded.desired_channels"));
          !s.ok()) {
        return s;
      }
      absl::StatusOr<ingest::Orientation> orientation =
          OrientationFrom(header_.encoded().orientation(), StrCat(field_, ".encoded.orientation"));
      if (!orientation.ok()) return orientation.status();
      orientation_ = *orientation;
      return absl::OkStatus();
    }
    case v1::UploadHeader::kRaw: {
      absl::StatusOr<gpu::ImageDesc> desc =
          DescFromLayout(header_.raw(), StrCat(field_, ".raw"), device_, limits_);
      if (!desc.ok()) return desc.status();
      raw_desc_ = *desc;
      if (raw_desc_.bytes() > limits_.max_upload_bytes) {
        return absl::ResourceExhaustedError(StrCat(
            field_, ".raw describes ", raw_desc_.bytes(), " bytes of pixels, over the server's ",
            "limit of ", limits_.max_upload_bytes, " bytes per upload (--max-upload-bytes)"));
      }
      data_.reserve(raw_desc_.bytes());
      record.set_image(gpu::DescribeImage(raw_desc_));
      return absl::OkStatus();
    }
    case v1::UploadHeader::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(StrCat(field_, " must set encoded or raw"));
}

absl::Status UploadBuffer::Append(const std::string& chunk) {
  if (data_.size() + chunk.size() > limits_.max_upload_bytes) {
    return absl::ResourceExhaustedError(StrCat("upload exceeds the server's limit of ",
                                               limits_.max_upload_bytes,
                                               " bytes per upload (--max-upload-bytes)"));
  }
  if (header_.has_raw() && data_.size() + chunk.size() > raw_desc_.bytes()) {
    return absl::InvalidArgumentError(StrCat("raw upload has more bytes than ", field_, ".raw (",
                                             gpu::DescribeImage(raw_desc_),
                                             ") needs: ", raw_desc_.bytes()));
  }
  data_.append(chunk);
  return absl::OkStatus();
}

absl::Status UploadBuffer::Complete() const {
  if (header_.total_bytes() != 0 && header_.total_bytes() != data_.size()) {
    return absl::InvalidArgumentError(StrCat(field_, ".total_bytes is ", header_.total_bytes(),
                                             " but ", data_.size(),
                                             " bytes arrived (truncated upload?)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Input>> UploadBuffer::TakeImage(CallRecord& record) {
  std::shared_ptr<Input> in;
  if (header_.has_raw()) {
    if (data_.size() != raw_desc_.bytes()) {
      return absl::InvalidArgumentError(StrCat("raw upload has ", data_.size(), " bytes but ",
                                               field_, ".raw (", gpu::DescribeImage(raw_desc_),
                                               ") needs ", raw_desc_.bytes()));
    }
    in =
        RawInput(raw_desc_, std::span(reinterpret_cast<const uint8_t*>(data_.data()), data_.size()),
                 device_, staging_);
  } else {
    absl::StatusOr<std::shared_ptr<Input>> decoded =
        DecodedInput(std::span(reinterpret_cast<const uint8_t*>(data_.data()), data_.size()),
                     int(header_.encoded().desired_channels()), orientation_, limits_, device_,
                     staging_, "uploaded file", "uploaded file", record);
    if (!decoded.ok()) return decoded.status();
    in = *std::move(decoded);
  }
  std::string().swap(data_);
  return in;
}

absl::Status CancelledMidUpload(uint64_t received_bytes) {
  return absl::CancelledError(StrCat("the client cancelled the upload stream after ",
                                     received_bytes, " bytes; nothing was stored"));
}

absl::StatusOr<StoredImageInfo> StoreHostImage(GpuEnv& env, const Input& in, StoredImageInfo meta,
                                               CallRecord& record) {
  const gpu::HostImage& host = *in.host;
  meta.tenant = record.tenant();
  if (absl::Status s = env.images.Reserve(host.desc.bytes(), meta.tenant); !s.ok()) return s;
  absl::StatusOr<gpu::Image> image = UploadInput(env, in, record);
  if (!image.ok()) return image.status();
  absl::StatusOr<StoredImageInfo> stored = env.images.PutAs(*std::move(image), std::move(meta));
  if (!stored.ok()) return stored.status();
  record.set_image(StrCat(stored->id.substr(0, 8), ":", gpu::DescribeImage(stored->desc)));
  return stored;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* ServeUpload(ServiceEnv& service,
                                                       grpc::CallbackServerContext* context,
                                                       v1::UploadImageResponse* response) {
  return new UploadReactor(service, context, response);
}

}  // namespace glimpse::server
