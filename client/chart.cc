#include "client/chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "client/output_files.h"
#include "common/utf8.h"

#define STBTT_STATIC
#define STB_TRUETYPE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_truetype.h>
#pragma GCC diagnostic pop

namespace glimpse::client {
namespace {

struct Color {
  uint8_t r, g, b;
};
constexpr Color kBlack{0, 0, 0}, kText{40, 40, 40}, kAxis{90, 90, 90}, kGrid{228, 228, 228};
// Channel colours (matplotlib's tab10 red, green, blue, grey) and single-series colours.
constexpr Color kRed{214, 39, 40}, kGreen{44, 160, 44}, kBlue{31, 119, 180}, kGrey{127, 127, 127};
constexpr Color kDark{50, 50, 50}, kPurple{148, 103, 189}, kOrange{255, 127, 14};

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), rgb_(size_t(w) * h * 3, 255) {}
  int width() const { return w_; }
  int height() const { return h_; }
  // Mixes `c` over the pixel with opacity `a` in [0, 1]; outside the canvas is ignored.
  void Blend(int x, int y, Color c, float a) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_ || a <= 0) return;
    uint8_t* p = &rgb_[(size_t(y) * w_ + x) * 3];
    a = std::min(a, 1.0f);
    p[0] = uint8_t(std::lround(p[0] + (c.r - p[0]) * a));
    p[1] = uint8_t(std::lround(p[1] + (c.g - p[1]) * a));
    p[2] = uint8_t(std::lround(p[2] + (c.b - p[2]) * a));
  }
  void Fill(int x0, int y0, int x1, int y1, Color c, float a = 1) {  // [x0, x1) x [y0, y1)
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) Blend(x, y, c, a);
    }
  }
  std::vector<uint8_t> Take() { return std::move(rgb_); }

 private:
  int w_, h_;
  std::vector<uint8_t> rgb_;
};

// Text as an alpha mask, laid out on one line with the font's kerning.
struct Mask {
  int width = 0, height = 0, baseline = 0;
  std::vector<uint8_t> alpha;
};

std::vector<int> Codepoints(std::string_view s) {  // UTF-8; bad bytes become U+FFFD
  std::vector<int> out;
  char32_t cp;
  for (size_t i = 0; i < s.size();) {
    const size_t n = DecodeUtf8(s.substr(i), &cp);
    out.push_back(n == 0 ? 0xFFFD : int(cp));
    i += n == 0 ? 1 : n;
  }
  return out;
}

class Font {
 public:
  bool Init() {
    const std::string_view f = ChartFont();
    data_ = reinterpret_cast<const unsigned char*>(f.data());
    return stbtt_InitFont(&info_, data_, stbtt_GetFontOffsetForIndex(data_, 0)) != 0;
  }

  Mask Render(std::string_view text, float px) const {
    const float scale = stbtt_ScaleForPixelHeight(&info_, px);
    int ascent, descent, gap;
    stbtt_GetFontVMetrics(&info_, &ascent, &descent, &gap);
    const std::vector<int> cps = Codepoints(text);
    Mask m;
    m.baseline = int(std::ceil(ascent * scale));
    m.height = m.baseline + int(std::ceil(-descent * scale)) + 1;
    m.width = int(std::ceil(Advance(cps, scale))) + 2;
    m.alpha.assign(size_t(m.width) * m.height, 0);
    float x = 1;
    for (size_t i = 0; i < cps.size(); ++i) {
      int advance, lsb, x0, y0, x1, y1;
      stbtt_GetCodepointHMetrics(&info_, cps[i], &advance, &lsb);
      const float shift = x - std::floor(x);
      stbtt_GetCodepointBitmapBoxSubpixel(&info_, cps[i], scale, scale, shift, 0, &x0, &y0, &x1,
                                          &y1);
      const int gw = x1 - x0, gh = y1 - y0;
      if (gw > 0 && gh > 0) {
        std::vector<uint8_t> glyph(size_t(gw) * gh);
        stbtt_MakeCodepointBitmapSubpixel(&info_, glyph.data(), gw, gh, gw, scale, scale, shift, 0,
                                          cps[i]);
        for (int gy = 0; gy < gh; ++gy) {
          for (int gx = 0; gx < gw; ++gx) {
            const int mx = int(std::floor(x)) + x0 + gx, my = m.baseline + y0 + gy;
            if (mx < 0 || my < 0 || mx >= m.width || my >= m.height) continue;
            uint8_t& a = m.alpha[size_t(my) * m.width + mx];
            a = uint8_t(std::max<int>(a, glyph[size_t(gy) * gw + gx]));
          }
        }
      }
      x += advance * scale;
      if (i + 1 < cps.size())
        x += stbtt_GetCodepointKernAdvance(&info_, cps[i], cps[i + 1]) * scale;
    }
    return m;
  }

 private:
  float Advance(const std::vector<int>& cps, float scale) const {
    float x = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
      int advance, lsb;
      stbtt_GetCodepointHMetrics(&info_, cps[i], &advance, &lsb);
      x += advance * scale;
      if (i + 1 < cps.size())
        x += stbtt_GetCodepointKernAdvance(&info_, cps[i], cps[i + 1]) * scale;
    }
    return x;
  }
  const unsigned char* data_ = nullptr;
  stbtt_fontinfo info_{};
};

enum class Align { kLeft, kCenter, kRight };

// Draws `text` with its baseline at y (or, rotated a quarter turn anticlockwise, reading upwards
// with its baseline at x), aligned on x (on y when rotated).
void Text(Canvas& c, const Font& f, std::string_view text, float px, int x, int y, Color color,
          Align align = Align::kLeft, bool rotated = false) {
  const Mask m = f.Render(text, px);
  const int offset = align == Align::kLeft ? 0 : align == Align::kCenter ? m.width / 2 : m.width;
  for (int my = 0; my < m.height; ++my) {
    for (int mx = 0; mx < m.width; ++mx) {
      const float a = m.alpha[size_t(my) * m.width + mx] / 255.0f;
      if (rotated) {
        c.Blend(x + my - m.baseline, y + offset - mx, color, a);
      } else {
        c.Blend(x - offset + mx, y + my - m.baseline, color, a);
      }
    }
  }
}

int TextWidth(const Font& f, std::string_view text, float px) { return f.Render(text, px).width; }

// 1, 2 or 5 times a power of ten: the smallest such step at least `raw`.
double NiceStep(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  }
  return 10 * p;
}

// Counts as people read them: 950, 12k, 1.5M; thousands as k too where the axis passes 10k.
std::string CountLabel(double v, double axis_top) {
  if (v < 1e3 || (v < 1e4 && axis_top < 1e4)) return fmt::format("{:g}", v);
  if (v < 1e6) return fmt::format("{:g}k", v / 1e3);
  if (v < 1e9) return fmt::format("{:g}M", v / 1e6);
  return fmt::format("{:g}G", v / 1e9);
}

std::string Thousands(uint64_t v) {
  const std::string digits = std::to_string(v);
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

std::string ChannelName(uint32_t c, uint32_t channels) {
  static const char* const kNames[5][4] = {
      {}, {"grey"}, {"grey", "alpha"}, {"R", "G", "B"}, {"R", "G", "B", "A"}};
  if (channels >= 1 && channels <= 4 && c < channels) {
    return fmt::format("{} (channel {})", kNames[channels][c], c);
  }
  return fmt::format("channel {}", c);
}

Color ChannelColor(uint32_t c, uint32_t channels) {
  if (channels <= 2) return c == 0 ? kDark : kOrange;
  return c == 0 ? kRed : c == 1 ? kGreen : c == 2 ? kBlue : kGrey;
}

struct Series {
  std::string name;
  Color color;
};

// What each of `h`'s histograms is (a name and a colour, for the legend); `source` says what was
// counted.
std::vector<Series> SeriesOf(const v1::HistogramResponse& h, const HistogramChartOptions& o,
                             std::string* source) {
  const int n = h.histograms_size();
  const uint32_t channels = h.image().channels();
  std::vector<Series> series;
  if (o.source == "luma") {
    series.push_back({"luma", kDark});
    *source = "one histogram of luma";
  } else if (o.source == "rgb_mean") {
    series.push_back({"RGB mean", kPurple});
    *source = "one histogram of the mean of R, G and B";
  } else if (o.source == "channel") {
    series.push_back({ChannelName(o.channel, channels), ChannelColor(o.channel, channels)});
    *source = fmt::format("one histogram of {}", series[0].name);
  } else {
    for (int i = 0; i < n; ++i) {
      series.push_back({ChannelName(uint32_t(i), channels), ChannelColor(uint32_t(i), channels)});
    }
    *source = n == 1 ? "one histogram of its one channel" : "one histogram per channel";
  }
  while (int(series.size()) < n)
    series.push_back({fmt::format("histogram {}", series.size()), kGrey});
  return series;
}

// The data: per pixel column of the plot (x0.., bottom y0), the largest count of the bins it
// covers (so narrow peaks survive when bins outnumber columns); a light fill under a solid
// outline. `row_of` maps a count to its pixel row.
template <typename RowOf>
void DrawCounts(Canvas& c, const google::protobuf::RepeatedField<uint64_t>& counts, int bins,
                Color color, int x0, int y0, int plot_w, RowOf row_of) {
  int prev = -1;
  for (int x = 0; x < plot_w; ++x) {
    const int b0 = int(int64_t(x) * bins / plot_w);
    const int b1 = std::max(b0 + 1, int(int64_t(x + 1) * bins / plot_w));
    uint64_t v = 0;
    for (int b = b0; b < b1 && b < bins; ++b) v = std::max(v, counts[b]);
    const int y = row_of(double(v));
    c.Fill(x0 + x, y + 1, x0 + x + 1, y0, color, 0.18f);
    const int from = prev < 0 ? y : std::min(prev, y), to = prev < 0 ? y : std::max(prev, y);
    c.Fill(x0 + x, from - 1, x0 + x + 1, to + 1, color, 0.95f);
    prev = y;
  }
}

// The legend: one row at `y` (between the title and the plot, where it can hide no data).
void DrawLegend(Canvas& c, const Font& font, const std::vector<Series>& series, int x, int y) {
  for (const Series& s : series) {
    c.Fill(x, y - 9, x + 20, y + 1, s.color, 0.18f);
    c.Fill(x, y - 9, x + 20, y - 7, s.color, 0.95f);
    Text(c, font, s.name, 12, x + 26, y, kText);
    x += 26 + TextWidth(font, s.name, 12) + 22;
  }
}

}  // namespace

std::string DrawHistogramChart(const v1::HistogramResponse& h, const HistogramChartOptions& o,
                               HistogramChart* out) {
  const int n = h.histograms_size();
  const int bins = int(h.bins());
  if (n == 0 || bins == 0 || !(h.hi() > h.lo())) return "no histogram to draw";
  for (const auto& c : h.histograms()) {
    if (c.counts_size() != bins) return "a histogram's counts do not match its bins";
  }
  Font font;
  if (!font.Init()) return "the embedded chart font cannot be read";

  const uint32_t channels = h.image().channels();
  std::string source;
  const std::vector<Series> series = SeriesOf(h, o, &source);

  // Layout: a whole number of columns per bin where that gives a plot 560-800 px wide.
  const int per_bin = 800 / bins;
  const int plot_w = per_bin >= 1 && bins * per_bin >= 560 ? bins * per_bin : 800;
  const int plot_h = 380, left = 84, right = 28, top = 100, bottom = 62;
  Canvas c(left + plot_w + right, top + plot_h + bottom);
  const int x0 = left, y0 = top + plot_h;  // the plot's bottom-left corner

  // The count axis.
  uint64_t peak = 0;
  for (const auto& hist : h.histograms()) {
    for (uint64_t v : hist.counts()) peak = std::max(peak, v);
  }
  // Ticks are counts. The log axis starts half a count below 1 (10^-0.3), so that a bin of one
  // stands clear of the empty bins drawn on the baseline.
  constexpr double kLogFloor = -0.3;
  std::vector<double> ticks;
  double axis_top;  // linear: a count; log: a power of ten
  if (o.log_scale) {
    axis_top = std::max(1, int(std::ceil(std::log10(std::max<double>(peak, 2)))));
    for (int d = 0; d <= int(axis_top); ++d) ticks.push_back(std::pow(10.0, d));
  } else {
    const double step = NiceStep(std::max<double>(peak, 1) / 5);
    axis_top = std::ceil(std::max<double>(peak, 1) / step) * step;
    for (double t = 0; t <= axis_top * (1 + 1e-9); t += step) ticks.push_back(t);
  }
  // The height of a count as a fraction of the plot's.
  auto level = [&](double count) {
    if (!o.log_scale) return count / axis_top;
    return count < 1 ? 0.0 : (std::log10(count) - kLogFloor) / (axis_top - kLogFloor);
  };
  auto row = [&](double fraction) { return y0 - int(std::lround(fraction * (plot_h - 1))); };
  for (double t : ticks) {
    const int y = row(level(t));
    if (t > 0) c.Fill(x0 + 1, y, x0 + plot_w, y + 1, kGrid);
    c.Fill(x0 - 5, y, x0, y + 1, kAxis);
    Text(c, font, CountLabel(t, o.log_scale ? 0 : axis_top), 12, x0 - 8, y + 4, kText,
         Align::kRight);
  }
  Text(c, font, o.log_scale ? "pixels per bin (log scale)" : "pixels per bin", 13, 22,
       top + plot_h / 2, kText, Align::kCenter, true);

  // The value axis: [lo, hi) across the plot.
  const double lo = h.lo(), hi = h.hi();
  const double step = NiceStep((hi - lo) / 8);
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    const int x = x0 + int(std::lround((t - lo) / (hi - lo) * plot_w));
    c.Fill(x, y0 + 1, x + 1, y0 + 6, kAxis);
    Text(c, font, fmt::format("{:g}", std::abs(t) < step * 1e-9 ? 0.0 : t), 12, x, y0 + 20, kText,
         Align::kCenter);
  }
  Text(c, font,
       fmt::format("value: bins of width {:g} over [{:g}, {:g}), lower bound inclusive",
                   (hi - lo) / bins, lo, hi),
       13, x0 + plot_w / 2, y0 + 46, kText, Align::kCenter);

  // The data.
  for (int i = 0; i < n; ++i) {
    DrawCounts(c, h.histograms(i).counts(), bins, series[size_t(i)].color, x0, y0, plot_w,
               [&](double count) { return row(level(count)); });
  }

  // Axes over the data.
  c.Fill(x0 - 1, top, x0, y0 + 1, kAxis);
  c.Fill(x0 - 1, y0, x0 + plot_w, y0 + 1, kAxis);

  DrawLegend(c, font, std::vector<Series>(series.begin(), series.begin() + n), x0, top - 24);

  // Title: what was counted, over what.
  const v1::ImageInfo& img = h.image();
  Text(c, font,
       fmt::format("Histogram of {} ({}×{}, {} channel{}, {})", o.image, img.width(), img.height(),
                   channels, channels == 1 ? "" : "s", FormatName(img.format())),
       17, x0, 28, kBlack);
  Text(c, font,
       fmt::format("{}; {} bins over [{:g}, {:g}); {} values counted; variant {}", source, bins, lo,
                   hi, Thousands(h.total()), h.variant()),
       13, x0, 52, kText);

  out->width = c.width();
  out->height = c.height();
  out->rgb = c.Take();
  out->plot_left = x0;
  out->plot_top = top;
  out->plot_width = plot_w;
  out->plot_height = plot_h;
  out->count_top = axis_top;
  return "";
}

std::string WriteHistogramChart(const std::string& path, const v1::HistogramResponse& h,
                                const HistogramChartOptions& o) {
  HistogramChart chart;
  if (std::string err = DrawHistogramChart(h, o, &chart); !err.empty()) return err;
  return WritePng(path, chart.width, chart.height, 3,
                  std::string(chart.rgb.begin(), chart.rgb.end()));
}

}  // namespace glimpse::client
