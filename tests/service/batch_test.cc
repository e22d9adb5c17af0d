// AnalyzeBatch through the client stub: mixed sizes and formats with bad images among them, each
// image's result equal to the single Analyze call's on the same image, ordered and unordered; the
// in-flight bound against a fast sender and a reader that stops reading; cancellation.
#include "server/analyses/batch.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "gpu/reference/histogram.h"
#include "server/ingest/image_codec.h"
#include "tests/service/analyze_test_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::ImageDesc;
using gpu::SampleType;
using Clock = std::chrono::steady_clock;

struct BatchResult {
  grpc::Status status;
  std::vector<v1::AnalyzeBatchResponse> messages;
};

// One AnalyzeBatch call: the header, then each image, then the answer read to its end; with
// `client_key`, under that glimpse-client-key (the scheduler's caller).
BatchResult CallBatch(v1::ImageAnalytics::Stub& stub, const v1::AnalyzeBatchHeader& header,
                      const std::vector<v1::BatchImage>& images,
                      const std::string& client_key = "") {
  BatchResult out;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  if (!client_key.empty()) ctx.AddMetadata(server::kClientKeyMetadata, client_key);
  auto stream = stub.AnalyzeBatch(&ctx);
  // Writes from another thread: the server reads only as far as its bound allows, so a writer
  // that waited for every write before reading could block on a full flow-control window.
  std::thread writer([&] {
    v1::AnalyzeBatchRequest first;
    *first.mutable_header() = header;
    bool ok = stream->Write(first);
    for (size_t i = 0; ok && i < images.size(); ++i) {
      v1::AnalyzeBatchRequest m;
      *m.mutable_image() = images[i];
      ok = stream->Write(m);
    }
    stream->WritesDone();
  });
  v1::AnalyzeBatchResponse r;
  while (stream->Read(&r)) out.messages.push_back(r);
  writer.join();
  out.status = stream->Finish();
  return out;
}

v1::BatchImage Image(std::string key, v1::ImageRef ref) {
  v1::BatchImage b;
  b.set_key(std::move(key));
  *b.mutable_image() = std::move(ref);
  return b;
}

v1::ImageRef Encoded(std::string data) {
  v1::ImageRef r;
  r.mutable_encoded()->set_data(std::move(data));
  return r;
}

std::string Jpeg(const HostImage& img) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int format = img.desc.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  const int rc = tjCompress2(tj, img.data.data(), img.desc.width, 0, img.desc.height, format, &buf,
                             &size, img.desc.channels == 1 ? TJSAMP_GRAY : TJSAMP_420, 90, 0);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(tj);
  std::string file(reinterpret_cast<const char*>(buf), size);
  tjFree(buf);
  tjDestroy(tj);
  return file;
}

// The messages of image `index`'s results, as Analyze's AnalyzeResponses.
std::vector<v1::AnalyzeResponse> ResultsOf(const std::vector<v1::AnalyzeBatchResponse>& messages,
                                           uint64_t index) {
  std::vector<v1::AnalyzeResponse> out;
  for (const v1::AnalyzeBatchResponse& m : messages) {
    if (m.has_result() && m.index() == index) out.push_back(m.result());
  }
  return out;
}

// ComparableResult, also without the image's `bytes`: Analyze stores an inline image for its
// analyses (on CPU renderers with a padded copy, which `bytes` counts), while a batch hands each
// analysis the inline image as the analysis's own call does.
std::string Comparable(std::vector<v1::AnalyzeResponse> messages, uint32_t index) {
  for (v1::AnalyzeResponse& m : messages) {
    if (m.has_histogram()) m.mutable_histogram()->mutable_image()->clear_bytes();
    if (m.has_integral_image() && m.integral_image().has_header()) {
      m.mutable_integral_image()->mutable_header()->mutable_image()->clear_bytes();
    }
    if (m.has_compaction() && m.compaction().has_header()) {
      m.mutable_compaction()->mutable_header()->mutable_image()->clear_bytes();
    }
    if (m.has_box_filter() && m.box_filter().has_header()) {
      m.mutable_box_filter()->mutable_header()->mutable_image()->clear_bytes();
    }
  }
  return ComparableResult(messages, index);
}

class BatchTest : public ::testing::Test {
 protected:
  enum Kind {
    kPlain,
    // A bound of three images in flight and a small result buffer.
    kSmall,
    // The same with each image's histogram its own GPU job (no packs), so that a batch has more
    // jobs waiting than its tenant may queue.
    kUnpacked,
    // At a bound of two, most reads are started by the thread that sends an answer, not by the
    // one that has just read.
    kTight,
    // Room for a whole batch in flight at once, so that its histograms wait together.
    kWide,
    kKinds
  };

  // The server of that kind, started on first use and kept for the suite: ctest runs each test in
  // a process of its own, where starting every kind would cost more than most tests take.
  static TestServer* Server(Kind kind) {
    std::unique_ptr<TestServer>& s = servers_[kind];
    if (s == nullptr) s = TestServer::Start(Options(kind));
    return s.get();
  }
  static void TearDownTestSuite() {
    for (std::unique_ptr<TestServer>& s : servers_) s.reset();
  }

  static server::ServerOptions Options(Kind kind) {
    server::ServerOptions o;
    o.limits.max_image_pixels = 4'000'000;
    switch (kind) {
      case kPlain:
      case kKinds:
        break;
      case kSmall:
      case kUnpacked:
        o.limits.batch_in_flight = 3;
        o.worker.result_buffer_bytes = 16 << 20;
        // Fewer GPU jobs of one tenant may wait than a batch has images in flight: the refused
        // ones must be queued again, not failed.
        o.worker.tenant_max_queued = 1;
        if (kind == kUnpacked) o.limits.batch_pack_images = 1;
        break;
      case kTight:
        o.limits.batch_in_flight = 2;
        break;
      case kWide:
        o.limits.batch_in_flight = 64;
        break;
    }
    return o;
  }

  static void ExpectMixedBatchMatchesSingleCalls(bool ordered);

  static std::array<std::unique_ptr<TestServer>, kKinds> servers_;
};
std::array<std::unique_ptr<TestServer>, BatchTest::kKinds> BatchTest::servers_;

void BatchTest::ExpectMixedBatchMatchesSingleCalls(bool ordered) {
  TestServer* const ts = Server(kPlain);
  GLIMPSE_REQUIRE_SERVER(ts);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + (ordered ? 0 : 1));
  v1::ImageAnalytics::Stub& stub = *ts->stub;
  v1::AnalyzeHeader every;
  AddEveryAnalysis(&every);

  std::vector<v1::BatchImage> images;
  std::vector<HostImage> raw_of;  // the pixels of raw images, for the CPU reference
  std::map<size_t, std::pair<grpc::StatusCode, std::string>> bad;  // index -> code, field
  auto add = [&](std::string key, v1::ImageRef ref) {
    images.push_back(Image(std::move(key), std::move(ref)));
  };
  for (const ImageDesc& d :
       {ImageDesc{1, 1, 1, SampleType::kUint8}, ImageDesc{17, 5, 3, SampleType::kUint8},
        ImageDesc{301, 203, 4, SampleType::kUint8}, ImageDesc{1, 97, 1, SampleType::kUint8},
        ImageDesc{129, 1, 3, SampleType::kUint8}}) {
    const HostImage img = RandomImage(d, rng);
    add(gpu::DescribeImage(d), InlineRaw(img));
  }
  bad[images.size()] = {grpc::StatusCode::INVALID_ARGUMENT, "image.encoded.data"};
  add("corrupt.jpg", Encoded("\xff\xd8\xff\xe0 this is not a JPEG file at all"));
  {
    const HostImage img = RandomImage({63, 41, 3, SampleType::kUint8}, rng);
    absl::StatusOr<std::string> png = server::EncodePng(img);
    ASSERT_TRUE(png.ok());
    add("random.png", Encoded(*png));
  }
  {
    HostImage img = RandomImage({256, 256, 3, SampleType::kUint8}, rng);
    add("photo.jpg", Encoded(Jpeg(img)));
    HostImage grey = RandomImage({37, 300, 1, SampleType::kUint8}, rng);
    add("grey.jpg", Encoded(Jpeg(grey)));
  }
  {
    const HostImage img = RandomImage({8, 8, 3, SampleType::kUint8}, rng);
    v1::ImageRef ref = InlineRaw(img);
    ref.mutable_raw()->mutable_data()->resize(8 * 8 * 3 - 5);
    bad[images.size()] = {grpc::StatusCode::INVALID_ARGUMENT, "image.raw.data has 187 bytes"};
    add("short.raw", ref);
  }
  {
    const HostImage img = RandomImage({33, 29, 2, SampleType::kUint8}, rng);
    absl::StatusOr<std::string> id = UploadImage(stub, img);
    ASSERT_TRUE(id.ok()) << id.status();
    add("stored", ById(*id));
  }
  bad[images.size()] = {grpc::StatusCode::NOT_FOUND, "0123456789abcdef0123456789abcdef"};
  add("unknown", ById("0123456789abcdef0123456789abcdef"));
  {
    v1::ImageRef ref = InlineRaw(RandomImage({4, 4, 1, SampleType::kUint8}, rng));
    ref.mutable_raw()->mutable_layout()->set_channels(7);
    bad[images.size()] = {grpc::StatusCode::INVALID_ARGUMENT, "image.raw.layout.channels"};
    add("seven-channels", ref);
  }
  bad[images.size()] = {grpc::StatusCode::INVALID_ARGUMENT, "image must be set"};
  add("empty", v1::ImageRef());
  for (int i = 0; i < 6; ++i) {
    const HostImage img = RandomImage(
        {int(1 + rng() % 200), int(1 + rng() % 200), int(1 + rng() % 4), SampleType::kUint8}, rng);
    add("random-" + std::to_string(i), InlineRaw(img));
  }

  v1::AnalyzeBatchHeader header;
  *header.mutable_analyses() = every.analyses();
  header.set_ordered(ordered);
  const BatchResult got = CallBatch(stub, header, images);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  ASSERT_FALSE(got.messages.empty());

  // The summary comes last, once; every image has exactly one end marker, after its parts.
  ASSERT_TRUE(got.messages.back().has_summary());
  const v1::BatchSummary& summary = got.messages.back().summary();
  EXPECT_EQ(summary.images(), images.size());
  EXPECT_EQ(summary.failed(), bad.size());
  EXPECT_EQ(summary.ok(), images.size() - bad.size());
  std::map<uint64_t, v1::ImageEnd> ends;
  std::vector<uint64_t> order;
  for (size_t i = 0; i + 1 < got.messages.size(); ++i) {
    const v1::AnalyzeBatchResponse& m = got.messages[i];
    ASSERT_FALSE(m.has_summary()) << "summary before the end";
    ASSERT_LT(m.index(), images.size());
    EXPECT_EQ(m.key(), images[m.index()].key());
    EXPECT_EQ(ends.count(m.index()), 0u) << "message of image " << m.index() << " after its end";
    if (m.has_end()) ends[m.index()] = m.end();
    if (order.empty() || order.back() != m.index()) order.push_back(m.index());
  }
  EXPECT_EQ(ends.size(), images.size());
  if (ordered) {
    // Input order, one image after another.
    std::vector<uint64_t> expected(images.size());
    for (size_t i = 0; i < images.size(); ++i) expected[i] = i;
    EXPECT_EQ(order, expected);
  }

  for (size_t i = 0; i < images.size(); ++i) {
    SCOPED_TRACE("image " + std::to_string(i) + " " + images[i].key());
    const v1::ImageEnd& end = ends[i];
    if (auto b = bad.find(i); b != bad.end()) {
      ASSERT_TRUE(end.has_error());
      EXPECT_EQ(end.error().code(), int(b->second.first)) << end.error().message();
      const std::string& msg = end.error().message();
      EXPECT_EQ(msg.rfind("images[" + std::to_string(i) + "]", 0), 0u) << msg;
      EXPECT_NE(msg.find(b->second.second), std::string::npos) << msg;
      EXPECT_TRUE(ResultsOf(got.messages, i).empty());
      continue;
    }
    ASSERT_FALSE(end.has_error()) << end.error().message();
    // The same image through one Analyze call.
    v1::AnalyzeHeader single = every;
    *single.mutable_image() = images[i].image();
    const AnalyzeCallResult want = CallAnalyze(stub, single);
    ASSERT_TRUE(want.status.ok()) << want.status.error_message();
    const std::vector<v1::AnalyzeResponse> parts = ResultsOf(got.messages, i);
    ASSERT_FALSE(parts.empty());
    for (uint32_t a = 0; a < 4; ++a) {
      EXPECT_TRUE(Comparable(parts, a) == Comparable(want.messages, a)) << "analysis " << a;
      EXPECT_FALSE(Comparable(parts, a).empty()) << "analysis " << a;
    }
    // The histogram exactly as the Histogram call answers it, the image's info included.
    {
      grpc::ClientContext ctx;
      v1::HistogramRequest req = every.analyses(0).histogram();
      *req.mutable_image() = images[i].image();
      v1::HistogramResponse single_histogram;
      ASSERT_TRUE(stub.Histogram(&ctx, req, &single_histogram).ok());
      single_histogram.clear_timing();
      ASSERT_TRUE(parts[0].has_histogram());
      v1::HistogramResponse batch_histogram = parts[0].histogram();
      batch_histogram.clear_timing();
      single_histogram.mutable_image()->clear_last_used_unix_ms();
      batch_histogram.mutable_image()->clear_last_used_unix_ms();
      single_histogram.mutable_image()->clear_expires_unix_ms();
      batch_histogram.mutable_image()->clear_expires_unix_ms();
      EXPECT_EQ(batch_histogram.SerializeAsString(), single_histogram.SerializeAsString())
          << batch_histogram.image().ShortDebugString() << "\n"
          << single_histogram.image().ShortDebugString();
    }
    // And the histogram against the CPU reference where the pixels are known.
    if (images[i].image().has_raw()) {
      const v1::RawImage& r = images[i].image().raw();
      HostImage img{{int(r.layout().width()), int(r.layout().height()), int(r.layout().channels()),
                     SampleType::kUint8},
                    std::vector<uint8_t>(r.data().begin(), r.data().end())};
      gpu::HistogramOptions ho;
      ho.bins = 64;
      absl::StatusOr<gpu::HistogramResult> ref = reference::Histogram(img, ho);
      ASSERT_TRUE(ref.ok());
      ASSERT_TRUE(parts[0].has_histogram());
      ASSERT_EQ(parts[0].histogram().histograms_size(), int(ref->counts.size()));
      for (size_t h = 0; h < ref->counts.size(); ++h) {
        const auto& c = parts[0].histogram().histograms(int(h)).counts();
        EXPECT_EQ(std::vector<uint64_t>(c.begin(), c.end()), ref->counts[h]);
      }
    }
  }
}

TEST_F(BatchTest, OrderedMixedBatchEqualsSingleCallsAndNamesEachBadImage) {
  ExpectMixedBatchMatchesSingleCalls(true);
}

TEST_F(BatchTest, UnorderedMixedBatchAnswersEachImageExactlyOnce) {
  ExpectMixedBatchMatchesSingleCalls(false);
}

TEST_F(BatchTest, BadHeaderEndsTheCallWithItsReason) {
  TestServer* const ts = Server(kPlain);
  GLIMPSE_REQUIRE_SERVER(ts);
  std::mt19937_64 rng(TestSeed() + 2);
  const std::vector<v1::BatchImage> one = {
      Image("a", InlineRaw(RandomImage({3, 3, 1, SampleType::kUint8}, rng)))};
  {
    grpc::ClientContext ctx;
    auto stream = ts->stub->AnalyzeBatch(&ctx);
    v1::AnalyzeBatchRequest m;
    *m.mutable_image() = one[0];
    stream->Write(m);
    stream->WritesDone();
    v1::AnalyzeBatchResponse r;
    EXPECT_FALSE(stream->Read(&r));
    const grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("header must be set"), std::string::npos) << s.error_message();
  }
  {
    v1::AnalyzeBatchHeader header;
    header.add_analyses()->mutable_histogram();
    header.add_analyses()->mutable_histogram()->set_variant("fastest");
    const BatchResult got = CallBatch(*ts->stub, header, one);
    EXPECT_EQ(got.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(got.status.error_message().find("header.analyses[1]"), std::string::npos)
        << got.status.error_message();
    EXPECT_NE(got.status.error_message().find("\"fastest\""), std::string::npos)
        << got.status.error_message();
  }
  {
    // Options checked against the image fail each image, with the analysis named.
    v1::AnalyzeBatchHeader header;
    header.add_analyses()->mutable_histogram()->mutable_options()->set_bins(70000);
    const BatchResult got = CallBatch(*ts->stub, header, one);
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    ASSERT_EQ(got.messages.size(), 2u);
    ASSERT_TRUE(got.messages[0].end().has_error());
    const std::string& msg = got.messages[0].end().error().message();
    EXPECT_EQ(got.messages[0].end().error().code(), int(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_NE(msg.find("images[0]: analyses[0] (histogram)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("70000"), std::string::npos) << msg;
    EXPECT_EQ(got.messages[1].summary().failed(), 1u);
  }
  {
    const BatchResult got = CallBatch(*ts->stub, v1::AnalyzeBatchHeader(), one);
    EXPECT_EQ(got.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(got.status.error_message().find("header.analyses must hold 1 to 64"),
              std::string::npos)
        << got.status.error_message();
  }
}

v1::AnalyzeBatchHeader HistogramHeader() {
  v1::AnalyzeBatchHeader header;
  header.add_analyses()->mutable_histogram();
  return header;
}

// Polls `done` for up to `limit`.
template <typename F>
bool Eventually(F done, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const Clock::time_point end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

TEST_F(BatchTest, FastSenderNeverHasMoreThanTheBoundInFlight) {
  TestServer* const unpacked = Server(kUnpacked);
  GLIMPSE_REQUIRE_SERVER(unpacked);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 3);
  std::vector<v1::BatchImage> images;
  for (int i = 0; i < 60; ++i) {
    images.push_back(
        Image(std::to_string(i),
              InlineRaw(RandomImage({int(1 + rng() % 90), 57, 3, SampleType::kUint8}, rng))));
  }
  server::ResetBatchPeak();
  const BatchResult got = CallBatch(*unpacked->stub, HistogramHeader(), images);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  ASSERT_TRUE(got.messages.back().has_summary());
  EXPECT_EQ(got.messages.back().summary().max_in_flight(), 3u);
  EXPECT_EQ(got.messages.back().summary().ok(), 60u);
  for (const v1::AnalyzeBatchResponse& m : got.messages) {
    if (m.has_end()) {
      EXPECT_FALSE(m.end().has_error()) << m.end().error().message();
    }
  }
  // The server read ahead (the peak reached the bound) but never past it.
  EXPECT_EQ(server::GetBatchStats().peak_in_flight, 3u);

  // The caller may ask for fewer.
  v1::AnalyzeBatchHeader two = HistogramHeader();
  two.set_max_in_flight(2);
  server::ResetBatchPeak();
  const BatchResult fewer = CallBatch(*unpacked->stub, two, images);
  ASSERT_TRUE(fewer.status.ok()) << fewer.status.error_message();
  EXPECT_EQ(fewer.messages.back().summary().max_in_flight(), 2u);
  EXPECT_LE(server::GetBatchStats().peak_in_flight, 2u);

  grpc::ClientContext ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(unpacked->stub->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.batch_in_flight(), 3u);
  // The tenant's queue (one job) refused some of the batch's jobs, which ran on a later try.
  EXPECT_GT(info.jobs_rejected(), 0u);
}

TEST_F(BatchTest, ConcurrentBatchesAnswerEveryImageOfEach) {
  TestServer* const tight = Server(kTight);
  GLIMPSE_REQUIRE_SERVER(tight);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 6);
  // Many small images on a few calls at once: reads, decodes, answers and sends of one call
  // overlap on several threads.
  std::vector<std::vector<v1::BatchImage>> calls(4);
  std::vector<std::vector<HostImage>> pixels(4);
  for (size_t c = 0; c < calls.size(); ++c) {
    for (int i = 0; i < 400; ++i) {
      pixels[c].push_back(
          RandomImage({int(1 + rng() % 40), int(1 + rng() % 40), 1, SampleType::kUint8}, rng));
      calls[c].push_back(Image(std::to_string(i), InlineRaw(pixels[c].back())));
    }
  }
  std::vector<BatchResult> got(calls.size());
  std::vector<std::thread> threads;
  for (size_t c = 0; c < calls.size(); ++c) {
    threads.emplace_back([&, c] {
      v1::AnalyzeBatchHeader header = HistogramHeader();
      header.set_ordered(c % 2 == 0);
      got[c] = CallBatch(*tight->stub, header, calls[c]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t c = 0; c < calls.size(); ++c) {
    SCOPED_TRACE("call " + std::to_string(c));
    ASSERT_TRUE(got[c].status.ok()) << got[c].status.error_message();
    EXPECT_EQ(got[c].messages.back().summary().ok(), 400u);
    std::set<uint64_t> seen;
    for (const v1::AnalyzeBatchResponse& m : got[c].messages) {
      if (m.has_end()) {
        EXPECT_FALSE(m.end().has_error()) << m.end().error().message();
        EXPECT_TRUE(seen.insert(m.index()).second) << "image " << m.index() << " ended twice";
      }
      if (!m.has_result()) continue;
      absl::StatusOr<gpu::HistogramResult> ref =
          reference::Histogram(pixels[c][m.index()], gpu::HistogramOptions());
      ASSERT_TRUE(ref.ok());
      const auto& counts = m.result().histogram().histograms(0).counts();
      EXPECT_EQ(std::vector<uint64_t>(counts.begin(), counts.end()), ref->counts[0])
          << "image " << m.index();
    }
    EXPECT_EQ(seen.size(), 400u);
  }
}

uint64_t ResultBufferUsed(v1::ImageAnalytics::Stub& stub) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  EXPECT_TRUE(stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  return info.result_buffer_used_bytes();
}

TEST_F(BatchTest, StalledReaderHoldsOnlyItsBoundAndCancelReleasesEverything) {
  TestServer* const small_server = Server(kSmall);
  GLIMPSE_REQUIRE_SERVER(small_server);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 4);
  v1::ImageAnalytics::Stub& stub = *small_server->stub;
  // Results big enough that unsent ones hold the result buffer: 65536-bin histograms of 16-bit
  // images (512 KiB of counts each).
  v1::AnalyzeBatchHeader header;
  v1::HistogramRequest* h = header.add_analyses()->mutable_histogram();
  h->mutable_options()->set_bins(65536);
  const HostImage img = RandomImage({256, 256, 1, SampleType::kUint16}, rng);
  const HostImage small = RandomImage({31, 17, 3, SampleType::kUint8}, rng);

  grpc::ClientContext batch_ctx;
  auto stream = stub.AnalyzeBatch(&batch_ctx);
  std::atomic<int> written{0};
  std::thread writer([&] {
    v1::AnalyzeBatchRequest first;
    *first.mutable_header() = header;
    bool ok = stream->Write(first);
    for (int i = 0; ok && i < 400; ++i) {
      v1::AnalyzeBatchRequest m;
      *m.mutable_image() = Image(std::to_string(i), InlineRaw(img));
      ok = stream->Write(m);
      if (ok) written.fetch_add(1);
    }
  });
  // The batch fills its bound and stops there: it reads no more while nobody reads its answers.
  // Until gRPC's transport windows are full, each answer sent frees a place and the next image is
  // read, so the count dips below the bound now and then: the batch has stalled once it has held
  // its bound, with nothing more written, for half a second.
  const auto stalled = [&] {
    const int before = written.load();
    for (int i = 0; i < 50; ++i) {
      if (server::GetBatchStats().images_in_flight != 3 || written.load() != before) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  };
  ASSERT_TRUE(Eventually(stalled, std::chrono::seconds(60)))
      << server::GetBatchStats().images_in_flight << " images in flight, " << written.load()
      << " written";
  EXPECT_LT(written.load(), 400) << "the server should have stopped reading";

  // Another client's single calls are still answered, promptly.
  gpu::HistogramOptions ho;
  absl::StatusOr<gpu::HistogramResult> ref = reference::Histogram(small, ho);
  ASSERT_TRUE(ref.ok());
  for (int i = 0; i < 10; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ctx.AddMetadata("glimpse-client-key", "someone-else");
    v1::HistogramRequest req;
    *req.mutable_image() = InlineRaw(small);
    v1::HistogramResponse resp;
    const Clock::time_point t0 = Clock::now();
    const grpc::Status s = stub.Histogram(&ctx, req, &resp);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_LT(ms, 2000) << "a single call waited behind a stalled batch";
    ASSERT_EQ(resp.histograms_size(), 3);
    for (int c = 0; c < 3; ++c) {
      const auto& counts = resp.histograms(c).counts();
      EXPECT_EQ(std::vector<uint64_t>(counts.begin(), counts.end()), ref->counts[size_t(c)]);
    }
  }
  EXPECT_LE(server::GetBatchStats().images_in_flight, 3);
  // Unsent answers hold their results, no more than the bound's worth. The amount moves: an image
  // in flight holds its result bytes only once it has run, and gRPC takes answers into its
  // transport window as the client's library makes room, so it is sampled until it shows.
  constexpr uint64_t kResultBytes = 65536 * 10 + 1024;  // HistogramAnalysis::ResultBytes here
  EXPECT_TRUE(Eventually([&] { return ResultBufferUsed(stub) > 0; }, std::chrono::seconds(5)))
      << "unsent answers should hold their results";
  // The single calls above each held their answer's lease until gRPC was done with the call,
  // which can be just after their client had the answer: only the stalled batch's holding stays.
  EXPECT_TRUE(Eventually([&] { return ResultBufferUsed(stub) <= 3 * kResultBytes; },
                         std::chrono::seconds(5)))
      << ResultBufferUsed(stub) << " bytes held, the bound's worth is " << 3 * kResultBytes;

  // Cancelling releases the call, its images and their result leases.
  batch_ctx.TryCancel();
  writer.join();
  (void)stream->Finish();
  EXPECT_TRUE(Eventually([] {
    const server::BatchStats s = server::GetBatchStats();
    return s.calls_open == 0 && s.images_in_flight == 0;
  })) << "calls open "
      << server::GetBatchStats().calls_open << ", images in flight "
      << server::GetBatchStats().images_in_flight;
  EXPECT_TRUE(Eventually([&] { return ResultBufferUsed(stub) == 0; }))
      << ResultBufferUsed(stub) << " bytes still held";
}

TEST_F(BatchTest, CancelMidBatchWhileReadingReleasesEverything) {
  TestServer* const ts = Server(kPlain);
  GLIMPSE_REQUIRE_SERVER(ts);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 5);
  v1::ImageAnalytics::Stub& stub = *ts->stub;
  v1::AnalyzeBatchHeader header = HistogramHeader();
  header.add_analyses()->mutable_integral_image();
  grpc::ClientContext ctx;
  auto stream = stub.AnalyzeBatch(&ctx);
  std::thread writer([&] {
    v1::AnalyzeBatchRequest first;
    *first.mutable_header() = header;
    bool ok = stream->Write(first);
    for (int i = 0; ok && i < 1000; ++i) {
      v1::AnalyzeBatchRequest m;
      *m.mutable_image() =
          Image(std::to_string(i), InlineRaw(RandomImage({120, 90, 4, SampleType::kUint8}, rng)));
      ok = stream->Write(m);
    }
  });
  v1::AnalyzeBatchResponse r;
  int ends = 0;
  while (ends < 5 && stream->Read(&r)) ends += r.has_end() ? 1 : 0;
  EXPECT_EQ(ends, 5);
  ctx.TryCancel();
  writer.join();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(Eventually([] {
    const server::BatchStats s = server::GetBatchStats();
    return s.calls_open == 0 && s.images_in_flight == 0;
  }));
  EXPECT_TRUE(Eventually([&] { return ResultBufferUsed(stub) == 0; }));
}

TEST_F(BatchTest, DeadlinePassingReleasesEverything) {
  TestServer* const small_server = Server(kSmall);
  GLIMPSE_REQUIRE_SERVER(small_server);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 7);
  v1::ImageAnalytics::Stub& stub = *small_server->stub;
  const HostImage img = RandomImage({256, 256, 1, SampleType::kUint16}, rng);
  v1::AnalyzeBatchHeader header;
  header.add_analyses()->mutable_histogram()->mutable_options()->set_bins(65536);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  auto stream = stub.AnalyzeBatch(&ctx);
  std::thread writer([&] {
    v1::AnalyzeBatchRequest first;
    *first.mutable_header() = header;
    bool ok = stream->Write(first);
    for (int i = 0; ok && i < 400; ++i) {
      v1::AnalyzeBatchRequest m;
      *m.mutable_image() = Image(std::to_string(i), InlineRaw(img));
      ok = stream->Write(m);
    }
  });
  // Nobody reads: the call sits at its bound until the deadline ends it.
  writer.join();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(Eventually([] {
    const server::BatchStats s = server::GetBatchStats();
    return s.calls_open == 0 && s.images_in_flight == 0;
  }));
  EXPECT_TRUE(Eventually([&] { return ResultBufferUsed(stub) == 0; }))
      << ResultBufferUsed(stub) << " bytes still held";
}

TEST_F(BatchTest, BatchJobsYieldToTheTenantsSingleCallsUnlessAskedOtherwise) {
  TestServer* const ts = Server(kPlain);
  GLIMPSE_REQUIRE_SERVER(ts);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 8);
  v1::ImageAnalytics::Stub& stub = *ts->stub;
  server::GpuWorker& worker = ts->server->worker();
  // Jobs of a few milliseconds, so the answers arrive in the order their jobs ran.
  absl::StatusOr<std::string> id =
      UploadImage(stub, RandomImage({1600, 1200, 4, SampleType::kUint8}, rng));
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string key = "batch-priority-" + std::to_string(TestSeed() % 100000);
  auto queued = [&](uint64_t n) {
    return Eventually([&] { return worker.Stats().queue_length == n; });
  };
  for (const bool interactive : {false, true}) {
    SCOPED_TRACE(interactive ? "glimpse-priority: interactive" : "no glimpse-priority");
    WorkerBlocker blocker(worker);
    grpc::ClientContext batch_ctx;
    batch_ctx.AddMetadata(server::kClientKeyMetadata, key);
    if (interactive) batch_ctx.AddMetadata(server::kPriorityMetadata, "interactive");
    auto stream = stub.AnalyzeBatch(&batch_ctx);
    v1::AnalyzeBatchRequest first;
    *first.mutable_header() = HistogramHeader();
    ASSERT_TRUE(stream->Write(first));
    for (int i = 0; i < 3; ++i) {
      v1::AnalyzeBatchRequest m;
      *m.mutable_image() = Image(std::to_string(i), ById(*id));
      ASSERT_TRUE(stream->Write(m));
    }
    stream->WritesDone();
    ASSERT_TRUE(queued(3));
    // The same tenant's single call, interactive as calls are by default, arrives last.
    std::future<Clock::time_point> single = std::async(std::launch::async, [&] {
      grpc::ClientContext ctx;
      ctx.AddMetadata(server::kClientKeyMetadata, key);
      v1::HistogramRequest req;
      *req.mutable_image() = ById(*id);
      v1::HistogramResponse resp;
      EXPECT_TRUE(stub.Histogram(&ctx, req, &resp).ok());
      return Clock::now();
    });
    ASSERT_TRUE(queued(4));
    // The order the scheduler will run them in (one tenant: the order of Waiting()). When the
    // answers reach this process says the same only where delivery is quick: under
    // ThreadSanitizer the single call's answer once reached its thread after the batch's first
    // reached this one, though the server had run and answered the single call first.
    std::string order;
    for (const server::JobClass& c : worker.Waiting()) {
      EXPECT_EQ(c.tenant, key);
      order += std::string(server::PriorityName(c.priority)) + " ";
    }
    EXPECT_EQ(order, interactive ? "interactive interactive interactive interactive "
                                 : "interactive batch batch batch ")
        << (interactive ? "an interactive batch keeps arrival order"
                        : "the single call waits behind the batch");
    blocker.Release();
    v1::AnalyzeBatchResponse r;
    ASSERT_TRUE(stream->Read(&r));
    const Clock::time_point first_batch_answer = Clock::now();
    while (stream->Read(&r)) {
    }
    EXPECT_TRUE(stream->Finish().ok());
    const Clock::time_point single_answer = single.get();
    if (interactive) {
      // The single call's job ran after the batch's three: its answer cannot come first.
      EXPECT_LT(first_batch_answer, single_answer) << "an interactive batch keeps arrival order";
    }
  }
}

// Small inline images' histograms run in packs (server/analyses/histogram_packs.h): with the GPU
// thread held while the whole batch arrives, far fewer jobs run than images, and every image's
// histogram still equals the Histogram call's on it alone and the CPU reference.
TEST_F(BatchTest, PackedHistogramsEqualSingleCallsAndTheReference) {
  TestServer* const wide = Server(kWide);
  GLIMPSE_REQUIRE_SERVER(wide);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 9);
  v1::ImageAnalytics::Stub& stub = *wide->stub;
  server::GpuWorker& worker = wide->server->worker();

  std::vector<v1::BatchImage> images;
  std::map<size_t, HostImage> raw_of;  // index -> pixels, for the CPU reference
  std::set<size_t> bad;
  auto add_raw = [&](const ImageDesc& d) {
    raw_of[images.size()] = RandomImage(d, rng);
    images.push_back(Image(gpu::DescribeImage(d), InlineRaw(raw_of[images.size()])));
  };
  // Awkward sizes of every channel count, both integer types, the largest packable image and
  // one a row past it (which runs alone).
  for (const ImageDesc& d :
       {ImageDesc{1, 1, 1, SampleType::kUint8}, ImageDesc{1, 700, 3, SampleType::kUint8},
        ImageDesc{700, 1, 4, SampleType::kUint8}, ImageDesc{512, 512, 3, SampleType::kUint8},
        ImageDesc{512, 513, 3, SampleType::kUint8}, ImageDesc{63, 65, 2, SampleType::kUint8},
        ImageDesc{31, 17, 1, SampleType::kUint16}, ImageDesc{45, 38, 3, SampleType::kUint16}}) {
    add_raw(d);
  }
  for (int i = 0; i < 40; ++i) {
    add_raw({int(1 + rng() % 300), int(1 + rng() % 300), int(1 + rng() % 4),
             rng() % 5 == 0 ? SampleType::kUint16 : SampleType::kUint8});
  }
  for (int i = 0; i < 6; ++i) {
    const HostImage img = RandomImage(
        {int(8 + rng() % 250), int(8 + rng() % 250), i % 2 ? 3 : 1, SampleType::kUint8}, rng);
    images.push_back(Image("photo-" + std::to_string(i) + ".jpg", Encoded(Jpeg(img))));
  }
  {
    const HostImage img = RandomImage({77, 51, 4, SampleType::kUint8}, rng);
    absl::StatusOr<std::string> png = server::EncodePng(img);
    ASSERT_TRUE(png.ok());
    images.push_back(Image("rgba.png", Encoded(*png)));
  }
  {
    absl::StatusOr<std::string> id =
        UploadImage(stub, RandomImage({40, 30, 3, SampleType::kUint8}, rng));
    ASSERT_TRUE(id.ok()) << id.status();
    images.push_back(Image("stored", ById(*id)));  // on the device already: runs alone
  }
  {
    v1::ImageRef ref = InlineRaw(RandomImage({8, 8, 3, SampleType::kUint8}, rng));
    ref.mutable_raw()->mutable_data()->resize(100);
    bad.insert(images.size());
    images.push_back(Image("short.raw", ref));
  }
  bad.insert(images.size());
  images.push_back(Image("corrupt.jpg", Encoded("\xff\xd8\xff\xe0 not a JPEG")));
  ASSERT_LE(images.size(), 64u);

  // Two histograms of each image: the whole range of every channel, and a cut range of one.
  v1::AnalyzeBatchHeader header;
  header.add_analyses()->mutable_histogram();
  v1::HistogramOptions* cut = header.add_analyses()->mutable_histogram()->mutable_options();
  cut->set_bins(7);
  cut->set_lo(3);
  cut->set_hi(250);
  cut->set_source(v1::HISTOGRAM_SOURCE_CHANNEL);
  header.set_ordered(false);

  const uint64_t jobs_before = worker.Stats().jobs_run;
  BatchResult got;
  {
    WorkerBlocker blocker(worker);
    std::thread call([&] { got = CallBatch(stub, header, images); });
    // Every image read and decoded while the GPU's thread is held: each one's first histogram
    // joins its format's pack.
    ASSERT_TRUE(Eventually([&] {
      return server::GetBatchStats().images_in_flight >= int64_t(images.size() - bad.size());
    }));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    blocker.Release();
    call.join();
  }
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  const uint64_t jobs = worker.Stats().jobs_run - jobs_before;
  const size_t steps = 2 * (images.size() - bad.size());
  // Packs of a format's images instead of a job per image and histogram.
  EXPECT_LT(jobs, steps / 2) << jobs << " jobs for " << steps << " histograms";

  std::map<uint64_t, std::vector<v1::AnalyzeResponse>> parts;
  std::map<uint64_t, v1::ImageEnd> ends;
  for (const v1::AnalyzeBatchResponse& m : got.messages) {
    if (m.has_result()) parts[m.index()].push_back(m.result());
    if (m.has_end()) ends[m.index()] = m.end();
  }
  ASSERT_EQ(ends.size(), images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    SCOPED_TRACE("image " + std::to_string(i) + " " + images[i].key());
    if (bad.count(i)) {
      EXPECT_TRUE(ends[i].has_error());
      continue;
    }
    ASSERT_FALSE(ends[i].has_error()) << ends[i].error().message();
    ASSERT_EQ(parts[i].size(), 2u);
    for (const v1::AnalyzeResponse& part : parts[i]) {
      SCOPED_TRACE("analysis " + std::to_string(part.index()));
      ASSERT_TRUE(part.has_histogram());
      grpc::ClientContext ctx;
      v1::HistogramRequest req = header.analyses(int(part.index())).histogram();
      *req.mutable_image() = images[i].image();
      v1::HistogramResponse single;
      ASSERT_TRUE(stub.Histogram(&ctx, req, &single).ok());
      v1::HistogramResponse packed = part.histogram();
      for (v1::HistogramResponse* r : {&single, &packed}) {
        r->clear_timing();
        r->mutable_image()->clear_last_used_unix_ms();
        r->mutable_image()->clear_expires_unix_ms();
      }
      EXPECT_EQ(packed.SerializeAsString(), single.SerializeAsString())
          << packed.ShortDebugString().substr(0, 300) << "\n"
          << single.ShortDebugString().substr(0, 300);
      if (auto raw = raw_of.find(i); raw != raw_of.end()) {
        gpu::HistogramOptions ho;
        if (part.index() == 1) {
          ho.bins = 7;
          ho.lo = 3;
          ho.hi = 250;
          ho.source = gpu::HistogramSource::kChannel;
        }
        absl::StatusOr<gpu::HistogramResult> ref = reference::Histogram(raw->second, ho);
        ASSERT_TRUE(ref.ok()) << ref.status();
        ASSERT_EQ(packed.histograms_size(), int(ref->counts.size()));
        for (size_t h = 0; h < ref->counts.size(); ++h) {
          const auto& c = packed.histograms(int(h)).counts();
          EXPECT_EQ(std::vector<uint64_t>(c.begin(), c.end()), ref->counts[h]) << "histogram " << h;
        }
      }
    }
  }
}

// A pack's job that the tenant's full queue refuses is queued again, its images with it, and
// every image is answered once the queue has room: here the tenant may queue one job, and its
// single call holds that place while the GPU's thread is held.
TEST_F(BatchTest, RefusedPacksAreQueuedAgainAndAnswerEveryImage) {
  TestServer* const small_server = Server(kSmall);
  GLIMPSE_REQUIRE_SERVER(small_server);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 10);
  v1::ImageAnalytics::Stub& stub = *small_server->stub;
  server::GpuWorker& worker = small_server->server->worker();
  const std::string key = "pack-refusal-" + std::to_string(TestSeed() % 100000);
  std::vector<v1::BatchImage> images;
  std::vector<HostImage> pixels;
  for (int i = 0; i < 12; ++i) {
    pixels.push_back(
        RandomImage({int(1 + rng() % 120), int(1 + rng() % 120), 3, SampleType::kUint8}, rng));
    images.push_back(Image(std::to_string(i), InlineRaw(pixels.back())));
  }
  const uint64_t rejected_before = worker.Stats().jobs_rejected;
  BatchResult got;
  {
    WorkerBlocker blocker(worker);
    std::future<grpc::Status> single = std::async(std::launch::async, [&] {
      grpc::ClientContext ctx;
      ctx.AddMetadata(server::kClientKeyMetadata, key);
      v1::HistogramRequest req;
      *req.mutable_image() = InlineRaw(pixels[0]);
      v1::HistogramResponse resp;
      return stub.Histogram(&ctx, req, &resp);
    });
    ASSERT_TRUE(Eventually([&] { return worker.Stats().queue_length == 1; }));
    std::thread call([&] { got = CallBatch(stub, HistogramHeader(), images, key); });
    // The batch's pack jobs are refused (the tenant's one place is taken) and tried again.
    EXPECT_TRUE(Eventually([&] { return worker.Stats().jobs_rejected >= rejected_before + 3; }));
    blocker.Release();
    call.join();
    EXPECT_TRUE(single.get().ok());
  }
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  ASSERT_TRUE(got.messages.back().has_summary());
  EXPECT_EQ(got.messages.back().summary().ok(), images.size());
  for (const v1::AnalyzeBatchResponse& m : got.messages) {
    if (m.has_end()) {
      EXPECT_FALSE(m.end().has_error()) << m.end().error().message();
    }
    if (!m.has_result()) continue;
    ASSERT_LT(m.index(), pixels.size());
    absl::StatusOr<gpu::HistogramResult> ref =
        reference::Histogram(pixels[m.index()], gpu::HistogramOptions());
    ASSERT_TRUE(ref.ok());
    const v1::HistogramResponse& h = m.result().histogram();
    ASSERT_EQ(h.histograms_size(), 3);
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(
          std::vector<uint64_t>(h.histograms(c).counts().begin(), h.histograms(c).counts().end()),
          ref->counts[size_t(c)])
          << "image " << m.index() << " channel " << c;
    }
  }
}

}  // namespace
}  // namespace glimpse::testing
