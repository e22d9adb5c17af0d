#include "gpu/compaction.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "common/str.h"
#include "gpu/internal/compaction_passes.h"
#include "gpu/internal/uniforms.h"
#include "gpu/internal/variant_check.h"

namespace glimpse::gpu {
namespace compaction_internal {
namespace {

std::string FormatDefines(SampleType type) {
  return StrCat(type == SampleType::kFloat32 ? "#define FMT_FLOAT 1\n" : "#define FMT_UINT 1\n",
                "#define SAMPLE_BITS ", 8 * BytesPerSample(type), "\n");
}

}  // namespace

// The gather program's defines: the channel count is a constant there, so that splitting the
// packed samples among pixels compiles to shifts and multiplies rather than divisions.
bool ReadsPacked(const DeviceInfo& device, CompactionVariant variant) {
  return variant == CompactionVariant::kStripScan || device.software;
}

std::string GatherDefines(SampleType type, int channels, bool packed) {
  return StrCat(FormatDefines(type), "#define CHANNELS ", channels, "\n",
                packed ? "#define PACKED_IMAGE 1\n" : "");
}

std::string PredicateDefines(SampleType type, CompactionSource source, bool count_only) {
  return StrCat(
      FormatDefines(type),
      source == CompactionSource::kLuma ? "#define SOURCE_LUMA 1\n" : "#define SOURCE_CHANNEL 1\n",
      count_only ? "#define COUNT_ONLY 1\n" : "", "#define PIXELS_PER_THREAD ", kPixelsPerThread,
      "\n");
}

std::string_view FindProgram(CompactionVariant variant) {
  switch (variant) {
    case CompactionVariant::kAtomicPerPixel:
      return "compaction_atomic_per_pixel";
    case CompactionVariant::kWorkgroupAggregated:
      return "compaction_workgroup_aggregated";
    case CompactionVariant::kSubgroupAggregated:
      return "compaction_subgroup_aggregated";
    case CompactionVariant::kStripScan:
      return "compaction_strip_count";
    default:
      break;
  }
  return "compaction_block_count";
}

std::string ScanDefines() { return StrCat("#define PIXELS_PER_THREAD ", kPixelsPerThread, "\n"); }

bool StripChannelIsDefine(const ImageDesc& desc) {
  return desc.channels * BytesPerSample(desc.type) == 3;
}

std::string StripDefines(const ImageDesc& desc, CompactionSource source, int channel,
                         bool count_only) {
  const bool channel_define = source == CompactionSource::kChannel && StripChannelIsDefine(desc);
  return StrCat(
      ImageDefines(desc),
      source == CompactionSource::kLuma ? "#define SOURCE_LUMA 1\n" : "#define SOURCE_CHANNEL 1\n",
      channel_define ? StrCat("#define STRIP_CHANNEL ", channel, "\n") : std::string(),
      count_only ? "#define COUNT_ONLY 1\n" : "");
}

std::string FindDefines(CompactionVariant variant, const ImageDesc& desc, CompactionSource source,
                        int channel, bool count_only, bool packed) {
  if (variant == CompactionVariant::kStripScan) {
    return StripDefines(desc, source, channel, count_only);
  }
  // Read through the prelude's load_texel, which needs the channel count to find a pixel in
  // the packed rows; from the texture, one program serves every channel count.
  return StrCat(PredicateDefines(desc.type, source, count_only),
                packed ? StrCat("#define CHANNELS ", desc.channels, "\n#define PACKED_IMAGE 1\n")
                       : std::string());
}

void DispatchFlat(GLuint program, const DeviceLimits& limits, int64_t groups) {
  SetUint(program, "u_num_groups", uint64_t(groups));
  const int64_t gx = std::min<int64_t>(groups, limits.max_group_count[0]);
  glUseProgram(program);
  glDispatchCompute(GLuint(gx), GLuint(CeilDiv(groups, gx)), 1);
}

}  // namespace compaction_internal

namespace {

using compaction_internal::DispatchFlat;
using compaction_internal::FindDefines;
using compaction_internal::FindProgram;
using compaction_internal::GatherDefines;
using compaction_internal::kDataBinding;
using compaction_internal::kSumsBinding;
using compaction_internal::PredicateDefines;
using compaction_internal::ReadsPacked;
using compaction_internal::ScanDefines;
using compaction_internal::StripChannelIsDefine;
using compaction_internal::StripDefines;

constexpr CompactionVariant kConcreteCompactionVariants[] = {
    CompactionVariant::kAtomicPerPixel, CompactionVariant::kWorkgroupAggregated,
    CompactionVariant::kOrderedScan, CompactionVariant::kStripScan,
    CompactionVariant::kSubgroupAggregated};
constexpr int kMaxCompactSide = 65536;  // the lists' 16-bit x and y
constexpr SampleType kSampleTypes[] = {SampleType::kUint8, SampleType::kUint16,
                                       SampleType::kFloat32};

// The strip scan reads pixels out of 32-bit words of the packed form: whole pixels per word, or
// (3 bytes: 8-bit RGB) 4 whole pixels per 3 words.
bool StripScanFits(const ImageDesc& desc) {
  const int pixel_bytes = desc.channels * BytesPerSample(desc.type);
  return pixel_bytes >= 1 && pixel_bytes <= 4;
}

}  // namespace

std::string_view CompactionSourceName(CompactionSource s) {
  switch (s) {
    case CompactionSource::kChannel:
      return "channel";
    case CompactionSource::kLuma:
      return "luma";
  }
  return "unknown";
}

std::optional<CompactionSource> ParseCompactionSource(std::string_view name) {
  for (CompactionSource s : {CompactionSource::kChannel, CompactionSource::kLuma}) {
    if (CompactionSourceName(s) == name) return s;
  }
  return std::nullopt;
}

std::string_view CompactionVariantName(CompactionVariant v) {
  switch (v) {
    case CompactionVariant::kAuto:
      return "auto";
    case CompactionVariant::kAtomicPerPixel:
      return "atomic_per_pixel";
    case CompactionVariant::kWorkgroupAggregated:
      return "workgroup_aggregated";
    case CompactionVariant::kOrderedScan:
      return "ordered_scan";
    case CompactionVariant::kStripScan:
      return "strip_scan";
    case CompactionVariant::kSubgroupAggregated:
      return "subgroup_aggregated";
  }
  return "unknown";
}

std::optional<CompactionVariant> ParseCompactionVariant(std::string_view name) {
  if (name.empty() || name == "auto") return CompactionVariant::kAuto;
  for (CompactionVariant v : kConcreteCompactionVariants) {
    if (CompactionVariantName(v) == name) return v;
  }
  return std::nullopt;
}

absl::StatusOr<CompactionOptions> ResolveCompactionOptions(const ImageDesc& desc,
                                                           const CompactionOptions& options) {
  const CompactionOptions& o = options;
  // The lists hold each pixel as (y << 16) | x.
  if (desc.width > kMaxCompactSide || desc.height > kMaxCompactSide) {
    return absl::InvalidArgumentError(StrCat("image width and height must be at most ",
                                             kMaxCompactSide, ", got ", desc.width, "x",
                                             desc.height));
  }
  switch (o.source) {
    case CompactionSource::kChannel:
      if (o.channel < 0 || o.channel >= desc.channels) {
        return absl::InvalidArgumentError(StrCat("channel must be in [0, ", desc.channels - 1,
                                                 "] for a ", desc.channels, "-channel image, got ",
                                                 o.channel));
      }
      break;
    case CompactionSource::kLuma:
      if (desc.channels < 3) {
        return absl::InvalidArgumentError(
            StrCat("source luma needs 3 or 4 channels, the image has ", desc.channels));
      }
      break;
    default:
      return absl::InvalidArgumentError(
          StrCat("source must be channel or luma, got ", static_cast<int>(o.source)));
  }
  if (std::isnan(o.lo)) return absl::InvalidArgumentError("lo must be a number or +-inf, got nan");
  if (std::isnan(o.hi)) return absl::InvalidArgumentError("hi must be a number or +-inf, got nan");
  if (o.lo > o.hi) {
    return absl::InvalidArgumentError(
        StrCat("lo must not exceed hi, got lo = ", o.lo, ", hi = ", o.hi));
  }
  if (o.max_results < 0 || o.max_results > kMaxCompactionResults) {
    return absl::InvalidArgumentError(
        StrCat("max_results must be in [0, ", kMaxCompactionResults, "], got ", o.max_results));
  }
  if (absl::Status s = CheckVariant(o.variant, kConcreteCompactionVariants, CompactionVariantName);
      !s.ok()) {
    return s;
  }
  if (o.variant == CompactionVariant::kStripScan && !StripScanFits(desc)) {
    return absl::InvalidArgumentError(
        StrCat("variant strip_scan needs 1 to 4 bytes per pixel, got a ", DescribeImage(desc),
               " image (", desc.channels * BytesPerSample(desc.type), " bytes per pixel)"));
  }
  return o;
}

absl::Status CompactionVariantAvailable(const DeviceInfo& device, CompactionVariant variant) {
  if (variant != CompactionVariant::kSubgroupAggregated) return absl::OkStatus();
  return RequireSubgroupBallots(device, CompactionVariantName(variant));
}

CompactionVariant ResolveCompactionVariant(const DeviceInfo& device, const ImageDesc& desc,
                                           const CompactionOptions& resolved) {
  if (resolved.variant != CompactionVariant::kAuto) return resolved.variant;
  if (device.cpu_variants && StripScanFits(desc)) return CompactionVariant::kStripScan;
  return CompactionVariant::kOrderedScan;
}

absl::Status CompactionKernel::Prepare(SampleType type) {
  for (CompactionSource s : {CompactionSource::kChannel, CompactionSource::kLuma}) {
    for (bool count_only : {false, true}) {
      for (CompactionVariant v : kConcreteCompactionVariants) {
        if (v == CompactionVariant::kStripScan) continue;
        if (!CompactionVariantAvailable(ctx_.info(), v).ok()) continue;
        if (!ReadsPacked(ctx_.info(), v)) {
          absl::StatusOr<GLuint> p =
              ctx_.Program(FindProgram(v), PredicateDefines(type, s, count_only));
          if (!p.ok()) return p.status();
          continue;
        }
        // A program per channel count: those auto picks here, the rest on first use.
        for (int channels = 1; channels <= 4; ++channels) {
          const ImageDesc desc{1, 1, channels, type};
          if (s == CompactionSource::kLuma && channels < 3) continue;
          if (ResolveCompactionVariant(ctx_.info(), desc, {}) != v) continue;
          absl::StatusOr<GLuint> p =
              ctx_.Program(FindProgram(v), FindDefines(v, desc, s, 0, count_only, true));
          if (!p.ok()) return p.status();
        }
      }
    }
  }
  for (int channels = 1; channels <= 4; ++channels) {
    const ImageDesc desc{1, 1, channels, type};
    if (!StripScanFits(desc)) continue;
    for (CompactionSource s : {CompactionSource::kChannel, CompactionSource::kLuma}) {
      if (s == CompactionSource::kLuma && channels < 3) continue;
      if (absl::StatusOr<GLuint> p = ctx_.Program("compaction_strip_rows"); !p.ok()) {
        return p.status();
      }
      const int programs_channels =
          s == CompactionSource::kChannel && StripChannelIsDefine(desc) ? channels : 1;
      for (int channel = 0; channel < programs_channels; ++channel) {
        for (std::string_view name : {"compaction_strip_count", "compaction_strip_write"}) {
          for (bool count_only : {false, true}) {
            if (count_only && name == "compaction_strip_write") continue;
            absl::StatusOr<GLuint> p =
                ctx_.Program(name, StripDefines(desc, s, channel, count_only));
            if (!p.ok()) return p.status();
          }
        }
      }
    }
  }
  for (std::string_view name : {"compaction_scan", "compaction_scan_add", "compaction_scatter"}) {
    absl::StatusOr<GLuint> p = ctx_.Program(name, ScanDefines());
    if (!p.ok()) return p.status();
  }
  for (int channels = 1; channels <= 4; ++channels) {
    // The gather of every variant auto picks here (a strip run's elsewhere: on first use).
    absl::StatusOr<GLuint> p =
        ctx_.Program("compaction_gather", GatherDefines(type, channels, ctx_.info().software));
    if (!p.ok()) return p.status();
  }
  return absl::OkStatus();
}

absl::Status CompactionKernel::WarmUp(WarmUpShare& share) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (SampleType type : kSampleTypes) {
    for (int channels = 1; channels <= 4; ++channels) {
      if (!share.Claim()) continue;
      // Every pixel passes, so a list run dispatches every pass down to the gather.
      const ImageDesc desc = WarmUpShape(type, channels);
      absl::StatusOr<Image> image = Image::Upload(ctx_, HostImage::Zeros(desc));
      if (!image.ok()) return image.status();
      for (CompactionSource source : {CompactionSource::kChannel, CompactionSource::kLuma}) {
        if (source == CompactionSource::kLuma && channels < 3) continue;
        for (bool count_only : {false, true}) {
          const CompactionOptions o{
              .source = source, .lo = -kInf, .hi = kInf, .count_only = count_only};
          absl::StatusOr<CompactionResult> r = Run(*image, o);
          if (!r.ok()) return r.status();
          // A strip program per channel where the channel is a define.
          if (r->variant == CompactionVariant::kStripScan && source == CompactionSource::kChannel &&
              StripChannelIsDefine(desc)) {
            for (int channel = 1; channel < channels; ++channel) {
              CompactionOptions other = o;
              other.channel = channel;
              if (absl::StatusOr<CompactionResult> c = Run(*image, other); !c.ok()) {
                return c.status();
              }
            }
          }
          if (count_only || r->variant != CompactionVariant::kOrderedScan) continue;
          // The scan's way back down runs only past 1024 blocks (8.4 M pixels per band): dispatch
          // it once with nothing to do (its first workgroup adds nothing).
          absl::StatusOr<GLuint> add = ctx_.Program("compaction_scan_add", ScanDefines());
          if (!add.ok()) return add.status();
          Buffer data = Buffer::Create(16), sums = Buffer::Create(16);
          data.BindBase(kDataBinding);
          sums.BindBase(kSumsBinding);
          SetUint(*add, "u_count", 0);
          DispatchFlat(*add, ctx_.limits(), 1);
          glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
          glUseProgram(0);
          ctx_.Finish();
        }
      }
    }
  }
  return ctx_.CheckGlError("compaction warm-up");
}

}  // namespace glimpse::gpu
