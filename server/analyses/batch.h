// AnalyzeBatch: the same analyses of many images in one bidirectional stream. Each image runs
// through the same per-analysis code and runner as its own RPC (server/analyses/histogram.h, ...),
// as its caller's tenant at batch priority, while later images are read and decoded on the host
// pool. A call has at most a bounded number of images in flight (read and not yet answered and
// sent,
// --batch-in-flight): at the bound it issues no further read, so gRPC's flow control holds back a
// fast sender, and a reader that stops reading holds only its own images and result leases.
#ifndef GLIMPSE_SERVER_ANALYSES_BATCH_H_
#define GLIMPSE_SERVER_ANALYSES_BATCH_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>

#include "glimpse/v1/image_analytics.pb.h"
#include "server/analyses/runner.h"

namespace glimpse::server {

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ServeAnalyzeBatch(
    ServiceEnv& service, grpc::CallbackServerContext* context);

// AnalyzeBatch calls of this process, all servers in it together (for tests and monitoring).
struct BatchStats {
  int64_t calls_open = 0;        // calls not yet finished
  int64_t images_in_flight = 0;  // images read and not yet answered and sent, all calls
  uint32_t peak_in_flight = 0;   // the most images one call had in flight at once
};
BatchStats GetBatchStats();
// Sets peak_in_flight back to 0.
void ResetBatchPeak();

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_BATCH_H_
