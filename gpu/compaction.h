// Stream compaction as a pixel filter: the pixels whose channel value (or luma) lies inside (or
// outside) [lo, hi], as (x, y) and their samples, always in row-major order (y, then x: the order
// of numpy's argwhere and OpenCV's findNonZero), with the exact total.
//
//   CompactionKernel kernel(ctx);
//   CompactionOptions options{.channel = 0, .lo = 200, .hi = 255};  // channel 0 in [200, 255]
//   absl::StatusOr<CompactionResult> r = kernel.Run(image, options);
//   if (!r.ok()) return r.status();  // e.g. channel past the image's channels
//   // r->total passing pixels; the first r->returned() at (r->xy[2 * i], r->xy[2 * i + 1]).
#ifndef GLIMPSE_GPU_COMPACTION_H_
#define GLIMPSE_GPU_COMPACTION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/context.h"
#include "gpu/image.h"
#include "gpu/warm_up.h"

namespace glimpse::gpu {

// Which value the predicate tests.
enum class CompactionSource {
  kChannel,  // one channel (CompactionOptions::channel)
  kLuma,     // Y of RGB (3 or 4 channels), the histogram's formulas: 8/16-bit OpenCV RGB2GRAY
             // exactly, float32 y = 0.299 r + 0.587 g + 0.114 b in float, no fused multiply-add
};
std::string_view CompactionSourceName(CompactionSource s);  // "channel", "luma"
std::optional<CompactionSource> ParseCompactionSource(std::string_view name);

// How the kernel finds each passing pixel's place in the output. Whatever runs, the result is in
// row-major order: the atomic variants produce an unordered list of pixel keys ((y << 16) | x)
// that the host reads back and orders (a bitmap of the band, read in order: linear time for
// distinct keys) before the values are gathered; the ordered scan needs no ordering step.
enum class CompactionVariant {
  kAuto,                 // the fastest correct one (ResolveCompactionVariant)
  kAtomicPerPixel,       // one global atomicAdd per passing pixel
  kWorkgroupAggregated,  // a shared counter per workgroup, one global atomicAdd per workgroup
  kOrderedScan,          // per-block counts, a multi-level exclusive scan, in-block scan + scatter
  kStripScan,  // for CPU renderers: the packed form read 16 bytes per load, private counts per
               // 32-pixel segment (no atomics, no shared memory), a multi-level exclusive scan
               // of them, a pass writing the keys in row-major order. 1 to 4 bytes per pixel.
  kSubgroupAggregated,  // a ballot per subgroup (warp), one global atomicAdd per subgroup; needs
                        // subgroup ballots (DeviceLimits::subgroup_ballot), refused without
};
std::string_view CompactionVariantName(CompactionVariant v);  // "atomic_per_pixel", ...
std::optional<CompactionVariant> ParseCompactionVariant(
    std::string_view name);  // "" or "auto": kAuto

inline constexpr int64_t kDefaultCompactMaxResults = 1 << 20;
inline constexpr int64_t kMaxCompactionResults = int64_t{1} << 31;

// The predicate: lo <= v <= hi (inside) or v < lo || v > hi (outside). lo and hi may be infinite
// (useful on float data), never NaN, and lo <= hi (lo == hi selects one value). A NaN sample
// (float32) passes neither way. Comparisons are exact, as if the float sample (or float luma) and
// the double bounds were compared as doubles; integer data compares the integer sample or luma.
// (Float luma is arithmetic: a device that flushes denormal results to zero may see 0 where the
// CPU sees a luma below 1.2e-38.)
struct CompactionOptions {
  CompactionSource source = CompactionSource::kChannel;
  int channel = 0;        // for kChannel: [0, channels)
  double lo = 0, hi = 0;  // both inclusive
  bool inside = true;
  // The most pixels returned, [0, kMaxCompactionResults]; the first ones in row-major order. The
  // total stays exact whatever the cap. The atomic variants still find, read back and order
  // every passing pixel of a band before cutting (memory: 4 bytes per pixel of a band).
  int64_t max_results = kDefaultCompactMaxResults;
  bool count_only = false;  // only the total: no pixel list is allocated, written or read
  CompactionVariant variant = CompactionVariant::kAuto;
};

struct CompactionResult {
  uint64_t total = 0;           // exact number of passing pixels
  bool truncated = false;       // the cap cut the list: total > returned (never in count_only)
  std::vector<uint32_t> xy;     // returned pixels, x0,y0,x1,y1,... in row-major order (y, then x)
  std::vector<uint8_t> values;  // their samples, all channels, image's sample type, little-endian
  CompactionVariant variant = CompactionVariant::kAuto;  // the variant that ran
  // GPU time of the dispatches (not the read-backs, nor the atomic variants' host ordering).
  uint64_t gpu_ns = 0;
  uint64_t streamed = 0;  // entries handed to a sink instead (CompactionKernel::Stream)

  size_t returned() const { return xy.size() / 2 + streamed; }
};

// Entries [first, first + count) of the list: their (x, y) pairs and their values, as in
// CompactionResult.
struct CompactionPiece {
  uint64_t first = 0, count = 0;
  std::span<const uint32_t> xy;     // 2 count
  std::span<const uint8_t> values;  // count times the pixel's bytes
};
using CompactionSink = std::function<absl::Status(const CompactionPiece&)>;

// Checks options against the image; errors name the field, the value and the limit.
absl::StatusOr<CompactionOptions> ResolveCompactionOptions(const ImageDesc& desc,
                                                           const CompactionOptions& options);

// The variant kAuto runs. On CPU renderers (llvmpipe) the strip scan for images of 1 to 4 bytes
// per pixel (measured 3-40x faster than the ordered scan there, with and without count_only: it
// reads 16 bytes per image load, counts in registers and has no barriers; see
// bench/results/compaction_llvmpipe.md), the ordered scan for the others and on GPUs (measured
// fastest of the other three on llvmpipe; the atomic variants also pay for reading back and
// ordering every passing key, even under a small cap). Never subgroup_aggregated: it has not been
// timed on a GPU yet (llvmpipe has subgroup ballots but runs every atomic lane by lane).
CompactionVariant ResolveCompactionVariant(const DeviceInfo& device, const ImageDesc& desc,
                                           const CompactionOptions& resolved);

// OK when this device can run `variant`, else INVALID_ARGUMENT naming the variant and what the
// device lacks: subgroup_aggregated needs subgroup ballots (DeviceLimits::subgroup_ballot).
absl::Status CompactionVariantAvailable(const DeviceInfo& device, CompactionVariant variant);

// REQUIRES: ctx's thread; `image` was made in ctx.
class CompactionKernel {
 public:
  explicit CompactionKernel(Context& ctx) : ctx_(ctx) {}
  // Compiles every program the kernel may use for images of this sample type (start-up check).
  absl::Status Prepare(SampleType type);
  // Builds and dispatches, once each on a small image, every program that kAuto can pick on this
  // context's device, for every sample type, channel count, source and count_only (the programs'
  // defines), so that no later kAuto call builds a program or pays for the driver's compile at its
  // first dispatch.
  absl::Status WarmUp(WarmUpShare& share);  // the units `share` claims (gpu/warm_up.h)
  absl::Status WarmUp() {
    WarmUpShare all;
    return WarmUp(all);
  }
  absl::StatusOr<CompactionResult> Run(const Image& image, const CompactionOptions& options);
  // Most bytes of (x, y) and values a sink receives at once (at least one entry).
  static constexpr size_t kSinkPieceBytes = size_t{1} << 20;
  // As Run, with the list handed to `sink` in order, a piece at a time, valid during the sink's
  // call only: the (x, y) read back from the device's buffer (Context::readback()). The result's xy
  // and values stay empty (`streamed` counts the entries). A sink error stops the run and is
  // returned.
  absl::StatusOr<CompactionResult> Stream(const Image& image, const CompactionOptions& options,
                                          const CompactionSink& sink);

  // Lowers the bytes the kernel puts in one buffer binding below the device's limit, so tests can
  // exercise the band and chunk splitting on small images. 0 restores the device limit.
  void SetBindingLimitForTesting(int64_t bytes) { binding_limit_override_ = bytes; }

 private:
  absl::StatusOr<CompactionResult> Find(const Image& image, const CompactionOptions& options,
                                        const CompactionSink* sink);
  // Hands a gathered chunk of n entries to `sink`, a piece at a time: (x, y) from `xy`
  // (Context::readback()); the values read into values_staging_ first.
  absl::Status DeliverChunk(const Buffer& xy, const Buffer& values, uint64_t first, int64_t n,
                            int64_t pixel_bytes, const CompactionSink& sink);

  Context& ctx_;
  int64_t binding_limit_override_ = 0;
  std::vector<uint8_t> values_staging_;  // a chunk's values, for a sink
};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_COMPACTION_H_
