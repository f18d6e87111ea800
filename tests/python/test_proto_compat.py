"""Wire-compatibility contract between Convoy's proto/ files and the published protocols.

Compiles proto/*.proto with protoc into descriptors and compares them with the descriptors generated from the
published files that clients use: tritonclient's (KServe v2 + Triton extensions, Triton's model configuration) and
grpcio-health-checking's (grpc.health.v1). For every message Convoy declares: the same full name, and for every field
the same number, type, label, referenced type and oneof; every enum value the same number; every RPC the same
request, response and streaming shape. A published field Convoy leaves out must have its number reserved. Finally
messages built with tritonclient's classes parse with Convoy's descriptors without loss.
"""

import pathlib
import random
import shutil
import subprocess

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf import json_format, unknown_fields

from grpc_health.v1 import health_pb2
from tritonclient.grpc import model_config_pb2, service_pb2

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
CONVOY_FILES = ["proto/grpc_service.proto", "proto/model_config.proto", "proto/health.proto"]

# RPCs the Convoy server answers (the rest are declared and answer UNIMPLEMENTED).
REQUIRED_RPCS = ["ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
                 "ModelStreamInfer", "ModelConfig", "ModelStatistics", "RepositoryIndex", "RepositoryModelLoad",
                 "RepositoryModelUnload"]

# ModelConfig fields perf_analyzer and tritonclient read; Convoy must declare them.
REQUIRED_MODEL_CONFIG_FIELDS = {
    "ModelConfig": ["name", "platform", "backend", "max_batch_size", "input", "output", "version_policy",
                    "instance_group", "dynamic_batching", "optimization", "parameters", "model_transaction_policy"],
    "ModelInput": ["name", "data_type", "format", "dims", "reshape", "is_shape_tensor"],
    "ModelOutput": ["name", "data_type", "dims", "reshape", "is_shape_tensor"],
    "ModelDynamicBatching": ["preferred_batch_size", "max_queue_delay_microseconds", "preserve_ordering",
                             "priority_levels", "default_priority_level", "default_queue_policy",
                             "priority_queue_policy"],
    "ModelQueuePolicy": ["timeout_action", "default_timeout_microseconds", "allow_timeout_override",
                         "max_queue_size"],
}


@pytest.fixture(scope="module")
def convoy_files():
    """Convoy's proto files compiled by protoc, as FileDescriptorProtos keyed by file name."""
    protoc = shutil.which("protoc")
    assert protoc, "protoc not found: run tools/setup.sh (Debian package protobuf-compiler)"
    out = subprocess.run([protoc, f"-I{REPO_ROOT}", "--descriptor_set_out=/dev/stdout", "--include_imports",
                          *CONVOY_FILES], cwd=REPO_ROOT, check=True, capture_output=True).stdout
    files = descriptor_pb2.FileDescriptorSet.FromString(out).file
    return {f.name: f for f in files}


def published(module):
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)
    return proto


def reserved_numbers(message):
    return {n for r in message.reserved_range for n in range(r.start, r.end)}


def compare_enum(ours, theirs, where):
    assert ours.name == theirs.name, where
    theirs_values = {v.name: v.number for v in theirs.value}
    for value in ours.value:
        assert value.name in theirs_values, f"{where}.{value.name}: not in the published enum"
        assert value.number == theirs_values[value.name], f"{where}.{value.name}: number differs"


def compare_message(ours, theirs, where):
    """Asserts `ours` is a wire-compatible subset of `theirs`; returns the number of fields compared."""
    theirs_fields = {f.name: f for f in theirs.field}
    compared = 0
    for field in ours.field:
        assert field.name in theirs_fields, f"{where}.{field.name}: not in the published message"
        ref = theirs_fields[field.name]
        for attr in ("number", "type", "label", "type_name"):
            assert getattr(field, attr) == getattr(ref, attr), \
                f"{where}.{field.name}: {attr} is {getattr(field, attr)!r}, published {getattr(ref, attr)!r}"
        ours_oneof = ours.oneof_decl[field.oneof_index].name if field.HasField("oneof_index") else None
        theirs_oneof = theirs.oneof_decl[ref.oneof_index].name if ref.HasField("oneof_index") else None
        assert ours_oneof == theirs_oneof, f"{where}.{field.name}: oneof {ours_oneof}, published {theirs_oneof}"
        compared += 1
    declared = {f.name for f in ours.field}
    for ref in theirs.field:
        if ref.name not in declared:
            assert ref.number in reserved_numbers(ours), \
                f"{where}: published field {ref.name} = {ref.number} is left out but its number is not reserved"
    assert ours.options.map_entry == theirs.options.map_entry, f"{where}: map-entry flag differs"
    theirs_nested = {m.name: m for m in theirs.nested_type}
    for nested in ours.nested_type:
        assert nested.name in theirs_nested, f"{where}.{nested.name}: not in the published message"
        compared += compare_message(nested, theirs_nested[nested.name], f"{where}.{nested.name}")
    theirs_enums = {e.name: e for e in theirs.enum_type}
    for enum in ours.enum_type:
        assert enum.name in theirs_enums, f"{where}.{enum.name}: not in the published message"
        compare_enum(enum, theirs_enums[enum.name], f"{where}.{enum.name}")
    return compared


def compare_file(ours, theirs):
    assert ours.package == theirs.package
    theirs_messages = {m.name: m for m in theirs.message_type}
    compared = 0
    for message in ours.message_type:
        assert message.name in theirs_messages, f"{message.name}: not in the published {theirs.name}"
        compared += compare_message(message, theirs_messages[message.name], message.name)
    theirs_enums = {e.name: e for e in theirs.enum_type}
    for enum in ours.enum_type:
        assert enum.name in theirs_enums, f"{enum.name}: not in the published {theirs.name}"
        compare_enum(enum, theirs_enums[enum.name], enum.name)
    return compared


def compare_services(ours, theirs):
    theirs_services = {s.name: s for s in theirs.service}
    for service in ours.service:
        assert service.name in theirs_services, f"service {service.name}: not published"
        theirs_methods = {m.name: m for m in theirs_services[service.name].method}
        for method in service.method:
            assert method.name in theirs_methods, f"rpc {method.name}: not published"
            ref = theirs_methods[method.name]
            for attr in ("input_type", "output_type", "client_streaming", "server_streaming"):
                assert getattr(method, attr) == getattr(ref, attr), f"rpc {method.name}: {attr} differs"


def test_grpc_service_matches_tritonclient(convoy_files):
    ours, theirs = convoy_files["proto/grpc_service.proto"], published(service_pb2)
    compared = compare_file(ours, theirs)
    compare_services(ours, theirs)
    # Convoy declares the whole published service file, so every published message and field is there too.
    assert {m.name for m in ours.message_type} == {m.name for m in theirs.message_type}
    assert compared >= 150, f"only {compared} fields compared"


def test_grpc_service_declares_every_rpc_convoy_serves(convoy_files):
    methods = {m.name for m in convoy_files["proto/grpc_service.proto"].service[0].method}
    assert set(REQUIRED_RPCS) <= methods, f"missing: {sorted(set(REQUIRED_RPCS) - methods)}"


def test_model_config_matches_tritonclient(convoy_files):
    compared = compare_file(convoy_files["proto/model_config.proto"], published(model_config_pb2))
    assert compared >= 60, f"only {compared} fields compared"


def test_model_config_declares_what_clients_read(convoy_files):
    messages = {m.name: m for m in convoy_files["proto/model_config.proto"].message_type}
    for message, fields in REQUIRED_MODEL_CONFIG_FIELDS.items():
        declared = {f.name for f in messages[message].field}
        assert set(fields) <= declared, f"{message} lacks {sorted(set(fields) - declared)}"


def test_health_matches_grpc_health_checking(convoy_files):
    ours, theirs = convoy_files["proto/health.proto"], published(health_pb2)
    compare_file(ours, theirs)
    compare_services(ours, theirs)
    assert [s.name for s in ours.service] == ["Health"]
    assert {m.name for m in ours.service[0].method} == {"Check", "Watch"}


def convoy_message_class(convoy_files, full_name):
    pool = descriptor_pool.DescriptorPool()
    for name in ("proto/model_config.proto", "proto/grpc_service.proto", "proto/health.proto"):
        pool.Add(convoy_files[name])
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def random_infer_request(rng):
    request = service_pb2.ModelInferRequest(model_name=f"m{rng.randrange(1000)}", model_version="1",
                                            id=str(rng.random()))
    request.parameters["priority"].uint64_param = rng.randrange(1, 5)
    request.parameters["timeout"].uint64_param = rng.randrange(1, 10**6)
    for i in range(rng.randrange(1, 4)):
        tensor = request.inputs.add(name=f"input{i}", datatype="FP32",
                                    shape=[rng.randrange(1, 9), 3, rng.randrange(1, 33), rng.randrange(1, 33)])
        tensor.parameters["binary_data_size"].int64_param = rng.randrange(1, 10**6)
        request.raw_input_contents.append(rng.randbytes(rng.randrange(1, 256)))
    request.outputs.add(name="logits").parameters["classification"].int64_param = rng.randrange(1, 10)
    return request


def test_tritonclient_requests_parse_losslessly(convoy_files):
    rng = random.Random()
    convoy_request_class = convoy_message_class(convoy_files, "inference.ModelInferRequest")
    for _ in range(20):
        sent = random_infer_request(rng)
        received = convoy_request_class.FromString(sent.SerializeToString())
        assert len(unknown_fields.UnknownFieldSet(received)) == 0
        assert json_format.MessageToDict(received) == json_format.MessageToDict(sent)
        assert service_pb2.ModelInferRequest.FromString(received.SerializeToString()) == sent


def test_convoy_model_config_reads_back_in_tritonclient(convoy_files):
    rng = random.Random()
    config_class = convoy_message_class(convoy_files, "inference.ModelConfig")
    config = config_class(name="resnet", platform="convoy", backend="convoy", max_batch_size=rng.randrange(1, 65))
    tensor = config.input.add(name="images", data_type=11, format=2, dims=[3, 224, 224])
    config.output.add(name="logits", data_type=11, dims=[rng.randrange(1, 1001)])
    config.dynamic_batching.preferred_batch_size.extend([4, 8])
    config.dynamic_batching.max_queue_delay_microseconds = rng.randrange(1, 10**4)
    config.dynamic_batching.priority_levels = 3
    config.dynamic_batching.priority_queue_policy[2].max_queue_size = rng.randrange(1, 100)
    config.instance_group.add(kind=2, count=rng.randrange(1, 4))
    read = model_config_pb2.ModelConfig.FromString(config.SerializeToString())
    assert read.WhichOneof("scheduling_choice") == "dynamic_batching"
    assert read.max_batch_size == config.max_batch_size
    assert list(read.input[0].dims) == list(tensor.dims)
    assert read.input[0].format == model_config_pb2.ModelInput.FORMAT_NCHW
    assert read.output[0].dims[0] == config.output[0].dims[0]
    assert read.dynamic_batching.priority_queue_policy[2].max_queue_size == \
        config.dynamic_batching.priority_queue_policy[2].max_queue_size
    assert read.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_CPU
    assert json_format.MessageToDict(read) == json_format.MessageToDict(config)
