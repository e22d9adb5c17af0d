// `glimpse load`: closed-loop load against a server, per RPC and image size: requests/s,
// latency percentiles, and the service overhead (client latency minus the server's GPU time);
// with --batch=N, AnalyzeBatch calls of N images each (images/s).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "client/analyses.h"
#include "client/client.h"
#include "client/load_calls.h"

namespace glimpse::client {
namespace {

using Clock = std::chrono::steady_clock;

struct Sample {
  double latency_ms;
  double gpu_ms;
  double queue_ms;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5));
  return v[i];
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Uploads through `c`, then times a histogram on `replica` twice: the first call fetches the
// image from the shared store and uploads it to that replica's GPU, the second finds it cached.
std::string FirstCalls(const Connection& c, const Connection& replica, const std::string& pixels,
                       const v1::UploadHeader& header, const std::string& size, int width,
                       int height, int duration_s) {
  std::vector<double> first, cached, first_gpu, cached_gpu;
  int errors = 0;
  const Clock::time_point end = Clock::now() + std::chrono::seconds(duration_s);
  while (Clock::now() < end || first.size() < 3) {
    v1::UploadImageResponse uploaded;
    grpc::Status s = UploadBytes(c, pixels, header, &uploaded, false);
    if (!s.ok()) DieRpc("upload for the first-call rows", s);
    const std::string id = uploaded.image().image_id();
    for (int k = 0; k < 2; ++k) {
      const Clock::time_point t0 = Clock::now();
      Outcome r = Call(replica, "histogram", id);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!r.ok) {
        ++errors;
        if (errors == 1) std::fprintf(stderr, "  error: %s\n", r.status.error_message().c_str());
        if (errors > 10) Die(kExitFailed, "first-call rows: too many errors");
        continue;
      }
      (k == 0 ? first : cached).push_back(ms);
      (k == 0 ? first_gpu : cached_gpu).push_back(r.timing.gpu_ns() * 1e-6);
    }
    DeleteImageQuietly(c, id);
  }
  std::string rows;
  for (int k = 0; k < 2; ++k) {
    const std::vector<double>& lat = k == 0 ? first : cached;
    const std::vector<double>& gpu = k == 0 ? first_gpu : cached_gpu;
    std::vector<double> overhead;
    for (size_t i = 0; i < lat.size(); ++i) overhead.push_back(lat[i] - gpu[i]);
    rows += fmt::format(
        "| histogram, {} on another replica | {} MP ({}x{} RGBA8) | 1 | {} | {} | - | {:.1f} | "
        "{:.1f} | {:.1f} | - | {:.1f} | - |\n",
        k == 0 ? "first call (fetch from Redis)" : "second call (cached)", size, width, height,
        lat.size(), k == 0 ? errors : 0, Percentile(lat, 0.5), Percentile(lat, 0.99),
        Percentile(gpu, 0.5), Percentile(overhead, 0.5));
  }
  std::fputs(rows.c_str(), stderr);
  return rows;
}

}  // namespace

// One tenant of a load run: its connection and its copy of the load image.
struct Tenant {
  std::string name;  // "" without --tenants
  const Connection* conn;
  std::string id;
  std::string Label() const { return name.empty() ? "" : " (tenant " + name + ")"; }
};

// --tenants=NAME=TOKEN,...: each tenant on a connection of its own (its token; its name as the
// client key, which the fair scheduler counts calls to where access control is off), all
// loading the server at once, each with --concurrency threads and rows of its own. Without it,
// one tenant on `c`. `connections` holds the tenants' connections and must outlive them.
std::vector<Tenant> ConnectTenants(const Options& o, const Connection& c,
                                   std::vector<Connection>* connections) {
  std::vector<Tenant> tenants;
  if (!o.Has("tenants")) return {{"", &c, ""}};
  for (const std::string& pair : Split(o.Get("tenants"))) {
    const size_t eq = pair.find('=');
    if (eq == 0 || eq == std::string::npos) {
      Die(kExitUsage,
          fmt::format("--tenants takes NAME=TOKEN pairs separated by commas, got \"{}\"", pair));
    }
    Options to = o;
    to.token = pair.substr(eq + 1);
    connections->push_back(Connect(to));
    connections->back().client_key = pair.substr(0, eq);
  }
  for (const Connection& tc : *connections) tenants.push_back({tc.client_key, &tc, ""});
  return tenants;
}

// One load image's size and bytes, and the header it is uploaded with.
struct LoadImage {
  std::string size;  // "1" or "8" (megapixels)
  int width = 0, height = 0;
  std::string pixels;
  v1::UploadHeader header;
};

// A tenant's call of what a row measures: a single call, an Analyze call or an AnalyzeBatch call.
using LoadCall = std::function<Outcome(const Tenant&)>;

// Runs `call` closed-loop from --concurrency threads per tenant, all tenants at once, for
// `duration_s`; prints and returns one table row per tenant, labelled `label`.
std::string LoadRows(const std::string& label, const LoadCall& call,
                     const std::vector<Tenant>& tenants, const LoadImage& image, int concurrency,
                     int duration_s) {
  std::string table;
  // Every tenant's threads at once, each tenant's samples apart.
  struct Tally {
    std::mutex mu;
    std::vector<Sample> samples;
    std::atomic<int> errors{0};
    std::atomic<int64_t> images{0};
    std::string first_error;
  };
  std::vector<Tally> tallies(tenants.size());
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + std::chrono::seconds(duration_s);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < tenants.size(); ++k) {
    for (int i = 0; i < concurrency; ++i) {
      threads.emplace_back([&, k] {
        const Tenant& t = tenants[k];
        Tally& tally = tallies[k];
        std::vector<Sample> mine;
        while (Clock::now() < end) {
          const Clock::time_point t0 = Clock::now();
          Outcome r = call(t);
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          tally.images += r.images;
          if (r.errors > 0 && tally.errors.fetch_add(r.errors) == 0) {
            std::lock_guard lock(tally.mu);
            tally.first_error = r.error;
          }
          if (!r.ok) continue;
          mine.push_back({ms, r.timing.gpu_ns() * 1e-6, r.timing.queue_ns() * 1e-6});
        }
        std::lock_guard lock(tally.mu);
        tally.samples.insert(tally.samples.end(), mine.begin(), mine.end());
      });
    }
  }
  for (std::thread& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  for (size_t k = 0; k < tenants.size(); ++k) {
    const Tally& tally = tallies[k];
    std::vector<double> lat, gpu, queue, overhead;
    for (const Sample& x : tally.samples) {
      lat.push_back(x.latency_ms);
      gpu.push_back(x.gpu_ms);
      queue.push_back(x.queue_ms);
      overhead.push_back(x.latency_ms - x.gpu_ms);
    }
    const std::string row = fmt::format(
        "| {}{} | {} MP ({}x{} RGBA8) | {} | {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | "
        "{:.1f} | {:.1f} | {:.1f} |\n",
        label, tenants[k].Label(), image.size, image.width, image.height, concurrency,
        tally.samples.size(), tally.errors.load(), double(tally.samples.size()) / elapsed,
        Percentile(lat, 0.5), Percentile(lat, 0.99), Percentile(gpu, 0.5), Percentile(queue, 0.5),
        Percentile(overhead, 0.5), double(tally.images.load()) / elapsed);
    std::fputs(row.c_str(), stderr);
    if (!tally.first_error.empty()) {
      std::fprintf(stderr, "  first error: %s\n", tally.first_error.c_str());
    }
    table += row;
  }
  return table;
}

// The report: the server, the date, the settings and the table; on stdout and, with --markdown,
// in that file.
void WriteReport(const Options& o, const v1::ServerInfo& info, int concurrency, int duration_s,
                 const std::string& table) {
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  const std::string report = fmt::format(
      "Renderer: {} ({}), server {}; date {}; {} client threads, {} s per row.\n"
      "Latency is the client's wall clock per call (closed loop, whole response read); GPU is the "
      "server's timer-query time of the kernel; overhead = latency - GPU (queue wait, upload of "
      "results over gRPC, serialisation); images/s counts the images answered without error. A "
      "\"batch N x ...\" row's call is one AnalyzeBatch call of N images: its latency is the "
      "whole call's, its GPU and queue times the sums over its images, its errors the images "
      "that failed.\n\n{}",
      info.renderer(), info.gl_version(), info.version(), date, concurrency, duration_s, table);
  std::fputs(report.c_str(), stdout);
  if (o.Has("markdown")) {
    std::FILE* f = std::fopen(o.Get("markdown").c_str(), "w");
    if (f == nullptr) Die(kExitLocalIo, "cannot write " + o.Get("markdown"));
    std::fputs(report.c_str(), f);
    std::fclose(f);
  }
}

int RunLoad(const Options& o, const Connection& c) {
  std::vector<std::string> rpcs =
      Split(o.Get("rpcs", "histogram,integral_image,compaction,box_filter"));
  // The commands' aliases are accepted here too (the command table owns them).
  for (std::string& r : rpcs) r = CanonicalCommand(r);
  const std::vector<std::string> sizes = Split(o.Get("sizes", "1,8"));
  const int concurrency = int(o.GetInt("concurrency", 4, 1, 1024));
  const int duration_s = int(o.GetInt("duration-s", 10, 1, 3600));
  // --batch=N: one AnalyzeBatch call of N images, all the --rpcs analyses on each, per request.
  const int batch = int(o.GetInt("batch", 0, 0, 1000));
  google::protobuf::RepeatedPtrField<v1::Analysis> batch_analyses;
  std::string batch_label;
  if (batch > 0) {
    for (const std::string& r : rpcs) {
      if (IsCombined(r)) {
        Die(kExitUsage, fmt::format("--rpcs: {} makes calls of its own and cannot run in "
                                    "--batch={} (histogram, integral_image, compaction, "
                                    "box_filter can)",
                                    r, batch));
      }
      *batch_analyses.Add() = LoadAnalysis(r);
      batch_label += (batch_label.empty() ? "" : "+") + r;
    }
    if (batch_analyses.size() > 64) {
      Die(kExitUsage, fmt::format("--rpcs names {} analyses; --batch runs at most 64 per call",
                                  batch_analyses.size()));
    }
    batch_label = fmt::format("batch {} x {}", batch, batch_label);
  }

  std::vector<Connection> tenant_connections;
  std::vector<Tenant> tenants = ConnectTenants(o, c, &tenant_connections);

  // A second replica on the same shared store: rows for a first call there, which fetches the
  // image from Redis, against a second (cached) call, alternating.
  std::optional<Connection> replica;
  if (o.Has("replica")) {
    Options ro = o;
    ro.server = o.Get("replica");
    replica = Connect(ro);
  }
  v1::ServerInfo info;
  {
    grpc::ClientContext context;
    c.Prepare(&context);
    grpc::Status s = c.stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
    if (!s.ok()) DieRpc("info", s);
  }
  std::string table =
      "| RPC | image | concurrency | requests | errors | requests/s | p50 ms | p99 ms | GPU ms "
      "(p50) | queue ms (p50) | overhead ms (p50) | images/s |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& size : sizes) {
    int width = 1024, height = 1024;
    if (size == "1") {
    } else if (size == "8") {
      width = 4096;
      height = 2048;
    } else {
      Die(kExitUsage, fmt::format("--sizes takes 1 and/or 8 (megapixels), got \"{}\"", size));
    }
    LoadImage image{size, width, height, MakeImage(width, height), {}};
    const std::string& pixels = image.pixels;
    v1::UploadHeader& header = image.header;
    header.mutable_raw()->set_width(uint32_t(width));
    header.mutable_raw()->set_height(uint32_t(height));
    header.mutable_raw()->set_channels(4);
    header.mutable_raw()->set_format(v1::SAMPLE_FORMAT_UINT8);
    header.set_label(fmt::format("load {} MP", size));
    // Each tenant stores its own copy: with access control, tenants see only their own images.
    for (Tenant& t : tenants) {
      v1::UploadImageResponse uploaded;
      grpc::Status s = UploadBytes(*t.conn, pixels, header, &uploaded, false);
      if (!s.ok()) DieRpc("upload of the load image" + t.Label(), s);
      t.id = uploaded.image().image_id();
    }

    if (batch > 0) {
      const LoadCall call = [&](const Tenant& t) {
        return Batch(*t.conn, batch_analyses, batch, t.id);
      };
      for (const Tenant& t : tenants) (void)call(t);  // warm-up
      table += LoadRows(batch_label, call, tenants, image, concurrency, duration_s);
    } else {
      for (const std::string& rpc : rpcs) {
        const LoadCall call = [&](const Tenant& t) {
          return IsCombined(rpc) ? Combined(*t.conn, rpc, pixels, header)
                                 : Call(*t.conn, rpc, t.id);
        };
        for (const Tenant& t : tenants) (void)call(t);  // warm-up
        table += LoadRows(rpc, call, tenants, image, concurrency, duration_s);
      }
    }
    if (replica) table += FirstCalls(c, *replica, pixels, header, size, width, height, duration_s);
    for (const Tenant& t : tenants) DeleteImageQuietly(*t.conn, t.id);
  }

  WriteReport(o, info, concurrency, duration_s, table);
  return kExitOk;
}

}  // namespace glimpse::client
