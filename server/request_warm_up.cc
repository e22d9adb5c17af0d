#include "server/request_warm_up.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "common/str.h"
#include "glimpse/v1/image_analytics.grpc.pb.h"
#include "gpu/image.h"
#include "server/ingest/image_codec.h"
#include "server/service.h"
#include "server/worker/job_class.h"

namespace glimpse::server {
namespace {

// The sample images: a 1080p photo's shape in RGB (the largest a call is likely to bring, so the
// memory that smaller ones use is touched too) and a 640x480 grey one; smooth gradients with
// hashed noise, so that compaction keeps part of the pixels, as on a photo.
struct Sample {
  int width, height, channels;
};
constexpr Sample kSamples[] = {{1920, 1080, 3}, {640, 480, 1}};

gpu::HostImage SampleImage(const Sample& s) {
  gpu::HostImage image =
      gpu::HostImage::Zeros({.width = s.width, .height = s.height, .channels = s.channels});
  uint8_t* p = image.data.data();
  for (int y = 0; y < s.height; ++y) {
    for (int x = 0; x < s.width; ++x) {
      for (int c = 0; c < s.channels; ++c) {
        uint32_t h =
            (uint32_t(x) * 73856093u) ^ (uint32_t(y) * 19349663u) ^ (uint32_t(c) * 83492791u);
        h ^= h >> 13;
        h *= 0x5bd1e995u;
        const int v = (x * 255 / s.width + y * 255 / s.height) / 2 + int(h >> 28) - 8 + c * 20;
        *p++ = uint8_t(std::clamp(v, 0, 255));
      }
    }
  }
  return image;
}

v1::ImageRef RawRef(const gpu::HostImage& image) {
  v1::ImageRef ref;
  v1::RawImage& raw = *ref.mutable_raw();
  raw.mutable_layout()->set_width(uint32_t(image.desc.width));
  raw.mutable_layout()->set_height(uint32_t(image.desc.height));
  raw.mutable_layout()->set_channels(uint32_t(image.desc.channels));
  raw.mutable_layout()->set_format(v1::SAMPLE_FORMAT_UINT8);
  raw.set_data(image.data.data(), image.data.size());
  return ref;
}

// Reads a streamed answer to its end.
template <typename Response>
grpc::Status Drain(std::unique_ptr<grpc::ClientReader<Response>> reader) {
  Response response;
  while (reader->Read(&response)) {
  }
  return reader->Finish();
}

// One sample call: `rpc(context, request)` returns once the answer has been read to its end. A
// refusal is noted in `out` (the server's own limits may refuse a sample: a small
// --result-buffer-bytes, say) and the warm-up goes on.
template <typename Request, typename Rpc>
void Call(std::string_view name, const gpu::ImageDesc& desc, const Request& request, Rpc rpc,
          RequestWarmUp& out) {
  grpc::ClientContext context;
  // A deadline no sample call should come near, even on a CPU renderer.
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  context.AddMetadata(kClientKeyMetadata, kWarmUpClientKey);
  ++out.calls;
  if (grpc::Status r = rpc(&context, request); !r.ok()) {
    out.refused.push_back(
        StrCat(name, " of a ", gpu::DescribeImage(desc), " image: ", r.error_message()));
  }
}

template <typename Request>
Request On(const v1::ImageRef& image) {
  Request request;
  *request.mutable_image() = image;
  return request;
}

// Each analysis once on `image` sent raw, then a histogram of it sent as a PNG file (the
// decoders' first use).
void SendEachAnalysis(v1::ImageAnalytics::Stub& stub, const gpu::HostImage& image,
                      RequestWarmUp& out) {
  const v1::ImageRef raw = RawRef(image);
  const gpu::ImageDesc& desc = image.desc;
  const auto histogram = [&](grpc::ClientContext* context, const v1::HistogramRequest& r) {
    v1::HistogramResponse response;
    return stub.Histogram(context, r, &response);
  };
  v1::CompactRequest compact = On<v1::CompactRequest>(raw);
  compact.mutable_options()->set_lo(128);
  compact.mutable_options()->set_hi(255);
  v1::BoxFilterRequest box = On<v1::BoxFilterRequest>(raw);
  box.mutable_options()->set_rx(3);
  box.mutable_options()->set_ry(3);
  box.set_encoding(v1::PIXEL_ENCODING_RAW);
  Call("Histogram", desc, On<v1::HistogramRequest>(raw), histogram, out);
  Call(
      "IntegralImage", desc, On<v1::IntegralImageRequest>(raw),
      [&](grpc::ClientContext* context, const v1::IntegralImageRequest& r) {
        return Drain(stub.IntegralImage(context, r));
      },
      out);
  Call(
      "Compact", desc, compact,
      [&](grpc::ClientContext* context, const v1::CompactRequest& r) {
        return Drain(stub.Compact(context, r));
      },
      out);
  Call(
      "BoxFilter", desc, box,
      [&](grpc::ClientContext* context, const v1::BoxFilterRequest& r) {
        return Drain(stub.BoxFilter(context, r));
      },
      out);
  absl::StatusOr<std::string> png = EncodePng(image);
  if (!png.ok()) {
    out.refused.push_back(StrCat("a PNG of the sample: ", std::string(png.status().message())));
    return;
  }
  v1::HistogramRequest encoded;
  encoded.mutable_image()->mutable_encoded()->set_data(*std::move(png));
  Call("Histogram (as a PNG)", desc, encoded, histogram, out);
}

}  // namespace

RequestWarmUp WarmRequestPath(GpuWorker& worker, const ServiceLimits& limits) {
  const auto started = std::chrono::steady_clock::now();
  RequestWarmUp out;
  ServiceLimits sample_limits = limits;
  // The 1080p RGB sample is 6.2 MB inline, over the default message size.
  sample_limits.max_message_bytes = std::max<uint64_t>(limits.max_message_bytes, 16 << 20);
  ImageAnalyticsService service(worker, sample_limits, /*redis=*/nullptr, /*access=*/nullptr,
                                /*rate=*/nullptr, CallRecording::kNone);
  // The jobs its calls hand the worker read it (server.cc says why this is needed).
  worker.OrderBeforeLaterJobs();
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(int(sample_limits.max_message_bytes));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    out.refused.push_back("no in-process server could be made");
    return out;
  }
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(int(sample_limits.max_message_bytes));
  args.SetMaxReceiveMessageSize(-1);
  std::unique_ptr<v1::ImageAnalytics::Stub> stub =
      v1::ImageAnalytics::NewStub(server->InProcessChannel(args));
  for (const Sample& s : kSamples) {
    // A server that refuses images this large (--max-image-pixels) has no use for their path.
    if (uint64_t(s.width) * uint64_t(s.height) > limits.max_image_pixels) continue;
    SendEachAnalysis(*stub, SampleImage(s), out);
  }
  // Every call has been answered: nothing of the service is left for the worker to run.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  server->Wait();
  out.took = std::chrono::steady_clock::now() - started;
  return out;
}

}  // namespace glimpse::server
