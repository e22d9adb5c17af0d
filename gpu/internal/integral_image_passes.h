// Internal to gpu/integral_image.cc (the API: options, bands, warm-up) and
// gpu/internal/integral_image_passes.cc (each variant's programs, buffers and dispatches): what
// both use.
#ifndef GLIMPSE_GPU_INTERNAL_INTEGRAL_IMAGE_PASSES_H_
#define GLIMPSE_GPU_INTERNAL_INTEGRAL_IMAGE_PASSES_H_

#include "gpu/gl_handles.h"
#include "gpu/integral_image.h"

namespace glimpse::gpu {
namespace integral_internal {

// Pixels per work-efficient row block (integral_rows_scan.comp, integral_rows_subgroup.comp) and
// rows per work-efficient column block (integral_cols_scan.comp).
inline constexpr int kRowBlock = 512;
inline constexpr int kColBlock = 64;
inline constexpr int kElem = 8;  // bytes per table element
// Most rows one packed-strip dispatch walks: llvmpipe ends a loop nest after 65535 iterations in
// all (outer and inner), and each row costs up to 1 + NS / 4 of them (NS <= 96).
inline constexpr int kPackedMaxRows = 2048;

// The packed-strip variant reads the rectangle from texel boundaries of the packed form (and a
// device-side table, one dispatch, holds at most kPackedMaxRows rows).
bool PackedStripsFit(const ImageDesc& desc, int x0);

// Everything one table computation needs: programs, buffers, geometry.
struct Workspace {
  const Image* image = nullptr;
  int x0 = 0, y0 = 0;  // the rectangle's origin in the image
  int width = 0;       // pixels per row
  int channels = 0;
  int rows_max = 0;  // rows per band
  IntegralImageVariant variant = IntegralImageVariant::kNaive;
  // Programs (0 where the variant does not use them).
  GLuint strip_prefix = 0, strip_cols = 0, packed_offsets = 0, packed_strips = 0;
  int strip_samples = 0;  // packed strips: sample columns per invocation
  GLuint rows_naive = 0, cols_naive = 0, rows_scan_tex = 0, rows_scan_buf = 0, cols_scan = 0,
         block_sums = 0, add_rows = 0, add_cols = 0, transpose = 0;
  int tile = 32;
  const Buffer* table = nullptr;  // the band's table (output)
  // The kernel's work buffers (IntegralImageKernel::work_), at least as large as the band needs;
  // null where the variant needs none.
  const Buffer* scratch = nullptr;  // scan-transpose-scan: the transposed band
  const Buffer* carry[2] = {};
  const Buffer* sums = nullptr;
};

}  // namespace integral_internal

// The kernel's name for the workspace (a private type of IntegralImageKernel): the passes over a
// band, functions of integral_image_passes.cc, take the fields it adds nothing to.
struct IntegralImageKernel::Workspace : integral_internal::Workspace {};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_INTERNAL_INTEGRAL_IMAGE_PASSES_H_
