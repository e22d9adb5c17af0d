#include "gpu/histogram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "common/str.h"
#include "gpu/internal/histogram_private_array.h"
#include "gpu/reference/histogram.h"
#include "tests/gpu/describe.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

constexpr HistogramVariant kHistogramVariants[] = {
    HistogramVariant::kGlobalAtomics,   HistogramVariant::kSharedAtomics,
    HistogramVariant::kSharedPerThread, HistogramVariant::kPrivateRows,
    HistogramVariant::kPrivateArray,    HistogramVariant::kAuto};

// Runs every variant on `host` and expects each to equal the CPU reference exactly; private_array,
// where bins x histograms exceed its array, must refuse the request instead.
void ExpectAllVariantsMatchReference(Context& ctx, const HostImage& host, HistogramOptions o) {
  auto image = Image::Upload(ctx, host);
  ASSERT_TRUE(image.ok()) << image.status();
  o.variant = HistogramVariant::kAuto;
  auto expected = reference::Histogram(host, o);
  ASSERT_TRUE(expected.ok()) << expected.status();
  uint64_t total = 0;
  for (const auto& h : expected->counts) {
    for (uint64_t c : h) total += c;
  }
  HistogramKernel kernel(ctx);
  for (HistogramVariant v : kHistogramVariants) {
    o.variant = v;
    auto got = kernel.Run(*image, o);
    const int64_t words = int64_t{o.bins} * int64_t(expected->counts.size());
    if (v == HistogramVariant::kPrivateArray && words > kMaxPrivateArrayWords) {
      ASSERT_FALSE(got.ok()) << Describe(host.desc, o);
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(got.status().message().find(StrCat("bins x histograms must be at most 1024 for "
                                                   "variant private_array, got ",
                                                   o.bins, " x ", expected->counts.size())),
                std::string::npos)
          << got.status();
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status() << " " << Describe(host.desc, o);
    ASSERT_EQ(got->counts.size(), expected->counts.size()) << Describe(host.desc, o);
    for (size_t h = 0; h < got->counts.size(); ++h) {
      ASSERT_EQ(got->counts[h], expected->counts[h])
          << "histogram " << h << " of " << Describe(host.desc, o) << ", " << total
          << " values counted";
    }
    EXPECT_EQ(got->bins, o.bins);
    if (v != HistogramVariant::kAuto) {
      EXPECT_EQ(got->variant, v);
    } else {
      EXPECT_NE(got->variant, HistogramVariant::kAuto);
    }
  }
}

TEST(HistogramTest, EveryFormatChannelCountAndSourceAtAwkwardSizes) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  // 1x1, 1xN, Nx1, primes, one past the 16- and 64-pixel workgroup tiles.
  const std::pair<int, int> sizes[] = {{1, 1}, {1, 97}, {131, 1}, {17, 65}, {65, 17}, {127, 61}};
  for (SampleType t : testing::kSampleTypes) {
    for (int ch = 1; ch <= 4; ++ch) {
      for (auto [w, h] : sizes) {
        ImageDesc d{w, h, ch, t};
        HostImage host = testing::RandomImage(d, rng);
        HistogramOptions o;
        o.bins = t == SampleType::kUint8 ? 256 : 100;
        if (t == SampleType::kFloat32) {
          o.lo = -0.5;  // cuts values at both ends of [-1, 2)
          o.hi = 1.5;
        }
        o.source = HistogramSource::kAllChannels;
        ExpectAllVariantsMatchReference(ctx, host, o);
        o.source = HistogramSource::kChannel;
        o.channel = ch - 1;
        ExpectAllVariantsMatchReference(ctx, host, o);
        if (ch >= 3) {
          o.source = HistogramSource::kLuma;
          ExpectAllVariantsMatchReference(ctx, host, o);
          o.source = HistogramSource::kRgbMean;
          ExpectAllVariantsMatchReference(ctx, host, o);
        }
      }
    }
  }
}

TEST(HistogramTest, RangesThatCutBothEndsAndAwkwardBinCounts) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed() + 1);
  HostImage u8 = testing::RandomImage({83, 71, 3, SampleType::kUint8}, rng);
  HostImage u16 = testing::RandomImage({67, 59, 2, SampleType::kUint16}, rng);
  struct Case {
    int bins;
    double lo, hi;
  } cases[] = {{1, 0, 256},
               {10, 20, 200},
               {8, 16, 208},
               {7, 3, 250},
               {255, 0, 256},
               {3, 100.5, 101.5},
               {1000, 0, 256},
               {5, -10, 5},
               // Keys binned by a shift alone: 48 bins of the mean (R+G+B >> 4), 64 of the rest.
               {48, 0, 256},
               {64, 0, 256}};
  for (const Case& c : cases) {
    HistogramOptions o;
    o.bins = c.bins;
    o.lo = c.lo;
    o.hi = c.hi;
    for (auto s :
         {HistogramSource::kAllChannels, HistogramSource::kLuma, HistogramSource::kRgbMean}) {
      o.source = s;
      ExpectAllVariantsMatchReference(ctx, u8, o);
    }
    o.source = HistogramSource::kAllChannels;
    o.lo = c.lo * 200;
    o.hi = c.hi * 200;
    ExpectAllVariantsMatchReference(ctx, u16, o);
  }
}

TEST(HistogramTest, MoreBinsThanSharedMemoryHolds) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed() + 2);
  // 65536 bins of 16-bit data, 4 channels: 1 MiB of counters, far beyond shared memory, so the
  // shared variants run in slices.
  HostImage u16 = testing::RandomImage({131, 67, 4, SampleType::kUint16}, rng);
  HistogramOptions o;
  o.bins = kMaxHistogramBins;
  ExpectAllVariantsMatchReference(ctx, u16, o);
  o.source = HistogramSource::kLuma;
  o.bins = 20000;
  ExpectAllVariantsMatchReference(ctx, u16, o);
  HostImage f32 = testing::RandomImage({97, 41, 1, SampleType::kFloat32}, rng);
  o.source = HistogramSource::kChannel;
  o.channel = 0;
  o.bins = 50001;
  o.lo = -1;
  o.hi = 2;
  ExpectAllVariantsMatchReference(ctx, f32, o);
}

TEST(HistogramTest, ExactValuesOnKnownImages) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  // Every 8-bit value once, plus 255 once more: a full-range 256-bin histogram is all ones but
  // the last bin; 10 bins over [20, 200) put 38 in bin 1 exactly (OpenCV puts it in bin 0).
  HostImage img = HostImage::Zeros({257, 1, 1, SampleType::kUint8});
  for (int x = 0; x < 257; ++x) img.set<uint8_t>(x, 0, 0, uint8_t(std::min(x, 255)));
  auto image = Image::Upload(ctx, img);
  ASSERT_TRUE(image.ok());
  HistogramKernel kernel(ctx);
  for (HistogramVariant v : kHistogramVariants) {
    HistogramOptions o;
    o.variant = v;
    auto r = kernel.Run(*image, o);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->counts.size(), 1u);
    for (int b = 0; b < 255; ++b) EXPECT_EQ(r->counts[0][size_t(b)], 1u) << b;
    EXPECT_EQ(r->counts[0][255], 2u);
    o.bins = 10;
    o.lo = 20;
    o.hi = 200;
    r = kernel.Run(*image, o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->counts[0][0], 18u);  // 20..37
    EXPECT_EQ(r->counts[0][1], 18u);  // 38..55
    EXPECT_EQ(r->counts[0][9], 18u);  // 182..199
  }
  // Luma of 8-bit RGB matches OpenCV's fixed-point formula: (9798*R + 19235*G + 3735*B + 16384)
  // >> 15.
  HostImage rgb = HostImage::Zeros({1, 1, 3, SampleType::kUint8});
  rgb.set<uint8_t>(0, 0, 0, 200);
  rgb.set<uint8_t>(0, 0, 1, 100);
  rgb.set<uint8_t>(0, 0, 2, 50);
  auto rgb_image = Image::Upload(ctx, rgb);
  ASSERT_TRUE(rgb_image.ok());
  HistogramOptions o;
  o.source = HistogramSource::kLuma;
  auto r = kernel.Run(*rgb_image, o);
  ASSERT_TRUE(r.ok());
  const uint32_t luma = (9798u * 200 + 19235u * 100 + 3735u * 50 + 16384u) >> 15;  // 124
  EXPECT_EQ(r->counts[0][luma], 1u);
}

TEST(HistogramTest, FloatNaNAndValuesOnTheUpperBoundAreNotCounted) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  HostImage img = HostImage::Zeros({4, 1, 1, SampleType::kFloat32});
  img.set<float>(0, 0, 0, std::numeric_limits<float>::quiet_NaN());
  img.set<float>(1, 0, 0, 1.0f);                                    // == hi: excluded
  img.set<float>(2, 0, 0, std::nextafter(1.0f, 0.0f));              // just below hi: last bin
  img.set<float>(3, 0, 0, std::numeric_limits<float>::infinity());  // outside
  auto image = Image::Upload(ctx, img);
  ASSERT_TRUE(image.ok());
  HistogramKernel kernel(ctx);
  for (HistogramVariant v : kHistogramVariants) {
    HistogramOptions o;
    o.bins = 4;
    o.variant = v;
    auto r = kernel.Run(*image, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->counts[0], (std::vector<uint64_t>{0, 0, 0, 1})) << HistogramVariantName(v);
  }
}

TEST(HistogramTest, BadOptionsNameTheFieldAndValue) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  auto image = Image::Upload(ctx, HostImage::Zeros({3, 2, 2, SampleType::kUint8}));
  ASSERT_TRUE(image.ok());
  HistogramKernel kernel(ctx);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    HistogramOptions o;
    std::string expect;
  };
  auto with = [](auto f) {
    HistogramOptions o;
    f(o);
    return o;
  };
  const Case cases[] = {
      {with([](auto& o) { o.bins = 0; }), "bins must be in [1, 65536], got 0"},
      {with([](auto& o) { o.bins = 65537; }), "bins must be in [1, 65536], got 65537"},
      {with([](auto& o) { o.lo = 10, o.hi = 10; }), "lo must be below hi, got lo = 10, hi = 10"},
      {with([](auto& o) { o.lo = 20, o.hi = 10; }), "lo must be below hi"},
      {with([&](auto& o) { o.lo = nan; }), "lo must be finite, got nan"},
      {with([&](auto& o) { o.hi = nan; }), "hi must be finite, got nan"},
      {with([](auto& o) { o.hi = std::numeric_limits<double>::infinity(); }), "hi must be finite"},
      {with([](auto& o) { o.source = HistogramSource::kChannel, o.channel = 2; }),
       "channel must be in [0, 1] for a 2-channel image, got 2"},
      {with([](auto& o) { o.source = HistogramSource::kChannel, o.channel = -1; }), "got -1"},
      {with([](auto& o) { o.source = HistogramSource::kLuma; }),
       "source luma needs 3 or 4 channels, the image has 2"},
      {with([](auto& o) { o.bins = 513, o.variant = HistogramVariant::kPrivateArray; }),
       "bins x histograms must be at most 1024 for variant private_array, got 513 x 2"},
      {with([](auto& o) { o.variant = static_cast<HistogramVariant>(42); }),
       "variant must be auto, global_atomics, shared_atomics, shared_per_thread, private_rows or "
       "private_array, got #42"},
  };
  for (const Case& c : cases) {
    auto r = kernel.Run(*image, c.o);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
  }
  EXPECT_FALSE(ParseHistogramVariant("fastest").has_value());
  EXPECT_EQ(ParseHistogramVariant("private_rows"), HistogramVariant::kPrivateRows);
  EXPECT_EQ(ParseHistogramVariant("private_array"), HistogramVariant::kPrivateArray);
  EXPECT_EQ(ParseHistogramSource("luma"), HistogramSource::kLuma);
}

TEST(HistogramTest, PrivateArraySumsManyRowsPerInvocation) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed() + 3);
  // Taller than the invocations of the counting pass (so each takes several rows, some one more
  // than others), and counts past 2^16 in one bin.
  HostImage img = testing::RandomImage({301, 613, 4, SampleType::kUint8}, rng, 1);
  auto image = Image::Upload(ctx, img);
  ASSERT_TRUE(image.ok());
  HistogramKernel kernel(ctx);
  for (HistogramSource s : {HistogramSource::kAllChannels, HistogramSource::kLuma,
                            HistogramSource::kRgbMean, HistogramSource::kChannel}) {
    HistogramOptions o;
    o.source = s;
    o.channel = 3;
    o.variant = HistogramVariant::kPrivateArray;
    auto expected = reference::Histogram(img, o);
    ASSERT_TRUE(expected.ok());
    auto got = kernel.Run(*image, o);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->counts, expected->counts) << HistogramSourceName(s);
  }
}

TEST(HistogramTest, AutoPicksPrivateArrayForIntegerImagesOnCpuRenderers) {
  DeviceInfo cpu, gpu;
  cpu.software = cpu.cpu_variants = true;
  cpu.limits.max_shared_memory_bytes = gpu.limits.max_shared_memory_bytes = 32768;
  auto pick = [](const DeviceInfo& d, ImageDesc desc, HistogramSource s, int bins, double lo = 0) {
    HistogramOptions o;
    o.source = s;
    o.bins = bins;
    o.lo = lo;
    auto r = ResolveHistogramOptions(desc, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return ResolveHistogramVariant(d, desc, *r);
  };
  const ImageDesc rgba8{8, 8, 4, SampleType::kUint8}, rgba16{8, 8, 4, SampleType::kUint16};
  EXPECT_EQ(pick(cpu, rgba8, HistogramSource::kAllChannels, 256), HistogramVariant::kPrivateArray);
  EXPECT_EQ(pick(cpu, rgba8, HistogramSource::kLuma, 256), HistogramVariant::kPrivateArray);
  EXPECT_EQ(pick(cpu, rgba8, HistogramSource::kRgbMean, 16, 10), HistogramVariant::kPrivateArray);
  // More than 256 bins, or bounds only the table bins exactly: private rows, or global atomics.
  EXPECT_EQ(pick(cpu, rgba8, HistogramSource::kLuma, 257), HistogramVariant::kPrivateRows);
  EXPECT_EQ(pick(cpu, rgba8, HistogramSource::kLuma, 200, 0.5), HistogramVariant::kPrivateRows);
  EXPECT_EQ(pick(cpu, rgba8, HistogramSource::kAllChannels, 257), HistogramVariant::kGlobalAtomics);
  EXPECT_EQ(pick(cpu, rgba16, HistogramSource::kAllChannels, 256), HistogramVariant::kPrivateArray);
  EXPECT_EQ(pick(cpu, rgba16, HistogramSource::kLuma, 1000, 1), HistogramVariant::kPrivateRows);
  EXPECT_EQ(pick(cpu, rgba16, HistogramSource::kLuma, 200, 0.5), HistogramVariant::kPrivateRows);
  EXPECT_EQ(pick(cpu, ImageDesc{8, 8, 4, SampleType::kFloat32}, HistogramSource::kLuma, 256),
            HistogramVariant::kPrivateRows);
  EXPECT_EQ(pick(gpu, rgba8, HistogramSource::kAllChannels, 256),
            HistogramVariant::kSharedPerThread);
  EXPECT_EQ(pick(gpu, rgba8, HistogramSource::kAllChannels, 2049),
            HistogramVariant::kGlobalAtomics);
}

TEST(HistogramTest, IntegerBoundsOfEightBitKeysBinByMultiplyShift) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed() + 5);
  // Every bin table of integer bounds that kAuto may give private_array has an exact
  // multiply-shift form, which equals the table key by key.
  for (int i = 0; i < 3000; ++i) {
    const ImageDesc desc{1, 1, 3, SampleType::kUint8};
    HistogramOptions o;
    o.source = i % 3 == 0   ? HistogramSource::kChannel
               : i % 3 == 1 ? HistogramSource::kLuma
                            : HistogramSource::kRgbMean;
    o.bins = int(1 + rng() % 256);
    const int lo = int(rng() % 300) - 20;
    o.lo = lo;
    o.hi = lo + 1 + int(rng() % 300);
    auto r = ResolveHistogramOptions(desc, o);
    ASSERT_TRUE(r.ok());
    const std::vector<int32_t> table = BuildIntegerBinTable(desc, *r);
    const auto k = internal::FindKeyArithmetic(*r, table);
    ASSERT_TRUE(k.has_value()) << "bins " << o.bins << " lo " << *o.lo << " hi " << *o.hi;
    for (uint32_t key = 0; key < table.size(); ++key) {
      const uint32_t d = key - k->base;
      const int32_t bin = d < k->range ? int32_t((d * k->mul) >> k->shift) : -1;
      ASSERT_EQ(bin, table[key]) << "key " << key << ", bins " << o.bins << " lo " << *o.lo
                                 << " hi " << *o.hi;
      if (k->shift_only) {
        ASSERT_EQ(int32_t(key >> k->shift), table[key])
            << "shift only: key " << key << ", bins " << o.bins << " lo " << *o.lo << " hi "
            << *o.hi;
      }
    }
  }
}

TEST(HistogramTest, PowerOfTwoBinsOverTheWholeRangeBinByAShiftAlone) {
  // The usual requests: the default range of 8-bit values (or of R+G+B, 0-765), 2^k bins.
  const ImageDesc desc{1, 1, 3, SampleType::kUint8};
  for (HistogramSource s : {HistogramSource::kChannel, HistogramSource::kAllChannels,
                            HistogramSource::kLuma, HistogramSource::kRgbMean}) {
    for (int bins = 1; bins <= 256; ++bins) {
      HistogramOptions o;
      o.source = s;
      o.bins = bins;
      auto r = ResolveHistogramOptions(desc, o);
      ASSERT_TRUE(r.ok());
      const std::vector<int32_t> table = BuildIntegerBinTable(desc, *r);
      const auto k = internal::FindKeyArithmetic(*r, table);
      ASSERT_TRUE(k.has_value()) << bins;
      // Keys per bin a power of two; the mean's keys are R+G+B, 768 of them for 256 values (one
      // bin: any key >> 10 is 0).
      const int keys = s == HistogramSource::kRgbMean ? 768 : 256;
      const int per_bin = keys / bins;
      const bool shift = bins == 1 || (keys % bins == 0 && (per_bin & (per_bin - 1)) == 0);
      EXPECT_EQ(k->shift_only, shift) << HistogramSourceName(s) << " " << bins << " bins";
      EXPECT_EQ(internal::KeyBinningFor(k),
                k->shift_only ? internal::KeyBinning::kShift : internal::KeyBinning::kArithmetic);
    }
  }
  // A range that leaves keys out, even with 2^k bins, needs the range check.
  HistogramOptions o;
  o.bins = 16;
  o.lo = 0;
  o.hi = 128;
  auto r = ResolveHistogramOptions(desc, o);
  ASSERT_TRUE(r.ok());
  const auto k = internal::FindKeyArithmetic(*r, BuildIntegerBinTable(desc, *r));
  ASSERT_TRUE(k.has_value());
  EXPECT_FALSE(k->shift_only);
  EXPECT_EQ(internal::KeyBinningFor(std::nullopt), internal::KeyBinning::kTable);
}

TEST(HistogramTest, AfterWarmUpAutoBuildsNoProgram) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  HistogramKernel kernel(ctx);
  ASSERT_TRUE(kernel.WarmUp().ok());
  const size_t built = ctx.programs_built();
  std::mt19937_64 rng(testing::TestSeed() + 4);
  struct Range {
    std::optional<double> lo, hi;
  };
  // Default ranges, fractional bounds (binned through the table), narrow integer ranges.
  const Range ranges[] = {{}, {0.5, 200.25}, {3, 41}};
  // Widths and heights that are powers of two and not, in pixels and in 16-byte texels.
  const std::pair<int, int> sizes[] = {{5, 3}, {64, 16}, {33, 8}, {16, 7}};
  for (SampleType t : testing::kSampleTypes) {
    for (int ch = 1; ch <= 4; ++ch) {
      for (auto [w, h] : sizes) {
        HostImage host = testing::RandomImage({w, h, ch, t}, rng);
        auto image = Image::Upload(ctx, host);
        ASSERT_TRUE(image.ok());
        for (HistogramSource s : {HistogramSource::kChannel, HistogramSource::kAllChannels,
                                  HistogramSource::kLuma, HistogramSource::kRgbMean}) {
          if (ch < 3 && (s == HistogramSource::kLuma || s == HistogramSource::kRgbMean)) continue;
          for (int bins : {1, 16, 100, 256, 257, 512, 1000, 1024, 1025, 3000, 8192, 8193, 65536}) {
            for (const Range& r : ranges) {
              HistogramOptions o;
              o.source = s;
              o.channel = ch - 1;
              o.bins = bins;
              o.lo = r.lo;
              o.hi = r.hi;
              if (t == SampleType::kFloat32 && r.lo) o.hi = *r.lo + 1;
              auto got = kernel.Run(*image, o);
              ASSERT_TRUE(got.ok()) << got.status() << " " << Describe(host.desc, o);
              ASSERT_EQ(ctx.programs_built(), built)
                  << "auto built a program after WarmUp: " << Describe(host.desc, o) << " ran "
                  << HistogramVariantName(got->variant);
            }
          }
        }
      }
    }
  }
}

TEST(HistogramTest, PrepareCompilesEveryProgram) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  HistogramKernel kernel(ctx);
  for (SampleType t : testing::kSampleTypes)
    EXPECT_TRUE(kernel.Prepare(t).ok()) << SampleTypeName(t);
}

}  // namespace
}  // namespace glimpse::gpu
