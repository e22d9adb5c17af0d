// The box filter's variant for CPU renderers: one fused pass over strips of the packed image (see
// gpu/shaders/box_filter_fused_strips.comp). Internal to gpu/box_filter.cc and its tests.
#ifndef GLIMPSE_GPU_INTERNAL_BOX_FILTER_LLVMPIPE_H_
#define GLIMPSE_GPU_INTERNAL_BOX_FILTER_LLVMPIPE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "gpu/box_filter.h"
#include "gpu/context.h"
#include "gpu/image.h"

namespace glimpse::gpu::box_filter_internal {

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

// Gets each band of output rows once they are right: the buffer holding them in the packed
// layout (PackedTexelsPerRow(desc) * 16 bytes a row) from offset 0, the band's first row and its
// row count. An error stops the run and is returned.
using FusedBandSink = std::function<absl::Status(const Buffer& rows, int y0, int count)>;

// Filters `image` in bands of rows whose output fits `binding_bytes`, through `scratch` (grown
// when too small, kept by the caller across calls), handing each band to `band_sink`, top to
// bottom; adds the device time of the dispatches (not the sink's) to *gpu_ns.
// REQUIRES: FusedStripsSupports() is OK.
absl::Status RunFusedStrips(Context& ctx, const Image& image, const BoxFilterOptions& options,
                            int64_t binding_bytes, FusedStripsScratch& scratch,
                            const FusedBandSink& band_sink, uint64_t* gpu_ns);

// Sets the shaders' u_sample_bits (box_filter_common.glsl): the image's bits per sample, as a
// uniform so that the packing shifts stay vector operations on llvmpipe.
inline void SetSampleBits(GLuint program, const ImageDesc& desc) {
  glUniform1ui(glGetUniformLocation(program, "u_sample_bits"),
               GLuint(8 * BytesPerSample(desc.type)));
}

// The value of the shaders' u_border for a border mode: box_filter_common.glsl's BORDER_* constants.
inline int ShaderBorder(BorderMode m) {
  constexpr int kReplicate = 0, kReflect101 = 1, kConstant = 2;  // BORDER_REPLICATE, ...
  switch (m) {
    case BorderMode::kReplicate: return kReplicate;
    case BorderMode::kReflect101: return kReflect101;
    case BorderMode::kConstant: return kConstant;
  }
  return kReplicate;
}

}  // namespace glimpse::gpu::box_filter_internal

#endif  // GLIMPSE_GPU_INTERNAL_BOX_FILTER_LLVMPIPE_H_
