// Analyses run as steps of a longer call: Analyze (several analyses of one image) and AnalyzeBatch
// (the same analyses of many images). Both plan their steps once from the request's v1::Analysis
// list against the registry (server/analyses/registry.h), and run each step on an image through
// the same runner as the analysis's own RPC, its messages going to a sink of the call's own.
//
//   using Start = std::function<void(MyCall*, size_t index, std::shared_ptr<const Input>,
//                                    uint64_t bytes)>;
//   std::vector<PlannedStep<Start>> steps;
//   absl::Status s = PlanSteps(header.analyses(), "MyCall takes the image once", MakeStart(),
//                              &steps);  // MakeStart: template operator()<A>(options) -> Start
//   ... steps[i].result_bytes(desc, part_bytes), then steps[i].start(call, i, input, bytes) ...
//   // and, in the call's Start<A>:  RunStep<A>(service, sink, input, options, bytes, deadline,
//   //                                          StrCat("MyCall/", A::kName));
#ifndef GLIMPSE_SERVER_ANALYSES_STEPS_H_
#define GLIMPSE_SERVER_ANALYSES_STEPS_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/repeated_ptr_field.h>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/str.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "server/analyses/registry.h"
#include "server/analyses/runner.h"
#include "server/rpc/status_util.h"

namespace glimpse::server {

// A call names 1 to this many analyses.
inline constexpr int kMaxAnalyses = 64;

// The field of message type `d` named `name` (the analyses' names are fields of v1::Analysis and
// v1::AnalyzeResponse); null if there is none.
inline const google::protobuf::FieldDescriptor* FieldNamed(const google::protobuf::Descriptor* d,
                                                           std::string_view name) {
  return d->FindFieldByName(std::string(name));
}

// One planned step: the analysis's name, its result bytes for an image (checking the options
// against it), and how the call starts it on an image.
template <typename Start>
struct PlannedStep {
  std::string name;
  std::function<absl::StatusOr<uint64_t>(const gpu::ImageDesc&, uint64_t part_bytes)> result_bytes;
  Start start;
};

namespace steps_internal {

// Plans `analysis` as the step of the registry entry whose field it sets.
template <typename Start, typename MakeStart, typename... A>
absl::Status PlanOne(AnalysisList<A...>, const v1::Analysis& analysis, std::string_view image_rule,
                     MakeStart& make_start, std::vector<PlannedStep<Start>>* steps) {
  absl::Status status;
  bool found = false;
  // Tries each entry in turn until one claims the analysis.
  (void)(([&] {
    const google::protobuf::FieldDescriptor* f = FieldNamed(v1::Analysis::descriptor(), A::kName);
    if (!analysis.GetReflection()->HasField(analysis, f)) return false;
    found = true;
    const auto& request =
        static_cast<const typename A::Request&>(analysis.GetReflection()->GetMessage(analysis, f));
    if (request.has_image()) {
      status = absl::InvalidArgumentError(StrCat(A::kName, ".image must be unset: ", image_rule));
      return true;
    }
    absl::StatusOr<typename A::Options> options = A::MapOptions(request);
    if (!options.ok()) {
      status = Annotate(options.status(), A::kName);
      return true;
    }
    steps->push_back({std::string(A::kName),
                      [o = *options](const gpu::ImageDesc& desc, uint64_t part_bytes) {
                        return A::ResultBytes(desc, o, part_bytes);
                      },
                      make_start.template operator()<A>(*options)});
    return true;
  }() || ...));
  if (!found) {
    std::string names;
    for (const std::string& n : AnalysisList<A...>::Names()) {
      StrAppend(&names, names.empty() ? "" : ", ", n);
    }
    return absl::InvalidArgumentError(StrCat("must set one analysis: ", names));
  }
  return status;
}

}  // namespace steps_internal

// Plans `analyses` (header.analyses of the call: 1 to kMaxAnalyses) into `steps`, in order.
// `image_rule` says why an analysis may not name its own image. `make_start.template
// operator()<A>(options)` returns the call's Start for analysis A with its mapped options.
// Errors name header.analyses[i] and the analysis.
template <typename Start, typename MakeStart>
absl::Status PlanSteps(const google::protobuf::RepeatedPtrField<v1::Analysis>& analyses,
                       std::string_view image_rule, MakeStart make_start,
                       std::vector<PlannedStep<Start>>* steps) {
  const int n = analyses.size();
  if (n < 1 || n > kMaxAnalyses) {
    return absl::InvalidArgumentError(
        StrCat("header.analyses must hold 1 to ", kMaxAnalyses, " analyses, got ", n));
  }
  for (int i = 0; i < n; ++i) {
    if (absl::Status s =
            steps_internal::PlanOne(kAnalyses, analyses[i], image_rule, make_start, steps);
        !s.ok()) {
      return Annotate(s, StrCat("header.analyses[", i, "]"));
    }
  }
  return absl::OkStatus();
}

// A step's own record (its method, the call's tenant and job class), constructed before the sink
// that refers to it: a step's sink derives from it first.
struct StepRecord {
  StepRecord(std::string_view method, const CallRecord& call) : own_record(std::string(method)) {
    own_record.set_tenant(call.tenant());
    own_record.set_job_class(call.job_class());
  }
  CallRecord own_record;
};

// Moves `message`, a part of analysis A's result, into `out` as step `step`'s part: the field of
// v1::AnalyzeResponse named A::kName (`field`, from FieldNamed).
template <typename A>
void WrapPart(typename A::Response& message, size_t step,
              const google::protobuf::FieldDescriptor* field, v1::AnalyzeResponse* out) {
  out->set_index(uint32_t(step));
  static_cast<typename A::Response*>(out->GetReflection()->MutableMessage(out, field))
      ->Swap(&message);
}

template <typename A>
concept UnaryAnalysis = requires(GpuEnv& env, const Acquired& a, const typename A::Options& o,
                                 CallRecord& r, typename A::Response* response) {
                          { A::Run(env, a, o, r, response) } -> std::same_as<absl::Status>;
                        };

// Runs analysis A on `in` as a step: queued on the worker under `method` with the call's
// deadline, `bytes` of result leased; its messages go to `sink` (a ResponseSink<A::Response>),
// which is closed OK once the whole result is sent. A unary analysis's one response carries the
// image's info and the step's timing, as its own RPC's does.
template <typename A, typename Sink>
void RunStep(ServiceEnv& service, std::shared_ptr<Sink> sink, std::shared_ptr<const Input> in,
             const typename A::Options& options, uint64_t bytes,
             std::chrono::system_clock::time_point deadline, std::string method) {
  if constexpr (UnaryAnalysis<A>) {
    const uint64_t pixels = uint64_t(in->desc.pixels());
    // The job holds a copy of `sink`; this one keeps it alive until Submit returns, as a job
    // the queue refuses is destroyed inside Submit before the refusal is sent to the sink.
    Submit(
        service.worker, sink.get(), std::move(method), deadline, bytes,
        [sink, in = std::move(in), options](GpuEnv& env, Lease lease) -> absl::Status {
          absl::StatusOr<std::unique_ptr<Acquired>> a = Acquire(env, *in, sink->record);
          if (!a.ok()) return a.status();
          std::vector<typename A::Response> out(1);
          if (absl::Status s = A::Run(env, **a, options, sink->record, &out[0]); !s.ok()) {
            return s;
          }
          *out[0].mutable_image() = std::move((*a)->info);
          *out[0].mutable_timing() = sink->record.Timing();
          if (absl::Status s = sink->Send(std::move(out), std::move(lease)); !s.ok()) return s;
          sink->Close(absl::OkStatus());
          return absl::OkStatus();
        },
        pixels);
  } else {
    StreamWork<typename A::Response> w{&service, std::move(sink), std::move(in), deadline,
                                       std::move(method)};
    w.Continue(bytes, [w, options](GpuEnv& env, const Acquired& a, Lease lease) {
      return A::Run(w, env, a, options, std::move(lease));
    });
  }
}

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_STEPS_H_
