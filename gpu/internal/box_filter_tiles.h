// The box filter's tiled variants (shared tile, separable running sums, integral image): output
// tiles whose buffers fit one storage binding, each filtered into a buffer and copied into the
// result texture. Internal to gpu/box_filter.cc.
#ifndef GLIMPSE_GPU_INTERNAL_BOX_FILTER_TILES_H_
#define GLIMPSE_GPU_INTERNAL_BOX_FILTER_TILES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpu/box_filter.h"
#include "gpu/context.h"
#include "gpu/image.h"
#include "gpu/readback.h"

namespace glimpse::gpu::box_filter_internal {

// Integer window sums that may reach 2^32 are kept in doubles (exact below 2^53).
bool Wide(const ImageDesc& d, const BoxFilterOptions& o);

// Apron columns per shared chunk: what is left of shared memory after the row sums and outputs.
int SharedChunkColumns(const ImageDesc& d, const DeviceLimits& limits);

// A tiled program's defines: the image's, then `extra`.
std::string TileDefines(const ImageDesc& d, const std::string& extra);

// Rows [y0, y0 + count) of a result of `desc` held in `rows`, `stride` bytes apart (at least the
// row's length), read back by `readback` and handed to `sink` in pieces of at most
// BoxFilterKernel::kSinkPieceBytes (or one row), cut to the row's length through `cut` where the
// stride is longer. False where the GL failed (a mapping refused); a sink error stops the read
// and is left in *sink_status.
bool DeliverBufferRows(Readback& readback, const Buffer& rows, size_t stride, const ImageDesc& desc,
                       int y0, int count, std::vector<uint8_t>& cut, const BoxFilterSink& sink,
                       absl::Status* sink_status);

// Filters `image` with a tiled `variant` (resolved: not kAuto nor kFusedStrips) in tiles whose
// buffers fit `limit` bytes; the integral variant falls back to the running sums where its table
// cannot fit. The result image goes to result->image, or with `sink` is downloaded and handed to
// it a piece at a time. Sets result->variant to the variant that ran and adds the device time to
// result->gpu_ns.
absl::Status FilterTiles(Context& ctx, const Image& image, const BoxFilterOptions& o,
                         BoxFilterVariant variant, int64_t limit, TileScratch& scratch,
                         const BoxFilterSink* sink, BoxFilterResult* result);

}  // namespace glimpse::gpu::box_filter_internal

#endif  // GLIMPSE_GPU_INTERNAL_BOX_FILTER_TILES_H_
