// UploadImage: a client stream of an encoded file or raw pixels, stored on the GPU.
#ifndef GLIMPSE_SERVER_UPLOAD_H_
#define GLIMPSE_SERVER_UPLOAD_H_

#include <grpcpp/grpcpp.h>

#include "glimpse/v1/image_analytics.pb.h"
#include "server/runner.h"

namespace glimpse::server {

grpc::ServerReadReactor<v1::UploadImageRequest>* ServeUpload(ServiceEnv& service,
                                                             grpc::CallbackServerContext* context,
                                                             v1::UploadImageResponse* response);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_UPLOAD_H_
