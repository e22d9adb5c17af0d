// CPU reference of gpu/integral_image.h: S[y][x] = S[y-1][x] + (prefix of row y up to x), in
// uint64 for integer images (exact) and double for float images (the naive variant's order).
//
//   const IntegralImageOptions options{.squared = true};
//   absl::StatusOr<IntegralTables> want = reference::IntegralImage(host, options);
//   if (!want.ok()) return want.status();
//   IntegralImageKernel kernel(ctx);
//   absl::StatusOr<IntegralTables> got = ComputeIntegralImage(kernel, image, options);
//   if (!got.ok()) return got.status();
//   const bool same = got->sum_u == want->sum_u && got->sq_u == want->sq_u;  // integer images
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
