// The box filter's tiled variants (shared tile, separable running sums, integral image): output
// tiles whose buffers fit one storage binding, each filtered into a buffer and copied into the
// result texture. Internal to gpu/box_filter.cc.
#ifndef GLIMPSE_GPU_INTERNAL_BOX_FILTER_TILES_H_
#define GLIMPSE_GPU_INTERNAL_BOX_FILTER_TILES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gpu/box_filter.h"
#include "gpu/context.h"
#include "gpu/image.h"

namespace glimpse::gpu::box_filter_internal {

// Integer window sums that may reach 2^32 are kept in doubles (exact below 2^53).
bool Wide(const ImageDesc& d, const BoxFilterOptions& o);

// Apron columns per shared chunk: what is left of shared memory after the row sums and outputs.
int SharedChunkColumns(const ImageDesc& d, const DeviceLimits& limits);

// A tiled program's defines: the image's, then `extra`.
std::string TileDefines(const ImageDesc& d, const std::string& extra);

// Filters `image` with a tiled `variant` (resolved: not kAuto nor kFusedStrips) in tiles whose
// buffers fit `limit` bytes; the integral variant falls back to the running sums where its table
// cannot fit. The result image goes to result->image, or with `sink` is downloaded and handed to
// it a piece at a time. Sets result->variant to the variant that ran and adds the device time to
// result->gpu_ns.
absl::Status FilterTiles(Context& ctx, const Image& image, const BoxFilterOptions& o,
                         BoxFilterVariant variant, int64_t limit, const BoxFilterSink* sink,
                         BoxFilterResult* result);

}  // namespace glimpse::gpu::box_filter_internal

#endif  // GLIMPSE_GPU_INTERNAL_BOX_FILTER_TILES_H_
