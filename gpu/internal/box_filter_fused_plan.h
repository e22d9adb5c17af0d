// The fused strips' planning, no GL: how a row is cut into strips, which strips read the side
// image and where its texels come from, the loop iterations an invocation spends, the exact
// division by the window's area, and the limits the variant checks. Internal to
// gpu/internal/box_filter_llvmpipe.cc, gpu/box_filter.cc and their tests.
#ifndef GLIMPSE_GPU_INTERNAL_BOX_FILTER_FUSED_PLAN_H_
#define GLIMPSE_GPU_INTERNAL_BOX_FILTER_FUSED_PLAN_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpu/box_filter.h"
#include "gpu/image.h"

namespace glimpse::gpu::box_filter_internal {

// Invocations to aim for per dispatch (32 workgroups of 8), so that llvmpipe's threads share the
// work evenly.
inline constexpr int kTargetInvocations = 256;
// A run of rows is at least this many times the 2ry + 1 rows it sums to start: narrow images
// have few strips, and 256 invocations of them would spend more on starting than on output.
inline constexpr int kMinRowsPerStart = 4;
// Loop iterations one invocation may spend: llvmpipe ends every loop of an invocation once their
// iterations add up to 65535 (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS); the rest is margin.
inline constexpr int64_t kLoopBudget = 60000;
// Most bytes of the first-window ring (rx a uniform: 16 bytes per invocation and row of its
// window) one dispatch uses: a pass with more invocations runs in parts that take turns with it.
// Runs are at least 4 windows tall, so a pass needs about a 32nd of the image's bytes.
inline constexpr int64_t kRingBytes = int64_t{32} << 20;

// The window's area, (2rx + 1)(2ry + 1) pixels.
inline uint64_t WindowArea(const BoxFilterOptions& o) {
  return uint64_t(2 * o.rx + 1) * uint64_t(2 * o.ry + 1);
}

// Where a strip's sums sit (box_filter_fused_strips.comp). A strip reads `texels` texels per row:
// [dx_a, dx_a + split) and [dx_b, dx_b + texels - split) from its first output texel (with rx a
// uniform, one range: from its trailing array's first texel to its leading array's last, the
// first window's texels between them).
struct StripPlan {
  bool runtime_rx = false;
  int strip = 0;   // output texels per strip
  int texels = 0;  // texels a strip reads (its block of the side image)
  int split = 0, dx_a = 0, dx_b = 0;
  int apron = 0;                      // rx compiled in: texels of sums each side of the strip
  int lead_byte = 0, trail_byte = 0;  // RUNTIME_RX: LEAD_BYTE, TRAIL_BYTE
  int window_texels = 0;              // RUNTIME_RX: texels of a row's first window, from dx_a
  int last_bytes = 0;                 // RUNTIME_RX: its bytes in the last of them (1-16)
  int lo() const { return dx_a; }     // the first texel read, from the strip's first
  int hi() const {                    // one past the last
    return split == texels ? dx_a + texels : std::max(dx_a + split, dx_b + texels - split);
  }
};

// The strips' width and the texels each reads, with rx compiled in or a uniform (RUNTIME_RX).
StripPlan PlanStrips(const ImageDesc& d, const BoxFilterOptions& o);

// The strips of a row: the interior ones read only texels wholly inside the row, the rest (the
// first `left` and those from `right0` on) read the side image of their texels.
struct RowStrips {
  int count = 0, left = 0, right0 = 0;
  int edges() const { return left + count - right0; }
};
RowStrips SplitStrips(const ImageDesc& d, const StripPlan& p);

// Where the side image's texels come from. The side image holds, per row, the strips at the
// row's ends, each with the plan's texels in the order it reads them; each such texel is a texel
// of the row extended past its ends: copied when wholly inside the row, in runs (`copies`), else
// built byte by byte (`bytes`, box_filter_fused_edges.comp).
struct SidePlan {
  struct Run {
    int side = 0, row = 0, texels = 0;  // side image texel, row texel, how many
  };
  std::vector<Run> copies;
  std::vector<int32_t> bytes;  // pairs: side image texel, texel of the extended row
};
SidePlan PlanSide(const ImageDesc& d, const StripPlan& p, const RowStrips& r);

// Loop iterations of one invocation (every loop whose trip count is not a compile-time constant)
// per row: the row loop, and with rx a uniform the first window's loop, GROUP texels
// (box_filter_fused_strips.comp) at a time, counted over all the window's texels: an upper bound,
// as the loop reads only those past the trailing array.
int64_t RowIterations(const ImageDesc& d, const StripPlan& p);
// Starting a run of rows: 2ry + 1 rows.
int64_t InitIterations(const ImageDesc& d, const StripPlan& p, const BoxFilterOptions& o);

// floor((s + half) / area) == high 32 bits of (s + half) * mul, >> shift, for every s in
// [0, max_sum]: one multiply-high and a shift, the same two operations for every area.
// half = (area - 1) / 2, so for odd areas (every box window) this is the mean rounded half up,
// floor(s / area + 1/2); area 1 takes half = 1 and mul = 2^32 - 1 instead.
struct ExactDivision {
  uint32_t mul = 0;
  int shift = 0;
  uint32_t half = 0;
};
// Empty when no such constants exist (areas from about 2^23 on, for 8-bit sums).
std::optional<ExactDivision> PlanExactDivision(uint64_t area, uint64_t max_sum);

// Why the fused strips cannot filter this image with these (resolved) options (an error naming
// the field, the value and the limit), or OK.
absl::Status FusedStripsSupports(const ImageDesc& desc, const BoxFilterOptions& options);

// The program's defines: every image property and option that needs its own program.
std::string FusedStripsDefines(const ImageDesc& desc, const BoxFilterOptions& options);

}  // namespace glimpse::gpu::box_filter_internal

#endif  // GLIMPSE_GPU_INTERNAL_BOX_FILTER_FUSED_PLAN_H_
