// Helpers of the service tests: a real server on an ephemeral port, stubs, images, uploads.
#ifndef GLIMPSE_TESTS_SERVICE_SERVICE_TEST_UTIL_H_
#define GLIMPSE_TESTS_SERVICE_SERVICE_TEST_UTIL_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "glimpse/v1/image_analytics.grpc.pb.h"
#include "gpu/image.h"
#include "server/server.h"
#include "tests/gpu_test_env.h"

namespace glimpse::testing {

inline bool RequireGpuContext() {
  const char* v = std::getenv("GLIMPSE_REQUIRE_GPU_CONTEXT");
  return v != nullptr && std::string(v) == "1";
}

// A server for one test suite, listening on 127.0.0.1:<ephemeral>.
struct TestServer {
  std::unique_ptr<server::GlimpseServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ImageAnalytics::Stub> stub;
  std::string error;  // why it could not start

  // Without a warm-up unless asked, and each program built when a call first needs it unless
  // asked: the tests start servers by the hundred (building every program took 1.8-2.4 s of each
  // start under the sanitizers). The warm-up tests and the server binary's tests build them all
  // at start, as users' servers do.
  static std::unique_ptr<TestServer> Start(server::ServerOptions options, bool warm_up = false,
                                           bool build_programs = false) {
    auto t = std::make_unique<TestServer>();
    options.listen = "127.0.0.1:0";
    options.worker.device = "auto";
    options.worker.warm_up = warm_up;
    options.worker.build_programs = build_programs;
    absl::StatusOr<std::unique_ptr<server::GlimpseServer>> s =
        server::GlimpseServer::Start(options);
    if (!s.ok()) {
      t->error = std::string(s.status().message().data(), s.status().message().size());
      return t;
    }
    t->server = *std::move(s);
    // Default client limits (4 MiB per message): large results must arrive in chunks.
    t->channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(t->server->port()),
                                     grpc::InsecureChannelCredentials());
    t->stub = v1::ImageAnalytics::NewStub(t->channel);
    return t;
  }
};

// Server reflection's list of services, spoken by hand (Debian ships the reflection library but
// not its .proto): ServerReflectionRequest{list_services: "*"}; the answer's raw bytes.
inline absl::StatusOr<std::string> ListServicesByReflection(
    const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub generic(channel);
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  auto call = generic.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](const char* what) {
    return cq.Next(&tag, &ok) && ok ? absl::OkStatus()
                                    : absl::UnavailableError(std::string("reflection: ") + what);
  };
  std::string answer;
  absl::Status status = [&] {
    call->StartCall(reinterpret_cast<void*>(1));
    if (absl::Status s = step("start"); !s.ok()) return s;
    const std::string request("\x3a\x01*", 3);  // field 7 (list_services), string "*"
    grpc::Slice slice(request);
    grpc::ByteBuffer out(&slice, 1);
    call->Write(out, reinterpret_cast<void*>(2));
    if (absl::Status s = step("write"); !s.ok()) return s;
    grpc::ByteBuffer in;
    call->Read(&in, reinterpret_cast<void*>(3));
    if (absl::Status s = step("read"); !s.ok()) return s;
    std::vector<grpc::Slice> slices;
    if (!in.Dump(&slices).ok()) return absl::InternalError("reflection: unreadable answer");
    for (const grpc::Slice& sl : slices) {
      answer.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    }
    call->WritesDone(reinterpret_cast<void*>(4));
    cq.Next(&tag, &ok);
    grpc::Status finish;
    call->Finish(&finish, reinterpret_cast<void*>(5));
    cq.Next(&tag, &ok);
    return finish.ok() ? absl::OkStatus()
                       : absl::UnavailableError("reflection: " + finish.error_message());
  }();
  ctx.TryCancel();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) return status;
  return answer;
}

// Skips (or fails, with GLIMPSE_REQUIRE_GPU_CONTEXT=1) when the server could not open a context.
#define GLIMPSE_REQUIRE_SERVER(ts)                                               \
  if ((ts) == nullptr || (ts)->server == nullptr) {                              \
    const std::string why = (ts) ? (ts)->error : std::string("not started");     \
    if (::glimpse::testing::RequireGpuContext()) FAIL() << "no server: " << why; \
    GTEST_SKIP() << "no server (no EGL context?): " << why;                      \
  }

inline v1::SampleFormat ProtoFormat(gpu::SampleType t) {
  switch (t) {
    case gpu::SampleType::kUint8:
      return v1::SAMPLE_FORMAT_UINT8;
    case gpu::SampleType::kUint16:
      return v1::SAMPLE_FORMAT_UINT16;
    case gpu::SampleType::kFloat32:
      return v1::SAMPLE_FORMAT_FLOAT32;
  }
  return v1::SAMPLE_FORMAT_UNSPECIFIED;
}

inline v1::ImageLayout Layout(const gpu::ImageDesc& d) {
  v1::ImageLayout l;
  l.set_width(uint32_t(d.width));
  l.set_height(uint32_t(d.height));
  l.set_channels(uint32_t(d.channels));
  l.set_format(ProtoFormat(d.type));
  return l;
}

inline v1::ImageRef InlineRaw(const gpu::HostImage& img) {
  v1::ImageRef ref;
  *ref.mutable_raw()->mutable_layout() = Layout(img.desc);
  ref.mutable_raw()->set_data(img.data.data(), img.data.size());
  return ref;
}

inline v1::ImageRef ById(const std::string& id) {
  v1::ImageRef ref;
  ref.set_image_id(id);
  return ref;
}

// An asynchronous Histogram call (callback API) on `image` whose status arrives in a future; the
// destructor waits for it.
struct AsyncHistogram {
  grpc::ClientContext ctx;
  v1::HistogramRequest req;
  v1::HistogramResponse resp;
  std::promise<grpc::Status> done;
  std::future<grpc::Status> status = done.get_future();

  AsyncHistogram(v1::ImageAnalytics::Stub& stub, v1::ImageRef image,
                 std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    *req.mutable_image() = std::move(image);
    if (timeout) ctx.set_deadline(std::chrono::system_clock::now() + *timeout);
    stub.async()->Histogram(&ctx, &req, &resp, [this](grpc::Status s) { done.set_value(s); });
  }
  ~AsyncHistogram() {
    if (status.valid()) status.wait();
  }
};

// Uploads `bytes` in chunks of `chunk` bytes with `header` in the first message.
inline grpc::Status UploadRaw(v1::ImageAnalytics::Stub& stub, const v1::UploadHeader& header,
                              const std::string& bytes, v1::UploadImageResponse* response,
                              size_t chunk = 64 << 10) {
  grpc::ClientContext ctx;
  auto writer = stub.UploadImage(&ctx, response);
  v1::UploadImageRequest first;
  *first.mutable_header() = header;
  size_t off = std::min(chunk, bytes.size());
  first.set_chunk(bytes.substr(0, off));
  bool ok = writer->Write(first);
  while (ok && off < bytes.size()) {
    v1::UploadImageRequest m;
    m.set_chunk(bytes.substr(off, chunk));
    off += chunk;
    ok = writer->Write(m);
  }
  writer->WritesDone();
  return writer->Finish();
}

// Occupies the worker until Release(); returns once the blocking job is running.
class WorkerBlocker {
 public:
  explicit WorkerBlocker(server::GpuWorker& worker) {
    std::promise<void> started;
    std::future<void> running = started.get_future();
    server::Job job;
    job.method = "test blocker";
    job.run = [this, &started](server::GpuEnv&, server::Lease, std::chrono::nanoseconds) {
      started.set_value();
      release_.get_future().wait();
    };
    job.drop = [](const absl::Status&) {};
    EXPECT_TRUE(worker.Enqueue(std::move(job)).ok());
    running.wait();
  }
  ~WorkerBlocker() { Release(); }
  void Release() {
    if (!released_) release_.set_value();
    released_ = true;
  }

 private:
  std::promise<void> release_;
  bool released_ = false;
};

inline bool ServerIsSoftware(v1::ImageAnalytics::Stub& stub) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  return stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok() && info.software();
}

// The memory a stored image holds (ImageInfo.bytes): its pixels, plus on CPU renderers the packed
// copy that their kernels read (gpu::Image).
inline uint64_t StoredBytes(const gpu::ImageDesc& d, bool software) {
  return d.bytes() + (software ? uint64_t(gpu::PackedTexelsPerRow(d)) * 16 * d.height : 0);
}

inline std::string Bytes(const gpu::HostImage& img) {
  return std::string(reinterpret_cast<const char*>(img.data.data()), img.data.size());
}

// A vector's bytes, to compare with a result's bytes field.
template <typename T>
std::string AsBytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

inline absl::StatusOr<std::string> UploadImage(v1::ImageAnalytics::Stub& stub,
                                               const gpu::HostImage& img) {
  v1::UploadHeader header;
  *header.mutable_raw() = Layout(img.desc);
  v1::UploadImageResponse response;
  grpc::Status s = UploadRaw(stub, header, Bytes(img), &response);
  if (!s.ok()) return absl::InternalError(s.error_message());
  return response.image().image_id();
}

}  // namespace glimpse::testing

#endif  // GLIMPSE_TESTS_SERVICE_SERVICE_TEST_UTIL_H_
