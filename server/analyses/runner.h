// The one path every call that needs the GPU takes: the image reference resolved, the request
// mapped to gpu/ options, a job queued with the call's deadline and cancellation, its result bytes
// leased, its time recorded, and its status turned into the gRPC answer. The analyses
// (server/analyses/histogram.h, ...) supply only the mapping, the work and the answer.
//
//   grpc::ServerUnaryReactor* ImageAnalyticsService::Histogram(
//       grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
//       v1::HistogramResponse* response) {
//     return ServeUnary<HistogramAnalysis>(env_, context, *request, response);
//   }
//   // A streamed analysis: return ServeStream<CompactionAnalysis>(env_, context, *request);
#ifndef GLIMPSE_SERVER_ANALYSES_RUNNER_H_
#define GLIMPSE_SERVER_ANALYSES_RUNNER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/str.h"
#include "server/access/access.h"
#include "server/access/rate_limit.h"
#include "server/ingest/image_ref.h"
#include "server/rpc/call.h"
#include "server/rpc/limits.h"
#include "server/store/shared_images.h"
#include "server/worker/gpu_worker.h"
#include "server/worker/host_pool.h"
#include "server/worker/job_class.h"

namespace glimpse::server {

// What the handlers share.
class RedisStore;
struct ServiceEnv {
  GpuWorker& worker;
  const ServiceLimits& limits;
  HostPool& pool;
  RedisStore* redis = nullptr;     // the shared image store, if any
  const Access* access = nullptr;  // who may call; nullptr = anyone, as the one tenant ""
  RateLimiter* rate = nullptr;     // --tenant-rate; nullptr = no limit
  CallRecording recording = CallRecording::kLogAndCount;
};

// Takes the call's token of its tenant's rate limit (server/access/rate_limit.h), then calls `next`
// with OK or the refusal: at once, or on Redis's pool when the limit is shared. Every call that
// queues GPU work takes one, once, after Admit and before its image is read or anything is queued.
inline void TakeRateToken(ServiceEnv& service, const CallRecord& record,
                          std::function<void(absl::Status)> next) {
  if (service.rate == nullptr || !service.rate->enabled()) return next(absl::OkStatus());
  service.rate->Take(record.job_class().tenant, std::move(next));
}

// Admits the call as its tenant (set on `record`, with the class of its GPU jobs and whether it is
// logged and counted), or UNAUTHENTICATED; INVALID_ARGUMENT for bad scheduling metadata
// (server/worker/job_class.h). Every ImageAnalytics call passes here before it reads its request.
inline absl::Status Admit(const ServiceEnv& service, const grpc::CallbackServerContext* context,
                          CallRecord& record) {
  record.set_recording(service.recording);
  double weight = 1;
  if (service.access != nullptr) {
    absl::StatusOr<std::string> tenant = service.access->Authenticate(*context);
    if (!tenant.ok()) return tenant.status();
    if (!tenant->empty()) weight = service.access->WeightOf(*tenant);
    record.set_tenant(*std::move(tenant));
  }
  absl::StatusOr<JobClass> job_class =
      ClassifyCall(context->client_metadata(), context->peer(), record.tenant(), weight);
  if (!job_class.ok()) return job_class.status();
  record.set_job_class(*std::move(job_class));
  return absl::OkStatus();
}

// Admits a call with one request (Admit), then parses the request from `wire`, the bytes gRPC
// received: the request, kept by `call` for its life, or why the call is refused.
template <typename Request, typename Call>
absl::StatusOr<const Request*> AdmitRequest(const ServiceEnv& service,
                                            const grpc::CallbackServerContext* context, Call& call,
                                            const grpc::ByteBuffer& wire) {
  if (absl::Status s = Admit(service, context, call.record); !s.ok()) return s;
  return call.template ParseRequest<Request>(wire);
}

// The names of an analysis's variants that gpu/ parses back to themselves, "auto" first.
template <typename Enum, typename NameFn, typename ParseFn>
std::vector<std::string> VariantNames(NameFn name, ParseFn parse) {
  std::vector<std::string> names = {"auto"};
  for (int i = 1; i < 32; ++i) {
    const Enum e = static_cast<Enum>(i);
    const std::string_view n = name(e);
    if (n.empty() || n == "auto") continue;
    std::optional<Enum> back = parse(n);
    if (back && *back == e) names.emplace_back(n);
  }
  return names;
}

// VariantNames less those `available` refuses (a variant the device cannot run).
template <typename Enum, typename NameFn, typename ParseFn, typename AvailableFn>
std::vector<std::string> VariantsAvailable(NameFn name, ParseFn parse, AvailableFn available) {
  std::vector<std::string> names = VariantNames<Enum>(name, parse);
  std::erase_if(names, [&](const std::string& n) { return !available(*parse(n)).ok(); });
  return names;
}

// The variant named in a request, or INVALID_ARGUMENT listing the names gpu/ knows.
template <typename Enum, typename NameFn, typename ParseFn>
absl::StatusOr<Enum> ParseVariant(const std::string& s, std::string_view analysis, NameFn name,
                                  ParseFn parse) {
  if (std::optional<Enum> v = parse(s)) return *v;
  std::string names;
  for (const std::string& n : VariantNames<Enum>(name, parse)) {
    StrAppend(&names, names.empty() ? "" : ", ", n);
  }
  return absl::InvalidArgumentError(
      StrCat("variant must be one of ", names, " for ", analysis, ", got \"", s, "\""));
}

// Ends a call with `status`, whatever its kind.
template <typename Call>
void EndCall(Call* call, const absl::Status& status) {
  if constexpr (requires { call->Close(status); }) {
    call->Close(status);
  } else {
    call->Answer(status);
  }
}

// Queues `work` for `call`, charged to the call's job class. A non-OK status from the work, or
// the reason the job was refused or dropped unrun (cancelled, deadline passed, shutdown), ends
// the call; OK means the work has answered the call or handed the answer on. `pixels`: of the
// image the work reads, for the scheduler's estimate of its cost (0: unknown; the estimate is
// then the method's mean per job).
template <typename Call>
void Submit(GpuWorker& worker, Call* call, std::string method,
            std::chrono::system_clock::time_point deadline, uint64_t result_bytes,
            std::function<absl::Status(GpuEnv&, Lease)> work, uint64_t pixels = 0) {
  Job job;
  job.method = std::move(method);
  job.result_bytes = result_bytes;
  job.job_class = call->record.job_class();
  job.pixels = pixels;
  job.run = [call, work = std::move(work)](GpuEnv& env, Lease lease,
                                           std::chrono::nanoseconds queued) {
    call->record.add_queue(queued);
    if (absl::Status s = work(env, std::move(lease)); !s.ok()) EndCall(call, s);
  };
  job.drop = [call](const absl::Status& s) { EndCall(call, s); };
  job.cancelled = [call] { return call->cancelled(); };
  job.deadline = deadline;
  if (absl::Status s = worker.Enqueue(std::move(job)); !s.ok()) EndCall(call, s);
}

template <typename A>
void RunUnary(ServiceEnv& service, UnaryCall* call, typename A::Response* response,
              std::shared_ptr<const Input> input, const typename A::Options& options,
              std::chrono::system_clock::time_point deadline);

// A unary analysis A provides:
//   kMethod; Request, Response, Options;
//   static absl::StatusOr<Options> MapOptions(const Request&);              (pure)
//   static absl::StatusOr<uint64_t> ResultBytes(const gpu::ImageDesc&, const Options&,
//                                               uint64_t part_bytes);   (checks with gpu/)
//   static absl::Status Run(GpuEnv&, const Acquired&, const Options&, CallRecord&, Response*);
template <typename A>
grpc::ServerUnaryReactor* ServeUnary(ServiceEnv& service, grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer& wire, typename A::Response* response) {
  auto* call = new UnaryCall(std::string(A::kMethod));
  absl::StatusOr<const typename A::Request*> parsed =
      AdmitRequest<typename A::Request>(service, context, *call, wire);
  if (!parsed.ok()) return call->Answer(parsed.status()), call;
  const typename A::Request* request = *parsed;
  absl::StatusOr<typename A::Options> options = A::MapOptions(*request);
  if (!options.ok()) return call->Answer(options.status()), call;
  TakeRateToken(service, call->record,
                [&service, call, request, response, options = *options,
                 deadline = context->deadline()](absl::Status rated) {
                  if (!rated.ok()) return call->Answer(rated);
                  ResolveImageRef(
                      service, request->image(), call->record,
                      [&service, call, response, options,
                       deadline](absl::StatusOr<std::shared_ptr<const Input>> input) {
                        if (!input.ok()) return call->Answer(input.status());
                        RunUnary<A>(service, call, response, *std::move(input), options, deadline);
                      },
                      call->image_bytes());
                });
  return call;
}

template <typename A>
void RunUnary(ServiceEnv& service, UnaryCall* call, typename A::Response* response,
              std::shared_ptr<const Input> input, const typename A::Options& options,
              std::chrono::system_clock::time_point deadline) {
  absl::StatusOr<uint64_t> bytes =
      A::ResultBytes(input->desc, options, service.worker.results().part_bytes());
  if (!bytes.ok()) return call->Answer(bytes.status());
  // Read before `input` is moved into the work: the order in which a call's arguments are
  // evaluated is unspecified (clang moves it first).
  const uint64_t pixels = uint64_t(input->desc.pixels());
  Submit(
      service.worker, call, std::string(A::kMethod), deadline, *bytes,
      [call, response, in = std::move(input), options](GpuEnv& env, Lease lease) -> absl::Status {
        absl::StatusOr<std::unique_ptr<Acquired>> a = Acquire(env, *in, call->record);
        if (!a.ok()) return a.status();
        if (absl::Status s = A::Run(env, **a, options, call->record, response); !s.ok()) {
          return s;
        }
        *response->mutable_image() = std::move((*a)->info);
        *response->mutable_timing() = call->record.Timing();
        call->lease = std::move(lease);
        call->Answer(absl::OkStatus());
        return absl::OkStatus();
      },
      pixels);
}

// Where a streamed analysis sends its messages: its own RPC's stream, or its share of an Analyze
// call (server/analyses/analyze.h). The same contract as StreamCall's members of the same names.
template <typename Response>
class ResponseSink {
 public:
  explicit ResponseSink(CallRecord& call_record) : record(call_record) {}
  virtual ~ResponseSink() = default;
  virtual absl::Status Send(std::vector<Response> messages, Lease lease,
                            std::function<void()> drained = nullptr) = 0;
  // OK: the analysis's result is complete.
  virtual void Close(const absl::Status& status) = 0;
  virtual bool cancelled() const = 0;
  CallRecord& record;
};

// The sink of a streamed analysis's own RPC.
template <typename Response>
class StreamCallSink final : public ResponseSink<Response> {
 public:
  explicit StreamCallSink(StreamCall<Response>* call)
      : ResponseSink<Response>(call->record), call_(call) {}
  absl::Status Send(std::vector<Response> messages, Lease lease,
                    std::function<void()> drained = nullptr) override {
    return call_->Send(std::move(messages), std::move(lease), std::move(drained));
  }
  void Close(const absl::Status& status) override { call_->Close(status); }
  bool cancelled() const override { return call_->cancelled(); }

 private:
  StreamCall<Response>* call_;
};

// The state of one streamed analysis, handed to its work on the worker (and on to host threads).
template <typename Response>
struct StreamWork {
  ServiceEnv* service;
  std::shared_ptr<ResponseSink<Response>> call;
  std::shared_ptr<const Input> input;
  std::chrono::system_clock::time_point deadline;
  std::string method;

  // Queues more work for the call (the next part of its result): run on the worker, with the
  // image acquired again, once `result_bytes` are free; its deadline and cancellation still count.
  void Continue(uint64_t result_bytes,
                std::function<absl::Status(GpuEnv&, const Acquired&, Lease)> work) const {
    // The job's work holds the sink, so the raw pointer Submit keeps outlives the job.
    Submit(
        service->worker, call.get(), method, deadline, result_bytes,
        [call = call, in = input, work = std::move(work)](GpuEnv& env,
                                                          Lease lease) -> absl::Status {
          absl::StatusOr<std::unique_ptr<Acquired>> a = Acquire(env, *in, call->record);
          if (!a.ok()) return a.status();
          return work(env, **a, std::move(lease));
        },
        uint64_t(input->desc.pixels()));
  }
};

// What a streamed analysis counts against the result buffer for its header and trailer messages.
inline constexpr uint64_t kStreamEndsBytes = 4096;

// A streamed analysis A provides kMethod; Request, Response, Options; MapOptions and ResultBytes
// as above (ResultBytes: the bytes of the first part), and
//   static absl::Status Run(const StreamWork<Response>&, GpuEnv&, const Acquired&,
//                           const Options&, Lease);
// which sends its messages through the call, closes it, or returns an error.
template <typename A>
grpc::ServerWriteReactor<grpc::ByteBuffer>* ServeStream(ServiceEnv& service,
                                                        grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer& wire) {
  auto* call = new StreamCall<typename A::Response>(std::string(A::kMethod));
  absl::StatusOr<const typename A::Request*> parsed =
      AdmitRequest<typename A::Request>(service, context, *call, wire);
  if (!parsed.ok()) return call->Close(parsed.status()), call;
  const typename A::Request* request = *parsed;
  absl::StatusOr<typename A::Options> options = A::MapOptions(*request);
  if (!options.ok()) return call->Close(options.status()), call;
  TakeRateToken(
      service, call->record,
      [&service, call, request, options = *options,
       deadline = context->deadline()](absl::Status rated) {
        if (!rated.ok()) return call->Close(rated);
        ResolveImageRef(
            service, request->image(), call->record,
            [&service, call, options,
             deadline](absl::StatusOr<std::shared_ptr<const Input>> input) {
              if (!input.ok()) return call->Close(input.status());
              absl::StatusOr<uint64_t> bytes =
                  A::ResultBytes((*input)->desc, options, service.worker.results().part_bytes());
              if (!bytes.ok()) return call->Close(bytes.status());
              StreamWork<typename A::Response> w{
                  &service, std::make_shared<StreamCallSink<typename A::Response>>(call),
                  *std::move(input), deadline, std::string(A::kMethod)};
              w.Continue(*bytes, [w, options](GpuEnv& env, const Acquired& a, Lease lease) {
                return A::Run(w, env, a, options, std::move(lease));
              });
            },
            call->image_bytes());
      });
  return call;
}

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_RUNNER_H_
