#include "server/analyses/compaction.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/str.h"
#include "server/analyses/runner.h"

namespace glimpse::server {
namespace {

// Framing of one chunk message beyond its pixels.
constexpr uint64_t kCompactionChunkOverhead = 32;

uint64_t ValueBytes(const gpu::ImageDesc& d) {
  return uint64_t(d.channels) * gpu::BytesPerSample(d.type);
}

}  // namespace

absl::StatusOr<gpu::CompactionOptions> CompactionAnalysis::MapOptions(const Request& request) {
  const v1::CompactOptions& o = request.options();
  Options options;
  switch (o.source()) {
    case v1::COMPACT_SOURCE_UNSPECIFIED:
      break;
    case v1::COMPACT_SOURCE_CHANNEL:
      options.source = gpu::CompactionSource::kChannel;
      break;
    case v1::COMPACT_SOURCE_LUMA:
      options.source = gpu::CompactionSource::kLuma;
      break;
    default:
      return absl::InvalidArgumentError(
          StrCat("options.source must be a CompactionSource (0-2), got ", int(o.source())));
  }
  options.channel = int(std::min<uint32_t>(o.channel(), INT_MAX));
  options.lo = o.lo();
  options.hi = o.hi();
  options.inside = !o.outside();
  if (o.has_max_results()) options.max_results = o.max_results();
  options.count_only = o.count_only();
  absl::StatusOr<gpu::CompactionVariant> variant = ParseVariant<gpu::CompactionVariant>(
      request.variant(), "compaction", gpu::CompactionVariantName, gpu::ParseCompactionVariant);
  if (!variant.ok()) return variant.status();
  options.variant = *variant;
  return options;
}

absl::StatusOr<uint64_t> CompactionAnalysis::ResultBytes(const gpu::ImageDesc& desc,
                                                         const Options& options, uint64_t) {
  absl::StatusOr<Options> resolved = gpu::ResolveCompactionOptions(desc, options);
  if (!resolved.ok()) return resolved.status();
  if (resolved->count_only) return kStreamEndsBytes;
  const uint64_t pixels = std::min<uint64_t>(uint64_t(resolved->max_results),
                                             uint64_t(desc.width) * uint64_t(desc.height));
  // The list goes from the device straight into the messages.
  return pixels * (8 + ValueBytes(desc)) + pixels / 1024 * kCompactionChunkOverhead +
         kStreamEndsBytes;
}

absl::Status CompactionAnalysis::Run(const StreamWork<Response>& work, GpuEnv& env,
                                     const Acquired& image, const Options& options, Lease lease) {
  const gpu::ImageDesc desc = image.image->desc();
  const uint64_t value_bytes = ValueBytes(desc);
  const size_t per_chunk =
      std::max<size_t>(1, work.service->limits.chunk_bytes / (8 + value_bytes));
  // The list comes from the device a piece at a time and is cut into messages of per_chunk
  // entries as it comes (on this thread: one copy, and no list of the whole result on the host).
  std::vector<v1::CompactResponse> messages;
  messages.emplace_back().mutable_header();
  absl::StatusOr<gpu::CompactionResult> r =
      env.kernels.compaction.Stream(*image.image, options, [&](const gpu::CompactionPiece& piece) {
        for (uint64_t i = 0; i < piece.count;) {
          if (!messages.back().has_chunk() ||
              messages.back().chunk().xy().size() == per_chunk * 8) {
            v1::CompactChunk* c = messages.emplace_back().mutable_chunk();
            c->set_first(piece.first + i);
            const uint64_t expect = std::min<uint64_t>(per_chunk, piece.count - i);
            c->mutable_xy()->reserve(expect * 8);
            c->mutable_values()->reserve(expect * value_bytes);
          }
          v1::CompactChunk* c = messages.back().mutable_chunk();
          const uint64_t n = std::min<uint64_t>(per_chunk - c->xy().size() / 8, piece.count - i);
          c->mutable_xy()->append(reinterpret_cast<const char*>(piece.xy.data() + 2 * i), n * 8);
          c->mutable_values()->append(
              reinterpret_cast<const char*>(piece.values.data()) + i * value_bytes,
              n * value_bytes);
          i += n;
        }
        return absl::OkStatus();
      });
  if (!r.ok()) return r.status();
  work.call->record.set_gpu_ns(r->gpu_ns);
  work.call->record.set_analysis(kName, gpu::CompactionVariantName(r->variant));
  const size_t returned = r->returned();
  v1::CompactHeader* h = messages.front().mutable_header();
  *h->mutable_image() = image.info;
  h->set_total(r->total);
  h->set_returned(returned);
  h->set_truncated(r->truncated);
  h->set_value_format(ToProto(desc.type));
  h->set_value_channels(uint32_t(desc.channels));
  h->set_variant(std::string(gpu::CompactionVariantName(r->variant)));
  *messages.emplace_back().mutable_timing() = work.call->record.Timing();
  lease.ShrinkTo(returned * (8 + value_bytes) +
                 (returned / per_chunk + 1) * kCompactionChunkOverhead + kStreamEndsBytes);
  if (absl::Status s = work.call->Send(std::move(messages), std::move(lease)); !s.ok()) return s;
  work.call->Close(absl::OkStatus());
  return absl::OkStatus();
}

std::vector<std::string> CompactionAnalysis::Variants(const gpu::DeviceInfo& device) {
  return VariantsAvailable<gpu::CompactionVariant>(
      gpu::CompactionVariantName, gpu::ParseCompactionVariant,
      [&](gpu::CompactionVariant v) { return gpu::CompactionVariantAvailable(device, v); });
}

}  // namespace glimpse::server
