#include "gpu/box_filter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/str.h"
#include "gpu/internal/box_filter_llvmpipe.h"
#include "gpu/reference/box_filter.h"
#include "tests/gpu/describe.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

constexpr BoxFilterVariant kBoxFilterVariants[] = {
    BoxFilterVariant::kSharedTile, BoxFilterVariant::kSeparable, BoxFilterVariant::kIntegral,
    BoxFilterVariant::kFusedStrips};
constexpr BorderMode kBorders[] = {BorderMode::kReplicate, BorderMode::kReflect101,
                                   BorderMode::kConstant};

// The stated float bounds of gpu/box_filter.h, doubled (the reference has its own rounding): a
// part relative to the output `ref` and a part from the image's largest and summed magnitudes,
// which are measured once per image (a scan per output sample made the larger tests quadratic).
class FloatTolerance {
 public:
  FloatTolerance(const HostImage& img, const BoxFilterOptions& o) {
    const ImageDesc& d = img.desc;
    double v = o.border == BorderMode::kConstant ? std::abs(o.border_value) : 0, a = 0;
    for (int y = 0; y < d.height; ++y) {
      for (int x = 0; x < d.width; ++x) {
        for (int c = 0; c < d.channels; ++c) {
          v = std::max(v, std::abs(img.value(x, y, c)));
          a += std::abs(img.value(x, y, c));
        }
      }
    }
    fixed_ = std::ldexp(v, -30);
    if (o.variant == BoxFilterVariant::kIntegral) {
      const double area = double(2 * o.rx + 1) * double(2 * o.ry + 1);
      const double cx = 12 * (2 + (2.0 * o.rx + 2) / std::max(1, 2 * d.width - 2));
      const double cy = 12 * (2 + (2.0 * o.ry + 2) / std::max(1, 2 * d.height - 2));
      a += area * std::abs(o.border_value);
      fixed_ += 2 * std::ldexp((d.width + d.height + 17) * cx * cy * a / area, -52);
    }
  }
  double operator()(double ref) const { return std::ldexp(std::abs(ref), -23) + fixed_; }

 private:
  double fixed_ = 0;
};

// The image's rows as Stream() hands them over, checked to come top to bottom, whole rows, in
// pieces of at most kSinkPieceBytes (or one row).
std::vector<uint8_t> StreamRows(BoxFilterKernel& kernel, const Image& image,
                                const BoxFilterOptions& o, const std::string& what) {
  std::vector<uint8_t> rows;
  int next = 0;
  const size_t row = image.desc().row_bytes();
  absl::StatusOr<BoxFilterResult> r = kernel.Stream(image, o, [&](const BoxFilterRows& piece) {
    EXPECT_EQ(piece.y0, next) << what;
    EXPECT_GE(piece.rows, 1) << what;
    EXPECT_EQ(piece.bytes.size(), size_t(piece.rows) * row) << what;
    EXPECT_TRUE(piece.rows == 1 || piece.bytes.size() <= BoxFilterKernel::kSinkPieceBytes)
        << what << ": a piece of " << piece.bytes.size() << " bytes";
    next = piece.y0 + piece.rows;
    rows.insert(rows.end(), piece.bytes.begin(), piece.bytes.end());
    return absl::OkStatus();
  });
  EXPECT_TRUE(r.ok()) << what << ": " << r.status();
  EXPECT_EQ(next, image.desc().height) << what;
  return rows;
}

void Check(BoxFilterKernel& kernel, Context& ctx, const HostImage& host,
           const BoxFilterOptions& o) {
  const std::string what = Describe(host.desc, o);
  if (o.variant == BoxFilterVariant::kFusedStrips &&
      !box_filter_internal::FusedStripsSupports(host.desc, o).ok()) {
    return;  // refusals are checked in FusedStripsRefusesWhatItCannotFilter
  }
  absl::StatusOr<Image> img = Image::Upload(ctx, host);
  ASSERT_TRUE(img.ok()) << img.status();
  absl::StatusOr<BoxFilterResult> gpu = kernel.Run(*img, o);
  ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
  EXPECT_EQ(gpu->variant, o.variant) << what;
  ASSERT_EQ(gpu->image.desc(), host.desc);
  absl::StatusOr<HostImage> ref = reference::BoxFilter(host, o);
  ASSERT_TRUE(ref.ok()) << ref.status();
  HostImage got = gpu->image.Download();
  // Streamed rows come another way: the fused strips' mapped bands, the tiles' output buffers
  // read band by band (checked where tiles are small, so that bands hold several tiles).
  if (o.variant == BoxFilterVariant::kFusedStrips || o.tile_bytes > 0) {
    EXPECT_EQ(StreamRows(kernel, *img, o, what), got.data) << what << ": streamed rows";
  }
  if (host.desc.type != SampleType::kFloat32) {
    if (got.data == ref->data) return;
    int bad = 0;
    for (int y = 0; y < host.desc.height && bad < 5; ++y) {
      for (int x = 0; x < host.desc.width && bad < 5; ++x) {
        for (int c = 0; c < host.desc.channels; ++c) {
          if (got.value(x, y, c) != ref->value(x, y, c)) {
            ADD_FAILURE() << what << " at (" << x << ", " << y << ", " << c
                          << "): " << got.value(x, y, c) << ", want " << ref->value(x, y, c);
            ++bad;
          }
        }
      }
    }
    return;
  }
  const FloatTolerance tolerance(host, o);
  int bad = 0;
  for (int y = 0; y < host.desc.height && bad < 5; ++y) {
    for (int x = 0; x < host.desc.width && bad < 5; ++x) {
      for (int c = 0; c < host.desc.channels; ++c) {
        const double g = got.value(x, y, c), r = ref->value(x, y, c);
        const double tol = tolerance(r);
        if (!(std::abs(g - r) <= tol)) {
          ADD_FAILURE() << what << " at (" << x << ", " << y << ", " << c << "): " << g << ", want "
                        << r << " +- " << tol;
          ++bad;
        }
      }
    }
  }
}

double BorderValueFor(SampleType t, std::mt19937_64& rng) {
  switch (t) {
    case SampleType::kUint8:
      return double(rng() % 256);
    case SampleType::kUint16:
      return double(rng() % 65536);
    case SampleType::kFloat32:
      break;
  }
  return 1.75;
}

TEST(BoxFilterTest, MatchesReferenceEveryFormatBorderRadiusAndVariant) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  BoxFilterKernel kernel(ctx);
  // 1x1, one row, one column, primes, the tile (16) +- 1.
  const std::pair<int, int> sizes[] = {{1, 1}, {23, 1}, {1, 19}, {17, 15}, {13, 7}};
  for (SampleType t : testing::kSampleTypes) {
    for (int c = 1; c <= 4; ++c) {
      for (auto [w, h] : sizes) {
        ImageDesc d{w, h, c, t};
        HostImage host = testing::RandomImage(d, rng);
        // 0, 1, the tile size, uneven, and larger than the image (several reflections).
        const std::pair<int, int> radii[] = {{0, 0}, {1, 1}, {16, 16}, {2, 0}, {2 * w + 3, h + 5}};
        for (auto [rx, ry] : radii) {
          for (BorderMode b : kBorders) {
            for (BoxFilterVariant v : kBoxFilterVariants) {
              Check(kernel, ctx, host,
                    {.rx = rx,
                     .ry = ry,
                     .border = b,
                     .border_value = BorderValueFor(t, rng),
                     .variant = v});
            }
          }
        }
      }
    }
  }
}

TEST(BoxFilterTest, LargerImagesAndRadiiEveryVariant) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  BoxFilterKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes) {
    ImageDesc d{101, 47, 3, t};
    HostImage host = testing::RandomImage(d, rng);
    // Several shared-memory chunks of apron rows (ry 31) and columns (rx 60), and a radius one
    // past the image (ry 47: two reflections).
    for (auto [rx, ry] : {std::pair{7, 31}, {60, 3}, {1, 47}}) {
      for (BorderMode b : kBorders) {
        for (BoxFilterVariant v : kBoxFilterVariants) {
          Check(kernel, ctx, host,
                {.rx = rx,
                 .ry = ry,
                 .border = b,
                 .border_value = BorderValueFor(t, rng),
                 .variant = v});
        }
      }
    }
  }
}

// Many strips and runs of rows for the fused strips (interior strips take the path without border
// mapping), every channel count, radii whose sums need 16- and 32-bit vertical fields and a
// 32-bit multiply-shift product, on random and on saturated images.
TEST(BoxFilterTest, FusedStripsManyStripsAndRowRuns) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  BoxFilterKernel kernel(ctx);
  for (int c = 1; c <= 4; ++c) {
    ImageDesc d{523, 301, c, SampleType::kUint8};
    HostImage random = testing::RandomImage(d, rng);
    HostImage full = random;
    std::fill(full.data.begin(), full.data.end(), uint8_t{255});
    for (auto [rx, ry] : {std::pair{1, 1}, {7, 7}, {32, 32}, {3, 130}, {0, 2}}) {
      for (BorderMode b : kBorders) {
        for (const HostImage* host : {&random, &full}) {
          Check(kernel, ctx, *host,
                {.rx = rx,
                 .ry = ry,
                 .border = b,
                 .border_value = host == &full ? 255 : BorderValueFor(d.type, rng),
                 .variant = BoxFilterVariant::kFusedStrips});
        }
      }
    }
  }
}

// On a GPU the streamed rows are copied out of the device's buffer rather than read through a
// mapping (DeviceLimits::read_path): those paths, forced on this renderer, on rows of several
// pieces (kSinkPieceBytes) with rows padded to whole texels and not.
TEST(BoxFilterTest, GpuReadPathsMatchReference) {
  GLIMPSE_REQUIRE_DEVICE();
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  testing::OnGpuReadPathContexts([&](Context& own) {
    BoxFilterKernel kernel(own);
    for (auto [w, c] : {std::pair{700, 4}, {1001, 3}, {1499, 1}}) {
      const ImageDesc d{w, 509, c, SampleType::kUint8};
      ASSERT_GT(d.bytes(), 2 * BoxFilterKernel::kSinkPieceBytes / 3);
      const HostImage host = testing::RandomImage(d, rng);
      Check(kernel, own, host,
            {.rx = 3,
             .ry = 2,
             .border = BorderMode::kReflect101,
             .variant = BoxFilterVariant::kFusedStrips});
      Check(kernel, own, host,
            {.rx = 2,
             .ry = 3,
             .border = BorderMode::kReflect101,
             .variant = BoxFilterVariant::kSeparable,
             .tile_bytes = 200000});
    }
  });
}

// Past rx 7 the fused strips take rx as a uniform, one program per channel count and byte of a
// texel where a window's edge falls: rx 8-23 meet every such byte for every channel count, with
// random window heights, each border, images narrower than the window and wider than a strip.
TEST(BoxFilterTest, FusedStripsWithRxAsAUniformMeetEveryEdgeByte) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  BoxFilterKernel kernel(ctx);
  for (int c = 1; c <= 4; ++c) {
    for (int w : {5, 347}) {
      HostImage host = testing::RandomImage({w, 23, c, SampleType::kUint8}, rng);
      for (int rx = 8; rx <= kAutoFusedStripsMaxRx; rx += rx < 23 ? 1 : 9) {
        const BorderMode b = kBorders[size_t(rx) % std::size(kBorders)];
        Check(kernel, ctx, host,
              {.rx = rx,
               .ry = int(rng() % 128),
               .border = b,
               .border_value = BorderValueFor(SampleType::kUint8, rng),
               .variant = BoxFilterVariant::kFusedStrips});
      }
    }
  }
}

// The fused strips write only the result's packed form: Download() reads it (dropping the rows'
// padding), and a kernel reading the plain texture gets one made from it, with the same pixels.
TEST(BoxFilterTest, FusedStripsResultReadsTheSameInEitherForm) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  BoxFilterKernel kernel(ctx);
  for (int c = 1; c <= 4; ++c) {
    // 37 pixels: rows of 37 c bytes, padded in the packed form; 64: no padding.
    for (int w : {37, 64}) {
      HostImage host = testing::RandomImage({w, 19, c, SampleType::kUint8}, rng);
      const std::string what = StrCat(DescribeImage(host.desc));
      absl::StatusOr<Image> img = Image::Upload(ctx, host);
      ASSERT_TRUE(img.ok()) << img.status();
      const BoxFilterOptions fused{.rx = 2, .ry = 1, .variant = BoxFilterVariant::kFusedStrips};
      const BoxFilterOptions separable{.rx = 1, .ry = 2, .variant = BoxFilterVariant::kSeparable};
      absl::StatusOr<HostImage> once = reference::BoxFilter(host, fused);
      ASSERT_TRUE(once.ok()) << once.status();
      absl::StatusOr<HostImage> twice = reference::BoxFilter(*once, separable);
      ASSERT_TRUE(twice.ok()) << twice.status();

      absl::StatusOr<BoxFilterResult> a = kernel.Run(*img, fused);
      ASSERT_TRUE(a.ok()) << a.status();
      EXPECT_EQ(a->image.Download().data, once->data) << what << ": packed form";
      // The separable sums read the plain texture, made here from the packed form.
      absl::StatusOr<BoxFilterResult> b = kernel.Run(a->image, separable);
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(b->image.Download().data, twice->data) << what << ": plain texture";
      EXPECT_EQ(a->image.Download().data, once->data) << what << ": plain texture read back";
      absl::StatusOr<Image> rows = a->image.CopyRows(ctx, 3, 7);
      ASSERT_TRUE(rows.ok()) << rows.status();
      const size_t row = host.desc.row_bytes();
      EXPECT_EQ(rows->Download().data,
                std::vector<uint8_t>(once->data.begin() + 3 * row, once->data.begin() + 10 * row))
          << what << ": rows copied";
    }
  }
}

// Stream() hands over the rows without a result image: straight from the fused strips' output
// buffer (rows padded to whole texels cut to the image's own) or from the tiled variants' (tiles
// as wide as the image: rows padded to 4 pixels cut likewise); several pieces for larger images;
// a sink's error stops the run. One kernel throughout: its kept buffers serve every size.
TEST(BoxFilterTest, StreamHandsOverTheRowsInPieces) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  BoxFilterKernel kernel(ctx);
  // 4099 x 3 bytes a row (padded in the packed form), 4096 x 4 (not): about 1 MiB in 85 and 64
  // rows, so 300 rows come in several pieces.
  for (auto [w, c] : {std::pair{4099, 3}, {4096, 4}, {5, 1}}) {
    HostImage host = testing::RandomImage({w, 300, c, SampleType::kUint8}, rng);
    absl::StatusOr<Image> img = Image::Upload(ctx, host);
    ASSERT_TRUE(img.ok()) << img.status();
    for (BoxFilterVariant v : kBoxFilterVariants) {
      const BoxFilterOptions o{.rx = 3, .ry = 5, .border = BorderMode::kReplicate, .variant = v};
      const std::string what = Describe(host.desc, o);
      absl::StatusOr<HostImage> ref = reference::BoxFilter(host, o);
      ASSERT_TRUE(ref.ok()) << ref.status();
      EXPECT_TRUE(StreamRows(kernel, *img, o, what) == ref->data) << what;
    }
    // A sink's error comes back as the run's, and the kernel goes on working.
    int pieces = 0;
    const BoxFilterOptions o{.rx = 1, .ry = 1, .variant = BoxFilterVariant::kFusedStrips};
    absl::StatusOr<BoxFilterResult> stopped = kernel.Stream(*img, o, [&](const BoxFilterRows&) {
      return ++pieces == 1 ? absl::OkStatus() : absl::CancelledError("the caller went away");
    });
    EXPECT_EQ(stopped.status().code(),
              host.desc.row_bytes() * 300 > BoxFilterKernel::kSinkPieceBytes
                  ? absl::StatusCode::kCancelled
                  : absl::StatusCode::kOk);
    absl::StatusOr<HostImage> ref = reference::BoxFilter(host, o);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_TRUE(StreamRows(kernel, *img, o, "after a stopped run") == ref->data);
  }
}

// Runs of rows so long that llvmpipe's loop limit (65535 iterations per invocation, all loops
// together) stops invocations early: the fused strips notice and run again with shorter runs.
// Each run first sums 2ry rows, so a run of 16000 rows with ry = 25000 takes 66000 iterations.
TEST(BoxFilterTest, FusedStripsSurviveTheLoopLimit) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  BoxFilterKernel kernel(ctx);
  for (int c : {1, 4}) {
    HostImage host = testing::RandomImage({41, 16000, c, SampleType::kUint8}, rng);
    Check(kernel, ctx, host,
          {.rx = 2,
           .ry = 25000,
           .border = BorderMode::kReflect101,
           .variant = BoxFilterVariant::kFusedStrips,
           .fused_rows = 16000});
  }
}

// Tiles smaller than the image (as with images past the storage-binding limit): every variant
// reads its tiles' source rectangles and writes their outputs where they belong.
TEST(BoxFilterTest, SmallTilesMatchReference) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  BoxFilterKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes) {
    ImageDesc d{45, 38, 2, t};
    HostImage host = testing::RandomImage(d, rng);
    for (auto [rx, ry] : {std::pair{1, 2}, {5, 9}, {12, 3}, {50, 40}}) {
      for (BorderMode b : kBorders) {
        for (BoxFilterVariant v : kBoxFilterVariants) {
          // The integral table of a 1x1 tile with these radii needs (1 + 2r)^2 elements.
          const int64_t tile = v == BoxFilterVariant::kIntegral ? 32 * 1024 : 1500;
          Check(kernel, ctx, host,
                {.rx = rx,
                 .ry = ry,
                 .border = b,
                 .border_value = BorderValueFor(t, rng),
                 .variant = v,
                 .tile_bytes = tile});
        }
      }
    }
  }
}

// 16-bit sums of a large window pass 2^32 (double accumulators; 64-bit tables), including the
// two-word table arithmetic.
TEST(BoxFilterTest, WideSixteenBitSumsAreExact) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  BoxFilterKernel kernel(ctx);
  ImageDesc d{40, 33, 2, SampleType::kUint16};
  HostImage host = testing::RandomImage(d, rng);
  for (int i = 0; i < 200; ++i) host.set<uint16_t>(i % 40, i % 33, i % 2, 65535);
  for (BorderMode b : kBorders) {
    for (BoxFilterVariant v : kBoxFilterVariants) {
      Check(kernel, ctx, host,
            {.rx = 300, .ry = 45, .border = b, .border_value = 65535, .variant = v});
    }
    Check(kernel, ctx, host,
          {.rx = 9,
           .ry = 300,
           .border = b,
           .border_value = 7,
           .variant = BoxFilterVariant::kIntegral,
           .force_two_word = true});
  }
}

TEST(BoxFilterTest, AutoPicksAVariantThatMatches) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  BoxFilterKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes) {
    ImageDesc d{70, 41, 4, t};
    HostImage host = testing::RandomImage(d, rng);
    for (int r : {1, 7, 31}) {
      BoxFilterOptions o{.rx = r, .ry = r};
      absl::StatusOr<Image> img = Image::Upload(ctx, host);
      ASSERT_TRUE(img.ok());
      absl::StatusOr<BoxFilterResult> res = kernel.Run(*img, o);
      ASSERT_TRUE(res.ok()) << res.status();
      EXPECT_EQ(res->variant, ResolveBoxFilterVariant(ctx.info(), d, o));
      EXPECT_NE(res->variant, BoxFilterVariant::kAuto);
      o.variant = res->variant;
      Check(kernel, ctx, host, o);
    }
  }
}

// Glimpse's rounding, checked by hand: 3x1 windows over 0 1 1 4 (replicate) have sums 1 2 6 9:
// means 0.33 0.67 2 3 -> 0 1 2 3.
TEST(BoxFilterTest, RoundsTheExactMeanHalfUp) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  BoxFilterKernel kernel(ctx);
  ImageDesc d{4, 1, 1, SampleType::kUint8};
  HostImage host{d, {0, 1, 1, 4}};
  absl::StatusOr<Image> img = Image::Upload(ctx, host);
  ASSERT_TRUE(img.ok());
  for (BoxFilterVariant v : kBoxFilterVariants) {
    absl::StatusOr<BoxFilterResult> r =
        kernel.Run(*img, {.rx = 1, .ry = 0, .border = BorderMode::kReplicate, .variant = v});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->image.Download().data, (std::vector<uint8_t>{0, 1, 2, 3}))
        << BoxFilterVariantName(v);
  }
}

// The fused strips' division, evaluated as the shader does (the high word of the 64-bit product,
// shifted), against the exact rounded mean for every 8-bit window sum.
TEST(BoxFilterTest, ExactDivisionMatchesTheRoundedMeanForEverySum) {
  for (int rx : {0, 1, 2, 7, 8, 32, 63}) {
    for (int ry : {0, 1, 7, 127, 128, 300, 1000}) {
      const uint64_t area = uint64_t(2 * rx + 1) * uint64_t(2 * ry + 1);
      const std::optional<box_filter_internal::ExactDivision> e =
          box_filter_internal::PlanExactDivision(area, 255 * area);
      ASSERT_TRUE(e.has_value()) << "area " << area;
      // Plain locals: this file is unoptimized in the sanitizer builds, and the loop runs 186 M
      // times.
      const uint64_t half = e->half, mul = e->mul, shift = e->shift;
      for (uint64_t s = 0; s <= 255 * area; ++s) {
        const uint64_t n = s + half;
        const uint64_t got = ((n * mul) >> 32) >> shift;
        const uint64_t want = (2 * s + area) / (2 * area);  // floor(s / area + 1/2)
        if (got != want) {
          ADD_FAILURE() << "area " << area << " sum " << s << ": " << got << ", want " << want;
          break;
        }
      }
    }
  }
  EXPECT_FALSE(
      box_filter_internal::PlanExactDivision(uint64_t{1} << 24, uint64_t{255} << 24).has_value());
}

TEST(BoxFilterTest, BorderIndexFollowsOpenCv) {
  // borderInterpolate(-1, 5, REFLECT_101) = 1, (5, 5) = 3, (-9, 5) = 1 (two reflections).
  EXPECT_EQ(reference::BorderIndex(-1, 5, BorderMode::kReflect101), 1);
  EXPECT_EQ(reference::BorderIndex(5, 5, BorderMode::kReflect101), 3);
  EXPECT_EQ(reference::BorderIndex(-9, 5, BorderMode::kReflect101), 1);
  EXPECT_EQ(reference::BorderIndex(13, 5, BorderMode::kReflect101), 3);
  EXPECT_EQ(reference::BorderIndex(-7, 1, BorderMode::kReflect101), 0);
  EXPECT_EQ(reference::BorderIndex(-7, 5, BorderMode::kReplicate), 0);
  EXPECT_EQ(reference::BorderIndex(9, 5, BorderMode::kReplicate), 4);
  EXPECT_EQ(reference::BorderIndex(5, 5, BorderMode::kConstant), -1);
}

TEST(BoxFilterTest, BadOptionsAreRefusedByName) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  BoxFilterKernel kernel(ctx);
  ImageDesc d{8, 8, 1, SampleType::kUint8};
  absl::StatusOr<Image> img = Image::Upload(ctx, HostImage::Zeros(d));
  ASSERT_TRUE(img.ok());
  const std::string max = std::to_string(kMaxBoxRadius);
  struct Case {
    BoxFilterOptions options;
    std::string expect;
  } cases[] = {
      {{.rx = -1}, "rx must be in [0, " + max + "], got -1"},
      {{.ry = kMaxBoxRadius + 1},
       "ry must be in [0, " + max + "], got " + std::to_string(kMaxBoxRadius + 1)},
      {{.border = static_cast<BorderMode>(7)}, "border must be replicate, reflect101 or constant"},
      {{.variant = static_cast<BoxFilterVariant>(9)},
       "variant must be auto, shared_tile, separable, integral or fused_strips, got #9"},
      {{.border = BorderMode::kConstant, .border_value = 3.5},
       "border_value must be a whole number in [0, 255] for uint8 images, got 3.5"},
      {{.border = BorderMode::kConstant, .border_value = 256}, "got 256"},
      {{.tile_bytes = -5}, "tile_bytes must be >= 0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<BoxFilterResult> r = kernel.Run(*img, c.options);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
  }
  absl::StatusOr<BoxFilterOptions> f = ResolveBoxFilterOptions(
      {8, 8, 1, SampleType::kFloat32}, {.border = BorderMode::kConstant, .border_value = NAN});
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<BoxFilterOptions> t =
      ResolveBoxFilterOptions({8, 8, 1, static_cast<SampleType>(5)}, {});
  EXPECT_NE(t.status().message().find("unsupported sample type"), std::string::npos);
}

TEST(BoxFilterTest, NamesRoundTrip) {
  for (BoxFilterVariant v : kBoxFilterVariants)
    EXPECT_EQ(ParseBoxFilterVariant(BoxFilterVariantName(v)), v);
  for (BorderMode b : kBorders) EXPECT_EQ(ParseBorderMode(BorderModeName(b)), b);
  EXPECT_EQ(ParseBoxFilterVariant(""), BoxFilterVariant::kAuto);
  EXPECT_EQ(ParseBoxFilterVariant("gaussian"), std::nullopt);
  EXPECT_EQ(ParseBorderMode("wrap"), std::nullopt);
}

// After WarmUp(), auto calls over every sample type, channel count, radius class (each side of
// every boundary of the auto rule, wide sums included), border and image size build nothing.
TEST(BoxFilterTest, WarmUpLeavesNothingForAutoToBuild) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  BoxFilterKernel kernel(ctx);
  ASSERT_TRUE(kernel.WarmUp().ok());
  std::vector<int> radii = {0,  1,  2,  3,  4,  5,   6,   7,   8,   9,
                            16, 31, 32, 64, 65, 127, 128, 129, 300, 2048};
  for (SampleType t : testing::kSampleTypes) {
    for (int c = 1; c <= 4; ++c) {
      for (auto [w, h] : {std::pair{1, 1}, {37, 5}}) {
        absl::StatusOr<Image> img = Image::Upload(ctx, HostImage::Zeros({w, h, c, t}));
        ASSERT_TRUE(img.ok());
        for (int rx : radii) {
          for (int ry : {rx, 0, 127, 128, 2100}) {
            const BorderMode b = rx % 2 ? BorderMode::kConstant : BorderMode::kReflect101;
            const size_t before = ctx.programs_built();
            absl::StatusOr<BoxFilterResult> r = kernel.Run(*img, {.rx = rx, .ry = ry, .border = b});
            ASSERT_TRUE(r.ok()) << r.status();
            EXPECT_EQ(ctx.programs_built(), before)
                << SampleTypeName(t) << " " << c << " channels, rx " << rx << " ry " << ry << ": "
                << BoxFilterVariantName(r->variant) << " built a program after WarmUp()";
          }
        }
      }
    }
  }
}

TEST(BoxFilterTest, PrepareCompilesEveryProgram) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  BoxFilterKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes)
    EXPECT_TRUE(kernel.Prepare(t).ok()) << SampleTypeName(t);
}

}  // namespace
}  // namespace glimpse::gpu
