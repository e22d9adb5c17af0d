// The ImageAnalytics service: each RPC handed to the runner with its analysis
// (server/analyses/runner.h), or answered from the image store's catalogue.
//
//   absl::StatusOr<std::unique_ptr<GpuWorker>> worker = GpuWorker::Start(WorkerOptions{});
//   if (!worker.ok()) return worker.status();
//   ImageAnalyticsService service(**worker, ServiceLimits{});  // no Redis, access or rate limit
//   grpc::ServerBuilder builder;
//   builder.RegisterService(&service);
#ifndef GLIMPSE_SERVER_SERVICE_H_
#define GLIMPSE_SERVER_SERVICE_H_

#include <chrono>

#include "glimpse/v1/image_analytics.grpc.pb.h"
#include "server/analyses/runner.h"
#include "server/rpc/call.h"
#include "server/rpc/limits.h"
#include "server/worker/gpu_worker.h"
#include "server/worker/host_pool.h"

namespace glimpse::server {

// Every method is registered by the service itself (the constructor), with its requests as raw
// bytes that it parses (ParseMessage, server/rpc/wire.h), so a request that does not parse is
// refused with what is wrong with it rather than gRPC's bare UNIMPLEMENTED. The streaming
// analyses (IntegralImage, Compact, BoxFilter, Analyze, AnalyzeBatch) send raw-bytes responses
// too, encoded without copying their tables and pixels. Clients see the same protobuf messages.
class ImageAnalyticsService final : public v1::ImageAnalytics::Service {
 public:
  // `redis`: the shared image store, or nullptr (each replica keeps its own images). `access`:
  // who may call (server/access/access.h), or nullptr for anyone.
  // `rate`: the per-tenant rate limit, or nullptr for none. `recording`: kNone for a service
  // whose callers are not users (the start-up's sample calls).
  ImageAnalyticsService(GpuWorker& worker, const ServiceLimits& limits, RedisStore* redis = nullptr,
                        const Access* access = nullptr, RateLimiter* rate = nullptr,
                        CallRecording recording = CallRecording::kLogAndCount);
  ~ImageAnalyticsService() override;

  // The generated synchronous methods of the same names stay unused; named here, they are not
  // hidden by these.
  using Service::Analyze;
  using Service::AnalyzeBatch;
  using Service::BoxFilter;
  using Service::Compact;
  using Service::DeleteImage;
  using Service::GetImageInfo;
  using Service::GetServerInfo;
  using Service::Histogram;
  using Service::IntegralImage;
  using Service::ListImages;
  using Service::UploadImage;

  // Each `request` is the message's bytes as received.
  grpc::ServerReadReactor<grpc::ByteBuffer>* UploadImage(grpc::CallbackServerContext* context,
                                                         v1::UploadImageResponse* response);
  grpc::ServerUnaryReactor* GetImageInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request, v1::ImageInfo* response);
  grpc::ServerUnaryReactor* ListImages(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       v1::ListImagesResponse* response);
  grpc::ServerUnaryReactor* DeleteImage(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        v1::DeleteImageResponse* response);
  grpc::ServerUnaryReactor* Histogram(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      v1::HistogramResponse* response);
  grpc::ServerWriteReactor<grpc::ByteBuffer>* IntegralImage(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request);
  // The compaction analysis.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Compact(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request);
  grpc::ServerWriteReactor<grpc::ByteBuffer>* BoxFilter(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request);
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Analyze(
      grpc::CallbackServerContext* context);
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* AnalyzeBatch(
      grpc::CallbackServerContext* context);
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          v1::ServerInfo* response);

  GpuWorker& worker() { return worker_; }
  const ServiceLimits& limits() const { return limits_; }

 private:
  GpuWorker& worker_;
  const ServiceLimits limits_;
  const std::chrono::steady_clock::time_point started_;
  HostPool pool_;
  ServiceEnv env_;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_SERVICE_H_
