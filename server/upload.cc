#include "server/upload.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "gpu/str.h"
#include "server/image_codec.h"
#include "server/image_ref.h"
#include "server/status_util.h"

namespace glimpse::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

uint64_t NsSince(SteadyClock::time_point t0) {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - t0).count());
}

// Reads the stream on gRPC's threads, decodes on a host thread, stores on the worker.
class UploadReactor : public grpc::ServerReadReactor<v1::UploadImageRequest> {
 public:
  UploadReactor(ServiceEnv& service, grpc::CallbackServerContext* context,
                v1::UploadImageResponse* response)
      : record("UploadImage"), service_(service), context_(context), response_(response) {
    StartRead(&request_);
  }

  // For the runner.
  CallRecord record;
  bool cancelled() const { return cancelled_.load(); }
  void Answer(const absl::Status& status) {
    *response_->mutable_timing() = record.Timing();
    const grpc::Status g = ToGrpcStatus(status);
    record.Log(g);
    Finish(g);
  }

 private:
  void OnReadDone(bool ok) override {
    if (!ok) {  // the client has sent everything
      Received();
      return;
    }
    if (absl::Status s = Take(); !s.ok()) return Answer(s);
    request_.Clear();
    StartRead(&request_);
  }

  // Takes one message of the stream.
  absl::Status Take() {
    const ServiceLimits& limits = service_.limits;
    if (messages_++ == 0) {
      if (!request_.has_header()) {
        return absl::InvalidArgumentError(
            "header must be set in the first UploadImageRequest (encoded or raw)");
      }
      header_ = request_.header();
      if (header_.total_bytes() > limits.max_upload_bytes) {
        return absl::ResourceExhaustedError(
            StrCat("header.total_bytes is ", header_.total_bytes(), ", over the server's limit of ",
                   limits.max_upload_bytes, " bytes per upload (--max-upload-bytes)"));
      }
      switch (header_.kind_case()) {
        case v1::UploadHeader::kEncoded:
          if (header_.encoded().desired_channels() > 4) {
            return absl::InvalidArgumentError(
                StrCat("header.encoded.desired_channels must be in [0, 4], got ",
                       header_.encoded().desired_channels()));
          }
          break;
        case v1::UploadHeader::kRaw: {
          absl::StatusOr<gpu::ImageDesc> desc =
              DescFromLayout(header_.raw(), "header.raw", service_.worker.device().limits, limits);
          if (!desc.ok()) return desc.status();
          raw_desc_ = *desc;
          if (raw_desc_.bytes() > limits.max_upload_bytes) {
            return absl::ResourceExhaustedError(StrCat(
                "header.raw describes ", raw_desc_.bytes(), " bytes of pixels, over the server's ",
                "limit of ", limits.max_upload_bytes, " bytes per upload (--max-upload-bytes)"));
          }
          data_.reserve(raw_desc_.bytes());
          record.set_image(gpu::DescribeImage(raw_desc_));
          break;
        }
        case v1::UploadHeader::KIND_NOT_SET:
          return absl::InvalidArgumentError("header must set encoded or raw");
      }
    } else if (request_.has_header()) {
      return absl::InvalidArgumentError(
          StrCat("header must be sent only in the first message; message ", messages_, " has one"));
    }
    const std::string& chunk = request_.chunk();
    if (data_.size() + chunk.size() > limits.max_upload_bytes) {
      return absl::ResourceExhaustedError(StrCat("upload exceeds the server's limit of ",
                                                 limits.max_upload_bytes,
                                                 " bytes per upload (--max-upload-bytes)"));
    }
    if (header_.has_raw() && data_.size() + chunk.size() > raw_desc_.bytes()) {
      return absl::InvalidArgumentError(StrCat("raw upload has more bytes than header.raw (",
                                               gpu::DescribeImage(raw_desc_),
                                               ") needs: ", raw_desc_.bytes()));
    }
    data_.append(chunk);
    return absl::OkStatus();
  }

  // The stream is complete: decode on a host thread, then store on the GPU.
  void Received() {
    if (messages_ == 0) {
      return Answer(absl::InvalidArgumentError("the upload stream was empty: no header"));
    }
    if (header_.total_bytes() != 0 && header_.total_bytes() != data_.size()) {
      return Answer(absl::InvalidArgumentError(StrCat("header.total_bytes is ",
                                                      header_.total_bytes(), " but ", data_.size(),
                                                      " bytes arrived (truncated upload?)")));
    }
    service_.pool.Post([this] { Decode(); });
  }

  void Decode() {
    auto host = std::make_shared<gpu::HostImage>();
    if (header_.has_raw()) {
      if (data_.size() != raw_desc_.bytes()) {
        return Answer(absl::InvalidArgumentError(
            StrCat("raw upload has ", data_.size(), " bytes but header.raw (",
                   gpu::DescribeImage(raw_desc_), ") needs ", raw_desc_.bytes())));
      }
      host->desc = raw_desc_;
      host->data.assign(data_.begin(), data_.end());
    } else {
      const SteadyClock::time_point t0 = SteadyClock::now();
      absl::StatusOr<gpu::HostImage> decoded =
          DecodeEncoded(std::span(reinterpret_cast<const uint8_t*>(data_.data()), data_.size()),
                        int(header_.encoded().desired_channels()), service_.limits.max_image_pixels,
                        "uploaded file");
      if (!decoded.ok()) return Answer(decoded.status());
      record.set_decode_ns(NsSince(t0));
      record.set_image(gpu::DescribeImage(decoded->desc));
      if (absl::Status s =
              CheckDesc(decoded->desc, "uploaded file", service_.worker.device().limits);
          !s.ok()) {
        return Answer(s);
      }
      *host = *std::move(decoded);
    }
    std::string().swap(data_);
    Submit(
        service_.worker, this, "UploadImage", context_->deadline(), 0,
        [this, host](GpuEnv& env, Lease) -> absl::Status {
          if (absl::Status s = env.images.Reserve(host->desc.bytes()); !s.ok()) return s;
          const SteadyClock::time_point t0 = SteadyClock::now();
          absl::StatusOr<gpu::Image> image = gpu::Image::Upload(env.ctx, *host);
          if (!image.ok()) return image.status();
          record.set_upload_ns(NsSince(t0));
          absl::StatusOr<StoredImageInfo> stored =
              env.images.Put(*std::move(image), header_.label(), "upload");
          if (!stored.ok()) return stored.status();
          FillInfo(*stored, response_->mutable_image());
          record.set_image(StrCat(stored->id.substr(0, 8), ":", gpu::DescribeImage(stored->desc)));
          Answer(absl::OkStatus());
          return absl::OkStatus();
        });
  }

  void OnCancel() override { cancelled_ = true; }
  void OnDone() override { delete this; }

  ServiceEnv& service_;
  grpc::CallbackServerContext* context_;
  v1::UploadImageResponse* response_;
  v1::UploadImageRequest request_;
  v1::UploadHeader header_;
  gpu::ImageDesc raw_desc_;
  std::string data_;
  int64_t messages_ = 0;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

grpc::ServerReadReactor<v1::UploadImageRequest>* ServeUpload(ServiceEnv& service,
                                                             grpc::CallbackServerContext* context,
                                                             v1::UploadImageResponse* response) {
  return new UploadReactor(service, context, response);
}

}  // namespace glimpse::server
