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
#include "server/rpc/limits.h"
#include "server/worker/gpu_worker.h"
#include "server/worker/host_pool.h"

namespace glimpse::server {

// The methods whose responses are small, with gRPC's own protobuf serialization. The streaming
// analyses (IntegralImage, Compact, BoxFilter, Analyze, AnalyzeBatch) are registered by the
// service itself with the same request types and raw-bytes responses, encoded without copying
// their tables and pixels (server/rpc/wire.h); clients see the same protobuf messages.
using TypedMethods = v1::ImageAnalytics::WithCallbackMethod_UploadImage<
    v1::ImageAnalytics::WithCallbackMethod_GetImageInfo<
        v1::ImageAnalytics::WithCallbackMethod_ListImages<
            v1::ImageAnalytics::WithCallbackMethod_DeleteImage<
                v1::ImageAnalytics::WithCallbackMethod_Histogram<
                    v1::ImageAnalytics::WithCallbackMethod_GetServerInfo<
                        v1::ImageAnalytics::Service>>>>>>;

class ImageAnalyticsService final : public TypedMethods {
 public:
  // `redis`: the shared image store, or nullptr (each replica keeps its own images). `access`:
  // who may call (server/access/access.h), or nullptr for anyone.
  // `rate`: the per-tenant rate limit, or nullptr for none.
  ImageAnalyticsService(GpuWorker& worker, const ServiceLimits& limits, RedisStore* redis = nullptr,
                        const Access* access = nullptr, RateLimiter* rate = nullptr);
  ~ImageAnalyticsService() override;

  grpc::ServerReadReactor<v1::UploadImageRequest>* UploadImage(
      grpc::CallbackServerContext* context, v1::UploadImageResponse* response) override;
  grpc::ServerUnaryReactor* GetImageInfo(grpc::CallbackServerContext* context,
                                         const v1::GetImageInfoRequest* request,
                                         v1::ImageInfo* response) override;
  grpc::ServerUnaryReactor* ListImages(grpc::CallbackServerContext* context,
                                       const v1::ListImagesRequest* request,
                                       v1::ListImagesResponse* response) override;
  grpc::ServerUnaryReactor* DeleteImage(grpc::CallbackServerContext* context,
                                        const v1::DeleteImageRequest* request,
                                        v1::DeleteImageResponse* response) override;
  grpc::ServerUnaryReactor* Histogram(grpc::CallbackServerContext* context,
                                      const v1::HistogramRequest* request,
                                      v1::HistogramResponse* response) override;
  // The streaming analyses, registered in the constructor with raw-bytes responses. (The
  // generated synchronous forms of the same names stay unused; named here, they are not hidden.)
  using TypedMethods::Analyze;
  using TypedMethods::AnalyzeBatch;
  using TypedMethods::BoxFilter;
  using TypedMethods::Compact;
  using TypedMethods::IntegralImage;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* IntegralImage(
      grpc::CallbackServerContext* context, const v1::IntegralImageRequest* request);
  // The compaction analysis.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Compact(grpc::CallbackServerContext* context,
                                                      const v1::CompactRequest* request);
  grpc::ServerWriteReactor<grpc::ByteBuffer>* BoxFilter(grpc::CallbackServerContext* context,
                                                        const v1::BoxFilterRequest* request);
  grpc::ServerBidiReactor<v1::AnalyzeRequest, grpc::ByteBuffer>* Analyze(
      grpc::CallbackServerContext* context);
  grpc::ServerBidiReactor<v1::AnalyzeBatchRequest, grpc::ByteBuffer>* AnalyzeBatch(
      grpc::CallbackServerContext* context);
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::GetServerInfoRequest* request,
                                          v1::ServerInfo* response) override;

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
