"""Our API as a Python client sees it, built from proto/ alone.

The descriptor set REPLAY_DESCRIPTOR_SET names is what `buf build proto -o FILE` writes from the
repository's proto/ directory and nothing else (google/protobuf/*.proto come with buf and protoc).
Messages and methods are looked up in it at run time, which is what generated code does ahead of
time: no file of this suite knows a field number.
"""

import os

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_pool = descriptor_pool.DescriptorPool()
with open(os.environ["REPLAY_DESCRIPTOR_SET"], "rb") as f:
    for _file in descriptor_pb2.FileDescriptorSet.FromString(f.read()).file:
        _pool.Add(_file)
_factory = message_factory.MessageFactory(_pool)


def message(full_name):
    """The message class of a fully-qualified message name, e.g. replay.common.v1.ErrorDetail."""
    return _factory.GetPrototype(_pool.FindMessageTypeByName(full_name))


def enum_value(full_name, value_name):
    """The number of one value of an enum, e.g. ("grpc.health.v1.HealthCheckResponse.ServingStatus", "SERVING")."""
    return _pool.FindEnumTypeByName(full_name).values_by_name[value_name].number


def method(channel, service, name):
    """A callable for one RPC on `channel`, its request and response types from the service's descriptor."""
    desc = _pool.FindServiceByName(service).methods_by_name[name]
    request = message(desc.input_type.full_name)
    response = message(desc.output_type.full_name)
    path = f"/{service}/{name}"
    serialize = request.SerializeToString
    deserialize = response.FromString
    if desc.client_streaming and desc.server_streaming:
        raise NotImplementedError("bidirectional streaming")
    if desc.client_streaming:
        call = channel.stream_unary(path, request_serializer=serialize, response_deserializer=deserialize)
    elif desc.server_streaming:
        call = channel.unary_stream(path, request_serializer=serialize, response_deserializer=deserialize)
    else:
        call = channel.unary_unary(path, request_serializer=serialize, response_deserializer=deserialize)
    call.request_type = request
    return call


ERROR_DETAIL_TYPE_URL = "type.googleapis.com/replay.common.v1.ErrorDetail"


def error_detail(err):
    """The contract's ErrorDetail of a failed call: its grpc-status-details-bin trailer read as a
    google.rpc.Status whose details hold one replay.common.v1.ErrorDetail; None without one."""
    for key, value in err.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        # google/rpc/status.proto ships in proto/ : no googleapis package needed.
        status = message("google.rpc.Status").FromString(value)
        if status.code != err.code().value[0]:
            raise AssertionError(f"google.rpc.Status code {status.code} differs from grpc-status {err.code()}")
        for detail in status.details:
            if detail.type_url == ERROR_DETAIL_TYPE_URL:
                return message("replay.common.v1.ErrorDetail").FromString(detail.value)
    return None
