// glimpse: the command-line client of glimpse-server.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "client/analyses.h"
#include "client/client.h"
#include "client/output_files.h"
#include "common/utf8.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace glimpse::client {
namespace {

constexpr char kUsageHead[] =
    R"(glimpse: command-line client of glimpse-server (GPU image analytics).

Usage: glimpse [--server=HOST:PORT] [--token=TOKEN] [--tls-ca=FILE] [--timeout-s=N] COMMAND
               [ARGS] [--opt=value]

Global options (before the command; --server=HOST:PORT or --server HOST:PORT):
  --server=HOST:PORT   server address (default $GLIMPSE_SERVER, else localhost:50051)
  --token=TOKEN        bearer token for a server with --tokens (default $GLIMPSE_TOKEN; prefer
                       the variable: a command line is visible to other local users)
  --tls-ca=FILE        connect with TLS, trusting this PEM CA certificate
  --tls-cert=FILE      client certificate (PEM) for a server with --tls-client-ca (with --tls-key)
  --tls-key=FILE       the client certificate's private key (PEM)
  --timeout-s=N        deadline of each call in seconds (default 300; 0 = none)

Commands (IMAGE is a stored image id, or an image file: files up to 3 MiB are sent inline,
larger ones are uploaded, analysed and deleted, also when the call fails; every command that
takes a file takes --channels=N (0: as stored, 1-4: converted on decode, 1 = grey) and
--orientation=file|stored (a JPEG, PNG or WebP turned as its EXIF tag says, the default, or as
stored)):
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

// A file-taking command's own flags, with the decoding flags every such command accepts.
std::set<std::string> TakesFile(std::set<std::string> flags) {
  flags.insert(kDecodeFlags.begin(), kDecodeFlags.end());
  return flags;
}

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
       " FILE [--label=L] [--channels=N] [--orientation=file|stored]\n"
       "              [--raw=WxHxC --format=uint8|uint16|float32]\n"
       "                                      stores an image; prints its id (raw: FILE holds "
       "pixels)",
       TakesFile({"label", "raw", "format"}),
       Upload},
      {"list", {}, "                          stored images, most recently used first", {}, List},
      {"delete", {}, " ID...                  frees stored images", {}, Delete},
      {"histogram",
       {},
       " IMAGE [--bins=256] [--lo=V] [--hi=V] [--source=all|channel|luma|rgb_mean]\n"
       "              [--channel=C] [--variant=NAME] [--csv=FILE] [--json=FILE] [--png=FILE "
       "[--log]]\n"
       "                                      --png: a chart; --log: counts on a log scale",
       TakesFile({"bins", "lo", "hi", "source", "channel", "variant", "csv", "json", "png", "log"}),
       Histogram},
      {"integral_image",
       {"integral"},
       " IMAGE [--squared] [--variant=NAME] [--npy=integral.npy] [--squared-npy=FILE]",
       TakesFile({"squared", "variant", "npy", "squared-npy"}),
       IntegralImage},
      {"compaction",
       {"compact"},
       " IMAGE --lo=V --hi=V [--outside] [--source=channel|luma] [--channel=C]\n"
       "              [--max-results=N] [--count-only] [--variant=NAME] [--csv=FILE]",
       TakesFile({"lo", "hi", "outside", "source", "channel", "max-results", "count-only",
                  "variant", "csv"}),
       Compaction},
      {"box_filter",
       {"box"},
       " IMAGE [--rx=1] [--ry=RX] [--border=reflect101|replicate|constant] [--border-value=V]\n"
       "              [--variant=NAME] [--out=box.png (.png: PNG, .npy: numpy, else raw bytes)]\n"
       "              [--keep] [--label=L]",
       TakesFile({"rx", "ry", "border", "border-value", "variant", "out", "keep", "label"}),
       BoxFilter},
      {"analyze",
       {},
       " IMAGE [--histogram[=bins=64,csv=h.csv,...]] [--integral_image[=squared,npy=F,...]]\n"
       "              [--compaction=lo=V,hi=V,...] [--box_filter[=rx=3,out=box.png,...]] [--keep]\n"
       "              [--label=L]   several analyses in one call, in the order given, each with\n"
       "              its own command's options after '='; the image is not kept unless --keep\n"
       "              --each FILE... [--json]: the same analyses of every file (or id) in one\n"
       "              AnalyzeBatch call, one CSV row per image and analysis on stdout (--json:\n"
       "              JSON lines); a bad file gets its own error row; exit 1 if any failed",
       TakesFile({"histogram", "integral_image", "integral", "compaction", "compact", "box_filter",
                  "box", "keep", "label", "each", "json"}),
       Analyze},
      {"load",
       {},
       " [--rpcs=histogram,integral_image,compaction,box_filter] [--sizes=1,8]\n"
       "              [--concurrency=4] [--duration-s=10] [--markdown=FILE] [--replica=HOST:PORT]\n"
       "                                      load test: requests/s and p50/p99 latency per RPC "
       "and size;\n"
       "              --rpcs also takes upload_and_4 (upload, the four analyses by id, delete) "
       "and\n"
       "              analyze_4 (the same in one Analyze call); --replica: a second replica on\n"
       "              the same --redis, for the cost of a first call there (a fetch from Redis);\n"
       "              --tenants=NAME=TOKEN,...: each tenant loads at once on its own connection,\n"
       "              rows apart (the name is also sent as glimpse-client-key);\n"
       "              --batch=N (1..1000; 0: off): each request is one AnalyzeBatch call of N\n"
       "              images (the stored image, by id) with every --rpcs analysis, one row\n"
       "              \"batch N x histogram+...\" per size; images/s, latency per call, an image\n"
       "              that failed counts as an error (not with upload_and_4 or analyze_4)",
       {"rpcs", "sizes", "concurrency", "duration-s", "markdown", "replica", "tenants", "batch"},
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

}  // namespace

const std::set<std::string>* AnalysisFlags(const std::string& name) {
  const Command* c = FindCommand(name);
  return c == nullptr ? nullptr : &c->flags;
}

std::string CanonicalCommand(const std::string& name) {
  const Command* c = FindCommand(name);
  return c == nullptr ? name : c->name;
}

namespace {

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
  if (const char* env = std::getenv("GLIMPSE_TOKEN"); env != nullptr && *env != '\0') {
    o.token = env;
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
    // Every global option takes a value: --server=HOST:PORT, or --server HOST:PORT.
    std::string value;
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      Die(kExitUsage, fmt::format("--{} needs a value: --{}=VALUE", name, name));
    }
    if (name == "server") {
      o.server = value;
    } else if (name == "tls-ca") {
      o.tls_ca = value;
    } else if (name == "tls-cert") {
      o.tls_cert = value;
    } else if (name == "tls-key") {
      o.tls_key = value;
    } else if (name == "token") {
      o.token = value;
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
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    Die(kExitUsage, "--tls-cert and --tls-key must be given together");
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
      o.ordered.emplace_back(name, o.flags[name]);
    } else {
      o.positional.push_back(a);
    }
  }
  return o;
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
    analyses +=
        fmt::format("{}{} ({})", analyses.empty() ? "" : "\n           ", a.name(), variants);
  }
  fmt::print(
      "server     glimpse-server {} (up {} s)\n"
      "device     {} | {} | {} ({}{})\n"
      "limits     texture {} px, SSBO binding {} MiB, shared memory {} KiB, int64 {}\n"
      "subgroups  ballots {}; GL_KHR_shader_subgroup {}; NV thread shuffle {}\n"
      "analyses   {}\n"
      "queue      {} waiting (max {}); jobs run {}, dropped unrun {}, rejected (full) {}\n"
      "store      {} images, {:.1f} / {:.1f} MiB; TTL {} s; evicted or expired {}\n"
      "limits     {} pixels per image, {} bytes per upload, {} bytes per message\n"
      "results    {:.1f} / {:.1f} MiB held for readers (peak {:.1f}); {} jobs waiting for room\n"
      "programs   {} built; start-up warm-up {}\n",
      i.version(), i.uptime_s(), i.vendor(), i.renderer(), i.gl_version(), i.device_platform(),
      i.software() ? ", software" : "", i.limits().max_texture_size(),
      i.limits().max_storage_block_bytes() >> 20, i.limits().max_shared_memory_bytes() >> 10,
      i.limits().int64() ? "yes" : "no", i.limits().subgroup_ballot() ? "yes" : "no",
      i.limits().subgroup_size() > 0
          ? fmt::format("{} invocations ({})", i.limits().subgroup_size(),
                        fmt::join(i.limits().subgroup_features(), ", "))
          : std::string("no"),
      i.limits().thread_shuffle() ? "yes" : "no", analyses, i.queue_length(), i.max_queue(),
      i.jobs_run(), i.jobs_dropped(), i.jobs_rejected(), i.stored_images(),
      i.stored_bytes() / 1048576.0, i.store_budget_bytes() / 1048576.0, i.image_ttl_s(),
      i.images_evicted(), i.max_image_pixels(), i.max_upload_bytes(), i.max_message_bytes(),
      i.result_buffer_used_bytes() / 1048576.0, i.result_buffer_bytes() / 1048576.0,
      i.result_buffer_peak_bytes() / 1048576.0, i.jobs_waiting_for_results(), i.programs_built(),
      i.warm_up_ms() ? fmt::format("{:.1f} s", i.warm_up_ms() / 1000.0) : std::string("off"));
  if (i.staging_bytes() > 0) {
    fmt::print(
        "staging    {:.1f} / {:.1f} MiB held by images read ({:.1f} mapped); {} images found it "
        "full\n",
        i.staging_used_bytes() / 1048576.0, i.staging_bytes() / 1048576.0,
        i.staging_mapped_bytes() / 1048576.0, i.staging_full());
  } else {
    fmt::print("staging    none: images are uploaded from ordinary host memory\n");
  }
  if (!i.shared_store().empty()) {
    fmt::print("shared     {} ({}); the store above is this replica's cache\n", i.shared_store(),
               i.shared_store_reachable() ? "reachable" : "UNREACHABLE");
  }
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
  // Labels are protobuf strings: UTF-8, whatever the file name's encoding.
  header.set_label(ValidUtf8(o.Get("label", std::filesystem::path(path).filename().string())));
  if (o.Has("raw")) {
    RefuseDecodeFlags(o, "raw pixels (--raw)");
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
    SetDecoding(o, header.mutable_encoded());
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
    fmt::print("deleted {} ({} bytes of GPU memory freed)\n", id, response.freed_bytes());
  }
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
