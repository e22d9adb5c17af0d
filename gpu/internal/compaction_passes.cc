// CompactionKernel::Run: per band of rows, the variant's passes that find (or count) the passing
// pixels and place them in row-major order, then the gather of their coordinates and samples.
#include "gpu/internal/compaction_passes.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "gpu/compaction.h"
#include "gpu/internal/compaction_bands.h"
#include "gpu/internal/compaction_keys.h"
#include "gpu/internal/uniforms.h"

namespace glimpse::gpu {
namespace {

using compaction_internal::BandPasses;
using compaction_internal::BandPlan;
using compaction_internal::BuildKeyRange;
using compaction_internal::FindDefines;
using compaction_internal::FindProgram;
using compaction_internal::FindPrograms;
using compaction_internal::GatherDefines;
using compaction_internal::KeyRange;
using compaction_internal::PlanBands;
using compaction_internal::ReadsPacked;
using compaction_internal::ScanDefines;
using compaction_internal::StripDefines;

// Sets *out to the program `name` with `defines`, or returns why it could not be built.
absl::Status LoadProgram(Context& ctx, std::string_view name, std::string_view defines,
                         GLuint* out) {
  absl::StatusOr<GLuint> p = ctx.Program(name, defines);
  if (!p.ok()) return p.status();
  *out = *p;
  return absl::OkStatus();
}

// Builds (or finds cached) the programs a run of `variant` uses; the image gets its packed form
// between the find programs and the rest where the run reads that form.
absl::StatusOr<FindPrograms> LoadPrograms(Context& ctx, const Image& image,
                                          CompactionVariant variant, const CompactionOptions& o,
                                          bool packed) {
  const ImageDesc& desc = image.desc();
  FindPrograms p;
  absl::Status s;
  if (s = LoadProgram(ctx, FindProgram(variant),
                      FindDefines(variant, desc, o.source, o.channel, false, packed), &p.find_list);
      !s.ok()) {
    return s;
  }
  if (s = LoadProgram(ctx, FindProgram(variant),
                      FindDefines(variant, desc, o.source, o.channel, true, packed), &p.find_count);
      !s.ok()) {
    return s;
  }
  if (packed) {
    if (s = image.EnsurePacked(ctx); !s.ok()) return s;
  }
  if (variant == CompactionVariant::kStripScan) {
    if (s = LoadProgram(ctx, "compaction_strip_write",
                        StripDefines(desc, o.source, o.channel, false), &p.strip_write);
        !s.ok()) {
      return s;
    }
    absl::StatusOr<GLuint> r = ctx.Program("compaction_strip_rows");
    if (!r.ok()) return r.status();
    p.strip_rows = *r;
  }
  if (s = LoadProgram(ctx, "compaction_scan", ScanDefines(), &p.scan); !s.ok()) return s;
  if (s = LoadProgram(ctx, "compaction_scan_add", ScanDefines(), &p.scan_add); !s.ok()) return s;
  if (s = LoadProgram(ctx, "compaction_scatter", ScanDefines(), &p.scatter); !s.ok()) return s;
  if (s = LoadProgram(ctx, "compaction_gather", GatherDefines(desc.type, desc.channels, packed),
                      &p.gather);
      !s.ok()) {
    return s;
  }
  return p;
}

// The predicate's uniforms, on every program that evaluates it.
void SetPredicateUniforms(const FindPrograms& programs, const ImageDesc& desc,
                          const CompactionOptions& o) {
  const KeyRange keys = BuildKeyRange(desc, o);
  for (GLuint p : {programs.find_list, programs.find_count, programs.strip_write}) {
    if (p == 0) continue;
    glProgramUniform2i(p, glGetUniformLocation(p, "u_size"), desc.width, desc.height);
    SetInt(p, "u_channel", o.channel);
    glProgramUniform2ui(p, glGetUniformLocation(p, "u_keys"), keys.lo, keys.hi);
    SetInt(p, "u_inside", o.inside ? 1 : 0);
  }
}

}  // namespace

absl::Status CompactionKernel::DeliverChunk(const Buffer& xy, const Buffer& values, uint64_t first,
                                            int64_t n, int64_t pixel_bytes,
                                            const CompactionSink& sink) {
  values_staging_.resize(size_t(n * pixel_bytes));
  if (!ctx_.readback().ReadAll(values, values_staging_.size(), values_staging_.data())) {
    return ctx_.MapError("the compaction values");
  }
  const int64_t piece = std::max<int64_t>(1, int64_t(kSinkPieceBytes) / (8 + pixel_bytes));
  absl::Status status;
  const bool read = ctx_.readback().Read(
      xy, size_t(n) * 8, size_t(piece) * 8, [&](const uint8_t* bytes, size_t at, size_t size) {
        const int64_t i = int64_t(at / 8), m = int64_t(size / 8);
        status = sink(CompactionPiece{
            first + uint64_t(i), uint64_t(m),
            std::span<const uint32_t>(reinterpret_cast<const uint32_t*>(bytes), size_t(2 * m)),
            std::span<const uint8_t>(values_staging_.data() + i * pixel_bytes,
                                     size_t(m * pixel_bytes))});
        return status.ok();
      });
  if (!read) return ctx_.MapError("the compaction list");
  return status;
}

absl::StatusOr<CompactionResult> CompactionKernel::Run(const Image& image,
                                                       const CompactionOptions& options) {
  return Find(image, options, nullptr);
}

absl::StatusOr<CompactionResult> CompactionKernel::Stream(const Image& image,
                                                          const CompactionOptions& options,
                                                          const CompactionSink& sink) {
  return Find(image, options, &sink);
}

absl::StatusOr<CompactionResult> CompactionKernel::Find(const Image& image,
                                                        const CompactionOptions& options,
                                                        const CompactionSink* sink) {
  const ImageDesc& desc = image.desc();
  absl::StatusOr<CompactionOptions> resolved = ResolveCompactionOptions(desc, options);
  if (!resolved.ok()) return resolved.status();
  const CompactionOptions& o = *resolved;
  if (absl::Status s = CompactionVariantAvailable(ctx_.info(), o.variant); !s.ok()) return s;
  const CompactionVariant variant = ResolveCompactionVariant(ctx_.info(), desc, o);
  const bool packed = ReadsPacked(ctx_.info(), variant);
  const DeviceLimits& limits = ctx_.limits();

  absl::StatusOr<FindPrograms> programs = LoadPrograms(ctx_, image, variant, o, packed);
  if (!programs.ok()) return programs.status();
  const BandPlan plan = PlanBands(desc, limits, binding_limit_override_);
  SetPredicateUniforms(*programs, desc, o);
  // Binding the plain texture would make it where only the packed form exists.
  if (packed) {
    image.BindPacked(0);
  } else {
    image.Bind(0);
  }
  BandPasses passes(desc, limits, variant, *programs, plan);

  CompactionResult result;
  result.variant = variant;
  int64_t wanted = o.count_only ? 0 : o.max_results;  // list entries still to return
  const int64_t pixel_bytes = plan.pixel_bytes;
  for (int band = 0; band < plan.num_bands; ++band) {
    const int row0 = band * plan.band_rows;
    const int rows = std::min(plan.band_rows, desc.height - row0);
    if (wanted == 0) {
      passes.Count(band, row0, rows);
      continue;
    }
    const int64_t keep = passes.List(band, row0, rows, wanted);

    // Gather (x, y) and the samples of the band's first `keep` entries, chunk by chunk.
    for (int64_t done = 0; done < keep;) {
      const int64_t n = std::min(plan.chunk_entries, keep - done);
      passes.Gather(done, n);
      const size_t returned = result.returned();
      if (sink != nullptr) {
        if (absl::Status s = DeliverChunk(passes.xy_chunk(), passes.values_chunk(), returned, n,
                                          pixel_bytes, *sink);
            !s.ok()) {
          return s;
        }
        result.streamed += uint64_t(n);
        done += n;
        continue;
      }
      result.xy.resize(result.xy.size() + size_t(n) * 2);
      result.values.resize(result.values.size() + size_t(n * pixel_bytes));
      passes.xy_chunk().Read(0, size_t(n) * 8, result.xy.data() + returned * 2);
      passes.values_chunk().Read(0, size_t(n * pixel_bytes),
                                 result.values.data() + returned * pixel_bytes);
      done += n;
    }
    wanted -= keep;
  }
  const std::vector<uint32_t> band_counts = passes.ReadCounts();
  if (absl::Status s = ctx_.CheckGlError("compaction"); !s.ok()) return s;
  for (uint32_t c : band_counts) result.total += c;
  result.truncated = !o.count_only && result.total > result.returned();
  result.gpu_ns = passes.gpu_ns();
  return result;
}

}  // namespace glimpse::gpu
