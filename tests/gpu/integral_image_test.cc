#include "gpu/integral_image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/str.h"
#include "gpu/reference/integral_image.h"
#include "tests/gpu/describe.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

constexpr IntegralImageVariant kIntegralImageVariants[] = {IntegralImageVariant::kNaive,
                                                           IntegralImageVariant::kWorkEfficient,
                                                           IntegralImageVariant::kScanTransposeScan,
                                                           IntegralImageVariant::kStripScan,
                                                           IntegralImageVariant::kPackedStrips,
                                                           IntegralImageVariant::kSubgroupScan};

// The stated bound of gpu/integral_image.h for one table: |gpu - exact| <= 1.01 (W + H + 16)
// 2^-53 sum |v| over the prefix. `abs` is the table of |v| (exact enough in double for a bound).
void ExpectWithinFloatBound(const std::vector<double>& gpu, const std::vector<double>& ref,
                            const std::vector<double>& abs, const ImageDesc& d,
                            const std::string& what) {
  ASSERT_EQ(gpu.size(), ref.size()) << what;
  const double k = 1.01 * (d.width + d.height + 16) * std::ldexp(1.0, -53);
  int bad = 0;
  for (size_t i = 0; i < gpu.size() && bad < 5; ++i) {
    // The reference itself is within the same bound of the exact value: allow both.
    const double tol = 2 * k * abs[i];
    if (!(std::abs(gpu[i] - ref[i]) <= tol)) {
      ADD_FAILURE() << what << ": element " << i << " gpu " << gpu[i] << " ref " << ref[i]
                    << " tol " << tol;
      ++bad;
    }
  }
}

void ExpectTablesMatchReference(const IntegralTables& gpu, const HostImage& host,
                                const IntegralImageOptions& options, const std::string& what);

// Checks every table of `options` against the CPU reference: integers exactly, floats within the
// stated bound (the naive variant bit-exactly: it adds in the reference's order).
// Where the device does not run the variant on this format (subgroup_scan: float images, or no
// subgroup ballots), checks that it is refused, naming the variant.
void CheckAgainstReference(IntegralImageKernel& kernel, Context& ctx, const HostImage& host,
                           const IntegralImageOptions& options) {
  const std::string what = Describe(host.desc, options);
  absl::StatusOr<Image> img = Image::Upload(ctx, host);
  ASSERT_TRUE(img.ok()) << img.status();
  absl::StatusOr<IntegralTables> gpu = ComputeIntegralImage(kernel, *img, options);
  if (absl::Status runs =
          IntegralImageVariantAvailable(ctx.info(), options.variant, host.desc.type);
      !runs.ok()) {
    ASSERT_FALSE(gpu.ok()) << what;
    EXPECT_EQ(gpu.status(), runs) << what;
    EXPECT_NE(runs.message().find(StrCat("variant ", IntegralImageVariantName(options.variant))),
              std::string::npos)
        << runs;
    return;
  }
  ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
  EXPECT_EQ(gpu->info.variant, options.variant) << what;
  ExpectTablesMatchReference(*gpu, host, options, what);
}

void ExpectTablesMatchReference(const IntegralTables& gpu_tables, const HostImage& host,
                                const IntegralImageOptions& options, const std::string& what) {
  const IntegralTables* gpu = &gpu_tables;
  absl::StatusOr<IntegralTables> ref = reference::IntegralImage(host, options);
  ASSERT_TRUE(ref.ok()) << ref.status();
  if (host.desc.type != SampleType::kFloat32) {
    EXPECT_EQ(gpu->info.element, IntegralElement::kUint64);
    EXPECT_EQ(gpu->sum_u, ref->sum_u) << what;
    EXPECT_EQ(gpu->sq_u, ref->sq_u) << what;
    EXPECT_EQ(gpu->sq_u.empty(), !options.squared) << what;
    return;
  }
  EXPECT_EQ(gpu->info.element, IntegralElement::kFloat64);
  if (options.variant == IntegralImageVariant::kNaive) {
    EXPECT_EQ(gpu->sum_f, ref->sum_f) << what;
    EXPECT_EQ(gpu->sq_f, ref->sq_f) << what;
    return;
  }
  HostImage abs_img = host;
  for (size_t i = 0; i < abs_img.data.size(); i += 4) {
    float v;
    std::memcpy(&v, &abs_img.data[i], 4);
    v = std::abs(v);
    std::memcpy(&abs_img.data[i], &v, 4);
  }
  absl::StatusOr<IntegralTables> abs = reference::IntegralImage(abs_img, {.squared = true});
  ASSERT_TRUE(abs.ok());
  ExpectWithinFloatBound(gpu->sum_f, ref->sum_f, abs->sum_f, host.desc, what + " sum");
  if (options.squared) {
    ExpectWithinFloatBound(gpu->sq_f, ref->sq_f, abs->sq_f, host.desc, what + " squared");
  }
}

TEST(IntegralImageTest, MatchesReferenceEveryFormatChannelCountAndVariant) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  IntegralImageKernel kernel(ctx);
  // Awkward sizes: 1x1, one row, one column, primes, a row block (512) + 1, a column block
  // (64) + 1, one past a transpose tile (32); rows of whole packed strips (64 x 1 channel,
  // 4-element stores), one sample past them (65), and rows of whole 4-element groups whose last
  // strip is partial (68).
  const std::pair<int, int> sizes[] = {{1, 1},   {1, 37},  {53, 1}, {13, 7}, {513, 3},
                                       {31, 65}, {33, 97}, {64, 9}, {65, 4}, {68, 5}};
  for (SampleType t : testing::kSampleTypes) {
    for (int c = 1; c <= 4; ++c) {
      for (auto [w, h] : sizes) {
        ImageDesc d{w, h, c, t};
        HostImage host = testing::RandomImage(d, rng);
        for (IntegralImageVariant v : kIntegralImageVariants) {
          CheckAgainstReference(kernel, ctx, host, {.squared = true, .variant = v});
        }
        CheckAgainstReference(kernel, ctx, host,
                              {.squared = true,
                               .variant = IntegralImageVariant::kPackedStrips,
                               .narrow_sums = false});
      }
    }
  }
}

// On a GPU the table is copied out of the device's buffer rather than read through a mapping
// (DeviceLimits::read_path): those paths, forced on this renderer, on tables of several pieces
// (kSinkPieceBytes), 8-byte and rebuilt 4-byte sums, one band and several.
TEST(IntegralImageTest, GpuReadPathsMatchReference) {
  GLIMPSE_REQUIRE_DEVICE();
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  testing::OnGpuReadPathContexts([&](Context& own) {
    IntegralImageKernel kernel(own);
    for (SampleType t : testing::kSampleTypes) {
      const ImageDesc d{307, 251, 4, t};
      ASSERT_GT(d.pixels() * 4 * 8, 2 * IntegralImageKernel::kSinkPieceBytes);
      const HostImage host = testing::RandomImage(d, rng);
      for (IntegralImageVariant v :
           {IntegralImageVariant::kStripScan, IntegralImageVariant::kPackedStrips}) {
        CheckAgainstReference(kernel, own, host, {.squared = true, .variant = v});
        CheckAgainstReference(kernel, own, host,
                              {.squared = true, .variant = v, .band_bytes = 1 << 20});
      }
    }
  });
}

TEST(IntegralImageTest, BandsCarryTheColumnSumsAcross) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  IntegralImageKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes) {
    ImageDesc d{67, 131, 2, t};
    HostImage host = testing::RandomImage(d, rng);
    const int64_t row = int64_t{d.width} * d.channels * 8;
    // One row per band, 3 rows, a column block + 1 (65), and a band that is not a multiple of a
    // row (rounded down to whole rows).
    for (int64_t band : {row, 3 * row, 65 * row, 10 * row + 7}) {
      for (IntegralImageVariant v : kIntegralImageVariants) {
        CheckAgainstReference(kernel, ctx, host,
                              {.squared = true, .variant = v, .band_bytes = band});
      }
    }
  }
}

// A table run in parts (options.first_row/rows, each from the row above: how the service streams
// a table larger than a part) equals the whole table: random cuts, one part per table (the sum
// table's parts, then the squared table's), bands inside the parts, every variant that runs.
// Rows are taken out of each band with IntegralBand::CopyRows in two pieces.
TEST(IntegralImageTest, PartsFromTheRowAboveEqualTheWholeTable) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  IntegralImageKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes) {
    for (int c : {1, 3, 4}) {
      const ImageDesc d{std::uniform_int_distribution<int>(1, 90)(rng),
                        std::uniform_int_distribution<int>(2, 140)(rng), c, t};
      const HostImage host = testing::RandomImage(d, rng);
      absl::StatusOr<Image> img = Image::Upload(ctx, host);
      ASSERT_TRUE(img.ok()) << img.status();
      const size_t row = size_t(d.width) * size_t(c) * 8;
      for (IntegralImageVariant v : kIntegralImageVariants) {
        if (!IntegralImageVariantAvailable(ctx.info(), v, t).ok()) continue;
        // Cuts: the first row alone, then random parts; bands of 1 to 5 rows or the whole part.
        std::vector<int> cuts = {0, 1};
        while (cuts.back() < d.height) {
          cuts.push_back(std::min(
              d.height, cuts.back() + std::uniform_int_distribution<int>(1, d.height)(rng)));
        }
        const int64_t band = std::uniform_int_distribution<int>(0, 5)(rng) * int64_t(row);
        std::vector<uint8_t> tables[2];
        for (bool squared : {false, true}) {
          std::vector<uint8_t>& table = tables[squared];
          table.assign(size_t(d.height) * row, 0xee);
          for (size_t k = 0; k + 1 < cuts.size(); ++k) {
            const int y0 = cuts[k], rows = cuts[k + 1] - cuts[k];
            const std::vector<uint8_t> carry =
                y0 == 0 ? std::vector<uint8_t>()
                        : std::vector<uint8_t>(table.begin() + std::ptrdiff_t((y0 - 1) * row),
                                               table.begin() + std::ptrdiff_t(y0 * row));
            const IntegralImageOptions o{.squared = squared,
                                         .sum_table = !squared,
                                         .variant = v,
                                         .band_bytes = band,
                                         .first_row = y0,
                                         .rows = rows,
                                         .carry_row = carry};
            int next = y0;
            absl::StatusOr<IntegralImageResult> r = kernel.Run(*img, o, [&](const IntegralBand& b) {
              EXPECT_EQ(b.squared, squared);
              EXPECT_EQ(b.y0, next);
              EXPECT_EQ(b.row_bytes(), row);
              next = b.y0 + b.rows;
              const int half = b.rows / 2;
              b.CopyRows(half, b.rows - half, table.data() + size_t(b.y0 + half) * row);
              b.CopyRows(0, half, table.data() + size_t(b.y0) * row);
              return absl::OkStatus();
            });
            ASSERT_TRUE(r.ok()) << r.status();
            EXPECT_EQ(next, y0 + rows) << "part from row " << y0;
          }
        }
        IntegralTables parts;
        parts.info.element = IntegralElementFor(t);
        const size_t n = size_t(d.width) * size_t(d.height) * size_t(c);
        if (t == SampleType::kFloat32) {
          parts.sum_f.resize(n);
          parts.sq_f.resize(n);
          std::memcpy(parts.sum_f.data(), tables[0].data(), n * 8);
          std::memcpy(parts.sq_f.data(), tables[1].data(), n * 8);
        } else {
          parts.sum_u.resize(n);
          parts.sq_u.resize(n);
          std::memcpy(parts.sum_u.data(), tables[0].data(), n * 8);
          std::memcpy(parts.sq_u.data(), tables[1].data(), n * 8);
        }
        ExpectTablesMatchReference(parts, host, {.squared = true, .variant = v},
                                   StrCat(Describe(d, {.variant = v, .band_bytes = band}),
                                          ", parts cut at ", absl::StrJoin(cuts, ",")));
      }
    }
  }
}

// llvmpipe ends a loop nest after 65535 iterations in all: the packed strips walk many rows per
// dispatch, so tall images (one band: 5000 rows of 3 pixels; partial strips of 4 samples over
// 2100 rows) must come out whole.
TEST(IntegralImageTest, TallImagesComeOutWhole) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  IntegralImageKernel kernel(ctx);
  for (ImageDesc d :
       {ImageDesc{3, 5000, 1, SampleType::kUint8}, ImageDesc{68, 2100, 1, SampleType::kUint8},
        ImageDesc{17, 3000, 4, SampleType::kUint16}}) {
    HostImage host = testing::RandomImage(d, rng);
    for (IntegralImageVariant v :
         {IntegralImageVariant::kPackedStrips, IntegralImageVariant::kStripScan}) {
      CheckAgainstReference(kernel, ctx, host, {.squared = true, .variant = v});
    }
  }
}

TEST(IntegralImageTest, BandsArriveInOrderWithTheirRows) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  IntegralImageKernel kernel(ctx);
  ImageDesc d{5, 11, 1, SampleType::kUint8};
  HostImage host = HostImage::Zeros(d);
  absl::StatusOr<Image> img = Image::Upload(ctx, host);
  ASSERT_TRUE(img.ok());
  std::vector<std::string> seen;
  auto sink = [&](const IntegralBand& b) {
    seen.push_back(StrCat(b.squared ? "sq" : "sum", ":", b.y0, "+", b.rows, "=", b.bytes().size()));
    return absl::OkStatus();
  };
  absl::StatusOr<IntegralImageResult> r =
      kernel.Run(*img, {.squared = true, .band_bytes = 4 * 5 * 8}, sink);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(seen, (std::vector<std::string>{"sum:0+4=160", "sum:4+4=160", "sum:8+3=120",
                                            "sq:0+4=160", "sq:4+4=160", "sq:8+3=120"}));
}

// The squared table alone (how the service makes it in parts): only squared bands arrive, and
// they equal the reference's squared table.
TEST(IntegralImageTest, SquaredTableAloneLeavesOutTheSumTable) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  IntegralImageKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes) {
    ImageDesc d{37, 23, 3, t};
    HostImage host = testing::RandomImage(d, rng);
    absl::StatusOr<Image> img = Image::Upload(ctx, host);
    ASSERT_TRUE(img.ok());
    absl::StatusOr<IntegralTables> ref = reference::IntegralImage(host, {.squared = true});
    ASSERT_TRUE(ref.ok());
    for (IntegralImageVariant v : kIntegralImageVariants) {
      if (!IntegralImageVariantAvailable(ctx.info(), v, t).ok()) continue;  // refusals: above
      const IntegralImageOptions o{.squared = true, .sum_table = false, .variant = v};
      absl::StatusOr<IntegralTables> gpu = ComputeIntegralImage(kernel, *img, o);
      ASSERT_TRUE(gpu.ok()) << Describe(d, o) << ": " << gpu.status();
      EXPECT_TRUE(gpu->sum_u.empty() && gpu->sum_f.empty()) << Describe(d, o);
      if (t == SampleType::kFloat32) {
        ASSERT_EQ(gpu->sq_f.size(), ref->sq_f.size()) << Describe(d, o);
        for (size_t i = 0; i < gpu->sq_f.size(); ++i) {
          // Squares of floats are exact and these sums stay far below 2^53 ulps of error.
          ASSERT_NEAR(gpu->sq_f[i], ref->sq_f[i], 1e-9 * std::abs(ref->sq_f[i])) << Describe(d, o);
        }
      } else {
        EXPECT_EQ(gpu->sq_u, ref->sq_u) << Describe(d, o);
      }
    }
  }
}

TEST(IntegralImageTest, SinkErrorStopsTheRun) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  IntegralImageKernel kernel(ctx);
  ImageDesc d{5, 11, 1, SampleType::kUint8};
  absl::StatusOr<Image> img = Image::Upload(ctx, HostImage::Zeros(d));
  ASSERT_TRUE(img.ok());
  int calls = 0;
  auto sink = [&](const IntegralBand&) {
    ++calls;
    return absl::CancelledError("client went away");
  };
  absl::StatusOr<IntegralImageResult> r = kernel.Run(*img, {.band_bytes = 40}, sink);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 1);
}

TEST(IntegralImageTest, TwoWordFallbackMatchesReference) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  IntegralImageKernel kernel(ctx);
  for (SampleType t : {SampleType::kUint8, SampleType::kUint16}) {
    for (int c : {1, 3, 4}) {
      ImageDesc d{97, 70, c, t};
      HostImage host = testing::RandomImage(d, rng);
      for (IntegralImageVariant v : kIntegralImageVariants) {
        CheckAgainstReference(
            kernel, ctx, host,
            {.squared = true, .variant = v, .band_bytes = 33 * 97 * c * 8, .force_two_word = true});
      }
    }
  }
}

// 16-bit all-65535 sums pass 2^32 at 300 x 300 (65535 * 90000 > 2^32): every variant and both
// 64-bit paths, checked everywhere against the closed form 65535 (x+1)(y+1).
TEST(IntegralImageTest, SixteenBitSumsPast2To32AreExact) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  IntegralImageKernel kernel(ctx);
  ImageDesc d{300, 300, 2, SampleType::kUint16};
  HostImage host = HostImage::Zeros(d);
  for (size_t i = 0; i < host.data.size(); ++i) host.data[i] = 0xff;
  absl::StatusOr<Image> img = Image::Upload(ctx, host);
  ASSERT_TRUE(img.ok());
  for (bool two_word : {false, true}) {
    for (IntegralImageVariant v : kIntegralImageVariants) {
      if (!IntegralImageVariantAvailable(ctx.info(), v, d.type).ok()) continue;
      IntegralImageOptions o{.squared = true,
                             .variant = v,
                             .band_bytes = 70 * 300 * 2 * 8,
                             .force_two_word = two_word};
      absl::StatusOr<IntegralTables> t = ComputeIntegralImage(kernel, *img, o);
      ASSERT_TRUE(t.ok()) << t.status();
      int bad = 0;
      for (int y = 0; y < d.height && bad < 3; ++y) {
        for (int x = 0; x < d.width && bad < 3; ++x) {
          const uint64_t n = uint64_t(x + 1) * uint64_t(y + 1);
          for (int c = 0; c < 2; ++c) {
            const size_t i = (size_t(y) * d.width + x) * 2 + c;
            if (t->sum_u[i] != 65535 * n || t->sq_u[i] != 65535ull * 65535ull * n) {
              ADD_FAILURE() << Describe(d, o) << " at " << x << "," << y << ": " << t->sum_u[i]
                            << " / " << t->sq_u[i];
              ++bad;
            }
          }
        }
      }
      EXPECT_GT(t->sum_u.back(), uint64_t{1} << 32);
    }
  }
}

// Float samples enter the 8-byte sums exactly (the shaders widen them from their bits: a plain
// double(v) let one compiler add floats in float precision and widen after). Each pair [a, b] is
// a 2x1 image: its tables hold a, a + b, a^2 and a^2 + b^2, as double arithmetic gives them (the
// squares exact, each sum rounded once), most of them not representable in float (squares past
// its range among them). The values include zeros of both signs, subnormals, the smallest normal
// and significands with every bit set; compared bit for bit.
TEST(IntegralImageTest, FloatSamplesWidenExactly) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  IntegralImageKernel kernel(ctx);
  const float max_sub = std::ldexp(float(0x7fffff), -149), min_normal = std::ldexp(1.0f, -126);
  const std::pair<float, float> pairs[] = {{1.0f, std::ldexp(1.0f, -30)},
                                           {-0.0f, -0.0f},
                                           {0.0f, std::ldexp(1.0f, -149)},
                                           {max_sub, -std::ldexp(3.0f, -149)},
                                           {min_normal, max_sub},
                                           {1.0f + std::ldexp(1.0f, -23), -std::ldexp(1.0f, -40)},
                                           {16777215.0f, 0.5f},
                                           {-3.75f, std::ldexp(float(0xffffff), -70)},
                                           {std::ldexp(float(0xffffff), 103), 1.0f},
                                           {std::ldexp(1.0f, 60), std::ldexp(-1.0f, 10)}};
  const ImageDesc d{2, 1, 1, SampleType::kFloat32};
  for (auto [a, b] : pairs) {
    HostImage host = HostImage::Zeros(d);
    std::memcpy(host.data.data(), &a, 4);
    std::memcpy(host.data.data() + 4, &b, 4);
    absl::StatusOr<Image> img = Image::Upload(ctx, host);
    ASSERT_TRUE(img.ok()) << img.status();
    const double da = a, db = b;
    // A table's sums start from +0 (so -0 + -0 comes out +0, as in the CPU reference).
    const double want_sum[] = {0.0 + da, 0.0 + da + db};
    const double want_sq[] = {0.0 + da * da, 0.0 + da * da + db * db};
    for (IntegralImageVariant v : kIntegralImageVariants) {
      if (!IntegralImageVariantAvailable(ctx.info(), v, d.type).ok()) continue;
      const IntegralImageOptions o{.squared = true, .variant = v};
      absl::StatusOr<IntegralTables> t = ComputeIntegralImage(kernel, *img, o);
      ASSERT_TRUE(t.ok()) << t.status();
      ASSERT_EQ(t->sum_f.size(), 2u);
      ASSERT_EQ(t->sq_f.size(), 2u);
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(std::memcmp(&t->sum_f[i], &want_sum[i], 8), 0)
            << Describe(d, o) << " [" << a << ", " << b << "] sum " << i << ": " << t->sum_f[i]
            << " want " << want_sum[i];
        EXPECT_EQ(std::memcmp(&t->sq_f[i], &want_sq[i], 8), 0)
            << Describe(d, o) << " [" << a << ", " << b << "] square " << i << ": " << t->sq_f[i]
            << " want " << want_sq[i];
      }
    }
  }
}

// A row's first element and each step along it are a column's sum down to the row: below 2^32
// while the largest sample (or its square) times the height is (2^32 - 1 = 65535 x 65537).
TEST(IntegralImageTest, RowStepsFitFourBytesUpToTheBound) {
  EXPECT_TRUE(RowStepsFitUint32({16384, 16384, 4, SampleType::kUint8}, false));
  EXPECT_TRUE(RowStepsFitUint32({16384, 16384, 4, SampleType::kUint8}, true));
  EXPECT_TRUE(RowStepsFitUint32({1, 66051, 1, SampleType::kUint8}, true));
  EXPECT_FALSE(RowStepsFitUint32({1, 66052, 1, SampleType::kUint8}, true));
  EXPECT_FALSE(EightBitImagesMayNeedWideSums({.max_texture_size = 32768}));
  EXPECT_FALSE(EightBitImagesMayNeedWideSums({.max_texture_size = 66051}));
  EXPECT_TRUE(EightBitImagesMayNeedWideSums({.max_texture_size = 66052}));
  EXPECT_TRUE(RowStepsFitUint32({3, 65537, 2, SampleType::kUint16}, false));
  EXPECT_FALSE(RowStepsFitUint32({3, 65538, 2, SampleType::kUint16}, false));
  EXPECT_TRUE(RowStepsFitUint32({5, 1, 1, SampleType::kUint16}, true));
  EXPECT_FALSE(RowStepsFitUint32({5, 2, 1, SampleType::kUint16}, true));
  EXPECT_FALSE(RowStepsFitUint32({1, 1, 1, SampleType::kFloat32}, false));
}

// Checks the rows of `band` listed in `rows` (and its first and last) against k (x+1)(y+1).
absl::Status CheckClosedFormRows(const IntegralBand& band, int width, uint64_t k,
                                 const std::vector<int>& rows, int* checked) {
  auto check_row = [&](int y) -> absl::Status {
    if (y < band.y0 || y >= band.y0 + band.rows) return absl::OkStatus();
    const uint8_t* p = band.bytes().data() + size_t(y - band.y0) * size_t(width) * 8;
    for (int x = 0; x < width; ++x) {
      uint64_t v;
      std::memcpy(&v, p + size_t(x) * 8, 8);
      const uint64_t want = k * uint64_t(x + 1) * uint64_t(y + 1);
      if (v != want) {
        return absl::InternalError(StrCat(band.squared ? "squared" : "sum", " table at (", x, ", ",
                                          y, "): ", v, ", want ", want));
      }
    }
    ++*checked;
    return absl::OkStatus();
  };
  for (int y : {band.y0, band.y0 + band.rows - 1}) {
    if (absl::Status s = check_row(y); !s.ok()) return s;
  }
  for (int y : rows) {
    if (absl::Status s = check_row(y); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// All-255 8-bit 4104 x 4105: the sums pass 2^32 (255 x 4104 x 4105), the squared sums pass it
// 257 times, and both are kept in 4-byte elements on the device, each mod 2^32. Every element of
// every band of both tables (three bands of at most 2048 rows, so the carries between them too,
// handed to the sink in order in pieces of at most 1 MiB) equals k (x+1)(y+1). 16-bit images,
// and narrow_sums = false, keep 8-byte sums.
TEST(IntegralImageTest, FourByteSumsPast2To32AreRebuiltExactly) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  IntegralImageKernel kernel(ctx);
  const ImageDesc d{4104, 4105, 1, SampleType::kUint8};
  HostImage host = HostImage::Zeros(d);
  std::fill(host.data.begin(), host.data.end(), 255);
  absl::StatusOr<Image> img = Image::Upload(ctx, host);
  ASSERT_TRUE(img.ok()) << img.status();
  std::vector<int> every_row(static_cast<size_t>(d.height));
  std::iota(every_row.begin(), every_row.end(), 0);
  int checked = 0, next_y = 0;
  bool in_squared = false;
  uint64_t last[2] = {};
  auto sink = [&](const IntegralBand& b) {
    // Pieces of at most kSinkPieceBytes, in order, each row once; the sum table first.
    if (b.squared != in_squared) {
      EXPECT_EQ(next_y, d.height);
      in_squared = b.squared;
      next_y = 0;
    }
    EXPECT_EQ(b.y0, next_y);
    EXPECT_LE(b.bytes().size(), IntegralImageKernel::kSinkPieceBytes);
    EXPECT_EQ(b.bytes().size(), size_t(b.rows) * size_t(d.width) * 8);
    next_y = b.y0 + b.rows;
    std::memcpy(&last[b.squared], b.bytes().data() + b.bytes().size() - 8, 8);
    return CheckClosedFormRows(b, d.width, b.squared ? 255 * 255 : 255, every_row, &checked);
  };
  const IntegralImageOptions o{.squared = true, .variant = IntegralImageVariant::kPackedStrips};
  absl::StatusOr<IntegralImageResult> r = kernel.Run(*img, o, sink);
  ASSERT_TRUE(r.ok()) << Describe(d, o) << ": " << r.status();
  EXPECT_TRUE(r->narrow_sums) << Describe(d, o);
  EXPECT_TRUE(in_squared);
  EXPECT_EQ(next_y, d.height);
  EXPECT_GE(checked, 2 * d.height);
  EXPECT_EQ(last[0], 255ull * 4104 * 4105);
  EXPECT_EQ(last[1], 65025ull * 4104 * 4105);

  auto none = [](const IntegralBand&) { return absl::OkStatus(); };
  absl::StatusOr<IntegralImageResult> wide = kernel.Run(
      *img, {.variant = IntegralImageVariant::kPackedStrips, .narrow_sums = false}, none);
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_FALSE(wide->narrow_sums);
  const ImageDesc d16{256, 256, 1, SampleType::kUint16};
  absl::StatusOr<Image> img16 = Image::Upload(ctx, HostImage::Zeros(d16));
  ASSERT_TRUE(img16.ok());
  absl::StatusOr<IntegralImageResult> r16 =
      kernel.Run(*img16, {.variant = IntegralImageVariant::kPackedStrips}, none);
  ASSERT_TRUE(r16.ok()) << r16.status();
  EXPECT_FALSE(r16->narrow_sums);
}

// Random samples in 1 to 4 channels at an awkward size past one 2048-row band: the rebuilt rows
// (4-byte sums, each channel's steps apart) equal the CPU reference, sum and squared tables.
TEST(IntegralImageTest, FourByteSumsMatchReferenceOnRandomImages) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  IntegralImageKernel kernel(ctx);
  for (int c = 1; c <= 4; ++c) {
    const ImageDesc d{c == 3 ? 1031 : 517, 2051, c, SampleType::kUint8};
    CheckAgainstReference(kernel, ctx, testing::RandomImage(d, rng),
                          {.squared = true, .variant = IntegralImageVariant::kPackedStrips});
  }
}

// 8-bit all-255 at 4100 x 4200: the sums reach 255 * 4100 * 4200 > 2^32 and the 138 MB table
// splits into bands at llvmpipe's 128 MiB binding limit. Checked against 255 (x+1)(y+1) on the
// first and last row of every band and a few more, default variant (and the squared table).
TEST(IntegralImageTest, EightBitSumsPast2To32AtFullSizeAreExact) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  IntegralImageKernel kernel(ctx);
  ImageDesc d{4100, 4200, 1, SampleType::kUint8};
  HostImage host = HostImage::Zeros(d);
  std::fill(host.data.begin(), host.data.end(), 255);
  absl::StatusOr<Image> img = Image::Upload(ctx, host);
  ASSERT_TRUE(img.ok());
  int checked = 0, bands = 0;
  const std::vector<int> rows = {1, 2, 1000, 4198};
  auto sink = [&](const IntegralBand& b) {
    ++bands;
    return CheckClosedFormRows(b, d.width, b.squared ? 255 * 255 : 255, rows, &checked);
  };
  absl::StatusOr<IntegralImageResult> r = kernel.Run(*img, {.squared = true}, sink);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(checked, 2 * 6);
  if (ctx.limits().max_storage_block_bytes <= (int64_t{128} << 20)) {
    EXPECT_GE(bands, 4);
  }
}

// 16384 x 16384 (llvmpipe's largest image; a 2 GiB table in 16 bands of 128 MiB) comes out exact:
// 255 (x+1)(y+1) on the first and last row of every band and the middle row. A few seconds here.
TEST(IntegralImageTest, LargestEightBitImageIsExact) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  IntegralImageKernel kernel(ctx);
  const int side = std::min(ctx.limits().max_texture_size, 16384);
  ImageDesc d{side, side, 1, SampleType::kUint8};
  HostImage host = HostImage::Zeros(d);
  std::fill(host.data.begin(), host.data.end(), 255);
  absl::StatusOr<Image> img = Image::Upload(ctx, host);
  ASSERT_TRUE(img.ok());
  host.data = {};
  int checked = 0;
  auto sink = [&](const IntegralBand& b) {
    return CheckClosedFormRows(b, d.width, 255, {side / 2}, &checked);
  };
  absl::StatusOr<IntegralImageResult> r = kernel.Run(*img, {}, sink);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(checked, 2);
  EXPECT_EQ(r->element, IntegralElement::kUint64);
}

TEST(IntegralImageTest, BadOptionsAreRefusedByName) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  IntegralImageKernel kernel(ctx);
  ImageDesc d{40, 3, 2, SampleType::kUint8};
  absl::StatusOr<Image> img = Image::Upload(ctx, HostImage::Zeros(d));
  ASSERT_TRUE(img.ok());
  auto sink = [](const IntegralBand&) { return absl::OkStatus(); };
  const std::vector<uint8_t> row(640);
  struct Case {
    IntegralImageOptions options;
    std::string expect;
  } cases[] = {
      {{.band_bytes = -1}, "band_bytes must be >= 0 (0: the device limit), got -1"},
      {{.band_bytes = 100}, "band_bytes must hold one table row (640 bytes for a 40x3"},
      {{.variant = static_cast<IntegralImageVariant>(42)},
       "variant must be auto, naive, work_efficient, scan_transpose_scan, strip_scan, "
       "packed_strips or "
       "subgroup_scan, got #42"},
      {{.sum_table = false}, "sum_table = false asks for the squared table alone, so squared must"},
      {{.first_row = 3}, "first_row must be in [0, 3) for this image, got 3"},
      {{.first_row = -1}, "first_row must be in [0, 3) for this image, got -1"},
      {{.first_row = 1, .rows = 3}, "rows must be in [0, 2] from first_row 1, got 3"},
      {{.carry_row = row}, "carry_row must be empty where first_row is 0, got 640 bytes"},
      {{.first_row = 2},
       "carry_row must hold the table's row above first_row 2 (640 bytes), got 0"},
      {{.first_row = 2, .carry_row = std::span<const uint8_t>(row).first(639)},
       "carry_row must hold the table's row above first_row 2 (640 bytes), got 639 bytes"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<IntegralImageResult> r = kernel.Run(*img, c.options, sink);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
  }
  absl::Status p = kernel.Prepare(static_cast<SampleType>(9));
  EXPECT_EQ(p.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.message().find("unsupported sample type"), std::string::npos) << p;
}

// subgroup_scan: run wherever the device has subgroup ballots (llvmpipe has: 8 invocations per
// subgroup) for 8- and 16-bit images; float images are refused by name, as is a device without
// ballots. Full-scale samples set every bit a ballot counts (8, 16, and 32 for 16-bit squares),
// over rows of several row blocks and partial subgroups.
TEST(IntegralImageTest, SubgroupScanRunsOnIntegerImagesWhereBallotsExist) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  if (ctx.info().software) {
    EXPECT_TRUE(ctx.limits().subgroup_ballot) << ctx.info().renderer;
  }
  IntegralImageKernel kernel(ctx);
  const IntegralImageOptions o{.squared = true, .variant = IntegralImageVariant::kSubgroupScan};
  for (SampleType t : testing::kSampleTypes) {
    for (auto [w, h] : {std::pair{1029, 3}, std::pair{7, 70}}) {
      const ImageDesc d{w, h, 3, t};
      HostImage host = HostImage::Zeros(d);
      if (t != SampleType::kFloat32) std::fill(host.data.begin(), host.data.end(), uint8_t{0xff});
      CheckAgainstReference(kernel, ctx, host, o);
    }
    absl::Status runs = IntegralImageVariantAvailable(ctx.info(), o.variant, t);
    if (!ctx.limits().subgroup_ballot) {
      EXPECT_NE(runs.message().find("variant subgroup_scan needs subgroup ballots"),
                std::string::npos)
          << runs;
    } else if (t == SampleType::kFloat32) {
      EXPECT_EQ(runs.message(),
                "variant subgroup_scan takes 8- and 16-bit images, got float32 samples; use auto "
                "or another variant");
    } else {
      EXPECT_TRUE(runs.ok()) << runs;
    }
  }
}

TEST(IntegralImageTest, VariantNamesRoundTrip) {
  for (IntegralImageVariant v : kIntegralImageVariants)
    EXPECT_EQ(ParseIntegralImageVariant(IntegralImageVariantName(v)), v);
  EXPECT_EQ(ParseIntegralImageVariant(""), IntegralImageVariant::kAuto);
  EXPECT_EQ(ParseIntegralImageVariant("auto"), IntegralImageVariant::kAuto);
  EXPECT_EQ(ParseIntegralImageVariant("fast"), std::nullopt);
  EXPECT_EQ(IntegralElementFor(SampleType::kUint16), IntegralElement::kUint64);
  EXPECT_EQ(IntegralElementFor(SampleType::kFloat32), IntegralElement::kFloat64);
}

// Run by CTest in a process of its own, so the context has built nothing before WarmUp().
TEST(IntegralImageTest, WarmUpLeavesNothingForAutoToBuild) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  IntegralImageKernel kernel(ctx);
  ASSERT_TRUE(kernel.WarmUp().ok());
  const size_t built = ctx.programs_built();
  EXPECT_GT(built, 0u);
  for (SampleType t : testing::kSampleTypes) {
    for (int c = 1; c <= 4; ++c) {
      for (auto [w, h] : {std::pair{1, 1}, std::pair{37, 5}, std::pair{600, 70}}) {
        const ImageDesc d{w, h, c, t};
        absl::StatusOr<Image> img = Image::Upload(ctx, testing::RandomImage(d, rng));
        ASSERT_TRUE(img.ok()) << img.status();
        for (bool squared : {false, true}) {
          // narrow_sums = false: what an 8-bit image too tall for 4-byte sums would run, on a
          // device that takes one (and what other formats run anyway).
          for (bool narrow : {true, false}) {
            if (!narrow && t == SampleType::kUint8 &&
                !EightBitImagesMayNeedWideSums(ctx.limits())) {
              continue;
            }
            for (int64_t band : {int64_t{0}, int64_t{w} * c * 8 * 2}) {
              const IntegralImageOptions o{
                  .squared = squared, .band_bytes = band, .narrow_sums = narrow};
              absl::StatusOr<IntegralTables> r = ComputeIntegralImage(kernel, *img, o);
              ASSERT_TRUE(r.ok()) << r.status();
              EXPECT_EQ(ctx.programs_built(), built)
                  << Describe(d, o) << (squared ? " squared" : "") << " built a program";
            }
          }
        }
      }
    }
  }
}

TEST(IntegralImageTest, PrepareCompilesEveryProgram) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  IntegralImageKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes)
    EXPECT_TRUE(kernel.Prepare(t).ok()) << SampleTypeName(t);
}

}  // namespace
}  // namespace glimpse::gpu
