#include "server/analyses/batch.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/str.h"
#include "server/analyses/histogram.h"
#include "server/analyses/histogram_packs.h"
#include "server/analyses/registry.h"
#include "server/analyses/steps.h"
#include "server/ingest/image_ref.h"
#include "server/rpc/status_util.h"
#include "server/rpc/wire.h"
#include "server/store/shared_images.h"
#include "server/worker/job_class.h"

namespace glimpse::server {
namespace {

using Bidi = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;

std::atomic<int64_t> g_calls_open{0};
std::atomic<int64_t> g_images_in_flight{0};
std::atomic<uint32_t> g_peak_in_flight{0};

void NotePeak(uint32_t n) {
  uint32_t seen = g_peak_in_flight.load();
  while (n > seen && !g_peak_in_flight.compare_exchange_weak(seen, n)) {
  }
}

// Runs tasks after a delay, on one thread of its own (for every call of the process; it lives as
// long as the process). A batch image whose GPU job the full queue refused tries again here.
class DelayedTasks {
 public:
  static DelayedTasks& Get() {
    static DelayedTasks* tasks = new DelayedTasks;  // never destroyed: no exit-time join
    return *tasks;
  }
  void After(std::chrono::steady_clock::duration delay, std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      tasks_.emplace(std::chrono::steady_clock::now() + delay, std::move(task));
    }
    cv_.notify_one();
  }

 private:
  DelayedTasks() {
    std::thread([this] { Loop(); }).detach();
  }
  void Loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      if (tasks_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const auto first = tasks_.begin();
      if (first->first > std::chrono::steady_clock::now()) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      std::function<void()> task = std::move(first->second);
      tasks_.erase(first);
      lock.unlock();
      task();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> tasks_;
};

// The GPU queue refused a job because it, or the tenant's share of it, is full: worth another
// try once jobs have run, rather than failing an image the caller has no way to resend alone.
bool QueueFull(const absl::Status& s) {
  return s.code() == absl::StatusCode::kResourceExhausted &&
         MessageOf(s).find("GPU job") != std::string_view::npos;
}

class BatchCall;
struct ImageWork;

// One planned analysis (server/analyses/steps.h): started on an image as step `step`.
using ImageStep =
    PlannedStep<std::function<void(std::shared_ptr<ImageWork>, size_t step, uint64_t bytes)>>;

// One image of the call, from its message to its end marker.
struct ImageWork {
  ImageWork(BatchCall* c, uint64_t i) : call(c), index(i), record("AnalyzeBatch/image") {}
  BatchCall* call;
  const uint64_t index;
  std::string key;
  v1::ImageRef ref;
  WireBytes inline_bytes;  // ref's inline bytes, where they arrived
  CallRecord record;       // the image's own times; its steps add theirs
  uint64_t upload_ns = 0;
  std::shared_ptr<const Input> input;
  std::vector<uint64_t> bytes;  // each step's result bytes
  int retries = 0;              // of refused GPU jobs
};

// The call: reads the header, then images while fewer than the bound are in flight; runs each
// image's steps one after another (images in parallel); sends each image's parts and end marker
// (in input order when asked), and the summary once every image has ended.
class BatchCall : public StreamCall<v1::AnalyzeBatchResponse, Bidi> {
 public:
  BatchCall(ServiceEnv& service, grpc::CallbackServerContext* context)
      : StreamCall("AnalyzeBatch"),
        service_(service),
        context_(context),
        deadline_(context->deadline()),
        bound_(std::max<uint32_t>(1, service.limits.batch_in_flight)) {
    g_calls_open.fetch_add(1);
    if (absl::Status s = Admit(service, context, record); !s.ok()) {
      finishing_ = true;
      Close(s);
      return;
    }
    // A batch yields to its tenant's single calls unless the caller says otherwise.
    if (context->client_metadata().find(kPriorityMetadata) == context->client_metadata().end()) {
      JobClass c = record.job_class();
      c.priority = Priority::kBatch;
      record.set_job_class(std::move(c));
    }
    reading_ = true;
    StartRead(&wire_);
  }
  ~BatchCall() override { g_calls_open.fetch_sub(1); }

  // Marks a thread inside the call's methods: the call is not deleted until it has left, though
  // what it did there (the last image's end) may already have finished the call.
  class Busy {
   public:
    explicit Busy(BatchCall* call) : call_(call) {
      std::lock_guard lock(call_->done_mu_);
      ++call_->busy_;
    }
    ~Busy() {
      std::lock_guard lock(call_->done_mu_);
      if (--call_->busy_ == 0) call_->done_cv_.notify_all();
    }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    BatchCall* call_;
  };

  ServiceEnv& service() { return service_; }
  std::chrono::system_clock::time_point deadline() const { return deadline_; }
  const std::vector<ImageStep>& steps() const { return steps_; }

  // Hands messages of image `index` to the stream: at once, or, for an ordered call, once every
  // earlier image has ended. `drained` runs once they are sent or dropped.
  void Emit(uint64_t index, std::vector<v1::AnalyzeBatchResponse> messages, Lease lease,
            std::function<void()> drained, bool last = false) {
    Busy busy(this);
    std::unique_lock lock(mu_);
    Out out{std::move(messages), std::move(lease), std::move(drained), std::nullopt};
    if (header_.ordered() && index != head_) {
      Pending& p = pending_[index];
      p.items.push_back(std::move(out));
      if (last) p.ended = true;
      return;
    }
    outbox_.push_back(std::move(out));
    if (header_.ordered() && last) {
      ++head_;
      for (auto it = pending_.find(head_); it != pending_.end(); it = pending_.find(head_)) {
        for (Out& o : it->second.items) outbox_.push_back(std::move(o));
        const bool ended = it->second.ended;
        pending_.erase(it);
        if (!ended) break;
        ++head_;
      }
    }
    Flush(lock);
  }

  // Step `step` of `w` has sent its whole result: the next starts, or the image ends.
  void StepDone(const std::shared_ptr<ImageWork>& w, size_t step, const v1::Timing& timing) {
    Busy busy(this);
    w->record.add_queue(std::chrono::nanoseconds(timing.queue_ns()));
    w->record.add_gpu_ns(timing.gpu_ns());
    w->upload_ns += timing.upload_ns();
    if (step + 1 < steps_.size()) return steps_[step + 1].start(w, step + 1, w->bytes[step + 1]);
    End(w, absl::OkStatus());
  }

  // The queue refused step `step` of `w` before it sent anything: it is queued again after a
  // growing pause (1 ms doubling to 50 ms) until the call's deadline or cancellation.
  void Retry(const std::shared_ptr<ImageWork>& w, size_t step, const absl::Status& refused) {
    Busy busy(this);
    const auto delay = std::chrono::milliseconds(std::min(50, 1 << std::min(w->retries, 6)));
    ++w->retries;
    if (cancelled() || context_->IsCancelled() ||
        std::chrono::system_clock::now() + delay >= deadline_) {
      return End(w, Annotate(refused, StrCat("analyses[", step, "] (", steps_[step].name, ")")));
    }
    DelayedTasks::Get().After(delay, [this, w, step] {
      Busy later(this);
      if (cancelled()) {
        return End(w, absl::CancelledError("the client cancelled the call"));
      }
      steps_[step].start(w, step, w->bytes[step]);
    });
  }

  // The image ends: its end marker (with its error, if any) follows its parts.
  void End(const std::shared_ptr<ImageWork>& w, const absl::Status& status) {
    Busy busy(this);
    std::vector<v1::AnalyzeBatchResponse> end(1);
    end[0].set_index(w->index);
    end[0].set_key(w->key);
    v1::ImageEnd* e = end[0].mutable_end();
    if (!status.ok()) {
      const absl::Status named = Annotate(status, StrCat("images[", w->index, "]"));
      e->mutable_error()->set_code(int32_t(named.code()));
      e->mutable_error()->set_message(std::string(MessageOf(named)));
    }
    w->record.set_upload_ns(w->upload_ns);
    *e->mutable_timing() = w->record.Timing();
    {
      std::lock_guard lock(mu_);
      (status.ok() ? ok_ : failed_) += 1;
      --active_;
      queue_ns_ += e->timing().queue_ns();
      gpu_ns_ += e->timing().gpu_ns();
      upload_ns_ += e->timing().upload_ns();
      decode_ns_ += e->timing().decode_ns();
    }
    Emit(
        w->index, std::move(end), Lease(), [this] { Sent(); }, /*last=*/true);
    Progress();
  }

 private:
  struct Out {
    std::vector<v1::AnalyzeBatchResponse> messages;
    Lease lease;
    std::function<void()> drained;
    std::optional<absl::Status> close;  // set: end the call here, after everything before
  };
  struct Pending {
    std::deque<Out> items;
    bool ended = false;
  };

  // Hands the outbox to the stream in order; one thread at a time, so the order of the outbox is
  // the order on the wire. Callbacks that emit more while it runs find their messages sent too.
  void Flush(std::unique_lock<std::mutex>& lock) {
    if (flushing_) return;
    flushing_ = true;
    while (!outbox_.empty()) {
      std::deque<Out> batch;
      batch.swap(outbox_);
      lock.unlock();
      for (Out& o : batch) {
        if (o.close) {
          Close(*o.close);
          continue;
        }
        std::function<void()> drained = o.drained;
        if (absl::Status s = Send(std::move(o.messages), std::move(o.lease), std::move(o.drained));
            !s.ok() && drained) {
          drained();  // the reader has gone: nothing will be sent
        }
      }
      lock.lock();
    }
    flushing_ = false;
  }

  // An image's end marker has been written (or dropped with the reader): it leaves the flight.
  void Sent() {
    Busy busy(this);
    {
      std::lock_guard lock(mu_);
      --in_flight_;
    }
    g_images_in_flight.fetch_sub(1);
    Progress();
  }

  // Reads the next image if the call is under its bound, or ends the call once every image has
  // ended and nothing more will be read.
  void Progress() {
    Busy busy(this);
    std::unique_lock lock(mu_);
    if (finishing_ || reading_) return;
    const bool gone = cancelled() || context_->IsCancelled();
    if (!reads_done_ && !gone && in_flight_ < bound_) {
      reading_ = true;
      lock.unlock();
      StartRead(&wire_);
      return;
    }
    if (active_ > 0 || !(reads_done_ || gone)) return;
    finishing_ = true;
    std::vector<v1::AnalyzeBatchResponse> last(1);
    v1::BatchSummary* s = last[0].mutable_summary();
    s->set_images(next_index_);
    s->set_ok(ok_);
    s->set_failed(failed_);
    s->set_max_in_flight(bound_);
    record.add_queue(std::chrono::nanoseconds(queue_ns_));
    record.add_gpu_ns(gpu_ns_);
    record.set_upload_ns(upload_ns_);
    record.set_decode_ns(decode_ns_);
    record.set_image(StrCat(next_index_, " images, ", failed_, " failed"));
    *s->mutable_timing() = record.Timing();
    outbox_.push_back({std::move(last), Lease(), nullptr, std::nullopt});
    outbox_.push_back(
        {{},
         Lease(),
         nullptr,
         gone ? absl::CancelledError("the client cancelled the call") : absl::OkStatus()});
    Flush(lock);
  }

  void OnReadDone(bool ok) override {
    Busy busy(this);
    if (!ok) {
      {
        std::lock_guard lock(mu_);
        reading_ = false;
        reads_done_ = true;
      }
      return Progress();
    }
    // The header is message 1; image i (from 0) is message i + 2. Only this thread moves
    // next_index_, between reads.
    // An image's inline bytes stay in gRPC's slices (ImageWork::inline_bytes), read from there.
    WireBytes inline_bytes;
    const absl::Status parsed = ParseLeavingImageData(
        wire_, StrCat("message ", planned_ ? next_index_ + 2 : 1, " of the stream"), &request_,
        &inline_bytes);
    wire_.Clear();
    if (!planned_) {
      absl::Status s = parsed;
      if (s.ok()) s = TakeHeader();
      if (!s.ok()) {
        {
          std::lock_guard lock(mu_);
          reading_ = false;
          finishing_ = true;
        }
        return Close(s);  // no image has been read: nothing else is in flight
      }
      planned_ = true;
      request_.Clear();
      {
        std::lock_guard lock(mu_);
        reading_ = false;
      }
      return Progress();
    }
    std::shared_ptr<ImageWork> w;
    {
      std::lock_guard lock(mu_);
      w = std::make_shared<ImageWork>(this, next_index_++);
      ++in_flight_;
      ++active_;
      NotePeak(in_flight_);
    }
    g_images_in_flight.fetch_add(1);
    // A message that does not parse is an image that fails: the batch goes on.
    const bool is_image = parsed.ok() && request_.has_image();
    if (is_image) {
      w->key = std::move(*request_.mutable_image()->mutable_key());
      w->ref.Swap(request_.mutable_image()->mutable_image());
      w->inline_bytes = std::move(inline_bytes);
    }
    request_.Clear();
    {
      // Only now may another thread's Progress start the next read into wire_ and request_.
      std::lock_guard lock(mu_);
      reading_ = false;
    }
    w->record.set_tenant(record.tenant());
    w->record.set_job_class(record.job_class());
    Progress();  // reads the next image while this one is decoded
    if (!parsed.ok()) return End(w, parsed);
    if (!is_image) {
      return End(w, absl::InvalidArgumentError(
                        "image must be set in every AnalyzeBatchRequest after the first (the "
                        "header is sent once)"));
    }
    TakeRateToken(service_, w->record, [this, w](absl::Status rated) {
      if (!rated.ok()) return End(w, rated);
      ResolveImageRef(
          service_, w->ref, w->record,
          [this, w](absl::StatusOr<std::shared_ptr<const Input>> in) {
            if (!in.ok()) return End(w, in.status());
            Checked(w, *std::move(in));
          },
          &w->inline_bytes);
    });
  }

  // The image is read: every analysis checked against it, then the first started.
  void Checked(const std::shared_ptr<ImageWork>& w, std::shared_ptr<const Input> in) {
    w->bytes.resize(steps_.size());
    for (size_t i = 0; i < steps_.size(); ++i) {
      absl::StatusOr<uint64_t> b =
          steps_[i].result_bytes(in->desc, service_.worker.results().part_bytes());
      if (!b.ok())
        return End(w, Annotate(b.status(), StrCat("analyses[", i, "] (", steps_[i].name, ")")));
      w->bytes[i] = *b;
    }
    w->input = std::move(in);
    steps_[0].start(w, 0, w->bytes[0]);
  }

  // gRPC is done with the call; threads that ended it may still be on their way out.
  void OnDone() override {
    {
      std::unique_lock lock(done_mu_);
      done_cv_.wait(lock, [this] { return busy_ == 0; });
    }
    delete this;
  }

  // Reads the first message: the header, its analyses mapped before any image is read.
  absl::Status TakeHeader();

  ServiceEnv& service_;
  grpc::CallbackServerContext* context_;
  const std::chrono::system_clock::time_point deadline_;
  uint32_t bound_;
  grpc::ByteBuffer wire_;            // the read in progress, as received (gRPC's thread only)
  v1::AnalyzeBatchRequest request_;  // what it parsed into (the same)
  v1::AnalyzeBatchHeader header_;    // fixed once planned_
  std::vector<ImageStep> steps_;
  bool planned_ = false;

  std::mutex mu_;
  bool reading_ = false, reads_done_ = false, finishing_ = false, flushing_ = false;
  uint64_t next_index_ = 0;  // images read
  uint32_t in_flight_ = 0;   // read, not yet ended and sent
  uint64_t active_ = 0;      // read, not yet ended
  uint64_t ok_ = 0, failed_ = 0;
  uint64_t queue_ns_ = 0, gpu_ns_ = 0, upload_ns_ = 0, decode_ns_ = 0;
  uint64_t head_ = 0;  // ordered: the image whose messages go out now
  std::map<uint64_t, Pending> pending_;
  std::deque<Out> outbox_;

  std::mutex done_mu_;
  std::condition_variable done_cv_;
  int busy_ = 0;  // threads inside the call's methods (Busy)
};

// Where step `step` of an image sends its messages: wrapped into AnalyzeResponse's field of its
// name, inside the image's AnalyzeBatchResponse.
template <typename A>
class ImageStepSink final : private StepRecord, public ResponseSink<typename A::Response> {
 public:
  ImageStepSink(std::shared_ptr<ImageWork> w, size_t step)
      : StepRecord(A::kMethod, w->record),
        ResponseSink<typename A::Response>(own_record),
        w_(std::move(w)),
        step_(step),
        field_(FieldNamed(v1::AnalyzeResponse::descriptor(), A::kName)) {}

  absl::Status Send(std::vector<typename A::Response> messages, Lease lease,
                    std::function<void()> drained = nullptr) override {
    std::vector<v1::AnalyzeBatchResponse> wrapped(messages.size());
    for (size_t i = 0; i < messages.size(); ++i) {
      wrapped[i].set_index(w_->index);
      wrapped[i].set_key(w_->key);
      WrapPart<A>(messages[i], step_, field_, wrapped[i].mutable_result());
    }
    sent_.store(true);
    w_->call->Emit(w_->index, std::move(wrapped), std::move(lease), std::move(drained));
    return absl::OkStatus();
  }
  void Close(const absl::Status& status) override {
    if (closed_.exchange(true)) return;
    if (status.ok()) return w_->call->StepDone(w_, step_, this->record.Timing());
    if (QueueFull(status) && !sent_.load()) return w_->call->Retry(w_, step_, status);
    w_->call->End(w_, Annotate(status, StrCat("analyses[", step_, "] (", A::kName, ")")));
  }
  bool cancelled() const override { return w_->call->cancelled(); }

 private:
  std::shared_ptr<ImageWork> w_;
  const size_t step_;
  const google::protobuf::FieldDescriptor* field_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> sent_{false};
};

template <typename A>
void StartStep(std::shared_ptr<ImageWork> w, size_t step, const typename A::Options& options,
               uint64_t bytes) {
  BatchCall* call = w->call;
  std::shared_ptr<const Input> in = w->input;
  RunStep<A>(call->service(), std::make_shared<ImageStepSink<A>>(std::move(w), step), std::move(in),
             options, bytes, call->deadline(), StrCat("AnalyzeBatch/", A::kName));
}

absl::Status BatchCall::TakeHeader() {
  if (!request_.has_header()) {
    return absl::InvalidArgumentError(
        "header must be set in the first AnalyzeBatchRequest (the analyses), before any image");
  }
  header_ = request_.header();
  if (absl::Status s = PlanSteps(
          header_.analyses(), "AnalyzeBatch takes each image in its own message",
          [this]<typename A>(const typename A::Options& o) -> decltype(ImageStep::start) {
            if constexpr (std::is_same_v<A, HistogramAnalysis>) {
              if (service_.limits.batch_pack_images > 1) {
                // Small inline images' histograms run in packs, many images to a GPU job.
                auto packs = std::make_shared<HistogramPacks>(
                    service_, o, StrCat("AnalyzeBatch/", A::kName, " pack"), deadline_);
                return [o, packs](std::shared_ptr<ImageWork> w, size_t step, uint64_t bytes) {
                  if (!HistogramPacks::Packable(*w->input)) {
                    return StartStep<A>(std::move(w), step, o, bytes);
                  }
                  std::shared_ptr<const Input> in = w->input;
                  packs->Add(std::move(in), bytes,
                             std::make_shared<ImageStepSink<A>>(std::move(w), step));
                };
              }
            }
            return [o](std::shared_ptr<ImageWork> w, size_t step, uint64_t bytes) {
              StartStep<A>(std::move(w), step, o, bytes);
            };
          },
          &steps_);
      !s.ok()) {
    return s;
  }
  if (header_.max_in_flight() > 0) bound_ = std::min(bound_, header_.max_in_flight());
  return absl::OkStatus();
}

}  // namespace

BatchStats GetBatchStats() {
  return {g_calls_open.load(), g_images_in_flight.load(), g_peak_in_flight.load()};
}

void ResetBatchPeak() { g_peak_in_flight.store(0); }

Bidi* ServeAnalyzeBatch(ServiceEnv& service, grpc::CallbackServerContext* context) {
  return new BatchCall(service, context);
}

}  // namespace glimpse::server
