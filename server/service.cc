#include "server/service.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "server/analyses/analyze.h"
#include "server/analyses/batch.h"
#include "server/analyses/box_filter.h"
#include "server/analyses/compaction.h"
#include "server/analyses/histogram.h"
#include "server/analyses/integral_image.h"
#include "server/ingest/image_ref.h"
#include "server/ingest/upload.h"
#include "server/observability/server_info.h"
#include "server/rpc/call.h"
#include "server/store/shared_images.h"

namespace glimpse::server {
namespace {

// The index gRPC's generated service gives the method: its place in the proto's service.
int MethodIndex(std::string_view name) {
  const google::protobuf::ServiceDescriptor* service =
      v1::AnalyzeRequest::descriptor()->file()->FindServiceByName("ImageAnalytics");
  return service->FindMethodByName(std::string(name))->index();
}

}  // namespace

ImageAnalyticsService::ImageAnalyticsService(GpuWorker& worker, const ServiceLimits& limits,
                                             RedisStore* redis, const Access* access,
                                             RateLimiter* rate, CallRecording recording)
    : worker_(worker),
      limits_(limits),
      started_(std::chrono::steady_clock::now()),
      pool_(DecoderThreads(), limits.host_nice),
      env_{worker_, limits_, pool_, redis, access, rate, recording} {
  // What the generated WithRawCallbackMethod_ classes do, with the small responses still typed.
  using grpc::ByteBuffer;
  using grpc::internal::CallbackBidiHandler;
  using grpc::internal::CallbackClientStreamingHandler;
  using grpc::internal::CallbackServerStreamingHandler;
  using grpc::internal::CallbackUnaryHandler;
  using Context = grpc::CallbackServerContext;
  MarkMethodCallback(
      MethodIndex("UploadImage"),
      new CallbackClientStreamingHandler<ByteBuffer, v1::UploadImageResponse>(
          [this](Context* c, v1::UploadImageResponse* r) { return UploadImage(c, r); }));
  MarkMethodCallback(MethodIndex("GetImageInfo"),
                     new CallbackUnaryHandler<ByteBuffer, v1::ImageInfo>(
                         [this](Context* c, const ByteBuffer* q, v1::ImageInfo* r) {
                           return GetImageInfo(c, q, r);
                         }));
  MarkMethodCallback(MethodIndex("ListImages"),
                     new CallbackUnaryHandler<ByteBuffer, v1::ListImagesResponse>(
                         [this](Context* c, const ByteBuffer* q, v1::ListImagesResponse* r) {
                           return ListImages(c, q, r);
                         }));
  MarkMethodCallback(MethodIndex("DeleteImage"),
                     new CallbackUnaryHandler<ByteBuffer, v1::DeleteImageResponse>(
                         [this](Context* c, const ByteBuffer* q, v1::DeleteImageResponse* r) {
                           return DeleteImage(c, q, r);
                         }));
  MarkMethodCallback(MethodIndex("Histogram"),
                     new CallbackUnaryHandler<ByteBuffer, v1::HistogramResponse>(
                         [this](Context* c, const ByteBuffer* q, v1::HistogramResponse* r) {
                           return Histogram(c, q, r);
                         }));
  MarkMethodCallback(MethodIndex("IntegralImage"),
                     new CallbackServerStreamingHandler<ByteBuffer, ByteBuffer>(
                         [this](Context* c, const ByteBuffer* q) { return IntegralImage(c, q); }));
  MarkMethodCallback(MethodIndex("Compact"),
                     new CallbackServerStreamingHandler<ByteBuffer, ByteBuffer>(
                         [this](Context* c, const ByteBuffer* q) { return Compact(c, q); }));
  MarkMethodCallback(MethodIndex("BoxFilter"),
                     new CallbackServerStreamingHandler<ByteBuffer, ByteBuffer>(
                         [this](Context* c, const ByteBuffer* q) { return BoxFilter(c, q); }));
  MarkMethodCallback(MethodIndex("Analyze"), new CallbackBidiHandler<ByteBuffer, ByteBuffer>(
                                                 [this](Context* c) { return Analyze(c); }));
  MarkMethodCallback(MethodIndex("AnalyzeBatch"),
                     new CallbackBidiHandler<ByteBuffer, ByteBuffer>(
                         [this](Context* c) { return AnalyzeBatch(c); }));
  MarkMethodCallback(MethodIndex("GetServerInfo"),
                     new CallbackUnaryHandler<ByteBuffer, v1::ServerInfo>(
                         [this](Context* c, const ByteBuffer* q, v1::ServerInfo* r) {
                           return GetServerInfo(c, q, r);
                         }));
}

ImageAnalyticsService::~ImageAnalyticsService() = default;

grpc::ServerReadReactor<grpc::ByteBuffer>* ImageAnalyticsService::UploadImage(
    grpc::CallbackServerContext* context, v1::UploadImageResponse* response) {
  return ServeUpload(env_, context, response);
}

grpc::ServerUnaryReactor* ImageAnalyticsService::Histogram(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           v1::HistogramResponse* response) {
  return ServeUnary<HistogramAnalysis>(env_, context, *request, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ImageAnalyticsService::IntegralImage(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return ServeStream<IntegralImageAnalysis>(env_, context, *request);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ImageAnalyticsService::Compact(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return ServeStream<CompactionAnalysis>(env_, context, *request);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ImageAnalyticsService::BoxFilter(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return ServeStream<BoxFilterAnalysis>(env_, context, *request);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ImageAnalyticsService::Analyze(
    grpc::CallbackServerContext* context) {
  return ServeAnalyze(env_, context);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ImageAnalyticsService::AnalyzeBatch(
    grpc::CallbackServerContext* context) {
  return ServeAnalyzeBatch(env_, context);
}

// ---- the store's catalogue: any thread, no GPU work ----------------------------------------

grpc::ServerUnaryReactor* ImageAnalyticsService::GetImageInfo(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* wire,
                                                              v1::ImageInfo* response) {
  auto* call = new UnaryCall("GetImageInfo");
  absl::StatusOr<const v1::GetImageInfoRequest*> request =
      AdmitRequest<v1::GetImageInfoRequest>(env_, context, *call, *wire);
  if (!request.ok()) return call->Answer(request.status()), call;
  call->record.set_image((*request)->image_id());
  ImageInfoOf(env_, (*request)->image_id(), call->record.tenant(),
              [call, response](absl::StatusOr<StoredImageInfo> info) {
                if (info.ok()) FillInfo(*info, response);
                call->Answer(info.status());
              });
  return call;
}

grpc::ServerUnaryReactor* ImageAnalyticsService::ListImages(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* wire,
                                                            v1::ListImagesResponse* response) {
  auto* call = new UnaryCall("ListImages");
  absl::StatusOr<const v1::ListImagesRequest*> request =
      AdmitRequest<v1::ListImagesRequest>(env_, context, *call, *wire);
  if (!request.ok()) return call->Answer(request.status()), call;
  ListAllImages(env_, call->record.tenant(),
                [this, call, response](absl::StatusOr<std::vector<StoredImageInfo>> list) {
                  if (!list.ok()) return call->Answer(list.status());
                  uint64_t bytes = 0;
                  for (const StoredImageInfo& info : *list) {
                    FillInfo(info, response->add_images());
                    bytes += info.bytes;
                  }
                  response->set_stored_bytes(bytes);
                  // A tenant's budget is its share, when there is one.
                  const uint64_t share = worker_.store().tenant_budget();
                  response->set_budget_bytes(share > 0 ? std::min(share, worker_.store().budget())
                                                       : worker_.store().budget());
                  call->Answer(absl::OkStatus());
                });
  return call;
}

grpc::ServerUnaryReactor* ImageAnalyticsService::DeleteImage(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* wire,
                                                             v1::DeleteImageResponse* response) {
  auto* call = new UnaryCall("DeleteImage");
  absl::StatusOr<const v1::DeleteImageRequest*> request =
      AdmitRequest<v1::DeleteImageRequest>(env_, context, *call, *wire);
  if (!request.ok()) return call->Answer(request.status()), call;
  call->record.set_image((*request)->image_id());
  DeleteEverywhere(env_, (*request)->image_id(), call->record.tenant(),
                   [call, response](absl::StatusOr<uint64_t> freed) {
                     if (freed.ok()) response->set_freed_bytes(*freed);
                     call->Answer(freed.status());
                   });
  return call;
}

grpc::ServerUnaryReactor* ImageAnalyticsService::GetServerInfo(grpc::CallbackServerContext* context,
                                                               const grpc::ByteBuffer* wire,
                                                               v1::ServerInfo* response) {
  auto* call = new UnaryCall("GetServerInfo");
  absl::StatusOr<const v1::GetServerInfoRequest*> request =
      AdmitRequest<v1::GetServerInfoRequest>(env_, context, *call, *wire);
  if (!request.ok()) return call->Answer(request.status()), call;
  FillServerInfo(worker_, limits_, env_.redis, env_.access, env_.rate,
                 std::chrono::steady_clock::now() - started_, response);
  call->Answer(absl::OkStatus());
  return call;
}

}  // namespace glimpse::server
