// The fused strips' planning: strips, side image, loop iterations, exact division, limits.
#include "gpu/internal/box_filter_fused_plan.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "common/str.h"
#include "gpu/context.h"

namespace glimpse::gpu::box_filter_internal {
namespace {

// Texels of sums one invocation keeps at most (the shader unrolls up to 64): wide aprons leave
// narrower strips, and past this the apron would outweigh the strip.
constexpr int kMaxTexels = 48;
// Output texels per strip: 128 bytes (32 RGBA or 128 grey pixels), enough to spread each strip's
// start-up (its apron and the first window of each row) thin while the sums stay in registers;
// wider strips compile (fully unrolled) for seconds.
constexpr int kStripTexels = 8;
// box_filter_fused_strips.comp unrolls the first window of a row over at most 128 pixels.
constexpr int kMaxRx = 63;

// Vertical sums of 8-bit samples fit 16-bit fields while the window is at most 257 rows tall:
// the entering row is added before the leaving one is taken away, so 2ry + 2 rows at most.
bool WideVertical(const BoxFilterOptions& o) { return 255 * (2 * int64_t{o.ry} + 2) > 65535; }

// Windows wider than kCompiledMaxRx use the program with rx as a uniform (RUNTIME_RX), up to
// kRuntimeMaxRx (its first-window sums keep a row's bytes of one channel in 16-bit fields: at
// most 65 pixels' worth, far below 2^16 / 255 words).
constexpr int kCompiledMaxRx = 7;
constexpr int kRuntimeMaxRx = kAutoFusedStripsMaxRx;

bool RuntimeRx(const BoxFilterOptions& o) {
  return o.rx > kCompiledMaxRx && o.rx <= kRuntimeMaxRx && !WideVertical(o);
}

}  // namespace

StripPlan PlanStrips(const ImageDesc& d, const BoxFilterOptions& o) {
  StripPlan p;
  const int c = d.channels;
  if (RuntimeRx(o)) {
    // The trailing edge of output byte j's window is A + C bytes before it, the leading edge A
    // bytes after (A = rx * C); each array covers STRIP texels of edges, plus one for the byte
    // where they start within a texel.
    // Each row's first window (of the C bytes before the strip) spans (2 rx + 1) C bytes from the
    // trailing array's first edge.
    const int a = o.rx * c, before = a + c;
    p.runtime_rx = true;
    p.strip = kStripTexels;
    p.dx_a = -int(CeilDiv(before, 16));
    p.trail_byte = 16 * -p.dx_a - before;
    p.dx_b = a / 16;
    p.lead_byte = a % 16;
    p.texels = p.split = p.dx_b + p.strip + 1 - p.dx_a;
    const int window_end =
        p.trail_byte + (2 * o.rx + 1) * c;  // from the trailing array's first texel
    p.window_texels = int(CeilDiv(window_end, 16));
    p.last_bytes = window_end - 16 * (p.window_texels - 1);
    return p;
  }
  // The windows reach rx pixels beyond the strip, and each row's first window starts one pixel
  // before it.
  p.apron = int(CeilDiv(int64_t{o.rx + 1} * c, 16));
  p.strip = std::clamp(kMaxTexels - 2 * p.apron, 1, kStripTexels);
  p.texels = p.split = p.strip + 2 * p.apron;
  p.dx_a = -p.apron;
  return p;
}

RowStrips SplitStrips(const ImageDesc& d, const StripPlan& p) {
  RowStrips r;
  const int full = int(d.row_bytes() / 16);
  r.count = int(CeilDiv(PackedTexelsPerRow(d), p.strip));
  r.left = 0;
  while (r.left < r.count && r.left * p.strip + p.lo() < 0) ++r.left;
  r.right0 = r.count;
  while (r.right0 > r.left && (r.right0 - 1) * p.strip + p.hi() > full) --r.right0;
  return r;
}

SidePlan PlanSide(const ImageDesc& d, const StripPlan& p, const RowStrips& r) {
  const int full = int(d.row_bytes() / 16);
  SidePlan side;
  int e = 0;
  for (int k = 0; k < r.edges(); ++k) {
    const int strip = k < r.left ? k : r.right0 + k - r.left;
    for (int t = 0; t < p.texels; ++t, ++e) {
      const int tx = strip * p.strip + (t < p.split ? p.dx_a + t : p.dx_b + t - p.split);
      if (tx < 0 || tx >= full) {
        side.bytes.insert(side.bytes.end(), {e, tx});
      } else if (!side.copies.empty() && side.copies.back().side + side.copies.back().texels == e &&
                 side.copies.back().row + side.copies.back().texels == tx) {
        ++side.copies.back().texels;
      } else {
        side.copies.push_back({e, tx, 1});
      }
    }
  }
  return side;
}

int64_t RowIterations(const ImageDesc& d, const StripPlan& p) {
  return 1 + (p.runtime_rx ? CeilDiv(p.window_texels, d.channels == 3 ? 3 : 2) : 0);
}
int64_t InitIterations(const ImageDesc& d, const StripPlan& p, const BoxFilterOptions& o) {
  return (2 * int64_t{o.ry} + 1) * RowIterations(d, p);
}

std::optional<ExactDivision> PlanExactDivision(uint64_t area, uint64_t max_sum) {
  if (area == 0) return std::nullopt;
  ExactDivision e;
  if (area == 1) {
    // (s + 1) (2^32 - 1) / 2^32 = s + 1 - (s + 1) / 2^32, whose floor is s below 2^32 - 1.
    if (max_sum >= (uint64_t{1} << 32) - 1) return std::nullopt;
    e.half = 1;
    e.mul = 0xFFFFFFFFu;
    return e;
  }
  e.half = uint32_t((area - 1) / 2);
  const uint64_t n_max = max_sum + e.half;
  if (n_max >= (uint64_t{1} << 32)) return std::nullopt;
  // With mul = ceil(2^k / area) = (2^k + err) / area, err < area: n * mul / 2^k = n / area +
  // n * err / (area 2^k), and the fraction of n / area is at most (area - 1) / area, so the floor
  // is exact when n_max * (area - 1) < 2^k; k = 32 + shift, the high word then shifted.
  for (int shift = 0; shift < 31; ++shift) {
    const uint64_t k_pow = uint64_t{1} << (32 + shift);
    if (n_max * (area - 1) >= k_pow) continue;
    const uint64_t mul = (k_pow + area - 1) / area;
    if (mul >= (uint64_t{1} << 32)) return std::nullopt;
    e.mul = uint32_t(mul);
    e.shift = shift;
    return e;
  }
  return std::nullopt;
}

absl::Status FusedStripsSupports(const ImageDesc& d, const BoxFilterOptions& o) {
  if (d.type != SampleType::kUint8) {
    return absl::InvalidArgumentError(
        StrCat("variant fused_strips needs uint8 samples, got ", SampleTypeName(d.type)));
  }
  const StripPlan p = PlanStrips(d, o);
  if (!p.runtime_rx && (2 * p.apron + 1 > kMaxTexels || o.rx > kMaxRx)) {
    const int max_rx = std::min(kMaxRx, (kMaxTexels - 1) / 2 * 16 / d.channels - 1);
    return absl::InvalidArgumentError(StrCat("rx must be at most ", max_rx, " for variant ",
                                             "fused_strips with ", d.channels, " channels, got ",
                                             o.rx));
  }
  if (InitIterations(d, p, o) + RowIterations(d, p) > kLoopBudget) {
    const int64_t max_ry = (kLoopBudget / RowIterations(d, p) - 2) / 2;
    return absl::InvalidArgumentError(StrCat("ry must be at most ", max_ry, " for variant ",
                                             "fused_strips with rx ", o.rx, " and ", d.channels,
                                             " channels, got ", o.ry));
  }
  if (!PlanExactDivision(WindowArea(o), 255 * WindowArea(o))) {
    return absl::InvalidArgumentError(
        StrCat("the window area (2rx+1)(2ry+1) must be below 2^23 for variant fused_strips, got ",
               WindowArea(o)));
  }
  return absl::OkStatus();
}

std::string FusedStripsDefines(const ImageDesc& d, const BoxFilterOptions& o) {
  const StripPlan p = PlanStrips(d, o);
  if (p.runtime_rx) {
    return StrCat(ImageDefines(d), "#define RUNTIME_RX 1\n#define STRIP ", p.strip,
                  "\n#define LEAD_BYTE ", p.lead_byte, "\n#define TRAIL_BYTE ", p.trail_byte, "\n");
  }
  return StrCat(ImageDefines(d), "#define RX ", o.rx, "\n#define STRIP ", p.strip,
                "\n#define APRON ", p.apron, "\n", WideVertical(o) ? "#define WIDEV 1\n" : "");
}
}  // namespace glimpse::gpu::box_filter_internal
