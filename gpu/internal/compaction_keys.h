// Internal to gpu/internal/compaction_passes.cc: the host's side of the keys, the predicate's
// range of keys as the shaders compare them, and the ordering of an atomic variant's band list.
#ifndef GLIMPSE_GPU_INTERNAL_COMPACTION_KEYS_H_
#define GLIMPSE_GPU_INTERNAL_COMPACTION_KEYS_H_

#include <cstdint>
#include <vector>

#include "gpu/compaction.h"
#include "gpu/image.h"

namespace glimpse::gpu::compaction_internal {

// The predicate as the shaders evaluate it: an inclusive range of 32-bit keys (lo > hi: empty).
struct KeyRange {
  uint32_t lo = 1, hi = 0;
};

// The range of keys that passes [o.lo, o.hi] for the image's sample type: float bounds rounded
// inward to floats and mapped to ordered keys, integer bounds rounded inward and clipped.
KeyRange BuildKeyRange(const ImageDesc& desc, const CompactionOptions& o);

// Orders the distinct pixel keys of one band (rows [row0, row0 + rows)) and keeps the first
// `keep`: a bitmap of the band, a row of 64-bit words per image row, read in order. Linear in the
// band's size, and no division.
std::vector<uint32_t> OrderBandKeys(const std::vector<uint32_t>& keys, int width, int row0,
                                    int rows, int64_t keep);

}  // namespace glimpse::gpu::compaction_internal

#endif  // GLIMPSE_GPU_INTERNAL_COMPACTION_KEYS_H_
