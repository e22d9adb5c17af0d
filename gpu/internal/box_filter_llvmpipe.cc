#include "gpu/internal/box_filter_llvmpipe.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "common/str.h"

namespace glimpse::gpu::box_filter_internal {
namespace {

// Texels of sums one invocation keeps at most (the shader unrolls up to 64): wide aprons leave
// narrower strips, and past this the apron would outweigh the strip.
constexpr int kMaxTexels = 48;
// Output texels per strip: 128 bytes (32 RGBA or 128 grey pixels), enough to spread each strip's
// start-up (its apron and the first window of each row) thin while the sums stay in registers;
// wider strips compile (fully unrolled) for seconds.
constexpr int kStripTexels = 8;
// box_filter_fused_strips.comp unrolls the first window of a row over at most 128 pixels.
constexpr int kMaxRx = 63;
// Invocations to aim for per dispatch (32 workgroups of 8), so that llvmpipe's threads share the
// work evenly.
constexpr int kTargetInvocations = 256;
// A run of rows is at least this many times the 2ry + 1 rows it sums to start: narrow images
// have few strips, and 256 invocations of them would spend more on starting than on output.
constexpr int kMinRowsPerStart = 4;
// Loop iterations one invocation may spend: llvmpipe ends every loop of an invocation once their
// iterations add up to 65535 (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS); the rest is margin.
constexpr int64_t kLoopBudget = 60000;
// Most bytes of the first-window ring (rx a uniform: 16 bytes per invocation and row of its
// window) one dispatch uses: a pass with more invocations runs in parts that take turns with it.
// Runs are at least 4 windows tall, so a pass needs about a 32nd of the image's bytes.
constexpr int64_t kRingBytes = int64_t{32} << 20;

void SetInt(GLuint p, const char* name, int v) { glUniform1i(glGetUniformLocation(p, name), v); }

uint64_t Area(const BoxFilterOptions& o) { return uint64_t(2 * o.rx + 1) * uint64_t(2 * o.ry + 1); }

// Vertical sums of 8-bit samples fit 16-bit fields while the window is at most 257 rows tall:
// the entering row is added before the leaving one is taken away, so 2ry + 2 rows at most.
bool WideVertical(const BoxFilterOptions& o) { return 255 * (2 * int64_t{o.ry} + 2) > 65535; }

// Windows wider than kCompiledMaxRx use the program with rx as a uniform (RUNTIME_RX), up to
// kRuntimeMaxRx (its first-window sums keep a row's bytes of one channel in 16-bit fields: at
// most 65 pixels' worth, far below 2^16 / 255 words).
constexpr int kCompiledMaxRx = 7;
constexpr int kRuntimeMaxRx = kAutoFusedStripsMaxRx;

// Where a strip's sums sit (box_filter_fused_strips.comp). A strip reads `texels` texels per row:
// [dx_a, dx_a + split) and [dx_b, dx_b + texels - split) from its first output texel (with rx a
// uniform, one range: from its trailing array's first texel to its leading array's last, the
// first window's texels between them).
struct StripPlan {
  bool runtime_rx = false;
  int strip = 0;   // output texels per strip
  int texels = 0;  // texels a strip reads (its block of the side image)
  int split = 0, dx_a = 0, dx_b = 0;
  int apron = 0;                       // rx compiled in: texels of sums each side of the strip
  int lead_byte = 0, trail_byte = 0;   // RUNTIME_RX: LEAD_BYTE, TRAIL_BYTE
  int window_texels = 0;               // RUNTIME_RX: texels of a row's first window, from dx_a
  int last_bytes = 0;                  // RUNTIME_RX: its bytes in the last of them (1-16)
  int lo() const { return dx_a; }      // the first texel read, from the strip's first
  int hi() const {                     // one past the last
    return split == texels ? dx_a + texels : std::max(dx_a + split, dx_b + texels - split);
  }
};

bool RuntimeRx(const BoxFilterOptions& o) {
  return o.rx > kCompiledMaxRx && o.rx <= kRuntimeMaxRx && !WideVertical(o);
}

StripPlan PlanStrips(const ImageDesc& d, const BoxFilterOptions& o) {
  StripPlan p;
  const int c = d.channels;
  if (RuntimeRx(o)) {
    // The trailing edge of output byte j's window is A + C bytes before it, the leading edge A
    // bytes after (A = rx * C); each array covers STRIP texels of edges, plus one for the byte
    // where they start within a texel.
    // Each row's first window (of the C bytes before the strip) spans (2 rx + 1) C bytes from the
    // trailing array's first edge.
    const int a = o.rx * c, before = a + c;
    p.runtime_rx = true;
    p.strip = kStripTexels;
    p.dx_a = -int(CeilDiv(before, 16));
    p.trail_byte = 16 * -p.dx_a - before;
    p.dx_b = a / 16;
    p.lead_byte = a % 16;
    p.texels = p.split = p.dx_b + p.strip + 1 - p.dx_a;
    const int window_end = p.trail_byte + (2 * o.rx + 1) * c;  // from the trailing array's first texel
    p.window_texels = int(CeilDiv(window_end, 16));
    p.last_bytes = window_end - 16 * (p.window_texels - 1);
    return p;
  }
  // The windows reach rx pixels beyond the strip, and each row's first window starts one pixel
  // before it.
  p.apron = int(CeilDiv(int64_t{o.rx + 1} * c, 16));
  p.strip = std::clamp(kMaxTexels - 2 * p.apron, 1, kStripTexels);
  p.texels = p.split = p.strip + 2 * p.apron;
  p.dx_a = -p.apron;
  return p;
}

// The strips of a row: the interior ones read only texels wholly inside the row, the rest (the
// first `left` and those from `right0` on) read the side image of their texels.
struct RowStrips {
  int count = 0, left = 0, right0 = 0;
  int edges() const { return left + count - right0; }
};
RowStrips SplitStrips(const ImageDesc& d, const StripPlan& p) {
  RowStrips r;
  const int full = int(d.row_bytes() / 16);
  r.count = int(CeilDiv(PackedTexelsPerRow(d), p.strip));
  r.left = 0;
  while (r.left < r.count && r.left * p.strip + p.lo() < 0) ++r.left;
  r.right0 = r.count;
  while (r.right0 > r.left && (r.right0 - 1) * p.strip + p.hi() > full) --r.right0;
  return r;
}

// Where the side image's texels come from. The side image holds, per row, the strips at the
// row's ends, each with the plan's texels in the order it reads them; each such texel is a texel
// of the row extended past its ends: copied when wholly inside the row, in runs (`copies`), else
// built byte by byte (`bytes`, box_filter_fused_edges.comp).
struct SidePlan {
  struct Run {
    int side = 0, row = 0, texels = 0;  // side image texel, row texel, how many
  };
  std::vector<Run> copies;
  std::vector<int32_t> bytes;  // pairs: side image texel, texel of the extended row
};
SidePlan PlanSide(const ImageDesc& d, const StripPlan& p, const RowStrips& r) {
  const int full = int(d.row_bytes() / 16);
  SidePlan side;
  int e = 0;
  for (int k = 0; k < r.edges(); ++k) {
    const int strip = k < r.left ? k : r.right0 + k - r.left;
    for (int t = 0; t < p.texels; ++t, ++e) {
      const int tx = strip * p.strip + (t < p.split ? p.dx_a + t : p.dx_b + t - p.split);
      if (tx < 0 || tx >= full) {
        side.bytes.insert(side.bytes.end(), {e, tx});
      } else if (!side.copies.empty() && side.copies.back().side + side.copies.back().texels == e &&
                 side.copies.back().row + side.copies.back().texels == tx) {
        ++side.copies.back().texels;
      } else {
        side.copies.push_back({e, tx, 1});
      }
    }
  }
  return side;
}

// Loop iterations of one invocation (every loop whose trip count is not a compile-time constant)
// per row: the row loop, and with rx a uniform the first window's loop, GROUP texels
// (box_filter_fused_strips.comp) at a time, counted over all the window's texels: an upper bound,
// as the loop reads only those past the trailing array.
int64_t RowIterations(const ImageDesc& d, const StripPlan& p) {
  return 1 + (p.runtime_rx ? CeilDiv(p.window_texels, d.channels == 3 ? 3 : 2) : 0);
}
// Starting a run of rows: 2ry + 1 rows.
int64_t InitIterations(const ImageDesc& d, const StripPlan& p, const BoxFilterOptions& o) {
  return (2 * int64_t{o.ry} + 1) * RowIterations(d, p);
}

}  // namespace

std::optional<ExactDivision> PlanExactDivision(uint64_t area, uint64_t max_sum) {
  if (area == 0) return std::nullopt;
  ExactDivision e;
  if (area == 1) {
    // (s + 1) (2^32 - 1) / 2^32 = s + 1 - (s + 1) / 2^32, whose floor is s below 2^32 - 1.
    if (max_sum >= (uint64_t{1} << 32) - 1) return std::nullopt;
    e.half = 1;
    e.mul = 0xFFFFFFFFu;
    return e;
  }
  e.half = uint32_t((area - 1) / 2);
  const uint64_t n_max = max_sum + e.half;
  if (n_max >= (uint64_t{1} << 32)) return std::nullopt;
  // With mul = ceil(2^k / area) = (2^k + err) / area, err < area: n * mul / 2^k = n / area +
  // n * err / (area 2^k), and the fraction of n / area is at most (area - 1) / area, so the floor
  // is exact when n_max * (area - 1) < 2^k; k = 32 + shift, the high word then shifted.
  for (int shift = 0; shift < 31; ++shift) {
    const uint64_t k_pow = uint64_t{1} << (32 + shift);
    if (n_max * (area - 1) >= k_pow) continue;
    const uint64_t mul = (k_pow + area - 1) / area;
    if (mul >= (uint64_t{1} << 32)) return std::nullopt;
    e.mul = uint32_t(mul);
    e.shift = shift;
    return e;
  }
  return std::nullopt;
}

absl::Status FusedStripsSupports(const ImageDesc& d, const BoxFilterOptions& o) {
  if (d.type != SampleType::kUint8) {
    return absl::InvalidArgumentError(
        StrCat("variant fused_strips needs uint8 samples, got ", SampleTypeName(d.type)));
  }
  const StripPlan p = PlanStrips(d, o);
  if (!p.runtime_rx && (2 * p.apron + 1 > kMaxTexels || o.rx > kMaxRx)) {
    const int max_rx = std::min(kMaxRx, (kMaxTexels - 1) / 2 * 16 / d.channels - 1);
    return absl::InvalidArgumentError(StrCat("rx must be at most ", max_rx, " for variant ",
                                             "fused_strips with ", d.channels, " channels, got ",
                                             o.rx));
  }
  if (InitIterations(d, p, o) + RowIterations(d, p) > kLoopBudget) {
    const int64_t max_ry = (kLoopBudget / RowIterations(d, p) - 2) / 2;
    return absl::InvalidArgumentError(StrCat("ry must be at most ", max_ry, " for variant ",
                                             "fused_strips with rx ", o.rx, " and ", d.channels,
                                             " channels, got ", o.ry));
  }
  if (!PlanExactDivision(Area(o), 255 * Area(o))) {
    return absl::InvalidArgumentError(
        StrCat("the window area (2rx+1)(2ry+1) must be below 2^23 for variant fused_strips, got ",
               Area(o)));
  }
  return absl::OkStatus();
}

std::string FusedStripsDefines(const ImageDesc& d, const BoxFilterOptions& o) {
  const StripPlan p = PlanStrips(d, o);
  if (p.runtime_rx) {
    return StrCat(ImageDefines(d), "#define RUNTIME_RX 1\n#define STRIP ", p.strip,
                  "\n#define LEAD_BYTE ", p.lead_byte, "\n#define TRAIL_BYTE ", p.trail_byte,
                  "\n");
  }
  return StrCat(ImageDefines(d), "#define RX ", o.rx, "\n#define STRIP ", p.strip,
                "\n#define APRON ", p.apron, "\n", WideVertical(o) ? "#define WIDEV 1\n" : "");
}

absl::Status RunFusedStrips(Context& ctx, const Image& image, const BoxFilterOptions& o,
                            int64_t binding_bytes, FusedStripsScratch& scratch,
                            const FusedBandSink& band_sink, uint64_t* gpu_ns) {
  const ImageDesc& d = image.desc();
  const int texels = PackedTexelsPerRow(d);
  const int64_t row_bytes = int64_t{texels} * 16;
  const int band = int(std::min<int64_t>(d.height, binding_bytes / row_bytes));
  if (band < 1) {
    return absl::ResourceExhaustedError(StrCat("a row of ", DescribeImage(d), " (", row_bytes,
                                               " bytes) exceeds the storage binding limit of ",
                                               binding_bytes, " bytes"));
  }
  // Images without a packed form (results of other variants, images on GPUs) get one, kept.
  if (absl::Status s = image.EnsurePacked(ctx); !s.ok()) return s;

  const StripPlan plan = PlanStrips(d, o);
  const RowStrips strips = SplitStrips(d, plan);
  absl::StatusOr<GLuint> program = ctx.Program("box_filter_fused_strips", FusedStripsDefines(d, o));
  if (!program.ok()) return program.status();
  absl::StatusOr<GLuint> edges_program = ctx.Program("box_filter_fused_edges", ImageDefines(d));
  if (!edges_program.ok()) return edges_program.status();
  const GLuint p = *program;
  const int border_value = o.border == BorderMode::kConstant ? int(o.border_value) : 0;
  const std::optional<ExactDivision> div = PlanExactDivision(Area(o), 255 * Area(o));

  // The side image, kept across calls, grown when too small.
  const int edge_w = strips.edges() * plan.texels;
  if (scratch.edges_width < edge_w || scratch.edges_height < d.height) {
    scratch.edges_width = std::max(edge_w, scratch.edges_width);
    scratch.edges_height = std::max(d.height, scratch.edges_height);
    scratch.edges = NewRgba32uiTexture(ctx, scratch.edges_width, scratch.edges_height);
    if (absl::Status s = ctx.CheckGlError("allocating the box filter's side image"); !s.ok()) {
      return s;
    }
  }
  // The output buffer, kept likewise: a fresh one costs a page fault per 4 KiB on first touch.
  const size_t buf_bytes = size_t(row_bytes) * size_t(band);
  if (scratch.out.bytes() < buf_bytes) scratch.out = Buffer::Create(buf_bytes);
  const Buffer& buf = scratch.out;

  // Rows per invocation: enough invocations to share out (fewer strips, more runs of rows), but
  // each run starts by summing 2ry + 1 rows, so at least kMinRowsPerStart times that where the
  // image has them; within the loop budget.
  // The strips at the rows' ends are few: two workgroups' worth of runs (one per thread) keeps
  // their runs long, so that summing 2ry + 1 rows to start each does not outweigh them.
  const auto rows_for = [&](int strip_count, int target_invocations) {
    const int runs = int(CeilDiv(target_invocations, strip_count));
    const int least = std::min(band, std::max(16, kMinRowsPerStart * (2 * o.ry + 1)));
    const int rows = std::max(int(CeilDiv(band, runs)), least);
    return int(std::clamp<int64_t>(
        (kLoopBudget - InitIterations(d, plan, o)) / RowIterations(d, plan), 1, rows));
  };
  int rows_interior = rows_for(std::max(1, strips.right0 - strips.left), kTargetInvocations);
  int rows_edges = rows_for(strips.edges(), 16);
  if (o.fused_rows > 0) rows_interior = rows_edges = std::min(o.fused_rows, band);

  Buffer cut = Buffer::Create(4);
  const SidePlan side = PlanSide(d, plan, strips);
  const Buffer side_bytes =
      side.bytes.empty() ? Buffer() : Buffer::Create(side.bytes.size() * 4, side.bytes.data());
  std::optional<GpuTimer> timer(std::in_place);
  // The side image, every row at once: the texels inside the row copied, the others built.
  for (const SidePlan::Run& run : side.copies) {
    glCopyImageSubData(image.packed_texture(), GL_TEXTURE_2D, 0, run.row, 0, 0,
                       scratch.edges.get(), GL_TEXTURE_2D, 0, run.side, 0, 0, run.texels, d.height,
                       1);
  }
  if (!side.bytes.empty()) {
    glUseProgram(*edges_program);
    image.BindPacked(0);
    glBindImageTexture(1, scratch.edges.get(), 0, GL_FALSE, 0, GL_WRITE_ONLY, GL_RGBA32UI);
    side_bytes.BindBase(2);
    const GLuint e = *edges_program;
    glUniform2i(glGetUniformLocation(e, "u_size"), d.width, d.height);
    SetInt(e, "u_border", ShaderBorder(o.border));
    glUniform1ui(glGetUniformLocation(e, "u_const"), GLuint(border_value));
    SetInt(e, "u_count", int(side.bytes.size() / 2));
    glDispatchCompute(GLuint(CeilDiv(d.height, 8)), 1, 1);
  }
  glMemoryBarrier(GL_SHADER_IMAGE_ACCESS_BARRIER_BIT);

  // The program's uniforms for every band and try (GL keeps them with the program).
  glUseProgram(p);
  glUniform2i(glGetUniformLocation(p, "u_size"), d.width, d.height);
  SetInt(p, "u_ry", o.ry);
  SetInt(p, "u_border", ShaderBorder(o.border));
  glUniform1ui(glGetUniformLocation(p, "u_const"), GLuint(border_value));
  SetInt(p, "u_row_texels", texels);
  SetInt(p, "u_row_bytes", int(d.row_bytes()));
  glUniform1ui(glGetUniformLocation(p, "u_mul"), div->mul);
  SetInt(p, "u_shift", div->shift);
  glUniform1ui(glGetUniformLocation(p, "u_half"), div->half);
  SetSampleBits(p, d);
  SetInt(p, "u_two", 2);
  SetInt(p, "u_trail_dx", plan.dx_a);
  SetInt(p, "u_lead_dx", plan.dx_b);
  SetInt(p, "u_texels", plan.texels);
  SetInt(p, "u_window_texels", plan.window_texels);
  {
    GLuint mask[4];
    for (int q = 0; q < 4; ++q) {
      const int keep = std::clamp(plan.last_bytes - 4 * q, 0, 4);
      mask[q] = keep == 4 ? 0xFFFFFFFFu : (1u << (8 * keep)) - 1u;
    }
    glUniform4uiv(glGetUniformLocation(p, "u_last_mask"), 1, mask);
  }
  buf.BindBase(1);
  cut.BindBase(2);

  for (int y0 = 0; y0 < d.height; y0 += band) {
    const int h = std::min(band, d.height - y0);
    for (;;) {
      if (!timer) timer.emplace();
      cut.Zero();
      SetInt(p, "u_band0", y0);
      SetInt(p, "u_band_rows", h);
      // The interior strips from the image, then the strips at the row's ends from the side image.
      struct Pass {
        int strip_count, strip0, left, edges, rows;
        GLuint texture;
      };
      const Pass passes[] = {
          {strips.right0 - strips.left, strips.left, 0, 0, rows_interior, image.packed_texture()},
          {strips.edges(), strips.right0, strips.left, 1, rows_edges, scratch.edges.get()}};
      for (const Pass& pass : passes) {
        if (pass.strip_count == 0) continue;
        glBindImageTexture(0, pass.texture, 0, GL_FALSE, 0, GL_READ_ONLY, GL_RGBA32UI);
        SetInt(p, "u_strips", pass.strip_count);
        SetInt(p, "u_strip0", pass.strip0);
        SetInt(p, "u_left", pass.left);
        SetInt(p, "u_edges", pass.edges);
        SetInt(p, "u_rows", pass.rows);
        const int64_t invocations = int64_t{pass.strip_count} * CeilDiv(h, pass.rows);
        // With rx a uniform, each invocation keeps 2ry + 1 ring slots: a pass whose ring would
        // pass kRingBytes (or the binding limit) runs in parts, one after another on the ring.
        int64_t part = invocations;
        if (plan.runtime_rx) {
          const int64_t slot_bytes = 16 * (2 * int64_t{o.ry} + 1);
          const int64_t ring_bytes = std::min(kRingBytes, binding_bytes);
          part = std::max<int64_t>(8, ring_bytes / slot_bytes / 8 * 8);
          const size_t need = size_t(std::min(part, CeilDiv(invocations, 8) * 8) * slot_bytes);
          if (scratch.ring.bytes() < need) scratch.ring = Buffer::Create(need);
          scratch.ring.BindBase(3);
        }
        for (int64_t first = 0; first < invocations; first += part) {
          if (plan.runtime_rx) glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);  // the ring's turn
          SetInt(p, "u_inv0", int(first));
          glDispatchCompute(GLuint(CeilDiv(std::min(part, invocations - first), 8)), 1, 1);
        }
      }
      // An invocation cut short by the loop limit (Mesa builds other than those measured may
      // unroll less) leaves wrong rows: run the band again with shorter runs of rows.
      uint32_t cut_count = 0;
      glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
      cut.Read(0, 4, &cut_count);
      *gpu_ns += timer->StopAndRead();
      timer.reset();
      if (cut_count == 0) break;
      if (rows_interior == 1 && rows_edges == 1) {
        return absl::InternalError(StrCat("box filter (fused strips): ", cut_count,
                                          " invocations ran out of loop "
                                          "iterations with one row each"));
      }
      rows_interior = (rows_interior + 1) / 2;
      rows_edges = (rows_edges + 1) / 2;
    }
    glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT | GL_PIXEL_BUFFER_BARRIER_BIT);
    if (absl::Status s = band_sink(buf, y0, h); !s.ok()) return s;
  }
  glUseProgram(0);
  return ctx.CheckGlError("box filter (fused strips)");
}

}  // namespace glimpse::gpu::box_filter_internal
