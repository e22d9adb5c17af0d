// The histograms of a batch's small images, gathered into packs that each run as one GPU job:
// one upload, one dispatch and one read-back for many images (gpu::HistogramKernel::RunPacked),
// where one job per image would pay the job's fixed cost (a queue hop, an upload, a dispatch,
// a timer query, a read-back) once per image. On a GPU the kernel of a 256x256 image takes
// microseconds, so that fixed cost is most of an image's time.
//
// Packs form by themselves: the first image queues a job; images that arrive while it waits
// join it; the job takes every image waiting when it runs (up to --batch-pack-images, and what
// the result budget has room for) and queues the next job if any are left. No image waits for a
// pack to fill.
//
//   auto packs = std::make_shared<HistogramPacks>(service, options, "AnalyzeBatch/histogram pack",
//                                                 deadline);
//   if (HistogramPacks::Packable(*input)) packs->Add(input, result_bytes, sink);
//   // sink (a ResponseSink<v1::HistogramResponse>): one message, then Close(OK); or Close(error),
//   // the queue's refusal included, before anything is sent.
#ifndef GLIMPSE_SERVER_ANALYSES_HISTOGRAM_PACKS_H_
#define GLIMPSE_SERVER_ANALYSES_HISTOGRAM_PACKS_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "gpu/histogram.h"
#include "server/analyses/runner.h"
#include "server/ingest/image_ref.h"

namespace glimpse::server {

// One call's packs for one histogram step (its options). Thread-safe.
class HistogramPacks : public std::enable_shared_from_this<HistogramPacks> {
 public:
  using Sink = ResponseSink<v1::HistogramResponse>;

  HistogramPacks(ServiceEnv& service, gpu::HistogramOptions options, std::string method,
                 std::chrono::system_clock::time_point deadline)
      : service_(service),
        options_(std::move(options)),
        method_(std::move(method)),
        deadline_(deadline) {}

  // Images per pack: service.limits.batch_pack_images.
  // Whether `in` can join a pack: pixels sent with the call (not an image stored on the device),
  // of at most gpu::kMaxPackedImagePixels (a larger image's kernel outweighs a job's fixed cost).
  static bool Packable(const Input& in);

  // Queues the histogram of `in` (its result at most `result_bytes`): `sink` gets its one
  // message and Close(OK), or Close(error).
  void Add(std::shared_ptr<const Input> in, uint64_t result_bytes, std::shared_ptr<Sink> sink);

 private:
  struct Entry {
    std::shared_ptr<const Input> in;
    uint64_t bytes = 0;
    std::shared_ptr<Sink> sink;
    std::chrono::steady_clock::time_point added;
  };
  // Images of one channel count and sample type: one pack's images share a format.
  using LaneKey = std::pair<int, gpu::SampleType>;
  struct Lane {
    std::deque<Entry> waiting;
    bool queued = false;  // a job for the lane is queued (it takes `waiting` when it runs)
  };
  class Job;

  void SubmitLane(const LaneKey& key);
  // On the GPU's thread: the lane's waiting images, as many as fit, run as one pack.
  absl::Status RunLane(GpuEnv& env, const LaneKey& key, Lease first_lease);
  // The lane's job was refused or dropped unrun: every waiting image gets `status`.
  void FailLane(const LaneKey& key, const absl::Status& status);
  bool LaneCancelled(const LaneKey& key);

  ServiceEnv& service_;
  const gpu::HistogramOptions options_;
  const std::string method_;
  const std::chrono::system_clock::time_point deadline_;
  std::mutex mu_;
  std::map<LaneKey, Lane> lanes_;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_HISTOGRAM_PACKS_H_
