// CompactionKernel::Run: per band of rows, the variant's passes that find (or count) the passing
// pixels and place them in row-major order, then the gather of their coordinates and samples.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpu/compaction.h"
#include "gpu/internal/compaction_passes.h"
#include "common/str.h"

namespace glimpse::gpu {
namespace {

using compaction_internal::DispatchFlat;
using compaction_internal::FindDefines;
using compaction_internal::FindProgram;
using compaction_internal::GatherDefines;
using compaction_internal::kBitsBinding;
using compaction_internal::kBlockPixels;
using compaction_internal::kCountersBinding;
using compaction_internal::kDataBinding;
using compaction_internal::kIndicesBinding;
using compaction_internal::kScanRun;
using compaction_internal::kStripGroupPixels;
using compaction_internal::kStripThreads;
using compaction_internal::kSumsBinding;
using compaction_internal::kThreads;
using compaction_internal::kTileSide;
using compaction_internal::kValuesBinding;
using compaction_internal::kXyBinding;
using compaction_internal::ReadsPacked;
using compaction_internal::ScanDefines;
using compaction_internal::SetInt;
using compaction_internal::SetUint;
using compaction_internal::StripDefines;

// The predicate as the shaders evaluate it: an inclusive range of 32-bit keys (lo > hi: empty).
struct KeyRange {
  uint32_t lo = 1, hi = 0;
};

// The unsigned key whose order is the order of the float values (-0 folded onto +0); the same
// mapping as ordered_key() in compaction_common.glsl.
uint32_t OrderedKey(float v) {
  uint32_t b = std::bit_cast<uint32_t>(v);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

// The smallest float >= d (d not NaN): v >= d <=> v >= RoundUpToFloat(d) for every float v.
float RoundUpToFloat(double d) {
  constexpr double kMax = std::numeric_limits<float>::max();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (d == -std::numeric_limits<double>::infinity()) return -kInf;
  if (d < -kMax) return -std::numeric_limits<float>::max();
  if (d > kMax) return kInf;
  float f = static_cast<float>(d);
  if (double(f) < d) f = std::nextafter(f, kInf);
  return f;
}

// The largest float <= d (d not NaN).
float RoundDownToFloat(double d) {
  constexpr double kMax = std::numeric_limits<float>::max();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (d == std::numeric_limits<double>::infinity()) return kInf;
  if (d > kMax) return std::numeric_limits<float>::max();
  if (d < -kMax) return -kInf;
  float f = static_cast<float>(d);
  if (double(f) > d) f = std::nextafter(f, -kInf);
  return f;
}

KeyRange BuildKeyRange(const ImageDesc& desc, const CompactionOptions& o) {
  KeyRange r;
  if (desc.type == SampleType::kFloat32) {
    const float lo = RoundUpToFloat(o.lo), hi = RoundDownToFloat(o.hi);
    if (lo <= hi) r = {OrderedKey(lo), OrderedKey(hi)};
    return r;
  }
  // Integer keys (samples or luma) lie in [0, max]; round the bounds inward, then clip.
  const double max = desc.type == SampleType::kUint8 ? 255.0 : 65535.0;
  const double lo = std::max(0.0, std::ceil(o.lo)), hi = std::min(max, std::floor(o.hi));
  if (lo <= hi) r = {uint32_t(lo), uint32_t(hi)};
  return r;
}

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

// Orders the distinct pixel keys of one band (rows [row0, row0 + rows)) and keeps the first
// `keep`: a bitmap of the band, a row of 64-bit words per image row, read in order. Linear in the
// band's size, and no division.
std::vector<uint32_t> OrderBandKeys(const std::vector<uint32_t>& keys, int width, int row0,
                                    int rows, int64_t keep) {
  const size_t row_words = size_t(CeilDiv(width, 64));
  std::vector<uint64_t> bitmap(row_words * size_t(rows), 0);
  for (uint32_t k : keys) {
    const uint32_t x = k & 0xFFFFu, y = (k >> 16) - uint32_t(row0);
    bitmap[y * row_words + (x >> 6)] |= uint64_t{1} << (x & 63);
  }
  std::vector<uint32_t> out;
  out.reserve(size_t(keep));
  for (int y = 0; y < rows && int64_t(out.size()) < keep; ++y) {
    const uint64_t* row = bitmap.data() + size_t(y) * row_words;
    const uint32_t high = uint32_t(row0 + y) << 16;
    for (size_t w = 0; w < row_words && int64_t(out.size()) < keep; ++w) {
      for (uint64_t bits = row[w]; bits != 0 && int64_t(out.size()) < keep; bits &= bits - 1) {
        out.push_back(high | uint32_t(w * 64 + size_t(std::countr_zero(bits))));
      }
    }
  }
  return out;
}

}  // namespace

absl::Status CompactionKernel::DeliverChunk(const Buffer& xy, const Buffer& values,
                                            uint64_t first, int64_t n, int64_t pixel_bytes,
                                            const CompactionSink& sink) {
  values_staging_.resize(size_t(n * pixel_bytes));
  values.Read(0, values_staging_.size(), values_staging_.data());
  const int64_t piece = std::max<int64_t>(1, int64_t(kSinkPieceBytes) / (8 + pixel_bytes));
  absl::Status status;
  const bool mapped = xy.ReadMapped(0, size_t(n) * 8, [&](const uint8_t* device) {
    const uint32_t* pairs = reinterpret_cast<const uint32_t*>(device);
    for (int64_t i = 0; i < n && status.ok(); i += piece) {
      const int64_t m = std::min(piece, n - i);
      status = sink(CompactionPiece{
          first + uint64_t(i), uint64_t(m), std::span<const uint32_t>(pairs + 2 * i, size_t(2 * m)),
          std::span<const uint8_t>(values_staging_.data() + i * pixel_bytes,
                                   size_t(m * pixel_bytes))});
    }
  });
  if (!mapped) return ctx_.MapError("the compaction list");
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
  const bool ordered = variant == CompactionVariant::kOrderedScan;
  const bool strip = variant == CompactionVariant::kStripScan;
  const bool packed = ReadsPacked(ctx_.info(), variant);
  const DeviceLimits& limits = ctx_.limits();

  absl::StatusOr<GLuint> find_list =
      ctx_.Program(FindProgram(variant), FindDefines(variant, desc, o.source, false, packed));
  if (!find_list.ok()) return find_list.status();
  absl::StatusOr<GLuint> find_count =
      ctx_.Program(FindProgram(variant), FindDefines(variant, desc, o.source, true, packed));
  if (!find_count.ok()) return find_count.status();
  if (packed) {
    if (absl::Status s = image.EnsurePacked(ctx_); !s.ok()) return s;
  }
  GLuint strip_write = 0, strip_rows = 0;
  if (strip) {
    absl::StatusOr<GLuint> w =
        ctx_.Program("compaction_strip_write", StripDefines(desc, o.source, false));
    if (!w.ok()) return w.status();
    strip_write = *w;
    absl::StatusOr<GLuint> r = ctx_.Program("compaction_strip_rows");
    if (!r.ok()) return r.status();
    strip_rows = *r;
  }
  absl::StatusOr<GLuint> scan = ctx_.Program("compaction_scan", ScanDefines());
  if (!scan.ok()) return scan.status();
  absl::StatusOr<GLuint> scan_add = ctx_.Program("compaction_scan_add", ScanDefines());
  if (!scan_add.ok()) return scan_add.status();
  absl::StatusOr<GLuint> scatter = ctx_.Program("compaction_scatter", ScanDefines());
  if (!scatter.ok()) return scatter.status();
  absl::StatusOr<GLuint> gather =
      ctx_.Program("compaction_gather", GatherDefines(desc.type, desc.channels, packed));
  if (!gather.ok()) return gather.status();

  // Bands of whole rows whose list of indices fits one binding (every later buffer is smaller).
  // (At most 2^32 bytes, so that band-linear pixel numbers stay 32-bit in the shaders.)
  const int64_t binding_limit = std::min(
      binding_limit_override_ > 0 ? binding_limit_override_ : limits.max_storage_block_bytes,
      int64_t{1} << 32);
  const int band_rows = int(std::clamp<int64_t>(binding_limit / 4 / desc.width, 1, desc.height));
  const int num_bands = int(CeilDiv(desc.height, band_rows));
  const int64_t max_band_pixels = int64_t{band_rows} * desc.width;

  const KeyRange keys = BuildKeyRange(desc, o);
  for (GLuint p : {*find_list, *find_count, strip_write}) {
    if (p == 0) continue;
    glProgramUniform2i(p, glGetUniformLocation(p, "u_size"), desc.width, desc.height);
    SetInt(p, "u_channel", o.channel);
    glProgramUniform2ui(p, glGetUniformLocation(p, "u_keys"), keys.lo, keys.hi);
    SetInt(p, "u_inside", o.inside ? 1 : 0);
  }
  // Binding the plain texture would make it where only the packed form exists.
  if (packed) {
    image.BindPacked(0);
  } else {
    image.Bind(0);
  }
  const int strip_groups = int(CeilDiv(desc.width, kStripGroupPixels));  // per row

  Buffer counters = Buffer::Create(size_t(num_bands) * sizeof(uint32_t));
  counters.Zero();
  counters.BindBase(kCountersBinding);

  CompactionResult result;
  result.variant = variant;
  GpuClock clock;
  int64_t wanted = o.count_only ? 0 : o.max_results;  // list entries still to return

  // Runs the count-only program over a band: its counter, nothing else.
  auto count_band = [&](int band, int row0, int rows) {
    const GLuint p = *find_count;
    SetInt(p, "u_band", band);
    SetInt(p, "u_row0", row0);
    SetInt(p, "u_rows", rows);
    if (strip) {
      SetUint(p, "u_items", uint64_t(rows));
      SetInt(p, "u_groups", strip_groups);
      DispatchFlat(p, limits, CeilDiv(rows, kStripThreads));
    } else if (ordered) {
      DispatchFlat(p, limits, CeilDiv(int64_t{rows} * desc.width, kBlockPixels));
    } else {
      glUseProgram(p);
      glDispatchCompute(GLuint(CeilDiv(desc.width, kTileSide)), GLuint(CeilDiv(rows, kTileSide)),
                        1);
    }
  };

  // Buffers for the bands that return a list, made on first use (the list's buffers at the size
  // needed, so a small result costs little memory).
  Buffer indices, block_counts, pass_bits, row_sums;
  std::vector<Buffer> scan_sums;    // one per scan level above the block counts
  std::vector<int64_t> scan_sizes;  // values per level, level 0 = blocks
  Buffer xy_chunk, values_chunk;
  const int64_t pixel_bytes = int64_t{desc.channels} * BytesPerSample(desc.type);
  // Entries per gather dispatch: the xy and value chunks fit a binding, and a chunk's offset in
  // the index list meets the device's binding-offset alignment.
  const int64_t chunk_unit = std::max<int64_t>(4, limits.storage_buffer_offset_alignment / 4);
  const int64_t chunk_entries = std::max(
      chunk_unit, binding_limit / std::max<int64_t>(8, pixel_bytes) / chunk_unit * chunk_unit);

  // Exclusive scan, in place, of the first n values of block_counts: level by level, then the sums
  // added back down. Level l + 1 holds the scanned totals of level l's runs; the top level is one
  // value, the total, which is left in top_sum().
  auto level_buffer = [&](size_t level) -> const Buffer& {
    return level == 0 ? block_counts : scan_sums[level - 1];
  };
  auto scan_counts = [&](int64_t n) {
    scan_sizes.assign(1, n);
    do {
      scan_sizes.push_back(CeilDiv(scan_sizes.back(), kScanRun));
    } while (scan_sizes.back() > 1);
    const size_t levels = scan_sizes.size();
    for (size_t l = 0; l + 1 < levels; ++l) {
      level_buffer(l).BindBase(kDataBinding);
      level_buffer(l + 1).BindBase(kSumsBinding);
      SetUint(*scan, "u_count", uint64_t(scan_sizes[l]));
      DispatchFlat(*scan, limits, scan_sizes[l + 1]);
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
    }
    for (int l = int(levels) - 3; l >= 0; --l) {
      level_buffer(size_t(l)).BindBase(kDataBinding);
      level_buffer(size_t(l) + 1).BindBase(kSumsBinding);
      SetUint(*scan_add, "u_count", uint64_t(scan_sizes[size_t(l)]));
      DispatchFlat(*scan_add, limits, scan_sizes[size_t(l) + 1]);
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
    }
    glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  };
  // Scan buffers for up to `max_values` values (made once, at the first band's size).
  auto make_scan_buffers = [&](int64_t max_values) {
    block_counts = Buffer::Create(size_t(max_values) * 4);
    for (int64_t n = max_values; n > 1;) {
      n = CeilDiv(n, kScanRun);
      scan_sums.push_back(Buffer::Create(size_t(n) * 4));
    }
    if (scan_sums.empty()) scan_sums.push_back(Buffer::Create(4));
  };

  for (int band = 0; band < num_bands; ++band) {
    const int row0 = band * band_rows;
    const int rows = std::min(band_rows, desc.height - row0);
    const int64_t band_pixels = int64_t{rows} * desc.width;
    if (wanted == 0) {
      clock.Start();
      count_band(band, row0, rows);
      clock.Stop();
      continue;
    }
    const GLuint p = *find_list;
    SetInt(p, "u_band", band);
    SetInt(p, "u_row0", row0);
    SetInt(p, "u_rows", rows);
    uint32_t count = 0;
    int64_t keep = 0;
    if (strip) {
      // Pass 1 counts per row and segment, pass 2 scans the row totals, pass 3 writes the keys.
      const int64_t groups = int64_t{rows} * strip_groups;
      if (!block_counts) {
        block_counts = Buffer::Create(size_t(band_rows) * size_t(strip_groups) * 16);
        row_sums = Buffer::Create(size_t(band_rows) * 4);
      }
      clock.Start();
      block_counts.BindBase(kDataBinding);
      row_sums.BindBase(kSumsBinding);
      SetUint(p, "u_items", uint64_t(rows));
      SetInt(p, "u_groups", strip_groups);
      DispatchFlat(p, limits, CeilDiv(rows, kStripThreads));
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
      SetUint(strip_rows, "u_items", uint64_t(rows));
      SetInt(strip_rows, "u_band", band);
      glUseProgram(strip_rows);
      glDispatchCompute(1, 1, 1);
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT);
      clock.Stop();
      counters.Read(size_t(band) * 4, 4, &count);
      keep = std::min<int64_t>(count, wanted);
      if (keep > 0) {
        if (indices.bytes() < size_t(keep) * 4) indices = Buffer::Create(size_t(keep) * 4);
        clock.Start();
        indices.BindBase(kIndicesBinding);
        SetInt(strip_write, "u_row0", row0);
        SetUint(strip_write, "u_items", uint64_t(groups));
        SetInt(strip_write, "u_groups", strip_groups);
        SetUint(strip_write, "u_cap", uint64_t(keep));
        DispatchFlat(strip_write, limits, CeilDiv(groups, kStripThreads));
        glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
        clock.Stop();
      }
    } else if (ordered) {
      const int64_t blocks = CeilDiv(band_pixels, kBlockPixels);
      if (!block_counts) {
        const int64_t max_blocks = CeilDiv(max_band_pixels, kBlockPixels);
        make_scan_buffers(max_blocks);
        pass_bits = Buffer::Create(size_t(max_blocks * kThreads) * 4);
      }
      clock.Start();
      block_counts.BindBase(kDataBinding);
      pass_bits.BindBase(kBitsBinding);
      DispatchFlat(p, limits, blocks);
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
      scan_counts(blocks);
      clock.Stop();
      counters.Read(size_t(band) * 4, 4, &count);
      keep = std::min<int64_t>(count, wanted);
      if (keep > 0) {
        if (indices.bytes() < size_t(keep) * 4) indices = Buffer::Create(size_t(keep) * 4);
        clock.Start();
        indices.BindBase(kIndicesBinding);
        block_counts.BindBase(kDataBinding);
        pass_bits.BindBase(kBitsBinding);
        SetInt(*scatter, "u_row0", row0);
        SetInt(*scatter, "u_width", desc.width);
        SetUint(*scatter, "u_cap", uint64_t(keep));
        DispatchFlat(*scatter, limits, blocks);
        glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
        clock.Stop();
      }
    } else {
      if (!indices) indices = Buffer::Create(size_t(max_band_pixels) * 4);
      clock.Start();
      indices.BindBase(kIndicesBinding);
      glUseProgram(p);
      glDispatchCompute(GLuint(CeilDiv(desc.width, kTileSide)), GLuint(CeilDiv(rows, kTileSide)),
                        1);
      glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
      clock.Stop();
      counters.Read(size_t(band) * 4, 4, &count);
      keep = std::min<int64_t>(count, wanted);
      if (keep > 0) {
        // The list is unordered: read all of it back, order it on the host, and put the first
        // `keep` back for the gather pass.
        std::vector<uint32_t> unordered(count);
        indices.Read(0, size_t(count) * 4, unordered.data());
        std::vector<uint32_t> sorted = OrderBandKeys(unordered, desc.width, row0, rows, keep);
        indices.Upload(0, sorted.size() * 4, sorted.data());
      }
    }

    // Gather (x, y) and the samples of the band's first `keep` entries, chunk by chunk.
    for (int64_t done = 0; done < keep;) {
      const int64_t n = std::min(chunk_entries, keep - done);
      const int64_t words = CeilDiv(n * pixel_bytes, 4);
      // Whole words' entries of (x, y): pixels of 1 or 2 bytes write them 4 or 2 at a time.
      const size_t xy_bytes = size_t(CeilDiv(n, 4)) * 4 * 8;
      if (xy_chunk.bytes() < xy_bytes) {
        xy_chunk = Buffer::Create(xy_bytes);
        values_chunk = Buffer::Create(size_t(words) * 4);
      }
      clock.Start();
      indices.BindRange(kIndicesBinding, size_t(done) * 4, size_t(n) * 4);
      xy_chunk.BindBase(kXyBinding);
      values_chunk.BindBase(kValuesBinding);
      const GLuint g = *gather;
      SetUint(g, "u_count", uint64_t(n));
      SetUint(g, "u_words", uint64_t(words));
      // One invocation per word where a word holds whole pixels, else one per entry or word.
      const bool whole = pixel_bytes == 1 || pixel_bytes == 2 || pixel_bytes == 4;
      DispatchFlat(g, limits, CeilDiv(whole ? words : std::max(n, words), kThreads));
      glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
      clock.Stop();
      const size_t returned = result.returned();
      if (sink != nullptr) {
        if (absl::Status s = DeliverChunk(xy_chunk, values_chunk, returned, n, pixel_bytes, *sink);
            !s.ok()) {
          return s;
        }
        result.streamed += uint64_t(n);
        done += n;
        continue;
      }
      result.xy.resize(result.xy.size() + size_t(n) * 2);
      result.values.resize(result.values.size() + size_t(n * pixel_bytes));
      xy_chunk.Read(0, size_t(n) * 8, result.xy.data() + returned * 2);
      values_chunk.Read(0, size_t(n * pixel_bytes), result.values.data() + returned * pixel_bytes);
      done += n;
    }
    wanted -= keep;
  }
  glUseProgram(0);
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  std::vector<uint32_t> band_counts(static_cast<size_t>(num_bands));
  counters.Read(0, band_counts.size() * 4, band_counts.data());
  if (absl::Status s = ctx_.CheckGlError("compaction"); !s.ok()) return s;
  for (uint32_t c : band_counts) result.total += c;
  result.truncated = !o.count_only && result.total > result.returned();
  result.gpu_ns = clock.total_ns();
  return result;
}

}  // namespace glimpse::gpu
