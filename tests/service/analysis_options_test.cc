// The proto -> gpu/ option mappings of server/: values only, unset fields keep gpu/'s defaults,
// bad enums are named. No GPU needed.
#include <gtest/gtest.h>

#include "server/analyses/box_filter.h"
#include "server/analyses/compaction.h"
#include "server/analyses/histogram.h"
#include "server/analyses/integral_image.h"

namespace glimpse::server {
namespace {

TEST(AnalysisOptionsTest, UnsetFieldsKeepGpuDefaults) {
  absl::StatusOr<gpu::HistogramOptions> h = HistogramAnalysis::MapOptions({});
  ASSERT_TRUE(h.ok());
  const gpu::HistogramOptions hd;
  EXPECT_EQ(h->bins, hd.bins);
  EXPECT_EQ(h->source, hd.source);
  EXPECT_FALSE(h->lo.has_value());
  EXPECT_FALSE(h->hi.has_value());
  EXPECT_EQ(h->variant, gpu::HistogramVariant::kAuto);

  absl::StatusOr<gpu::CompactionOptions> c = CompactionAnalysis::MapOptions({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->max_results, gpu::CompactionOptions{}.max_results);
  EXPECT_EQ(c->source, gpu::CompactionOptions{}.source);
  EXPECT_TRUE(c->inside);

  v1::BoxFilterRequest box;
  box.set_encoding(v1::PIXEL_ENCODING_RAW);
  absl::StatusOr<BoxFilterAnalysis::Options> b = BoxFilterAnalysis::MapOptions(box);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->filter.border, gpu::BoxFilterOptions{}.border);

  absl::StatusOr<gpu::IntegralImageOptions> i = IntegralImageAnalysis::MapOptions({});
  ASSERT_TRUE(i.ok());
  EXPECT_FALSE(i->squared);
}

TEST(AnalysisOptionsTest, ValuesAreMappedAsGiven) {
  v1::HistogramRequest r;
  r.mutable_options()->set_bins(70000);  // out of range: gpu/ says so, not the adapter
  r.mutable_options()->set_lo(-1.5);
  r.mutable_options()->set_source(v1::HISTOGRAM_SOURCE_LUMA);
  r.set_variant("private_rows");
  absl::StatusOr<gpu::HistogramOptions> h = HistogramAnalysis::MapOptions(r);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->bins, 70000);
  EXPECT_EQ(h->lo, -1.5);
  EXPECT_EQ(h->source, gpu::HistogramSource::kLuma);
  EXPECT_EQ(h->variant, gpu::HistogramVariant::kPrivateRows);
  absl::StatusOr<uint64_t> bytes =
      HistogramAnalysis::ResultBytes({8, 8, 1, gpu::SampleType::kUint8}, *h, 1 << 20);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(std::string(bytes.status().message()).find("70000"), std::string::npos);

  v1::CompactRequest c;
  c.mutable_options()->set_max_results(0);
  c.mutable_options()->set_outside(true);
  absl::StatusOr<gpu::CompactionOptions> co = CompactionAnalysis::MapOptions(c);
  ASSERT_TRUE(co.ok());
  EXPECT_EQ(co->max_results, 0);
  EXPECT_FALSE(co->inside);
}

TEST(AnalysisOptionsTest, UnknownEnumsAndVariantsAreNamed) {
  v1::HistogramRequest h;
  h.mutable_options()->set_source(v1::HistogramSource(9));
  EXPECT_NE(std::string(HistogramAnalysis::MapOptions(h).status().message()).find("options.source"),
            std::string::npos);
  v1::CompactRequest c;
  c.set_variant("nope");
  EXPECT_NE(std::string(CompactionAnalysis::MapOptions(c).status().message()).find("nope"),
            std::string::npos);
  v1::BoxFilterRequest b;
  b.set_encoding(v1::PIXEL_ENCODING_RAW);
  b.mutable_options()->set_border(v1::BorderMode(7));
  EXPECT_NE(std::string(BoxFilterAnalysis::MapOptions(b).status().message()).find("options.border"),
            std::string::npos);
  b.mutable_options()->set_border(v1::BORDER_MODE_CONSTANT);
  b.set_encoding(v1::PIXEL_ENCODING_NONE);
  EXPECT_NE(std::string(BoxFilterAnalysis::MapOptions(b).status().message()).find("keep"),
            std::string::npos);
}

TEST(AnalysisOptionsTest, IntegralTablesLargerThanAPartAreCutIntoStrips) {
  const gpu::ImageDesc d{100, 50, 2, gpu::SampleType::kUint8};  // rows of 1600 bytes
  IntegralPlan whole = PlanIntegralParts(d, true, 1 << 20);
  EXPECT_TRUE(whole.whole);
  IntegralPlan parts = PlanIntegralParts(d, true, 20000);
  EXPECT_FALSE(parts.whole);
  EXPECT_GE(parts.rows_per_part, 1);
  EXPECT_LE(IntegralPartBytes(parts, parts.rows_per_part, 1), 20000u + 4096u);
  IntegralPlan tiny = PlanIntegralParts(d, false, 10);
  EXPECT_EQ(tiny.rows_per_part, 1);
}

}  // namespace
}  // namespace glimpse::server
