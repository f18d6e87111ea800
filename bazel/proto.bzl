"""cc_grpc_proto_library: C++ (and optionally gRPC) code generated from .proto files with Debian's protoc.

    cc_grpc_proto_library(
        name = "inference_cc_proto",
        srcs = ["grpc_service.proto"],
        deps = [":model_config_cc_proto"],   # other cc_grpc_proto_library targets this one imports
        grpc = True,                          # also run grpc_cpp_plugin
    )

Imports are resolved from the workspace root: `import "proto/model_config.proto";`.
"""

def cc_grpc_proto_library(name, srcs, deps = [], grpc = False, visibility = None, proto_deps_srcs = []):
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    plugin = " --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) --grpc_out=$(GENDIR)" if grpc else ""
    native.genrule(
        name = name + "_codegen",
        srcs = srcs + proto_deps_srcs,
        outs = outs,
        cmd = "protoc -I. --cpp_out=$(GENDIR)" + plugin + " $(SRCS)".replace("$(SRCS)", " ".join(["$(location %s)" % s for s in srcs])),
        message = "protoc " + " ".join(srcs),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        copts = ["-Wno-unused-parameter", "-Wno-error"],
        deps = deps + ["@system//:protobuf"] + (["@system//:grpc"] if grpc else []),
        visibility = visibility,
    )
    native.filegroup(
        name = name + "_srcs",
        srcs = srcs + proto_deps_srcs,
        visibility = visibility,
    )
