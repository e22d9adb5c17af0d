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

// A deadline no sample call should come near, even on a CPU renderer.
std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return context;
}

absl::Status Failed(std::string_view call, const grpc::Status& status) {
  return absl::InternalError(StrCat("request-path warm-up: ", call,
                                    " on a sample image failed: ", status.error_message()));
}

// Reads a streamed answer to its end.
template <typename Response>
grpc::Status Drain(grpc::ClientReader<Response>& reader) {
  Response response;
  while (reader.Read(&response)) {
  }
  return reader.Finish();
}

}  // namespace

absl::StatusOr<std::chrono::nanoseconds> WarmRequestPath(GpuWorker& worker,
                                                         const ServiceLimits& limits) {
  const auto started = std::chrono::steady_clock::now();
  ServiceLimits sample_limits = limits;
  // The 1080p RGB sample is 6.2 MB inline, over the default message size.
  sample_limits.max_message_bytes = std::max<uint64_t>(limits.max_message_bytes, 16 << 20);
  ImageAnalyticsService service(worker, sample_limits);
  // The jobs its calls hand the worker read it (server.cc says why this is needed).
  worker.OrderBeforeLaterJobs();
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(int(sample_limits.max_message_bytes));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return absl::InternalError("request-path warm-up: no in-process server");
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(int(sample_limits.max_message_bytes));
  args.SetMaxReceiveMessageSize(-1);
  std::unique_ptr<v1::ImageAnalytics::Stub> stub =
      v1::ImageAnalytics::NewStub(server->InProcessChannel(args));
  absl::Status status;
  for (const Sample& s : kSamples) {
    if (!status.ok()) break;
    // A server that refuses images this large (--max-image-pixels) has no use for their path.
    if (uint64_t(s.width) * uint64_t(s.height) > limits.max_image_pixels) continue;
    const gpu::HostImage image = SampleImage(s);
    {
      v1::HistogramRequest request;
      *request.mutable_image() = RawRef(image);
      v1::HistogramResponse response;
      if (grpc::Status r = stub->Histogram(Context().get(), request, &response); !r.ok()) {
        status = Failed("Histogram", r);
        break;
      }
    }
    {
      v1::IntegralImageRequest request;
      *request.mutable_image() = RawRef(image);
      auto context = Context();
      if (grpc::Status r = Drain(*stub->IntegralImage(context.get(), request)); !r.ok()) {
        status = Failed("IntegralImage", r);
        break;
      }
    }
    {
      v1::CompactRequest request;
      *request.mutable_image() = RawRef(image);
      request.mutable_options()->set_lo(128);
      request.mutable_options()->set_hi(255);
      auto context = Context();
      if (grpc::Status r = Drain(*stub->Compact(context.get(), request)); !r.ok()) {
        status = Failed("Compact", r);
        break;
      }
    }
    {
      v1::BoxFilterRequest request;
      *request.mutable_image() = RawRef(image);
      request.mutable_options()->set_rx(3);
      request.mutable_options()->set_ry(3);
      request.set_encoding(v1::PIXEL_ENCODING_RAW);
      auto context = Context();
      if (grpc::Status r = Drain(*stub->BoxFilter(context.get(), request)); !r.ok()) {
        status = Failed("BoxFilter", r);
        break;
      }
    }
    // The same image as a PNG file: the decoders' first use.
    absl::StatusOr<std::string> png = EncodePng(image);
    if (!png.ok()) {
      status = png.status();
      break;
    }
    v1::HistogramRequest request;
    request.mutable_image()->mutable_encoded()->set_data(*std::move(png));
    v1::HistogramResponse response;
    if (grpc::Status r = stub->Histogram(Context().get(), request, &response); !r.ok()) {
      status = Failed("Histogram of a PNG", r);
    }
  }
  // Every call has been answered: nothing of the service is left for the worker to run.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  server->Wait();
  if (!status.ok()) return status;
  return std::chrono::steady_clock::now() - started;
}

}  // namespace glimpse::server
