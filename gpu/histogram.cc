#include "gpu/histogram.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "common/str.h"
#include "gpu/internal/histogram_private_array.h"
#include "gpu/internal/variant_check.h"

namespace glimpse::gpu {
namespace {

constexpr HistogramVariant kConcreteVariants[] = {
    HistogramVariant::kGlobalAtomics, HistogramVariant::kSharedAtomics,
    HistogramVariant::kSharedPerThread, HistogramVariant::kPrivateRows,
    HistogramVariant::kPrivateArray};
constexpr HistogramSource kSources[] = {HistogramSource::kChannel, HistogramSource::kAllChannels,
                                        HistogramSource::kLuma, HistogramSource::kRgbMean};
constexpr int kTile = 64;       // pixels per side of the tiled variants' workgroup
constexpr int kGroupSide = 16;  // invocations per side of the one-pixel-per-thread variants
constexpr int kMaxPrivateRows = 32;
constexpr int kMinPrivateRows = 8;

int NumHists(const ImageDesc& d, const HistogramOptions& o) {
  return o.source == HistogramSource::kAllChannels ? d.channels : 1;
}

// How a variant lays out its shared memory: bins per dispatch (slice) and private rows.
struct SharedPlan {
  int slice = 0;
  int rows = 0;
  int passes = 1;
};

SharedPlan PlanShared(HistogramVariant v, const DeviceLimits& limits, int hists, int bins) {
  const int words = limits.max_shared_memory_bytes / 4;
  SharedPlan plan;
  if (v == HistogramVariant::kPrivateRows) {
    plan.rows = kMaxPrivateRows;
    while (plan.rows > kMinPrivateRows && plan.rows * hists * bins > words) plan.rows /= 2;
    plan.slice = std::min(bins, words / (plan.rows * hists));
    plan.passes = int(CeilDiv(bins, plan.slice));
  } else if (v != HistogramVariant::kGlobalAtomics) {
    plan.slice = std::min(bins, words / hists);
    plan.passes = int(CeilDiv(bins, plan.slice));
  }
  return plan;
}

std::string ProgramName(HistogramVariant v) {
  return StrCat("histogram_", HistogramVariantName(v));
}

// Only what must be compile-time: the sample kind, the shared array size, the private row count.
// The source, channel count and bin slice are uniforms, so few programs serve every request.
std::string Defines(SampleType type, const DeviceLimits& limits, HistogramVariant v,
                    const SharedPlan& plan) {
  std::string defs =
      type == SampleType::kFloat32 ? "#define FMT_FLOAT 1\n" : "#define FMT_UINT 1\n";
  StrAppend(&defs, "#define SHARED_WORDS ", limits.max_shared_memory_bytes / 4, "\n");
  if (v == HistogramVariant::kPrivateRows) StrAppend(&defs, "#define ROWS ", plan.rows, "\n");
  return defs;
}

int SourceIndex(HistogramSource s) {
  switch (s) {
    case HistogramSource::kChannel:
      return 0;
    case HistogramSource::kAllChannels:
      return 1;
    case HistogramSource::kLuma:
      return 2;
    case HistogramSource::kRgbMean:
      break;
  }
  return 3;
}

// Exact floor((num) / den) for den > 0.
int64_t FloorDiv(int64_t num, int64_t den) {
  int64_t q = num / den;
  return (num % den != 0 && num < 0) ? q - 1 : q;
}

// The variants that read the texture with texelFetch and count into shared or global memory.
absl::StatusOr<uint64_t> RunShared(Context& ctx, const Image& image, const HistogramOptions& o,
                                   HistogramVariant variant, int hists, HistogramBuffers& buffers,
                                   std::vector<uint32_t>* raw) {
  const ImageDesc& desc = image.desc();
  const SharedPlan plan = PlanShared(variant, ctx.limits(), hists, o.bins);
  absl::StatusOr<GLuint> program =
      ctx.Program(ProgramName(variant), Defines(desc.type, ctx.limits(), variant, plan));
  if (!program.ok()) return program.status();

  const Buffer& counts = Buffer::AtLeast(buffers.counts, size_t(hists) * o.bins * sizeof(uint32_t));
  counts.Zero();
  counts.BindBase(0);
  if (desc.type != SampleType::kFloat32) {
    std::vector<int32_t> t = BuildIntegerBinTable(desc, o);
    const size_t bytes = t.size() * sizeof(int32_t);
    const Buffer& table = Buffer::AtLeast(buffers.table, bytes);
    table.Upload(0, bytes, t.data());
    table.BindBase(1);
  }
  image.Bind(0);
  glUseProgram(*program);
  const GLuint prog = *program;
  glUniform2i(glGetUniformLocation(prog, "u_size"), desc.width, desc.height);
  glUniform1i(glGetUniformLocation(prog, "u_bins"), o.bins);
  glUniform1i(glGetUniformLocation(prog, "u_channel"), o.channel);
  glUniform1i(glGetUniformLocation(prog, "u_source"), SourceIndex(o.source));
  glUniform1i(glGetUniformLocation(prog, "u_hists"), hists);
  glUniform1i(glGetUniformLocation(prog, "u_slice"), plan.slice);
  glUniform1d(glGetUniformLocation(prog, "u_lo"), *o.lo);
  glUniform1d(glGetUniformLocation(prog, "u_hi"), *o.hi);
  glUniform1d(glGetUniformLocation(prog, "u_scale"), double(o.bins) / (*o.hi - *o.lo));
  const GLint bin_base = glGetUniformLocation(prog, "u_bin_base");

  const int side = variant == HistogramVariant::kGlobalAtomics   ? kGroupSide
                   : variant == HistogramVariant::kSharedAtomics ? kGroupSide
                                                                 : kTile;
  const GLuint gx = GLuint(CeilDiv(desc.width, side)), gy = GLuint(CeilDiv(desc.height, side));
  GpuTimer timer;
  for (int pass = 0; pass < plan.passes; ++pass) {
    if (bin_base >= 0) glUniform1i(bin_base, pass * plan.slice);
    glDispatchCompute(gx, gy, 1);
  }
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  const uint64_t gpu_ns = timer.StopAndRead();
  glUseProgram(0);

  raw->resize(size_t(hists) * o.bins);
  counts.Read(0, raw->size() * sizeof(uint32_t), raw->data());
  if (absl::Status s = ctx.CheckGlError("histogram"); !s.ok()) return s;
  return gpu_ns;
}

}  // namespace

std::string_view HistogramVariantName(HistogramVariant v) {
  switch (v) {
    case HistogramVariant::kAuto:
      return "auto";
    case HistogramVariant::kGlobalAtomics:
      return "global_atomics";
    case HistogramVariant::kSharedAtomics:
      return "shared_atomics";
    case HistogramVariant::kSharedPerThread:
      return "shared_per_thread";
    case HistogramVariant::kPrivateRows:
      return "private_rows";
    case HistogramVariant::kPrivateArray:
      return "private_array";
  }
  return "unknown";
}

std::optional<HistogramVariant> ParseHistogramVariant(std::string_view name) {
  if (name.empty() || name == "auto") return HistogramVariant::kAuto;
  for (HistogramVariant v : kConcreteVariants) {
    if (HistogramVariantName(v) == name) return v;
  }
  return std::nullopt;
}

std::string_view HistogramSourceName(HistogramSource s) {
  switch (s) {
    case HistogramSource::kChannel:
      return "channel";
    case HistogramSource::kAllChannels:
      return "all";
    case HistogramSource::kLuma:
      return "luma";
    case HistogramSource::kRgbMean:
      return "rgb_mean";
  }
  return "unknown";
}

std::optional<HistogramSource> ParseHistogramSource(std::string_view name) {
  for (HistogramSource s : kSources) {
    if (HistogramSourceName(s) == name) return s;
  }
  return std::nullopt;
}

absl::StatusOr<HistogramOptions> ResolveHistogramOptions(const ImageDesc& desc,
                                                         const HistogramOptions& options) {
  HistogramOptions o = options;
  if (o.bins < 1 || o.bins > kMaxHistogramBins) {
    return absl::InvalidArgumentError(
        StrCat("bins must be in [1, ", kMaxHistogramBins, "], got ", o.bins));
  }
  const double full_hi = desc.type == SampleType::kUint8    ? 256.0
                         : desc.type == SampleType::kUint16 ? 65536.0
                                                            : 1.0;
  if (!o.lo) o.lo = 0.0;
  if (!o.hi) o.hi = full_hi;
  if (!std::isfinite(*o.lo))
    return absl::InvalidArgumentError(StrCat("lo must be finite, got ", *o.lo));
  if (!std::isfinite(*o.hi))
    return absl::InvalidArgumentError(StrCat("hi must be finite, got ", *o.hi));
  if (!(*o.lo < *o.hi)) {
    return absl::InvalidArgumentError(
        StrCat("lo must be below hi, got lo = ", *o.lo, ", hi = ", *o.hi));
  }
  if (o.source == HistogramSource::kChannel && (o.channel < 0 || o.channel >= desc.channels)) {
    return absl::InvalidArgumentError(StrCat("channel must be in [0, ", desc.channels - 1,
                                             "] for a ", desc.channels, "-channel image, got ",
                                             o.channel));
  }
  if ((o.source == HistogramSource::kLuma || o.source == HistogramSource::kRgbMean) &&
      desc.channels < 3) {
    return absl::InvalidArgumentError(StrCat("source ", HistogramSourceName(o.source),
                                             " needs 3 or 4 channels, the image has ",
                                             desc.channels));
  }
  if (absl::Status s = CheckVariant(o.variant, kConcreteVariants, HistogramVariantName); !s.ok()) {
    return s;
  }
  if (o.variant == HistogramVariant::kPrivateArray &&
      int64_t{NumHists(desc, o)} * o.bins > kMaxPrivateArrayWords) {
    return absl::InvalidArgumentError(
        StrCat("bins x histograms must be at most ", kMaxPrivateArrayWords,
               " for variant private_array, got ", o.bins, " x ", NumHists(desc, o)));
  }
  return o;
}

HistogramVariant ResolveHistogramVariant(const DeviceInfo& device, const ImageDesc& desc,
                                         const HistogramOptions& o) {
  if (o.variant != HistogramVariant::kAuto) return o.variant;
  const int hists = NumHists(desc, o);
  // Only with multiply-shift binning: the table is read from a storage buffer one SIMD lane at a
  // time, is needed only for rare bounds (e.g. fractional ones), and would add a program per
  // channel count and source to warm up.
  // And only with the small arrays: more than 256 bins of 8-bit values are rare, and would double
  // the programs to warm up.
  if (device.cpu_variants && desc.type == SampleType::kUint8 &&
      o.bins <= internal::kPrivateArraySmallBins &&
      internal::FindKeyArithmetic(o, BuildIntegerBinTable(desc, o))) {
    return HistogramVariant::kPrivateArray;
  }
  if (device.cpu_variants) {
    // Beyond private rows, global atomics beat the shared histogram on llvmpipe (1.5-3x for
    // 1024-4096 counters, smooth and random images: shared atomics also loop over the lanes).
    return PlanShared(HistogramVariant::kPrivateRows, device.limits, hists, o.bins).passes == 1
               ? HistogramVariant::kPrivateRows
               : HistogramVariant::kGlobalAtomics;
  }
  if (PlanShared(HistogramVariant::kSharedPerThread, device.limits, hists, o.bins).passes == 1) {
    return HistogramVariant::kSharedPerThread;
  }
  // Re-reading the image once per slice of bins costs more than global atomics on many bins.
  return HistogramVariant::kGlobalAtomics;
}

std::vector<int32_t> BuildIntegerBinTable(const ImageDesc& desc, const HistogramOptions& o) {
  const int64_t max_sample = desc.type == SampleType::kUint8 ? 255 : 65535;
  const bool mean = o.source == HistogramSource::kRgbMean;
  // For kRgbMean the key is R+G+B and the value key / 3: scale everything by 3.
  const int64_t scale = mean ? 3 : 1;
  const int64_t keys = (mean ? 3 * max_sample : max_sample) + 1;
  std::vector<int32_t> table(size_t(keys), -1);
  const double lo = *o.lo, hi = *o.hi;
  const bool integral_bounds =
      lo == std::floor(lo) && hi == std::floor(hi) && std::abs(lo) < 1e12 && std::abs(hi) < 1e12;
  for (int64_t key = 0; key < keys; ++key) {
    if (integral_bounds) {
      const int64_t l = int64_t(lo) * scale, h = int64_t(hi) * scale;
      if (key < l || key >= h) continue;
      table[size_t(key)] = int32_t(FloorDiv((key - l) * o.bins, h - l));
    } else {
      const long double v = (long double)key / scale;
      if (v < lo || v >= hi) continue;
      long double t = (v - lo) * o.bins / ((long double)hi - lo);
      table[size_t(key)] = int32_t(std::min<long double>(std::floor(t), o.bins - 1));
    }
  }
  return table;
}

absl::Status HistogramKernel::Prepare(SampleType type) {
  // Every program a request can need: each variant, and each private row count.
  for (HistogramVariant v : kConcreteVariants) {
    if (v == HistogramVariant::kPrivateArray) continue;
    for (int hists_bins : {256, 4 * 256, 4 * kMaxHistogramBins}) {
      SharedPlan plan = PlanShared(v, ctx_.limits(), 1, hists_bins);
      absl::StatusOr<GLuint> p =
          ctx_.Program(ProgramName(v), Defines(type, ctx_.limits(), v, plan));
      if (!p.ok()) return p.status();
    }
  }
  // private_array: one program per channel count, source, array size and key binning.
  std::set<std::string> defines;
  for (int channels = 1; channels <= 4; ++channels) {
    const ImageDesc desc{1, 1, channels, type};
    for (HistogramSource source : kSources) {
      if (channels < 3 && source != HistogramSource::kChannel &&
          source != HistogramSource::kAllChannels) {
        continue;
      }
      const int hists = source == HistogramSource::kAllChannels ? channels : 1;
      for (int bins : {1, kMaxPrivateArrayWords / hists}) {
        for (internal::KeyBinning binning : internal::kKeyBinnings) {
          defines.insert(internal::PrivateArrayDefines(desc, source, bins, binning));
        }
      }
    }
  }
  for (const std::string& d : defines) {
    if (absl::StatusOr<GLuint> p = ctx_.Program("histogram_private_array", d); !p.ok()) {
      return p.status();
    }
  }
  absl::StatusOr<GLuint> sum = ctx_.Program("histogram_private_array_sum");
  return sum.ok() ? absl::OkStatus() : sum.status();
}

absl::Status HistogramKernel::WarmUp(WarmUpShare& share) {
  // The programs kAuto can pick (see ResolveHistogramVariant; the test sweeps kAuto to catch any
  // drift): global atomics; on GPUs shared per thread; on CPU renderers private rows, whose row
  // count (32, 16 or 8) follows the counters (up to 256, 512, 1024), and for 8-bit images
  // private_array with small arrays, binning by a shift or by multiply-shift, for each source.
  // Each for every sample type and channel count (the texture format is part of llvmpipe's
  // compiled variant, and of the private_array program), on one shape of image (WarmUpShape: no
  // texture's side is a power of two, the other part of llvmpipe's variant key).
  struct Dispatch {
    HistogramVariant variant;
    HistogramSource source;
    int bins;
  };
  std::vector<Dispatch> dispatches = {
      {HistogramVariant::kGlobalAtomics, HistogramSource::kChannel, kMaxHistogramBins}};
  if (ctx_.info().cpu_variants) {
    for (int bins : {256, 512, kMaxPrivateArrayWords}) {
      dispatches.push_back({HistogramVariant::kPrivateRows, HistogramSource::kChannel, bins});
    }
  } else {
    dispatches.push_back({HistogramVariant::kSharedPerThread, HistogramSource::kChannel, 4096});
  }
  for (SampleType type : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
    for (int channels = 1; channels <= 4; ++channels) {
      std::vector<Dispatch> all = dispatches;
      if (ctx_.info().cpu_variants && type == SampleType::kUint8) {
        // Over the whole range, 1 bin bins by a shift alone, 10 bins by multiply-shift.
        for (HistogramSource source : kSources) {
          for (int bins : {1, 10}) all.push_back({HistogramVariant::kPrivateArray, source, bins});
        }
      }
      const ImageDesc desc = WarmUpShape(type, channels);
      absl::StatusOr<Image> image = Image::Upload(ctx_, HostImage::Zeros(desc));
      if (!image.ok()) return image.status();
      for (const Dispatch& d : all) {
        HistogramOptions o;
        o.variant = d.variant;
        o.source = d.source;
        o.bins = d.bins;
        if (!ResolveHistogramOptions(desc, o).ok()) continue;  // e.g. luma of 1 channel
        if (!share.Claim()) continue;
        if (absl::StatusOr<HistogramResult> r = Run(*image, o); !r.ok()) return r.status();
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<HistogramResult> HistogramKernel::Run(const Image& image,
                                                     const HistogramOptions& options) {
  const ImageDesc& desc = image.desc();
  absl::StatusOr<HistogramOptions> resolved = ResolveHistogramOptions(desc, options);
  if (!resolved.ok()) return resolved.status();
  const HistogramOptions& o = *resolved;
  if (desc.pixels() >= (int64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        "images of 2^32 pixels or more overflow the 32-bit bin counters");
  }
  const HistogramVariant variant = ResolveHistogramVariant(ctx_.info(), desc, o);
  const int hists = NumHists(desc, o);
  HistogramResult result;
  std::vector<uint32_t> raw;
  if (variant == HistogramVariant::kPrivateArray) {
    absl::StatusOr<internal::PrivateArrayCounts> r =
        internal::RunPrivateArray(ctx_, image, o, hists, buffers_);
    if (!r.ok()) return r.status();
    raw = std::move(r->counts);
    result.gpu_ns = r->gpu_ns;
  } else {
    absl::StatusOr<uint64_t> gpu_ns = RunShared(ctx_, image, o, variant, hists, buffers_, &raw);
    if (!gpu_ns.ok()) return gpu_ns.status();
    result.gpu_ns = *gpu_ns;
  }
  result.bins = o.bins;
  result.lo = *o.lo;
  result.hi = *o.hi;
  result.variant = variant;
  result.counts.resize(size_t(hists));
  for (int h = 0; h < hists; ++h) {
    result.counts[size_t(h)].assign(raw.begin() + h * o.bins, raw.begin() + (h + 1) * o.bins);
  }
  return result;
}

}  // namespace glimpse::gpu
