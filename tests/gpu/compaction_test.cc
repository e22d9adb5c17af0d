#include "gpu/compaction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>

#include "common/str.h"
#include "gpu/reference/compaction.h"
#include "tests/gpu/describe.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

constexpr CompactionVariant kCompactionVariants[] = {
    CompactionVariant::kAtomicPerPixel,     CompactionVariant::kWorkgroupAggregated,
    CompactionVariant::kOrderedScan,        CompactionVariant::kStripScan,
    CompactionVariant::kSubgroupAggregated, CompactionVariant::kAuto};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The strip scan takes images of 1 to 4 bytes per pixel (and refuses others, tested below).
bool StripScanTakes(const ImageDesc& d) {
  const int pixel_bytes = d.channels * BytesPerSample(d.type);
  return pixel_bytes >= 1 && pixel_bytes <= 4;
}

// Whether the shared context's device runs `v` (subgroup_aggregated needs ballots; the test
// below checks that it is refused elsewhere, and that llvmpipe has them).
bool DeviceRuns(CompactionVariant v) {
  return testing::SharedContext() != nullptr &&
         CompactionVariantAvailable(testing::SharedContext()->info(), v).ok();
}

// Runs `o` with every variant (or only o.variant when `only` is set) and expects each result to
// equal the CPU reference exactly: total, truncation, positions and the bytes of the values.
void ExpectMatchesReference(CompactionKernel& kernel, const Image& image, const HostImage& host,
                            CompactionOptions o, bool only = false) {
  auto expected = reference::Compact(host, o);
  ASSERT_TRUE(expected.ok()) << expected.status() << " " << Describe(host.desc, o);
  for (CompactionVariant v : kCompactionVariants) {
    if (only && v != o.variant) continue;
    if (v == CompactionVariant::kStripScan && !StripScanTakes(host.desc)) continue;
    if (!DeviceRuns(v)) continue;
    o.variant = v;
    auto got = kernel.Run(image, o);
    ASSERT_TRUE(got.ok()) << got.status() << " " << Describe(host.desc, o);
    ASSERT_EQ(got->total, expected->total) << Describe(host.desc, o);
    ASSERT_EQ(got->truncated, expected->truncated) << Describe(host.desc, o);
    ASSERT_EQ(got->returned(), expected->returned()) << Describe(host.desc, o);
    ASSERT_EQ(got->xy, expected->xy) << Describe(host.desc, o);
    ASSERT_EQ(got->values, expected->values) << Describe(host.desc, o);
    if (v == CompactionVariant::kAuto) {
      EXPECT_NE(got->variant, CompactionVariant::kAuto);
    } else {
      EXPECT_EQ(got->variant, v);
    }
    // The same list streamed: in order, whole entries, pieces of at most kSinkPieceBytes.
    std::vector<uint32_t> xy;
    std::vector<uint8_t> values;
    const size_t pixel_bytes = size_t(host.desc.channels) * BytesPerSample(host.desc.type);
    auto streamed = kernel.Stream(image, o, [&](const CompactionPiece& piece) {
      EXPECT_EQ(piece.first, xy.size() / 2) << Describe(host.desc, o);
      EXPECT_GE(piece.count, 1u);
      EXPECT_EQ(piece.xy.size(), 2 * piece.count);
      EXPECT_EQ(piece.values.size(), piece.count * pixel_bytes);
      EXPECT_TRUE(piece.count == 1 ||
                  piece.count * (8 + pixel_bytes) <= CompactionKernel::kSinkPieceBytes);
      xy.insert(xy.end(), piece.xy.begin(), piece.xy.end());
      values.insert(values.end(), piece.values.begin(), piece.values.end());
      return absl::OkStatus();
    });
    ASSERT_TRUE(streamed.ok()) << streamed.status() << " " << Describe(host.desc, o);
    EXPECT_EQ(streamed->total, expected->total) << Describe(host.desc, o);
    EXPECT_EQ(streamed->truncated, expected->truncated) << Describe(host.desc, o);
    EXPECT_EQ(streamed->returned(), expected->returned()) << Describe(host.desc, o);
    EXPECT_TRUE(streamed->xy.empty() && streamed->values.empty());
    EXPECT_EQ(xy, expected->xy) << "streamed, " << Describe(host.desc, o);
    EXPECT_EQ(values, expected->values) << "streamed, " << Describe(host.desc, o);
  }
}

// A random image in which the tested channel passes [lo, hi] (see PassRange) with probability
// `selectivity`; the other channels are uniformly random.
struct PassRange {
  double lo, hi;
};
PassRange PassRangeFor(SampleType t) {
  switch (t) {
    case SampleType::kUint8:
      return {100, 120};
    case SampleType::kUint16:
      return {30000, 31000};
    case SampleType::kFloat32:
      break;
  }
  return {0.25, 0.5};
}

HostImage SelectiveImage(const ImageDesc& d, int channel, double selectivity,
                         std::mt19937_64& rng) {
  HostImage img = testing::RandomImage(d, rng);
  std::bernoulli_distribution pass(selectivity);
  for (int y = 0; y < d.height; ++y) {
    for (int x = 0; x < d.width; ++x) {
      const bool p = pass(rng);
      switch (d.type) {
        case SampleType::kUint8: {
          uint32_t v = std::uniform_int_distribution<uint32_t>(100, 120)(rng);
          if (!p) v = (121 + rng() % 235) % 256;  // outside [100, 120]
          img.set<uint8_t>(x, y, channel, uint8_t(v));
          break;
        }
        case SampleType::kUint16: {
          uint32_t v = std::uniform_int_distribution<uint32_t>(30000, 31000)(rng);
          if (!p) v = (31001 + rng() % 64535) % 65536;
          img.set<uint16_t>(x, y, channel, uint16_t(v));
          break;
        }
        case SampleType::kFloat32: {
          float v = std::uniform_real_distribution<float>(0.25f, 0.5f)(rng);
          if (rng() % 8 == 0) v = rng() % 2 ? 0.25f : 0.5f;  // the bounds themselves pass
          if (!p)
            v = rng() % 2 ? std::nextafter(0.25f, -1.0f) - float(rng() % 1000) * 0.01f
                          : std::nextafter(0.5f, 2.0f) + float(rng() % 1000) * 0.01f;
          img.set<float>(x, y, channel, v);
          break;
        }
      }
    }
  }
  return img;
}

TEST(CompactionTest, EveryFormatChannelCountAndSelectivityAtAwkwardSizes) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  CompactionKernel kernel(ctx);
  // 1x1, 1xN, Nx1, primes, one past the 16x16 tile, one past the 8192-pixel scan block; one past
  // the strip scan's 32-pixel segment and its 128-pixel group, and exactly one group.
  const std::pair<int, int> sizes[] = {{1, 1},    {1, 97}, {131, 1}, {17, 65}, {127, 61},
                                       {8193, 1}, {33, 5}, {128, 3}, {129, 4}};
  for (SampleType t : testing::kSampleTypes) {
    for (int ch = 1; ch <= 4; ++ch) {
      for (auto [w, h] : sizes) {
        const ImageDesc d{w, h, ch, t};
        for (double selectivity : {0.0, 0.001, 0.5, 1.0}) {
          const int channel = int(rng() % uint64_t(ch));
          HostImage host = SelectiveImage(d, channel, selectivity, rng);
          auto image = Image::Upload(ctx, host);
          ASSERT_TRUE(image.ok()) << image.status();
          CompactionOptions o;
          o.channel = channel;
          o.lo = PassRangeFor(t).lo;
          o.hi = PassRangeFor(t).hi;
          o.max_results = w * h;
          ExpectMatchesReference(kernel, *image, host, o);
          if (selectivity == 0.5) {
            o.inside = false;
            ExpectMatchesReference(kernel, *image, host, o);
            if (ch >= 3) {
              o.source = CompactionSource::kLuma;
              o.inside = true;
              ExpectMatchesReference(kernel, *image, host, o);
            }
          }
        }
      }
    }
  }
}

TEST(CompactionTest, SelectivityReachesTheIntendedShare) {
  // Guards the generator above: the four selectivities must really differ.
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  const ImageDesc d{200, 100, 2, SampleType::kUint16};
  for (double s : {0.0, 0.001, 0.5, 1.0}) {
    HostImage host = SelectiveImage(d, 1, s, rng);
    CompactionOptions o{.channel = 1, .lo = 30000, .hi = 31000, .count_only = true};
    auto r = reference::Compact(host, o);
    ASSERT_TRUE(r.ok()) << r.status();
    const double share = double(r->total) / double(d.pixels());
    EXPECT_NEAR(share, s, s == 0.5 ? 0.03 : 0.002) << "selectivity " << s;
  }
}

TEST(CompactionTest, ReferenceMatchesAHandWorkedExample) {
  // 3x2 RGB uint8; channel 1 in [10, 20] passes at (1, 0) and (0, 1), luma at (2, 1) only.
  HostImage host = HostImage::Zeros({3, 2, 3, SampleType::kUint8});
  const uint8_t px[6][3] = {{0, 9, 0},  {1, 10, 2}, {3, 21, 4},
                            {5, 20, 6}, {7, 0, 8},  {200, 200, 200}};
  for (int i = 0; i < 6; ++i) {
    for (int c = 0; c < 3; ++c) host.set<uint8_t>(i % 3, i / 3, c, px[i][c]);
  }
  auto r = reference::Compact(host, {.channel = 1, .lo = 10, .hi = 20});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->total, 2u);
  EXPECT_EQ(r->xy, (std::vector<uint32_t>{1, 0, 0, 1}));
  EXPECT_EQ(r->values, (std::vector<uint8_t>{1, 10, 2, 5, 20, 6}));
  EXPECT_FALSE(r->truncated);
  r = reference::Compact(host, {.source = CompactionSource::kLuma, .lo = 100, .hi = kInf});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->xy, (std::vector<uint32_t>{2, 1}));
  r = reference::Compact(host,
                         {.channel = 1, .lo = 10, .hi = 20, .inside = false, .max_results = 3});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->total, 4u);
  EXPECT_TRUE(r->truncated);
  EXPECT_EQ(r->xy, (std::vector<uint32_t>{0, 0, 2, 0, 1, 1}));
}

TEST(CompactionTest, PredicateEdgesIntegerBoundsAndFloatSpecials) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  CompactionKernel kernel(ctx);
  const std::pair<double, double> int_bounds[] = {
      {7, 7},        {2.5, 9.5}, {-5, 3},  {250, 1e9}, {-kInf, 40}, {40, kInf},
      {-kInf, kInf}, {0.2, 0.8}, {-3, -1}, {300, 400}, {255, 255},  {65535, 65535}};
  for (SampleType t : {SampleType::kUint8, SampleType::kUint16}) {
    const ImageDesc d{61, 37, 3, t};
    // uint16: mostly small values, so that the small bounds cut, and a few at the maximum.
    HostImage host = testing::RandomImage(d, rng, t == SampleType::kUint8 ? -1 : 80);
    if (t == SampleType::kUint16) {
      for (int i = 0; i < 40; ++i) host.set<uint16_t>(int(rng() % 61), int(rng() % 37), 0, 65535);
    }
    auto image = Image::Upload(ctx, host);
    ASSERT_TRUE(image.ok());
    for (auto [lo, hi] : int_bounds) {
      for (bool inside : {true, false}) {
        for (CompactionSource s : {CompactionSource::kChannel, CompactionSource::kLuma}) {
          CompactionOptions o{.source = s, .channel = 0, .lo = lo, .hi = hi, .inside = inside};
          ExpectMatchesReference(kernel, *image, host, o);
        }
      }
    }
  }
  // Float: NaNs (never pass), infinities, signed zeros, denormals and the largest floats, with
  // bounds that are not floats themselves.
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            0.0f,
                            -0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            0.1f,
                            std::nextafter(0.1f, 1.0f),
                            1.0f};
  const ImageDesc d{53, 29, 4, SampleType::kFloat32};
  HostImage host = testing::RandomImage(d, rng);
  for (int y = 0; y < d.height; ++y) {
    for (int x = 0; x < d.width; ++x) {
      for (int c = 0; c < 4; ++c) {
        if (rng() % 3 == 0) host.set<float>(x, y, c, specials[rng() % std::size(specials)]);
      }
    }
  }
  auto image = Image::Upload(ctx, host);
  ASSERT_TRUE(image.ok());
  const double fmax = std::numeric_limits<float>::max();
  const std::pair<double, double> float_bounds[] = {
      {0, 0},        {-0.0, 0.0},         {0.1, 0.1},     {0.1, 1},          {-kInf, kInf},
      {kInf, kInf},  {-kInf, -kInf},      {-kInf, 0},     {0, kInf},         {fmax, kInf},
      {1e300, kInf}, {-1e300, 1e300},     {1e-45, 1e-38}, {-1e-300, 1e-300}, {-0.5, 1.5},
      {0.25, 0.25},  {2 * fmax, 3 * fmax}};
  for (auto [lo, hi] : float_bounds) {
    for (bool inside : {true, false}) {
      for (CompactionSource s : {CompactionSource::kChannel, CompactionSource::kLuma}) {
        for (int channel : {0, 3}) {
          CompactionOptions o{
              .source = s, .channel = channel, .lo = lo, .hi = hi, .inside = inside};
          ExpectMatchesReference(kernel, *image, host, o);
          if (s == CompactionSource::kLuma) break;
        }
      }
    }
  }
}

TEST(CompactionTest, CapKeepsTheFirstPixelsInRowMajorOrderAndTheExactTotal) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  CompactionKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes) {
    const ImageDesc d{97, 89, 2, t};
    HostImage host = SelectiveImage(d, 1, 0.3, rng);
    auto image = Image::Upload(ctx, host);
    ASSERT_TRUE(image.ok());
    CompactionOptions o{.channel = 1, .lo = PassRangeFor(t).lo, .hi = PassRangeFor(t).hi};
    o.count_only = true;
    auto all = reference::Compact(host, o);
    ASSERT_TRUE(all.ok());
    const int64_t total = int64_t(all->total);
    ASSERT_GT(total, 100);
    o.count_only = false;
    for (int64_t cap :
         {int64_t{0}, int64_t{1}, int64_t{7}, total - 1, total, total + 1, kMaxCompactionResults}) {
      o.max_results = cap;
      ExpectMatchesReference(kernel, *image, host, o);
      auto got = kernel.Run(*image, o);
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(got->truncated, cap < total) << cap;
      EXPECT_EQ(int64_t(got->returned()), std::min(cap, total)) << cap;
    }
  }
}

TEST(CompactionTest, CountOnlyGivesTheTotalAndNoList) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  CompactionKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes) {
    const ImageDesc d{113, 71, 4, t};
    for (double selectivity : {0.0, 0.001, 0.5, 1.0}) {
      HostImage host = SelectiveImage(d, 2, selectivity, rng);
      auto image = Image::Upload(ctx, host);
      ASSERT_TRUE(image.ok());
      CompactionOptions o{
          .channel = 2, .lo = PassRangeFor(t).lo, .hi = PassRangeFor(t).hi, .count_only = true};
      ExpectMatchesReference(kernel, *image, host, o);
      auto got = kernel.Run(*image, o);
      ASSERT_TRUE(got.ok());
      EXPECT_TRUE(got->xy.empty());
      EXPECT_TRUE(got->values.empty());
      EXPECT_FALSE(got->truncated);  // nothing was asked for, so nothing was cut
      o.source = CompactionSource::kLuma;
      o.lo = 0.3;
      o.hi = 200;
      ExpectMatchesReference(kernel, *image, host, o);
    }
  }
}

TEST(CompactionTest, EightBitPixelsAtEveryBoundChannelAndRowEnd) {
  // The strip scan tests one channel of 8-bit pixels a word at a time (16-bit fields), counting
  // and listing: every channel of 1 to 4-channel images (3: four pixels in three words, a
  // funnel shift by the channel), and the luma of 3 and 4-channel ones; rows ending at every byte
  // of a texel and at both ends of a 3-texel run of 3-byte pixels; bounds at and past both ends
  // of the byte range, empty ranges, both senses.
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  CompactionKernel kernel(ctx);
  const std::pair<double, double> bounds[] = {
      {7, 7},        {0, 0},     {255, 255}, {-5, 3},    {250, 1e9}, {-kInf, 40}, {40, kInf},
      {-kInf, kInf}, {0.2, 0.8}, {-3, -1},   {300, 400}, {0, 254},   {1, 255},    {127.2, 127.9}};
  for (int ch : {1, 2, 3, 4}) {
    for (int w : {1, 2, 3, 5, 7, 13, 15, 16, 17, 31, 32, 33, 47, 131}) {
      const ImageDesc d{w, 3, ch, SampleType::kUint8};
      HostImage host = testing::RandomImage(d, rng);
      // Plenty of the extreme values, which sit next to the fields' carries.
      for (int i = 0; i < w; ++i) {
        host.set<uint8_t>(int(rng() % uint64_t(w)), int(rng() % 3), int(rng() % uint64_t(ch)),
                          rng() % 2 ? 0 : 255);
      }
      auto image = Image::Upload(ctx, host);
      ASSERT_TRUE(image.ok());
      // Channels 0 to ch - 1, then (ch >= 3) the luma.
      for (int channel = 0; channel < (ch >= 3 ? ch + 1 : ch); ++channel) {
        const CompactionSource source =
            channel == ch ? CompactionSource::kLuma : CompactionSource::kChannel;
        for (auto [lo, hi] : bounds) {
          for (bool inside : {true, false}) {
            for (bool count_only : {true, false}) {
              CompactionOptions o{.source = source,
                                  .channel = source == CompactionSource::kLuma ? 0 : channel,
                                  .lo = lo,
                                  .hi = hi,
                                  .inside = inside,
                                  .max_results = int64_t{w} * 3,
                                  .count_only = count_only,
                                  .variant = CompactionVariant::kStripScan};
              ExpectMatchesReference(kernel, *image, host, o, /*only=*/true);
            }
          }
        }
      }
    }
  }
}

// On a GPU the list is copied out of the device's buffer rather than read through a mapping
// (DeviceLimits::read_path): those paths, forced on this renderer, on lists of several pieces
// (kSinkPieceBytes) for every variant, and in chunks (a small binding limit).
TEST(CompactionTest, GpuReadPathsMatchReference) {
  GLIMPSE_REQUIRE_DEVICE();
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  testing::OnGpuReadPathContexts([&](Context& own) {
    CompactionKernel kernel(own);
    for (int ch : {1, 3}) {
      const ImageDesc d{613, 401, ch, SampleType::kUint8};
      const HostImage host = SelectiveImage(d, 0, 0.7, rng);
      absl::StatusOr<Image> image = Image::Upload(own, host);
      ASSERT_TRUE(image.ok()) << image.status();
      const CompactionOptions o{.channel = 0, .lo = 100, .hi = 120, .max_results = d.pixels()};
      ExpectMatchesReference(kernel, *image, host, o);
      kernel.SetBindingLimitForTesting(int64_t{1} << 18);
      ExpectMatchesReference(kernel, *image, host, o);
      kernel.SetBindingLimitForTesting(0);
    }
  });
}

TEST(CompactionTest, BandsAndChunksSplitLargeResultsAcrossBindings) {
  // A binding limit of a few KiB makes every run split the rows into bands, the ordered scan
  // climb several levels, and the gather run in many chunks: results must not change.
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  CompactionKernel kernel(ctx);
  for (int64_t limit : {int64_t{1024}, int64_t{4096} + 12}) {
    kernel.SetBindingLimitForTesting(limit);
    for (SampleType t : testing::kSampleTypes) {
      for (int ch = 1; ch <= 4; ++ch) {  // pixels of 1-16 bytes, whole words or not
        const ImageDesc d{37, 211, ch, t};
        HostImage host = SelectiveImage(d, 0, 0.7, rng);
        auto image = Image::Upload(ctx, host);
        ASSERT_TRUE(image.ok());
        CompactionOptions o{.channel = 0,
                            .lo = PassRangeFor(t).lo,
                            .hi = PassRangeFor(t).hi,
                            .max_results = d.pixels()};
        ExpectMatchesReference(kernel, *image, host, o);
        o.max_results = 1000;  // cut inside a middle band
        ExpectMatchesReference(kernel, *image, host, o);
        o.count_only = true;
        ExpectMatchesReference(kernel, *image, host, o);
      }
    }
  }
  kernel.SetBindingLimitForTesting(0);
}

TEST(CompactionTest, OrderedScanClimbsTwoLevelsOnALargeImage) {
  // 2900 x 2900 = 8.41 M pixels: 1027 blocks of 8192, more than one 1024-value scan run.
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  const ImageDesc d{2900, 2900, 1, SampleType::kUint8};
  HostImage host = HostImage::Zeros(d);
  for (uint8_t& b : host.data) b = uint8_t(rng());
  auto image = Image::Upload(ctx, host);
  ASSERT_TRUE(image.ok());
  CompactionKernel kernel(ctx);
  CompactionOptions o{
      .lo = 0, .hi = 0, .max_results = d.pixels(), .variant = CompactionVariant::kOrderedScan};
  ExpectMatchesReference(kernel, *image, host, o, /*only=*/true);
  o.lo = 3;  // 98.8%: the runs' offsets are large
  o.hi = 255;
  o.max_results = d.pixels() - 5;
  ExpectMatchesReference(kernel, *image, host, o, /*only=*/true);
}

TEST(CompactionTest, BadOptionsAreRefusedNamingTheFieldAndValue) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  const ImageDesc d{8, 4, 2, SampleType::kFloat32};
  HostImage host = HostImage::Zeros(d);
  auto image = Image::Upload(ctx, host);
  ASSERT_TRUE(image.ok());
  CompactionKernel kernel(ctx);
  struct Case {
    CompactionOptions options;
    std::string expect;
  } cases[] = {
      {{.lo = 5, .hi = 3}, "lo must not exceed hi, got lo = 5, hi = 3"},
      {{.lo = kInf, .hi = -kInf}, "lo must not exceed hi, got lo = inf, hi = -inf"},
      {{.lo = kNaN, .hi = 3}, "lo must be a number or +-inf, got nan"},
      {{.lo = 0, .hi = kNaN}, "hi must be a number or +-inf, got nan"},
      {{.channel = -1}, "channel must be in [0, 1] for a 2-channel image, got -1"},
      {{.channel = 2}, "channel must be in [0, 1] for a 2-channel image, got 2"},
      {{.source = CompactionSource::kLuma}, "source luma needs 3 or 4 channels, the image has 2"},
      {{.max_results = -1}, "max_results must be in [0, 2147483648], got -1"},
      {{.max_results = kMaxCompactionResults + 1},
       "max_results must be in [0, 2147483648], got 2147483649"},
      {{.variant = static_cast<CompactionVariant>(42)}, "variant must be auto, "},
  };
  for (const Case& c : cases) {
    auto got = kernel.Run(*image, c.options);
    ASSERT_FALSE(got.ok()) << c.expect;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(got.status().message().find(c.expect), std::string::npos) << got.status();
    auto ref = reference::Compact(host, c.options);
    ASSERT_FALSE(ref.ok());
    EXPECT_EQ(ref.status(), got.status());
  }
  // Equal bounds and the cap's limits are fine.
  for (CompactionOptions o :
       {CompactionOptions{.lo = 2, .hi = 2}, CompactionOptions{.max_results = 0},
        CompactionOptions{.max_results = kMaxCompactionResults}}) {
    EXPECT_TRUE(kernel.Run(*image, o).ok());
  }
}

TEST(CompactionTest, StripScanRefusesPixelsOfMoreThanFourBytes) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  CompactionKernel kernel(ctx);
  for (ImageDesc d :
       {ImageDesc{5, 3, 3, SampleType::kUint16}, ImageDesc{5, 3, 4, SampleType::kUint16},
        ImageDesc{5, 3, 2, SampleType::kFloat32}, ImageDesc{5, 3, 3, SampleType::kFloat32}}) {
    auto image = Image::Upload(ctx, HostImage::Zeros(d));
    ASSERT_TRUE(image.ok());
    auto got = kernel.Run(*image, {.variant = CompactionVariant::kStripScan});
    ASSERT_FALSE(got.ok()) << DescribeImage(d);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string want =
        StrCat("variant strip_scan needs 1 to 4 bytes per pixel, got a ", DescribeImage(d));
    EXPECT_NE(got.status().message().find(want), std::string::npos) << got.status();
    // auto runs another variant there.
    auto a = kernel.Run(*image, {});
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_NE(a->variant, CompactionVariant::kStripScan);
  }
}

// Subgroups of the device's size, cut by the image's right edge and the band's last row (a
// 16 x 16 workgroup holds 256 / size of them): every selectivity from none to all, counted and
// listed, with and without a cap. Where the device has no ballots the variant is refused by name.
TEST(CompactionTest, SubgroupAggregatedMatchesTheReferenceOrIsRefusedWithoutBallots) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  CompactionKernel kernel(ctx);
  if (ctx.info().software) {
    // Mesa's llvmpipe offers GL_ARB_shader_ballot: CI runs the variant, not just its refusal.
    EXPECT_TRUE(ctx.limits().subgroup_ballot) << ctx.info().renderer;
  }
  if (!ctx.limits().subgroup_ballot) {
    auto image = Image::Upload(ctx, HostImage::Zeros({5, 3, 1, SampleType::kUint8}));
    ASSERT_TRUE(image.ok());
    auto got = kernel.Run(*image, {.variant = CompactionVariant::kSubgroupAggregated});
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(got.status().message().find("variant subgroup_aggregated needs subgroup ballots"),
              std::string::npos)
        << got.status();
    return;
  }
  for (auto [w, h, ch, t] :
       {std::tuple{1, 1, 1, SampleType::kUint8}, std::tuple{17, 3, 4, SampleType::kUint8},
        std::tuple{61, 47, 3, SampleType::kUint16}, std::tuple{129, 33, 2, SampleType::kFloat32},
        std::tuple{300, 211, 1, SampleType::kUint8}}) {
    const ImageDesc d{w, h, ch, t};
    for (double selectivity : {0.0, 0.01, 0.5, 0.97, 1.0}) {
      const int channel = int(rng() % uint64_t(ch));
      HostImage host = SelectiveImage(d, channel, selectivity, rng);
      auto image = Image::Upload(ctx, host);
      ASSERT_TRUE(image.ok()) << image.status();
      for (bool count_only : {false, true}) {
        for (int64_t cap : {int64_t{5}, d.pixels()}) {
          CompactionOptions o{.channel = channel,
                              .lo = PassRangeFor(t).lo,
                              .hi = PassRangeFor(t).hi,
                              .max_results = cap,
                              .count_only = count_only,
                              .variant = CompactionVariant::kSubgroupAggregated};
          ExpectMatchesReference(kernel, *image, host, o, /*only=*/true);
          o.inside = false;
          ExpectMatchesReference(kernel, *image, host, o, /*only=*/true);
        }
      }
    }
  }
}

// Run by CTest in a process of its own, so the context has built nothing before WarmUp().
TEST(CompactionTest, WarmUpLeavesNothingForAutoToBuild) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  CompactionKernel kernel(ctx);
  ASSERT_TRUE(kernel.WarmUp().ok());
  const size_t built = ctx.programs_built();
  EXPECT_GT(built, 0u);
  for (SampleType t : testing::kSampleTypes) {
    for (int ch = 1; ch <= 4; ++ch) {
      for (auto [w, h] : {std::pair{1, 1}, std::pair{37, 5}, std::pair{130, 3}}) {
        const ImageDesc d{w, h, ch, t};
        HostImage host = SelectiveImage(d, 0, 0.5, rng);
        auto image = Image::Upload(ctx, host);
        ASSERT_TRUE(image.ok()) << image.status();
        for (CompactionSource source : {CompactionSource::kChannel, CompactionSource::kLuma}) {
          if (source == CompactionSource::kLuma && ch < 3) continue;
          // Every channel: the strip scan's programs for 3-byte pixels are made per channel.
          for (int channel = 0; channel < (source == CompactionSource::kLuma ? 1 : ch); ++channel) {
            for (bool count_only : {false, true}) {
              for (bool inside : {true, false}) {
                for (int64_t cap : {int64_t{3}, d.pixels()}) {
                  CompactionOptions o{.source = source,
                                      .channel = channel,
                                      .lo = PassRangeFor(t).lo,
                                      .hi = PassRangeFor(t).hi,
                                      .inside = inside,
                                      .max_results = cap,
                                      .count_only = count_only};
                  auto got = kernel.Run(*image, o);
                  ASSERT_TRUE(got.ok()) << got.status() << " " << Describe(d, o);
                  EXPECT_EQ(ctx.programs_built(), built) << Describe(d, o) << " built a program";
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(CompactionTest, NamesRoundTrip) {
  for (CompactionVariant v : kCompactionVariants) {
    EXPECT_EQ(ParseCompactionVariant(CompactionVariantName(v)), v);
  }
  EXPECT_EQ(ParseCompactionVariant(""), CompactionVariant::kAuto);
  EXPECT_EQ(ParseCompactionVariant("ordered_scan"), CompactionVariant::kOrderedScan);
  EXPECT_EQ(ParseCompactionVariant("bitonic"), std::nullopt);
  for (CompactionSource s : {CompactionSource::kChannel, CompactionSource::kLuma}) {
    EXPECT_EQ(ParseCompactionSource(CompactionSourceName(s)), s);
  }
  EXPECT_EQ(ParseCompactionSource("all"), std::nullopt);
}

TEST(CompactionTest, PrepareCompilesEveryProgram) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  CompactionKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes)
    EXPECT_TRUE(kernel.Prepare(t).ok()) << SampleTypeName(t);
}

}  // namespace
}  // namespace glimpse::gpu
