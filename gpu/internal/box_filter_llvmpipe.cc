// RunFusedStrips: the side image, then each band of rows through the fused program (the interior
// strips from the image, those at the rows' ends from the side image), retried with shorter runs
// of rows where an invocation ran out of loop iterations.
#include "gpu/internal/box_filter_llvmpipe.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "common/str.h"
#include "gpu/internal/uniforms.h"

namespace glimpse::gpu::box_filter_internal {
namespace {

// Rows per band: as many as the output buffer's binding holds, or why not even one fits.
absl::StatusOr<int> BandRows(const ImageDesc& d, int64_t binding_bytes) {
  const int64_t row_bytes = int64_t{PackedTexelsPerRow(d)} * 16;
  const int band = int(std::min<int64_t>(d.height, binding_bytes / row_bytes));
  if (band < 1) {
    return absl::ResourceExhaustedError(StrCat("a row of ", DescribeImage(d), " (", row_bytes,
                                               " bytes) exceeds the storage binding limit of ",
                                               binding_bytes, " bytes"));
  }
  return band;
}

// The side image (edge_w x height texels) and the output buffer (buf_bytes), kept across calls in
// `scratch`, grown when too small: a fresh buffer costs a page fault per 4 KiB on first touch.
absl::Status GrowScratch(Context& ctx, FusedStripsScratch& scratch, int edge_w, int height,
                         size_t buf_bytes) {
  // The side image, kept across calls, grown when too small.
  if (scratch.edges_width < edge_w || scratch.edges_height < height) {
    scratch.edges_width = std::max(edge_w, scratch.edges_width);
    scratch.edges_height = std::max(height, scratch.edges_height);
    scratch.edges = NewRgba32uiTexture(ctx, scratch.edges_width, scratch.edges_height);
    if (absl::Status s = ctx.CheckGlError("allocating the box filter's side image"); !s.ok()) {
      return s;
    }
  }
  // The output buffer, kept likewise: a fresh one costs a page fault per 4 KiB on first touch.
  if (scratch.out.bytes() < buf_bytes) scratch.out = Buffer::Create(buf_bytes);
  return absl::OkStatus();
}

// Rows per invocation: enough invocations to share out (fewer strips, more runs of rows), but
// each run starts by summing 2ry + 1 rows, so at least kMinRowsPerStart times that where the
// image has them; within the loop budget.
int RowsPerRun(const ImageDesc& d, const BoxFilterOptions& o, const StripPlan& plan, int band,
               int strip_count, int target_invocations) {
  const int runs = int(CeilDiv(target_invocations, strip_count));
  const int least = std::min(band, std::max(16, kMinRowsPerStart * (2 * o.ry + 1)));
  const int rows = std::max(int(CeilDiv(band, runs)), least);
  return int(std::clamp<int64_t>(
      (kLoopBudget - InitIterations(d, plan, o)) / RowIterations(d, plan), 1, rows));
}

// The side image, every row at once: the texels inside the row copied, the others built.
void BuildSideImage(const Image& image, const SidePlan& side, const Buffer& side_bytes,
                    GLuint edges_program, const GlTexture& edges, const BoxFilterOptions& o,
                    int border_value) {
  const ImageDesc& d = image.desc();
  for (const SidePlan::Run& run : side.copies) {
    glCopyImageSubData(image.packed_texture(), GL_TEXTURE_2D, 0, run.row, 0, 0, edges.get(),
                       GL_TEXTURE_2D, 0, run.side, 0, 0, run.texels, d.height, 1);
  }
  if (!side.bytes.empty()) {
    glUseProgram(edges_program);
    image.BindPacked(0);
    glBindImageTexture(1, edges.get(), 0, GL_FALSE, 0, GL_WRITE_ONLY, GL_RGBA32UI);
    side_bytes.BindBase(2);
    const GLuint e = edges_program;
    glUniform2i(glGetUniformLocation(e, "u_size"), d.width, d.height);
    SetInt(e, "u_border", ShaderBorder(o.border));
    glUniform1ui(glGetUniformLocation(e, "u_const"), GLuint(border_value));
    SetInt(e, "u_count", int(side.bytes.size() / 2));
    glDispatchCompute(GLuint(CeilDiv(d.height, 8)), 1, 1);
  }
  glMemoryBarrier(GL_SHADER_IMAGE_ACCESS_BARRIER_BIT);
}

// The program's uniforms for every band and try (GL keeps them with the program).
void SetStripUniforms(GLuint p, const ImageDesc& d, const BoxFilterOptions& o,
                      const StripPlan& plan, int border_value, const ExactDivision& div) {
  glUseProgram(p);
  glUniform2i(glGetUniformLocation(p, "u_size"), d.width, d.height);
  SetInt(p, "u_ry", o.ry);
  SetInt(p, "u_border", ShaderBorder(o.border));
  glUniform1ui(glGetUniformLocation(p, "u_const"), GLuint(border_value));
  SetInt(p, "u_row_texels", PackedTexelsPerRow(d));
  SetInt(p, "u_row_bytes", int(d.row_bytes()));
  glUniform1ui(glGetUniformLocation(p, "u_mul"), div.mul);
  SetInt(p, "u_shift", div.shift);
  glUniform1ui(glGetUniformLocation(p, "u_half"), div.half);
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
}

// What every band of one run uses.
struct FusedRun {
  const Image& image;
  const BoxFilterOptions& o;
  const StripPlan& plan;
  const RowStrips& strips;
  GLuint program;
  int64_t binding_bytes;
  FusedStripsScratch& scratch;
  const Buffer& cut;  // the count of invocations cut short by the loop limit
};

// One pass over a band: strip_count strips from strip0 (the side image's strips from `left`
// where `edges`), runs of `rows` rows, reading `texture`.
struct Pass {
  int strip_count, strip0, left, edges, rows;
  GLuint texture;
};

void DispatchPass(const FusedRun& run, const Pass& pass, int h) {
  const GLuint p = run.program;
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
  if (run.plan.runtime_rx) {
    const int64_t slot_bytes = 16 * (2 * int64_t{run.o.ry} + 1);
    const int64_t ring_bytes = std::min(kRingBytes, run.binding_bytes);
    part = std::max<int64_t>(8, ring_bytes / slot_bytes / 8 * 8);
    const size_t need = size_t(std::min(part, CeilDiv(invocations, 8) * 8) * slot_bytes);
    if (run.scratch.ring.bytes() < need) run.scratch.ring = Buffer::Create(need);
    run.scratch.ring.BindBase(3);
  }
  for (int64_t first = 0; first < invocations; first += part) {
    if (run.plan.runtime_rx) glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);  // the ring's turn
    SetInt(p, "u_inv0", int(first));
    glDispatchCompute(GLuint(CeilDiv(std::min(part, invocations - first), 8)), 1, 1);
  }
}

// Rows [y0, y0 + h) into the output buffer, tried until no invocation is cut short, halving the
// runs of rows (*rows_interior, *rows_edges, kept for the later bands) after each cut. `timer`,
// when set, already times this band's first try.
absl::Status FilterBand(const FusedRun& run, int y0, int h, int* rows_interior, int* rows_edges,
                        std::optional<GpuTimer>& timer, uint64_t* gpu_ns) {
  const GLuint p = run.program;
  const RowStrips& strips = run.strips;
  for (;;) {
    if (!timer) timer.emplace();
    run.cut.Zero();
    SetInt(p, "u_band0", y0);
    SetInt(p, "u_band_rows", h);
    // The interior strips from the image, then the strips at the row's ends from the side image.
    const Pass passes[] = {
        {strips.right0 - strips.left, strips.left, 0, 0, *rows_interior,
         run.image.packed_texture()},
        {strips.edges(), strips.right0, strips.left, 1, *rows_edges, run.scratch.edges.get()}};
    for (const Pass& pass : passes) {
      if (pass.strip_count == 0) continue;
      DispatchPass(run, pass, h);
    }
    // An invocation cut short by the loop limit (Mesa builds other than those measured may
    // unroll less) leaves wrong rows: run the band again with shorter runs of rows.
    uint32_t cut_count = 0;
    glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
    run.cut.Read(0, 4, &cut_count);
    *gpu_ns += timer->StopAndRead();
    timer.reset();
    if (cut_count == 0) return absl::OkStatus();
    if (*rows_interior == 1 && *rows_edges == 1) {
      return absl::InternalError(StrCat("box filter (fused strips): ", cut_count,
                                        " invocations ran out of loop "
                                        "iterations with one row each"));
    }
    *rows_interior = (*rows_interior + 1) / 2;
    *rows_edges = (*rows_edges + 1) / 2;
  }
}

}  // namespace

absl::Status RunFusedStrips(Context& ctx, const Image& image, const BoxFilterOptions& o,
                            int64_t binding_bytes, FusedStripsScratch& scratch,
                            const FusedBandSink& band_sink, uint64_t* gpu_ns) {
  const ImageDesc& d = image.desc();
  const absl::StatusOr<int> band_rows = BandRows(d, binding_bytes);
  if (!band_rows.ok()) return band_rows.status();
  const int band = *band_rows;
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
  const std::optional<ExactDivision> div = PlanExactDivision(WindowArea(o), 255 * WindowArea(o));

  const size_t buf_bytes = size_t(PackedTexelsPerRow(d)) * 16 * size_t(band);
  if (absl::Status s = GrowScratch(ctx, scratch, strips.edges() * plan.texels, d.height, buf_bytes);
      !s.ok()) {
    return s;
  }
  const Buffer& buf = scratch.out;

  // The strips at the rows' ends are few: two workgroups' worth of runs (one per thread) keeps
  // their runs long, so that summing 2ry + 1 rows to start each does not outweigh them.
  int rows_interior =
      RowsPerRun(d, o, plan, band, std::max(1, strips.right0 - strips.left), kTargetInvocations);
  int rows_edges = RowsPerRun(d, o, plan, band, strips.edges(), 16);
  if (o.fused_rows > 0) rows_interior = rows_edges = std::min(o.fused_rows, band);

  Buffer cut = Buffer::Create(4);
  const SidePlan side = PlanSide(d, plan, strips);
  const Buffer side_bytes =
      side.bytes.empty() ? Buffer() : Buffer::Create(side.bytes.size() * 4, side.bytes.data());
  std::optional<GpuTimer> timer(std::in_place);
  BuildSideImage(image, side, side_bytes, *edges_program, scratch.edges, o, border_value);

  SetStripUniforms(p, d, o, plan, border_value, *div);
  buf.BindBase(1);
  cut.BindBase(2);

  const FusedRun run{image, o, plan, strips, p, binding_bytes, scratch, cut};
  for (int y0 = 0; y0 < d.height; y0 += band) {
    const int h = std::min(band, d.height - y0);
    if (absl::Status s = FilterBand(run, y0, h, &rows_interior, &rows_edges, timer, gpu_ns);
        !s.ok()) {
      return s;
    }
    glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT | GL_PIXEL_BUFFER_BARRIER_BIT);
    if (absl::Status s = band_sink(buf, y0, h); !s.ok()) return s;
  }
  glUseProgram(0);
  return ctx.CheckGlError("box filter (fused strips)");
}

}  // namespace glimpse::gpu::box_filter_internal
