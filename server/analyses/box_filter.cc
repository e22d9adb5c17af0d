#include "server/analyses/box_filter.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/str.h"
#include "server/analyses/runner.h"
#include "server/ingest/image_codec.h"
#include "server/store/shared_images.h"

namespace glimpse::server {
namespace {

// Framing of one chunk message beyond its rows.
constexpr uint64_t kBoxFilterChunkOverhead = 16;

// stb's PNG writer: a filter byte per row, and fixed-Huffman deflate, whose literals take up to
// 9 bits: at most 9/8 of the filtered bytes, plus block and stream framing.
uint64_t Framing(uint64_t bytes, uint64_t chunk) {
  return (bytes / chunk + 1) * kBoxFilterChunkOverhead;
}

}  // namespace

absl::StatusOr<BoxFilterAnalysis::Options> BoxFilterAnalysis::MapOptions(const Request& request) {
  const v1::BoxFilterOptions& o = request.options();
  Options options;
  // The proto's radii have no "unset": 0 is a window of one pixel.
  options.filter.rx = int(std::min<uint32_t>(o.rx(), INT_MAX));
  options.filter.ry = int(std::min<uint32_t>(o.ry(), INT_MAX));
  switch (o.border()) {
    case v1::BORDER_MODE_UNSPECIFIED:
      break;
    case v1::BORDER_MODE_REFLECT101:
      options.filter.border = gpu::BorderMode::kReflect101;
      break;
    case v1::BORDER_MODE_REPLICATE:
      options.filter.border = gpu::BorderMode::kReplicate;
      break;
    case v1::BORDER_MODE_CONSTANT:
      options.filter.border = gpu::BorderMode::kConstant;
      break;
    default:
      return absl::InvalidArgumentError(
          StrCat("options.border must be a BorderMode (0-3), got ", int(o.border())));
  }
  options.filter.border_value = o.border_value();
  absl::StatusOr<gpu::BoxFilterVariant> variant = ParseVariant<gpu::BoxFilterVariant>(
      request.variant(), "the box filter", gpu::BoxFilterVariantName, gpu::ParseBoxFilterVariant);
  if (!variant.ok()) return variant.status();
  options.filter.variant = *variant;
  options.encoding = request.encoding();
  if (options.encoding != v1::PIXEL_ENCODING_NONE && options.encoding != v1::PIXEL_ENCODING_RAW &&
      options.encoding != v1::PIXEL_ENCODING_PNG) {
    return absl::InvalidArgumentError(
        StrCat("encoding must be a PixelEncoding (0-2), got ", int(options.encoding)));
  }
  options.keep = request.keep();
  if (options.encoding == v1::PIXEL_ENCODING_NONE && !options.keep) {
    return absl::InvalidArgumentError(
        "encoding is NONE and keep is false: the result would be thrown away; ask for RAW or PNG "
        "pixels, or keep = true");
  }
  options.label = request.label();
  return options;
}

absl::StatusOr<uint64_t> BoxFilterAnalysis::ResultBytes(const gpu::ImageDesc& desc,
                                                        const Options& options, uint64_t) {
  absl::StatusOr<gpu::BoxFilterOptions> resolved =
      gpu::ResolveBoxFilterOptions(desc, options.filter);
  if (!resolved.ok()) return resolved.status();
  if (options.encoding == v1::PIXEL_ENCODING_PNG && desc.type == gpu::SampleType::kFloat32) {
    return absl::InvalidArgumentError(StrCat("encoding PNG needs a uint8 or uint16 image, got ",
                                             gpu::DescribeImage(desc), "; ask for RAW pixels"));
  }
  // The downloaded pixels and the messages made from them exist together for a moment; RAW
  // pixels not kept go from the device straight into the messages.
  switch (options.encoding) {
    case v1::PIXEL_ENCODING_RAW:
      return (options.keep ? 2 : 1) * desc.bytes() + Framing(desc.bytes(), 1 << 20) +
             kStreamEndsBytes;
    case v1::PIXEL_ENCODING_PNG:
      return desc.bytes() + 2 * PngBytesBound(desc) + Framing(PngBytesBound(desc), 1 << 20) +
             kStreamEndsBytes;
    default:
      return kStreamEndsBytes;
  }
}

// RAW pixels not kept: the kernel hands the rows over from the device a piece at a time, and they
// are cut into messages as they come, with no image of the result made on the host.
absl::Status BoxFilterAnalysis::StreamRaw(const StreamWork<Response>& work, GpuEnv& env,
                                          const Acquired& image, const Options& options,
                                          Lease lease) {
  const gpu::ImageDesc& d = image.image->desc();
  const size_t chunk = work.service->limits.chunk_bytes;
  std::vector<v1::BoxFilterResponse> messages;
  messages.reserve(d.bytes() / chunk + 3);
  v1::BoxFilterHeader* h = messages.emplace_back().mutable_header();
  *h->mutable_image() = image.info;
  FillInfo(d, h->mutable_result());
  h->set_encoding(options.encoding);
  h->set_data_bytes(d.bytes());
  absl::StatusOr<gpu::BoxFilterResult> r = env.kernels.box_filter.Stream(
      *image.image, options.filter, [&](const gpu::BoxFilterRows& rows) {
        std::span<const uint8_t> bytes = rows.bytes;
        while (!bytes.empty()) {
          if (!messages.back().has_chunk() || messages.back().chunk().size() == chunk) {
            messages.emplace_back().mutable_chunk()->reserve(chunk);
          }
          std::string* out = messages.back().mutable_chunk();
          const size_t n = std::min(chunk - out->size(), bytes.size());
          out->append(reinterpret_cast<const char*>(bytes.data()), n);
          bytes = bytes.subspan(n);
        }
        return absl::OkStatus();
      });
  if (!r.ok()) return r.status();
  messages.front().mutable_header()->set_variant(
      std::string(gpu::BoxFilterVariantName(r->variant)));
  work.call->record.set_gpu_ns(r->gpu_ns);
  work.call->record.set_analysis(kName, gpu::BoxFilterVariantName(r->variant));
  *messages.emplace_back().mutable_timing() = work.call->record.Timing();
  lease.ShrinkTo(d.bytes() + Framing(d.bytes(), chunk) + kStreamEndsBytes);
  if (absl::Status s = work.call->Send(std::move(messages), std::move(lease)); !s.ok()) return s;
  work.call->Close(absl::OkStatus());
  return absl::OkStatus();
}

absl::Status BoxFilterAnalysis::Run(const StreamWork<Response>& work, GpuEnv& env,
                                    const Acquired& image, const Options& options, Lease lease) {
  if (options.keep) {
    if (absl::Status s = env.images.Reserve(image.image->gpu_bytes(), work.call->record.tenant());
        !s.ok())
      return s;
  }
  if (options.encoding == v1::PIXEL_ENCODING_RAW && !options.keep) {
    return StreamRaw(work, env, image, options, std::move(lease));
  }
  absl::StatusOr<gpu::BoxFilterResult> r = env.kernels.box_filter.Run(*image.image, options.filter);
  if (!r.ok()) return r.status();
  work.call->record.set_gpu_ns(r->gpu_ns);
  work.call->record.set_analysis(kName, gpu::BoxFilterVariantName(r->variant));
  auto host = std::make_shared<gpu::HostImage>();
  // A kept result goes to the shared store too, from host memory.
  if (options.encoding != v1::PIXEL_ENCODING_NONE ||
      (options.keep && work.service->redis != nullptr)) {
    *host = r->image.Download();
  }
  auto header = std::make_shared<v1::BoxFilterResponse>();
  v1::BoxFilterHeader* h = header->mutable_header();
  *h->mutable_image() = image.info;
  FillInfo(r->image.desc(), h->mutable_result());
  h->set_encoding(options.encoding);
  h->set_variant(std::string(gpu::BoxFilterVariantName(r->variant)));
  std::optional<StoredImageInfo> kept;
  if (options.keep) {
    absl::StatusOr<StoredImageInfo> stored = env.images.Put(
        std::move(r->image), options.label, std::string(kName), work.call->record.tenant());
    if (!stored.ok()) return stored.status();
    FillInfo(*stored, h->mutable_result());
    kept = *std::move(stored);
  }
  auto held = std::make_shared<Lease>(std::move(lease));
  const size_t chunk = work.service->limits.chunk_bytes;
  // PNG encoding and cutting into messages are host work: off the GPU thread.
  auto send = [call = work.call, host, header, held, encoding = options.encoding, chunk] {
    std::string png;
    std::string_view bytes(reinterpret_cast<const char*>(host->data.data()), host->data.size());
    if (encoding == v1::PIXEL_ENCODING_PNG) {
      absl::StatusOr<std::string> encoded = EncodePng(*host);
      if (!encoded.ok()) return call->Close(encoded.status());
      png = *std::move(encoded);
      bytes = png;
    }
    header->mutable_header()->set_data_bytes(bytes.size());
    std::vector<v1::BoxFilterResponse> messages;
    messages.push_back(std::move(*header));
    for (size_t off = 0; off < bytes.size(); off += chunk) {
      const std::string_view piece = bytes.substr(off, chunk);
      messages.emplace_back().set_chunk(piece.data(), piece.size());
    }
    *messages.emplace_back().mutable_timing() = call->record.Timing();
    const uint64_t sent = bytes.size();
    host->data = {};
    png = {};
    held->ShrinkTo(sent + Framing(sent, chunk) + kStreamEndsBytes);
    if (absl::Status s = call->Send(std::move(messages), std::move(*held)); !s.ok()) {
      return call->Close(s);
    }
    call->Close(absl::OkStatus());
  };
  if (!kept) return work.service->pool.Post(std::move(send)), absl::OkStatus();
  // The kept result's id goes out once every replica can serve it.
  ShareImage(*work.service, *kept, host,
             [call = work.call, pool = &work.service->pool, send](absl::Status s) {
               if (!s.ok()) return call->Close(s);
               pool->Post(send);
             });
  return absl::OkStatus();
}

std::vector<std::string> BoxFilterAnalysis::Variants(const gpu::DeviceInfo&) {
  return VariantNames<gpu::BoxFilterVariant>(gpu::BoxFilterVariantName, gpu::ParseBoxFilterVariant);
}

}  // namespace glimpse::server
