#!/usr/bin/env bash
# Builds the fuzz targets with clang-14's libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer (outside Bazel)
# and runs each one: the model loaders (onnx_import, convoy_graph, model_config) for FUZZ_SECONDS (default 20) each,
# the inference-request decoder (infer_request) for FUZZ_RUNS executions (default 1,000,000) with its
# structure-aware mutator, and the HTTP/REST JSON request codec in front of the same decoder (http_infer_json) for
# FUZZ_RUNS executions with a dictionary of the protocol's JSON keys. Sanitizer reports abort the run (-fno-sanitize-recover) and fail the script. Crashing
# inputs land in $FUZZ_OUT (default /tmp/convoy-fuzz); each target's last lines (executions, exec/s, coverage) are
# printed, and a summary line per target goes to $FUZZ_OUT/summary.txt.
#
#   tests/fuzz/run_fuzzers.sh                           # all five targets (clang builds take a few minutes once)
#   FUZZ_RUNS=200000 tests/fuzz/run_fuzzers.sh infer_request
#   FUZZ_SECONDS=300 tests/fuzz/run_fuzzers.sh onnx_import
#   tests/fuzz/run_fuzzers.sh --replay infer_request CRASH_FILE   # rerun one input under the sanitizers
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
out="${FUZZ_OUT:-/tmp/convoy-fuzz}"
seconds="${FUZZ_SECONDS:-20}"
runs="${FUZZ_RUNS:-1000000}"
replay=""
if [ "${1:-}" = "--replay" ]; then
  replay="$3"
  set -- "$2"
fi
targets=("${@:-onnx_import convoy_graph model_config infer_request http_infer_json}")
read -r -a targets <<<"${targets[*]}"
mkdir -p "$out"

# The code under test, compiled with coverage instrumentation and the sanitizers: the loaders with the graph passes
# and the reference interpreter; the request decoder with the signature code, the config parser and the generated
# protobuf messages (protoc, as Bazel runs it).
gen="$out/gen"
mkdir -p "$gen"
for proto in proto/model_config.proto proto/grpc_service.proto; do
  [ "$gen/${proto%.proto}.pb.cc" -nt "$proto" ] || protoc -I. --cpp_out="$gen" "$proto"
done
sources=(tests/fuzz/fuzz_entries.cc tests/fuzz/infer_request_fuzz.cc server/runtime/graph.cc
         server/runtime/shape_inference.cc server/runtime/reference_interpreter.cc server/runtime/passes/*.cc
         server/runtime/model_signature.cc server/repository/onnx_*.cc
         server/repository/convoy_graph_importer.cc server/repository/safetensors.cc server/repository/yaml_fields.cc
         server/repository/model_config.cc server/repository/model_names.cc server/grpc/infer_codec.cc
         server/grpc/infer_request_wire.cc server/imaging/image_decoder.cc server/imaging/image_resize.cc
         server/runtime/resize_lowering.cc server/runtime/unary_lowering.cc kernels/cpu/reference/conv_transpose2d.cc
         kernels/cpu/reference/resize.cc kernels/cpu/reference/layer_norm.cc kernels/cpu/reference/unary.cc
         kernels/common/problems.cc kernels/common/epilogue.cc
         server/inference/request_decoder.cc server/http/infer_json.cc
         kernels/common/dtype.cc kernels/common/tensor.cc "$gen/proto/model_config.pb.cc"
         "$gen/proto/grpc_service.pb.cc")
sources=($(printf '%s\n' "${sources[@]}" | grep -v '_test\.cc\|pass_test_graphs'))
absl_libs=$(ls /usr/lib/x86_64-linux-gnu/libabsl_*.so | sed 's|.*/lib\(absl_[a-z0-9_]*\)\.so|-l\1|' | tr '\n' ' ')
sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
flags=(-std=c++17 -O1 -g "${sanitize[@]}" -fsanitize=fuzzer-no-link -I. -I"$gen" -DONNX_NAMESPACE=onnx -DONNX_ML=1)

objdir="$out/obj"
mkdir -p "$objdir"
# An object is rebuilt when its source or any header of the tree is newer (headers are not tracked one by one).
newest_header="$(find kernels server tests proto -name '*.h' -newer "$objdir" 2>/dev/null | head -1)"
for src in "${sources[@]}"; do
  obj="$objdir/$(echo "${src#"$out"/}" | tr '/' '_').o"
  if [ -z "$newest_header" ] && [ "$obj" -nt "$src" ]; then continue; fi
  # RapidJSON 1.1.0's internal Stack adds an offset to its still-null pointer on its first push (undefined, never
  # dereferenced; fixed upstream after 1.1.0): the file that instantiates it is built without that one UBSan check.
  extra=()
  [ "$src" = server/http/infer_json.cc ] && extra=(-fno-sanitize=pointer-overflow)
  clang++-14 "${flags[@]}" "${extra[@]}" -c "$src" -o "$obj" &
  while [ "$(jobs -r | wc -l)" -ge 2 ]; do sleep 0.2; done
done
wait
touch "$objdir"
for src in "${sources[@]}"; do
  obj="$objdir/$(echo "${src#"$out"/}" | tr '/' '_').o"
  [ -f "$obj" ] || { echo "[fuzz] compiling $src failed"; exit 1; }
done

seed_corpus() {  # target, dir
  mkdir -p "$2"
  case "$1" in
    onnx_import) cp model_repo/resnet_classifier/1/model.onnx "$2/" 2>/dev/null || true ;;
    convoy_graph) { cat model_repo/simple_cnn/1/model.yaml; printf '\0'; cat model_repo/simple_cnn/1/model.safetensors; } >"$2/simple_cnn" ;;
    model_config) for f in model_repo/*/config.yaml; do cp "$f" "$2/$(basename "$(dirname "$f")").yaml"; done ;;
    infer_request|http_infer_json) rm -f "$2"/seed_*; CONVOY_FUZZ_WRITE_SEEDS="$2" "$3" -runs=0 "$2" >/dev/null 2>&1 || true ;;
  esac
}

status=0
: >"$out/summary.txt"
for t in "${targets[@]}"; do
  bin="$out/${t}_fuzzer"
  clang++-14 "${flags[@]}" -fsanitize=fuzzer $([ "$t" = http_infer_json ] && echo -fno-sanitize=pointer-overflow) "tests/fuzz/${t}_fuzzer.cc" "$objdir"/*.o -o "$bin" \
    -lonnx_proto -lgrpc++ -lgrpc -lgpr -lprotobuf -lyaml-cpp -lturbojpeg -lpng16 $absl_libs
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  if [ -n "$replay" ]; then
    "$bin" "$replay"
    exit $?
  fi
  corpus="$out/corpus_$t"
  seed_corpus "$t" "$corpus" "$bin"
  if [ "$t" = infer_request ]; then
    limits=(-runs="$runs" -max_len=65536)
    echo "[fuzz] $t for $runs executions"
  elif [ "$t" = http_infer_json ]; then
    printf '%s\n' '"{"' '"}"' '"["' '"]"' '":"' '","' '"\"inputs\""' '"\"outputs\""' '"\"name\""' \
      '"\"datatype\""' '"\"shape\""' '"\"data\""' '"\"parameters\""' '"\"binary_data_size\""' \
      '"\"binary_data\""' '"\"binary_data_output\""' '"\"classification\""' '"\"priority\""' '"\"timeout\""' \
      '"\"id\""' '"\"FP32\""' '"\"FP16\""' '"\"UINT8\""' '"\"INT64\""' '"\"BYTES\""' '"true"' '"null"' \
      '"-1"' '"1e39"' '"9223372036854775808"' >"$out/http_infer_json.dict"
    limits=(-runs="$runs" -max_len=65536 -dict="$out/http_infer_json.dict")
    echo "[fuzz] $t for $runs executions"
  else
    limits=(-max_total_time="$seconds" -max_len=4000000)
    echo "[fuzz] $t for ${seconds}s"
  fi
  start=$(date +%s)
  if "$bin" "$corpus" "${limits[@]}" -rss_limit_mb=4096 -artifact_prefix="$out/${t}-" -print_final_stats=1 \
      >"$out/$t.log" 2>&1; then
    result=ok
  else
    result="FAILED (see $out/$t.log and $out/${t}-*)"
    status=1
  fi
  tail -12 "$out/$t.log"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t.log" | grep -o '[0-9]*$' || echo "?")
  line="[fuzz] $t: $result, $execs executions in $(( $(date +%s) - start )) s"
  echo "$line" | tee -a "$out/summary.txt"
done
exit $status
