#include "gpu/histogram.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <set>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "common/str.h"
#include "gpu/internal/histogram_private_array.h"
#include "gpu/internal/variant_check.h"

namespace glimpse::gpu {
namespace {

constexpr HistogramVariant kConcreteHistogramVariants[] = {
    HistogramVariant::kGlobalAtomics, HistogramVariant::kSharedAtomics,
    HistogramVariant::kSharedPerThread, HistogramVariant::kPrivateRows,
    HistogramVariant::kPrivateArray};
constexpr HistogramSource kSources[] = {HistogramSource::kChannel, HistogramSource::kAllChannels,
                                        HistogramSource::kLuma, HistogramSource::kRgbMean};
constexpr int kTile = 64;       // pixels per side of the tiled variants' workgroup
constexpr int kGroupSide = 16;  // invocations per side of the one-pixel-per-thread variants
constexpr int kMaxPrivateRows = 32;
constexpr int kMinPrivateRows = 8;
// Images per atlas, at most: keeps every dispatch's workgroup counts (private_array: up to 8 per
// image; its sum pass: one row per image) far below the 65535 every device takes.
constexpr size_t kMaxAtlasImages = 4096;
// Bytes of one atlas. On GPUs each atlas costs a dispatch, a timer query and a read-back: few,
// large ones. On CPU renderers the device's memory is the host's and its caches the CPU's: an
// atlas read while its upload is still in the cache counts faster than one larger than the
// cache, by more than the extra dispatches cost (llvmpipe, 2 cores, 64 256x256 RGB images, all
// channels, 256 bins: 0.30-0.31 ms per image with 4 MiB atlases, 0.38-0.42 ms with one 12 MiB
// atlas, 0.34-0.40 ms image by image).
constexpr size_t kGpuAtlasBytes = size_t{64} << 20;
constexpr size_t kCpuAtlasBytes = size_t{4} << 20;
constexpr size_t kMaxWorkBytes = size_t{64} << 20;  // counts and partials of one atlas

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

bool ReadsBands(HistogramVariant v) {
  return v == HistogramVariant::kGlobalAtomics || v == HistogramVariant::kSharedPerThread;
}

// The variants that read the texture with texelFetch and count into shared or global memory, on
// the plain texture bound to unit 0: an atlas of `images` (rows y0 + [0, height), each y0 a
// multiple of kTile) for the variants that read bands (histogram_bands.glsl), else one image at
// row 0. `format`: the images' channels and sample type. raw: counts[image][hists][bins].
absl::StatusOr<uint64_t> RunShared(Context& ctx, const ImageDesc& format,
                                   std::span<const internal::AtlasImage> images,
                                   const HistogramOptions& o, HistogramVariant variant, int hists,
                                   HistogramBuffers& buffers, std::vector<uint32_t>* raw) {
  const ImageDesc& desc = format;
  const SharedPlan plan = PlanShared(variant, ctx.limits(), hists, o.bins);
  absl::StatusOr<GLuint> program =
      ctx.Program(ProgramName(variant), Defines(desc.type, ctx.limits(), variant, plan));
  if (!program.ok()) return program.status();

  const size_t words = size_t(hists) * size_t(o.bins) * images.size();
  const Buffer& counts = Buffer::AtLeast(buffers.counts, words * sizeof(uint32_t));
  counts.Zero();
  counts.BindBase(0);
  if (desc.type != SampleType::kFloat32) {
    internal::BindIntegerBins(internal::CachedIntegerBins(desc.type, o), buffers);
  }
  int width = 0, rows = 0;
  std::vector<int32_t> bands;  // per kTile-row band: its image's y0, width, height, index
  for (size_t i = 0; i < images.size(); ++i) {
    const internal::AtlasImage& im = images[i];
    width = std::max(width, im.width);
    rows = im.y0 + im.height;
    for (int band = im.y0 / kTile; band * kTile < rows; ++band) {
      bands.insert(bands.end(), {im.y0, im.width, im.height, int32_t(i)});
    }
  }
  if (ReadsBands(variant)) {
    const Buffer& band_buffer = Buffer::AtLeast(buffers.segments, bands.size() * sizeof(int32_t));
    band_buffer.Upload(0, bands.size() * sizeof(int32_t), bands.data());
    band_buffer.BindBase(3);
  }
  glUseProgram(*program);
  const GLuint prog = *program;
  glUniform2i(glGetUniformLocation(prog, "u_size"), width, rows);
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
  const GLuint gx = GLuint(CeilDiv(width, side)), gy = GLuint(CeilDiv(rows, side));
  GpuTimer timer;
  for (int pass = 0; pass < plan.passes; ++pass) {
    if (bin_base >= 0) glUniform1i(bin_base, pass * plan.slice);
    glDispatchCompute(gx, gy, 1);
  }
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  const uint64_t gpu_ns = timer.StopAndRead();
  glUseProgram(0);

  raw->resize(words);
  counts.Read(0, raw->size() * sizeof(uint32_t), raw->data());
  if (absl::Status s = ctx.CheckGlError("histogram"); !s.ok()) return s;
  return gpu_ns;
}

// The result for image `index` of raw counts [image][hists][bins].
HistogramResult MakeResult(const HistogramOptions& o, HistogramVariant variant, int hists,
                           const std::vector<uint32_t>& raw, size_t index, uint64_t gpu_ns) {
  HistogramResult result;
  result.bins = o.bins;
  result.lo = *o.lo;
  result.hi = *o.hi;
  result.variant = variant;
  result.gpu_ns = gpu_ns;
  result.counts.resize(size_t(hists));
  const size_t base = index * size_t(hists) * size_t(o.bins);
  for (size_t h = 0; h < size_t(hists); ++h) {
    const auto first = raw.begin() + std::ptrdiff_t(base + h * size_t(o.bins));
    result.counts[h].assign(first, first + o.bins);
  }
  return result;
}

// A texture from the context's pool that goes back to it when done (as an Image's do).
class PooledTexture {
 public:
  PooledTexture(Context& ctx, GLenum format, int width, int height, size_t bytes,
                const std::function<GlTexture()>& make)
      : ctx_(ctx),
        format_(format),
        width_(width),
        height_(height),
        bytes_(bytes),
        texture_(ctx.textures().Take(format, width, height, make)) {}
  ~PooledTexture() { ctx_.textures().Give(std::move(texture_), format_, width_, height_, bytes_); }
  PooledTexture(const PooledTexture&) = delete;
  PooledTexture& operator=(const PooledTexture&) = delete;
  GLuint get() const { return texture_.get(); }

 private:
  Context& ctx_;
  GLenum format_;
  int width_, height_;
  size_t bytes_;
  GlTexture texture_;
};

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
  for (HistogramVariant v : kConcreteHistogramVariants) {
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
  if (absl::Status s = CheckVariant(o.variant, kConcreteHistogramVariants, HistogramVariantName);
      !s.ok()) {
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
  // the programs to warm up. 16-bit images too: their 256 bins of every channel at 1920x1080 RGB
  // took 42 ms in private rows on 2 llvmpipe cores, 5.0 ms here.
  if (device.cpu_variants && desc.type != SampleType::kFloat32 &&
      o.bins <= internal::kPrivateArraySmallBins &&
      internal::CachedIntegerBins(desc.type, o)->key()) {
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
  for (HistogramVariant v : kConcreteHistogramVariants) {
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
  return absl::OkStatus();
}

absl::Status HistogramKernel::WarmUp(WarmUpShare& share) {
  // The programs kAuto can pick (see ResolveHistogramVariant; the test sweeps kAuto to catch any
  // drift): global atomics; on GPUs shared per thread; on CPU renderers private rows, whose row
  // count (32, 16 or 8) follows the counters (up to 256, 512, 1024), and for 8- and 16-bit images
  // private_array with small arrays, binning by a shift or by multiply-shift, for each source.
  // Each for every sample type and channel count (the texture format is part of llvmpipe's
  // compiled variant, and of the private_array program), on one shape of image (WarmUpShape: no
  // texture's side is a power of two, the other part of llvmpipe's variant key).
  struct Dispatch {
    HistogramVariant variant;
    HistogramSource source;
    int bins;
    std::optional<double> lo = std::nullopt;
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
      if (ctx_.info().cpu_variants && type != SampleType::kFloat32) {
        // One bin over the whole range bins by a shift alone; from 1 up, by multiply-shift (with
        // the multiplier 0), whatever the type and source. (The program is the same for every
        // count of bins up to 256.)
        for (HistogramSource source : kSources) {
          all.push_back({HistogramVariant::kPrivateArray, source, 1});
          all.push_back({HistogramVariant::kPrivateArray, source, 1, 1.0});
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
        o.lo = d.lo;
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
  // An atlas of one: the same programs and tables as RunPacked.
  std::vector<uint32_t> raw;
  uint64_t gpu_ns = 0;
  if (variant == HistogramVariant::kPrivateArray) {
    absl::StatusOr<internal::PrivateArrayCounts> r =
        internal::RunPrivateArray(ctx_, image, o, hists, buffers_);
    if (!r.ok()) return r.status();
    raw = std::move(r->counts);
    gpu_ns = r->gpu_ns;
  } else {
    image.Bind(0);
    const internal::AtlasImage one{0, desc.width, desc.height};
    absl::StatusOr<uint64_t> ns =
        RunShared(ctx_, desc, {&one, 1}, o, variant, hists, buffers_, &raw);
    if (!ns.ok()) return ns.status();
    gpu_ns = *ns;
  }
  return MakeResult(o, variant, hists, raw, 0, gpu_ns);
}

absl::StatusOr<PackedHistograms> HistogramKernel::RunPacked(std::span<const PackedImage> images,
                                                            const HistogramOptions& options) {
  PackedHistograms out;
  if (images.empty()) return out;
  const ImageDesc& format = images[0].desc;
  const bool plain_uploads = ctx_.limits().plain_uploads;
  for (size_t i = 0; i < images.size(); ++i) {
    const PackedImage& im = images[i];
    const ImageDesc& d = im.desc;
    if (absl::Status s = ValidateImageDesc(d, ctx_.limits(), StrCat("images[", i, "].desc"));
        !s.ok()) {
      return s;
    }
    if (d.channels != format.channels || d.type != format.type) {
      return absl::InvalidArgumentError(
          StrCat("images[", i, "] is a ", DescribeImage(d),
                 " image; every image of a pack must have the channels and sample type of "
                 "images[0] (",
                 DescribeImage(format), ")"));
    }
    // Image::Upload's rule: the pixels, or on plain_uploads devices a 3-channel image's widened
    // rows alone.
    const bool widened_only = d.channels == 3 && plain_uploads;
    if (im.pixels.size() != d.bytes() &&
        !(widened_only && im.pixels.empty() && im.widened.size() == WidenedBytes(d))) {
      return absl::InvalidArgumentError(StrCat(
          "images[", i, "].pixels must hold ", d.bytes(), " bytes for a ", DescribeImage(d),
          " image",
          widened_only
              ? StrCat(" (or be empty, with images[", i, "].widened holding ", WidenedBytes(d), ")")
              : std::string(),
          ", got ", im.pixels.size(), widened_only ? StrCat(" and ", im.widened.size()) : ""));
    }
  }

  // The options resolve alike for every image (they depend on the channels and sample type
  // alone), but each result carries its own error as Run would give it.
  out.results.resize(images.size());
  std::vector<size_t> todo;
  std::optional<HistogramOptions> resolved;
  for (size_t i = 0; i < images.size(); ++i) {
    absl::StatusOr<HistogramOptions> r = ResolveHistogramOptions(images[i].desc, options);
    if (!r.ok()) {
      out.results[i] = r.status();
      continue;
    }
    todo.push_back(i);
    if (!resolved) resolved = *r;
  }
  if (todo.empty()) return out;
  const HistogramOptions& o = *resolved;
  const HistogramVariant variant = ResolveHistogramVariant(ctx_.info(), format, o);
  const int hists = NumHists(format, o);
  using Clock = std::chrono::steady_clock;
  const auto ns_since = [](Clock::time_point t0) {
    return uint64_t(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  };

  const bool packed = variant == HistogramVariant::kPrivateArray;
  if (!packed && !ReadsBands(variant)) {
    // shared_atomics and private_rows (kAuto's choice on CPU renderers only where private_array
    // does not apply) read no image table: image by image.
    for (size_t i : todo) {
      const PackedImage& im = images[i];
      const auto t0 = Clock::now();
      absl::StatusOr<Image> image = Image::Upload(ctx_, im.desc, im.pixels, im.widened);
      out.upload_ns += ns_since(t0);
      if (!image.ok()) return image.status();
      out.results[i] = Run(*image, o);
      if (!out.results[i].ok()) return out.results[i].status();
      out.gpu_ns += out.results[i]->gpu_ns;
      ++out.dispatches;
    }
    return out;
  }

  // Atlases, filled in order: rows within the texture limit, bytes and work buffers within
  // their caps (an image too large for them gets an atlas of its own).
  const size_t texel_bytes =
      packed ? 16
             : size_t(format.channels == 3 ? 4 : format.channels) * BytesPerSample(format.type);
  const size_t words = size_t(hists) * size_t(o.bins);
  const size_t max_atlas_bytes = max_atlas_bytes_ != 0  ? max_atlas_bytes_
                                 : ctx_.info().software ? kCpuAtlasBytes
                                                        : kGpuAtlasBytes;
  const size_t max_work = std::min<size_t>(max_work_bytes_ != 0 ? max_work_bytes_ : kMaxWorkBytes,
                                           size_t(ctx_.limits().max_storage_block_bytes));
  std::vector<internal::AtlasImage> placed;
  std::vector<uint32_t> raw;
  for (size_t begin = 0; begin < todo.size();) {
    placed.clear();
    int width = 0, rows = 0;
    size_t work = 0;
    size_t end = begin;
    for (; end < todo.size(); ++end) {
      const ImageDesc& d = images[todo[end]].desc;
      // The plain atlas starts each image on a tile boundary, so no workgroup spans two images.
      const int y0 = packed ? rows : int(CeilDiv(rows, kTile) * kTile);
      const int new_rows = y0 + d.height;
      const int new_width = std::max(width, packed ? PackedTexelsPerRow(d) : d.width);
      const size_t new_work =
          work + words * sizeof(uint32_t) *
                     size_t(1 + (packed ? internal::PrivateArrayInvocations(d) : 0));
      const bool fits = new_rows <= ctx_.limits().max_texture_size &&
                        size_t(new_width) * texel_bytes * size_t(new_rows) <= max_atlas_bytes &&
                        new_work <= max_work && placed.size() < kMaxAtlasImages;
      if (!fits && !placed.empty()) break;
      placed.push_back({y0, d.width, d.height});
      width = new_width;
      rows = new_rows;
      work = new_work;
    }

    uint64_t gpu_ns = 0;
    if (packed) {
      // Each image's packed rows straight from its memory (WritePackedRows).
      const auto t0 = Clock::now();
      PooledTexture atlas(ctx_, GL_RGBA32UI, width, rows, size_t(width) * 16 * size_t(rows),
                          [&] { return NewRgba32uiTexture(ctx_, width, rows); });
      glBindTexture(GL_TEXTURE_2D, atlas.get());
      std::vector<uint8_t> padded, narrowed;
      for (size_t k = 0; k < placed.size(); ++k) {
        const PackedImage& im = images[todo[begin + k]];
        const ImageDesc& d = im.desc;
        const uint8_t* src = im.pixels.data();
        if (im.pixels.size() != d.bytes()) {  // widened rows alone (a GPU asked for private_array)
          narrowed = NarrowFromUpload(d, im.widened);
          src = narrowed.data();
        }
        WritePackedRows(placed[k].y0, d, src, padded);
      }
      glBindTexture(GL_TEXTURE_2D, 0);
      if (absl::Status s = ctx_.CheckGlError("uploading a pack of images"); !s.ok()) return s;
      out.upload_ns += ns_since(t0);
      absl::StatusOr<internal::PrivateArrayCounts> r =
          internal::RunPrivateArrayAtlas(ctx_, atlas.get(), format, placed, o, hists, buffers_);
      if (!r.ok()) return r.status();
      raw = std::move(r->counts);
      gpu_ns = r->gpu_ns;
    } else {
      const auto t0 = Clock::now();
      absl::StatusOr<Image> atlas =
          Image::Allocate(ctx_, {width, rows, format.channels, format.type});
      if (!atlas.ok()) return atlas.status();
      for (size_t k = 0; k < placed.size(); ++k) {
        const PackedImage& im = images[todo[begin + k]];
        if (absl::Status s = atlas->WriteRows(ctx_, placed[k].y0, im.desc, im.pixels, im.widened);
            !s.ok()) {
          return s;
        }
      }
      out.upload_ns += ns_since(t0);
      atlas->Bind(0);
      absl::StatusOr<uint64_t> ns =
          RunShared(ctx_, format, placed, o, variant, hists, buffers_, &raw);
      if (!ns.ok()) return ns.status();
      gpu_ns = *ns;
    }

    // Each image's share of the atlas's GPU time, by pixels.
    int64_t pixels = 0;
    for (const internal::AtlasImage& p : placed) pixels += int64_t{p.width} * p.height;
    for (size_t k = 0; k < placed.size(); ++k) {
      const uint64_t share = uint64_t(
          double(gpu_ns) * double(int64_t{placed[k].width} * placed[k].height) / double(pixels));
      out.results[todo[begin + k]] = MakeResult(o, variant, hists, raw, k, share);
    }
    out.gpu_ns += gpu_ns;
    ++out.dispatches;
    begin = end;
  }
  return out;
}

}  // namespace glimpse::gpu
