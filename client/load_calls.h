// The calls `glimpse load` (client/load.cc) makes, one per request of a row: single analysis
// calls on a stored image, AnalyzeBatch calls of one stored image N times, and the combined jobs
// (upload and four calls, or one Analyze call); each is timed by the caller.
//
//   Outcome r = Call(connection, "histogram", image_id);
//   if (r.ok) samples.push_back(r.timing.gpu_ns());
#ifndef GLIMPSE_CLIENT_LOAD_CALLS_H_
#define GLIMPSE_CLIENT_LOAD_CALLS_H_

#include <google/protobuf/repeated_ptr_field.h>
#include <grpcpp/grpcpp.h>

#include <string>

#include "client/client.h"
#include "glimpse/v1/image_analytics.pb.h"

namespace glimpse::client {

// One call's result: `ok` when the call itself succeeded (its latency is a sample); `images`
// answered without error and `errors` with one (a failed single call: 0 and 1).
struct Outcome {
  bool ok = false;
  grpc::Status status;
  v1::Timing timing;
  int images = 0;
  int errors = 0;
  std::string error;  // the first error's message
};

// The status's counts as a single call's outcome.
void Settle(Outcome* out);
// `rpc` with the options every load call uses, as an Analysis (no image): the single calls, the
// Analyze calls and the AnalyzeBatch calls all run these. An unknown name exits with a usage error
// naming --rpcs.
v1::Analysis LoadAnalysis(const std::string& rpc);
// One call of `rpc` on the stored image `id`.
Outcome Call(const Connection& c, const std::string& rpc, const std::string& id);
// One AnalyzeBatch call: `analyses` on the stored image `id`, `n` times, answered as each image
// completes.
Outcome Batch(const Connection& c, const google::protobuf::RepeatedPtrField<v1::Analysis>& analyses,
              int n, const std::string& id);
// "upload_and_4": upload `pixels`, call each analysis by id, delete it; "analyze_4": one Analyze
// call that streams the image.
Outcome Combined(const Connection& c, const std::string& rpc, const std::string& pixels,
                 const v1::UploadHeader& header);
bool IsCombined(const std::string& rpc);
// A deterministic RGBA8 test image: smooth gradients plus xorshift noise.
std::string MakeImage(int width, int height);

}  // namespace glimpse::client

#endif  // GLIMPSE_CLIENT_LOAD_CALLS_H_
