"""grpc.health.v1.Health/Check, with message classes built from the descriptor that setup.py
compiled from proto/grpc/health/v1/health.proto (a private pool: no clash with grpcio-health)."""
import pathlib

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_pool = descriptor_pool.DescriptorPool()
for _file in descriptor_pb2.FileDescriptorSet.FromString(
        (pathlib.Path(__file__).parent / "health.desc").read_bytes()).file:
    _pool.Add(_file)
_request_descriptor = _pool.FindMessageTypeByName("grpc.health.v1.HealthCheckRequest")
_response_descriptor = _pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse")
if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22; GetPrototype is gone in 5.x
    HealthCheckRequest = message_factory.GetMessageClass(_request_descriptor)
    HealthCheckResponse = message_factory.GetMessageClass(_response_descriptor)
else:  # protobuf 3.x-4.21 (Debian 12: 4.21.12)
    _factory = message_factory.MessageFactory(_pool)
    HealthCheckRequest = _factory.GetPrototype(_request_descriptor)
    HealthCheckResponse = _factory.GetPrototype(_response_descriptor)
_status_names = _response_descriptor.enum_types_by_name["ServingStatus"].values_by_number


def check_method(channel):
    return channel.unary_unary("/grpc.health.v1.Health/Check",
                               request_serializer=HealthCheckRequest.SerializeToString,
                               response_deserializer=HealthCheckResponse.FromString)


def status_name(response):
    value = _status_names.get(response.status)
    return value.name if value is not None else str(response.status)
