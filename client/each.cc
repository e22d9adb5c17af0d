// `glimpse analyze --each FILE...`: the analyses of `analyze` on every file in one AnalyzeBatch
// call, one row per image and analysis on stdout (CSV, or JSON lines with --json); and RunBatch,
// the AnalyzeBatch call itself, which `glimpse load --batch` runs too.
#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "client/analyses.h"
#include "common/utf8.h"

namespace glimpse::client {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// What one analysis of one image gave, as it builds up from its parts.
struct Row {
  std::vector<std::vector<uint64_t>> counts;  // histogram
  uint32_t width = 0, height = 0, channels = 0;
  std::string sums;    // integral image: the whole image's sums
  uint64_t total = 0;  // compaction
  uint64_t bytes = 0;  // box filter
};

void Take(const v1::AnalyzeResponse& m, Row* row) {
  if (m.has_histogram()) {
    for (const auto& h : m.histogram().histograms()) {
      row->counts.emplace_back(h.counts().begin(), h.counts().end());
    }
  } else if (m.has_integral_image()) {
    const v1::IntegralImageResponse& p = m.integral_image();
    if (p.has_header()) {
      row->width = p.header().width();
      row->height = p.header().height();
      row->channels = p.header().channels();
    }
    // The sum table's last element per channel: the sums over the whole image.
    if (p.has_chunk() && !p.chunk().squared() && p.chunk().y0() + p.chunk().rows() == row->height &&
        p.chunk().data().size() >= row->channels * 8u) {
      const std::string& d = p.chunk().data();
      row->sums.clear();
      for (uint32_t c = 0; c < row->channels; ++c) {
        const char* e = d.data() + d.size() - (row->channels - c) * 8;
        uint64_t v = 0;
        std::memcpy(&v, e, 8);  // little-endian, as the wire says; so are the hosts we build for
        row->sums += fmt::format("{}{}", c ? " " : "", v);
      }
    }
  } else if (m.has_compaction() && m.compaction().has_header()) {
    row->total = m.compaction().header().total();
  } else if (m.has_box_filter() && m.box_filter().has_header()) {
    const v1::ImageInfo& r = m.box_filter().header().result();
    row->width = r.width();
    row->height = r.height();
    row->channels = r.channels();
    row->bytes = m.box_filter().header().data_bytes();
  }
}

std::string Csv(const std::string& name, const Row& r) {
  if (name == "histogram") {
    std::string out;
    for (size_t h = 0; h < r.counts.size(); ++h) {
      out += h ? ";" : "";
      for (size_t i = 0; i < r.counts[h].size(); ++i) {
        out += fmt::format("{}{}", i ? " " : "", r.counts[h][i]);
      }
    }
    return out;
  }
  if (name == "integral_image") return r.sums;
  if (name == "compaction") return std::to_string(r.total);
  return fmt::format("{}x{}x{} {} bytes", r.width, r.height, r.channels, r.bytes);
}

std::string Json(const std::string& name, const Row& r) {
  if (name == "histogram") {
    std::string out = "[";
    for (size_t h = 0; h < r.counts.size(); ++h) {
      out += h ? ",[" : "[";
      for (size_t i = 0; i < r.counts[h].size(); ++i) {
        out += fmt::format("{}{}", i ? "," : "", r.counts[h][i]);
      }
      out += "]";
    }
    return out + "]";
  }
  if (name == "integral_image") {
    std::string sums = r.sums;
    for (char& c : sums) c = c == ' ' ? ',' : c;
    return fmt::format("{{\"width\":{},\"height\":{},\"sums\":[{}]}}", r.width, r.height, sums);
  }
  if (name == "compaction") return fmt::format("{{\"total\":{}}}", r.total);
  return fmt::format("{{\"width\":{},\"height\":{},\"channels\":{},\"bytes\":{}}}", r.width,
                     r.height, r.channels, r.bytes);
}

}  // namespace

grpc::Status RunBatch(const Connection& c,
                      const google::protobuf::RepeatedPtrField<v1::Analysis>& analyses,
                      bool ordered, size_t count,
                      const std::function<void(size_t, v1::BatchImage*)>& image,
                      const std::function<void(const v1::AnalyzeBatchResponse&)>& on_answer) {
  grpc::ClientContext context;
  c.Prepare(&context);
  auto stream = c.stub->AnalyzeBatch(&context);
  // The images are built and sent on their own thread as the server takes them (a file is read
  // only then), while the answers are read here: neither side waits for the other's window.
  std::thread writer([&] {
    v1::AnalyzeBatchRequest first;
    *first.mutable_header()->mutable_analyses() = analyses;
    first.mutable_header()->set_ordered(ordered);
    bool ok = stream->Write(first);
    for (size_t i = 0; ok && i < count; ++i) {
      v1::AnalyzeBatchRequest m;
      image(i, m.mutable_image());
      ok = stream->Write(m);
    }
    stream->WritesDone();
  });
  v1::AnalyzeBatchResponse m;
  while (stream->Read(&m)) on_answer(m);
  writer.join();
  return stream->Finish();
}

int AnalyzeEach(const Options& o, const Connection& c,
                const google::protobuf::RepeatedPtrField<v1::Analysis>& analyses,
                const std::vector<std::string>& names) {
  if (o.positional.empty()) Die(kExitUsage, "analyze --each takes one or more FILEs or ids");
  const bool json = o.GetBool("json");
  if (!json) fmt::print("index,key,analysis,status,result\n");
  std::vector<Row> rows(names.size());
  v1::BatchSummary summary;
  v1::EncodedImage decoding;  // --channels and --orientation, checked before the call
  SetDecoding(o, &decoding);
  const auto image = [&](size_t i, v1::BatchImage* m) {
    const std::string& arg = o.positional[i];
    m->set_key(ValidUtf8(arg));  // a file name in another encoding, as text
    if (LooksLikeId(arg) && !std::filesystem::exists(arg)) {
      m->mutable_image()->set_image_id(arg);
    } else {
      v1::EncodedImage* encoded = m->mutable_image()->mutable_encoded();
      *encoded = decoding;
      encoded->set_data(ReadFileOrDie(arg));
    }
  };
  const auto answer = [&](const v1::AnalyzeBatchResponse& m) {
    if (m.has_summary()) summary = m.summary();
    if (m.has_result() && m.result().index() < rows.size())
      Take(m.result(), &rows[m.result().index()]);
    if (!m.has_end()) return;
    if (m.end().has_error()) {
      const std::string code = StatusCodeName(m.end().error().code());
      if (json) {
        fmt::print("{{\"index\":{},\"key\":{},\"status\":\"{}\",\"error\":{}}}\n", m.index(),
                   JsonString(m.key()), code, JsonString(m.end().error().message()));
      } else {
        fmt::print("{},{},,{},{}\n", m.index(), CsvField(m.key()), code,
                   CsvField(m.end().error().message()));
      }
    } else {
      for (size_t i = 0; i < names.size(); ++i) {
        if (json) {
          fmt::print(
              "{{\"index\":{},\"key\":{},\"analysis\":\"{}\",\"status\":\"OK\",\"result\":{}}}\n",
              m.index(), JsonString(m.key()), names[i], Json(names[i], rows[i]));
        } else {
          fmt::print("{},{},{},OK,{}\n", m.index(), CsvField(m.key()), names[i],
                     CsvField(Csv(names[i], rows[i])));
        }
      }
    }
    rows.assign(names.size(), Row());
  };
  const grpc::Status s = RunBatch(c, analyses, true, o.positional.size(), image, answer);
  if (!s.ok()) DieRpc("analyze --each", s);
  fmt::print(stderr, "analyze --each: {} images, {} failed; server {:.3f} ms, gpu {:.3f} ms\n",
             summary.images(), summary.failed(), summary.timing().server_ns() * 1e-6,
             summary.timing().gpu_ns() * 1e-6);
  return summary.failed() == 0 ? kExitOk : kExitFailed;
}

}  // namespace glimpse::client
