// CPU reference of gpu/compaction.h: the same predicate and output, one pixel at a time.
//
//   CompactionOptions options{.lo = 0, .hi = 10, .inside = false};
//   absl::StatusOr<CompactionResult> want = reference::Compact(host, options);
//   if (!want.ok()) return want.status();
//   CompactionKernel kernel(ctx);
//   absl::StatusOr<CompactionResult> got = kernel.Run(image, options);  // image: `host` uploaded
//   if (!got.ok()) return got.status();
//   const bool same = got->total == want->total && got->xy == want->xy &&
//                     got->values == want->values;  // exact, whatever the variant
#ifndef GLIMPSE_GPU_REFERENCE_COMPACTION_H_
#define GLIMPSE_GPU_REFERENCE_COMPACTION_H_

#include "absl/status/statusor.h"
#include "gpu/compaction.h"
#include "gpu/image.h"

namespace glimpse::reference {

// Same options, errors and result as gpu::CompactionKernel::Run; the variant is ignored (the
// result's variant stays kAuto and gpu_ns 0).
absl::StatusOr<gpu::CompactionResult> Compact(const gpu::HostImage& image,
                                              const gpu::CompactionOptions& options);

}  // namespace glimpse::reference

#endif  // GLIMPSE_GPU_REFERENCE_COMPACTION_H_
