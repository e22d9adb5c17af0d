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
                                             RateLimiter* rate)
    : worker_(worker),
      limits_(limits),
      started_(std::chrono::steady_clock::now()),
      pool_(DecoderThreads(), limits.host_nice),
      env_{worker_, limits_, pool_, redis, access, rate} {
  // What the generated WithRawCallbackMethod_ classes do, with the request still typed.
  using grpc::internal::CallbackBidiHandler;
  using grpc::internal::CallbackServerStreamingHandler;
  using Context = grpc::CallbackServerContext;
  MarkMethodCallback(
      MethodIndex("IntegralImage"),
      new CallbackServerStreamingHandler<v1::IntegralImageRequest, grpc::ByteBuffer>(
          [this](Context* c, const v1::IntegralImageRequest* r) { return IntegralImage(c, r); }));
  MarkMethodCallback(
      MethodIndex("Compact"),
      new CallbackServerStreamingHandler<v1::CompactRequest, grpc::ByteBuffer>(
          [this](Context* c, const v1::CompactRequest* r) { return Compact(c, r); }));
  MarkMethodCallback(
      MethodIndex("BoxFilter"),
      new CallbackServerStreamingHandler<v1::BoxFilterRequest, grpc::ByteBuffer>(
          [this](Context* c, const v1::BoxFilterRequest* r) { return BoxFilter(c, r); }));
  MarkMethodCallback(MethodIndex("Analyze"),
                     new CallbackBidiHandler<v1::AnalyzeRequest, grpc::ByteBuffer>(
                         [this](Context* c) { return Analyze(c); }));
  MarkMethodCallback(MethodIndex("AnalyzeBatch"),
                     new CallbackBidiHandler<v1::AnalyzeBatchRequest, grpc::ByteBuffer>(
                         [this](Context* c) { return AnalyzeBatch(c); }));
}

ImageAnalyticsService::~ImageAnalyticsService() = default;

grpc::ServerReadReactor<v1::UploadImageRequest>* ImageAnalyticsService::UploadImage(
    grpc::CallbackServerContext* context, v1::UploadImageResponse* response) {
  return ServeUpload(env_, context, response);
}

grpc::ServerUnaryReactor* ImageAnalyticsService::Histogram(grpc::CallbackServerContext* context,
                                                           const v1::HistogramRequest* request,
                                                           v1::HistogramResponse* response) {
  return ServeUnary<HistogramAnalysis>(env_, context, request, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ImageAnalyticsService::IntegralImage(
    grpc::CallbackServerContext* context, const v1::IntegralImageRequest* request) {
  return ServeStream<IntegralImageAnalysis>(env_, context, request);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ImageAnalyticsService::Compact(
    grpc::CallbackServerContext* context, const v1::CompactRequest* request) {
  return ServeStream<CompactionAnalysis>(env_, context, request);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ImageAnalyticsService::BoxFilter(
    grpc::CallbackServerContext* context, const v1::BoxFilterRequest* request) {
  return ServeStream<BoxFilterAnalysis>(env_, context, request);
}

grpc::ServerBidiReactor<v1::AnalyzeRequest, grpc::ByteBuffer>* ImageAnalyticsService::Analyze(
    grpc::CallbackServerContext* context) {
  return ServeAnalyze(env_, context);
}

grpc::ServerBidiReactor<v1::AnalyzeBatchRequest, grpc::ByteBuffer>*
ImageAnalyticsService::AnalyzeBatch(grpc::CallbackServerContext* context) {
  return ServeAnalyzeBatch(env_, context);
}

// ---- the store's catalogue: any thread, no GPU work ----------------------------------------

grpc::ServerUnaryReactor* ImageAnalyticsService::GetImageInfo(
    grpc::CallbackServerContext* context, const v1::GetImageInfoRequest* request,
    v1::ImageInfo* response) {
  auto* call = new UnaryCall("GetImageInfo");
  if (absl::Status s = Admit(env_, context, call->record); !s.ok()) return call->Answer(s), call;
  call->record.set_image(request->image_id());
  ImageInfoOf(env_, request->image_id(), call->record.tenant(),
              [call, response](absl::StatusOr<StoredImageInfo> info) {
                if (info.ok()) FillInfo(*info, response);
                call->Answer(info.status());
              });
  return call;
}

grpc::ServerUnaryReactor* ImageAnalyticsService::ListImages(grpc::CallbackServerContext* context,
                                                            const v1::ListImagesRequest*,
                                                            v1::ListImagesResponse* response) {
  auto* call = new UnaryCall("ListImages");
  if (absl::Status s = Admit(env_, context, call->record); !s.ok()) return call->Answer(s), call;
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
                                                             const v1::DeleteImageRequest* request,
                                                             v1::DeleteImageResponse* response) {
  auto* call = new UnaryCall("DeleteImage");
  if (absl::Status s = Admit(env_, context, call->record); !s.ok()) return call->Answer(s), call;
  call->record.set_image(request->image_id());
  DeleteEverywhere(env_, request->image_id(), call->record.tenant(),
                   [call, response](absl::StatusOr<uint64_t> freed) {
                     if (freed.ok()) response->set_freed_bytes(*freed);
                     call->Answer(freed.status());
                   });
  return call;
}

grpc::ServerUnaryReactor* ImageAnalyticsService::GetServerInfo(grpc::CallbackServerContext* context,
                                                               const v1::GetServerInfoRequest*,
                                                               v1::ServerInfo* response) {
  auto* call = new UnaryCall("GetServerInfo");
  if (absl::Status s = Admit(env_, context, call->record); !s.ok()) return call->Answer(s), call;
  FillServerInfo(worker_, limits_, env_.redis, env_.access, env_.rate,
                 std::chrono::steady_clock::now() - started_, response);
  call->Answer(absl::OkStatus());
  return call;
}

}  // namespace glimpse::server
