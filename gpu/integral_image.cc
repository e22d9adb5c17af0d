#include "gpu/integral_image.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "common/str.h"
#include "gpu/internal/integral_image_passes.h"
#include "gpu/internal/variant_check.h"

namespace glimpse::gpu {
namespace {

using integral_internal::kColBlock;
using integral_internal::kElem;
using integral_internal::kPackedMaxRows;
using integral_internal::kRowBlock;
using integral_internal::PackedStripsFit;

constexpr IntegralImageVariant kConcreteIntegralImageVariants[] = {
    IntegralImageVariant::kNaive,
    IntegralImageVariant::kWorkEfficient,
    IntegralImageVariant::kScanTransposeScan,
    IntegralImageVariant::kStripScan,
    IntegralImageVariant::kPackedStrips,
    IntegralImageVariant::kSubgroupScan};

// The variant `requested` resolves to for `desc` on `device`, or why the device cannot run it.
absl::StatusOr<IntegralImageVariant> RunnableVariant(const DeviceInfo& device,
                                                     const ImageDesc& desc,
                                                     IntegralImageVariant requested) {
  const IntegralImageVariant v = ResolveIntegralImageVariant(device, desc, requested);
  if (absl::Status s = IntegralImageVariantAvailable(device, v, desc.type); !s.ok()) return s;
  return v;
}

// The exact table rows from their elements mod 2^32 (`lo`, n rows of `row_elems` 4-byte elements,
// C channels interleaved) into `out` (8-byte elements). Exact where every row's first element and
// every step along a row (a column's sum down to the row) is below 2^32 (RowStepsFitUint32): the
// first element is then its own value, and each next one the last plus the step, which is the
// difference of their low words mod 2^32.
template <int C>
void DecodeRows(const uint8_t* lo, int n, size_t row_elems, uint8_t* out) {
  for (size_t r = 0; r < size_t(n); ++r) {
    uint32_t prev[C] = {};
    uint64_t acc[C] = {};
    const uint8_t* in = lo + 4 * r * row_elems;
    uint8_t* to = out + kElem * r * row_elems;
    for (size_t x = 0; x < row_elems; x += C) {
      for (int c = 0; c < C; ++c) {
        uint32_t v;
        std::memcpy(&v, in + 4 * (x + c), 4);
        acc[c] += uint32_t(v - prev[c]);
        prev[c] = v;
        std::memcpy(to + kElem * (x + c), &acc[c], kElem);
      }
    }
  }
}

void DecodeRows(const uint8_t* lo, int n, size_t row_elems, int channels, uint8_t* out) {
  switch (channels) {
    case 1:
      return DecodeRows<1>(lo, n, row_elems, out);
    case 2:
      return DecodeRows<2>(lo, n, row_elems, out);
    case 3:
      return DecodeRows<3>(lo, n, row_elems, out);
    default:
      return DecodeRows<4>(lo, n, row_elems, out);
  }
}

}  // namespace

void IntegralBand::CopyRows(int first, int n, uint8_t* dst) const {
  if (!narrow_) {
    std::memcpy(dst, src_ + size_t(first) * row_bytes_, size_t(n) * row_bytes_);
    return;
  }
  DecodeRows(src_ + size_t(first) * row_bytes_ / 2, n, row_bytes_ / kElem, channels_, dst);
}

std::span<const uint8_t> IntegralBand::bytes() const {
  const size_t size = size_t(rows) * row_bytes_;
  if (!narrow_) return std::span<const uint8_t>(src_, size);
  if (staging_->size() < size) staging_->resize(size);
  CopyRows(0, rows, staging_->data());
  return std::span<const uint8_t>(staging_->data(), size);
}

namespace {

bool ValidSampleType(SampleType t) {
  return t == SampleType::kUint8 || t == SampleType::kUint16 || t == SampleType::kFloat32;
}

// The part options.first_row/rows/carry_row asks for, checked against the image's height and
// its table's row bytes.
absl::Status ValidatePart(const IntegralImageOptions& o, int height, size_t row_bytes) {
  if (o.first_row < 0 || o.first_row >= height) {
    return absl::InvalidArgumentError(
        StrCat("first_row must be in [0, ", height, ") for this image, got ", o.first_row));
  }
  if (o.rows < 0 || o.rows > height - o.first_row) {
    return absl::InvalidArgumentError(StrCat("rows must be in [0, ", height - o.first_row,
                                             "] from first_row ", o.first_row, ", got ", o.rows));
  }
  if (o.first_row == 0 && !o.carry_row.empty()) {
    return absl::InvalidArgumentError(
        StrCat("carry_row must be empty where first_row is 0, got ", o.carry_row.size(), " bytes"));
  }
  if (o.first_row > 0 && o.carry_row.size() != row_bytes) {
    return absl::InvalidArgumentError(StrCat("carry_row must hold the table's row above first_row ",
                                             o.first_row, " (", row_bytes, " bytes), got ",
                                             o.carry_row.size(), " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view IntegralImageVariantName(IntegralImageVariant v) {
  switch (v) {
    case IntegralImageVariant::kAuto:
      return "auto";
    case IntegralImageVariant::kNaive:
      return "naive";
    case IntegralImageVariant::kWorkEfficient:
      return "work_efficient";
    case IntegralImageVariant::kScanTransposeScan:
      return "scan_transpose_scan";
    case IntegralImageVariant::kStripScan:
      return "strip_scan";
    case IntegralImageVariant::kPackedStrips:
      return "packed_strips";
    case IntegralImageVariant::kSubgroupScan:
      return "subgroup_scan";
  }
  return "unknown";
}

std::optional<IntegralImageVariant> ParseIntegralImageVariant(std::string_view name) {
  if (name.empty() || name == "auto") return IntegralImageVariant::kAuto;
  for (IntegralImageVariant v : kConcreteIntegralImageVariants) {
    if (IntegralImageVariantName(v) == name) return v;
  }
  return std::nullopt;
}

bool RowStepsFitUint32(const ImageDesc& desc, bool squared) {
  if (desc.type != SampleType::kUint8 && desc.type != SampleType::kUint16) return false;
  const uint64_t max_sample = desc.type == SampleType::kUint8 ? 255 : 65535;
  const uint64_t max_value = squared ? max_sample * max_sample : max_sample;
  return max_value * uint64_t(desc.height) <= UINT32_MAX;
}

bool EightBitImagesMayNeedWideSums(const DeviceLimits& limits) {
  return !RowStepsFitUint32({1, limits.max_texture_size, 1, SampleType::kUint8}, true);
}

IntegralElement IntegralElementFor(SampleType type) {
  return type == SampleType::kFloat32 ? IntegralElement::kFloat64 : IntegralElement::kUint64;
}

absl::Status ValidateIntegralImageOptions(const IntegralImageOptions& o) {
  if (o.band_bytes < 0) {
    return absl::InvalidArgumentError(
        StrCat("band_bytes must be >= 0 (0: the device limit), got ", o.band_bytes));
  }
  if (!o.sum_table && !o.squared) {
    return absl::InvalidArgumentError(
        "sum_table = false asks for the squared table alone, so squared must be true, got false");
  }
  return CheckVariant(o.variant, kConcreteIntegralImageVariants, IntegralImageVariantName);
}

absl::Status IntegralImageVariantAvailable(const DeviceInfo& device, IntegralImageVariant variant,
                                           SampleType type) {
  if (variant != IntegralImageVariant::kSubgroupScan) return absl::OkStatus();
  if (absl::Status s = RequireSubgroupBallots(device, IntegralImageVariantName(variant)); !s.ok()) {
    return s;
  }
  if (type != SampleType::kUint8 && type != SampleType::kUint16) {
    return absl::InvalidArgumentError(
        StrCat("variant subgroup_scan takes 8- and 16-bit images, got ", SampleTypeName(type),
               " samples; use auto or another variant"));
  }
  return absl::OkStatus();
}

IntegralImageVariant ResolveIntegralImageVariant(const DeviceInfo& device,
                                                 const ImageDesc& /*desc*/,
                                                 IntegralImageVariant requested) {
  if (requested != IntegralImageVariant::kAuto) return requested;
  if (!device.cpu_variants) return IntegralImageVariant::kWorkEfficient;
  return IntegralImageVariant::kPackedStrips;
}

absl::Status IntegralImageKernel::Prepare(SampleType type) {
  if (!ValidSampleType(type)) {
    return absl::InvalidArgumentError(StrCat("unsupported sample type #", static_cast<int>(type)));
  }
  for (int c = 1; c <= 4; ++c) {
    absl::StatusOr<Image> probe = Image::Allocate(ctx_, {1, 1, c, type});
    if (!probe.ok()) return probe.status();
    for (IntegralImageVariant v : kConcreteIntegralImageVariants) {
      if (!IntegralImageVariantAvailable(ctx_.info(), v, type).ok()) continue;
      for (bool squared : {false, true}) {
        absl::StatusOr<Workspace> ws = MakeWorkspace(*probe, 0, 0, 1, 1, v, squared, false);
        if (!ws.ok()) return ws.status();
      }
    }
    for (bool squared : {false, true}) {  // 4-byte sums: 8-bit images only
      if (type != SampleType::kUint8) continue;
      absl::StatusOr<Workspace> ws = MakeWorkspace(
          *probe, 0, 0, 1, 1, IntegralImageVariant::kPackedStrips, squared, false, /*narrow=*/true);
      if (!ws.ok()) return ws.status();
    }
  }
  return absl::OkStatus();
}

absl::Status IntegralImageKernel::WarmUp(WarmUpShare& share) {
  // Wide and tall enough that the work-efficient scans dispatch their block-sum and add passes
  // (more than one 512-pixel row block and one 64-row column block).
  constexpr int kWidth = kRowBlock + 1, kHeight = kColBlock + 1;
  auto sink = [](const IntegralBand&) { return absl::OkStatus(); };
  for (SampleType type : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
    for (int channels = 1; channels <= 4; ++channels) {
      if (!share.Claim()) continue;
      const ImageDesc desc = WarmUpShape(type, channels, kWidth, kHeight);
      absl::StatusOr<Image> image = Image::Upload(ctx_, HostImage::Zeros(desc));
      if (!image.ok()) return image.status();
      // squared = true runs the sum table's programs, then the squared table's. Where they were
      // kept in 4-byte elements (narrow_sums: 8-bit images), the 8-byte ones run once more if
      // this device takes an image too tall for 4-byte sums (otherwise they would be 4 more
      // programs, 6 s of a 2-core llvmpipe warm-up, that no call runs).
      for (bool narrow : {true, false}) {
        absl::StatusOr<IntegralImageResult> r =
            Run(*image, {.squared = true, .narrow_sums = narrow}, sink);
        if (!r.ok()) return r.status();
        if (!r->narrow_sums || !EightBitImagesMayNeedWideSums(ctx_.limits())) break;
      }
    }
  }
  // The band table, made and written now at kReservedTableBytes, so that the first calls after
  // start-up do not pay for a fresh buffer's memory (on llvmpipe a page fault per 4 KiB).
  const size_t reserved =
      size_t(std::min<int64_t>(kReservedTableBytes, ctx_.limits().max_storage_block_bytes));
  if (!table_ || table_.bytes() < reserved) {
    table_ = Buffer();
    table_ = Buffer::Create(reserved);
    table_.Zero();
  }
  return ctx_.CheckGlError("reserving the integral table");
}

absl::StatusOr<IntegralImageResult> IntegralImageKernel::Run(
    const Image& image, const IntegralImageOptions& options,
    const std::function<absl::Status(const IntegralBand&)>& sink) {
  const ImageDesc& desc = image.desc();
  if (!ValidSampleType(desc.type)) {
    return absl::InvalidArgumentError(
        StrCat("unsupported sample type #", static_cast<int>(desc.type)));
  }
  if (absl::Status s = ValidateImageDesc(desc, ctx_.limits()); !s.ok()) return s;
  if (absl::Status s = ValidateIntegralImageOptions(options); !s.ok()) return s;
  const absl::StatusOr<IntegralImageVariant> runnable =
      RunnableVariant(ctx_.info(), desc, options.variant);
  if (!runnable.ok()) return runnable.status();
  const IntegralImageVariant variant = *runnable;

  const int64_t row_bytes = int64_t{desc.width} * desc.channels * kElem;
  if (absl::Status s = ValidatePart(options, desc.height, size_t(row_bytes)); !s.ok()) return s;
  const int first_row = options.first_row;
  const int end_row = options.rows > 0 ? first_row + options.rows : desc.height;
  int64_t band_limit = ctx_.limits().max_storage_block_bytes;
  if (options.band_bytes > 0) band_limit = std::min(band_limit, options.band_bytes);
  if (row_bytes > band_limit) {
    return absl::InvalidArgumentError(StrCat("band_bytes must hold one table row (", row_bytes,
                                             " bytes for a ", DescribeImage(desc), " image), got ",
                                             band_limit));
  }
  int rows_max = int(std::min<int64_t>(end_row - first_row, band_limit / row_bytes));
  if (variant == IntegralImageVariant::kPackedStrips) {
    rows_max = std::min(rows_max, kPackedMaxRows);
    if (absl::Status s = image.EnsurePacked(ctx_); !s.ok()) return s;
  }

  IntegralImageResult result;
  result.variant = variant;
  result.element = IntegralElementFor(desc.type);
  for (bool squared : {false, true}) {
    if (squared && !options.squared) break;
    if (!squared && !options.sum_table) continue;
    const bool narrow = variant == IntegralImageVariant::kPackedStrips && options.narrow_sums &&
                        !options.force_two_word && desc.type == SampleType::kUint8 &&
                        RowStepsFitUint32(desc, squared);
    result.narrow_sums = result.narrow_sums || narrow;
    absl::StatusOr<Workspace> ws = MakeWorkspace(image, 0, first_row, desc.width, rows_max, variant,
                                                 squared, options.force_two_word, narrow);
    if (!ws.ok()) return ws.status();
    // The first band starts from the row above the part, where the caller gave it (the first
    // band's carry_in: RunBand alternates the two buffers from carry[0]).
    const bool carried = !options.carry_row.empty();
    if (carried) ws->carry[0]->Upload(0, options.carry_row.size(), options.carry_row.data());
    const size_t table_bytes = size_t(rows_max) * size_t(row_bytes);
    if (!table_ || table_.bytes() < table_bytes) {
      table_ = Buffer();
      table_ = Buffer::Create(table_bytes);
    }
    ws->table = &table_;
    // The packed variant reads only the packed form: binding the plain texture would make it.
    if (variant != IntegralImageVariant::kPackedStrips) image.Bind(0);
    for (int y0 = 0; first_row + y0 < end_row; y0 += rows_max) {
      const int rows = std::min(rows_max, end_row - first_row - y0);
      GpuTimer timer;
      if (absl::Status s = RunBand(*ws, y0, rows, y0 == 0 && !carried); !s.ok()) return s;
      result.gpu_ns += timer.StopAndRead();
      glUseProgram(0);
      if (absl::Status s = DeliverBand(*ws->table, squared, first_row + y0, rows, desc.channels,
                                       size_t(row_bytes), narrow, sink);
          !s.ok()) {
        return s;
      }
    }
  }
  return result;
}

absl::Status IntegralImageKernel::DeliverBand(
    const Buffer& table, bool squared, int y0, int rows, int channels, size_t row_bytes,
    bool narrow, const std::function<absl::Status(const IntegralBand&)>& sink) {
  const size_t device_row_bytes = narrow ? row_bytes / 2 : row_bytes;
  const int piece_rows = int(std::max<size_t>(1, kSinkPieceBytes / row_bytes));
  absl::Status status;
  const bool read = ctx_.readback().Read(
      table, size_t(rows) * device_row_bytes, size_t(piece_rows) * device_row_bytes,
      [&](const uint8_t* src, size_t at, size_t bytes) {
        const int r = int(at / device_row_bytes), n = int(bytes / device_row_bytes);
        status =
            sink(IntegralBand(squared, y0 + r, n, src, row_bytes, channels, narrow, &staging_));
        return status.ok();
      });
  if (!read) return ctx_.MapError("a band of the integral table");
  if (absl::Status s = ctx_.CheckGlError("integral image"); !s.ok()) return s;
  return status;
}

absl::Status IntegralImageKernel::ComputeOnDevice(const Image& image, int x0, int y0, int w, int h,
                                                  IntegralImageVariant variant, const Buffer& table,
                                                  uint64_t* gpu_ns, bool force_two_word) {
  const absl::StatusOr<IntegralImageVariant> runnable =
      RunnableVariant(ctx_.info(), image.desc(), variant);
  if (!runnable.ok()) return runnable.status();
  variant = *runnable;
  if (variant == IntegralImageVariant::kPackedStrips) {
    if (!PackedStripsFit(image.desc(), x0) || h > kPackedMaxRows) {
      variant = IntegralImageVariant::kStripScan;
    } else if (absl::Status s = image.EnsurePacked(ctx_); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<Workspace> ws = MakeWorkspace(image, x0, y0, w, h, variant, false, force_two_word);
  if (!ws.ok()) return ws.status();
  ws->table = &table;
  if (variant != IntegralImageVariant::kPackedStrips) image.Bind(0);
  GpuTimer timer;
  absl::Status s = RunBand(*ws, 0, h, true);
  *gpu_ns += timer.StopAndRead();
  glUseProgram(0);
  if (!s.ok()) return s;
  return ctx_.CheckGlError("integral image (device)");
}

absl::StatusOr<IntegralTables> ComputeIntegralImage(IntegralImageKernel& kernel, const Image& image,
                                                    const IntegralImageOptions& options) {
  const ImageDesc& d = image.desc();
  const size_t n = size_t(d.width) * size_t(d.height) * size_t(d.channels);
  const size_t row = size_t(d.width) * size_t(d.channels);
  IntegralTables t;
  const bool f = d.type == SampleType::kFloat32;
  auto sink = [&](const IntegralBand& band) -> absl::Status {
    void* dst = nullptr;
    if (f) {
      std::vector<double>& v = band.squared ? t.sq_f : t.sum_f;
      if (v.empty()) v.resize(n);
      dst = v.data() + size_t(band.y0) * row;
    } else {
      std::vector<uint64_t>& v = band.squared ? t.sq_u : t.sum_u;
      if (v.empty()) v.resize(n);
      dst = v.data() + size_t(band.y0) * row;
    }
    band.CopyRows(0, band.rows, static_cast<uint8_t*>(dst));
    return absl::OkStatus();
  };
  absl::StatusOr<IntegralImageResult> r = kernel.Run(image, options, sink);
  if (!r.ok()) return r.status();
  t.info = *r;
  return t;
}

}  // namespace glimpse::gpu
