// Integral images (summed-area tables) on the GPU: exact 64-bit sums for 8/16-bit images, double
// for float images, streamed in row bands so tables larger than one storage binding still work.
//
// Float error bound: every variant forms S[y][x] by additions of the exact double values of the
// samples (or of their exact squares), each term passing through at most W + H + 16 additions, so
//   |S_gpu[y][x] - S[y][x]| <= 1.01 * (W + H + 16) * 2^-53 * sum_{j<=y, i<=x} |v[j][i]|
// (v*v for the squared table). The naive variant adds in the CPU reference's order: bit-equal.
//
//   IntegralImageKernel kernel(ctx);
//   absl::StatusOr<IntegralImageResult> r =
//       kernel.Run(image, {.squared = true}, [&](const IntegralBand& band) {
//         const std::span<const uint8_t> rows = band.bytes();
//         out.write(reinterpret_cast<const char*>(rows.data()), rows.size());
//         return absl::OkStatus();  // an error here stops the run and comes back in r
//       });
//   if (!r.ok()) return r.status();
//   // Whole tables in host vectors instead: ComputeIntegralImage(kernel, image, options).
#ifndef GLIMPSE_GPU_INTEGRAL_IMAGE_H_
#define GLIMPSE_GPU_INTEGRAL_IMAGE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/context.h"
#include "gpu/image.h"
#include "gpu/warm_up.h"

namespace glimpse::gpu {

enum class IntegralImageVariant {
  kAuto,
  kNaive,              // one invocation per row scans it, then one per column scans it
  kWorkEfficient,      // up-sweep/down-sweep scans in shared memory, rows then columns, block sums
  kScanTransposeScan,  // work-efficient row scan, tiled transpose, row scan, transpose back
  kStripScan,     // per-row strip offsets, then one invocation per 8-column strip walks down the
                  // band keeping the row above in registers: the table is written once, never read
  kPackedStrips,  // the strip scan reading the packed form (16 bytes per load), 16-sample strips,
                  // four table elements per store: for CPU renderers. 1, 2 or 4 channels.
  kSubgroupScan,  // work_efficient with its row pass done by subgroup (warp) ballots: each
                  // subgroup's prefix sums in registers, a bit of the samples per ballot, one
                  // barrier per block. 8- and 16-bit images, on devices with subgroup ballots
                  // (DeviceLimits::subgroup_ballot); refused otherwise.
};

std::string_view IntegralImageVariantName(
    IntegralImageVariant v);  // "naive", "work_efficient", ...
std::optional<IntegralImageVariant> ParseIntegralImageVariant(
    std::string_view name);  // "" or "auto": kAuto

struct IntegralImageOptions {
  bool squared = false;  // also compute the table of squared values (sum of v*v)
  // false: only the squared table (REQUIRES squared), for callers that make the two tables in
  // separate runs and would otherwise compute the sum table twice.
  bool sum_table = true;
  IntegralImageVariant variant = IntegralImageVariant::kAuto;
  // Cap on one band's bytes; 0: the device's storage-binding limit. Tests use small bands.
  int64_t band_bytes = 0;
  // Uses the two-word (uvec2 with carry) 64-bit arithmetic even where GL_ARB_gpu_shader_int64
  // exists, so that the fallback path is tested.
  bool force_two_word = false;
  // Lets the packed strips keep the tables of an 8-bit image in 4-byte elements on the device
  // (32-bit adds, half the bytes to store): each element mod 2^32. As a band is read back, each
  // row is rebuilt exactly from them (RowStepsFitUint32): its first element is below 2^32, and
  // each next one is the last plus a step below 2^32, the difference of their low words. Results
  // are the same either way; false keeps 8-byte elements (to compare the two). Not for 16-bit
  // images: their squared tables qualify only one row high, and their sum tables were not worth
  // four more programs in every cold start's warm-up.
  bool narrow_sums = true;
  // A part of the table: its rows [first_row, first_row + rows) (rows 0: to the last row), with
  // every element as in the whole table. `carry_row` is the table's row first_row - 1 (width *
  // channels 8-byte elements, of the squared table when only that is asked), as a run of the
  // rows above gave it; empty where first_row is 0. Borrowed: it must outlive the Run. A server
  // streams a table too large to hold in parts this way, keeping only the last row between them.
  int first_row = 0;
  int rows = 0;
  std::span<const uint8_t> carry_row = {};
};

// Element type of the tables: uint64 for uint8/uint16 inputs (exact), double for float32 inputs.
enum class IntegralElement { kUint64, kFloat64 };
IntegralElement IntegralElementFor(SampleType type);

// Inclusive table S[y][x][c] = sum over j<=y, i<=x of v[j][i][c], H x W x channels, channels
// interleaved like the image, row-major, little-endian 8-byte elements.
class IntegralBand {  // rows [y0, y0 + rows) of one table, y0 counted from the image's first row
 public:
  bool squared = false;  // false: the sum table; true: the squared-sum table
  int y0 = 0, rows = 0;

  size_t row_bytes() const { return row_bytes_; }  // width * channels * 8
  // Writes rows [first, first + n) of the band, 8-byte elements, to `dst` (n * row_bytes()
  // bytes): straight from the device's table, rebuilding 4-byte sums on the way, so that a
  // consumer's own memory (a response message) is written once.
  void CopyRows(int first, int n, uint8_t* dst) const;
  // The whole band as 8-byte elements: the device's table where it holds them, else rebuilt into
  // a host buffer the kernel reuses. Valid during the sink's call only.
  std::span<const uint8_t> bytes() const;
  // Whether the rows are rebuilt from 4-byte sums as they are read (CopyRows, bytes()); where
  // they are not, bytes() is the device's own rows and costs nothing.
  bool rebuilt() const { return narrow_; }

 private:
  friend class IntegralImageKernel;
  IntegralBand(bool sq, int first_row, int n, const uint8_t* src, size_t row_bytes, int channels,
               bool narrow, std::vector<uint8_t>* staging)
      : squared(sq),
        y0(first_row),
        rows(n),
        src_(src),
        row_bytes_(row_bytes),
        channels_(channels),
        narrow_(narrow),
        staging_(staging) {}
  const uint8_t* src_;  // the device's rows: 8-byte elements, or 4-byte sums where narrow_
  size_t row_bytes_;
  int channels_;
  bool narrow_;
  std::vector<uint8_t>* staging_;  // where bytes() rebuilds narrow rows
};

struct IntegralImageResult {
  IntegralImageVariant variant = IntegralImageVariant::kAuto;  // the variant that ran
  uint64_t gpu_ns = 0;  // GPU time of the dispatches (all bands)
  IntegralElement element = IntegralElement::kUint64;
  bool narrow_sums = false;  // a table was kept in 4-byte elements on the device
};

// Whether a table of an integer image (the squared table if `squared`) can be rebuilt exactly
// from its elements mod 2^32, row by row: a row's first element and each step along it are sums
// down one column, at most the largest sample (or its square) times the height, and must be
// below 2^32. For 8-bit images: 255 x height and 65025 x height, so every height up to 66051.
bool RowStepsFitUint32(const ImageDesc& desc, bool squared);
// Whether an 8-bit image as tall as the device takes (limits.max_texture_size) may be too tall
// for 4-byte sums, so that kAuto may run its tables in 8-byte elements: past 66051 rows. Devices
// measured take at most 32768 (llvmpipe 16384).
bool EightBitImagesMayNeedWideSums(const DeviceLimits& limits);

// Checks the options (band_bytes >= 0, a known variant); errors name the field and value.
absl::Status ValidateIntegralImageOptions(const IntegralImageOptions& options);

// Whether `device` runs `variant` on images of `type`: subgroup_scan needs subgroup ballots and
// an 8- or 16-bit image (its ballots count the bits of integer samples). The error names the
// variant and what is missing.
absl::Status IntegralImageVariantAvailable(const DeviceInfo& device, IntegralImageVariant variant,
                                           SampleType type);

// The variant kAuto runs. On CPU renderers (llvmpipe), measured (bench/results/
// integral_image_llvmpipe.md): the packed strips for every format and channel count (faster than
// the strip scan and the naive scans in every case measured but 3-channel uint8, a tie: it reads
// 16 bytes per image load and writes four table elements per storage access, where llvmpipe
// runs every storage access as a loop over the SIMD lanes). The work-efficient variants pay for a
// barrier per scan level and are 8-19x slower there. On GPUs the work-efficient scans (not
// measured here; reasoning): both passes read and write coalesced rows and keep partial sums in
// shared memory, where the naive and strip variants keep only H or W / 8 invocations busy with
// strided accesses, and scan-transpose-scan moves the table through two more passes. Never
// subgroup_scan until it has been timed on a GPU.
IntegralImageVariant ResolveIntegralImageVariant(const DeviceInfo& device, const ImageDesc& desc,
                                                 IntegralImageVariant requested);

// REQUIRES: ctx's thread; images were made in ctx.
class IntegralImageKernel {
 public:
  // Most bytes of table rows the sink receives at once (at least one row).
  static constexpr size_t kSinkPieceBytes = size_t{1} << 20;
  // The band table WarmUp leaves made and written (at most the binding limit): one table of a
  // 1920x1080 image of up to 2 channels fits (tables are made one at a time); larger ones grow
  // it at their first call.
  static constexpr int64_t kReservedTableBytes = int64_t{36} << 20;
  explicit IntegralImageKernel(Context& ctx) : ctx_(ctx) {}
  // Compiles every program the kernel may use for images of this sample type.
  absl::Status Prepare(SampleType type);
  // Builds and dispatches, once each on a small image, every program that kAuto can pick on this
  // context's device, for every sample type, channel count and `squared` (the programs' defines),
  // so that no later kAuto call builds a program or pays for the driver's compile at its first
  // dispatch. (force_two_word, a testing option, is not warmed; nor, for 8-bit images, the
  // 8-byte sums of narrow_sums = false, a comparison option, unless EightBitImagesMayNeedWideSums.)
  absl::Status WarmUp(WarmUpShare& share);  // the units `share` claims (gpu/warm_up.h)
  absl::Status WarmUp() {
    WarmUpShare all;
    return WarmUp(all);
  }
  // Streams the table(s) to `sink` in row bands, top to bottom (sum table first, then the squared
  // table if asked), so results larger than memory limits/one SSBO binding never exist whole.
  // A band is valid during the sink's call only (it reads the device's table, mapped, or a small
  // reused host buffer: bands of at most kSinkPieceBytes, or one row). A sink error stops the run
  // and is returned. options.first_row/rows/carry_row run a part of the table.
  absl::StatusOr<IntegralImageResult> Run(
      const Image& image, const IntegralImageOptions& options,
      const std::function<absl::Status(const IntegralBand&)>& sink);

  // The table of the w x h rectangle at (x0, y0) of `image` (the rectangle's own origin), left in
  // `table` from byte 0 on the device. REQUIRES: w * h * channels * 8 <= the binding limit and
  // table.bytes(). Adds the GPU time to *gpu_ns. Used by the box filter.
  absl::Status ComputeOnDevice(const Image& image, int x0, int y0, int w, int h,
                               IntegralImageVariant variant, const Buffer& table, uint64_t* gpu_ns,
                               bool force_two_word = false);

 private:
  struct Workspace;
  absl::Status RunBand(const Workspace& ws, int band_y0, int rows, bool first_band);
  // Reads the band's `rows` rows of `table` back (Context::readback()) and hands them to `sink` a
  // piece at a time (4-byte sums where narrow: IntegralBand rebuilds them).
  absl::Status DeliverBand(const Buffer& table, bool squared, int y0, int rows, int channels,
                           size_t row_bytes, bool narrow,
                           const std::function<absl::Status(const IntegralBand&)>& sink);
  // narrow: 4-byte sums, each element mod 2^32 (packed strips only; REQUIRES RowStepsFitUint32).
  absl::StatusOr<Workspace> MakeWorkspace(const Image& image, int x0, int y0, int w, int rows_max,
                                          IntegralImageVariant variant, bool squared, bool two_word,
                                          bool narrow = false);

  Context& ctx_;
  // The band table of the last Run, kept for the next (at most one band: the binding limit), so
  // that repeat calls write into memory that is already mapped: on CPU renderers a fresh buffer
  // faults in every page during the dispatch.
  Buffer table_;
  // The passes' work buffers, kept the same way (a fresh buffer per call also costs the driver an
  // allocation): the carries between bands, the strips' or blocks' sums, the transposed band.
  struct WorkBuffers {
    Buffer carry[2], sums, scratch;
  };
  WorkBuffers work_;
  // Where IntegralBand::bytes() rebuilds a piece of a band of 4-byte sums (at most
  // kSinkPieceBytes, or one row) for a sink that asks for the whole piece rather than copying its
  // rows out (CopyRows); kept so that calls do not fault in fresh pages for it.
  std::vector<uint8_t> staging_;
};

// Convenience for tests/bench: collects whole tables (uint64 for integer images, double for
// float images; the squared table only when asked).
struct IntegralTables {
  IntegralImageResult info;
  std::vector<uint64_t> sum_u, sq_u;
  std::vector<double> sum_f, sq_f;
};
absl::StatusOr<IntegralTables> ComputeIntegralImage(IntegralImageKernel& kernel, const Image& image,
                                                    const IntegralImageOptions& options);

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_INTEGRAL_IMAGE_H_
