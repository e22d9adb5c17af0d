#include "server/analyses/histogram_packs.h"

#include <algorithm>
#include <vector>

#include "common/str.h"
#include "server/analyses/histogram.h"

namespace glimpse::server {

// A queued pack job as Submit (server/analyses/runner.h) sees a call: whom it is charged to,
// whether anyone still waits for it, and where a refusal or drop goes.
class HistogramPacks::Job {
 public:
  Job(std::shared_ptr<HistogramPacks> packs, LaneKey key, const CallRecord& first)
      : record(packs->method_), packs_(std::move(packs)), key_(key) {
    record.set_tenant(first.tenant());
    record.set_job_class(first.job_class());
  }
  bool cancelled() const { return packs_->LaneCancelled(key_); }
  void Close(const absl::Status& status) { packs_->FailLane(key_, status); }
  absl::Status Run(GpuEnv& env, Lease lease) {
    return packs_->RunLane(env, key_, std::move(lease));
  }

  CallRecord record;

 private:
  std::shared_ptr<HistogramPacks> packs_;
  const LaneKey key_;
};

bool HistogramPacks::Packable(const Input& in) {
  return in.host && !in.cache && !in.staged && in.desc.pixels() <= gpu::kMaxPackedImagePixels;
}

void HistogramPacks::Add(std::shared_ptr<const Input> in, uint64_t result_bytes,
                         std::shared_ptr<Sink> sink) {
  const LaneKey key{in->desc.channels, in->desc.type};
  {
    std::lock_guard lock(mu_);
    Lane& lane = lanes_[key];
    lane.waiting.push_back(
        {std::move(in), result_bytes, std::move(sink), std::chrono::steady_clock::now()});
    if (lane.queued) return;  // the queued job will take it
    lane.queued = true;
  }
  SubmitLane(key);
}

void HistogramPacks::SubmitLane(const LaneKey& key) {
  std::shared_ptr<Job> job;
  uint64_t bytes = 0, pixels = 0;
  {
    std::lock_guard lock(mu_);
    const Lane& lane = lanes_[key];
    // The job leases its first image's result bytes before it runs, as a single image's job
    // does; it leases the others' when it runs, taking only those the budget has room for.
    // Its cost estimate (server/worker/fair_queue.h) counts the pixels waiting now; the pack
    // takes those that join it too, and its method's cost per pixel, learnt from packs alone
    // under their own method name, makes up for that.
    const Entry& first = lane.waiting.front();
    job = std::make_shared<Job>(shared_from_this(), key, first.sink->record);
    bytes = first.bytes;
    for (const Entry& e : lane.waiting) pixels += uint64_t(e.in->desc.pixels());
  }
  // The work holds `job`, and this copy keeps it alive until Submit returns: a job the queue
  // refuses is destroyed inside Submit before the refusal reaches job->Close.
  Submit(
      service_.worker, job.get(), method_, deadline_, bytes,
      [job](GpuEnv& env, Lease lease) { return job->Run(env, std::move(lease)); }, pixels);
}

bool HistogramPacks::LaneCancelled(const LaneKey& key) {
  std::lock_guard lock(mu_);
  const Lane& lane = lanes_[key];
  // Images of one call: its cancellation is every sink's.
  return lane.waiting.empty() || lane.waiting.front().sink->cancelled();
}

void HistogramPacks::FailLane(const LaneKey& key, const absl::Status& status) {
  std::deque<Entry> failed;
  {
    std::lock_guard lock(mu_);
    Lane& lane = lanes_[key];
    failed.swap(lane.waiting);
    lane.queued = false;
  }
  // A refusal of a full queue goes to each image's sink, which may queue it again later
  // (AnalyzeBatch retries those): it joins the lane anew.
  for (Entry& e : failed) e.sink->Close(status);
}

absl::Status HistogramPacks::RunLane(GpuEnv& env, const LaneKey& key, Lease first_lease) {
  std::vector<Entry> pack;
  std::vector<Lease> leases;
  bool left = false;  // images this pack had no room for: the next job takes them
  {
    std::lock_guard lock(mu_);
    Lane& lane = lanes_[key];
    while (!lane.waiting.empty() &&
           pack.size() < std::max<uint32_t>(1, service_.limits.batch_pack_images)) {
      Entry& e = lane.waiting.front();
      if (pack.empty()) {
        leases.push_back(std::move(first_lease));
      } else {
        std::optional<Lease> lease = service_.worker.results().TryAcquire(e.bytes);
        if (!lease) break;  // the next job waits in the queue until the budget has room
        leases.push_back(*std::move(lease));
      }
      pack.push_back(std::move(e));
      lane.waiting.pop_front();
    }
    // The lane stays queued while images are left, so that none of them queues a second job.
    left = !lane.waiting.empty();
    lane.queued = left;
  }
  const auto started = std::chrono::steady_clock::now();
  std::vector<gpu::PackedImage> images;
  images.reserve(pack.size());
  uint64_t pack_pixels = 0;
  for (const Entry& e : pack) {
    images.push_back({e.in->desc, e.in->host->data, e.in->widened});
    pack_pixels += uint64_t(e.in->desc.pixels());
  }
  absl::StatusOr<gpu::PackedHistograms> r = env.kernels.histogram.RunPacked(images, options_);
  for (size_t i = 0; i < pack.size(); ++i) {
    Entry& e = pack[i];
    CallRecord& record = e.sink->record;
    record.add_queue(started - e.added);
    absl::Status status = r.ok() ? r->results[i].status() : r.status();
    if (status.ok()) {
      // Each image's share of the pack's upload, by pixels, as its GPU time is.
      record.set_upload_ns(
          uint64_t(double(r->upload_ns) * double(e.in->desc.pixels()) / double(pack_pixels)));
      std::vector<v1::HistogramResponse> out(1);
      HistogramAnalysis::Answer(*r->results[i], record, &out[0]);
      FillInfo(e.in->desc, out[0].mutable_image());
      *out[0].mutable_timing() = record.Timing();
      status = e.sink->Send(std::move(out), std::move(leases[i]));
    }
    e.sink->Close(status);
  }
  if (left) SubmitLane(key);
  return absl::OkStatus();
}

}  // namespace glimpse::server
