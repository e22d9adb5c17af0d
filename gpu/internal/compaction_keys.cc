// The host's side of the compaction keys: the predicate's key range, the band list's ordering.
#include "gpu/internal/compaction_keys.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "gpu/context.h"

namespace glimpse::gpu::compaction_internal {
namespace {

// The unsigned key whose order is the order of the float values (-0 folded onto +0); the same
// mapping as ordered_key() in compaction_common.glsl.
uint32_t OrderedKey(float v) {
  uint32_t b = std::bit_cast<uint32_t>(v);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

// The smallest float >= d (d not NaN): v >= d <=> v >= RoundUpToFloat(d) for every float v.
float RoundUpToFloat(double d) {
  constexpr double kMax = std::numeric_limits<float>::max();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (d == -std::numeric_limits<double>::infinity()) return -kInf;
  if (d < -kMax) return -std::numeric_limits<float>::max();
  if (d > kMax) return kInf;
  float f = static_cast<float>(d);
  if (double(f) < d) f = std::nextafter(f, kInf);
  return f;
}

// The largest float <= d (d not NaN).
float RoundDownToFloat(double d) {
  constexpr double kMax = std::numeric_limits<float>::max();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (d == std::numeric_limits<double>::infinity()) return kInf;
  if (d > kMax) return std::numeric_limits<float>::max();
  if (d < -kMax) return -kInf;
  float f = static_cast<float>(d);
  if (double(f) > d) f = std::nextafter(f, -kInf);
  return f;
}

}  // namespace

KeyRange BuildKeyRange(const ImageDesc& desc, const CompactionOptions& o) {
  KeyRange r;
  if (desc.type == SampleType::kFloat32) {
    const float lo = RoundUpToFloat(o.lo), hi = RoundDownToFloat(o.hi);
    if (lo <= hi) r = {OrderedKey(lo), OrderedKey(hi)};
    return r;
  }
  // Integer keys (samples or luma) lie in [0, max]; round the bounds inward, then clip.
  const double max = desc.type == SampleType::kUint8 ? 255.0 : 65535.0;
  const double lo = std::max(0.0, std::ceil(o.lo)), hi = std::min(max, std::floor(o.hi));
  if (lo <= hi) r = {uint32_t(lo), uint32_t(hi)};
  return r;
}

std::vector<uint32_t> OrderBandKeys(const std::vector<uint32_t>& keys, int width, int row0,
                                    int rows, int64_t keep) {
  const size_t row_words = size_t(CeilDiv(width, 64));
  std::vector<uint64_t> bitmap(row_words * size_t(rows), 0);
  for (uint32_t k : keys) {
    const uint32_t x = k & 0xFFFFu, y = (k >> 16) - uint32_t(row0);
    bitmap[y * row_words + (x >> 6)] |= uint64_t{1} << (x & 63);
  }
  std::vector<uint32_t> out;
  out.reserve(size_t(keep));
  for (int y = 0; y < rows && int64_t(out.size()) < keep; ++y) {
    const uint64_t* row = bitmap.data() + size_t(y) * row_words;
    const uint32_t high = uint32_t(row0 + y) << 16;
    for (size_t w = 0; w < row_words && int64_t(out.size()) < keep; ++w) {
      for (uint64_t bits = row[w]; bits != 0 && int64_t(out.size()) < keep; bits &= bits - 1) {
        out.push_back(high | uint32_t(w * 64 + size_t(std::countr_zero(bits))));
      }
    }
  }
  return out;
}

}  // namespace glimpse::gpu::compaction_internal
