// The integral image analysis: IntegralImageRequest -> gpu::IntegralImageOptions, the tables
// produced on the worker a part at a time and streamed in row bands.
//
// A table set that fits in one part of the result buffer (ResultBuffer::part_bytes) is produced by
// one run of the kernel on the whole image. A larger one is produced in horizontal strips, each a
// job of its own queued when the reader has taken the previous one, so the worker runs other jobs
// in between: the kernel runs on a copy of the strip's rows and the last row of the table above
// (the carry) is added on the host. Integer tables stay exact; a float table's elements pass
// through one more double addition per strip boundary than gpu/integral_image.h's bound counts.
// With the squared table, its strips follow the sum table's and recompute the strip's sums, which
// the kernel produces first.
//
//   // The IntegralImage RPC (server/service.cc): the runner takes the steps.
//   return ServeStream<IntegralImageAnalysis>(env_, context, *request);  // the request's bytes
//   // How the two tables of a 4096 x 4096 RGB uint8 image are cut into parts of 32 MiB:
//   IntegralPlan plan = PlanIntegralParts({.width = 4096, .height = 4096, .channels = 3},
//                                         /*squared=*/true, uint64_t{32} << 20);
//   // plan.whole is false: strips of plan.rows_per_part rows, each a job of its own.
#ifndef GLIMPSE_SERVER_ANALYSES_INTEGRAL_IMAGE_H_
#define GLIMPSE_SERVER_ANALYSES_INTEGRAL_IMAGE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "gpu/integral_image.h"
#include "server/analyses/runner.h"
#include "server/ingest/image_ref.h"
#include "server/worker/gpu_env.h"

namespace glimpse::server {

struct IntegralImageAnalysis {
  static constexpr std::string_view kName = "integral_image";
  static constexpr std::string_view kMethod = "IntegralImage";
  using Request = v1::IntegralImageRequest;
  using Response = v1::IntegralImageResponse;
  using Options = gpu::IntegralImageOptions;

  // Kernel, Variants: as server/analyses/registry.h says.
  static gpu::IntegralImageKernel& Kernel(Kernels& kernels) { return kernels.integral_image; }
  static std::vector<std::string> Variants(const gpu::DeviceInfo& device);

  static absl::StatusOr<Options> MapOptions(const Request& request);
  // The bytes of the first part: the whole result, or one strip of rows.
  static absl::StatusOr<uint64_t> ResultBytes(const gpu::ImageDesc& desc, const Options& options,
                                              uint64_t part_bytes);
  static absl::Status Run(const StreamWork<Response>& work, GpuEnv& env, const Acquired& image,
                          const Options& options, Lease lease);
};

// How a table set is cut into parts (exposed for tests).
struct IntegralPlan {
  uint64_t row_bytes = 0;  // one table row: width * channels * 8
  int tables = 1;          // 2 with the squared table
  bool whole = true;       // one part holds every table; else strips of rows_per_part rows
  int rows_per_part = 0;
};
IntegralPlan PlanIntegralParts(const gpu::ImageDesc& desc, bool squared, uint64_t part_bytes);
// Result bytes of `rows` rows of `tables` tables streamed in messages (data and framing).
uint64_t IntegralPartBytes(const IntegralPlan& plan, int rows, int tables);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_INTEGRAL_IMAGE_H_
