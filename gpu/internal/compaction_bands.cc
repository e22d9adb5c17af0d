// The passes of a compaction run over its bands: count, list in row-major order (strip scan,
// ordered scan, or the atomic variants' unordered list ordered on the host), gather.
#include "gpu/internal/compaction_bands.h"

#include <algorithm>
#include <vector>

#include "gpu/internal/compaction_keys.h"
#include "gpu/internal/compaction_passes.h"
#include "gpu/internal/uniforms.h"

namespace glimpse::gpu::compaction_internal {

BandPlan PlanBands(const ImageDesc& desc, const DeviceLimits& limits,
                   int64_t binding_limit_override) {
  BandPlan plan;
  // Bands of whole rows whose list of indices fits one binding (every later buffer is smaller).
  // (At most 2^32 bytes, so that band-linear pixel numbers stay 32-bit in the shaders.)
  plan.binding_limit =
      std::min(binding_limit_override > 0 ? binding_limit_override : limits.max_storage_block_bytes,
               int64_t{1} << 32);
  plan.band_rows = int(std::clamp<int64_t>(plan.binding_limit / 4 / desc.width, 1, desc.height));
  plan.num_bands = int(CeilDiv(desc.height, plan.band_rows));
  plan.max_band_pixels = int64_t{plan.band_rows} * desc.width;
  plan.strip_groups = int(CeilDiv(desc.width, kStripGroupPixels));
  plan.pixel_bytes = int64_t{desc.channels} * BytesPerSample(desc.type);
  // Entries per gather dispatch: the xy and value chunks fit a binding, and a chunk's offset in
  // the index list meets the device's binding-offset alignment.
  const int64_t chunk_unit = std::max<int64_t>(4, limits.storage_buffer_offset_alignment / 4);
  plan.chunk_entries =
      std::max(chunk_unit, plan.binding_limit / std::max<int64_t>(8, plan.pixel_bytes) /
                               chunk_unit * chunk_unit);
  return plan;
}

void BandPasses::Count(int band, int row0, int rows) {
  const GLuint p = programs_.find_count;
  clock_.Start();
  SetInt(p, "u_band", band);
  SetInt(p, "u_row0", row0);
  SetInt(p, "u_rows", rows);
  if (strip_) {
    SetUint(p, "u_items", uint64_t(rows));
    SetInt(p, "u_groups", plan_.strip_groups);
    DispatchFlat(p, limits_, CeilDiv(rows, kStripThreads));
  } else if (ordered_) {
    DispatchFlat(p, limits_, CeilDiv(int64_t{rows} * desc_.width, kBlockPixels));
  } else {
    glUseProgram(p);
    glDispatchCompute(GLuint(CeilDiv(desc_.width, kTileSide)), GLuint(CeilDiv(rows, kTileSide)), 1);
  }
  clock_.Stop();
}

int64_t BandPasses::List(int band, int row0, int rows, int64_t wanted) {
  const GLuint p = programs_.find_list;
  SetInt(p, "u_band", band);
  SetInt(p, "u_row0", row0);
  SetInt(p, "u_rows", rows);
  if (strip_) return ListStrip(band, row0, rows, wanted);
  if (ordered_) return ListOrdered(band, row0, rows, wanted);
  return ListAtomic(band, row0, rows, wanted);
}

// Strip scan: pass 1 counts per row and segment, pass 2 scans the row totals, pass 3 writes the
// keys.
int64_t BandPasses::ListStrip(int band, int row0, int rows, int64_t wanted) {
  const GLuint p = programs_.find_list, strip_rows = programs_.strip_rows,
               strip_write = programs_.strip_write;
  const int strip_groups = plan_.strip_groups;
  const int64_t groups = int64_t{rows} * strip_groups;
  if (!block_counts_) {
    block_counts_ = Buffer::Create(size_t(plan_.band_rows) * size_t(strip_groups) * 16);
    row_sums_ = Buffer::Create(size_t(plan_.band_rows) * 4);
  }
  clock_.Start();
  block_counts_.BindBase(kDataBinding);
  row_sums_.BindBase(kSumsBinding);
  SetUint(p, "u_items", uint64_t(rows));
  SetInt(p, "u_groups", strip_groups);
  DispatchFlat(p, limits_, CeilDiv(rows, kStripThreads));
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  SetUint(strip_rows, "u_items", uint64_t(rows));
  SetInt(strip_rows, "u_band", band);
  glUseProgram(strip_rows);
  glDispatchCompute(1, 1, 1);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT);
  clock_.Stop();
  uint32_t count = 0;
  counters_.Read(size_t(band) * 4, 4, &count);
  const int64_t keep = std::min<int64_t>(count, wanted);
  if (keep > 0) {
    ReserveIndices(keep);
    clock_.Start();
    indices_.BindBase(kIndicesBinding);
    SetInt(strip_write, "u_row0", row0);
    SetUint(strip_write, "u_items", uint64_t(groups));
    SetInt(strip_write, "u_groups", strip_groups);
    SetUint(strip_write, "u_cap", uint64_t(keep));
    DispatchFlat(strip_write, limits_, CeilDiv(groups, kStripThreads));
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
    clock_.Stop();
  }
  return keep;
}

// Ordered scan: per-block counts and pass bits, the exclusive scan of the counts, then the
// scatter of the first `keep` entries in order.
int64_t BandPasses::ListOrdered(int band, int row0, int rows, int64_t wanted) {
  const GLuint p = programs_.find_list, scatter = programs_.scatter;
  const int64_t blocks = CeilDiv(int64_t{rows} * desc_.width, kBlockPixels);
  if (!block_counts_) {
    const int64_t max_blocks = CeilDiv(plan_.max_band_pixels, kBlockPixels);
    MakeScanBuffers(max_blocks);
    pass_bits_ = Buffer::Create(size_t(max_blocks * kThreads) * 4);
  }
  clock_.Start();
  block_counts_.BindBase(kDataBinding);
  pass_bits_.BindBase(kBitsBinding);
  DispatchFlat(p, limits_, blocks);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  ScanCounts(blocks);
  clock_.Stop();
  uint32_t count = 0;
  counters_.Read(size_t(band) * 4, 4, &count);
  const int64_t keep = std::min<int64_t>(count, wanted);
  if (keep > 0) {
    ReserveIndices(keep);
    clock_.Start();
    indices_.BindBase(kIndicesBinding);
    block_counts_.BindBase(kDataBinding);
    pass_bits_.BindBase(kBitsBinding);
    SetInt(scatter, "u_row0", row0);
    SetInt(scatter, "u_width", desc_.width);
    SetUint(scatter, "u_cap", uint64_t(keep));
    DispatchFlat(scatter, limits_, blocks);
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
    clock_.Stop();
  }
  return keep;
}

// The atomic variants: every passing pixel of the band appended in any order, then ordered on
// the host.
int64_t BandPasses::ListAtomic(int band, int row0, int rows, int64_t wanted) {
  const GLuint p = programs_.find_list;
  if (!indices_) indices_ = Buffer::Create(size_t(plan_.max_band_pixels) * 4);
  clock_.Start();
  indices_.BindBase(kIndicesBinding);
  glUseProgram(p);
  glDispatchCompute(GLuint(CeilDiv(desc_.width, kTileSide)), GLuint(CeilDiv(rows, kTileSide)), 1);
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  clock_.Stop();
  uint32_t count = 0;
  counters_.Read(size_t(band) * 4, 4, &count);
  const int64_t keep = std::min<int64_t>(count, wanted);
  if (keep > 0) {
    // The list is unordered: read all of it back, order it on the host, and put the first
    // `keep` back for the gather pass.
    std::vector<uint32_t> unordered(count);
    indices_.Read(0, size_t(count) * 4, unordered.data());
    std::vector<uint32_t> sorted = OrderBandKeys(unordered, desc_.width, row0, rows, keep);
    indices_.Upload(0, sorted.size() * 4, sorted.data());
  }
  return keep;
}

// Exclusive scan, in place, of the first n values of block_counts: level by level, then the sums
// added back down. Level l + 1 holds the scanned totals of level l's runs; the top level is one
// value, the total, which is left in top_sum().
void BandPasses::ScanCounts(int64_t n) {
  const GLuint scan = programs_.scan, scan_add = programs_.scan_add;
  scan_sizes_.assign(1, n);
  do {
    scan_sizes_.push_back(CeilDiv(scan_sizes_.back(), kScanRun));
  } while (scan_sizes_.back() > 1);
  const size_t levels = scan_sizes_.size();
  for (size_t l = 0; l + 1 < levels; ++l) {
    LevelBuffer(l).BindBase(kDataBinding);
    LevelBuffer(l + 1).BindBase(kSumsBinding);
    SetUint(scan, "u_count", uint64_t(scan_sizes_[l]));
    DispatchFlat(scan, limits_, scan_sizes_[l + 1]);
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  }
  for (int l = int(levels) - 3; l >= 0; --l) {
    LevelBuffer(size_t(l)).BindBase(kDataBinding);
    LevelBuffer(size_t(l) + 1).BindBase(kSumsBinding);
    SetUint(scan_add, "u_count", uint64_t(scan_sizes_[size_t(l)]));
    DispatchFlat(scan_add, limits_, scan_sizes_[size_t(l) + 1]);
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  }
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
}

// Scan buffers for up to `max_values` values (made once, at the first band's size).
void BandPasses::MakeScanBuffers(int64_t max_values) {
  block_counts_ = Buffer::Create(size_t(max_values) * 4);
  for (int64_t n = max_values; n > 1;) {
    n = CeilDiv(n, kScanRun);
    scan_sums_.push_back(Buffer::Create(size_t(n) * 4));
  }
  if (scan_sums_.empty()) scan_sums_.push_back(Buffer::Create(4));
}

void BandPasses::Gather(int64_t done, int64_t n) {
  const int64_t pixel_bytes = plan_.pixel_bytes;
  const int64_t words = CeilDiv(n * pixel_bytes, 4);
  // Whole words' (or 3-byte pixels' whole quads') entries of (x, y) and values: pixels of 1, 2 or
  // 3 bytes write them 4 or 2 at a time.
  const int64_t quads = CeilDiv(n, 4);
  const size_t xy_bytes = size_t(quads) * 4 * 8;
  if (xy_chunk_.bytes() < xy_bytes) {
    xy_chunk_ = Buffer::Create(xy_bytes);
    values_chunk_ = Buffer::Create(size_t(quads) * 4 * size_t(pixel_bytes));
  }
  clock_.Start();
  indices_.BindRange(kIndicesBinding, size_t(done) * 4, size_t(n) * 4);
  xy_chunk_.BindBase(kXyBinding);
  values_chunk_.BindBase(kValuesBinding);
  const GLuint g = programs_.gather;
  SetUint(g, "u_count", uint64_t(n));
  SetUint(g, "u_words", uint64_t(words));
  // One invocation per word where a word holds whole pixels, per 4 entries (3 words) of 3-byte
  // pixels, else one per entry or word.
  const bool whole = pixel_bytes == 1 || pixel_bytes == 2 || pixel_bytes == 4;
  const int64_t invocations = whole ? words : pixel_bytes == 3 ? quads : std::max(n, words);
  DispatchFlat(g, limits_, CeilDiv(invocations, kThreads));
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  clock_.Stop();
}

std::vector<uint32_t> BandPasses::ReadCounts() const {
  glUseProgram(0);
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  std::vector<uint32_t> band_counts(static_cast<size_t>(plan_.num_bands));
  counters_.Read(0, band_counts.size() * 4, band_counts.data());
  return band_counts;
}

}  // namespace glimpse::gpu::compaction_internal
