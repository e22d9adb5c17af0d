#include "gpu/internal/histogram_private_array.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/str.h"

namespace glimpse::gpu::internal {
namespace {

// Invocations (rows in flight) of the counting pass: enough workgroups of 8 for every renderer
// thread to take several, few enough that zeroing and writing out the arrays stays negligible.
constexpr int kInvocations = 64;
// Each invocation zeroes and writes out its whole counter arrays whatever its share of the rows,
// and llvmpipe writes storage one SIMD lane at a time: for a small image that is most of the
// work (a 256x256 RGB image's 256 bins of 3 channels: 49 K partial words written by 64
// invocations for 197 K samples counted). So an invocation takes at least this many pixels.
constexpr int64_t kPixelsPerInvocation = 4096;
constexpr int kGroupSize = 8;  // histogram_private_array.comp's local_size_x

int SourceDefine(const ImageDesc& desc, HistogramSource s) {
  switch (s) {
    case HistogramSource::kChannel:
      return desc.channels == 1 ? 1 : 0;  // 1 channel: as "all"
    case HistogramSource::kAllChannels:
      return 1;
    case HistogramSource::kLuma:
      return 2;
    case HistogramSource::kRgbMean:
      break;
  }
  return 3;
}

std::optional<KeyArithmetic> FindKeyArithmeticFrom(const std::vector<int32_t>& table,
                                                   int64_t origin) {
  const auto first = std::find_if(table.begin(), table.end(), [](int32_t b) { return b >= 0; });
  if (first == table.end()) return KeyArithmetic{};  // no key is counted
  const auto end = std::find_if(first, table.end(), [](int32_t b) { return b < 0; });
  if (std::any_of(end, table.end(), [](int32_t b) { return b >= 0; })) return std::nullopt;
  const int64_t begin_key = first - table.begin(), end_key = end - table.begin();
  // Keys in [origin, begin_key) would pass the shader's range check: there must be none.
  if (origin > begin_key || (origin < begin_key && begin_key > 0)) origin = begin_key;
  const int64_t max_d = end_key - 1 - origin;
  const int64_t max_mul = max_d > 0 ? int64_t{0xffffffff} / max_d : int64_t{0xffffffff};
  // mul works for shift s iff t(d) * 2^s <= d * mul < (t(d) + 1) * 2^s for every key's offset d.
  for (uint32_t s = 0; s < 32; ++s) {
    const int64_t one = int64_t{1} << s;
    int64_t lo = 0, hi = max_mul;
    for (int64_t key = begin_key; key < end_key && lo <= hi; ++key) {
      const int64_t d = key - origin, t = table[size_t(key)];
      if (d == 0) {
        if (t != 0) lo = hi + 1;
        continue;
      }
      lo = std::max(lo, (t * one + d - 1) / d);
      hi = std::min(hi, ((t + 1) * one - 1) / d);
    }
    if (lo <= hi) {
      KeyArithmetic k{uint32_t(origin), uint32_t(end_key - origin), uint32_t(lo), s};
      // Where every key is counted from 0, a shift alone may do (e.g. 1 bin: mul 0 above). Its
      // only candidate: bin 1 starts at key 2^shift, or, with one bin, every key is below it.
      if (origin == 0 && end_key == int64_t(table.size())) {
        const auto bin1 = std::find(table.begin(), table.end(), 1);
        const uint64_t bin1_key = uint64_t(bin1 - table.begin());
        const int shift = bin1 != table.end() ? std::countr_zero(bin1_key)
                                              : std::bit_width(uint64_t(end_key - 1));
        bool all = bin1 == table.end() || std::has_single_bit(bin1_key);
        for (int64_t key = 0; key < end_key && all; ++key)
          all = (key >> shift) == table[size_t(key)];
        if (all) {
          k.mul = 1;
          k.shift = uint32_t(shift);
          k.shift_only = true;
        }
      }
      return k;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<KeyArithmetic> FindKeyArithmetic(const HistogramOptions& o,
                                               const std::vector<int32_t>& table) {
  // Integer bounds below zero put key 0 past bin 0: offsets count from the lower bound (in keys,
  // so times 3 for the RGB mean, keyed on R+G+B); otherwise from the first counted key.
  const int64_t scale = o.source == HistogramSource::kRgbMean ? 3 : 1;
  const double lo = o.lo.value_or(0);
  const int64_t origin = lo == std::floor(lo) && lo > -1e9 && lo <= 0 ? int64_t(lo) * scale : 0;
  return FindKeyArithmeticFrom(table, origin);
}

const std::optional<KeyArithmetic>& IntegerBins::key() const {
  std::call_once(key_once, [this] { key_ = FindKeyArithmetic(options, table); });
  return key_;
}

std::shared_ptr<const IntegerBins> CachedIntegerBins(SampleType type, const HistogramOptions& o) {
  // What BuildIntegerBinTable and FindKeyArithmetic read of the options, and the type.
  struct Entry {
    SampleType type;
    bool mean;
    double lo, hi;
    int bins;
    std::shared_ptr<const IntegerBins> value;
    uint64_t used;
  };
  constexpr size_t kKept = 8;  // at most 8 x 786 KB (16-bit RGB mean tables)
  static std::mutex mu;
  static std::vector<Entry> entries;
  static uint64_t clock = 0;
  const bool mean = o.source == HistogramSource::kRgbMean;
  const double lo = *o.lo, hi = *o.hi;
  std::lock_guard<std::mutex> lock(mu);
  for (Entry& e : entries) {
    if (e.type == type && e.mean == mean && e.lo == lo && e.hi == hi && e.bins == o.bins) {
      e.used = ++clock;
      return e.value;
    }
  }
  auto bins = std::make_shared<IntegerBins>();
  bins->options = o;
  bins->table = BuildIntegerBinTable({1, 1, 1, type}, o);
  if (entries.size() == kKept) {
    entries.erase(std::min_element(entries.begin(), entries.end(),
                                   [](const Entry& a, const Entry& b) { return a.used < b.used; }));
  }
  entries.push_back({type, mean, lo, hi, o.bins, bins, ++clock});
  return bins;
}

void BindIntegerBins(const std::shared_ptr<const IntegerBins>& bins, HistogramBuffers& buffers) {
  const size_t bytes = bins->table.size() * sizeof(int32_t);
  const bool fresh = !buffers.table || buffers.table.bytes() < bytes;
  const Buffer& table = Buffer::AtLeast(buffers.table, bytes);
  if (fresh || buffers.table_holds != bins) {
    table.Upload(0, bytes, bins->table.data());
    buffers.table_holds = bins;
  }
  table.BindBase(1);
}

int PrivateArrayHistWords(int hists, int bins) {
  return bins <= kPrivateArraySmallBins ? kPrivateArraySmallBins : kMaxPrivateArrayWords / hists;
}

KeyBinning KeyBinningFor(const std::optional<KeyArithmetic>& key) {
  return !key ? KeyBinning::kTable : key->shift_only ? KeyBinning::kShift : KeyBinning::kArithmetic;
}

KeyBinning PrivateArrayBinning(SampleType type, KeyBinning integer_binning) {
  return type == SampleType::kFloat32 ? KeyBinning::kArithmetic : integer_binning;
}

std::string PrivateArrayDefines(const ImageDesc& desc, HistogramSource source, int bins,
                                KeyBinning binning) {
  const int hists = source == HistogramSource::kAllChannels ? desc.channels : 1;
  binning = PrivateArrayBinning(desc.type, binning);  // float: one program whatever `binning`
  return StrCat(ImageDefines(desc), "#define SOURCE ", SourceDefine(desc, source),
                "\n#define HIST_WORDS ", PrivateArrayHistWords(hists, bins), "\n",
                binning == KeyBinning::kTable   ? "#define KEY_TABLE 1\n"
                : binning == KeyBinning::kShift ? "#define KEY_SHIFT 1\n"
                                                : "");
}

int PrivateArrayInvocations(const ImageDesc& desc) {
  // No more invocations than rows (rounded up to whole workgroups): idle ones would still write.
  const int64_t wanted = std::max<int64_t>(1, desc.pixels() / kPixelsPerInvocation);
  return int(std::min<int64_t>({kInvocations, CeilDiv(desc.height, kGroupSize) * kGroupSize,
                                CeilDiv(wanted, kGroupSize) * kGroupSize}));
}

absl::StatusOr<PrivateArrayCounts> RunPrivateArray(Context& ctx, const Image& image,
                                                   const HistogramOptions& o, int hists,
                                                   HistogramBuffers& buffers) {
  if (absl::Status s = image.EnsurePacked(ctx); !s.ok()) return s;
  const AtlasImage one{0, image.desc().width, image.desc().height};
  return RunPrivateArrayAtlas(ctx, image.packed_texture(), image.desc(), {&one, 1}, o, hists,
                              buffers);
}

absl::StatusOr<PrivateArrayCounts> RunPrivateArrayAtlas(Context& ctx, GLuint packed,
                                                        const ImageDesc& format,
                                                        std::span<const AtlasImage> images,
                                                        const HistogramOptions& o, int hists,
                                                        HistogramBuffers& buffers) {
  const ImageDesc& desc = format;
  std::shared_ptr<const IntegerBins> bins;
  std::optional<KeyArithmetic> key;
  if (desc.type != SampleType::kFloat32) {
    bins = CachedIntegerBins(desc.type, o);
    key = bins->key();
  }
  const KeyBinning binning = PrivateArrayBinning(desc.type, KeyBinningFor(key));
  const bool key_table = binning == KeyBinning::kTable;
  absl::StatusOr<GLuint> count_program =
      ctx.Program("histogram_private_array", PrivateArrayDefines(desc, o.source, o.bins, binning));
  if (!count_program.ok()) return count_program.status();

  const int words = hists * o.bins;
  // Each image gets the invocations it would get alone, in whole workgroups: a segment per
  // workgroup (its image's rows), a [first, end) range per image.
  std::vector<int32_t> segments, ranges;
  int invocations = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const AtlasImage& im = images[i];
    const int n = PrivateArrayInvocations({im.width, im.height, desc.channels, desc.type});
    ranges.insert(ranges.end(), {invocations, invocations + n});
    for (int g = 0; g < n / kGroupSize; ++g) {
      segments.insert(segments.end(), {im.y0, im.height, im.width * desc.channels, int32_t(i)});
    }
    invocations += n;
  }
  const Buffer& partials =
      Buffer::AtLeast(buffers.partials, size_t(invocations) * size_t(words) * sizeof(uint32_t));
  const Buffer& segment_buffer =
      Buffer::AtLeast(buffers.segments, segments.size() * sizeof(int32_t));
  segment_buffer.Upload(0, segments.size() * sizeof(int32_t), segments.data());
  const Buffer& range_buffer = Buffer::AtLeast(buffers.ranges, ranges.size() * sizeof(int32_t));
  range_buffer.Upload(0, ranges.size() * sizeof(int32_t), ranges.data());
  const GLuint prog = *count_program;
  glUseProgram(prog);
  if (key_table) {
    BindIntegerBins(bins, buffers);
  } else if (key) {
    glUniform1ui(glGetUniformLocation(prog, "u_key_base"), key->base);
    glUniform1ui(glGetUniformLocation(prog, "u_key_range"), key->range);
    glUniform1ui(glGetUniformLocation(prog, "u_key_mul"), key->mul);
    glUniform1ui(glGetUniformLocation(prog, "u_key_shift"), key->shift);
  }
  glBindImageTexture(0, packed, 0, GL_FALSE, 0, GL_READ_ONLY, GL_RGBA32UI);
  partials.BindBase(2);
  segment_buffer.BindBase(3);
  range_buffer.BindBase(4);
  glUniform1i(glGetUniformLocation(prog, "u_bins"), o.bins);
  glUniform1i(glGetUniformLocation(prog, "u_channel"), o.channel);
  glUniform1d(glGetUniformLocation(prog, "u_lo"), *o.lo);
  glUniform1d(glGetUniformLocation(prog, "u_hi"), *o.hi);
  glUniform1d(glGetUniformLocation(prog, "u_scale"), double(o.bins) / (*o.hi - *o.lo));
  glUniform1i(glGetUniformLocation(prog, "u_words"), words);

  PrivateArrayCounts result;
  GpuTimer timer;
  glDispatchCompute(GLuint(invocations / kGroupSize), 1, 1);
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  result.gpu_ns = timer.StopAndRead();
  glUseProgram(0);
  glBindImageTexture(0, 0, 0, GL_FALSE, 0, GL_READ_ONLY, GL_RGBA32UI);

  // Each image's partials added up here, from the mapped buffer: on a CPU renderer, for which
  // this variant is made, a second dispatch to add them cost more than the adding (its threads
  // woken again for a few thousand loads each; 64x64 RGB took 0.147 ms with it).
  result.counts.assign(images.size() * size_t(words), 0);
  const bool mapped = partials.ReadMapped(
      0, size_t(invocations) * size_t(words) * sizeof(uint32_t), [&](const uint8_t* p) {
        for (size_t i = 0; i < images.size(); ++i) {
          uint32_t* sum = &result.counts[i * size_t(words)];
          for (int32_t inv = ranges[2 * i]; inv < ranges[2 * i + 1]; ++inv) {
            const uint8_t* row = p + size_t(inv) * size_t(words) * sizeof(uint32_t);
            for (int k = 0; k < words; ++k) {
              uint32_t v;
              std::memcpy(&v, row + size_t(k) * sizeof(uint32_t), sizeof(v));
              sum[k] += v;  // exact: an image has fewer than 2^32 pixels
            }
          }
        }
      });
  if (!mapped) return ctx.MapError("the histogram's partial counts");
  if (absl::Status s = ctx.CheckGlError("histogram private_array"); !s.ok()) return s;
  return result;
}

}  // namespace glimpse::gpu::internal
