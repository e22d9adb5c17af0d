#include "client/authorization_channel.h"

#include <grpcpp/support/client_interceptor.h>

#include <utility>
#include <vector>

namespace glimpse::client {
namespace {

class AuthorizationInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit AuthorizationInterceptor(std::string value) : value_(std::move(value)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", value_});
    }
    methods->Proceed();
  }

 private:
  const std::string value_;
};

class AuthorizationInterceptors : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit AuthorizationInterceptors(std::string value) : value_(std::move(value)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new AuthorizationInterceptor(value_);
  }

 private:
  const std::string value_;
};

}  // namespace

std::shared_ptr<grpc::Channel> AuthorizationChannel(
    const std::string& target, const std::string& authorization,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!authorization.empty()) {
    interceptors.push_back(std::make_unique<AuthorizationInterceptors>(authorization));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args,
                                                                 std::move(interceptors));
}

}  // namespace glimpse::client
