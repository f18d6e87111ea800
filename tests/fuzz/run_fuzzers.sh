#!/usr/bin/env bash
# Builds the loader fuzz targets with clang-14's libFuzzer + AddressSanitizer (outside Bazel) and runs each for
# FUZZ_SECONDS (default 20), seeded with the sample models. About 2 minutes in all on 2 cores: ~40 s of clang builds,
# then 3 x 20 s of fuzzing. Crashing inputs land in $FUZZ_OUT (default /tmp/convoy-fuzz).
#
#   tests/fuzz/run_fuzzers.sh            # all three targets
#   FUZZ_SECONDS=300 tests/fuzz/run_fuzzers.sh onnx_import
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
out="${FUZZ_OUT:-/tmp/convoy-fuzz}"
seconds="${FUZZ_SECONDS:-20}"
targets=("${@:-onnx_import convoy_graph model_config}")
read -r -a targets <<<"${targets[*]}"
mkdir -p "$out"

sources=(tests/fuzz/fuzz_entries.cc server/runtime/graph.cc server/runtime/shape_inference.cc
         server/runtime/reference_interpreter.cc server/runtime/passes/*.cc server/repository/onnx_importer.cc
         server/repository/onnx_proto_reader.cc server/repository/convoy_graph_importer.cc
         server/repository/safetensors.cc server/repository/yaml_fields.cc server/repository/model_config.cc)
sources=($(printf '%s\n' "${sources[@]}" | grep -v '_test\|pass_test_graphs'))
absl_libs=$(ls /usr/lib/x86_64-linux-gnu/libabsl_*.so | sed 's|.*/lib\(absl_[a-z0-9_]*\)\.so|-l\1|' | tr '\n' ' ')
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer-no-link,address -I. -DONNX_NAMESPACE=onnx -DONNX_ML=1)

objdir="$out/obj"
mkdir -p "$objdir"
for src in "${sources[@]}"; do
  obj="$objdir/$(echo "$src" | tr '/' '_').o"
  [ "$obj" -nt "$src" ] || clang++-14 "${flags[@]}" -c "$src" -o "$obj" &
  while [ "$(jobs -r | wc -l)" -ge 2 ]; do sleep 0.2; done
done
wait

seed_corpus() {  # target, dir
  mkdir -p "$2"
  case "$1" in
    onnx_import) cp model_repo/resnet_classifier/1/model.onnx "$2/" 2>/dev/null || true ;;
    convoy_graph) { cat model_repo/simple_cnn/1/model.yaml; printf '\0'; cat model_repo/simple_cnn/1/model.safetensors; } >"$2/simple_cnn" ;;
    model_config) cp model_repo/*/config.yaml "$2/" 2>/dev/null || true; for f in model_repo/*/config.yaml; do cp "$f" "$2/$(basename "$(dirname "$f")").yaml"; done ;;
  esac
}

for t in "${targets[@]}"; do
  bin="$out/${t}_fuzzer"
  clang++-14 "${flags[@]}" -fsanitize=fuzzer "tests/fuzz/${t}_fuzzer.cc" "$objdir"/*.o -o "$bin" \
    -lonnx_proto -lprotobuf -lyaml-cpp $absl_libs
  corpus="$out/corpus_$t"
  seed_corpus "$t" "$corpus"
  echo "[fuzz] $t for ${seconds}s"
  ASAN_OPTIONS=detect_leaks=1 "$bin" "$corpus" -max_total_time="$seconds" -max_len=4000000 -rss_limit_mb=4096 \
    -artifact_prefix="$out/${t}-" -print_final_stats=1 2>&1 | tail -5
done
