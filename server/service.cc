#include "server/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gpu/str.h"
#include "server/call.h"
#include "server/image_codec.h"
#include "server/status_util.h"

namespace glimpse::server {
namespace {

using std::chrono::nanoseconds;
using SteadyClock = std::chrono::steady_clock;

constexpr char kVersion[] = GLIMPSE_VERSION;  // the CMake project version

uint64_t NsSince(SteadyClock::time_point t0) {
  return uint64_t(std::chrono::duration_cast<nanoseconds>(SteadyClock::now() - t0).count());
}

int64_t UnixMs(std::chrono::system_clock::time_point t) {
  if (t == std::chrono::system_clock::time_point{}) return 0;
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// ---- conversions between the API and gpu/ -------------------------------------------------

v1::SampleFormat ToProto(gpu::SampleType t) {
  switch (t) {
    case gpu::SampleType::kUint8:
      return v1::SAMPLE_FORMAT_UINT8;
    case gpu::SampleType::kUint16:
      return v1::SAMPLE_FORMAT_UINT16;
    case gpu::SampleType::kFloat32:
      return v1::SAMPLE_FORMAT_FLOAT32;
  }
  return v1::SAMPLE_FORMAT_UNSPECIFIED;
}

absl::StatusOr<gpu::SampleType> FromProto(v1::SampleFormat f, std::string_view field) {
  switch (f) {
    case v1::SAMPLE_FORMAT_UINT8:
      return gpu::SampleType::kUint8;
    case v1::SAMPLE_FORMAT_UINT16:
      return gpu::SampleType::kUint16;
    case v1::SAMPLE_FORMAT_FLOAT32:
      return gpu::SampleType::kFloat32;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      StrCat(field, " must be SAMPLE_FORMAT_UINT8, _UINT16 or _FLOAT32, got ", int(f)));
}

void FillInfo(const gpu::ImageDesc& d, v1::ImageInfo* info) {
  info->set_width(uint32_t(d.width));
  info->set_height(uint32_t(d.height));
  info->set_channels(uint32_t(d.channels));
  info->set_format(ToProto(d.type));
  info->set_bytes(d.bytes());
}

void FillInfo(const StoredImageInfo& s, v1::ImageInfo* info) {
  FillInfo(s.desc, info);
  info->set_image_id(s.id);
  info->set_bytes(s.bytes);
  info->set_label(s.label);
  info->set_origin(s.origin);
  info->set_created_unix_ms(UnixMs(s.created));
  info->set_last_used_unix_ms(UnixMs(s.last_used));
  info->set_expires_unix_ms(UnixMs(s.expires));
}

// A layout from the API, checked against the device and the server's limits.
absl::StatusOr<gpu::ImageDesc> DescFromLayout(const v1::ImageLayout& l, std::string_view field,
                                              const gpu::DeviceLimits& device,
                                              const ServiceLimits& limits) {
  absl::StatusOr<gpu::SampleType> type = FromProto(l.format(), StrCat(field, ".format"));
  if (!type.ok()) return type.status();
  if (l.width() == 0 || l.height() == 0) {
    return absl::InvalidArgumentError(
        StrCat(field, ".width and .height must be at least 1, got ", l.width(), "x", l.height()));
  }
  if (l.channels() < 1 || l.channels() > 4) {
    return absl::InvalidArgumentError(
        StrCat(field, ".channels must be in [1, 4], got ", l.channels()));
  }
  const uint64_t pixels = uint64_t{l.width()} * l.height();
  if (pixels > limits.max_image_pixels) {
    return absl::ResourceExhaustedError(StrCat(field, " is ", l.width(), "x", l.height(), " = ",
                                               pixels, " pixels, over the server's limit of ",
                                               limits.max_image_pixels, " (--max-image-pixels)"));
  }
  const int max = device.max_texture_size;
  if (l.width() > uint32_t(max) || l.height() > uint32_t(max)) {
    return absl::InvalidArgumentError(StrCat(field, " is ", l.width(), "x", l.height(),
                                             "; the device's largest image side is ", max));
  }
  return gpu::ImageDesc{.width = int(l.width()),
                        .height = int(l.height()),
                        .channels = int(l.channels()),
                        .type = *type};
}

absl::Status CheckDesc(const gpu::ImageDesc& d, std::string_view field,
                       const gpu::DeviceLimits& device) {
  return Annotate(gpu::ValidateImageDesc(d, device), field);
}

// Every name the parser accepts, for error messages.
template <typename Enum, typename NameFn, typename ParseFn>
std::string VariantList(NameFn name, ParseFn parse) {
  std::string out = "auto";
  for (int i = 1; i < 32; ++i) {
    const Enum e = static_cast<Enum>(i);
    const std::string_view n = name(e);
    if (n.empty() || n == "auto") continue;
    std::optional<Enum> back = parse(n);
    if (back && *back == e) StrAppend(&out, ", ", n);
  }
  return out;
}

template <typename Enum, typename NameFn, typename ParseFn>
absl::StatusOr<Enum> ParseVariant(const std::string& s, std::string_view kernel, NameFn name,
                                  ParseFn parse) {
  std::optional<Enum> v = parse(s);
  if (!v) {
    return absl::InvalidArgumentError(StrCat("variant must be one of ",
                                             VariantList<Enum>(name, parse), " for ", kernel,
                                             ", got \"", s, "\""));
  }
  return *v;
}

// ---- the input image of an analysis ---------------------------------------------------------

// Read on the handler's thread: an id, or inline pixels (decoded here; they are small).
struct Input {
  std::string image_id;
  std::optional<gpu::HostImage> host;
};

absl::StatusOr<std::shared_ptr<Input>> ReadImageRef(const v1::ImageRef& ref,
                                                    const gpu::DeviceLimits& device,
                                                    const ServiceLimits& limits,
                                                    CallRecord& record) {
  auto in = std::make_shared<Input>();
  switch (ref.source_case()) {
    case v1::ImageRef::kImageId:
      in->image_id = ref.image_id();
      record.set_image(ref.image_id());
      return in;
    case v1::ImageRef::kEncoded: {
      const std::string& data = ref.encoded().data();
      const SteadyClock::time_point t0 = SteadyClock::now();
      absl::StatusOr<gpu::HostImage> host =
          DecodeEncoded(std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
                        int(std::min<uint32_t>(ref.encoded().desired_channels(), 100)),
                        limits.max_image_pixels, "image.encoded.data");
      if (!host.ok()) return host.status();
      record.set_decode_ns(NsSince(t0));
      if (absl::Status s = CheckDesc(host->desc, "image.encoded", device); !s.ok()) return s;
      record.set_image(gpu::DescribeImage(host->desc));
      in->host = *std::move(host);
      return in;
    }
    case v1::ImageRef::kRaw: {
      absl::StatusOr<gpu::ImageDesc> desc =
          DescFromLayout(ref.raw().layout(), "image.raw.layout", device, limits);
      if (!desc.ok()) return desc.status();
      const std::string& data = ref.raw().data();
      if (data.size() != desc->bytes()) {
        return absl::InvalidArgumentError(
            StrCat("image.raw.data has ", data.size(), " bytes but image.raw.layout (",
                   gpu::DescribeImage(*desc), ") needs ", desc->bytes()));
      }
      gpu::HostImage host{*desc, std::vector<uint8_t>(data.begin(), data.end())};
      record.set_image(gpu::DescribeImage(*desc));
      in->host = std::move(host);
      return in;
    }
    case v1::ImageRef::SOURCE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("image must be set: an image_id, encoded or raw");
}

// On the worker: the GPU image to analyse, and its info for the response.
struct Acquired {
  const gpu::Image* image = nullptr;
  gpu::Image owned;  // an inline image, freed with the job
  v1::ImageInfo info;
};

absl::Status Acquire(GpuEnv& env, Input& in, Acquired& out, CallRecord& record) {
  if (in.host) {
    const SteadyClock::time_point t0 = SteadyClock::now();
    absl::StatusOr<gpu::Image> image = gpu::Image::Upload(env.ctx, *in.host);
    if (!image.ok()) return image.status();
    record.set_upload_ns(NsSince(t0));
    out.owned = *std::move(image);
    out.image = &out.owned;
    FillInfo(out.owned.desc(), &out.info);
    in.host.reset();
    return absl::OkStatus();
  }
  StoredImageInfo info;
  absl::StatusOr<const gpu::Image*> image = env.store.Use(in.image_id, &info);
  if (!image.ok()) return image.status();
  out.image = *image;
  FillInfo(info, &out.info);
  record.set_image(StrCat(info.id.substr(0, 8), ":", gpu::DescribeImage(info.desc)));
  return absl::OkStatus();
}

// Queues `run` for `call`: answered with the error if the queue refuses it or drops it unrun.
template <typename Call>
void Submit(GpuWorker& worker, Call* call, grpc::CallbackServerContext* context, std::string method,
            std::function<void(GpuEnv&)> run) {
  Job job;
  job.method = std::move(method);
  job.run = [call, run = std::move(run)](GpuEnv& env, nanoseconds queued) {
    call->record.set_queue(queued);
    run(env);
  };
  auto answer = [call](const absl::Status& s) {
    if constexpr (std::is_same_v<Call, UnaryCall>) {
      call->Answer(s);
    } else {
      call->Close(s);
    }
  };
  job.drop = answer;
  job.cancelled = [call] { return call->cancelled(); };
  job.deadline = context->deadline();
  if (absl::Status s = worker.Enqueue(std::move(job)); !s.ok()) answer(s);
}

// Splits `bytes` into chunks of at most `chunk` bytes, calling emit(offset, piece).
[[maybe_unused]] absl::Status ForEachChunk(
    std::string_view bytes, size_t chunk,
    const std::function<absl::Status(size_t, std::string_view)>& emit) {
  for (size_t off = 0; off < bytes.size(); off += chunk) {
    if (absl::Status s = emit(off, bytes.substr(off, chunk)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// ---- UploadImage ----------------------------------------------------------------------------

class UploadReactor : public grpc::ServerReadReactor<v1::UploadImageRequest> {
 public:
  UploadReactor(ImageAnalyticsService& service, grpc::CallbackServerContext* context,
                v1::UploadImageResponse* response)
      : service_(service), context_(context), response_(response), record_("UploadImage") {
    StartRead(&request_);
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
    const ServiceLimits& limits = service_.limits();
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
          absl::StatusOr<gpu::ImageDesc> desc = DescFromLayout(
              header_.raw(), "header.raw", service_.worker().device().limits, limits);
          if (!desc.ok()) return desc.status();
          raw_desc_ = *desc;
          if (raw_desc_.bytes() > limits.max_upload_bytes) {
            return absl::ResourceExhaustedError(StrCat(
                "header.raw describes ", raw_desc_.bytes(), " bytes of pixels, over the server's ",
                "limit of ", limits.max_upload_bytes, " bytes per upload (--max-upload-bytes)"));
          }
          data_.reserve(raw_desc_.bytes());
          record_.set_image(gpu::DescribeImage(raw_desc_));
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
    service_.pool().Post([this] { Decode(); });
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
                        int(header_.encoded().desired_channels()),
                        service_.limits().max_image_pixels, "uploaded file");
      if (!decoded.ok()) return Answer(decoded.status());
      record_.set_decode_ns(NsSince(t0));
      record_.set_image(gpu::DescribeImage(decoded->desc));
      if (absl::Status s =
              CheckDesc(decoded->desc, "uploaded file", service_.worker().device().limits);
          !s.ok()) {
        return Answer(s);
      }
      *host = *std::move(decoded);
    }
    std::string().swap(data_);
    Job job;
    job.method = "UploadImage";
    job.run = [this, host](GpuEnv& env, nanoseconds queued) {
      record_.set_queue(queued);
      if (absl::Status s = env.store.Reserve(host->desc.bytes()); !s.ok()) return Answer(s);
      const SteadyClock::time_point t0 = SteadyClock::now();
      absl::StatusOr<gpu::Image> image = gpu::Image::Upload(env.ctx, *host);
      if (!image.ok()) return Answer(image.status());
      record_.set_upload_ns(NsSince(t0));
      absl::StatusOr<StoredImageInfo> stored =
          env.store.Put(*std::move(image), header_.label(), "upload");
      if (!stored.ok()) return Answer(stored.status());
      FillInfo(*stored, response_->mutable_image());
      record_.set_image(StrCat(stored->id.substr(0, 8), ":", gpu::DescribeImage(stored->desc)));
      Answer(absl::OkStatus());
    };
    job.drop = [this](const absl::Status& s) { Answer(s); };
    job.cancelled = [this] { return cancelled_.load(); };
    job.deadline = context_->deadline();
    if (absl::Status s = service_.worker().Enqueue(std::move(job)); !s.ok()) Answer(s);
  }

  void Answer(const absl::Status& status) {
    *response_->mutable_timing() = record_.Timing();
    const grpc::Status g = ToGrpcStatus(status);
    record_.Log(g);
    Finish(g);
  }
  void OnCancel() override { cancelled_ = true; }
  void OnDone() override { delete this; }

  ImageAnalyticsService& service_;
  grpc::CallbackServerContext* context_;
  v1::UploadImageResponse* response_;
  CallRecord record_;
  v1::UploadImageRequest request_;
  v1::UploadHeader header_;
  gpu::ImageDesc raw_desc_;
  std::string data_;
  int64_t messages_ = 0;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

ImageAnalyticsService::ImageAnalyticsService(GpuWorker& worker, const ServiceLimits& limits)
    : worker_(worker), limits_(limits), started_(SteadyClock::now()), pool_(4) {}

ImageAnalyticsService::~ImageAnalyticsService() = default;

grpc::ServerReadReactor<v1::UploadImageRequest>* ImageAnalyticsService::UploadImage(
    grpc::CallbackServerContext* context, v1::UploadImageResponse* response) {
  return new UploadReactor(*this, context, response);
}

grpc::ServerUnaryReactor* ImageAnalyticsService::GetImageInfo(
    grpc::CallbackServerContext*, const v1::GetImageInfoRequest* request, v1::ImageInfo* response) {
  auto* call = new UnaryCall("GetImageInfo");
  call->record.set_image(request->image_id());
  absl::StatusOr<StoredImageInfo> info = worker_.store().Info(request->image_id());
  if (info.ok()) FillInfo(*info, response);
  call->Answer(info.status());
  return call;
}

grpc::ServerUnaryReactor* ImageAnalyticsService::ListImages(grpc::CallbackServerContext*,
                                                            const v1::ListImagesRequest*,
                                                            v1::ListImagesResponse* response) {
  auto* call = new UnaryCall("ListImages");
  uint64_t bytes = 0;
  for (const StoredImageInfo& info : worker_.store().List()) {
    FillInfo(info, response->add_images());
    bytes += info.bytes;
  }
  response->set_stored_bytes(bytes);
  response->set_budget_bytes(worker_.store().budget());
  call->Answer(absl::OkStatus());
  return call;
}

grpc::ServerUnaryReactor* ImageAnalyticsService::DeleteImage(grpc::CallbackServerContext*,
                                                             const v1::DeleteImageRequest* request,
                                                             v1::DeleteImageResponse* response) {
  auto* call = new UnaryCall("DeleteImage");
  call->record.set_image(request->image_id());
  // The texture itself is freed by the worker thread at its next turn.
  absl::StatusOr<uint64_t> freed = worker_.store().Erase(request->image_id());
  if (freed.ok()) response->set_freed_bytes(*freed);
  call->Answer(freed.status());
  return call;
}

grpc::ServerUnaryReactor* ImageAnalyticsService::Histogram(grpc::CallbackServerContext* context,
                                                           const v1::HistogramRequest* request,
                                                           v1::HistogramResponse* response) {
  auto* call = new UnaryCall("Histogram");
  absl::StatusOr<std::shared_ptr<Input>> input =
      ReadImageRef(request->image(), worker_.device().limits, limits_, call->record);
  if (!input.ok()) {
    call->Answer(input.status());
    return call;
  }
  const v1::HistogramOptions& o = request->options();
  gpu::HistogramOptions options;
  options.bins = int(std::min<uint32_t>(o.bins() == 0 ? 256 : o.bins(), INT_MAX));
  if (o.has_lo()) options.lo = o.lo();
  if (o.has_hi()) options.hi = o.hi();
  switch (o.source()) {
    case v1::HISTOGRAM_SOURCE_UNSPECIFIED:
    case v1::HISTOGRAM_SOURCE_ALL_CHANNELS:
      options.source = gpu::HistogramSource::kAllChannels;
      break;
    case v1::HISTOGRAM_SOURCE_CHANNEL:
      options.source = gpu::HistogramSource::kChannel;
      break;
    case v1::HISTOGRAM_SOURCE_LUMA:
      options.source = gpu::HistogramSource::kLuma;
      break;
    case v1::HISTOGRAM_SOURCE_RGB_MEAN:
      options.source = gpu::HistogramSource::kRgbMean;
      break;
    default:
      call->Answer(absl::InvalidArgumentError(
          StrCat("options.source must be a HistogramSource (0-4), got ", int(o.source()))));
      return call;
  }
  options.channel = int(std::min<uint32_t>(o.channel(), INT_MAX));
  absl::StatusOr<gpu::HistogramVariant> variant = ParseVariant<gpu::HistogramVariant>(
      request->variant(), "the histogram", gpu::HistogramVariantName, gpu::ParseHistogramVariant);
  if (!variant.ok()) {
    call->Answer(variant.status());
    return call;
  }
  options.variant = *variant;

  Submit(worker_, call, context, "Histogram", [call, response, in = *input, options](GpuEnv& env) {
    Acquired a;
    if (absl::Status s = Acquire(env, *in, a, call->record); !s.ok()) {
      return call->Answer(s);
    }
    absl::StatusOr<gpu::HistogramResult> r = env.kernels.histogram.Run(*a.image, options);
    if (!r.ok()) return call->Answer(r.status());
    call->record.set_gpu_ns(r->gpu_ns);
    call->record.set_analysis("histogram", gpu::HistogramVariantName(r->variant));
    response->set_bins(uint32_t(r->bins));
    response->set_lo(r->lo);
    response->set_hi(r->hi);
    uint64_t total = 0;
    for (const std::vector<uint64_t>& counts : r->counts) {
      auto* h = response->add_histograms();
      h->mutable_counts()->Add(counts.begin(), counts.end());
      for (uint64_t c : counts) total += c;
    }
    response->set_total(total);
    response->set_variant(std::string(gpu::HistogramVariantName(r->variant)));
    *response->mutable_image() = std::move(a.info);
    *response->mutable_timing() = call->record.Timing();
    call->Answer(absl::OkStatus());
  });
  return call;
}

grpc::ServerWriteReactor<v1::IntegralImageResponse>* ImageAnalyticsService::IntegralImage(
    grpc::CallbackServerContext* context, const v1::IntegralImageRequest* request) {
  using Call = StreamCall<v1::IntegralImageResponse>;
  auto* call = new Call("IntegralImage", limits_.stream_buffer_bytes);
  absl::StatusOr<std::shared_ptr<Input>> input =
      ReadImageRef(request->image(), worker_.device().limits, limits_, call->record);
  if (!input.ok()) {
    call->Close(input.status());
    return call;
  }
  gpu::IntegralOptions options;
  options.squared = request->options().squared();
  absl::StatusOr<gpu::IntegralVariant> variant =
      ParseVariant<gpu::IntegralVariant>(request->variant(), "the integral image",
                                         gpu::IntegralVariantName, gpu::ParseIntegralVariant);
  if (!variant.ok()) {
    call->Close(variant.status());
    return call;
  }
  options.variant = *variant;
  const size_t chunk_bytes = limits_.chunk_bytes;
  Submit(worker_, call, context, "IntegralImage",
         [call, in = *input, options, chunk_bytes](GpuEnv& env) {
           Acquired a;
           if (absl::Status s = Acquire(env, *in, a, call->record); !s.ok()) {
             return call->Close(s);
           }
           const gpu::ImageDesc& d = a.image->desc();
           const size_t row_bytes = size_t(d.width) * d.channels * 8;
           {
             v1::IntegralImageResponse m;
             v1::IntegralHeader* h = m.mutable_header();
             *h->mutable_image() = a.info;
             h->set_width(uint32_t(d.width));
             h->set_height(uint32_t(d.height));
             h->set_channels(uint32_t(d.channels));
             h->set_element(gpu::IntegralElementFor(d.type) == gpu::IntegralElement::kUint64
                                ? v1::INTEGRAL_ELEMENT_UINT64
                                : v1::INTEGRAL_ELEMENT_FLOAT64);
             h->set_squared(options.squared);
             h->set_table_bytes(row_bytes * size_t(d.height));
             if (absl::Status s = call->Write(std::move(m)); !s.ok()) return call->Close(s);
           }
           const int rows_per_chunk = int(std::max<size_t>(1, chunk_bytes / row_bytes));
           absl::StatusOr<gpu::IntegralResult> r = env.kernels.integral.Run(
               *a.image, options, [&](const gpu::IntegralBand& band) -> absl::Status {
                 for (int y = 0; y < band.rows; y += rows_per_chunk) {
                   const int rows = std::min(rows_per_chunk, band.rows - y);
                   v1::IntegralImageResponse m;
                   v1::IntegralChunk* c = m.mutable_chunk();
                   c->set_squared(band.squared);
                   c->set_y0(uint32_t(band.y0 + y));
                   c->set_rows(uint32_t(rows));
                   c->set_data(reinterpret_cast<const char*>(band.bytes.data()) + y * row_bytes,
                               rows * row_bytes);
                   if (absl::Status s = call->Write(std::move(m)); !s.ok()) return s;
                 }
                 return absl::OkStatus();
               });
           if (!r.ok()) return call->Close(r.status());
           call->record.set_gpu_ns(r->gpu_ns);
           call->record.set_analysis("integral_image", gpu::IntegralVariantName(r->variant));
           v1::IntegralImageResponse m;
           m.mutable_trailer()->set_variant(std::string(gpu::IntegralVariantName(r->variant)));
           *m.mutable_trailer()->mutable_timing() = call->record.Timing();
           call->Close(call->Write(std::move(m)));
         });
  return call;
}

grpc::ServerWriteReactor<v1::CompactResponse>* ImageAnalyticsService::Compact(
    grpc::CallbackServerContext* context, const v1::CompactRequest* request) {
  using Call = StreamCall<v1::CompactResponse>;
  auto* call = new Call("Compact", limits_.stream_buffer_bytes);
  absl::StatusOr<std::shared_ptr<Input>> input =
      ReadImageRef(request->image(), worker_.device().limits, limits_, call->record);
  if (!input.ok()) {
    call->Close(input.status());
    return call;
  }
  const v1::CompactOptions& o = request->options();
  gpu::CompactOptions options;
  switch (o.source()) {
    case v1::COMPACT_SOURCE_UNSPECIFIED:
    case v1::COMPACT_SOURCE_CHANNEL:
      options.source = gpu::CompactSource::kChannel;
      break;
    case v1::COMPACT_SOURCE_LUMA:
      options.source = gpu::CompactSource::kLuma;
      break;
    default:
      call->Close(absl::InvalidArgumentError(
          StrCat("options.source must be a CompactSource (0-2), got ", int(o.source()))));
      return call;
  }
  options.channel = int(std::min<uint32_t>(o.channel(), INT_MAX));
  options.lo = o.lo();
  options.hi = o.hi();
  options.inside = !o.outside();
  if (o.has_max_results()) options.max_results = o.max_results();
  options.count_only = o.count_only();
  absl::StatusOr<gpu::CompactVariant> variant = ParseVariant<gpu::CompactVariant>(
      request->variant(), "compaction", gpu::CompactVariantName, gpu::ParseCompactVariant);
  if (!variant.ok()) {
    call->Close(variant.status());
    return call;
  }
  options.variant = *variant;
  HostPool* pool = &pool_;
  const size_t chunk_bytes = limits_.chunk_bytes;
  Submit(worker_, call, context, "Compact",
         [call, in = *input, options, pool, chunk_bytes](GpuEnv& env) {
           Acquired a;
           if (absl::Status s = Acquire(env, *in, a, call->record); !s.ok()) {
             return call->Close(s);
           }
           const gpu::ImageDesc desc = a.image->desc();
           absl::StatusOr<gpu::CompactResult> r = env.kernels.compaction.Run(*a.image, options);
           if (!r.ok()) return call->Close(r.status());
           call->record.set_gpu_ns(r->gpu_ns);
           call->record.set_analysis("compaction", gpu::CompactVariantName(r->variant));
           auto result = std::make_shared<gpu::CompactResult>(*std::move(r));
           auto info = std::make_shared<v1::ImageInfo>(std::move(a.info));
           // Streaming out is host work: off the GPU thread.
           pool->Post([call, result, info, desc, chunk_bytes] {
             const size_t returned = result->xy.size() / 2;
             const size_t value_bytes = size_t(desc.channels) * gpu::BytesPerSample(desc.type);
             v1::CompactResponse m;
             v1::CompactHeader* h = m.mutable_header();
             *h->mutable_image() = *info;
             h->set_total(result->total);
             h->set_returned(returned);
             h->set_truncated(result->truncated);
             h->set_value_format(ToProto(desc.type));
             h->set_value_channels(uint32_t(desc.channels));
             h->set_variant(std::string(gpu::CompactVariantName(result->variant)));
             if (absl::Status s = call->Write(std::move(m)); !s.ok()) return call->Close(s);
             const size_t per_chunk = std::max<size_t>(1, chunk_bytes / (8 + value_bytes));
             for (size_t i = 0; i < returned; i += per_chunk) {
               const size_t n = std::min(per_chunk, returned - i);
               v1::CompactResponse c;
               c.mutable_chunk()->set_first(i);
               c.mutable_chunk()->set_xy(reinterpret_cast<const char*>(result->xy.data() + 2 * i),
                                         n * 8);
               c.mutable_chunk()->set_values(
                   reinterpret_cast<const char*>(result->values.data()) + i * value_bytes,
                   n * value_bytes);
               if (absl::Status s = call->Write(std::move(c)); !s.ok()) return call->Close(s);
             }
             v1::CompactResponse t;
             *t.mutable_timing() = call->record.Timing();
             call->Close(call->Write(std::move(t)));
           });
         });
  return call;
}

grpc::ServerWriteReactor<v1::BoxFilterResponse>* ImageAnalyticsService::BoxFilter(
    grpc::CallbackServerContext* context, const v1::BoxFilterRequest* request) {
  using Call = StreamCall<v1::BoxFilterResponse>;
  auto* call = new Call("BoxFilter", limits_.stream_buffer_bytes);
  absl::StatusOr<std::shared_ptr<Input>> input =
      ReadImageRef(request->image(), worker_.device().limits, limits_, call->record);
  if (!input.ok()) {
    call->Close(input.status());
    return call;
  }
  const v1::BoxFilterOptions& o = request->options();
  gpu::BoxFilterOptions options;
  options.rx = int(std::min<uint32_t>(o.rx(), INT_MAX));
  options.ry = int(std::min<uint32_t>(o.ry(), INT_MAX));
  switch (o.border()) {
    case v1::BORDER_MODE_UNSPECIFIED:
    case v1::BORDER_MODE_REFLECT101:
      options.border = gpu::BorderMode::kReflect101;
      break;
    case v1::BORDER_MODE_REPLICATE:
      options.border = gpu::BorderMode::kReplicate;
      break;
    case v1::BORDER_MODE_CONSTANT:
      options.border = gpu::BorderMode::kConstant;
      break;
    default:
      call->Close(absl::InvalidArgumentError(
          StrCat("options.border must be a BorderMode (0-3), got ", int(o.border()))));
      return call;
  }
  options.border_value = o.border_value();
  absl::StatusOr<gpu::BoxFilterVariant> variant = ParseVariant<gpu::BoxFilterVariant>(
      request->variant(), "the box filter", gpu::BoxFilterVariantName, gpu::ParseBoxFilterVariant);
  if (!variant.ok()) {
    call->Close(variant.status());
    return call;
  }
  options.variant = *variant;
  const v1::PixelEncoding encoding = request->encoding();
  if (encoding != v1::PIXEL_ENCODING_NONE && encoding != v1::PIXEL_ENCODING_RAW &&
      encoding != v1::PIXEL_ENCODING_PNG) {
    call->Close(absl::InvalidArgumentError(
        StrCat("encoding must be a PixelEncoding (0-2), got ", int(encoding))));
    return call;
  }
  if (encoding == v1::PIXEL_ENCODING_NONE && !request->keep()) {
    call->Close(absl::InvalidArgumentError(
        "encoding is NONE and keep is false: the result would be thrown away; ask for RAW or PNG "
        "pixels, or keep = true"));
    return call;
  }
  const bool keep = request->keep();
  const std::string label = request->label();
  HostPool* pool = &pool_;
  const size_t chunk_bytes = limits_.chunk_bytes;
  Submit(
      worker_, call, context, "BoxFilter",
      [call, in = *input, options, encoding, keep, label, pool, chunk_bytes](GpuEnv& env) {
        Acquired a;
        if (absl::Status s = Acquire(env, *in, a, call->record); !s.ok()) {
          return call->Close(s);
        }
        if (encoding == v1::PIXEL_ENCODING_PNG && a.image->desc().type != gpu::SampleType::kUint8) {
          return call->Close(absl::InvalidArgumentError(
              StrCat("encoding PNG needs a uint8 image, got ", gpu::DescribeImage(a.image->desc()),
                     "; ask for RAW pixels")));
        }
        if (keep) {
          if (absl::Status s = env.store.Reserve(a.image->gpu_bytes()); !s.ok()) {
            return call->Close(s);
          }
        }
        absl::StatusOr<gpu::BoxFilterResult> r = env.kernels.box_filter.Run(*a.image, options);
        if (!r.ok()) return call->Close(r.status());
        call->record.set_gpu_ns(r->gpu_ns);
        call->record.set_analysis("box_filter", gpu::BoxFilterVariantName(r->variant));
        auto host = std::make_shared<gpu::HostImage>();
        if (encoding != v1::PIXEL_ENCODING_NONE) *host = r->image.Download();
        auto header = std::make_shared<v1::BoxFilterResponse>();
        v1::BoxFilterHeader* h = header->mutable_header();
        *h->mutable_image() = std::move(a.info);
        FillInfo(r->image.desc(), h->mutable_result());
        h->set_encoding(encoding);
        h->set_variant(std::string(gpu::BoxFilterVariantName(r->variant)));
        if (keep) {
          absl::StatusOr<StoredImageInfo> stored =
              env.store.Put(std::move(r->image), label, "box_filter");
          if (!stored.ok()) return call->Close(stored.status());
          FillInfo(*stored, h->mutable_result());
        }
        pool->Post([call, host, header, encoding, chunk_bytes] {
          std::string png;
          std::string_view bytes(reinterpret_cast<const char*>(host->data.data()),
                                 host->data.size());
          if (encoding == v1::PIXEL_ENCODING_PNG) {
            absl::StatusOr<std::string> encoded = EncodePng(*host);
            if (!encoded.ok()) return call->Close(encoded.status());
            png = *std::move(encoded);
            bytes = png;
          }
          header->mutable_header()->set_data_bytes(bytes.size());
          if (absl::Status s = call->Write(std::move(*header)); !s.ok()) {
            return call->Close(s);
          }
          absl::Status s = ForEachChunk(bytes, chunk_bytes, [&](size_t, std::string_view piece) {
            v1::BoxFilterResponse m;
            m.set_chunk(piece.data(), piece.size());
            return call->Write(std::move(m));
          });
          if (!s.ok()) return call->Close(s);
          v1::BoxFilterResponse t;
          *t.mutable_timing() = call->record.Timing();
          call->Close(call->Write(std::move(t)));
        });
      });
  return call;
}

grpc::ServerUnaryReactor* ImageAnalyticsService::GetServerInfo(grpc::CallbackServerContext*,
                                                               const v1::GetServerInfoRequest*,
                                                               v1::ServerInfo* response) {
  auto* call = new UnaryCall("GetServerInfo");
  const gpu::DeviceInfo& d = worker_.device();
  response->set_version(kVersion);
  response->set_device_platform(d.platform);
  response->set_vendor(d.vendor);
  response->set_renderer(d.renderer);
  response->set_gl_version(d.version);
  response->set_software(d.software);
  v1::DeviceLimits* l = response->mutable_limits();
  l->set_max_texture_size(uint32_t(d.limits.max_texture_size));
  l->set_max_storage_block_bytes(uint64_t(d.limits.max_storage_block_bytes));
  l->set_max_shared_memory_bytes(uint32_t(d.limits.max_shared_memory_bytes));
  l->set_max_invocations(uint32_t(d.limits.max_invocations));
  l->set_int64(d.limits.int64);
  response->set_max_queue(uint32_t(worker_.max_queue()));
  response->set_max_image_pixels(limits_.max_image_pixels);
  response->set_max_upload_bytes(limits_.max_upload_bytes);
  response->set_max_message_bytes(limits_.max_message_bytes);
  const StoreUsage usage = worker_.store().Usage();
  response->set_store_budget_bytes(usage.budget);
  response->set_image_ttl_s(uint64_t(worker_.store().ttl().count()));
  const WorkerStats stats = worker_.Stats();
  response->set_queue_length(uint32_t(stats.queue_length));
  response->set_stored_images(usage.images);
  response->set_stored_bytes(usage.bytes);
  response->set_jobs_run(stats.jobs_run);
  response->set_jobs_dropped(stats.jobs_dropped);
  response->set_jobs_rejected(stats.jobs_rejected);
  response->set_images_evicted(usage.evicted);
  response->set_uptime_s(
      std::chrono::duration_cast<std::chrono::seconds>(SteadyClock::now() - started_).count());
  for (const std::string& name : Kernels::Available()) response->add_analyses(name);
  call->Answer(absl::OkStatus());
  return call;
}

}  // namespace glimpse::server
