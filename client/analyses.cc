#include "client/analyses.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/chart.h"
#include "client/output_files.h"
#include "common/utf8.h"

namespace glimpse::client {

std::string Describe(const v1::ImageInfo& i) {
  return fmt::format("{}x{} {}-channel {} ({} bytes)", i.width(), i.height(), i.channels(),
                     FormatName(i.format()), i.bytes());
}

bool LooksLikeId(const std::string& s) {
  if (s.size() != 32) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

namespace {

std::string DescribeTiming(const v1::Timing& t) {
  return fmt::format("gpu {:.3f} ms, queue {:.3f} ms, server {:.3f} ms", t.gpu_ns() * 1e-6,
                     t.queue_ns() * 1e-6, t.server_ns() * 1e-6);
}

// The IMAGE argument as a request field, a file decoded as --channels and --orientation say; a
// large file is uploaded first (and deleted by the destructor).
class ImageArg {
 public:
  ImageArg(const Options& o, const Connection& c) : c_(c) {
    if (o.positional.size() != 1) {
      Die(kExitUsage, fmt::format("{} takes one IMAGE (an image id or a file), got {}", o.command,
                                  o.positional.size()));
    }
    const std::string& arg = o.positional[0];
    if (LooksLikeId(arg) && !std::filesystem::exists(arg)) {
      RefuseDecodeFlags(o, "the stored image " + arg);
      ref_.set_image_id(arg);
      return;
    }
    std::string data = ReadFileOrDie(arg);
    if (data.size() <= (3u << 20)) {
      SetDecoding(o, ref_.mutable_encoded());
      ref_.mutable_encoded()->set_data(std::move(data));
      return;
    }
    v1::UploadHeader header;
    SetDecoding(o, header.mutable_encoded());
    header.set_label(ValidUtf8(std::filesystem::path(arg).filename().string()));
    v1::UploadImageResponse response;
    grpc::Status s = UploadBytes(c, data, header, &response, true);
    if (!s.ok()) DieRpc("upload of " + arg, s);
    temp_id_ = response.image().image_id();
    ref_.set_image_id(temp_id_);
    // A failed call exits through Die, past this object's destructor.
    OnDie([this] { DeleteTemporary(); });
  }
  ~ImageArg() {
    OnDie(nullptr);
    DeleteTemporary();
  }
  const v1::ImageRef& ref() const { return ref_; }

 private:
  void DeleteTemporary() {
    if (temp_id_.empty()) return;
    DeleteImageQuietly(c_, temp_id_);
    temp_id_.clear();
  }

  const Connection& c_;
  v1::ImageRef ref_;
  std::string temp_id_;
};

void CheckIo(const std::string& error) {
  if (!error.empty()) Die(kExitLocalIo, error);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File OpenOrDie(const std::string& path) {
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) Die(kExitLocalIo, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  return f;
}

// ---- each analysis: its request from its flags, its result written out ---------------------

v1::HistogramRequest HistogramRequest(const Options& o) {
  v1::HistogramRequest request;
  v1::HistogramOptions* opt = request.mutable_options();
  opt->set_bins(uint32_t(o.GetInt("bins", 256, 1, UINT32_MAX)));
  if (o.Has("lo")) opt->set_lo(o.GetDouble("lo", 0));
  if (o.Has("hi")) opt->set_hi(o.GetDouble("hi", 0));
  const std::string source = o.Get("source", o.Has("channel") ? "channel" : "all");
  if (source == "all") {
    opt->set_source(v1::HISTOGRAM_SOURCE_ALL_CHANNELS);
  } else if (source == "channel") {
    opt->set_source(v1::HISTOGRAM_SOURCE_CHANNEL);
  } else if (source == "luma") {
    opt->set_source(v1::HISTOGRAM_SOURCE_LUMA);
  } else if (source == "rgb_mean") {
    opt->set_source(v1::HISTOGRAM_SOURCE_RGB_MEAN);
  } else {
    Die(kExitUsage,
        fmt::format("--source must be all, channel, luma or rgb_mean, got \"{}\"", source));
  }
  opt->set_channel(uint32_t(o.GetInt("channel", 0, 0, UINT32_MAX)));
  request.set_variant(o.Get("variant"));
  return request;
}

// `image`: the IMAGE argument as the user named it (the chart's title).
void WriteHistogram(const Options& o, const std::string& image, const v1::HistogramResponse& r) {
  fmt::print(
      "histogram of {}: {} histogram(s), {} bins over [{}, {}), {} values counted; "
      "variant {}; {}\n",
      Describe(r.image()), r.histograms_size(), r.bins(), r.lo(), r.hi(), r.total(), r.variant(),
      DescribeTiming(r.timing()));
  bool wrote = false;
  if (o.Has("csv")) CheckIo(WriteHistogramCsv(o.Get("csv"), r)), wrote = true;
  if (o.Has("json")) CheckIo(WriteHistogramJson(o.Get("json"), r)), wrote = true;
  if (o.Has("png")) {
    const std::string source = o.Get("source", o.Has("channel") ? "channel" : "all");
    CheckIo(
        WriteHistogramChart(o.Get("png"), r,
                            {std::filesystem::path(image).filename().string(), source,
                             uint32_t(o.GetInt("channel", 0, 0, UINT32_MAX)), o.GetBool("log")}));
    wrote = true;
  }
  if (!wrote) CheckIo(WriteHistogramCsv("-", r));
}

v1::IntegralImageRequest IntegralImageRequest(const Options& o) {
  v1::IntegralImageRequest request;
  request.mutable_options()->set_squared(o.GetBool("squared") || o.Has("squared-npy"));
  request.set_variant(o.Get("variant"));
  return request;
}

// Writes the tables into .npy files as they stream in.
class IntegralImageOutput {
 public:
  explicit IntegralImageOutput(const Options& o) : sum_path_(o.Get("npy", "integral.npy")) {
    sq_path_ = o.Get("squared-npy");
    if ((o.GetBool("squared") || o.Has("squared-npy")) && sq_path_.empty()) {
      sq_path_ = std::filesystem::path(sum_path_).replace_extension("").string() + "_squared.npy";
    }
  }
  void Take(const v1::IntegralImageResponse& m) {
    if (m.has_header()) {
      header_ = m.header();
      const std::string descr = header_.element() == v1::INTEGRAL_ELEMENT_FLOAT64 ? "<f8" : "<u8";
      const std::vector<uint64_t> shape = {header_.height(), header_.width(), header_.channels()};
      sum_ = OpenOrDie(sum_path_);
      CheckIo(WriteNpyHeader(sum_.get(), descr, shape));
      if (header_.squared()) {
        sq_ = OpenOrDie(sq_path_);
        CheckIo(WriteNpyHeader(sq_.get(), descr, shape));
      }
      progress_ = std::make_unique<Progress>("download",
                                             header_.table_bytes() * (header_.squared() ? 2 : 1));
    } else if (m.has_chunk()) {
      std::FILE* f = m.chunk().squared() ? sq_.get() : sum_.get();
      const std::string& d = m.chunk().data();
      if (f == nullptr || std::fwrite(d.data(), 1, d.size(), f) != d.size()) {
        Die(kExitLocalIo,
            fmt::format("cannot write {}", m.chunk().squared() ? sq_path_ : sum_path_));
      }
      received_ += d.size();
      if (progress_) progress_->Update(received_);
    } else if (m.has_trailer()) {
      trailer_ = m.trailer();
    }
  }
  void Report() {
    if (progress_) progress_->Done();
    sum_.reset();
    sq_.reset();
    fmt::print("integral image of {}: {} table(s) of {}x{}x{} {}, variant {}; {}\nwrote {}{}\n",
               Describe(header_.image()), header_.squared() ? 2 : 1, header_.height(),
               header_.width(), header_.channels(),
               header_.element() == v1::INTEGRAL_ELEMENT_FLOAT64 ? "float64" : "uint64",
               trailer_.variant(), DescribeTiming(trailer_.timing()), sum_path_,
               header_.squared() ? " and " + sq_path_ : "");
  }

 private:
  std::string sum_path_, sq_path_;
  File sum_, sq_;
  v1::IntegralHeader header_;
  v1::IntegralTrailer trailer_;
  uint64_t received_ = 0;
  std::unique_ptr<Progress> progress_;
};

v1::CompactRequest CompactRequest(const Options& o) {
  if (!o.Has("lo") || !o.Has("hi")) Die(kExitUsage, "compaction needs --lo=V and --hi=V");
  v1::CompactRequest request;
  v1::CompactOptions* opt = request.mutable_options();
  const std::string source = o.Get("source", "channel");
  if (source == "channel") {
    opt->set_source(v1::COMPACT_SOURCE_CHANNEL);
  } else if (source == "luma") {
    opt->set_source(v1::COMPACT_SOURCE_LUMA);
  } else {
    Die(kExitUsage, fmt::format("--source must be channel or luma, got \"{}\"", source));
  }
  opt->set_channel(uint32_t(o.GetInt("channel", 0, 0, UINT32_MAX)));
  opt->set_lo(o.GetDouble("lo", 0));
  opt->set_hi(o.GetDouble("hi", 0));
  opt->set_outside(o.GetBool("outside"));
  if (o.Has("max-results")) opt->set_max_results(o.GetInt("max-results", 0, 0, INT64_MAX));
  opt->set_count_only(o.GetBool("count-only"));
  request.set_variant(o.Get("variant"));
  return request;
}

class CompactionOutput {
 public:
  explicit CompactionOutput(const Options& o)
      : csv_(o.Get("csv", o.GetBool("count-only") ? "" : "compaction.csv")) {}
  void Take(const v1::CompactResponse& m) {
    if (m.has_header()) {
      header_ = m.header();
      xy_.reserve(header_.returned() * 8);
    } else if (m.has_chunk()) {
      xy_ += m.chunk().xy();
      values_ += m.chunk().values();
    } else if (m.has_timing()) {
      timing_ = m.timing();
    }
  }
  void Report() {
    fmt::print("compact of {}: {} pixels pass, {} returned{}; variant {}; {}\n",
               Describe(header_.image()), header_.total(), header_.returned(),
               header_.truncated() ? " (truncated: raise --max-results)" : "", header_.variant(),
               DescribeTiming(timing_));
    if (!csv_.empty()) {
      CheckIo(
          WriteCompactCsv(csv_, header_.value_format(), header_.value_channels(), xy_, values_));
      fmt::print("wrote {}\n", csv_);
    }
  }

 private:
  std::string csv_;
  v1::CompactHeader header_;
  v1::Timing timing_;
  std::string xy_, values_;
};

v1::BoxFilterRequest BoxFilterRequest(const Options& o) {
  v1::BoxFilterRequest request;
  v1::BoxFilterOptions* opt = request.mutable_options();
  const int64_t rx = o.GetInt("rx", 1, 0, UINT32_MAX);
  opt->set_rx(uint32_t(rx));
  opt->set_ry(uint32_t(o.GetInt("ry", rx, 0, UINT32_MAX)));
  const std::string border = o.Get("border", "reflect101");
  if (border == "reflect101") {
    opt->set_border(v1::BORDER_MODE_REFLECT101);
  } else if (border == "replicate") {
    opt->set_border(v1::BORDER_MODE_REPLICATE);
  } else if (border == "constant") {
    opt->set_border(v1::BORDER_MODE_CONSTANT);
  } else {
    Die(kExitUsage,
        fmt::format("--border must be reflect101, replicate or constant, got \"{}\"", border));
  }
  opt->set_border_value(o.GetDouble("border-value", 0));
  request.set_variant(o.Get("variant"));
  request.set_keep(o.GetBool("keep"));
  request.set_label(ValidUtf8(o.Get("label")));
  const std::string out = o.Get("out", request.keep() ? "" : "box.png");
  const std::string ext = std::filesystem::path(out).extension().string();
  request.set_encoding(out.empty()     ? v1::PIXEL_ENCODING_NONE
                       : ext == ".png" ? v1::PIXEL_ENCODING_PNG
                                       : v1::PIXEL_ENCODING_RAW);
  return request;
}

class BoxFilterOutput {
 public:
  explicit BoxFilterOutput(const Options& o)
      : request_(BoxFilterRequest(o)), out_(o.Get("out", request_.keep() ? "" : "box.png")) {}
  void Take(const v1::BoxFilterResponse& m) {
    if (m.has_header()) {
      header_ = m.header();
      if (!out_.empty()) {
        f_ = OpenOrDie(out_);
        if (std::filesystem::path(out_).extension() == ".npy") {
          const v1::ImageInfo& r = header_.result();
          CheckIo(WriteNpyHeader(f_.get(), NpyDescr(r.format()),
                                 {r.height(), r.width(), r.channels()}));
        }
      }
      progress_ = std::make_unique<Progress>("download", header_.data_bytes());
    } else if (m.has_chunk()) {
      if (!f_ || std::fwrite(m.chunk().data(), 1, m.chunk().size(), f_.get()) != m.chunk().size()) {
        Die(kExitLocalIo, fmt::format("cannot write {}", out_));
      }
      received_ += m.chunk().size();
      if (progress_) progress_->Update(received_);
    } else if (m.has_timing()) {
      timing_ = m.timing();
    }
  }
  void Report() {
    if (progress_) progress_->Done();
    f_.reset();
    const v1::BoxFilterOptions& opt = request_.options();
    fmt::print("box filter {}x{} of {}: variant {}; {}\n", 2 * opt.rx() + 1, 2 * opt.ry() + 1,
               Describe(header_.image()), header_.variant(), DescribeTiming(timing_));
    if (!out_.empty()) fmt::print("wrote {}\n", out_);
    if (request_.keep()) fmt::print("{}\n", header_.result().image_id());
  }

 private:
  v1::BoxFilterRequest request_;
  std::string out_;
  File f_;
  v1::BoxFilterHeader header_;
  v1::Timing timing_;
  uint64_t received_ = 0;
  std::unique_ptr<Progress> progress_;
};

}  // namespace

// ---- the one-analysis commands --------------------------------------------------------------

int Histogram(const Options& o, const Connection& c) {
  ImageArg image(o, c);
  v1::HistogramRequest request = HistogramRequest(o);
  *request.mutable_image() = image.ref();
  grpc::ClientContext context;
  c.Prepare(&context);
  v1::HistogramResponse r;
  grpc::Status s = c.stub->Histogram(&context, request, &r);
  if (!s.ok()) DieRpc("histogram", s);
  WriteHistogram(o, o.positional[0], r);
  return kExitOk;
}

// A streamed analysis: the request (its options checked before any upload), the image, then
// every message into the analysis's output.
template <typename Output, typename Response, typename Request, typename Rpc>
int StreamedAnalysis(const Options& o, const Connection& c, Request request, Rpc rpc,
                     const char* name) {
  ImageArg image(o, c);
  *request.mutable_image() = image.ref();
  grpc::ClientContext context;
  c.Prepare(&context);
  auto reader = rpc(&context, request);
  Output output(o);
  Response m;
  while (reader->Read(&m)) output.Take(m);
  grpc::Status s = reader->Finish();
  if (!s.ok()) DieRpc(name, s);
  output.Report();
  return kExitOk;
}

int IntegralImage(const Options& o, const Connection& c) {
  return StreamedAnalysis<IntegralImageOutput, v1::IntegralImageResponse>(
      o, c, IntegralImageRequest(o),
      [&](grpc::ClientContext* ctx, const auto& r) { return c.stub->IntegralImage(ctx, r); },
      "integral_image");
}

int Compaction(const Options& o, const Connection& c) {
  return StreamedAnalysis<CompactionOutput, v1::CompactResponse>(
      o, c, CompactRequest(o),
      [&](grpc::ClientContext* ctx, const auto& r) { return c.stub->Compact(ctx, r); },
      "compaction");
}

int BoxFilter(const Options& o, const Connection& c) {
  return StreamedAnalysis<BoxFilterOutput, v1::BoxFilterResponse>(
      o, c, BoxFilterRequest(o),
      [&](grpc::ClientContext* ctx, const auto& r) { return c.stub->BoxFilter(ctx, r); },
      "box_filter");
}

// ---- analyze: several in one call ------------------------------------------------------------

namespace {

// One analysis of an `analyze` command: its flags (parsed from "k=v,k=v") and its output.
struct Planned {
  std::string name;
  Options flags;
  std::optional<v1::HistogramResponse> histogram;
  std::unique_ptr<IntegralImageOutput> integral;
  std::unique_ptr<CompactionOutput> compaction;
  std::unique_ptr<BoxFilterOutput> box;
};

Options SubOptions(const std::string& analysis, const std::string& value) {
  Options sub;
  sub.command = analysis;
  const std::set<std::string>* allowed = AnalysisFlags(analysis);
  if (value == "true" || value.empty()) return sub;
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(',', start);
    if (end == std::string::npos) end = value.size();
    const std::string item = value.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    if (kDecodeFlags.count(name)) {
      Die(kExitUsage, fmt::format("--{}={}: {} is how the image is decoded, for all its analyses: "
                                  "give --{} to analyze itself",
                                  analysis, value, name, name));
    }
    if (allowed == nullptr || !allowed->count(name)) {
      Die(kExitUsage, fmt::format("--{}={}: {} has no option {} (see glimpse --help)", analysis,
                                  value, analysis, name));
    }
    sub.flags[name] = eq == std::string::npos ? "true" : item.substr(eq + 1);
  }
  return sub;
}

}  // namespace

int Analyze(const Options& o, const Connection& c) {
  const bool each = o.GetBool("each");
  if (!each && o.positional.size() != 1) {
    Die(kExitUsage, fmt::format("analyze takes one IMAGE (an image id or a file), got {}",
                                o.positional.size()));
  }
  v1::AnalyzeHeader header;
  std::vector<Planned> plan;
  for (const auto& [flag, value] : o.ordered) {
    if (flag == "keep" || flag == "label" || flag == "each" || flag == "json" ||
        kDecodeFlags.count(flag)) {
      continue;
    }
    const std::string name = CanonicalCommand(flag);
    Planned p;
    p.name = name;
    p.flags = SubOptions(name, value);
    v1::Analysis* a = header.add_analyses();
    if (name == "histogram") {
      *a->mutable_histogram() = HistogramRequest(p.flags);
    } else if (name == "integral_image") {
      *a->mutable_integral_image() = IntegralImageRequest(p.flags);
      p.integral = std::make_unique<IntegralImageOutput>(p.flags);
    } else if (name == "compaction") {
      *a->mutable_compaction() = CompactRequest(p.flags);
      p.compaction = std::make_unique<CompactionOutput>(p.flags);
    } else if (name == "box_filter") {
      *a->mutable_box_filter() = BoxFilterRequest(p.flags);
      p.box = std::make_unique<BoxFilterOutput>(p.flags);
    }
    plan.push_back(std::move(p));
  }
  if (plan.empty()) {
    Die(kExitUsage,
        "analyze needs at least one of --histogram, --integral_image, --compaction, --box_filter");
  }
  if (each) {
    std::vector<std::string> names;
    for (const Planned& p : plan) names.push_back(p.name);
    return AnalyzeEach(o, c, header.analyses(), names);
  }
  header.set_keep(o.GetBool("keep"));
  header.set_label(ValidUtf8(o.Get("label")));
  const std::string& arg = o.positional[0];
  std::string data;
  if (LooksLikeId(arg) && !std::filesystem::exists(arg)) {
    if (header.keep()) Die(kExitUsage, "--keep is for files; the image is stored already");
    RefuseDecodeFlags(o, "the stored image " + arg);
    header.mutable_image()->set_image_id(arg);
  } else {
    data = ReadFileOrDie(arg);
    v1::UploadHeader* u = header.mutable_upload();
    SetDecoding(o, u->mutable_encoded());
    u->set_label(ValidUtf8(std::filesystem::path(arg).filename().string()));
    u->set_total_bytes(data.size());
  }

  grpc::ClientContext context;
  c.Prepare(&context);
  auto stream = c.stub->Analyze(&context);
  Progress progress("upload", data.size());
  v1::AnalyzeRequest first;
  *first.mutable_header() = std::move(header);
  WriteChunked(*stream, std::move(first), data, progress);
  v1::AnalyzeResponse m;
  std::vector<v1::AnalyzeResponse> histograms;
  v1::Timing timing;
  std::string kept;
  while (stream->Read(&m)) {
    if (m.has_kept()) kept = m.kept().image_id();
    if (m.has_timing()) timing = m.timing();
    if (m.index() >= plan.size()) continue;
    Planned& p = plan[m.index()];
    if (m.has_histogram()) p.histogram = m.histogram();
    if (m.has_integral_image() && p.integral) p.integral->Take(m.integral_image());
    if (m.has_compaction() && p.compaction) p.compaction->Take(m.compaction());
    if (m.has_box_filter() && p.box) p.box->Take(m.box_filter());
  }
  grpc::Status s = stream->Finish();
  if (!s.ok()) DieRpc("analyze", s);
  for (Planned& p : plan) {
    if (p.histogram) WriteHistogram(p.flags, arg, *p.histogram);
    if (p.integral) p.integral->Report();
    if (p.compaction) p.compaction->Report();
    if (p.box) p.box->Report();
  }
  fmt::print("analyze: {} analyses in one call; server {:.3f} ms, gpu {:.3f} ms\n", plan.size(),
             timing.server_ns() * 1e-6, timing.gpu_ns() * 1e-6);
  if (!kept.empty()) fmt::print("{}\n", kept);
  return kExitOk;
}

}  // namespace glimpse::client
