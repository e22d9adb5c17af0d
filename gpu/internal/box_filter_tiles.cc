// The box filter's tiled variants: tile planning, programs, per-tile dispatches and copies.
#include "gpu/internal/box_filter_tiles.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/str.h"
#include "gpu/integral_image.h"
#include "gpu/internal/box_filter_llvmpipe.h"
#include "gpu/internal/uniforms.h"

namespace glimpse::gpu::box_filter_internal {
namespace {

constexpr int kTile = 16;  // box_filter_shared_tile.comp's T

struct GlPixelFormat {
  GLenum format, type;
};
GlPixelFormat PixelFormatFor(const ImageDesc& d) {
  static constexpr GLenum kInt[] = {GL_RED_INTEGER, GL_RG_INTEGER, GL_RGB_INTEGER, GL_RGBA_INTEGER};
  static constexpr GLenum kFloat[] = {GL_RED, GL_RG, GL_RGB, GL_RGBA};
  const int i = d.channels - 1;
  switch (d.type) {
    case SampleType::kUint8:
      return {kInt[i], GL_UNSIGNED_BYTE};
    case SampleType::kUint16:
      return {kInt[i], GL_UNSIGNED_SHORT};
    case SampleType::kFloat32:
      break;
  }
  return {kFloat[i], GL_FLOAT};
}

}  // namespace

// Integer window sums that may reach 2^32 are kept in doubles (exact below 2^53).
bool Wide(const ImageDesc& d, const BoxFilterOptions& o) {
  if (d.type == SampleType::kFloat32) return false;
  const uint64_t max = d.type == SampleType::kUint8 ? 255 : 65535;
  return max * WindowArea(o) >= (uint64_t{1} << 32);
}

// Apron columns per shared chunk: what is left of shared memory after the row sums and outputs.
int SharedChunkColumns(const ImageDesc& d, const DeviceLimits& limits) {
  const int row_sum_bytes = d.type == SampleType::kFloat32 ? 32 : 16;
  const int left = limits.max_shared_memory_bytes - kTile * kTile * (row_sum_bytes + 16);
  return std::clamp(left / (kTile * 16), 1, 256);
}

std::string TileDefines(const ImageDesc& d, const std::string& extra) {
  return StrCat(ImageDefines(d), extra);
}

namespace {

int64_t RoundUp4(int64_t v) { return (v + 3) / 4 * 4; }

// Bytes of the largest buffer a w x h output tile needs (0: the tile is not possible).
int64_t TileBytes(BoxFilterVariant v, const ImageDesc& d, const BoxFilterOptions& o, int64_t w,
                  int64_t h) {
  const int64_t out = RoundUp4(w) * h * d.channels * BytesPerSample(d.type);
  const int64_t src_rows = std::min<int64_t>(d.height, h + 2 * int64_t{o.ry});
  const int64_t src_cols = std::min<int64_t>(d.width, w + 2 * int64_t{o.rx});
  switch (v) {
    case BoxFilterVariant::kSeparable:
      return std::max(out, src_rows * w * d.channels * (d.type == SampleType::kFloat32 ? 8 : 4));
    case BoxFilterVariant::kIntegral:
      return std::max(out, src_rows * src_cols * d.channels * 8);
    default:
      return out;
  }
}

struct TilePlan {
  int w = 0, h = 0;
  bool ok = false;
};

// The largest tiles (halving the side that saves more) whose buffers fit one storage binding.
TilePlan PlanTiles(BoxFilterVariant v, const ImageDesc& d, const BoxFilterOptions& o,
                   int64_t limit) {
  TilePlan p{d.width, d.height, false};
  for (;;) {
    if (TileBytes(v, d, o, p.w, p.h) <= limit) {
      p.ok = true;
      return p;
    }
    if (p.w == 1 && p.h == 1) return p;
    const int hw = int(CeilDiv(p.w, 2)), hh = int(CeilDiv(p.h, 2));
    const int64_t by_h = p.h > 1 ? TileBytes(v, d, o, p.w, hh) : INT64_MAX;
    const int64_t by_w = p.w > 1 ? TileBytes(v, d, o, hw, p.h) : INT64_MAX;
    if (by_h <= by_w) {
      p.h = hh;
    } else {
      p.w = hw;
    }
  }
}

// The programs of a tiled variant: `program` filters a tile (the separable variant's second
// pass), `rows_program` the separable variant's row sums (0 for the others).
struct TilePrograms {
  GLuint program = 0, rows_program = 0;
};

absl::StatusOr<TilePrograms> LoadTilePrograms(Context& ctx, const ImageDesc& d,
                                              const BoxFilterOptions& o, BoxFilterVariant variant) {
  const bool wide = Wide(d, o);
  std::string defines;
  const char* name = "box_filter_sep_cols";
  switch (variant) {
    case BoxFilterVariant::kSharedTile:
      name = "box_filter_shared_tile";
      defines = TileDefines(d, StrCat(wide ? "#define WIDE 1\n" : "", "#define CW ",
                                      SharedChunkColumns(d, ctx.limits()), "\n"));
      break;
    case BoxFilterVariant::kIntegral:
      name = "box_filter_integral";
      defines = TileDefines(d, StrCat(d.type == SampleType::kFloat32 ? "" : "#define WIDE 1\n",
                                      o.force_two_word ? "#define FORCE_TWO_WORD 1\n" : ""));
      break;
    default:
      defines = TileDefines(d, wide ? "#define WIDE 1\n" : "");
      break;
  }
  TilePrograms programs;
  absl::StatusOr<GLuint> program = ctx.Program(name, defines);
  if (!program.ok()) return program.status();
  programs.program = *program;
  if (variant == BoxFilterVariant::kSeparable) {
    absl::StatusOr<GLuint> p = ctx.Program("box_filter_sep_rows", TileDefines(d, ""));
    if (!p.ok()) return p.status();
    programs.rows_program = *p;
  }
  return programs;
}

// The tiles' size for `*variant`, which turns from the integral image to the running sums where
// no tile of the table fits.
absl::StatusOr<TilePlan> ChooseTiles(BoxFilterVariant* variant, const ImageDesc& d,
                                     const BoxFilterOptions& o, int64_t limit) {
  TilePlan plan = PlanTiles(*variant, d, o, limit);
  if (!plan.ok && *variant == BoxFilterVariant::kIntegral) {
    // The window reaches the whole image and its table exceeds one binding: row sums instead.
    *variant = BoxFilterVariant::kSeparable;
    plan = PlanTiles(*variant, d, o, limit);
  }
  if (!plan.ok) {
    return absl::ResourceExhaustedError(
        StrCat("a box filter tile of ", DescribeImage(d), " exceeds the storage binding limit"));
  }
  return plan;
}

// The uniforms every tiled program reads: the image, the tile, the window, the border.
void SetTileUniforms(GLuint p, const ImageDesc& d, const BoxFilterOptions& o, uint64_t area, int x0,
                     int y0, int w, int h) {
  glUseProgram(p);
  glUniform2i(glGetUniformLocation(p, "u_size"), d.width, d.height);
  glUniform2i(glGetUniformLocation(p, "u_tile0"), x0, y0);
  glUniform2i(glGetUniformLocation(p, "u_tile_size"), w, h);
  SetInt(p, "u_out_pitch", int(RoundUp4(w)));
  SetInt(p, "u_rx", o.rx);
  SetInt(p, "u_ry", o.ry);
  SetInt(p, "u_border", ShaderBorder(o.border));
  glUniform1ui(glGetUniformLocation(p, "u_area"), GLuint(area));
  glUniform1d(glGetUniformLocation(p, "u_area_d"), double(area));
  SetSampleBits(p, d);
  const double value = o.border == BorderMode::kConstant ? o.border_value : 0.0;
  if (d.type == SampleType::kFloat32) {
    glUniform1f(glGetUniformLocation(p, "u_const"), float(value));
  } else {
    glUniform1ui(glGetUniformLocation(p, "u_const"), GLuint(value));
  }
}

// One output tile at (x0, y0), w x h, and the source rectangle [lo_x, hi_x] x [lo_y, hi_y] its
// windows read (all of it, for windows beyond the image).
struct Tile {
  int x0 = 0, y0 = 0, w = 0, h = 0;
  int lo_x = 0, lo_y = 0, hi_x = 0, hi_y = 0;
};

Tile MakeTile(const ImageDesc& d, const BoxFilterOptions& o, const TilePlan& plan, int x0, int y0) {
  Tile t;
  t.x0 = x0;
  t.y0 = y0;
  t.w = std::min(plan.w, d.width - x0);
  t.h = std::min(plan.h, d.height - y0);
  t.lo_y = std::max(0, y0 - o.ry);
  t.hi_y = int(std::min<int64_t>(d.height - 1, int64_t{y0} + t.h - 1 + o.ry));
  t.lo_x = std::max(0, x0 - o.rx);
  t.hi_x = int(std::min<int64_t>(d.width - 1, int64_t{x0} + t.w - 1 + o.rx));
  return t;
}

// The variant's dispatches for one tile, its words left in the output buffer (bound at 0; the
// separable rows' sums or the integral table at 1).
void DispatchTile(BoxFilterVariant variant, const TilePrograms& programs, const ImageDesc& d,
                  const BoxFilterOptions& o, uint64_t area, const Tile& t) {
  const GLuint program = programs.program, rows_program = programs.rows_program;
  const int seg_x = std::clamp(2 * o.rx + 1, 32, 128);
  const int seg_y = std::clamp(2 * o.ry + 1, 32, 128);
  const int x0 = t.x0, y0 = t.y0, w = t.w, h = t.h;
  switch (variant) {
    case BoxFilterVariant::kSharedTile:
      SetTileUniforms(program, d, o, area, x0, y0, w, h);
      glDispatchCompute(GLuint(CeilDiv(w, kTile)), GLuint(CeilDiv(h, kTile)), 1);
      break;
    case BoxFilterVariant::kIntegral:
      SetTileUniforms(program, d, o, area, x0, y0, w, h);
      glUniform2i(glGetUniformLocation(program, "u_src0"), t.lo_x, t.lo_y);
      glUniform2i(glGetUniformLocation(program, "u_src_size"), t.hi_x - t.lo_x + 1,
                  t.hi_y - t.lo_y + 1);
      SetInt(program, "u_pixels", 4);
      glDispatchCompute(GLuint(CeilDiv(w, 4 * 64)), GLuint(h), 1);
      break;
    default:
      SetTileUniforms(rows_program, d, o, area, x0, y0, w, h);
      SetInt(rows_program, "u_src_y0", t.lo_y);
      SetInt(rows_program, "u_src_rows", t.hi_y - t.lo_y + 1);
      SetInt(rows_program, "u_seg", seg_x);
      glDispatchCompute(GLuint(CeilDiv(CeilDiv(w, seg_x), 8)),
                        GLuint(CeilDiv(t.hi_y - t.lo_y + 1, 8)), 1);
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
      SetTileUniforms(program, d, o, area, x0, y0, w, h);
      SetInt(program, "u_src_y0", t.lo_y);
      SetInt(program, "u_seg", seg_y);
      glDispatchCompute(GLuint(CeilDiv(CeilDiv(w, 4), 64)), GLuint(CeilDiv(h, seg_y)), 1);
      break;
  }
}

// The tile's words into the output texture.
void CopyTileToTexture(const Buffer& out_buf, const Image& out, const ImageDesc& d, const Tile& t) {
  const GlPixelFormat fmt = PixelFormatFor(d);
  glMemoryBarrier(GL_PIXEL_BUFFER_BARRIER_BIT | GL_TEXTURE_UPDATE_BARRIER_BIT);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, int(RoundUp4(t.w)));
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, out_buf.get());
  glBindTexture(GL_TEXTURE_2D, out.texture());
  glTexSubImage2D(GL_TEXTURE_2D, 0, t.x0, t.y0, t.w, t.h, fmt.format, fmt.type, nullptr);
  glBindTexture(GL_TEXTURE_2D, 0);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
}

}  // namespace

bool DeliverBufferRows(Readback& readback, const Buffer& rows, size_t stride, const ImageDesc& desc,
                       int y0, int count, std::vector<uint8_t>& cut, const BoxFilterSink& sink,
                       absl::Status* sink_status) {
  const size_t row = desc.row_bytes();
  const size_t piece_rows = std::max<size_t>(1, BoxFilterKernel::kSinkPieceBytes / row);
  if (stride != row) cut.resize(std::min(piece_rows, size_t(count)) * row);
  return readback.Read(rows, size_t(count) * stride, piece_rows * stride,
                       [&](const uint8_t* src, size_t at, size_t bytes) {
                         const size_t r = at / stride, n = bytes / stride;
                         if (stride != row) {  // rows padded: cut them
                           for (size_t i = 0; i < n; ++i)
                             std::memcpy(&cut[i * row], src + i * stride, row);
                           src = cut.data();
                         }
                         *sink_status = sink(BoxFilterRows{y0 + int(r), int(n),
                                                           std::span<const uint8_t>(src, n * row)});
                         return sink_status->ok();
                       });
}

namespace {

// The tile's rows from the output buffer (rows of RoundUp4(t.w) pixels) into `band`, rows of
// the image's own length holding the tiles of rows [t.y0, t.y0 + t.h), at the tile's column.
// By the context's read path (on GPUs not through a mapping: on an H100 the mapped reads of
// device buffers ran at 0.7-3.7 GB/s, bench/results/nvidia_h100.md), whole rows per piece.
bool ReadTileRows(Readback& readback, const Buffer& out_buf, const ImageDesc& d, const Tile& t,
                  uint8_t* band) {
  const size_t pixel = size_t(d.channels) * size_t(BytesPerSample(d.type));
  const size_t pitch = size_t(RoundUp4(t.w)) * pixel, row = d.row_bytes();
  const size_t width = size_t(t.w) * pixel;
  const size_t piece = pitch * std::max<size_t>(1, BoxFilterKernel::kSinkPieceBytes / pitch);
  return readback.Read(out_buf, pitch * size_t(t.h), piece,
                       [&](const uint8_t* data, size_t at, size_t bytes) {
                         for (size_t r = 0; r < bytes / pitch; ++r) {
                           std::memcpy(band + (at / pitch + r) * row + size_t(t.x0) * pixel,
                                       data + r * pitch, width);
                         }
                         return true;
                       });
}

// Rows [y0, y0 + rows) of the result, `row` bytes each, handed over a piece at a time.
absl::Status DeliverRows(const uint8_t* data, size_t row, int y0, int rows,
                         const BoxFilterSink& sink) {
  const int piece_rows = int(std::max<size_t>(1, BoxFilterKernel::kSinkPieceBytes / row));
  for (int y = 0; y < rows; y += piece_rows) {
    const int n = std::min(piece_rows, rows - y);
    if (absl::Status s = sink(BoxFilterRows{
            y0 + y, n, std::span<const uint8_t>(data + size_t(y) * row, size_t(n) * row)});
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FilterTiles(Context& ctx, const Image& image, const BoxFilterOptions& o,
                         BoxFilterVariant variant, int64_t limit, TileScratch& scratch,
                         const BoxFilterSink* sink, BoxFilterResult* result) {
  const ImageDesc& d = image.desc();
  absl::StatusOr<TilePlan> chosen = ChooseTiles(&variant, d, o, limit);
  if (!chosen.ok()) return chosen.status();
  const TilePlan plan = *chosen;
  absl::StatusOr<TilePrograms> programs = LoadTilePrograms(ctx, d, o, variant);
  if (!programs.ok()) return programs.status();

  // With a sink, each band of tile rows is read back from the output buffer and handed over: no
  // result texture to fill and download (on NVIDIA's driver both went through its slow path for
  // 3-channel texels: 31 ms + 32 ms of a 1080p RGB 7x7 call on an H100). Tiles as wide as the
  // image hand their rows over straight from the read-back; narrower ones are gathered into a
  // band of rows first.
  absl::StatusOr<Image> out = sink != nullptr ? Image() : Image::Allocate(ctx, d);
  if (!out.ok()) return out.status();
  const bool whole_rows = plan.w == d.width;
  if (sink != nullptr && !whole_rows) scratch.band.resize(size_t(plan.h) * d.row_bytes());
  const Buffer& out_buf = Buffer::AtLeast(
      scratch.out, size_t(TileBytes(BoxFilterVariant::kSharedTile, d, o, plan.w, plan.h)));
  const Buffer* aux =
      variant == BoxFilterVariant::kSharedTile
          ? nullptr
          : &Buffer::AtLeast(scratch.aux, size_t(TileBytes(variant, d, o, plan.w, plan.h)));
  if (variant == BoxFilterVariant::kIntegral && !scratch.integral) scratch.integral.emplace(ctx);
  const uint64_t area = WindowArea(o);
  const size_t pitch =
      size_t(RoundUp4(plan.w)) * size_t(d.channels) * size_t(BytesPerSample(d.type));

  result->variant = variant;
  for (int y0 = 0; y0 < d.height; y0 += plan.h) {
    for (int x0 = 0; x0 < d.width; x0 += plan.w) {
      const Tile t = MakeTile(d, o, plan, x0, y0);
      // The previous tile's passes read `aux` and `out_buf`, which this tile's passes overwrite:
      // the barrier keeps these writes from reaching those reads (a GPU may overlap consecutive
      // dispatches; a CPU renderer runs them one after the other, which hid it there).
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_PIXEL_BUFFER_BARRIER_BIT);
      if (variant == BoxFilterVariant::kIntegral) {
        absl::Status s = scratch.integral->ComputeOnDevice(
            image, t.lo_x, t.lo_y, t.hi_x - t.lo_x + 1, t.hi_y - t.lo_y + 1,
            IntegralImageVariant::kAuto, *aux, &result->gpu_ns, o.force_two_word);
        if (!s.ok()) return s;
      }
      GpuTimer timer;
      image.Bind(0);
      out_buf.BindBase(0);
      if (aux != nullptr) aux->BindBase(1);
      DispatchTile(variant, *programs, d, o, area, t);
      if (sink == nullptr) CopyTileToTexture(out_buf, *out, d, t);
      result->gpu_ns += timer.StopAndRead();
      if (sink == nullptr) continue;
      if (whole_rows) {
        if (absl::Status s = ctx.CheckGlError("box filter"); !s.ok()) return s;
        absl::Status delivered;
        if (!DeliverBufferRows(ctx.readback(), out_buf, pitch, d, y0, t.h, scratch.band, *sink,
                               &delivered)) {
          return ctx.MapError("the box filter's output tile");
        }
        if (!delivered.ok()) return delivered;
      } else if (!ReadTileRows(ctx.readback(), out_buf, d, t, scratch.band.data())) {
        return ctx.MapError("the box filter's output tile");
      }
    }
    if (sink != nullptr && !whole_rows) {
      if (absl::Status s = ctx.CheckGlError("box filter"); !s.ok()) return s;
      const int rows = std::min(plan.h, d.height - y0);
      if (absl::Status s = DeliverRows(scratch.band.data(), d.row_bytes(), y0, rows, *sink);
          !s.ok()) {
        return s;
      }
    }
  }
  glUseProgram(0);
  if (absl::Status s = ctx.CheckGlError("box filter"); !s.ok()) return s;
  if (sink == nullptr) result->image = std::move(*out);
  return absl::OkStatus();
}

}  // namespace glimpse::gpu::box_filter_internal
