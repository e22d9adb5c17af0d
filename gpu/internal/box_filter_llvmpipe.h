// The box filter's variant for CPU renderers: one fused pass over strips of the packed image (see
// gpu/shaders/box_filter_fused_strips.comp), run band by band; its planning (strips, side image,
// exact division, limits) is in gpu/internal/box_filter_fused_plan.h. Internal to
// gpu/box_filter.cc and its tests.
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
#include "gpu/internal/box_filter_fused_plan.h"

namespace glimpse::gpu::box_filter_internal {

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

// The value of the shaders' u_border for a border mode: box_filter_common.glsl's BORDER_*
// constants.
inline int ShaderBorder(BorderMode m) {
  constexpr int kReplicate = 0, kReflect101 = 1, kConstant = 2;  // BORDER_REPLICATE, ...
  switch (m) {
    case BorderMode::kReplicate:
      return kReplicate;
    case BorderMode::kReflect101:
      return kReflect101;
    case BorderMode::kConstant:
      return kConstant;
  }
  return kReplicate;
}

}  // namespace glimpse::gpu::box_filter_internal

#endif  // GLIMPSE_GPU_INTERNAL_BOX_FILTER_LLVMPIPE_H_
