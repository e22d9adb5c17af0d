// The ImageAnalytics service: each handler turns its request into a job on the GPU worker's queue
// and answers when the job is done.
#ifndef GLIMPSE_SERVER_SERVICE_H_
#define GLIMPSE_SERVER_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "glimpse/v1/image_analytics.grpc.pb.h"
#include "server/gpu_worker.h"
#include "server/host_pool.h"

namespace glimpse::server {

struct ServiceLimits {
  uint64_t max_image_pixels = uint64_t{1} << 28;
  uint64_t max_upload_bytes = uint64_t{1} << 30;
  uint64_t max_message_bytes = uint64_t{4} << 20;
  // Result bytes a stream may hold waiting for a slow client before its producer waits.
  size_t stream_buffer_bytes = size_t{32} << 20;
  // Size of the data in one streamed result message.
  size_t chunk_bytes = size_t{1} << 20;
};

class ImageAnalyticsService final : public v1::ImageAnalytics::CallbackService {
 public:
  ImageAnalyticsService(GpuWorker& worker, const ServiceLimits& limits);
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
  grpc::ServerWriteReactor<v1::IntegralImageResponse>* IntegralImage(
      grpc::CallbackServerContext* context, const v1::IntegralImageRequest* request) override;
  grpc::ServerWriteReactor<v1::CompactResponse>* Compact(
      grpc::CallbackServerContext* context, const v1::CompactRequest* request) override;
  grpc::ServerWriteReactor<v1::BoxFilterResponse>* BoxFilter(
      grpc::CallbackServerContext* context, const v1::BoxFilterRequest* request) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::GetServerInfoRequest* request,
                                          v1::ServerInfo* response) override;

  GpuWorker& worker() { return worker_; }
  const ServiceLimits& limits() const { return limits_; }
  HostPool& pool() { return pool_; }

 private:
  GpuWorker& worker_;
  const ServiceLimits limits_;
  const std::chrono::steady_clock::time_point started_;
  HostPool pool_;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_SERVICE_H_
