// The histogram chart drawn from known counts: the curve in every pixel column against the
// counts on both scales, one colour per histogram, text drawn, bad input refused.
#include "client/chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <tuple>

namespace glimpse::client {
namespace {

uint64_t Seed() {
  static const uint64_t seed = [] {
    const char* s = std::getenv("GLIMPSE_SEED");
    const uint64_t v = s ? std::strtoull(s, nullptr, 10) : std::random_device{}();
    std::printf("seed %llu (GLIMPSE_SEED to replay)\n", static_cast<unsigned long long>(v));
    return v;
  }();
  return seed;
}

v1::HistogramResponse Response(const std::vector<std::vector<uint64_t>>& counts, double lo,
                               double hi, uint32_t channels) {
  v1::HistogramResponse r;
  r.set_bins(uint32_t(counts[0].size()));
  r.set_lo(lo);
  r.set_hi(hi);
  r.set_variant("private_rows");
  r.mutable_image()->set_width(17);
  r.mutable_image()->set_height(5);
  r.mutable_image()->set_channels(channels);
  r.mutable_image()->set_format(v1::SAMPLE_FORMAT_UINT8);
  uint64_t total = 0;
  for (const auto& c : counts) {
    r.add_histograms()->mutable_counts()->Add(c.begin(), c.end());
    for (uint64_t v : c) total += v;
  }
  r.set_total(total);
  return r;
}

using Rgb = std::tuple<int, int, int>;
Rgb Pixel(const HistogramChart& c, int x, int y) {
  const uint8_t* p = &c.rgb[(size_t(y) * c.width + x) * 3];
  return {p[0], p[1], p[2]};
}
// Outlines are drawn nearly opaque; fills, grid lines and the background stay light.
bool IsOutline(Rgb p) { return std::min({std::get<0>(p), std::get<1>(p), std::get<2>(p)}) < 150; }

// The row a count is drawn at, from the documented axis: linear from 0 to count_top; log from
// 10^-0.3 to 10^count_top, zero on the baseline.
int Row(const HistogramChart& c, bool log_scale, double count) {
  double f = count / c.count_top;
  if (log_scale) f = count < 1 ? 0 : (std::log10(count) + 0.3) / (c.count_top + 0.3);
  return c.plot_top + c.plot_height - int(std::lround(f * (c.plot_height - 1)));
}

TEST(HistogramChartTest, TheCurveFollowsTheCountsInEveryColumnOnBothScales) {
  std::mt19937_64 rng(Seed());
  for (int bins : {1, 2, 7, 256, 257, 799, 801, 4096, 65536}) {
    std::vector<uint64_t> counts(static_cast<size_t>(bins));
    const uint64_t scale = uint64_t{1} << (rng() % 30);
    for (uint64_t& v : counts) v = rng() % 4 == 0 ? 0 : rng() % (scale + 1);
    counts[rng() % counts.size()] = scale * 3 + 1;  // one clear peak
    const v1::HistogramResponse r = Response({counts}, 0, 256, 1);
    for (bool log_scale : {false, true}) {
      SCOPED_TRACE(testing::Message() << bins << " bins, log " << log_scale);
      HistogramChart c;
      ASSERT_EQ(DrawHistogramChart(r, {"test.png", "luma", 0, log_scale}, &c), "");
      ASSERT_EQ(c.rgb.size(), size_t(c.width) * c.height * 3);
      const uint64_t peak = scale * 3 + 1;
      if (log_scale) {
        EXPECT_GE(std::pow(10.0, c.count_top), double(peak));
        EXPECT_LT(std::pow(10.0, c.count_top), 10.0 * std::max<double>(peak, 2));
      } else {
        EXPECT_GE(c.count_top, double(peak));
        EXPECT_LT(c.count_top, 1.5 * double(peak) + 1);
      }
      int prev = -1, wrong = 0;
      for (int x = 0; x < c.plot_width; ++x) {
        // A column shows the largest count of the bins it covers.
        const int b0 = int(int64_t(x) * bins / c.plot_width);
        const int b1 = std::max(b0 + 1, int(int64_t(x + 1) * bins / c.plot_width));
        uint64_t v = 0;
        for (int b = b0; b < b1 && b < bins; ++b) v = std::max(v, counts[size_t(b)]);
        const int y = Row(c, log_scale, double(v));
        // The outline joins the previous column's level to this one's, one pixel thick above.
        const int expected = (prev < 0 ? y : std::min(prev, y)) - 1;
        int top = -1;
        for (int row = c.plot_top - 2; row < c.plot_top + c.plot_height && top < 0; ++row) {
          if (IsOutline(Pixel(c, c.plot_left + x, row))) top = row;
        }
        if (top != expected && ++wrong <= 5) {
          ADD_FAILURE() << "column " << x << " (bins " << b0 << "-" << b1 - 1 << ", count " << v
                        << "): curve at row " << top << ", expected " << expected;
        }
        prev = y;
      }
      EXPECT_EQ(wrong, 0);
    }
  }
}

TEST(HistogramChartTest, EachHistogramHasItsOwnColourAndTheTextIsDrawn) {
  for (uint32_t channels : {2u, 3u, 4u}) {
    // Histogram i peaks alone in bin 10 + 20 i.
    std::vector<std::vector<uint64_t>> counts(channels, std::vector<uint64_t>(100, 0));
    for (uint32_t i = 0; i < channels; ++i) counts[i][10 + 20 * i] = 1000;
    HistogramChart c;
    ASSERT_EQ(DrawHistogramChart(Response(counts, 0, 1, channels), {"t.png", "all", 0, false}, &c),
              "");
    std::set<Rgb> colours;
    for (uint32_t i = 0; i < channels; ++i) {
      const int x = c.plot_left + int((10 + 20 * i + 0.5) * c.plot_width / 100);
      const int y = Row(c, false, 1000);  // the outline's lower row at the peak
      colours.insert(Pixel(c, x, y));
    }
    EXPECT_EQ(colours.size(), channels) << "two histograms share a colour";

    // Title, legend and tick labels: anti-aliased glyph edges above the plot and left of it.
    auto glyph_pixels = [&](int x0, int y0, int x1, int y1) {
      int n = 0;
      for (int y = y0; y < y1; ++y) {
        for (int x = x0; x < x1; ++x) {
          const int g = std::get<1>(Pixel(c, x, y));
          n += g > 30 && g < 220 ? 1 : 0;
        }
      }
      return n;
    };
    EXPECT_GT(glyph_pixels(0, 0, c.width, c.plot_top - 10), 300);
    EXPECT_GT(glyph_pixels(0, c.plot_top, c.plot_left - 6, c.plot_top + c.plot_height), 100);
    EXPECT_GT(glyph_pixels(c.plot_left, c.plot_top + c.plot_height + 8, c.width, c.height), 200);
  }
}

TEST(HistogramChartTest, RefusesWhatItCannotDraw) {
  HistogramChart c;
  v1::HistogramResponse empty;
  EXPECT_NE(DrawHistogramChart(empty, {}, &c), "");
  v1::HistogramResponse r = Response({{1, 2, 3}}, 0, 256, 1);
  r.set_bins(4);  // counts do not match
  EXPECT_NE(DrawHistogramChart(r, {}, &c), "");
  r = Response({{1, 2, 3}}, 5, 5, 1);  // empty range
  EXPECT_NE(DrawHistogramChart(r, {}, &c), "");
}

}  // namespace
}  // namespace glimpse::client
