#include "server/analyses/analyze.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/str.h"
#include "server/analyses/registry.h"
#include "server/analyses/steps.h"
#include "server/ingest/image_ref.h"
#include "server/ingest/upload.h"
#include "server/rpc/status_util.h"
#include "server/rpc/wire.h"
#include "server/store/shared_images.h"

namespace glimpse::server {
namespace {

// Analyze serves every analysis of the registry (server/analyses/registry.h): its request is the
// v1::Analysis field and its response the v1::AnalyzeResponse field named A::kName.

using Bidi = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;

class AnalyzeCall;

// One planned analysis (server/analyses/steps.h): started on the call's image as analysis `index`.
using Step = PlannedStep<
    std::function<void(AnalyzeCall*, size_t index, std::shared_ptr<const Input>, uint64_t bytes)>>;

// The call: reads the header and any upload, stores an inline or uploaded image for the call's
// length, runs the steps one after another, and streams what they send.
class AnalyzeCall : public StreamCall<v1::AnalyzeResponse, Bidi> {
 public:
  AnalyzeCall(ServiceEnv& service, grpc::CallbackServerContext* context)
      : StreamCall("Analyze"),
        service_(service),
        context_(context),
        deadline_(context->deadline()),
        buffer_(service.limits, service.worker.device().limits, service.worker.staging(),
                "header.upload") {
    if (absl::Status s = Admit(service, context, record); !s.ok()) {
      End(s);
      return;
    }
    // One token per call, whatever its steps: they share one image and one admission, and a
    // client that splits its work into separate calls pays per call as well.
    TakeRateToken(service, record, [this](absl::Status rated) {
      if (!rated.ok()) return End(rated);
      StartRead(&wire_);
    });
  }

  ServiceEnv& service() { return service_; }
  std::chrono::system_clock::time_point deadline() const { return deadline_; }

  // Analysis `index` has sent its whole result: its time joins the call's, the next one starts.
  void Done(size_t index, const v1::Timing& timing) {
    record.add_queue(std::chrono::nanoseconds(timing.queue_ns()));
    record.add_gpu_ns(timing.gpu_ns());
    Start(index + 1);
  }
  // Analysis `index` failed: the call ends with its error.
  void Fail(size_t index, const absl::Status& status) {
    End(Annotate(status, StrCat("analyses[", index, "] (", steps_[index].name, ")")));
  }

 private:
  void OnReadDone(bool ok) override {
    if (ended_) return;
    if (!ok) {
      if (context_->IsCancelled()) return End(CancelledMidUpload(buffer_.received()));
      return Received();
    }
    if (absl::Status s = Take(); !s.ok()) return End(s);
    StartRead(&wire_);
  }

  absl::Status Take() {
    // The first message's inline image stays in gRPC's slices (image_bytes_), read from there.
    const std::string what = StrCat("message ", messages_ + 1, " of the stream");
    if (absl::Status s = messages_ == 0
                             ? ParseLeavingImageData(wire_, what, &request_, &image_bytes_)
                             : ParseMessage(wire_, what, &request_);
        !s.ok()) {
      return s;
    }
    wire_.Clear();
    if (messages_++ == 0) {
      if (!request_.has_header()) {
        return absl::InvalidArgumentError(
            "header must be set in the first AnalyzeRequest (the image and the analyses)");
      }
      header_.Swap(request_.mutable_header());
      if (absl::Status s = Plan(); !s.ok()) return s;
      switch (header_.source_case()) {
        case v1::AnalyzeHeader::kImage:
          if (header_.keep() && header_.image().has_image_id()) {
            return absl::InvalidArgumentError(
                "keep is for inline or uploaded images; header.image.image_id is stored already");
          }
          break;
        case v1::AnalyzeHeader::kUpload:
          if (absl::Status s = buffer_.SetHeader(header_.upload(), record); !s.ok()) return s;
          break;
        case v1::AnalyzeHeader::SOURCE_NOT_SET:
          return absl::InvalidArgumentError(
              "header must set image (an id or an inline image) or upload (chunks follow)");
      }
    } else if (request_.has_header()) {
      return absl::InvalidArgumentError(
          StrCat("header must be sent only in the first message; message ", messages_, " has one"));
    }
    if (request_.chunk().empty()) return absl::OkStatus();
    if (!header_.has_upload()) {
      return absl::InvalidArgumentError(
          "chunk must be empty unless header.upload is set (the image was given in header.image)");
    }
    return buffer_.Append(request_.chunk());
  }

  // Maps every analysis's options before anything runs, so a bad one costs no GPU work.
  absl::Status Plan();

  // The client has sent everything: the image is read (decoded on a host thread), every analysis
  // checked against it, and the first started.
  void Received() {
    if (messages_ == 0) {
      return End(absl::InvalidArgumentError(
          "the Analyze stream had no header: it ended before its first message"));
    }
    if (header_.has_upload()) {
      if (absl::Status s = buffer_.Complete(); !s.ok()) return End(s);
      service_.pool.Post([this] {
        absl::StatusOr<std::shared_ptr<Input>> in = buffer_.TakeImage(record);
        if (!in.ok()) return End(in.status());
        Checked(*std::move(in));
      });
      return;
    }
    ResolveImageRef(
        service_, header_.image(), record,
        [this](absl::StatusOr<std::shared_ptr<const Input>> in) {
          if (!in.ok()) return End(Annotate(in.status(), "header"));
          Checked(*std::move(in));
        },
        &image_bytes_);
  }

  void Checked(std::shared_ptr<const Input> in) {
    bytes_.resize(steps_.size());
    for (size_t i = 0; i < steps_.size(); ++i) {
      absl::StatusOr<uint64_t> b =
          steps_[i].result_bytes(in->desc, service_.worker.results().part_bytes());
      if (!b.ok()) return Fail(i, b.status());
      bytes_[i] = *b;
    }
    if (!in->host || in->cache) {  // stored here, or fetched from the shared store
      input_ = std::move(in);
      return Start(0);
    }
    // The call's own copy on the GPU, shared by its analyses and freed at the end (unless kept).
    Submit(service_.worker, this, "Analyze", deadline_, 0,
           [this, in](GpuEnv& env, Lease) -> absl::Status {
             StoredImageInfo meta;
             meta.label = !header_.label().empty() ? header_.label() : header_.upload().label();
             meta.origin = header_.keep() ? "analyze" : "analyze (temporary)";
             absl::StatusOr<StoredImageInfo> stored =
                 StoreHostImage(env, *in, std::move(meta), record);
             if (!stored.ok()) return stored.status();
             auto own = std::make_shared<Input>();
             own->image_id = stored->id;
             own->desc = stored->desc;
             own->anonymous = !header_.keep();
             if (!header_.keep()) temp_id_ = stored->id;
             input_ = std::move(own);
             if (!header_.keep()) return Start(0), absl::OkStatus();
             // A kept image is shared before its id is given out, as an upload's is.
             ShareImage(service_, *stored, in, [this, info = *stored](absl::Status s) {
               if (!s.ok()) return End(s);
               std::vector<v1::AnalyzeResponse> kept(1);
               FillInfo(info, kept[0].mutable_kept());
               if (s = Send(std::move(kept), Lease()); !s.ok()) return End(s);
               Start(0);
             });
             return absl::OkStatus();
           });
  }

  void Start(size_t index) {
    if (index == steps_.size()) {
      std::vector<v1::AnalyzeResponse> last(1);
      *last[0].mutable_timing() = record.Timing();
      if (absl::Status s = Send(std::move(last), Lease()); !s.ok()) return End(s);
      return End(absl::OkStatus());
    }
    steps_[index].start(this, index, input_, bytes_[index]);
  }

  void End(const absl::Status& status) {
    if (ended_.exchange(true)) return;
    if (!temp_id_.empty()) (void)service_.worker.store().Erase(temp_id_, record.tenant());
    Close(status);
  }

  ServiceEnv& service_;
  grpc::CallbackServerContext* context_;
  const std::chrono::system_clock::time_point deadline_;
  grpc::ByteBuffer wire_;  // the message being read, as received
  v1::AnalyzeRequest request_;
  v1::AnalyzeHeader header_;
  WireBytes image_bytes_;  // header.image's inline bytes, where they arrived
  UploadBuffer buffer_;
  int64_t messages_ = 0;
  std::vector<Step> steps_;
  std::vector<uint64_t> bytes_;
  std::shared_ptr<const Input> input_;
  std::string temp_id_;
  std::atomic<bool> ended_{false};
};

// Where analysis `index` sends its messages: wrapped into AnalyzeResponse's field of its name.
template <typename A>
class StepSink final : private StepRecord, public ResponseSink<typename A::Response> {
 public:
  StepSink(AnalyzeCall* call, size_t index)
      : StepRecord(A::kMethod, call->record),
        ResponseSink<typename A::Response>(own_record),
        call_(call),
        index_(index),
        field_(FieldNamed(v1::AnalyzeResponse::descriptor(), A::kName)) {}

  absl::Status Send(std::vector<typename A::Response> messages, Lease lease,
                    std::function<void()> drained = nullptr) override {
    std::vector<v1::AnalyzeResponse> wrapped(messages.size());
    for (size_t i = 0; i < messages.size(); ++i) {
      WrapPart<A>(messages[i], index_, field_, &wrapped[i]);
    }
    return call_->Send(std::move(wrapped), std::move(lease), std::move(drained));
  }
  void Close(const absl::Status& status) override {
    if (closed_.exchange(true)) return;
    if (status.ok()) return call_->Done(index_, this->record.Timing());
    call_->Fail(index_, status);
  }
  bool cancelled() const override { return call_->cancelled(); }

 private:
  AnalyzeCall* call_;
  const size_t index_;
  const google::protobuf::FieldDescriptor* field_;
  std::atomic<bool> closed_{false};
};

template <typename A>
void StartStep(AnalyzeCall* call, size_t index, std::shared_ptr<const Input> in,
               const typename A::Options& options, uint64_t bytes) {
  RunStep<A>(call->service(), std::make_shared<StepSink<A>>(call, index), std::move(in), options,
             bytes, call->deadline(), StrCat("Analyze/", A::kName));
}

absl::Status AnalyzeCall::Plan() {
  return PlanSteps(
      header_.analyses(), "Analyze takes the image once, in header",
      []<typename A>(const typename A::Options& o) -> decltype(Step::start) {
        return [o](AnalyzeCall* call, size_t index, std::shared_ptr<const Input> in,
                   uint64_t bytes) { StartStep<A>(call, index, std::move(in), o, bytes); };
      },
      &steps_);
}

}  // namespace

std::vector<std::string> AnalyzeAnalysisNames() { return kAnalyses.Names(); }

Bidi* ServeAnalyze(ServiceEnv& service, grpc::CallbackServerContext* context) {
  return new AnalyzeCall(service, context);
}

}  // namespace glimpse::server
