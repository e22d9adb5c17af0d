// Histograms of an image on the GPU: exact 64-bit counts, OpenCV calcHist range semantics.
//
//   HistogramKernel kernel(ctx);
//   HistogramOptions options;  // 256 bins over the sample type's range
//   options.source = HistogramSource::kLuma;  // an RGB or RGBA image
//   absl::StatusOr<HistogramResult> r = kernel.Run(image, options);
//   if (!r.ok()) return r.status();
//   const uint64_t darkest = r->counts[0][0];  // one histogram (luma), bin 0
#ifndef GLIMPSE_GPU_HISTOGRAM_H_
#define GLIMPSE_GPU_HISTOGRAM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/context.h"
#include "gpu/gl_handles.h"
#include "gpu/image.h"
#include "gpu/warm_up.h"

namespace glimpse::gpu {

// Which values are counted.
enum class HistogramSource {
  kChannel,      // one channel (HistogramOptions::channel)
  kAllChannels,  // every channel, one histogram each
  kLuma,         // Y of RGB (3 or 4 channels); 8/16-bit: OpenCV COLOR_RGB2GRAY, exactly
  kRgbMean,      // (R + G + B) / 3 (3 or 4 channels), a simple grey
};

// The kernel variants; kAuto picks the fastest for the device (see ResolveHistogramVariant).
enum class HistogramVariant {
  kAuto,
  kGlobalAtomics,    // one atomicAdd per pixel on the global histogram
  kSharedAtomics,    // per-workgroup histogram in shared memory, one pixel per thread
  kSharedPerThread,  // shared histogram, a 4x4 block of pixels per thread, per-thread run merging
  kPrivateRows,      // one private shared-memory row per invocation, plain increments, rows summed
  kPrivateArray,     // a private counter array per invocation over whole rows of the packed form,
                     // partial histograms summed in a second pass (CPU renderers)
};

inline constexpr int kMaxHistogramBins = 65536;
// Counters (bins x histograms) a private_array invocation holds.
inline constexpr int kMaxPrivateArrayWords = 1024;

struct HistogramOptions {
  int bins = 256;            // [1, 65536]
  std::optional<double> lo;  // inclusive; default 0 (integers) or 0.0 (float)
  std::optional<double> hi;  // exclusive; default 256 / 65536 / 1.0 for uint8 / uint16 / float32
  HistogramSource source = HistogramSource::kAllChannels;
  int channel = 0;  // for kChannel
  HistogramVariant variant = HistogramVariant::kAuto;
};

struct HistogramResult {
  int bins = 0;
  double lo = 0, hi = 0;  // the range used (defaults filled in)
  // counts[h][b]: histogram h (one per channel for kAllChannels, else one), bin b.
  std::vector<std::vector<uint64_t>> counts;
  HistogramVariant variant = HistogramVariant::kAuto;  // the variant that ran
  uint64_t gpu_ns = 0;                                 // GPU time of the kernel dispatches
};

std::string_view HistogramVariantName(HistogramVariant v);  // "global_atomics", ...
std::optional<HistogramVariant> ParseHistogramVariant(std::string_view name);
std::string_view HistogramSourceName(HistogramSource s);  // "channel", "all", "luma", "rgb_mean"
std::optional<HistogramSource> ParseHistogramSource(std::string_view name);

// Checks options against the image and fills in the defaults; errors name the field and value
// (and, for variant private_array, the limit on bins x histograms).
absl::StatusOr<HistogramOptions> ResolveHistogramOptions(const ImageDesc& desc,
                                                         const HistogramOptions& options);

// The variant kAuto runs on this device for these options: on CPU renderers (llvmpipe)
// private_array for 8- and 16-bit images with up to 256 bins that are a multiply-shift of the key
// (as for integer bounds), else private rows while they fit in shared memory, else global atomics;
// on GPUs shared memory with several pixels per thread (the fastest of the shared-memory designs on
// GPUs), global atomics where the bins do not fit in shared memory.
HistogramVariant ResolveHistogramVariant(const DeviceInfo& device, const ImageDesc& desc,
                                         const HistogramOptions& resolved);

// The rule that maps an 8/16-bit key (channel value, luma, or R+G+B for kRgbMean) to a bin, or -1:
// lo <= v < hi, bin = floor((v - lo) * bins / (hi - lo)), exact for integer lo and hi.
// Shared with the CPU reference so both count the same.
std::vector<int32_t> BuildIntegerBinTable(const ImageDesc& desc, const HistogramOptions& resolved);

namespace internal {
struct IntegerBins;
}  // namespace internal

// The work buffers a HistogramKernel keeps between calls (Buffer::AtLeast): the counts, the
// integer bin table, and private_array's partial counts.
struct HistogramBuffers {
  Buffer counts, table, partials;
  // The bin table `table` holds (internal::CachedIntegerBins): the next call with the same
  // options uploads none.
  std::shared_ptr<const internal::IntegerBins> table_holds;
  // The per-workgroup tables that say which image of an atlas each workgroup reads (a single
  // image is an atlas of one), and private_array's per-image invocation ranges.
  Buffer segments, ranges;
};

// One image of a pack: its host pixels, as Image::Upload takes them.
struct PackedImage {
  ImageDesc desc;
  std::span<const uint8_t> pixels;   // ImageDesc layout; may be empty when `widened` holds them
  std::span<const uint8_t> widened;  // a 3-channel image's rows widened (WidenForUpload / decoded
                                     // straight into them on plain_uploads devices), else empty
};

// What a pack's run returns.
struct PackedHistograms {
  // One per image, in order: its histograms exactly as Run gives them, or the error Run would
  // give for it (e.g. options that do not resolve for its channel count). gpu_ns of each: its
  // share of the pack's GPU time by pixels.
  std::vector<absl::StatusOr<HistogramResult>> results;
  uint64_t gpu_ns = 0;     // the pack's kernel time (all dispatches)
  uint64_t upload_ns = 0;  // host wall time spent uploading the pack (steady_clock)
  int dispatches = 0;      // packs dispatched (1 unless the images exceed one atlas)
};

// Images up to this many pixels are worth packing; larger ones the caller runs alone.
inline constexpr int64_t kMaxPackedImagePixels = 512 * 512;

// REQUIRES: ctx's thread; `image` was made in ctx.
class HistogramKernel {
 public:
  explicit HistogramKernel(Context& ctx) : ctx_(ctx) {}
  // Compiles every program the kernel may use for images of this sample type (start-up check).
  absl::Status Prepare(SampleType type);
  // Builds and dispatches, on tiny images, every program kAuto can pick on this device (each
  // sample type, channel count and source that compiles differently), so that no later kAuto
  // call compiles anything: drivers compile machine code on a program's first dispatch.
  absl::Status WarmUp(WarmUpShare& share);  // the units `share` claims (gpu/warm_up.h)
  absl::Status WarmUp() {
    WarmUpShare all;
    return WarmUp(all);
  }
  absl::StatusOr<HistogramResult> Run(const Image& image, const HistogramOptions& options);
  // The histograms of every image, packed into as few atlases as the device's limits allow
  // (each atlas: one upload, one dispatch per pass, one read-back). REQUIRES: ctx's thread; every
  // image has the same channels and sample type.
  //
  // Atlases: the packed form's texture (private_array) or the plain texture (global_atomics,
  // shared_per_thread) of every image, rows stacked, read by the same programs as Run through a
  // table of which image each workgroup reads. shared_atomics and private_rows run image by
  // image (an upload and a Run each). Errors: InvalidArgument naming images[i] for a bad
  // description, pixel span or format.
  absl::StatusOr<PackedHistograms> RunPacked(std::span<const PackedImage> images,
                                             const HistogramOptions& options);

  // Limits of one atlas (tests and benchmarks may change them; 0: the device's default): its
  // bytes, and the bytes of its work buffers (counts, private_array's partials).
  void set_atlas_limits(size_t max_atlas_bytes, size_t max_work_bytes) {
    max_atlas_bytes_ = max_atlas_bytes;
    max_work_bytes_ = max_work_bytes;
  }

 private:
  Context& ctx_;
  HistogramBuffers buffers_;
  size_t max_atlas_bytes_ = 0;
  size_t max_work_bytes_ = 0;
};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_HISTOGRAM_H_
