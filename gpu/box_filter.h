// Box (mean) filter on the GPU: the mean over a (2rx+1) x (2ry+1) window centred on each pixel,
// per channel, output in the input's format, with OpenCV's border modes.
//
// Integer images: the exact mean rounded half up, floor(sum / area + 1/2), computed exactly in
// integers. OpenCV 4.6's 8-bit blur rounds half to even for windows over 256 pixels and uses a
// fixed-point approximation at or under 256 (off by one for power-of-two areas), so it can differ
// from this by one.
// Float images: the window sum in double, then the mean rounded once to float. With V the largest
// |v| in the window (border value included) and m the double mean before that rounding:
//   shared_tile, separable: |m - mean| <= 2^-32 V, so |out - mean| <= 2^-24 |mean| + 2^-31 V;
//   integral: |m - mean| <= 2^-52 (W + H + 17) Cx Cy A / area, A the sum of |v| over the image
//   and Cx = 12 (2 + (2rx + 2) / max(1, 2W - 2)) (Cy alike): its table sums grow with the image,
//   not the window, so kAuto never picks it for float images.
#ifndef GLIMPSE_GPU_BOX_FILTER_H_
#define GLIMPSE_GPU_BOX_FILTER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/context.h"
#include "gpu/gl_handles.h"
#include "gpu/image.h"
#include "gpu/integral_image.h"
#include "gpu/warm_up.h"

namespace glimpse::gpu {

namespace box_filter_internal {
// What the fused strips keep across calls, so that calls do not fault in fresh memory: the output
// buffer (at most one band of output rows, within the device's storage binding limit) and the
// side image of the strips at the rows' ends (gpu/internal/box_filter_llvmpipe.h).
struct FusedStripsScratch {
  Buffer out;
  Buffer ring;  // rx a uniform: each invocation's first-window sums of the rows in its window
  GlTexture edges;
  int edges_width = 0, edges_height = 0;  // the size asked for (the texture may be larger)
};

// What the tiled variants keep between calls, grown to the largest call's need: the output tile's
// buffer, the second buffer of the separable and integral variants, the integral variant's own
// kernel (its work buffers), and the band of rows a sink is handed where tiles are narrower than
// the image. A fresh buffer per call costs the driver an allocation (on llvmpipe a page fault per
// 4 KiB written), and a fresh band of a 1920x1080 RGB image 6 MB of host pages.
struct TileScratch {
  Buffer out, aux;
  std::optional<IntegralImageKernel> integral;
  std::vector<uint8_t> band;
};
}  // namespace box_filter_internal

enum class BorderMode {
  kReplicate,   // aaa|abcd|ddd
  kReflect101,  // dcb|abcd|cba, repeated for windows wider than the image (OpenCV's default)
  kConstant,    // vvv|abcd|vvv
};
std::string_view BorderModeName(BorderMode m);  // "replicate", "reflect101", "constant"
std::optional<BorderMode> ParseBorderMode(std::string_view name);

enum class BoxFilterVariant {
  kAuto,
  kSharedTile,  // 16x16 tile + apron in shared memory, loaded once per chunk, sums from there
  kSeparable,   // horizontal then vertical running sums through a buffer of row sums
  kIntegral,    // window sums from the integral image: constant cost whatever the radius
  // For CPU renderers, 8-bit images: one pass over strips of the packed image, vertical sums kept
  // per invocation, the horizontal window slid over them (gpu/internal/box_filter_llvmpipe.h).
  kFusedStrips,
};
std::string_view BoxFilterVariantName(BoxFilterVariant v);  // "shared_tile", "fused_strips", ...
std::optional<BoxFilterVariant> ParseBoxFilterVariant(std::string_view name);  // "", "auto": kAuto

// The largest rx or ry: windows up to 65535 wide, twice llvmpipe's largest image; the sums of such
// windows stay below 2^53, so doubles hold them exactly.
inline constexpr int kMaxBoxRadius = 32767;

struct BoxFilterOptions {
  int rx = 1, ry = 1;  // window (2rx+1) x (2ry+1), 0..kMaxBoxRadius
  BorderMode border = BorderMode::kReflect101;
  // For kConstant, in the image's sample units: a whole number in [0, 255] / [0, 65535] for
  // 8/16-bit images, a finite float value for float images.
  double border_value = 0;
  BoxFilterVariant variant = BoxFilterVariant::kAuto;
  // Testing: cap on the bytes of one tile's buffers (0: the device's storage-binding limit), and
  // the two-word 64-bit arithmetic of the integral variant even where int64 exists.
  int64_t tile_bytes = 0;
  bool force_two_word = false;
  // Testing: output rows per invocation of the fused strips (0: planned within llvmpipe's loop
  // limit; more makes invocations run out of loop iterations, which the variant must catch).
  int fused_rows = 0;
};

struct BoxFilterResult {
  Image image;                                         // same desc as the input (Run only)
  BoxFilterVariant variant = BoxFilterVariant::kAuto;  // the variant that ran
  uint64_t gpu_ns = 0;
};

// Rows [y0, y0 + rows) of a filtered image, each desc.row_bytes() long, tightly packed.
struct BoxFilterRows {
  int y0 = 0, rows = 0;
  std::span<const uint8_t> bytes;
};
using BoxFilterSink = std::function<absl::Status(const BoxFilterRows&)>;

// Checks the options against the image; errors name the field, the value and the limit.
absl::StatusOr<BoxFilterOptions> ResolveBoxFilterOptions(const ImageDesc& desc,
                                                         const BoxFilterOptions& options);

// The widest rx for which kAuto picks kFusedStrips on CPU renderers: up to rx 7 each rx and
// channel count is its own program, beyond it one program per channel count and byte of a texel
// where the window's edge falls (rx is then a uniform), and WarmUp() builds them all.
inline constexpr int kAutoFusedStripsMaxRx = 32;

// The variant kAuto runs for these (resolved) options on this device; see box_filter.cc.
BoxFilterVariant ResolveBoxFilterVariant(const DeviceInfo& device, const ImageDesc& desc,
                                         const BoxFilterOptions& resolved);

// REQUIRES: ctx's thread; images were made in ctx.
class BoxFilterKernel {
 public:
  explicit BoxFilterKernel(Context& ctx) : ctx_(ctx) {}
  // Compiles every program the kernel may use for images of this sample type.
  absl::Status Prepare(SampleType type);
  // Builds and runs once, on tiny images, every program kAuto can pick on this context's device,
  // for every sample type, channel count and option that selects its own program, so that no
  // later kAuto call compiles anything (drivers compile a program's machine code on its first
  // dispatch). On CPU renderers that includes the 76 fused-strips programs (fully unrolled: rx 0-7
  // x 1-4 channels, and for rx 8-32 one per channel count and edge byte) and their side-image
  // programs: about 75 s on a 2-core machine without Mesa's shader cache, under a second with it
  // warm (bench/results/box_filter_llvmpipe.md).
  absl::Status WarmUp(WarmUpShare& share);  // the units `share` claims (gpu/warm_up.h)
  absl::Status WarmUp() {
    WarmUpShare all;
    return WarmUp(all);
  }
  absl::StatusOr<BoxFilterResult> Run(const Image& image, const BoxFilterOptions& options);

  // Most bytes of rows a sink receives at once (at least one row).
  static constexpr size_t kSinkPieceBytes = size_t{1} << 20;
  // Filters `image` and hands the result's rows to `sink`, top to bottom, in pieces of at most
  // kSinkPieceBytes (or one row), valid during the sink's call only; the result's image is
  // empty. No result image is made (no texture to allocate, fill and download): the fused
  // strips hand the rows over from the device's output buffer (Context::readback()); the tiled
  // variants read each band of tiles back from theirs into one band of rows. A sink error stops
  // the run and is returned.
  absl::StatusOr<BoxFilterResult> Stream(const Image& image, const BoxFilterOptions& options,
                                         const BoxFilterSink& sink);

 private:
  // The result image, or with `sink` the rows handed to it (then no image).
  absl::StatusOr<BoxFilterResult> Filter(const Image& image, const BoxFilterOptions& options,
                                         const BoxFilterSink* sink);
  // Reads the band's rows of `rows` (packed layout) back (Context::readback()) and hands them to
  // `sink` a piece at a time, cut to the image's row length.
  absl::Status DeliverRows(const Buffer& rows, const ImageDesc& desc, int y0, int count,
                           const BoxFilterSink& sink);

  Context& ctx_;
  box_filter_internal::FusedStripsScratch fused_scratch_;
  box_filter_internal::TileScratch tile_scratch_;
  std::vector<uint8_t> staging_;  // a piece of rows cut to the image's row length
};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_BOX_FILTER_H_
