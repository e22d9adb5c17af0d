// HistogramKernel::RunPacked: every image of a pack must come out exactly as Run gives it for the
// image uploaded alone (and as the CPU reference counts it), whatever the atlas layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/str.h"
#include "gpu/histogram.h"
#include "gpu/reference/histogram.h"
#include "tests/gpu/describe.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

// Awkward sizes: single pixels, single rows and columns, one past a tile, primes, up to 512x512.
ImageDesc RandomDesc(std::mt19937_64& rng, int channels, SampleType type) {
  auto side = [&](int max) { return std::uniform_int_distribution<int>(1, max)(rng); };
  static constexpr std::pair<int, int> kFixed[] = {{1, 1},   {1, 37},  {53, 1},   {63, 65},
                                                   {257, 3}, {64, 64}, {65, 129}, {3, 257}};
  switch (rng() % 8) {
    case 0:
    case 1:
    case 2: {
      auto [w, h] = kFixed[rng() % std::size(kFixed)];
      return {w, h, channels, type};
    }
    case 3:
      return {1, side(300), channels, type};
    case 4:
      return {side(300), 1, channels, type};
    case 5:
      return {side(512), side(512), channels, type};
    default:
      return {side(100), side(100), channels, type};
  }
}

std::vector<PackedImage> Pack(const std::vector<HostImage>& hosts) {
  std::vector<PackedImage> pack;
  for (const HostImage& h : hosts) pack.push_back({h.desc, h.data, {}});
  return pack;
}

// `got` (a pack's result for `host`) against Run on `host` uploaded alone and, where that
// succeeds, the CPU reference; with the full range of an integer type, every value is counted.
void ExpectSameAsAlone(Context& ctx, HistogramKernel& kernel, const HostImage& host,
                       const HistogramOptions& o, const absl::StatusOr<HistogramResult>& got,
                       const std::string& where) {
  absl::StatusOr<Image> image = Image::Upload(ctx, host);
  ASSERT_TRUE(image.ok()) << image.status();
  absl::StatusOr<HistogramResult> alone = kernel.Run(*image, o);
  const std::string what = StrCat(where, ": ", Describe(host.desc, o));
  ASSERT_EQ(got.ok(), alone.ok()) << what << ": pack " << got.status() << ", alone "
                                  << alone.status();
  if (!alone.ok()) {
    EXPECT_EQ(got.status(), alone.status()) << what;
    return;
  }
  EXPECT_EQ(got->variant, alone->variant) << what;
  EXPECT_EQ(got->bins, alone->bins) << what;
  EXPECT_EQ(got->lo, alone->lo) << what;
  EXPECT_EQ(got->hi, alone->hi) << what;
  ASSERT_EQ(got->counts, alone->counts) << what;
  HistogramOptions auto_o = o;
  auto_o.variant = HistogramVariant::kAuto;
  absl::StatusOr<HistogramResult> want = reference::Histogram(host, auto_o);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(got->counts, want->counts) << what << " (against the CPU reference)";
  if (host.desc.type != SampleType::kFloat32 && !o.lo && !o.hi) {
    uint64_t total = 0;
    for (const auto& h : got->counts) {
      for (uint64_t c : h) total += c;
    }
    EXPECT_EQ(total, uint64_t(host.desc.pixels()) * got->counts.size()) << what;
  }
}

void ExpectPackSameAsAlone(Context& ctx, HistogramKernel& kernel,
                           const std::vector<HostImage>& hosts, const HistogramOptions& o,
                           std::optional<int> min_dispatches = std::nullopt) {
  absl::StatusOr<PackedHistograms> packed = kernel.RunPacked(Pack(hosts), o);
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_EQ(packed->results.size(), hosts.size());
  if (min_dispatches) {
    EXPECT_GE(packed->dispatches, *min_dispatches) << Describe(hosts[0].desc, o);
  }
  uint64_t shares = 0;
  for (size_t i = 0; i < hosts.size(); ++i) {
    ExpectSameAsAlone(ctx, kernel, hosts[i], o, packed->results[i],
                      StrCat("image ", i, " of ", hosts.size()));
    if (::testing::Test::HasFatalFailure()) return;
    if (packed->results[i].ok()) shares += packed->results[i]->gpu_ns;
  }
  EXPECT_LE(shares, packed->gpu_ns);
}

HistogramOptions RandomOptions(std::mt19937_64& rng, const ImageDesc& d, HistogramVariant v) {
  HistogramOptions o;
  o.variant = v;
  static constexpr int kBins[] = {1, 7, 256, 1000};
  o.bins = kBins[rng() % std::size(kBins)];
  std::vector<HistogramSource> sources = {HistogramSource::kChannel, HistogramSource::kAllChannels};
  if (d.channels >= 3) {
    sources.push_back(HistogramSource::kLuma);
    sources.push_back(HistogramSource::kRgbMean);
  }
  o.source = sources[rng() % sources.size()];
  o.channel = int(rng() % uint64_t(d.channels));
  if (rng() % 2 == 0) {  // a range cutting both ends (fractional bounds now and then)
    const double full = d.type == SampleType::kUint8    ? 256
                        : d.type == SampleType::kUint16 ? 65536
                                                        : 1;
    if (d.type == SampleType::kFloat32) {
      o.lo = 0.125;
      o.hi = 0.875;
    } else {
      o.lo = std::floor(full * 0.1) + (rng() % 4 == 0 ? 0.5 : 0);
      o.hi = std::floor(full * 0.8);
    }
  }
  return o;
}

TEST(HistogramPackedTest, RandomPacksEqualRunAlone) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed() + 100);
  HistogramKernel kernel(ctx);
  for (HistogramVariant v :
       {HistogramVariant::kAuto, HistogramVariant::kPrivateArray,
        HistogramVariant::kSharedPerThread, HistogramVariant::kGlobalAtomics}) {
    for (SampleType t : testing::kSampleTypes) {
      for (int ch = 1; ch <= 4; ++ch) {
        const int n = 1 + int(rng() % 40);
        std::vector<HostImage> hosts;
        for (int i = 0; i < n; ++i)
          hosts.push_back(testing::RandomImage(RandomDesc(rng, ch, t), rng));
        const HistogramOptions o = RandomOptions(rng, hosts[0].desc, v);
        ExpectPackSameAsAlone(ctx, kernel, hosts, o);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Packs read the same programs as single images, through atlases shaped as every image's
// textures are: nothing is left to build after the warm-up.
TEST(HistogramPackedTest, AfterWarmUpAutoPacksBuildNoProgram) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed() + 106);
  HistogramKernel kernel(ctx);
  ASSERT_TRUE(kernel.WarmUp().ok());
  const size_t built = ctx.programs_built();
  for (SampleType t : testing::kSampleTypes) {
    for (int ch = 1; ch <= 4; ++ch) {
      std::vector<HostImage> hosts;
      for (int i = 0; i < 6; ++i)
        hosts.push_back(testing::RandomImage(RandomDesc(rng, ch, t), rng));
      for (int bins : {1, 16, 256, 1000, 65536}) {
        HistogramOptions o = RandomOptions(rng, hosts[0].desc, HistogramVariant::kAuto);
        o.bins = bins;
        absl::StatusOr<PackedHistograms> packed = kernel.RunPacked(Pack(hosts), o);
        ASSERT_TRUE(packed.ok()) << packed.status();
        ASSERT_TRUE(packed->results[0].ok()) << packed->results[0].status();
        ASSERT_EQ(ctx.programs_built(), built)
            << "a pack built a program after WarmUp: " << Describe(hosts[0].desc, o) << " ran "
            << HistogramVariantName(packed->results[0]->variant);
      }
    }
  }
}

// The variants that run image by image inside RunPacked, and auto's choices for the options it
// sends elsewhere (more bins than private_array's arrays, 16-bit and float images).
TEST(HistogramPackedTest, OtherVariantsAndManyBinsEqualRunAlone) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed() + 101);
  HistogramKernel kernel(ctx);
  for (HistogramVariant v : {HistogramVariant::kSharedAtomics, HistogramVariant::kPrivateRows,
                             HistogramVariant::kAuto, HistogramVariant::kSharedPerThread}) {
    for (int bins : {300, 5000, 65536}) {
      const int ch = 1 + int(rng() % 4);
      const SampleType t = testing::kSampleTypes[rng() % 3];
      std::vector<HostImage> hosts;
      for (int i = 0; i < 5; ++i)
        hosts.push_back(testing::RandomImage(RandomDesc(rng, ch, t), rng));
      HistogramOptions o;
      o.variant = v;
      o.bins = bins;
      o.source = HistogramSource::kAllChannels;
      ExpectPackSameAsAlone(ctx, kernel, hosts, o);
      if (HasFatalFailure()) return;
    }
  }
}

// Tall, one-pixel-wide images whose rows add up past the texture limit: several atlases.
TEST(HistogramPackedTest, PackTallerThanTheTextureLimitDispatchesSeveralAtlases) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed() + 102);
  HistogramKernel kernel(ctx);
  const int height = 509;
  const int n = ctx.limits().max_texture_size / height + 3;
  std::vector<HostImage> hosts;
  for (int i = 0; i < n; ++i) {
    hosts.push_back(testing::RandomImage({1 + int(rng() % 3), height, 3, SampleType::kUint8}, rng));
  }
  for (HistogramVariant v : {HistogramVariant::kPrivateArray, HistogramVariant::kSharedPerThread,
                             HistogramVariant::kGlobalAtomics}) {
    HistogramOptions o;
    o.variant = v;
    o.source = HistogramSource::kLuma;
    ExpectPackSameAsAlone(ctx, kernel, hosts, o, 2);
    if (HasFatalFailure()) return;
  }
}

// Caps lowered so that a few 256x256 images fill an atlas: the byte cap, then the work buffers'.
TEST(HistogramPackedTest, AtlasCapsSplitThePack) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed() + 103);
  std::vector<HostImage> hosts;
  for (int i = 0; i < 9; ++i) {
    hosts.push_back(testing::RandomImage({256, 255 + i, 3, SampleType::kUint8}, rng));
  }
  for (HistogramVariant v : {HistogramVariant::kPrivateArray, HistogramVariant::kSharedPerThread,
                             HistogramVariant::kGlobalAtomics}) {
    HistogramOptions o;
    o.variant = v;
    {
      // 600 packed rows (768 bytes each: two images), or 450 plain rows (1024 bytes: one).
      HistogramKernel kernel(ctx);
      kernel.set_atlas_limits(size_t{768} * 600, size_t{64} << 20);
      ExpectPackSameAsAlone(ctx, kernel, hosts, o, 5);
      if (HasFatalFailure()) return;
    }
    {
      // Three images' counters (768 words each), and private_array's partials (16 invocations).
      HistogramKernel kernel(ctx);
      const size_t per_image = 768 * 4 * (v == HistogramVariant::kPrivateArray ? 17 : 1);
      kernel.set_atlas_limits(size_t{64} << 20, 3 * per_image);
      ExpectPackSameAsAlone(ctx, kernel, hosts, o, 3);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(HistogramPackedTest, OptionsThatDoNotResolveGiveEveryImageTheError) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed() + 104);
  HistogramKernel kernel(ctx);
  std::vector<HostImage> grey, rgba;
  for (int i = 0; i < 3; ++i) {
    grey.push_back(testing::RandomImage(RandomDesc(rng, 1, SampleType::kUint8), rng));
    rgba.push_back(testing::RandomImage(RandomDesc(rng, 4, SampleType::kUint16), rng));
  }
  struct Case {
    const std::vector<HostImage>* hosts;
    HistogramOptions o;
    std::string message;
  };
  HistogramOptions luma, no_bins, too_many;
  luma.source = HistogramSource::kLuma;
  no_bins.bins = 0;
  too_many.variant = HistogramVariant::kPrivateArray;
  too_many.bins = 1000;
  const Case cases[] = {
      {&grey, luma, "source luma needs 3 or 4 channels, the image has 1"},
      {&rgba, no_bins, "bins must be in [1, 65536], got 0"},
      {&rgba, too_many,
       "bins x histograms must be at most 1024 for variant private_array, got 1000 x 4"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PackedHistograms> packed = kernel.RunPacked(Pack(*c.hosts), c.o);
    ASSERT_TRUE(packed.ok()) << packed.status();
    ASSERT_EQ(packed->results.size(), c.hosts->size());
    EXPECT_EQ(packed->dispatches, 0);
    for (size_t i = 0; i < c.hosts->size(); ++i) {
      const absl::StatusOr<HistogramResult>& r = packed->results[i];
      ASSERT_FALSE(r.ok()) << c.message;
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(r.status().message(), c.message);
      ExpectSameAsAlone(ctx, kernel, (*c.hosts)[i], c.o, r, StrCat("image ", i));
    }
  }
  absl::StatusOr<PackedHistograms> none = kernel.RunPacked({}, HistogramOptions{});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->results.empty());
  EXPECT_EQ(none->dispatches, 0);
}

TEST(HistogramPackedTest, BadImagesNameTheImage) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  HistogramKernel kernel(ctx);
  const HostImage a = HostImage::Zeros({5, 4, 3, SampleType::kUint8});
  const HostImage b = HostImage::Zeros({7, 2, 3, SampleType::kUint8});
  const HostImage grey = HostImage::Zeros({7, 2, 1, SampleType::kUint8});
  const HostImage wide = HostImage::Zeros({7, 2, 3, SampleType::kUint16});
  std::span<const uint8_t> short_b(b.data.data(), b.data.size() - 1);
  struct Case {
    std::vector<PackedImage> pack;
    std::string message;
  };
  const std::string widened_note =
      ctx.limits().plain_uploads ? " (or be empty, with images[1].widened holding 56)" : "";
  const std::string widened_got = ctx.limits().plain_uploads ? " and 0" : "";
  const Case cases[] = {
      {{{a.desc, a.data, {}}, {b.desc, short_b, {}}},
       StrCat("images[1].pixels must hold 42 bytes for a 7x2 3-channel uint8 image", widened_note,
              ", got 41", widened_got)},
      {{{a.desc, a.data, {}}, {grey.desc, grey.data, {}}},
       "images[1] is a 7x2 1-channel uint8 image; every image of a pack must have the channels "
       "and sample type of images[0] (5x4 3-channel uint8)"},
      {{{a.desc, a.data, {}}, {wide.desc, wide.data, {}}},
       "images[1] is a 7x2 3-channel uint16 image; every image of a pack must have the channels "
       "and sample type of images[0] (5x4 3-channel uint8)"},
      {{{a.desc, a.data, {}}, {{0, 2, 3, SampleType::kUint8}, {}, {}}},
       StrCat("images[1].desc.width must be in [1, ", ctx.limits().max_texture_size,
              "] (the device's texture limit), got 0")},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PackedHistograms> r = kernel.RunPacked(c.pack, HistogramOptions{});
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
  if (!ctx.limits().plain_uploads) {
    // Widened rows alone are only taken where uploads fill the plain texture.
    const std::vector<uint8_t> widened(WidenedBytes(b.desc));
    const PackedImage only_widened[] = {{b.desc, {}, widened}};
    absl::StatusOr<PackedHistograms> r = kernel.RunPacked(only_widened, HistogramOptions{});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(),
              "images[0].pixels must hold 42 bytes for a 7x2 3-channel uint8 image, got 0");
  }
}

// As on a GPU: uploads fill the plain texture and auto picks the GPU's variants; 3-channel images
// come as their widened rows alone, whose fourth lanes (0 or 255) are never counted.
TEST(HistogramPackedTest, WidenedRowsAloneOnPlainUploadDevices) {
  GLIMPSE_REQUIRE_DEVICE();
  GLIMPSE_SEED_TRACE();
  testing::OnOwnContext({.auto_as_gpu = true, .plain_uploads = true}, [&](Context& own) {
    ASSERT_TRUE(own.limits().plain_uploads);
    std::mt19937_64 rng(testing::TestSeed() + 105);
    HistogramKernel kernel(own);
    for (SampleType t : testing::kSampleTypes) {
      std::vector<HostImage> hosts;
      const int n = 1 + int(rng() % 12);
      for (int i = 0; i < n; ++i) hosts.push_back(testing::RandomImage(RandomDesc(rng, 3, t), rng));
      for (uint8_t fourth : {uint8_t{0}, uint8_t{255}}) {
        std::vector<std::vector<uint8_t>> widened;
        std::vector<PackedImage> pack;
        for (const HostImage& h : hosts) {
          std::vector<uint8_t> w = WidenForUpload(own.limits(), h);
          ASSERT_EQ(w.size(), WidenedBytes(h.desc));
          const size_t s = size_t(BytesPerSample(t));
          for (size_t p = 3 * s; p < w.size(); p += 4 * s) std::memset(&w[p], fourth, s);
          widened.push_back(std::move(w));
        }
        for (size_t i = 0; i < hosts.size(); ++i) pack.push_back({hosts[i].desc, {}, widened[i]});
        for (HistogramVariant v :
             {HistogramVariant::kAuto, HistogramVariant::kGlobalAtomics,
              HistogramVariant::kPrivateArray, HistogramVariant::kSharedAtomics}) {
          HistogramOptions o = RandomOptions(rng, hosts[0].desc, v);
          if (v == HistogramVariant::kPrivateArray && o.bins > 256) o.bins = 256;
          if (fourth == 255) o.source = HistogramSource::kAllChannels;
          absl::StatusOr<PackedHistograms> packed = kernel.RunPacked(pack, o);
          ASSERT_TRUE(packed.ok()) << packed.status();
          for (size_t i = 0; i < hosts.size(); ++i) {
            if (v == HistogramVariant::kAuto) {
              ASSERT_TRUE(packed->results[i].ok()) << packed->results[i].status();
              EXPECT_NE(packed->results[i]->variant, HistogramVariant::kPrivateArray);
            }
            ExpectSameAsAlone(own, kernel, hosts[i], o, packed->results[i],
                              StrCat("widened image ", i, ", fourth lane ", int(fourth)));
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace glimpse::gpu
