#include "client/client.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "client/authorization_channel.h"

namespace glimpse::client {

namespace {
std::function<void()>& DieCleanup() {
  static std::function<void()> cleanup;
  return cleanup;
}

}  // namespace

void OnDie(std::function<void()> cleanup) { DieCleanup() = std::move(cleanup); }

void Die(int code, const std::string& message) {
  std::fprintf(stderr, "glimpse: %s\n", message.c_str());
  if (std::function<void()> cleanup = std::exchange(DieCleanup(), nullptr)) cleanup();
  std::exit(code);
}

std::string StatusCodeName(int code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  return code >= 0 && code < int(std::size(kNames)) ? kNames[code] : std::to_string(code);
}

void DieRpc(const std::string& what, const grpc::Status& status) {
  const std::string code = StatusCodeName(int(status.error_code()));
  // The server answered, but its shared image store (Redis) did not: a failed call, not a
  // missing server.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      status.error_message().find("shared image store") != std::string::npos) {
    Die(kExitFailed, fmt::format("{} failed: UNAVAILABLE: {}", what, status.error_message()));
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    Die(kExitUnreachable, fmt::format("{}: server unavailable ({}); is glimpse-server running "
                                      "there? (--server or $GLIMPSE_SERVER)",
                                      what, status.error_message()));
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    Die(kExitUnreachable, fmt::format("{}: no answer within the deadline (--timeout-s): {}", what,
                                      status.error_message()));
  }
  Die(kExitFailed, fmt::format("{} failed: {}: {}", what, code, status.error_message()));
}

std::string Options::Get(const std::string& name, const std::string& fallback) const {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second;
}

int64_t Options::GetInt(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  auto it = flags.find(name);
  if (it == flags.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno == ERANGE || v < min || v > max) {
    Die(kExitUsage,
        fmt::format("--{} must be an integer in [{}, {}], got \"{}\"", name, min, max, it->second));
  }
  return v;
}

double Options::GetDouble(const std::string& name, double fallback) const {
  auto it = flags.find(name);
  if (it == flags.end()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0') {
    Die(kExitUsage, fmt::format("--{} must be a number, got \"{}\"", name, it->second));
  }
  return v;
}

bool Options::GetBool(const std::string& name) const {
  const std::string v = Get(name, "false");
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  Die(kExitUsage, fmt::format("--{} takes no value or true/false, got \"{}\"", name, v));
}

void Connection::Prepare(grpc::ClientContext* context) const {
  if (timeout_s > 0) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  }
  if (!client_key.empty()) context->AddMetadata("glimpse-client-key", client_key);
}

Connection Connect(const Options& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.tls_ca.empty() || !options.tls_cert.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca.empty()) ssl.pem_root_certs = ReadFileOrDie(options.tls_ca);
    if (!options.tls_cert.empty()) {
      ssl.pem_cert_chain = ReadFileOrDie(options.tls_cert);
      ssl.pem_private_key = ReadFileOrDie(options.tls_key);
    }
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  Connection c;
  c.channel = AuthorizationChannel(
      options.server, options.token.empty() ? "" : "Bearer " + options.token, credentials, args);
  c.stub = v1::ImageAnalytics::NewStub(c.channel);
  c.timeout_s = options.timeout_s;
  return c;
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die(kExitLocalIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

v1::Orientation OrientationFlag(const Options& o) {
  const std::string orientation = o.Get("orientation", "file");
  if (orientation == "file") return v1::ORIENTATION_FROM_FILE;
  if (orientation == "stored") return v1::ORIENTATION_AS_STORED;
  Die(kExitUsage, fmt::format("--orientation must be file or stored, got \"{}\"", orientation));
}

void RefuseDecodeFlags(const Options& o, const std::string& what) {
  for (const std::string& flag : kDecodeFlags) {
    if (o.Has(flag)) {
      Die(kExitUsage, fmt::format("--{} applies to encoded files, not {}", flag, what));
    }
  }
}

Progress::Progress(std::string what, uint64_t total)
    : what_(std::move(what)),
      total_(total),
      active_(total >= (8u << 20) && isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void Progress::Update(uint64_t done) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(100) && done < total_) return;
  last_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  const double mib = 1.0 / (1 << 20);
  std::fprintf(stderr, "\r%s %3d%%  %.1f / %.1f MiB  %.1f MiB/s   ", what_.c_str(),
               total_ ? int(100.0 * double(done) / double(total_)) : 100, done * mib, total_ * mib,
               s > 0 ? done * mib / s : 0.0);
  std::fflush(stderr);
}

void Progress::Done() {
  if (!active_) return;
  Update(total_);
  std::fputc('\n', stderr);
  active_ = false;
}

grpc::Status UploadBytes(const Connection& c, const std::string& data, v1::UploadHeader header,
                         v1::UploadImageResponse* response, bool show_progress) {
  grpc::ClientContext context;
  c.Prepare(&context);
  header.set_total_bytes(data.size());
  std::unique_ptr<grpc::ClientWriter<v1::UploadImageRequest>> writer =
      c.stub->UploadImage(&context, response);
  Progress progress("upload", show_progress ? data.size() : 0);
  v1::UploadImageRequest first;
  *first.mutable_header() = std::move(header);
  WriteChunked(*writer, std::move(first), data, progress);
  return writer->Finish();
}

void DeleteImageQuietly(const Connection& c, const std::string& id) {
  grpc::ClientContext context;
  c.Prepare(&context);
  v1::DeleteImageRequest request;
  request.set_image_id(id);
  v1::DeleteImageResponse response;
  (void)c.stub->DeleteImage(&context, request, &response);
}

}  // namespace glimpse::client
