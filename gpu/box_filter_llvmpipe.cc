#include "gpu/box_filter_llvmpipe.h"

#include <algorithm>

#include "gpu/str.h"

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
// Workgroups to aim for per dispatch, so that llvmpipe's threads share the work evenly.
constexpr int kTargetGroups = 32;
// Loop iterations one invocation may spend: llvmpipe ends every loop of an invocation once their
// iterations add up to 65535 (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS); the rest is margin.
constexpr int64_t kLoopBudget = 60000;

void SetInt(GLuint p, const char* name, int v) { glUniform1i(glGetUniformLocation(p, name), v); }

uint64_t Area(const BoxFilterOptions& o) { return uint64_t(2 * o.rx + 1) * uint64_t(2 * o.ry + 1); }

// Vertical sums of 8-bit samples fit 16-bit fields while the window is at most 257 rows tall:
// the entering row is added before the leaving one is taken away, so 2ry + 2 rows at most.
bool WideVertical(const BoxFilterOptions& o) { return 255 * (2 * int64_t{o.ry} + 2) > 65535; }

struct StripPlan {
  int apron = 0;  // texels of sums each side of a strip
  int strip = 0;  // output texels per strip
  int n() const { return strip + 2 * apron; }
};

// The windows reach rx pixels beyond the strip, and each row's first window starts one pixel
// before it.
StripPlan PlanStrips(const ImageDesc& d, const BoxFilterOptions& o) {
  StripPlan p;
  p.apron = int(CeilDiv(int64_t{o.rx + 1} * d.channels, 16));
  p.strip = std::clamp(kMaxTexels - 2 * p.apron, 1, kStripTexels);
  return p;
}

// Loop iterations of one invocation, counting every loop whose trip count is not a compile-time
// constant and the per-byte loop of each texel as if every texel lay past the row's ends and the
// compiler kept that loop rolled: starting a run of rows (2ry + 1 rows), then per output row.
int64_t InitIterations(const BoxFilterOptions& o, const StripPlan& p) {
  return (2 * int64_t{o.ry} + 1) * (1 + 17 * p.n());
}
int64_t RowIterations(const StripPlan& p) { return 4 + 34 * p.n(); }

}  // namespace

std::optional<ExactDivision> PlanExactDivision(uint64_t area, uint64_t max_sum) {
  if (area == 0) return std::nullopt;
  ExactDivision e;
  e.half = uint32_t((area - 1) / 2);
  const uint64_t n_max = max_sum + e.half;
  if (n_max >= (uint64_t{1} << 32)) return std::nullopt;
  // With mul = ceil(2^k / area) = (2^k + err) / area, err < area: n * mul / 2^k = n / area +
  // n * err / (area 2^k), and the fraction of n / area is at most (area - 1) / area, so the floor
  // is exact when n_max * (area - 1) < 2^k.
  int k = 0;
  while (k < 63 && (uint64_t{1} << k) <= n_max * (area - 1)) ++k;
  const uint64_t mul = ((uint64_t{1} << k) + area - 1) / area;
  if (k >= 63 || mul >= (uint64_t{1} << 32)) return std::nullopt;
  e.mul = uint32_t(mul);
  e.shift = k;
  e.mul32 = n_max * mul < (uint64_t{1} << 32);
  return e;
}

absl::Status FusedStripsSupports(const ImageDesc& d, const BoxFilterOptions& o) {
  if (d.type != SampleType::kUint8) {
    return absl::InvalidArgumentError(
        StrCat("variant fused_strips needs uint8 samples, got ", SampleTypeName(d.type)));
  }
  const StripPlan p = PlanStrips(d, o);
  if (2 * p.apron + 1 > kMaxTexels || o.rx > kMaxRx) {
    const int max_rx = std::min(kMaxRx, (kMaxTexels - 1) / 2 * 16 / d.channels - 1);
    return absl::InvalidArgumentError(StrCat("rx must be at most ", max_rx, " for variant ",
                                             "fused_strips with ", d.channels, " channels, got ",
                                             o.rx));
  }
  if (InitIterations(o, p) + RowIterations(p) > kLoopBudget) {
    const int64_t max_ry = ((kLoopBudget - RowIterations(p)) / (1 + 17 * p.n()) - 1) / 2;
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
  return StrCat(ImageDefines(d), "#define RX ", o.rx, "\n#define STRIP ", p.strip,
                "\n#define APRON ", p.apron, "\n", WideVertical(o) ? "#define WIDEV 1\n" : "");
}

absl::Status RunFusedStrips(Context& ctx, const Image& image, const BoxFilterOptions& o,
                            int64_t binding_bytes, Buffer& scratch, Image& out, uint64_t* gpu_ns) {
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
  const Image* src = &image;

  const StripPlan plan = PlanStrips(d, o);
  absl::StatusOr<GLuint> program = ctx.Program("box_filter_fused_strips", FusedStripsDefines(d, o));
  if (!program.ok()) return program.status();
  const GLuint p = *program;
  const int full = int(d.row_bytes() / 16);  // texels wholly inside a row
  const int groups_x = int(CeilDiv(CeilDiv(texels, plan.strip), 8));
  // Rows per invocation: enough workgroups to share out, but each run of rows starts by summing
  // 2ry + 1 rows, so not fewer rows than that where the image has them; within the loop budget.
  const int chunks = int(CeilDiv(kTargetGroups, groups_x));
  int rows = std::max(int(CeilDiv(band, chunks)), std::min(band, std::max(16, 2 * o.ry + 1)));
  rows = int(
      std::clamp<int64_t>((kLoopBudget - InitIterations(o, plan)) / RowIterations(plan), 1, rows));
  if (o.fused_rows > 0) rows = std::min(o.fused_rows, band);
  const std::optional<ExactDivision> div = PlanExactDivision(Area(o), 255 * Area(o));

  // The scratch buffer outlives the call: a fresh one costs a page fault per 4 KiB on first touch.
  const size_t buf_bytes = size_t(row_bytes) * size_t(band);
  if (scratch.bytes() < buf_bytes) scratch = Buffer::Create(buf_bytes);
  const Buffer& buf = scratch;
  Buffer cut = Buffer::Create(4);
  GpuTimer timer;
  for (;;) {
    cut.Zero();
    src->BindPacked(0);
    buf.BindBase(1);
    cut.BindBase(2);
    glUseProgram(p);
    glUniform2i(glGetUniformLocation(p, "u_size"), d.width, d.height);
    SetInt(p, "u_ry", o.ry);
    SetInt(p, "u_border", ShaderBorder(o.border));
    glUniform1ui(glGetUniformLocation(p, "u_const"),
                 o.border == BorderMode::kConstant ? GLuint(o.border_value) : 0u);
    SetInt(p, "u_row_texels", texels);
    SetInt(p, "u_row_bytes", int(d.row_bytes()));
    SetInt(p, "u_full_texels", full);
    SetInt(p, "u_rows", rows);
    glUniform1ui(glGetUniformLocation(p, "u_mul"), div->mul);
    SetInt(p, "u_shift", div->shift);
    glUniform1ui(glGetUniformLocation(p, "u_half"), div->half);
    SetInt(p, "u_mul32", div->mul32 ? 1 : 0);
    SetInt(p, "u_two", 2);
    SetInt(p, "u_sixteen", 16);
    for (int y0 = 0; y0 < d.height; y0 += band) {
      const int h = std::min(band, d.height - y0);
      glUseProgram(p);
      SetInt(p, "u_band0", y0);
      SetInt(p, "u_band_rows", h);
      glDispatchCompute(GLuint(groups_x), GLuint(CeilDiv(h, rows)), 1);
      if (absl::Status s = out.CopyPackedRowsFromBuffer(ctx, buf, 0, y0, h); !s.ok()) return s;
    }
    // An invocation cut short by the loop limit (Mesa builds other than those measured may
    // unroll less) leaves wrong rows: run again with shorter runs of rows.
    uint32_t cut_count = 0;
    glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, cut.get());
    glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, 4, &cut_count);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
    if (cut_count == 0) break;
    if (rows == 1) {
      return absl::InternalError(StrCat("box filter (fused strips): ", cut_count,
                                        " invocations ran out of loop "
                                        "iterations with one row each"));
    }
    rows = (rows + 1) / 2;
  }
  *gpu_ns += timer.StopAndRead();
  glUseProgram(0);
  return ctx.CheckGlError("box filter (fused strips)");
}

}  // namespace glimpse::gpu::box_filter_internal
