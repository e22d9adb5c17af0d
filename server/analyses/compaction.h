// The compaction analysis (the Compact RPC): CompactRequest -> gpu::CompactionOptions, the kernel
// on the worker, the passing pixels streamed from a host thread.
//
//   // The Compact RPC (server/service.cc): the runner takes every step below.
//   return ServeStream<CompactionAnalysis>(env_, context, *request);  // the request's bytes
//   // Its first steps: the request mapped, then checked against the image.
//   absl::StatusOr<CompactionAnalysis::Options> options = CompactionAnalysis::MapOptions(*request);
//   if (!options.ok()) return options.status();
//   absl::StatusOr<uint64_t> bytes = CompactionAnalysis::ResultBytes(desc, *options, part_bytes);
//   if (!bytes.ok()) return bytes.status();  // e.g. a channel the image lacks
#ifndef GLIMPSE_SERVER_ANALYSES_COMPACTION_H_
#define GLIMPSE_SERVER_ANALYSES_COMPACTION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "gpu/compaction.h"
#include "server/analyses/runner.h"
#include "server/ingest/image_ref.h"
#include "server/worker/gpu_env.h"

namespace glimpse::server {

struct CompactionAnalysis {
  static constexpr std::string_view kName = "compaction";
  static constexpr std::string_view kMethod = "Compact";
  using Request = v1::CompactRequest;
  using Response = v1::CompactResponse;
  using Options = gpu::CompactionOptions;

  // Kernel, Variants: as server/analyses/registry.h says.
  static gpu::CompactionKernel& Kernel(Kernels& kernels) { return kernels.compaction; }
  static std::vector<std::string> Variants(const gpu::DeviceInfo& device);

  // Maps values only: an unset max_results keeps gpu/'s default.
  static absl::StatusOr<Options> MapOptions(const Request& request);
  // Checks with gpu/; the most the list can take: min(max_results, pixels) pixels.
  static absl::StatusOr<uint64_t> ResultBytes(const gpu::ImageDesc& desc, const Options& options,
                                              uint64_t part_bytes);
  static absl::Status Run(const StreamWork<Response>& work, GpuEnv& env, const Acquired& image,
                          const Options& options, Lease lease);
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_COMPACTION_H_
