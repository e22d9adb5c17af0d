#include "server/ingest/image_ref.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/str.h"
#include "server/ingest/image_codec.h"
#include "server/rpc/status_util.h"

namespace glimpse::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t UnixMs(std::chrono::system_clock::time_point t) {
  if (t == std::chrono::system_clock::time_point{}) return 0;
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
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

}  // namespace

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

absl::StatusOr<gpu::ImageDesc> DescFromLayout(const v1::ImageLayout& l, std::string_view field,
                                              const gpu::DeviceLimits& device,
                                              const ServiceLimits& limits) {
  absl::StatusOr<gpu::SampleType> type = FromProto(l.format(), StrCat(field, ".format"));
  if (!type.ok()) return type.status();
  // Sizes past int's range saturate, so the check names a value that is still too big.
  const gpu::ImageDesc desc{.width = int(std::min<uint32_t>(l.width(), INT_MAX)),
                            .height = int(std::min<uint32_t>(l.height(), INT_MAX)),
                            .channels = int(std::min<uint32_t>(l.channels(), INT_MAX)),
                            .type = *type};
  const uint64_t pixels = uint64_t{l.width()} * l.height();
  if (pixels > limits.max_image_pixels) {
    return absl::ResourceExhaustedError(StrCat(field, " is ", l.width(), "x", l.height(), " = ",
                                               pixels, " pixels, over the server's limit of ",
                                               limits.max_image_pixels, " (--max-image-pixels)"));
  }
  if (absl::Status s = gpu::ValidateImageDesc(desc, device, field); !s.ok()) return s;
  return desc;
}

absl::Status CheckDesc(const gpu::ImageDesc& d, std::string_view field,
                       const gpu::DeviceLimits& device) {
  return Annotate(gpu::ValidateImageDesc(d, device), field);
}

std::shared_ptr<Input> HostInput(gpu::HostImage host, const gpu::DeviceLimits& device) {
  auto in = std::make_shared<Input>();
  in->desc = host.desc;
  in->widened = gpu::WidenForUpload(device, host);
  in->host = std::move(host);
  return in;
}

namespace {

// An Input whose rows are in staging memory (host.data empty).
std::shared_ptr<Input> StagedInput(gpu::HostImage host, gpu::StagingBlock block,
                                   const gpu::StagedRows& rows) {
  auto in = std::make_shared<Input>();
  in->desc = host.desc;
  in->host = std::move(host);
  in->staged = std::move(block);
  in->staged_rows = rows;
  return in;
}

}  // namespace

std::shared_ptr<Input> RawInput(const gpu::ImageDesc& desc, std::span<const uint8_t> pixels,
                                const gpu::DeviceLimits& device, gpu::StagingArena* staging) {
  gpu::StagedRows rows;
  if (gpu::StagingBlock block = ReserveStaged(staging, device, desc, &rows)) {
    gpu::StageRows(rows, desc, pixels, block.bytes());
    return StagedInput(gpu::HostImage{desc, {}}, std::move(block), rows);
  }
  return HostInput(gpu::HostImage{desc, std::vector<uint8_t>(pixels.begin(), pixels.end())},
                   device);
}

std::shared_ptr<Input> RawInput(const gpu::ImageDesc& desc, const WireBytes& pixels,
                                const gpu::DeviceLimits& device, gpu::StagingArena* staging) {
  gpu::StagedRows rows;
  if (gpu::StagingBlock block = ReserveStaged(staging, device, desc, &rows)) {
    const size_t row = desc.row_bytes();
    std::vector<uint8_t> scratch(row);  // a row split between two slices
    gpu::StageRows(
        rows, desc, [&](int y) { return pixels.Read(row * size_t(y), row, scratch.data()); },
        block.bytes());
    return StagedInput(gpu::HostImage{desc, {}}, std::move(block), rows);
  }
  std::vector<uint8_t> host(pixels.size());
  pixels.CopyTo(0, host.size(), host.data());
  return HostInput(gpu::HostImage{desc, std::move(host)}, device);
}

absl::StatusOr<std::shared_ptr<Input>> DecodedInput(
    std::span<const uint8_t> file, int desired_channels, ingest::Orientation orientation,
    const ServiceLimits& limits, const gpu::DeviceLimits& device, gpu::StagingArena* staging,
    std::string_view field, std::string_view desc_field, CallRecord& record) {
  const SteadyClock::time_point t0 = SteadyClock::now();
  absl::StatusOr<DecodedImage> decoded =
      DecodeEncodedFor(device, file, desired_channels, limits.max_image_pixels, field, nullptr,
                       staging, orientation);
  if (!decoded.ok()) return decoded.status();
  const gpu::ImageDesc& desc = decoded->host.desc;
  if (absl::Status s = CheckDesc(desc, desc_field, device); !s.ok()) return s;
  record.set_image(gpu::DescribeImage(desc));
  std::shared_ptr<Input> in;
  if (decoded->staged) {
    in = StagedInput(std::move(decoded->host), std::move(decoded->staged), decoded->staged_rows);
  } else if (decoded->widened.empty()) {
    in = HostInput(std::move(decoded->host), device);
  } else {  // decoded straight into the device's widened rows
    in = std::make_shared<Input>();
    in->desc = desc;
    in->widened = std::move(decoded->widened);
    in->host = std::move(decoded->host);
  }
  record.set_decode_ns(NsSince(t0));  // widening for the device included
  return in;
}

std::shared_ptr<const gpu::HostImage> HostPixels(std::shared_ptr<const Input> in) {
  if (in->host->data.size() == in->desc.bytes()) {
    return std::shared_ptr<const gpu::HostImage>(in, &*in->host);
  }
  if (in->staged) {
    return std::make_shared<const gpu::HostImage>(
        gpu::HostImage{in->desc, gpu::UnstageRows(in->staged_rows, in->desc, in->staged.bytes())});
  }
  return std::make_shared<const gpu::HostImage>(
      gpu::HostImage{in->desc, gpu::NarrowFromUpload(in->desc, in->widened)});
}

absl::StatusOr<std::shared_ptr<const Input>> ReadImageRef(
    const v1::ImageRef& ref, const gpu::DeviceLimits& device, gpu::StagingArena* staging,
    const ServiceLimits& limits, ImageStore& store, CallRecord& record, WireBytes* inline_bytes) {
  // Left where it arrived: the message's own field is empty.
  const bool in_wire = inline_bytes != nullptr && inline_bytes->size() > 0;
  switch (ref.source_case()) {
    case v1::ImageRef::kImageId: {
      auto in = std::make_shared<Input>();
      in->image_id = ref.image_id();
      record.set_image(ref.image_id());
      absl::StatusOr<StoredImageInfo> info = store.Info(ref.image_id(), record.tenant());
      if (!info.ok()) return info.status();
      in->desc = info->desc;
      return in;
    }
    case v1::ImageRef::kEncoded: {
      if (absl::Status s = CheckDesiredChannels(ref.encoded().desired_channels(),
                                                "image.encoded.desired_channels");
          !s.ok()) {
        return s;
      }
      absl::StatusOr<ingest::Orientation> orientation =
          OrientationFrom(ref.encoded().orientation(), "image.encoded.orientation");
      if (!orientation.ok()) return orientation.status();
      const std::string& data = ref.encoded().data();
      return DecodedInput(
          in_wire ? inline_bytes->Contiguous()
                  : std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
          int(ref.encoded().desired_channels()), *orientation, limits, device, staging,
          "image.encoded.data", "image.encoded", record);
    }
    case v1::ImageRef::kRaw: {
      absl::StatusOr<gpu::ImageDesc> desc =
          DescFromLayout(ref.raw().layout(), "image.raw.layout", device, limits);
      if (!desc.ok()) return desc.status();
      const std::string& data = ref.raw().data();
      const size_t size = in_wire ? inline_bytes->size() : data.size();
      if (size != desc->bytes()) {
        return absl::InvalidArgumentError(
            StrCat("image.raw.data has ", size, " bytes but image.raw.layout (",
                   gpu::DescribeImage(*desc), ") needs ", desc->bytes()));
      }
      record.set_image(gpu::DescribeImage(*desc));
      if (in_wire) return RawInput(*desc, *inline_bytes, device, staging);
      return RawInput(*desc, std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
                      device, staging);
    }
    case v1::ImageRef::SOURCE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("image must be set: an image_id, encoded or raw");
}

absl::StatusOr<gpu::Image> UploadInput(GpuEnv& env, const Input& in, CallRecord& record) {
  const SteadyClock::time_point t0 = SteadyClock::now();
  absl::StatusOr<gpu::Image> image =
      in.staged ? gpu::Image::Upload(env.ctx, in.host->desc, in.staged)
                : gpu::Image::Upload(env.ctx, in.host->desc, in.host->data, in.widened);
  if (image.ok()) record.set_upload_ns(NsSince(t0));
  return image;
}

absl::StatusOr<std::unique_ptr<Acquired>> Acquire(GpuEnv& env, const Input& in,
                                                  CallRecord& record) {
  auto out = std::make_unique<Acquired>();
  if (in.host && in.cache && !env.images.Use(in.image_id, in.cache->tenant).ok()) {
    if (absl::Status s = env.images.Reserve(in.host->desc.bytes(), in.cache->tenant); !s.ok()) {
      return s;
    }
    absl::StatusOr<gpu::Image> image = UploadInput(env, in, record);
    if (!image.ok()) return image.status();
    absl::StatusOr<StoredImageInfo> stored = env.images.PutAs(*std::move(image), *in.cache);
    if (!stored.ok()) return stored.status();
  }
  if (in.host && !in.cache) {
    absl::StatusOr<gpu::Image> image = UploadInput(env, in, record);
    if (!image.ok()) return image.status();
    out->owned = *std::move(image);
    out->image = &out->owned;
    FillInfo(out->owned.desc(), &out->info);
    return out;
  }
  StoredImageInfo info;
  absl::StatusOr<const gpu::Image*> image = env.images.Use(in.image_id, record.tenant(), &info);
  if (!image.ok()) return image.status();
  out->image = *image;
  FillInfo(info, &out->info);
  if (in.anonymous) out->info.clear_image_id();
  record.set_image(StrCat(info.id.substr(0, 8), ":", gpu::DescribeImage(info.desc)));
  return out;
}

}  // namespace glimpse::server
