// glimpse: the command-line client of glimpse-server.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "client/chart.h"
#include "client/client.h"
#include "client/output_files.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace glimpse::client {
namespace {

constexpr char kUsageHead[] =
    R"(glimpse: command-line client of glimpse-server (GPU image analytics).

Usage: glimpse [--server=HOST:PORT] [--tls-ca=FILE] [--timeout-s=N] COMMAND [ARGS] [--opt=value]

Global options (before the command):
  --server=HOST:PORT   server address (default $GLIMPSE_SERVER, else localhost:50051)
  --tls-ca=FILE        connect with TLS, trusting this PEM CA certificate
  --timeout-s=N        deadline of each call in seconds (default 300; 0 = none)

Commands (IMAGE is a stored image id, or an image file: files up to 3 MiB are sent inline,
larger ones are uploaded, analysed and deleted, also when the call fails):
)";
constexpr char kUsageTail[] = R"(
Exit codes: 0 ok, 1 the server refused or failed the call (or is not SERVING), 2 bad command
line, 3 server unreachable or deadline exceeded, 4 a local file could not be read or written.
)";

int Info(const Options& o, const Connection& c);
int Health(const Options& o, const Connection& c);
int Upload(const Options& o, const Connection& c);
int List(const Options& o, const Connection& c);
int Delete(const Options& o, const Connection& c);
int Histogram(const Options& o, const Connection& c);
int IntegralImage(const Options& o, const Connection& c);
int Compaction(const Options& o, const Connection& c);
int BoxFilter(const Options& o, const Connection& c);

// Every command, once: the usage text, the dispatch and the flags each accepts come from here.
// Analyses go by their names in gpu/ and the server; the short names stay as aliases.
struct Command {
  const char* name;
  std::vector<std::string> aliases;
  const char* usage;  // after the name
  std::set<std::string> flags;
  int (*run)(const Options&, const Connection&);
};

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"info",
       {},
       "                          server, device, limits, queue, store, result buffer",
       {},
       Info},
      {"health",
       {},
       " [--service=NAME]       prints SERVING and exits 0 when the server serves, else 1",
       {"service"},
       Health},
      {"upload",
       {},
       " FILE [--label=L] [--channels=N] [--raw=WxHxC --format=uint8|uint16|float32]\n"
       "                                      stores an image; prints its id (raw: FILE holds "
       "pixels)",
       {"label", "channels", "raw", "format"},
       Upload},
      {"list", {}, "                          stored images, most recently used first", {}, List},
      {"delete", {}, " ID...                  frees stored images", {}, Delete},
      {"histogram",
       {},
       " IMAGE [--bins=256] [--lo=V] [--hi=V] [--source=all|channel|luma|rgb_mean]\n"
       "              [--channel=C] [--variant=NAME] [--csv=FILE] [--json=FILE] [--png=FILE [--log]]\n"
       "                                      --png: a chart; --log: counts on a log scale",
       {"bins", "lo", "hi", "source", "channel", "variant", "csv", "json", "png", "log"},
       Histogram},
      {"integral_image",
       {"integral"},
       " IMAGE [--squared] [--variant=NAME] [--npy=integral.npy] [--squared-npy=FILE]",
       {"squared", "variant", "npy", "squared-npy"},
       IntegralImage},
      {"compaction",
       {"compact"},
       " IMAGE --lo=V --hi=V [--outside] [--source=channel|luma] [--channel=C]\n"
       "              [--max-results=N] [--count-only] [--variant=NAME] [--csv=FILE]",
       {"lo", "hi", "outside", "source", "channel", "max-results", "count-only", "variant", "csv"},
       Compaction},
      {"box_filter",
       {"box"},
       " IMAGE [--rx=1] [--ry=RX] [--border=reflect101|replicate|constant] [--border-value=V]\n"
       "              [--variant=NAME] [--out=box.png (.png: PNG, .npy: numpy, else raw bytes)]\n"
       "              [--keep] [--label=L]",
       {"rx", "ry", "border", "border-value", "variant", "out", "keep", "label"},
       BoxFilter},
      {"load",
       {},
       " [--rpcs=histogram,integral_image,compaction,box_filter] [--sizes=1,8]\n"
       "              [--concurrency=4] [--duration-s=10] [--markdown=FILE]\n"
       "                                      load test: requests/s and p50/p99 latency per RPC "
       "and size",
       {"rpcs", "sizes", "concurrency", "duration-s", "markdown"},
       RunLoad},
  };
  return kCommands;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& c : Commands()) {
    if (c.name == name) return &c;
    for (const std::string& a : c.aliases) {
      if (a == name) return &c;
    }
  }
  return nullptr;
}

std::string Usage() {
  std::string out = kUsageHead;
  for (const Command& c : Commands()) {
    out += fmt::format("  {}{}\n", c.name, c.usage);
    if (!c.aliases.empty()) {
      std::string names;
      for (const std::string& a : c.aliases) names += (names.empty() ? "" : ", ") + a;
      out += fmt::format("              (also: {})\n", names);
    }
  }
  return out + kUsageTail;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  if (const char* env = std::getenv("GLIMPSE_SERVER"); env != nullptr && *env != '\0') {
    o.server = env;
  }
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h" || a == "help") {
      std::fputs(Usage().c_str(), stdout);
      std::exit(kExitOk);
    }
    if (a.rfind("--", 0) != 0) break;
    const size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (eq == std::string::npos)
      Die(kExitUsage, fmt::format("--{} needs a value: --{}=VALUE", name, name));
    const std::string value = a.substr(eq + 1);
    if (name == "server") {
      o.server = value;
    } else if (name == "tls-ca") {
      o.tls_ca = value;
    } else if (name == "timeout-s") {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 0 || v > 86400) {
        Die(kExitUsage, fmt::format("--timeout-s must be in [0, 86400], got \"{}\"", value));
      }
      o.timeout_s = int(v);
    } else {
      Die(kExitUsage, fmt::format("unknown global option --{} (see glimpse --help)", name));
    }
  }
  if (i >= argc) Die(kExitUsage, "no command given (see glimpse --help)");
  o.command = argv[i++];
  const Command* known = FindCommand(o.command);
  if (known == nullptr) {
    Die(kExitUsage, fmt::format("unknown command \"{}\" (see glimpse --help)", o.command));
  }
  o.command = known->name;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) == 0) {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (!known->flags.count(name)) {
        Die(kExitUsage, fmt::format("{} has no option --{} (see glimpse --help)", o.command, name));
      }
      o.flags[name] = eq == std::string::npos ? "true" : a.substr(eq + 1);
    } else {
      o.positional.push_back(a);
    }
  }
  return o;
}

std::string FormatName(v1::SampleFormat f) {
  switch (f) {
    case v1::SAMPLE_FORMAT_UINT8:
      return "uint8";
    case v1::SAMPLE_FORMAT_UINT16:
      return "uint16";
    case v1::SAMPLE_FORMAT_FLOAT32:
      return "float32";
    default:
      return "?";
  }
}

std::string Describe(const v1::ImageInfo& i) {
  return fmt::format("{}x{} {}-channel {} ({} bytes)", i.width(), i.height(), i.channels(),
                     FormatName(i.format()), i.bytes());
}

std::string DescribeTiming(const v1::Timing& t) {
  return fmt::format("gpu {:.3f} ms, queue {:.3f} ms, server {:.3f} ms", t.gpu_ns() * 1e-6,
                     t.queue_ns() * 1e-6, t.server_ns() * 1e-6);
}

bool LooksLikeId(const std::string& s) {
  if (s.size() != 32) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The IMAGE argument as a request field; a large file is uploaded first (and deleted by the
// destructor).
class ImageArg {
 public:
  ImageArg(const Options& o, const Connection& c) : c_(c) {
    if (o.positional.size() != 1) {
      Die(kExitUsage, fmt::format("{} takes one IMAGE (an image id or a file), got {}", o.command,
                                  o.positional.size()));
    }
    const std::string& arg = o.positional[0];
    if (LooksLikeId(arg) && !std::filesystem::exists(arg)) {
      ref_.set_image_id(arg);
      return;
    }
    std::string data = ReadFileOrDie(arg);
    if (data.size() <= (3u << 20)) {
      ref_.mutable_encoded()->set_data(std::move(data));
      return;
    }
    v1::UploadHeader header;
    header.mutable_encoded();
    header.set_label(std::filesystem::path(arg).filename().string());
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
    grpc::ClientContext context;
    c_.Prepare(&context);
    v1::DeleteImageRequest request;
    request.set_image_id(temp_id_);
    v1::DeleteImageResponse response;
    (void)c_.stub->DeleteImage(&context, request, &response);
    temp_id_.clear();
  }

  const Connection& c_;
  v1::ImageRef ref_;
  std::string temp_id_;
};

void CheckIo(const std::string& error) {
  if (!error.empty()) Die(kExitLocalIo, error);
}

// ---- commands -------------------------------------------------------------------------------

int Info(const Options&, const Connection& c) {
  grpc::ClientContext context;
  c.Prepare(&context);
  v1::ServerInfo i;
  grpc::Status s = c.stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &i);
  if (!s.ok()) DieRpc("info", s);
  std::string analyses;
  for (const v1::AnalysisInfo& a : i.analysis_info()) {
    std::string variants;
    for (const std::string& v : a.variants()) variants += (variants.empty() ? "" : ", ") + v;
    analyses += fmt::format("{}{} ({})", analyses.empty() ? "" : "\n           ", a.name(), variants);
  }
  fmt::print(
      "server     glimpse-server {} (up {} s)\n"
      "device     {} | {} | {} ({}{})\n"
      "limits     texture {} px, SSBO binding {} MiB, shared memory {} KiB, int64 {}\n"
      "analyses   {}\n"
      "queue      {} waiting (max {}); jobs run {}, dropped unrun {}, rejected (full) {}\n"
      "store      {} images, {:.1f} / {:.1f} MiB; TTL {} s; evicted or expired {}\n"
      "limits     {} pixels per image, {} bytes per upload, {} bytes per message\n"
      "results    {:.1f} / {:.1f} MiB held for readers (peak {:.1f}); {} jobs waiting for room\n",
      i.version(), i.uptime_s(), i.vendor(), i.renderer(), i.gl_version(), i.device_platform(),
      i.software() ? ", software" : "", i.limits().max_texture_size(),
      i.limits().max_storage_block_bytes() >> 20, i.limits().max_shared_memory_bytes() >> 10,
      i.limits().int64() ? "yes" : "no", analyses, i.queue_length(), i.max_queue(), i.jobs_run(),
      i.jobs_dropped(), i.jobs_rejected(), i.stored_images(), i.stored_bytes() / 1048576.0,
      i.store_budget_bytes() / 1048576.0, i.image_ttl_s(), i.images_evicted(), i.max_image_pixels(),
      i.max_upload_bytes(), i.max_message_bytes(), i.result_buffer_used_bytes() / 1048576.0,
      i.result_buffer_bytes() / 1048576.0, i.result_buffer_peak_bytes() / 1048576.0,
      i.jobs_waiting_for_results());
  return kExitOk;
}

int Health(const Options& o, const Connection& c) {
  auto stub = grpc::health::v1::Health::NewStub(c.channel);
  grpc::ClientContext context;
  c.Prepare(&context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(o.Get("service", ""));
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = stub->Check(&context, request, &response);
  if (!s.ok()) {
    fmt::print("UNKNOWN\n");
    std::fprintf(stderr, "glimpse: health: %s\n", s.error_message().c_str());
    // Health probes (Docker, scripts) read any failure as "not serving": exit 1, as documented.
    return kExitFailed;
  }
  const bool serving = response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  fmt::print("{}\n", grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()));
  return serving ? kExitOk : kExitFailed;
}

int Upload(const Options& o, const Connection& c) {
  if (o.positional.size() != 1) Die(kExitUsage, "upload takes one FILE");
  const std::string& path = o.positional[0];
  const std::string data = ReadFileOrDie(path);
  v1::UploadHeader header;
  header.set_label(o.Get("label", std::filesystem::path(path).filename().string()));
  if (o.Has("raw")) {
    unsigned w = 0, h = 0, ch = 0;
    char tail = 0;
    if (std::sscanf(o.Get("raw").c_str(), "%ux%ux%u%c", &w, &h, &ch, &tail) != 3) {
      Die(kExitUsage, fmt::format("--raw must be WIDTHxHEIGHTxCHANNELS, got \"{}\"", o.Get("raw")));
    }
    v1::ImageLayout* l = header.mutable_raw();
    l->set_width(w);
    l->set_height(h);
    l->set_channels(ch);
    const std::string f = o.Get("format", "uint8");
    if (f == "uint8") {
      l->set_format(v1::SAMPLE_FORMAT_UINT8);
    } else if (f == "uint16") {
      l->set_format(v1::SAMPLE_FORMAT_UINT16);
    } else if (f == "float32") {
      l->set_format(v1::SAMPLE_FORMAT_FLOAT32);
    } else {
      Die(kExitUsage, fmt::format("--format must be uint8, uint16 or float32, got \"{}\"", f));
    }
  } else {
    if (o.Has("format")) Die(kExitUsage, "--format applies to --raw uploads only");
    header.mutable_encoded()->set_desired_channels(uint32_t(o.GetInt("channels", 0, 0, 4)));
  }
  v1::UploadImageResponse response;
  grpc::Status s = UploadBytes(c, data, header, &response, true);
  if (!s.ok()) DieRpc("upload of " + path, s);
  fmt::print("{}\n", response.image().image_id());
  std::fprintf(stderr, "stored %s as %s\n", Describe(response.image()).c_str(),
               response.image().image_id().c_str());
  return kExitOk;
}

int List(const Options&, const Connection& c) {
  grpc::ClientContext context;
  c.Prepare(&context);
  v1::ListImagesResponse r;
  grpc::Status s = c.stub->ListImages(&context, v1::ListImagesRequest(), &r);
  if (!s.ok()) DieRpc("list", s);
  fmt::print("{:<32}  {:>11}  {:>2}  {:<7}  {:>12}  {:<10}  {}\n", "ID", "SIZE", "CH", "FORMAT",
             "BYTES", "ORIGIN", "LABEL");
  for (const v1::ImageInfo& i : r.images()) {
    fmt::print("{:<32}  {:>11}  {:>2}  {:<7}  {:>12}  {:<10}  {}\n", i.image_id(),
               fmt::format("{}x{}", i.width(), i.height()), i.channels(), FormatName(i.format()),
               i.bytes(), i.origin(), i.label());
  }
  fmt::print("{} images, {:.1f} of {:.1f} MiB\n", r.images_size(), r.stored_bytes() / 1048576.0,
             r.budget_bytes() / 1048576.0);
  return kExitOk;
}

int Delete(const Options& o, const Connection& c) {
  if (o.positional.empty()) Die(kExitUsage, "delete takes one or more image ids");
  for (const std::string& id : o.positional) {
    grpc::ClientContext context;
    c.Prepare(&context);
    v1::DeleteImageRequest request;
    request.set_image_id(id);
    v1::DeleteImageResponse response;
    grpc::Status s = c.stub->DeleteImage(&context, request, &response);
    if (!s.ok()) DieRpc("delete " + id, s);
    fmt::print("deleted {} ({} bytes)\n", id, response.freed_bytes());
  }
  return kExitOk;
}

int Histogram(const Options& o, const Connection& c) {
  ImageArg image(o, c);
  v1::HistogramRequest request;
  *request.mutable_image() = image.ref();
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
  grpc::ClientContext context;
  c.Prepare(&context);
  v1::HistogramResponse r;
  grpc::Status s = c.stub->Histogram(&context, request, &r);
  if (!s.ok()) DieRpc("histogram", s);
  fmt::print(
      "histogram of {}: {} histogram(s), {} bins over [{}, {}), {} values counted; "
      "variant {}; {}\n",
      Describe(r.image()), r.histograms_size(), r.bins(), r.lo(), r.hi(), r.total(), r.variant(),
      DescribeTiming(r.timing()));
  bool wrote = false;
  if (o.Has("csv")) CheckIo(WriteHistogramCsv(o.Get("csv"), r)), wrote = true;
  if (o.Has("json")) CheckIo(WriteHistogramJson(o.Get("json"), r)), wrote = true;
  if (o.Has("png")) {
    CheckIo(WriteHistogramChart(o.Get("png"), r,
                                {std::filesystem::path(o.positional[0]).filename().string(), source,
                                 opt->channel(), o.GetBool("log")}));
    wrote = true;
  }
  if (!wrote) CheckIo(WriteHistogramCsv("-", r));
  return kExitOk;
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

int IntegralImage(const Options& o, const Connection& c) {
  ImageArg image(o, c);
  v1::IntegralImageRequest request;
  *request.mutable_image() = image.ref();
  const bool squared = o.GetBool("squared") || o.Has("squared-npy");
  request.mutable_options()->set_squared(squared);
  request.set_variant(o.Get("variant"));
  const std::string sum_path = o.Get("npy", "integral.npy");
  std::string sq_path = o.Get("squared-npy");
  if (squared && sq_path.empty()) {
    sq_path = std::filesystem::path(sum_path).replace_extension("").string() + "_squared.npy";
  }
  grpc::ClientContext context;
  c.Prepare(&context);
  auto reader = c.stub->IntegralImage(&context, request);
  v1::IntegralImageResponse m;
  File sum, sq;
  v1::IntegralHeader header;
  v1::IntegralTrailer trailer;
  uint64_t received = 0;
  std::unique_ptr<Progress> progress;
  while (reader->Read(&m)) {
    if (m.has_header()) {
      header = m.header();
      const std::string descr = header.element() == v1::INTEGRAL_ELEMENT_FLOAT64 ? "<f8" : "<u8";
      const std::vector<uint64_t> shape = {header.height(), header.width(), header.channels()};
      sum = OpenOrDie(sum_path);
      CheckIo(WriteNpyHeader(sum.get(), descr, shape));
      if (header.squared()) {
        sq = OpenOrDie(sq_path);
        CheckIo(WriteNpyHeader(sq.get(), descr, shape));
      }
      progress =
          std::make_unique<Progress>("download", header.table_bytes() * (header.squared() ? 2 : 1));
    } else if (m.has_chunk()) {
      std::FILE* f = m.chunk().squared() ? sq.get() : sum.get();
      const std::string& d = m.chunk().data();
      if (f == nullptr || std::fwrite(d.data(), 1, d.size(), f) != d.size()) {
        Die(kExitLocalIo, fmt::format("cannot write {}", m.chunk().squared() ? sq_path : sum_path));
      }
      received += d.size();
      if (progress) progress->Update(received);
    } else if (m.has_trailer()) {
      trailer = m.trailer();
    }
  }
  grpc::Status s = reader->Finish();
  if (progress) progress->Done();
  if (!s.ok()) DieRpc("integral_image", s);
  fmt::print("integral image of {}: {} table(s) of {}x{}x{} {}, variant {}; {}\nwrote {}{}\n",
             Describe(header.image()), header.squared() ? 2 : 1, header.height(), header.width(),
             header.channels(),
             header.element() == v1::INTEGRAL_ELEMENT_FLOAT64 ? "float64" : "uint64",
             trailer.variant(), DescribeTiming(trailer.timing()), sum_path,
             header.squared() ? " and " + sq_path : "");
  return kExitOk;
}

int Compaction(const Options& o, const Connection& c) {
  ImageArg image(o, c);
  if (!o.Has("lo") || !o.Has("hi")) Die(kExitUsage, "compact needs --lo=V and --hi=V");
  v1::CompactRequest request;
  *request.mutable_image() = image.ref();
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
  grpc::ClientContext context;
  c.Prepare(&context);
  auto reader = c.stub->Compact(&context, request);
  v1::CompactResponse m;
  v1::CompactHeader header;
  v1::Timing timing;
  std::string xy, values;
  while (reader->Read(&m)) {
    if (m.has_header()) {
      header = m.header();
      xy.reserve(header.returned() * 8);
    } else if (m.has_chunk()) {
      xy += m.chunk().xy();
      values += m.chunk().values();
    } else if (m.has_timing()) {
      timing = m.timing();
    }
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) DieRpc("compaction", s);
  fmt::print("compact of {}: {} pixels pass, {} returned{}; variant {}; {}\n",
             Describe(header.image()), header.total(), header.returned(),
             header.truncated() ? " (truncated: raise --max-results)" : "", header.variant(),
             DescribeTiming(timing));
  const std::string csv = o.Get("csv", opt->count_only() ? "" : "compact.csv");
  if (!csv.empty()) {
    CheckIo(WriteCompactCsv(csv, header.value_format(), header.value_channels(), xy, values));
    fmt::print("wrote {}\n", csv);
  }
  return kExitOk;
}

int BoxFilter(const Options& o, const Connection& c) {
  ImageArg image(o, c);
  v1::BoxFilterRequest request;
  *request.mutable_image() = image.ref();
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
  request.set_label(o.Get("label"));
  std::string out = o.Get("out", request.keep() ? "" : "box.png");
  const std::string ext = std::filesystem::path(out).extension().string();
  request.set_encoding(out.empty()     ? v1::PIXEL_ENCODING_NONE
                       : ext == ".png" ? v1::PIXEL_ENCODING_PNG
                                       : v1::PIXEL_ENCODING_RAW);
  grpc::ClientContext context;
  c.Prepare(&context);
  auto reader = c.stub->BoxFilter(&context, request);
  v1::BoxFilterResponse m;
  v1::BoxFilterHeader header;
  v1::Timing timing;
  File f;
  std::unique_ptr<Progress> progress;
  uint64_t received = 0;
  while (reader->Read(&m)) {
    if (m.has_header()) {
      header = m.header();
      if (!out.empty()) {
        f = OpenOrDie(out);
        if (ext == ".npy") {
          const v1::ImageInfo& r = header.result();
          CheckIo(
              WriteNpyHeader(f.get(), NpyDescr(r.format()), {r.height(), r.width(), r.channels()}));
        }
      }
      progress = std::make_unique<Progress>("download", header.data_bytes());
    } else if (m.has_chunk()) {
      if (!f || std::fwrite(m.chunk().data(), 1, m.chunk().size(), f.get()) != m.chunk().size()) {
        Die(kExitLocalIo, fmt::format("cannot write {}", out));
      }
      received += m.chunk().size();
      if (progress) progress->Update(received);
    } else if (m.has_timing()) {
      timing = m.timing();
    }
  }
  grpc::Status s = reader->Finish();
  if (progress) progress->Done();
  if (!s.ok()) DieRpc("box_filter", s);
  fmt::print("box filter {}x{} of {}: variant {}; {}\n", 2 * opt->rx() + 1, 2 * opt->ry() + 1,
             Describe(header.image()), header.variant(), DescribeTiming(timing));
  if (!out.empty()) fmt::print("wrote {}\n", out);
  if (request.keep()) fmt::print("{}\n", header.result().image_id());
  return kExitOk;
}

}  // namespace
}  // namespace glimpse::client

int main(int argc, char** argv) {
  using namespace glimpse::client;
  const Options o = ParseArgs(argc, argv);
  const Connection c = Connect(o);
  return FindCommand(o.command)->run(o, c);
}
