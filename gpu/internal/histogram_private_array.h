// The private_array histogram variant (internal to gpu/histogram.cc): a private counter array per
// invocation over whole rows of the image's packed form, the partials summed on the host.
#ifndef GLIMPSE_GPU_INTERNAL_HISTOGRAM_PRIVATE_ARRAY_H_
#define GLIMPSE_GPU_INTERNAL_HISTOGRAM_PRIVATE_ARRAY_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/context.h"
#include "gpu/histogram.h"
#include "gpu/image.h"

namespace glimpse::gpu::internal {

// An integer bin table as arithmetic, in wrapping 32-bit unsigned integers: with d = key - base,
// bin = (d * mul) >> shift where d < range, otherwise not counted.
struct KeyArithmetic {
  uint32_t base = 0, range = 0, mul = 0, shift = 0;
  // Every key of the table counted, from 0, with mul 1: bin = key >> shift (a power-of-two number
  // of bins over the whole range of the source, the usual request). The shader then needs no
  // range check, subtraction or multiply: 20-30% of the counting pass on llvmpipe.
  bool shift_only = false;
};

// The arithmetic form of `table` (BuildIntegerBinTable for resolved options `o`) if one equals
// it for every key, checked exhaustively; nullopt where only the table is exact (e.g. some
// fractional bounds).
std::optional<KeyArithmetic> FindKeyArithmetic(const HistogramOptions& o,
                                               const std::vector<int32_t>& table);

// The bin table of integer images (BuildIntegerBinTable) and, computed on first use, its
// arithmetic form (FindKeyArithmetic).
struct IntegerBins {
  std::vector<int32_t> table;
  const std::optional<KeyArithmetic>& key() const;

  HistogramOptions options;  // the resolved options it was built for
  mutable std::once_flag key_once;
  mutable std::optional<KeyArithmetic> key_;
};

// The bins of `type` for resolved options `o`, built once for each distinct sample type, source
// scale (the RGB mean's keys are R+G+B), bounds and bin count, the last few kept: a 16-bit table
// has 65,536 keys (196,606 for the RGB mean), 0.25-0.7 ms to build on every call. Any thread.
std::shared_ptr<const IntegerBins> CachedIntegerBins(SampleType type, const HistogramOptions& o);

// Uploads `bins`' table into `buffers.table` unless it holds it already, and binds it at 1.
void BindIntegerBins(const std::shared_ptr<const IntegerBins>& bins, HistogramBuffers& buffers);

struct PrivateArrayCounts {
  std::vector<uint32_t> counts;  // [image][hists][bins]
  uint64_t gpu_ns = 0;
};

// One image of a packed atlas: its rows [y0, y0 + height) of the atlas, `width` pixels each.
struct AtlasImage {
  int y0 = 0, width = 0, height = 0;
};

// Invocations of the counting pass for an image alone (a whole number of workgroups), the same
// whether it runs alone or in an atlas, so that both count it alike.
int PrivateArrayInvocations(const ImageDesc& desc);

// Runs the variant on `image` for resolved options `o` (hists * o.bins <= kMaxPrivateArrayWords).
// Integer keys are binned by KeyArithmetic where it exists, else through the table.
// Makes the packed form first where the image has none (GPUs).
// `buffers`: the kernel's, kept between calls.
absl::StatusOr<PrivateArrayCounts> RunPrivateArray(Context& ctx, const Image& image,
                                                   const HistogramOptions& o, int hists,
                                                   HistogramBuffers& buffers);
// The same for every image of an atlas: `packed`, an RGBA32UI texture holding each image's packed
// rows (PackedTexelsPerRow wide) at its y0; `format` the images' channels and sample type. One
// dispatch, one mapped read-back of the partials; counts image after image.
absl::StatusOr<PrivateArrayCounts> RunPrivateArrayAtlas(Context& ctx, GLuint packed,
                                                        const ImageDesc& format,
                                                        std::span<const AtlasImage> images,
                                                        const HistogramOptions& o, int hists,
                                                        HistogramBuffers& buffers);

// Bins up to this many use arrays of this size; more bins, arrays of kMaxPrivateArrayWords /
// hists. The small size compiles several times faster.
inline constexpr int kPrivateArraySmallBins = 256;
int PrivateArrayHistWords(int hists, int bins);

// How the program bins integer keys: through the table, by KeyArithmetic, or by its shift alone.
enum class KeyBinning { kTable, kArithmetic, kShift };
KeyBinning KeyBinningFor(const std::optional<KeyArithmetic>& key);
// The binning a program for keys of `type` uses: `integer_binning`, except that float keys are
// always binned from their bounds (kArithmetic).
KeyBinning PrivateArrayBinning(SampleType type, KeyBinning integer_binning);
inline constexpr KeyBinning kKeyBinnings[] = {KeyBinning::kTable, KeyBinning::kArithmetic,
                                              KeyBinning::kShift};

// The defines of the program RunPrivateArray uses for this image format, source and bin count,
// binning keys as PrivateArrayBinning(desc.type, binning) says.
std::string PrivateArrayDefines(const ImageDesc& desc, HistogramSource source, int bins,
                                KeyBinning binning);

}  // namespace glimpse::gpu::internal

#endif  // GLIMPSE_GPU_INTERNAL_HISTOGRAM_PRIVATE_ARRAY_H_
