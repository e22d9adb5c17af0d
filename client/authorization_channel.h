// A channel whose every call carries an `authorization` metadata value (e.g. "Bearer <token>"),
// health checks included. gRPC sends call credentials only over TLS; a token is also meant for
// plaintext servers on a private network, so it goes through an interceptor instead.
#ifndef GLIMPSE_CLIENT_AUTHORIZATION_CHANNEL_H_
#define GLIMPSE_CLIENT_AUTHORIZATION_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace glimpse::client {

// `authorization` "" = a plain channel (no metadata added).
std::shared_ptr<grpc::Channel> AuthorizationChannel(
    const std::string& target, const std::string& authorization,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args = {});

}  // namespace glimpse::client

#endif  // GLIMPSE_CLIENT_AUTHORIZATION_CHANNEL_H_
