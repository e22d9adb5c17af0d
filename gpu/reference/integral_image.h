// CPU reference of gpu/integral_image.h: S[y][x] = S[y-1][x] + (prefix of row y up to x), in
// uint64 for integer images (exact) and double for float images (the naive variant's order).
#ifndef GLIMPSE_GPU_REFERENCE_INTEGRAL_IMAGE_H_
#define GLIMPSE_GPU_REFERENCE_INTEGRAL_IMAGE_H_

#include "absl/status/statusor.h"
#include "gpu/image.h"
#include "gpu/integral_image.h"

namespace glimpse::reference {

// Same tables as gpu::ComputeIntegralImage (options.squared honoured; the variant ignored).
absl::StatusOr<gpu::IntegralTables> IntegralImage(const gpu::HostImage& image,
                                                  const gpu::IntegralImageOptions& options);

}  // namespace glimpse::reference

#endif  // GLIMPSE_GPU_REFERENCE_INTEGRAL_IMAGE_H_
