// Internal to gpu/internal/compaction_passes.cc (CompactionKernel::Find): the passes of one run
// over the image's bands of rows, for each variant, and the gather of the list they leave.
#ifndef GLIMPSE_GPU_INTERNAL_COMPACTION_BANDS_H_
#define GLIMPSE_GPU_INTERNAL_COMPACTION_BANDS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "gpu/compaction.h"
#include "gpu/context.h"
#include "gpu/gl_handles.h"
#include "gpu/internal/compaction_passes.h"

namespace glimpse::gpu::compaction_internal {

// Sums GPU time over several timed sections (GL allows one elapsed-time query at a time).
class GpuClock {
 public:
  void Start() { timer_.emplace(); }
  void Stop() {
    if (timer_) total_ns_ += timer_->StopAndRead();
    timer_.reset();
  }
  uint64_t total_ns() const { return total_ns_; }

 private:
  std::optional<GpuTimer> timer_;
  uint64_t total_ns_ = 0;
};

// The programs one run uses (0 where its variant uses none).
struct FindPrograms {
  GLuint find_list = 0, find_count = 0, strip_write = 0, strip_rows = 0;
  GLuint scan = 0, scan_add = 0, scatter = 0, gather = 0;
};

// How a run cuts the image and its list: bands of whole rows, chunks of gathered entries.
struct BandPlan {
  int64_t binding_limit = 0;
  int band_rows = 0, num_bands = 0;
  int64_t max_band_pixels = 0;
  int strip_groups = 0;  // strip scan workgroups per row
  int64_t pixel_bytes = 0;
  int64_t chunk_entries = 0;  // entries per gather dispatch
};

// Bands of whole rows whose list of indices fits one binding, the gather's chunks likewise.
// binding_limit_override > 0: at most that many bytes per binding instead of the device's limit.
BandPlan PlanBands(const ImageDesc& desc, const DeviceLimits& limits,
                   int64_t binding_limit_override);

// The passes of one run over its bands: each band counted (count_only, or once the cap is met) or
// listed in row-major order, then gathered chunk by chunk. Owns the per-band counters, the
// buffers made on first use and the GPU clock.
class BandPasses {
 public:
  // Makes the per-band counters, zeroed and bound.
  BandPasses(const ImageDesc& desc, const DeviceLimits& limits, CompactionVariant variant,
             const FindPrograms& programs, const BandPlan& plan)
      : desc_(desc),
        limits_(limits),
        programs_(programs),
        plan_(plan),
        strip_(variant == CompactionVariant::kStripScan),
        ordered_(variant == CompactionVariant::kOrderedScan),
        counters_(Buffer::Create(size_t(plan.num_bands) * sizeof(uint32_t))) {
    counters_.Zero();
    counters_.BindBase(kCountersBinding);
  }

  // Runs the count-only program over a band: its counter, nothing else.
  void Count(int band, int row0, int rows);
  // Finds the band's passing pixels and leaves the first min(count, wanted) of them, in
  // row-major order, in the index list; returns how many.
  int64_t List(int band, int row0, int rows, int64_t wanted);
  // Gathers (x, y) and the samples of list entries [done, done + n) into xy_chunk() and
  // values_chunk().
  void Gather(int64_t done, int64_t n);
  // After the last band: every band's count (waits for the GPU).
  std::vector<uint32_t> ReadCounts() const;

  const Buffer& xy_chunk() const { return xy_chunk_; }
  const Buffer& values_chunk() const { return values_chunk_; }
  uint64_t gpu_ns() const { return clock_.total_ns(); }

 private:
  int64_t ListStrip(int band, int row0, int rows, int64_t wanted);
  int64_t ListOrdered(int band, int row0, int rows, int64_t wanted);
  int64_t ListAtomic(int band, int row0, int rows, int64_t wanted);
  void ScanCounts(int64_t n);
  void MakeScanBuffers(int64_t max_values);
  const Buffer& LevelBuffer(size_t level) const {
    return level == 0 ? block_counts_ : scan_sums_[level - 1];
  }
  // The index list holds at least `entries`.
  void ReserveIndices(int64_t entries) {
    if (indices_.bytes() < size_t(entries) * 4) indices_ = Buffer::Create(size_t(entries) * 4);
  }

  const ImageDesc& desc_;
  const DeviceLimits& limits_;
  const FindPrograms& programs_;
  const BandPlan& plan_;
  const bool strip_, ordered_;
  Buffer counters_;
  GpuClock clock_;
  // Buffers for the bands that return a list, made on first use (the list's buffers at the size
  // needed, so a small result costs little memory).
  Buffer indices_, block_counts_, pass_bits_, row_sums_;
  std::vector<Buffer> scan_sums_;    // one per scan level above the block counts
  std::vector<int64_t> scan_sizes_;  // values per level, level 0 = blocks
  Buffer xy_chunk_, values_chunk_;
};

}  // namespace glimpse::gpu::compaction_internal

#endif  // GLIMPSE_GPU_INTERNAL_COMPACTION_BANDS_H_
