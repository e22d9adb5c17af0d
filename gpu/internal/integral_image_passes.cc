// The integral-image variants: each one's programs, buffers and dispatches for one band of rows.
#include "gpu/internal/integral_image_passes.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "absl/status/status.h"
#include "common/str.h"
#include "gpu/internal/uniforms.h"

namespace glimpse::gpu {
namespace integral_internal {

// The packed-strip variant reads the rectangle from texel boundaries of the packed form (and a
// device-side table, one dispatch, holds at most kPackedMaxRows rows).
bool PackedStripsFit(const ImageDesc& desc, int x0) {
  return (int64_t{x0} * desc.channels * BytesPerSample(desc.type)) % 16 == 0;
}

}  // namespace integral_internal

namespace {

using integral_internal::kColBlock;
using integral_internal::kElem;
using integral_internal::kRowBlock;
// The passes take the workspace's fields (the kernel's own name for it is private).
using Workspace = integral_internal::Workspace;

constexpr int kStrip = 8;               // columns per invocation of the strip-scan variant
constexpr int kPackedStripTarget = 64;  // sample columns per packed-strip invocation, at most

// Tile side of the transpose: the largest of 32/16/8 whose padded tile fits shared memory.
int TransposeTile(int channels, const DeviceLimits& limits) {
  for (int t : {32, 16, 8}) {
    if (int64_t{channels} * t * (t + 1) * kElem <= limits.max_shared_memory_bytes) return t;
  }
  return 4;
}

std::string AccDefines(SampleType type, bool two_word) {
  std::string d;
  if (type == SampleType::kFloat32) d += "#define ACC_DOUBLE 1\n";
  if (two_word) d += "#define FORCE_TWO_WORD 1\n";
  return d;
}

// Sample columns per packed-strip invocation: whole 16-byte texels holding whole pixels (a
// multiple of 4, for four-element stores), as many as fit kPackedStripTarget, where the unit is
// smaller. Wider strips spill the running table row out of registers: 3-channel uint8 images
// (48-sample units) ran with 96 columns, and took 1.3-2.3x the time of 4-channel ones against
// OpenCV (bench/results/peers_llvmpipe.md), where 48 keep them in registers.
int PackedStripSamples(const ImageDesc& desc) {
  const int per_texel = 16 / BytesPerSample(desc.type);
  const int unit = std::lcm(per_texel, desc.channels);
  return unit * std::max(1, kPackedStripTarget / unit);
}

// The naive variant: one invocation per row sums it, then one per column adds the rows down
// (from the previous band's carry after the first band).
void NaivePasses(const Workspace& ws, int origin_y, int rows, bool first_band) {
  const int64_t cols = int64_t{ws.width} * ws.channels;
  glUseProgram(ws.rows_naive);
  glUniform2i(glGetUniformLocation(ws.rows_naive, "u_origin"), ws.x0, origin_y);
  SetInt(ws.rows_naive, "u_width", ws.width);
  SetInt(ws.rows_naive, "u_rows", rows);
  glDispatchCompute(GLuint(CeilDiv(rows, 64)), 1, 1);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  glUseProgram(ws.cols_naive);
  SetInt(ws.cols_naive, "u_cols", int(cols));
  SetInt(ws.cols_naive, "u_rows", rows);
  SetInt(ws.cols_naive, "u_use_carry", first_band ? 0 : 1);
  glDispatchCompute(GLuint(CeilDiv(cols, 64)), 1, 1);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
}

// The strip scan: the row prefixes of kStrip-column strips (one invocation per row), then the
// strips' columns (one invocation per strip), both with the same uniforms.
void StripScanPasses(const Workspace& ws, int origin_y, int rows, bool first_band) {
  const int nstrips = int(CeilDiv(ws.width, kStrip));
  for (GLuint p : {ws.strip_prefix, ws.strip_cols}) {
    glUseProgram(p);
    glUniform2i(glGetUniformLocation(p, "u_origin"), ws.x0, origin_y);
    SetInt(p, "u_width", ws.width);
    SetInt(p, "u_rows", rows);
    SetInt(p, "u_nstrips", nstrips);
    SetInt(p, "u_use_carry", first_band ? 0 : 1);
    glDispatchCompute(GLuint(CeilDiv(p == ws.strip_prefix ? rows : nstrips, 64)), 1, 1);
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  }
}

// The packed strips: the strips' row offsets (one invocation per row), then the strips of
// strip_samples sample columns (one invocation per strip), both reading the packed form from the
// rectangle's first texel.
void PackedStripPasses(const Workspace& ws, int origin_y, int rows, bool first_band) {
  const int64_t cols = int64_t{ws.width} * ws.channels;
  const int nstrips = int(CeilDiv(cols, ws.strip_samples));
  const int texel_x0 =
      int(int64_t{ws.x0} * ws.channels * BytesPerSample(ws.image->desc().type) / 16);
  ws.image->BindPacked(0);
  for (GLuint p : {ws.packed_offsets, ws.packed_strips}) {
    glUseProgram(p);
    glUniform2i(glGetUniformLocation(p, "u_origin"), texel_x0, origin_y);
    SetInt(p, "u_rows", rows);
    SetInt(p, "u_nstrips", nstrips);
    if (p == ws.packed_strips) {
      SetInt(p, "u_row_samples", int(cols));
      SetInt(p, "u_use_carry", first_band ? 0 : 1);
      SetInt(p, "u_vec4_rows", cols % 4 == 0 ? 1 : 0);
    }
    glDispatchCompute(GLuint(CeilDiv(p == ws.packed_offsets ? rows : nstrips, 8)), 1, 1);
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  }
}

// Scans `lines` lines of `len` pixels in table (bound at 0) with block sums; `carry`: start
// each line from carry_in and leave its total in carry_out.
void ScanLines(const Workspace& ws, int origin_y, GLuint scan, int lines, int len, bool carry,
               bool use_carry) {
  const int ch = ws.channels;
  const int nb = int(CeilDiv(len, kRowBlock));
  glUseProgram(scan);
  if (scan == ws.rows_scan_tex) {
    glUniform2i(glGetUniformLocation(scan, "u_origin"), ws.x0, origin_y);
  }
  SetInt(scan, "u_line_len", len);
  SetInt(scan, "u_nblocks", nb);
  glDispatchCompute(GLuint(nb), GLuint(lines), 1);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  if (nb == 1 && !carry) return;
  glUseProgram(ws.block_sums);
  SetUint(ws.block_sums, "u_lines", uint64_t(lines) * ch);
  SetUint(ws.block_sums, "u_div", uint64_t(ch));
  SetUint(ws.block_sums, "u_mul", uint64_t(nb) * ch);
  SetUint(ws.block_sums, "u_stride", uint64_t(ch));
  SetInt(ws.block_sums, "u_nblocks", nb);
  SetInt(ws.block_sums, "u_use_carry", use_carry ? 1 : 0);
  SetInt(ws.block_sums, "u_write_carry", carry ? 1 : 0);
  glDispatchCompute(GLuint(CeilDiv(int64_t{lines} * ch, 64)), 1, 1);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  const int64_t elems = int64_t{len} * ch;
  const int64_t first = use_carry ? 0 : int64_t{kRowBlock} * ch;  // block 0 adds zero
  if (first >= elems) return;
  glUseProgram(ws.add_rows);
  SetUint(ws.add_rows, "u_elems", uint64_t(elems));
  SetUint(ws.add_rows, "u_first", uint64_t(first));
  SetInt(ws.add_rows, "u_nblocks", nb);
  SetUint(ws.add_rows, "u_line0", 0);
  glDispatchCompute(GLuint(CeilDiv(elems - first, 256)), GLuint(lines), 1);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
}

// The column scans of the row-scanned band: kColBlock-row blocks of every column, their sums
// (from the previous band's carry, leaving this band's in carry_out), the sums added back.
void ColumnScanPasses(const Workspace& ws, int rows, bool first_band) {
  const int64_t cols = int64_t{ws.width} * ws.channels;
  const int nb = int(CeilDiv(rows, kColBlock));
  glUseProgram(ws.cols_scan);
  SetInt(ws.cols_scan, "u_cols", int(cols));
  SetInt(ws.cols_scan, "u_rows", rows);
  glDispatchCompute(GLuint(CeilDiv(cols, 32)), GLuint(nb), 1);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  glUseProgram(ws.block_sums);
  SetUint(ws.block_sums, "u_lines", uint64_t(cols));
  SetUint(ws.block_sums, "u_div", uint64_t(cols));
  SetUint(ws.block_sums, "u_mul", 0);
  SetUint(ws.block_sums, "u_stride", uint64_t(cols));
  SetInt(ws.block_sums, "u_nblocks", nb);
  SetInt(ws.block_sums, "u_use_carry", first_band ? 0 : 1);
  SetInt(ws.block_sums, "u_write_carry", 1);
  glDispatchCompute(GLuint(CeilDiv(cols, 64)), 1, 1);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  const int first_row = first_band ? kColBlock : 0;  // block 0 of band 0 adds zero
  if (first_row < rows) {
    glUseProgram(ws.add_cols);
    SetUint(ws.add_cols, "u_elems", uint64_t(cols));
    SetUint(ws.add_cols, "u_first", 0);
    SetUint(ws.add_cols, "u_line0", uint64_t(first_row));
    glDispatchCompute(GLuint(CeilDiv(cols, 256)), GLuint(rows - first_row), 1);
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  }
}

// Transposes src (src_rows x src_cols) into dst in tile x tile blocks.
void Transpose(const Workspace& ws, const Buffer& src, const Buffer& dst, int src_rows,
               int src_cols) {
  glUseProgram(ws.transpose);
  src.BindBase(0);
  dst.BindBase(1);
  SetInt(ws.transpose, "u_rows", src_rows);
  SetInt(ws.transpose, "u_cols", src_cols);
  glDispatchCompute(GLuint(CeilDiv(src_cols, ws.tile)), GLuint(CeilDiv(src_rows, ws.tile)), 1);
  glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
}

// Scan-transpose-scan: transpose the row-scanned band (rows x w) into scratch (w x rows), scan
// its rows (the band's columns) with the carry, transpose back.
void TransposedColumnPasses(const Workspace& ws, int origin_y, int rows, bool first_band,
                            const Buffer& carry_in, const Buffer& carry_out) {
  Transpose(ws, *ws.table, *ws.scratch, rows, ws.width);
  ws.scratch->BindBase(0);
  carry_in.BindBase(1);
  carry_out.BindBase(2);
  ScanLines(ws, origin_y, ws.rows_scan_buf, ws.width, rows, true, !first_band);
  Transpose(ws, *ws.scratch, *ws.table, ws.width, rows);
}

}  // namespace

absl::StatusOr<IntegralImageKernel::Workspace> IntegralImageKernel::MakeWorkspace(
    const Image& image, int x0, int y0, int w, int rows_max, IntegralImageVariant variant,
    bool squared, bool two_word, bool narrow) {
  const ImageDesc& desc = image.desc();
  Workspace ws;
  ws.image = &image;
  ws.x0 = x0;
  ws.y0 = y0;
  ws.width = w;
  ws.channels = desc.channels;
  ws.rows_max = rows_max;
  ws.variant = variant;
  ws.tile = TransposeTile(desc.channels, ctx_.limits());

  const std::string acc = AccDefines(desc.type, two_word);
  const std::string tex = StrCat(ImageDefines(desc), acc, squared ? "#define SQUARED 1\n" : "");
  const std::string chan = StrCat("#define CHANNELS ", desc.channels, "\n");
  auto program = [&](std::string_view name, const std::string& defines,
                     GLuint* out) -> absl::Status {
    absl::StatusOr<GLuint> p = ctx_.Program(name, defines);
    if (!p.ok()) return p.status();
    *out = *p;
    return absl::OkStatus();
  };
  absl::Status s;
  if (variant == IntegralImageVariant::kNaive) {
    if (s = program("integral_rows_naive", tex, &ws.rows_naive); !s.ok()) return s;
    if (s = program("integral_cols_naive", acc, &ws.cols_naive); !s.ok()) return s;
  } else if (variant == IntegralImageVariant::kStripScan) {
    const std::string strip = StrCat(tex, "#define STRIP ", kStrip, "\n");
    if (s = program("integral_strip_prefix", strip, &ws.strip_prefix); !s.ok()) return s;
    if (s = program("integral_strip_cols", strip, &ws.strip_cols); !s.ok()) return s;
  } else if (variant == IntegralImageVariant::kPackedStrips) {
    ws.strip_samples = PackedStripSamples(desc);
    const std::string strip = StrCat(tex, "#define NS ", ws.strip_samples, "\n");
    if (s = program("integral_packed_offsets", strip, &ws.packed_offsets); !s.ok()) return s;
    // Only the strips go narrow: the offsets pass keeps 64-bit sums, of which the strips use the
    // low words, and the carries hold the low words too: everything mod 2^32, consistently.
    if (s = program("integral_packed_strips", narrow ? StrCat(strip, "#define ACC_U32 1\n") : strip,
                    &ws.packed_strips);
        !s.ok()) {
      return s;
    }
  } else {
    const std::string block =
        StrCat("#define BLOCK ", kRowBlock, "\n#define CBLOCK ", kColBlock, "\n");
    if (variant == IntegralImageVariant::kSubgroupScan) {
      s = program("integral_rows_subgroup", StrCat(tex, "#define BLOCK ", kRowBlock, "\n"),
                  &ws.rows_scan_tex);
    } else {
      s = program("integral_rows_scan", StrCat(tex, "#define SRC_TEXTURE 1\n"), &ws.rows_scan_tex);
    }
    if (!s.ok()) return s;
    if (s = program("integral_block_sums", acc, &ws.block_sums); !s.ok()) return s;
    if (s = program("integral_add_offsets", StrCat(acc, chan, block), &ws.add_rows); !s.ok()) {
      return s;
    }
    if (variant != IntegralImageVariant::kScanTransposeScan) {  // the column scans
      if (s = program("integral_cols_scan", acc, &ws.cols_scan); !s.ok()) return s;
      if (s = program("integral_add_offsets", StrCat(acc, block, "#define COLUMNS 1\n"),
                      &ws.add_cols);
          !s.ok()) {
        return s;
      }
    } else {
      if (s = program("integral_rows_scan", StrCat(acc, chan), &ws.rows_scan_buf); !s.ok()) {
        return s;
      }
      if (s = program("integral_transpose", StrCat(chan, "#define TILE ", ws.tile, "\n"),
                      &ws.transpose);
          !s.ok()) {
        return s;
      }
    }
  }

  const size_t row_elems = size_t(w) * desc.channels;
  const size_t band_elems = row_elems * size_t(rows_max);
  for (int i = 0; i < 2; ++i) ws.carry[i] = &Buffer::AtLeast(work_.carry[i], row_elems * kElem);
  if (variant == IntegralImageVariant::kStripScan) {
    ws.sums = &Buffer::AtLeast(
        work_.sums, size_t(rows_max) * size_t(CeilDiv(w, kStrip)) * desc.channels * kElem);
  } else if (variant == IntegralImageVariant::kPackedStrips) {
    ws.sums = &Buffer::AtLeast(
        work_.sums,
        size_t(rows_max) * size_t(CeilDiv(row_elems, ws.strip_samples)) * desc.channels * kElem);
  } else if (variant != IntegralImageVariant::kNaive) {
    const size_t nb_w = size_t(CeilDiv(w, kRowBlock));
    const size_t nb_r = size_t(CeilDiv(rows_max, kRowBlock));
    const size_t nb_c = size_t(CeilDiv(rows_max, kColBlock));
    size_t sums = std::max(
        {size_t(rows_max) * nb_w * desc.channels, row_elems * nb_r, row_elems * nb_c, size_t{1}});
    ws.sums = &Buffer::AtLeast(work_.sums, sums * kElem);
  }
  if (variant == IntegralImageVariant::kScanTransposeScan) {
    ws.scratch = &Buffer::AtLeast(work_.scratch, band_elems * kElem);
  }
  return ws;
}

absl::Status IntegralImageKernel::RunBand(const Workspace& ws, int band_y0, int rows,
                                          bool first_band) {
  const int band = band_y0 / ws.rows_max;  // carries alternate between the two buffers
  const Buffer& carry_in = *ws.carry[band % 2];
  const Buffer& carry_out = *ws.carry[(band + 1) % 2];
  ws.table->BindBase(0);
  carry_in.BindBase(1);
  carry_out.BindBase(2);
  if (ws.sums != nullptr) ws.sums->BindBase(3);
  const int origin_y = ws.y0 + band_y0;

  switch (ws.variant) {
    case IntegralImageVariant::kNaive:
      NaivePasses(ws, origin_y, rows, first_band);
      break;
    case IntegralImageVariant::kStripScan:
      StripScanPasses(ws, origin_y, rows, first_band);
      break;
    case IntegralImageVariant::kPackedStrips:
      PackedStripPasses(ws, origin_y, rows, first_band);
      break;
    default:
      // Rows of the band, from the image.
      ScanLines(ws, origin_y, ws.rows_scan_tex, rows, ws.width, false, false);
      if (ws.variant != IntegralImageVariant::kScanTransposeScan) {  // the column scans
        ColumnScanPasses(ws, rows, first_band);
      } else {
        TransposedColumnPasses(ws, origin_y, rows, first_band, carry_in, carry_out);
      }
      break;
  }
  return absl::OkStatus();
}

}  // namespace glimpse::gpu
