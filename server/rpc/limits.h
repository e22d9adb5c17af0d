// The service's limits on requests and streamed messages (flags of glimpse-server).
//
//   ServerOptions options;
//   options.limits.max_image_pixels = uint64_t{1} << 24;  // --max-image-pixels
//   options.limits.chunk_bytes = size_t{256} << 10;  // results streamed 256 KiB per message
#ifndef GLIMPSE_SERVER_RPC_LIMITS_H_
#define GLIMPSE_SERVER_RPC_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "server/host_memory.h"

namespace glimpse::server {

// Size of the data in one streamed result message (ServiceLimits::chunk_bytes): under the size
// the allocator maps on its own, so that each chunk and gRPC's serialized copy of it come from
// memory already in use; as large as that allows, because a client pays for every message it
// reads (a Python client read an Analyze call's 56 MB with 87 ms of CPU in 1 MiB messages, 95 ms
// in 512 KiB ones: bench/results/e2e_llvmpipe.md), and it is the peer service's size too.
inline constexpr size_t kResultChunkBytes = size_t{1} << 20;
static_assert(kResultChunkBytes < kOwnMappingBytes);

struct ServiceLimits {
  uint64_t max_image_pixels = uint64_t{1} << 28;
  uint64_t max_upload_bytes = uint64_t{1} << 30;
  uint64_t max_message_bytes = uint64_t{4} << 20;
  size_t chunk_bytes = kResultChunkBytes;
  // AnalyzeBatch: images one call may have in flight (read, decoding, queued, running, or answered
  // and not yet sent). Twice the host threads of a 8-CPU machine: decoding keeps every thread busy
  // while the GPU works, and one call's unsent answers stay a few images' worth.
  uint32_t batch_in_flight = 16;
  // AnalyzeBatch: at most this many small inline images' histograms run as one GPU job (one
  // upload, dispatch and read-back: server/analyses/histogram_packs.h); 1 runs each alone. A
  // pack's results are answered one after another on the GPU's thread, so it stays short enough
  // not to hold other tenants' jobs back for long.
  uint32_t batch_pack_images = 64;
  // The nice value of the service's host threads (decoding, encoding, streaming results out),
  // 0-19: above 0 the threads that feed the GPU and answer calls preempt a decode on a shared CPU
  // rather than wait behind it. On a 2-core llvmpipe server at 0, the renderer's threads (pinned
  // one per CPU) waited behind decodes while the other CPU sat idle: 9-11% of the machine idle
  // under 4 and 16 callers of 1080p JPEG histograms; at 10, 2.4-3%
  // (bench/results/e2e_llvmpipe.md).
  int host_nice = 10;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_RPC_LIMITS_H_
