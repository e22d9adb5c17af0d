// Analyze: several analyses of one image in one call. The image arrives like an upload (a client
// stream), inline, or as a stored id; each analysis runs through the same per-analysis code and
// runner as its own RPC (server/analyses/histogram.h, ...), its messages wrapped in AnalyzeResponse
// and sent in order on the one response stream.
//
//   // Requests parsed and responses encoded by the call itself (server/rpc/wire.h):
//   grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ImageAnalyticsService::Analyze(
//       grpc::CallbackServerContext* context) {
//     return ServeAnalyze(env_, context);
//   }
//   std::vector<std::string> names = AnalyzeAnalysisNames();  // "histogram", "integral_image", ...
#ifndef GLIMPSE_SERVER_ANALYSES_ANALYZE_H_
#define GLIMPSE_SERVER_ANALYSES_ANALYZE_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "glimpse/v1/image_analytics.pb.h"
#include "server/analyses/runner.h"

namespace glimpse::server {

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ServeAnalyze(
    ServiceEnv& service, grpc::CallbackServerContext* context);

// The analyses Analyze serves, by name, in the order of its table (exposed for tests: each must
// be a field of both v1::Analysis and v1::AnalyzeResponse).
std::vector<std::string> AnalyzeAnalysisNames();

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_ANALYZE_H_
