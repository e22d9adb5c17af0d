#include "gpu/box_filter.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/str.h"
#include "gpu/integral_image.h"
#include "gpu/internal/box_filter_llvmpipe.h"
#include "gpu/internal/box_filter_tiles.h"
#include "gpu/internal/variant_check.h"

namespace glimpse::gpu {
namespace {

using box_filter_internal::SharedChunkColumns;
using box_filter_internal::TileDefines;
using box_filter_internal::Wide;

constexpr BoxFilterVariant kConcreteBoxFilterVariants[] = {
    BoxFilterVariant::kSharedTile, BoxFilterVariant::kSeparable, BoxFilterVariant::kIntegral,
    BoxFilterVariant::kFusedStrips};

}  // namespace

std::string_view BorderModeName(BorderMode m) {
  switch (m) {
    case BorderMode::kReplicate:
      return "replicate";
    case BorderMode::kReflect101:
      return "reflect101";
    case BorderMode::kConstant:
      return "constant";
  }
  return "unknown";
}

std::optional<BorderMode> ParseBorderMode(std::string_view name) {
  for (BorderMode m : {BorderMode::kReplicate, BorderMode::kReflect101, BorderMode::kConstant}) {
    if (BorderModeName(m) == name) return m;
  }
  return std::nullopt;
}

std::string_view BoxFilterVariantName(BoxFilterVariant v) {
  switch (v) {
    case BoxFilterVariant::kAuto:
      return "auto";
    case BoxFilterVariant::kSharedTile:
      return "shared_tile";
    case BoxFilterVariant::kSeparable:
      return "separable";
    case BoxFilterVariant::kIntegral:
      return "integral";
    case BoxFilterVariant::kFusedStrips:
      return "fused_strips";
  }
  return "unknown";
}

std::optional<BoxFilterVariant> ParseBoxFilterVariant(std::string_view name) {
  if (name.empty() || name == "auto") return BoxFilterVariant::kAuto;
  for (BoxFilterVariant v : kConcreteBoxFilterVariants) {
    if (BoxFilterVariantName(v) == name) return v;
  }
  return std::nullopt;
}

absl::StatusOr<BoxFilterOptions> ResolveBoxFilterOptions(const ImageDesc& desc,
                                                         const BoxFilterOptions& options) {
  const BoxFilterOptions& o = options;
  if (desc.type != SampleType::kUint8 && desc.type != SampleType::kUint16 &&
      desc.type != SampleType::kFloat32) {
    return absl::InvalidArgumentError(
        StrCat("unsupported sample type #", static_cast<int>(desc.type)));
  }
  if (o.rx < 0 || o.rx > kMaxBoxRadius) {
    return absl::InvalidArgumentError(StrCat("rx must be in [0, ", kMaxBoxRadius, "], got ", o.rx));
  }
  if (o.ry < 0 || o.ry > kMaxBoxRadius) {
    return absl::InvalidArgumentError(StrCat("ry must be in [0, ", kMaxBoxRadius, "], got ", o.ry));
  }
  if (BorderModeName(o.border) == "unknown") {
    return absl::InvalidArgumentError(StrCat(
        "border must be replicate, reflect101 or constant, got #", static_cast<int>(o.border)));
  }
  if (o.tile_bytes < 0) {
    return absl::InvalidArgumentError(
        StrCat("tile_bytes must be >= 0 (0: the device limit), got ", o.tile_bytes));
  }
  if (o.fused_rows < 0) {
    return absl::InvalidArgumentError(
        StrCat("fused_rows must be >= 0 (0: planned), got ", o.fused_rows));
  }
  if (absl::Status s = CheckVariant(o.variant, kConcreteBoxFilterVariants, BoxFilterVariantName);
      !s.ok()) {
    return s;
  }
  if (o.border == BorderMode::kConstant) {
    const double v = o.border_value;
    if (desc.type == SampleType::kFloat32) {
      if (!std::isfinite(v) || std::abs(v) > FLT_MAX) {
        return absl::InvalidArgumentError(
            StrCat("border_value must be a finite float for float32 images, got ", v));
      }
    } else {
      const int max = desc.type == SampleType::kUint8 ? 255 : 65535;
      if (!(v >= 0 && v <= max && v == std::floor(v))) {
        return absl::InvalidArgumentError(StrCat("border_value must be a whole number in [0, ", max,
                                                 "] for ", SampleTypeName(desc.type),
                                                 " images, got ", v));
      }
    }
  }
  return o;
}

// kAuto. On CPU renderers (llvmpipe): for 8-bit images with rx <= kAutoFusedStripsMaxRx and
// windows at most 255 rows tall (16-bit vertical sums), the fused strips, measured 7-10x faster
// than the separable running sums (bench/results/box_filter_llvmpipe.md); otherwise the separable
// running sums, measured fastest of the rest at every size and radius benchmarked (the shared
// tile pays for its barriers and O(r) sums, the integral variant for its 8-byte table). Wider
// windows would need wider strips, and programs that take seconds each to compile.
// On GPUs (not measured here; reasoning): the shared tile for small radii (r <= 4: one pass,
// every texel read once per tile, at most 2.3x apron overhead, no intermediate buffer), the
// running sums up to r = 64, and beyond that the integral image for integer images (its cost, a
// table build of about four 8-byte passes plus four reads per pixel, does not grow with the
// radius, while the running sums' start-up grows with it); float images never use the integral
// variant (its error grows with the image sum, see box_filter.h).
BoxFilterVariant ResolveBoxFilterVariant(const DeviceInfo& device, const ImageDesc& desc,
                                         const BoxFilterOptions& o) {
  if (o.variant != BoxFilterVariant::kAuto) return o.variant;
  if (device.cpu_variants) {
    if (desc.type == SampleType::kUint8 && o.rx <= kAutoFusedStripsMaxRx && o.ry <= 127 &&
        box_filter_internal::FusedStripsSupports(desc, o).ok()) {
      return BoxFilterVariant::kFusedStrips;
    }
    return BoxFilterVariant::kSeparable;
  }
  const int r = std::max(o.rx, o.ry);
  if (r <= 4) return BoxFilterVariant::kSharedTile;
  if (r <= 64 || desc.type == SampleType::kFloat32) return BoxFilterVariant::kSeparable;
  return BoxFilterVariant::kIntegral;
}

absl::Status BoxFilterKernel::Prepare(SampleType type) {
  for (int c = 1; c <= 4; ++c) {
    const ImageDesc d{1, 1, c, type};
    if (absl::Status s = ResolveBoxFilterOptions(d, {}).status(); !s.ok()) return s;
    const std::string cw = StrCat("#define CW ", SharedChunkColumns(d, ctx_.limits()), "\n");
    for (const std::string& wide : {std::string(), std::string("#define WIDE 1\n")}) {
      if (type == SampleType::kFloat32 && !wide.empty()) continue;
      for (auto [name, extra] :
           {std::pair<const char*, std::string>{"box_filter_shared_tile", wide + cw},
            {"box_filter_sep_cols", wide}}) {
        if (absl::Status s = ctx_.Program(name, TileDefines(d, extra)).status(); !s.ok()) return s;
      }
    }
    if (absl::Status s = ctx_.Program("box_filter_sep_rows", TileDefines(d, "")).status();
        !s.ok()) {
      return s;
    }
    const std::string integral = type == SampleType::kFloat32 ? "" : "#define WIDE 1\n";
    if (absl::Status s = ctx_.Program("box_filter_integral", TileDefines(d, integral)).status();
        !s.ok()) {
      return s;
    }
  }
  return IntegralImageKernel(ctx_).Prepare(type);
}

absl::Status BoxFilterKernel::WarmUp(WarmUpShare& share) {
  // Radii on both sides of every boundary of the auto rule, and those whose sums need wide
  // (double) accumulators: rx <= kAutoFusedStripsMaxRx (one fused program per rx up to 7, then
  // one per byte of a texel where the window's edge falls, all met by rx 8-23), ry past 127
  // (32-bit vertical sums), r = 5 and 65 (GPU rule), r = 128 (16-bit sums past 2^32), 2048 x 2100
  // (8-bit sums past 2^32). The border is a uniform: one border mode does for all.
  std::vector<std::pair<int, int>> radii;
  for (int r = 0; r <= kAutoFusedStripsMaxRx + 1; ++r) radii.push_back({r, r});
  for (auto rr : {std::pair{1, 128}, {5, 5}, {65, 65}, {128, 128}, {2048, 2100}}) {
    radii.push_back(rr);
  }
  for (SampleType type : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
    for (int c = 1; c <= 4; ++c) {
      const ImageDesc d = WarmUpShape(type, c);
      absl::StatusOr<Image> image = Image::Upload(ctx_, HostImage::Zeros(d));
      if (!image.ok()) return image.status();
      std::vector<std::string> seen;  // a program set once run need not run again
      for (auto [rx, ry] : radii) {
        const BoxFilterOptions o{.rx = rx, .ry = ry, .border = BorderMode::kReplicate};
        const BoxFilterVariant v = ResolveBoxFilterVariant(ctx_.info(), d, o);
        const std::string key = StrCat(BoxFilterVariantName(v), "|", Wide(d, o),
                                       v == BoxFilterVariant::kFusedStrips
                                           ? box_filter_internal::FusedStripsDefines(d, o)
                                           : "");
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        if (!share.Claim()) continue;
        absl::StatusOr<BoxFilterResult> r = Run(*image, o);
        if (!r.ok()) return r.status();
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<BoxFilterResult> BoxFilterKernel::Run(const Image& image,
                                                     const BoxFilterOptions& options) {
  return Filter(image, options, nullptr);
}

absl::StatusOr<BoxFilterResult> BoxFilterKernel::Stream(const Image& image,
                                                        const BoxFilterOptions& options,
                                                        const BoxFilterSink& sink) {
  return Filter(image, options, &sink);
}

absl::Status BoxFilterKernel::DeliverRows(const Buffer& rows, const ImageDesc& d, int y0, int count,
                                          const BoxFilterSink& sink) {
  // The packed layout's rows are whole 16-byte texels.
  absl::Status status;
  if (!box_filter_internal::DeliverBufferRows(ctx_.readback(), rows,
                                              size_t(PackedTexelsPerRow(d)) * 16, d, y0, count,
                                              staging_, sink, &status)) {
    return ctx_.MapError("the box filter's output rows");
  }
  return status;
}

absl::StatusOr<BoxFilterResult> BoxFilterKernel::Filter(const Image& image,
                                                        const BoxFilterOptions& options,
                                                        const BoxFilterSink* sink) {
  const ImageDesc& d = image.desc();
  if (absl::Status s = ValidateImageDesc(d, ctx_.limits()); !s.ok()) return s;
  absl::StatusOr<BoxFilterOptions> resolved = ResolveBoxFilterOptions(d, options);
  if (!resolved.ok()) return resolved.status();
  const BoxFilterOptions& o = *resolved;
  BoxFilterVariant variant = ResolveBoxFilterVariant(ctx_.info(), d, o);
  int64_t limit = ctx_.limits().max_storage_block_bytes;
  if (o.tile_bytes > 0) limit = std::min(limit, o.tile_bytes);
  if (variant == BoxFilterVariant::kFusedStrips) {
    if (absl::Status s = box_filter_internal::FusedStripsSupports(d, o); !s.ok()) return s;
    BoxFilterResult result;
    result.variant = variant;
    absl::StatusOr<Image> out;
    if (sink == nullptr) {
      // The output is written once, into the result's packed form (its plain texture made only
      // if a kernel reads it); the copy counts as device time.
      out = Image::AllocatePacked(ctx_, d);
      if (!out.ok()) return out.status();
    }
    const box_filter_internal::FusedBandSink to_image = [&](const Buffer& rows, int y0, int count) {
      GpuTimer timer;
      absl::Status s = out->CopyPackedRowsFromBuffer(ctx_, rows, 0, y0, count);
      result.gpu_ns += timer.StopAndRead();
      return s;
    };
    const box_filter_internal::FusedBandSink to_sink = [&](const Buffer& rows, int y0, int count) {
      return DeliverRows(rows, d, y0, count, *sink);
    };
    if (absl::Status s = box_filter_internal::RunFusedStrips(ctx_, image, o, limit, fused_scratch_,
                                                             sink == nullptr ? to_image : to_sink,
                                                             &result.gpu_ns);
        !s.ok()) {
      return s;
    }
    if (sink == nullptr) result.image = *std::move(out);
    return result;
  }
  BoxFilterResult result;
  if (absl::Status s = box_filter_internal::FilterTiles(ctx_, image, o, variant, limit,
                                                        tile_scratch_, sink, &result);
      !s.ok()) {
    return s;
  }
  return result;
}

}  // namespace glimpse::gpu
