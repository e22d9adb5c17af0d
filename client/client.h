// Shared pieces of the glimpse CLI: options, exit codes, the connection.
#ifndef GLIMPSE_CLIENT_CLIENT_H_
#define GLIMPSE_CLIENT_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "glimpse/v1/image_analytics.grpc.pb.h"

namespace glimpse::client {

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;       // the server answered with an error, or not SERVING
inline constexpr int kExitUsage = 2;        // bad command line
inline constexpr int kExitUnreachable = 3;  // no server at the address (or it timed out)
inline constexpr int kExitLocalIo = 4;      // a local file could not be read or written

// Prints "glimpse: <message>" to stderr, runs the clean-up set by OnDie, and exits with `code`.
[[noreturn]] void Die(int code, const std::string& message);
// Sets what Die runs before exiting (a temporary upload to delete); nullptr clears it.
void OnDie(std::function<void()> cleanup);
// Dies with the exit code that fits the status, naming the call.
// "INVALID_ARGUMENT" for 3, ...: a gRPC status code by its name (the number if unknown).
std::string StatusCodeName(int code);
[[noreturn]] void DieRpc(const std::string& what, const grpc::Status& status);

struct Options {
  std::string server = "localhost:50051";
  std::string tls_ca;
  std::string tls_cert, tls_key;  // client certificate and key (PEM files) for mutual TLS
  std::string token;              // bearer token sent with every call; "" = none
  int timeout_s = 300;
  std::string command;
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;  // --name=value after the command ("true" if bare)
  // The same flags in command-line order, repeats kept (analyze runs its analyses in this order).
  std::vector<std::pair<std::string, std::string>> ordered;

  bool Has(const std::string& name) const { return flags.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  int64_t GetInt(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;
  double GetDouble(const std::string& name, double fallback) const;
  bool GetBool(const std::string& name) const;
};

struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ImageAnalytics::Stub> stub;
  int timeout_s = 0;
  // Sent as `glimpse-client-key` metadata: who the server's fair scheduler counts the calls to
  // where access control is off (docs/scheduler.md); "" = none (the peer address counts).
  std::string client_key;
  // A context with the call deadline (none when timeout_s is 0) and the client key.
  void Prepare(grpc::ClientContext* context) const;
};

Connection Connect(const Options& options);

// The file's bytes, or Die(kExitLocalIo).
std::string ReadFileOrDie(const std::string& path);

// The flags of SetDecoding, which every command that takes a file accepts.
inline const std::set<std::string> kDecodeFlags = {"channels", "orientation"};
// How an encoded file is decoded: --channels (0: as stored, 1-4: converted) and --orientation
// (file: turned as its EXIF tag says, the default; stored), set on an EncodedImage (a file sent
// inline) or an EncodedUpload (one streamed); Die(kExitUsage) on a bad value.
v1::Orientation OrientationFlag(const Options& o);
template <typename Encoded>
void SetDecoding(const Options& o, Encoded* encoded) {
  encoded->set_desired_channels(uint32_t(o.GetInt("channels", 0, 0, 4)));
  encoded->set_orientation(OrientationFlag(o));
}
// Dies when --channels or --orientation is given for an image that is not an encoded file
// (`what`: "the stored image 0123...", "raw pixels").
void RefuseDecodeFlags(const Options& o, const std::string& what);

// Progress on stderr for long transfers when stderr is a terminal.
class Progress {
 public:
  Progress(std::string what, uint64_t total);
  void Update(uint64_t done);
  void Done();

 private:
  std::string what_;
  uint64_t total_;
  bool active_;
  std::chrono::steady_clock::time_point start_, last_;
};

// Sends `first` (the call's header message) carrying the first 1 MiB of `data`, then the rest in
// 1 MiB chunk messages, reporting to `progress`; stops at the first failed write (the call's
// Finish says why), then WritesDone. For the upload streams: UploadImage and Analyze.
template <typename Request, typename Writer>
void WriteChunked(Writer& writer, Request first, const std::string& data, Progress& progress) {
  constexpr size_t kChunk = 1 << 20;
  size_t off = std::min(kChunk, data.size());
  first.set_chunk(data.data(), off);
  bool ok = writer.Write(first);
  while (ok && off < data.size()) {
    const size_t n = std::min(kChunk, data.size() - off);
    Request m;
    m.set_chunk(data.data() + off, n);
    ok = writer.Write(m);
    off += n;
    progress.Update(off);
  }
  progress.Done();
  writer.WritesDone();
}

// Uploads `data` (an encoded file, or raw pixels when header has raw set) in 1 MiB chunks.
grpc::Status UploadBytes(const Connection& c, const std::string& data, v1::UploadHeader header,
                         v1::UploadImageResponse* response, bool show_progress);

// Deletes an image this client stored for its own use (a temporary upload, a load test's image),
// whatever the answer: the command's result does not depend on it.
void DeleteImageQuietly(const Connection& c, const std::string& id);

// The load mode: `glimpse load ...`.
int RunLoad(const Options& options, const Connection& c);

}  // namespace glimpse::client

#endif  // GLIMPSE_CLIENT_CLIENT_H_
