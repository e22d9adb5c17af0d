#include "gpu/box_filter.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gpu/internal/box_filter_llvmpipe.h"
#include "gpu/integral_image.h"
#include "common/str.h"
#include "gpu/internal/variant_check.h"

namespace glimpse::gpu {
namespace {

constexpr BoxFilterVariant kConcreteVariants[] = {
    BoxFilterVariant::kSharedTile, BoxFilterVariant::kSeparable, BoxFilterVariant::kIntegral,
    BoxFilterVariant::kFusedStrips};
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

uint64_t Area(const BoxFilterOptions& o) { return uint64_t(2 * o.rx + 1) * uint64_t(2 * o.ry + 1); }

// Integer window sums that may reach 2^32 are kept in doubles (exact below 2^53).
bool Wide(const ImageDesc& d, const BoxFilterOptions& o) {
  if (d.type == SampleType::kFloat32) return false;
  const uint64_t max = d.type == SampleType::kUint8 ? 255 : 65535;
  return max * Area(o) >= (uint64_t{1} << 32);
}

// Apron columns per shared chunk: what is left of shared memory after the row sums and outputs.
int SharedChunkColumns(const ImageDesc& d, const DeviceLimits& limits) {
  const int row_sum_bytes = d.type == SampleType::kFloat32 ? 32 : 16;
  const int left = limits.max_shared_memory_bytes - kTile * kTile * (row_sum_bytes + 16);
  return std::clamp(left / (kTile * 16), 1, 256);
}

std::string Defines(const ImageDesc& d, const std::string& extra) {
  return StrCat(ImageDefines(d), extra);
}

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

void SetInt(GLuint p, const char* name, int v) { glUniform1i(glGetUniformLocation(p, name), v); }

}  // namespace

std::string_view BorderModeName(BorderMode m) {
  switch (m) {
    case BorderMode::kReplicate:
      return "replicate";
    case BorderMode::kReflect101:
      return "reflect101";
    case BorderMode::kConstant:
      return "constant";
  }
  return "unknown";
}

std::optional<BorderMode> ParseBorderMode(std::string_view name) {
  for (BorderMode m : {BorderMode::kReplicate, BorderMode::kReflect101, BorderMode::kConstant}) {
    if (BorderModeName(m) == name) return m;
  }
  return std::nullopt;
}

std::string_view BoxFilterVariantName(BoxFilterVariant v) {
  switch (v) {
    case BoxFilterVariant::kAuto:
      return "auto";
    case BoxFilterVariant::kSharedTile:
      return "shared_tile";
    case BoxFilterVariant::kSeparable:
      return "separable";
    case BoxFilterVariant::kIntegral:
      return "integral";
    case BoxFilterVariant::kFusedStrips:
      return "fused_strips";
  }
  return "unknown";
}

std::optional<BoxFilterVariant> ParseBoxFilterVariant(std::string_view name) {
  if (name.empty() || name == "auto") return BoxFilterVariant::kAuto;
  for (BoxFilterVariant v : kConcreteVariants) {
    if (BoxFilterVariantName(v) == name) return v;
  }
  return std::nullopt;
}

absl::StatusOr<BoxFilterOptions> ResolveBoxFilterOptions(const ImageDesc& desc,
                                                         const BoxFilterOptions& options) {
  const BoxFilterOptions& o = options;
  if (desc.type != SampleType::kUint8 && desc.type != SampleType::kUint16 &&
      desc.type != SampleType::kFloat32) {
    return absl::InvalidArgumentError(
        StrCat("unsupported sample type #", static_cast<int>(desc.type)));
  }
  if (o.rx < 0 || o.rx > kMaxBoxRadius) {
    return absl::InvalidArgumentError(StrCat("rx must be in [0, ", kMaxBoxRadius, "], got ", o.rx));
  }
  if (o.ry < 0 || o.ry > kMaxBoxRadius) {
    return absl::InvalidArgumentError(StrCat("ry must be in [0, ", kMaxBoxRadius, "], got ", o.ry));
  }
  if (BorderModeName(o.border) == "unknown") {
    return absl::InvalidArgumentError(StrCat(
        "border must be replicate, reflect101 or constant, got #", static_cast<int>(o.border)));
  }
  if (o.tile_bytes < 0) {
    return absl::InvalidArgumentError(
        StrCat("tile_bytes must be >= 0 (0: the device limit), got ", o.tile_bytes));
  }
  if (o.fused_rows < 0) {
    return absl::InvalidArgumentError(
        StrCat("fused_rows must be >= 0 (0: planned), got ", o.fused_rows));
  }
  if (absl::Status s = CheckVariant(o.variant, kConcreteVariants, BoxFilterVariantName); !s.ok()) {
    return s;
  }
  if (o.border == BorderMode::kConstant) {
    const double v = o.border_value;
    if (desc.type == SampleType::kFloat32) {
      if (!std::isfinite(v) || std::abs(v) > FLT_MAX) {
        return absl::InvalidArgumentError(
            StrCat("border_value must be a finite float for float32 images, got ", v));
      }
    } else {
      const int max = desc.type == SampleType::kUint8 ? 255 : 65535;
      if (!(v >= 0 && v <= max && v == std::floor(v))) {
        return absl::InvalidArgumentError(StrCat("border_value must be a whole number in [0, ", max,
                                                 "] for ", SampleTypeName(desc.type),
                                                 " images, got ", v));
      }
    }
  }
  return o;
}

// kAuto. On CPU renderers (llvmpipe): for 8-bit images with rx <= kAutoFusedStripsMaxRx and
// windows at most 255 rows tall (16-bit vertical sums), the fused strips, measured 7-10x faster
// than the separable running sums (bench/results/box_filter_llvmpipe.md); otherwise the separable
// running sums, measured fastest of the rest at every size and radius benchmarked (the shared
// tile pays for its barriers and O(r) sums, the integral variant for its 8-byte table). Wider
// windows would need wider strips, and programs that take seconds each to compile.
// On GPUs (not measured here; reasoning): the shared tile for small radii (r <= 4: one pass,
// every texel read once per tile, at most 2.3x apron overhead, no intermediate buffer), the
// running sums up to r = 64, and beyond that the integral image for integer images (its cost, a
// table build of about four 8-byte passes plus four reads per pixel, does not grow with the
// radius, while the running sums' start-up grows with it); float images never use the integral
// variant (its error grows with the image sum, see box_filter.h).
BoxFilterVariant ResolveBoxFilterVariant(const DeviceInfo& device, const ImageDesc& desc,
                                         const BoxFilterOptions& o) {
  if (o.variant != BoxFilterVariant::kAuto) return o.variant;
  if (device.cpu_variants) {
    if (desc.type == SampleType::kUint8 && o.rx <= kAutoFusedStripsMaxRx && o.ry <= 127 &&
        box_filter_internal::FusedStripsSupports(desc, o).ok()) {
      return BoxFilterVariant::kFusedStrips;
    }
    return BoxFilterVariant::kSeparable;
  }
  const int r = std::max(o.rx, o.ry);
  if (r <= 4) return BoxFilterVariant::kSharedTile;
  if (r <= 64 || desc.type == SampleType::kFloat32) return BoxFilterVariant::kSeparable;
  return BoxFilterVariant::kIntegral;
}

absl::Status BoxFilterKernel::Prepare(SampleType type) {
  for (int c = 1; c <= 4; ++c) {
    const ImageDesc d{1, 1, c, type};
    if (absl::Status s = ResolveBoxFilterOptions(d, {}).status(); !s.ok()) return s;
    const std::string cw = StrCat("#define CW ", SharedChunkColumns(d, ctx_.limits()), "\n");
    for (const std::string& wide : {std::string(), std::string("#define WIDE 1\n")}) {
      if (type == SampleType::kFloat32 && !wide.empty()) continue;
      for (auto [name, extra] :
           {std::pair<const char*, std::string>{"box_filter_shared_tile", wide + cw},
            {"box_filter_sep_cols", wide}}) {
        if (absl::Status s = ctx_.Program(name, Defines(d, extra)).status(); !s.ok()) return s;
      }
    }
    if (absl::Status s = ctx_.Program("box_filter_sep_rows", Defines(d, "")).status(); !s.ok()) {
      return s;
    }
    const std::string integral = type == SampleType::kFloat32 ? "" : "#define WIDE 1\n";
    if (absl::Status s = ctx_.Program("box_filter_integral", Defines(d, integral)).status();
        !s.ok()) {
      return s;
    }
  }
  return IntegralImageKernel(ctx_).Prepare(type);
}

absl::Status BoxFilterKernel::WarmUp(WarmUpShare& share) {
  // Radii on both sides of every boundary of the auto rule, and those whose sums need wide
  // (double) accumulators: rx <= kAutoFusedStripsMaxRx (one fused program per rx up to 7, then
  // one per byte of a texel where the window's edge falls, all met by rx 8-23), ry past 127
  // (32-bit vertical sums), r = 5 and 65 (GPU rule), r = 128 (16-bit sums past 2^32), 2048 x 2100
  // (8-bit sums past 2^32). The border is a uniform: one border mode does for all.
  std::vector<std::pair<int, int>> radii;
  for (int r = 0; r <= kAutoFusedStripsMaxRx + 1; ++r) radii.push_back({r, r});
  for (auto rr : {std::pair{1, 128}, {5, 5}, {65, 65}, {128, 128}, {2048, 2100}}) {
    radii.push_back(rr);
  }
  for (SampleType type : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
    for (int c = 1; c <= 4; ++c) {
      const ImageDesc d = WarmUpShape(type, c);
      absl::StatusOr<Image> image = Image::Upload(ctx_, HostImage::Zeros(d));
      if (!image.ok()) return image.status();
      std::vector<std::string> seen;  // a program set once run need not run again
      for (auto [rx, ry] : radii) {
        const BoxFilterOptions o{.rx = rx, .ry = ry, .border = BorderMode::kReplicate};
        const BoxFilterVariant v = ResolveBoxFilterVariant(ctx_.info(), d, o);
        const std::string key = StrCat(BoxFilterVariantName(v), "|", Wide(d, o),
                                       v == BoxFilterVariant::kFusedStrips
                                           ? box_filter_internal::FusedStripsDefines(d, o)
                                           : "");
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        if (!share.Claim()) continue;
        absl::StatusOr<BoxFilterResult> r = Run(*image, o);
        if (!r.ok()) return r.status();
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<BoxFilterResult> BoxFilterKernel::Run(const Image& image,
                                                     const BoxFilterOptions& options) {
  return Filter(image, options, nullptr);
}

absl::StatusOr<BoxFilterResult> BoxFilterKernel::Stream(const Image& image,
                                                        const BoxFilterOptions& options,
                                                        const BoxFilterSink& sink) {
  return Filter(image, options, &sink);
}

absl::Status BoxFilterKernel::DeliverRows(const Buffer& rows, const ImageDesc& d, int y0,
                                          int count, const BoxFilterSink& sink) {
  const size_t stride = size_t(PackedTexelsPerRow(d)) * 16, row = d.row_bytes();
  const int piece_rows = int(std::max<size_t>(1, kSinkPieceBytes / row));
  if (stride != row) staging_.resize(size_t(std::min(piece_rows, count)) * row);
  absl::Status status;
  const bool mapped = rows.ReadMapped(0, size_t(count) * stride, [&](const uint8_t* device) {
    for (int r = 0; r < count && status.ok(); r += piece_rows) {
      const int n = std::min(piece_rows, count - r);
      const uint8_t* src = device + size_t(r) * stride;
      if (stride != row) {  // rows padded to whole texels: cut them
        for (int i = 0; i < n; ++i) std::memcpy(&staging_[size_t(i) * row], src + i * stride, row);
        src = staging_.data();
      }
      status = sink(BoxFilterRows{y0 + r, n, std::span<const uint8_t>(src, size_t(n) * row)});
    }
  });
  if (!mapped) return ctx_.MapError("the box filter's output rows");
  return status;
}

absl::StatusOr<BoxFilterResult> BoxFilterKernel::Filter(const Image& image,
                                                        const BoxFilterOptions& options,
                                                        const BoxFilterSink* sink) {
  const ImageDesc& d = image.desc();
  if (absl::Status s = ValidateImageDesc(d, ctx_.limits()); !s.ok()) return s;
  absl::StatusOr<BoxFilterOptions> resolved = ResolveBoxFilterOptions(d, options);
  if (!resolved.ok()) return resolved.status();
  const BoxFilterOptions& o = *resolved;
  BoxFilterVariant variant = ResolveBoxFilterVariant(ctx_.info(), d, o);
  int64_t limit = ctx_.limits().max_storage_block_bytes;
  if (o.tile_bytes > 0) limit = std::min(limit, o.tile_bytes);
  if (variant == BoxFilterVariant::kFusedStrips) {
    if (absl::Status s = box_filter_internal::FusedStripsSupports(d, o); !s.ok()) return s;
    BoxFilterResult result;
    result.variant = variant;
    absl::StatusOr<Image> out;
    if (sink == nullptr) {
      // The output is written once, into the result's packed form (its plain texture made only
      // if a kernel reads it); the copy counts as device time.
      out = Image::AllocatePacked(ctx_, d);
      if (!out.ok()) return out.status();
    }
    const box_filter_internal::FusedBandSink to_image = [&](const Buffer& rows, int y0,
                                                            int count) {
      GpuTimer timer;
      absl::Status s = out->CopyPackedRowsFromBuffer(ctx_, rows, 0, y0, count);
      result.gpu_ns += timer.StopAndRead();
      return s;
    };
    const box_filter_internal::FusedBandSink to_sink = [&](const Buffer& rows, int y0,
                                                           int count) {
      return DeliverRows(rows, d, y0, count, *sink);
    };
    if (absl::Status s = box_filter_internal::RunFusedStrips(
            ctx_, image, o, limit, fused_scratch_, sink == nullptr ? to_image : to_sink,
            &result.gpu_ns);
        !s.ok()) {
      return s;
    }
    if (sink == nullptr) result.image = *std::move(out);
    return result;
  }
  TilePlan plan = PlanTiles(variant, d, o, limit);
  if (!plan.ok && variant == BoxFilterVariant::kIntegral) {
    // The window reaches the whole image and its table exceeds one binding: row sums instead.
    variant = BoxFilterVariant::kSeparable;
    plan = PlanTiles(variant, d, o, limit);
  }
  if (!plan.ok) {
    return absl::ResourceExhaustedError(
        StrCat("a box filter tile of ", DescribeImage(d), " exceeds the storage binding limit"));
  }

  const bool wide = Wide(d, o);
  std::string defines;
  const char* name = "box_filter_sep_cols";
  switch (variant) {
    case BoxFilterVariant::kSharedTile:
      name = "box_filter_shared_tile";
      defines = Defines(d, StrCat(wide ? "#define WIDE 1\n" : "", "#define CW ",
                                  SharedChunkColumns(d, ctx_.limits()), "\n"));
      break;
    case BoxFilterVariant::kIntegral:
      name = "box_filter_integral";
      defines = Defines(d, StrCat(d.type == SampleType::kFloat32 ? "" : "#define WIDE 1\n",
                                  o.force_two_word ? "#define FORCE_TWO_WORD 1\n" : ""));
      break;
    default:
      defines = Defines(d, wide ? "#define WIDE 1\n" : "");
      break;
  }
  absl::StatusOr<GLuint> program = ctx_.Program(name, defines);
  if (!program.ok()) return program.status();
  GLuint rows_program = 0;
  if (variant == BoxFilterVariant::kSeparable) {
    absl::StatusOr<GLuint> p = ctx_.Program("box_filter_sep_rows", Defines(d, ""));
    if (!p.ok()) return p.status();
    rows_program = *p;
  }

  absl::StatusOr<Image> out = Image::Allocate(ctx_, d);
  if (!out.ok()) return out.status();
  const int64_t out_bytes = TileBytes(BoxFilterVariant::kSharedTile, d, o, plan.w, plan.h);
  Buffer out_buf = Buffer::Create(size_t(out_bytes));
  Buffer aux;
  if (variant != BoxFilterVariant::kSharedTile) {
    aux = Buffer::Create(size_t(TileBytes(variant, d, o, plan.w, plan.h)));
  }
  IntegralImageKernel integral(ctx_);
  const GlPixelFormat fmt = PixelFormatFor(d);
  const uint64_t area = Area(o);
  const int seg_x = std::clamp(2 * o.rx + 1, 32, 128);
  const int seg_y = std::clamp(2 * o.ry + 1, 32, 128);

  auto set_common = [&](GLuint p, int x0, int y0, int w, int h) {
    glUseProgram(p);
    glUniform2i(glGetUniformLocation(p, "u_size"), d.width, d.height);
    glUniform2i(glGetUniformLocation(p, "u_tile0"), x0, y0);
    glUniform2i(glGetUniformLocation(p, "u_tile_size"), w, h);
    SetInt(p, "u_out_pitch", int(RoundUp4(w)));
    SetInt(p, "u_rx", o.rx);
    SetInt(p, "u_ry", o.ry);
    SetInt(p, "u_border", box_filter_internal::ShaderBorder(o.border));
    glUniform1ui(glGetUniformLocation(p, "u_area"), GLuint(area));
    glUniform1d(glGetUniformLocation(p, "u_area_d"), double(area));
    box_filter_internal::SetSampleBits(p, d);
    const double value = o.border == BorderMode::kConstant ? o.border_value : 0.0;
    if (d.type == SampleType::kFloat32) {
      glUniform1f(glGetUniformLocation(p, "u_const"), float(value));
    } else {
      glUniform1ui(glGetUniformLocation(p, "u_const"), GLuint(value));
    }
  };

  BoxFilterResult result;
  result.variant = variant;
  for (int y0 = 0; y0 < d.height; y0 += plan.h) {
    for (int x0 = 0; x0 < d.width; x0 += plan.w) {
      const int w = std::min(plan.w, d.width - x0), h = std::min(plan.h, d.height - y0);
      // The source rectangle the tile's windows read (all of it, for windows beyond the image).
      const int lo_y = std::max(0, y0 - o.ry),
                hi_y = int(std::min<int64_t>(d.height - 1, int64_t{y0} + h - 1 + o.ry));
      const int lo_x = std::max(0, x0 - o.rx),
                hi_x = int(std::min<int64_t>(d.width - 1, int64_t{x0} + w - 1 + o.rx));
      if (variant == BoxFilterVariant::kIntegral) {
        absl::Status s =
            integral.ComputeOnDevice(image, lo_x, lo_y, hi_x - lo_x + 1, hi_y - lo_y + 1,
                                     IntegralImageVariant::kAuto, aux, &result.gpu_ns, o.force_two_word);
        if (!s.ok()) return s;
      }
      GpuTimer timer;
      image.Bind(0);
      out_buf.BindBase(0);
      if (aux) aux.BindBase(1);
      switch (variant) {
        case BoxFilterVariant::kSharedTile:
          set_common(*program, x0, y0, w, h);
          glDispatchCompute(GLuint(CeilDiv(w, kTile)), GLuint(CeilDiv(h, kTile)), 1);
          break;
        case BoxFilterVariant::kIntegral:
          set_common(*program, x0, y0, w, h);
          glUniform2i(glGetUniformLocation(*program, "u_src0"), lo_x, lo_y);
          glUniform2i(glGetUniformLocation(*program, "u_src_size"), hi_x - lo_x + 1,
                      hi_y - lo_y + 1);
          SetInt(*program, "u_pixels", 4);
          glDispatchCompute(GLuint(CeilDiv(w, 4 * 64)), GLuint(h), 1);
          break;
        default:
          set_common(rows_program, x0, y0, w, h);
          SetInt(rows_program, "u_src_y0", lo_y);
          SetInt(rows_program, "u_src_rows", hi_y - lo_y + 1);
          SetInt(rows_program, "u_seg", seg_x);
          glDispatchCompute(GLuint(CeilDiv(CeilDiv(w, seg_x), 8)),
                            GLuint(CeilDiv(hi_y - lo_y + 1, 8)), 1);
          glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
          set_common(*program, x0, y0, w, h);
          SetInt(*program, "u_src_y0", lo_y);
          SetInt(*program, "u_seg", seg_y);
          glDispatchCompute(GLuint(CeilDiv(CeilDiv(w, 4), 64)), GLuint(CeilDiv(h, seg_y)), 1);
          break;
      }
      // The tile's words into the output texture.
      glMemoryBarrier(GL_PIXEL_BUFFER_BARRIER_BIT | GL_TEXTURE_UPDATE_BARRIER_BIT);
      glPixelStorei(GL_UNPACK_ROW_LENGTH, int(RoundUp4(w)));
      glBindBuffer(GL_PIXEL_UNPACK_BUFFER, out_buf.get());
      glBindTexture(GL_TEXTURE_2D, out->texture());
      glTexSubImage2D(GL_TEXTURE_2D, 0, x0, y0, w, h, fmt.format, fmt.type, nullptr);
      glBindTexture(GL_TEXTURE_2D, 0);
      glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
      glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
      result.gpu_ns += timer.StopAndRead();
    }
  }
  glUseProgram(0);
  if (absl::Status s = ctx_.CheckGlError("box filter"); !s.ok()) return s;
  if (sink != nullptr) {
    // The other variants' result is a texture: downloaded, then handed over a piece at a time.
    const HostImage host = out->Download();
    const size_t row = d.row_bytes();
    const int piece_rows = int(std::max<size_t>(1, kSinkPieceBytes / row));
    for (int y = 0; y < d.height; y += piece_rows) {
      const int n = std::min(piece_rows, d.height - y);
      if (absl::Status s = (*sink)(BoxFilterRows{
              y, n, std::span<const uint8_t>(host.data.data() + size_t(y) * row, size_t(n) * row)});
          !s.ok()) {
        return s;
      }
    }
    return result;
  }
  result.image = std::move(*out);
  return result;
}

}  // namespace glimpse::gpu
