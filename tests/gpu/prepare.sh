#!/bin/bash
# Makes what a GPU machine (CUDA 13 driver and runtime, cuDNN 9, no Bazel, no internet) needs for the GPU check, in
# tests/gpu/out/ (git-ignored: carry it there with the tree):
#   out/gpu_check          the check binary, built by Bazel (//tests/gpu:gpu_check: the same target CI builds, so it
#                          never drifts from the sources), static CUDA runtime, cuDNN dlopen'ed
#   out/lib/               every shared library it needs (ldd) except the system's own core (glibc, libstdc++,
#                          libgcc_s, libm) and the NVIDIA driver: Abseil, protobuf, yaml-cpp, onnx_proto, OpenBLAS...
#   out/loader/            this machine's glibc dynamic loader and core libraries, used only when the GPU machine's
#                          glibc is older than the one the binary was built against (run_gpu_check.sh decides)
#   out/manifest.txt       what was built from which commit
# lib/ and loader/ are then packed into out/libraries.tar.gz (run_gpu_check.sh unpacks it): a bundle sent to a GPU machine
# with the working tree is kept under 64 MiB, and oneDNN alone is 38 MB unpacked.
# Checks that the binary starts (--probe) with only out/lib on the library path, and that without a GPU it says so
# cleanly. Usage: tests/gpu/prepare.sh   (then carry tests/gpu/out; on the GPU machine run tests/gpu/run_gpu_check.sh)
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$here/out"
cd "$repo"
[[ -x /usr/local/cuda/bin/nvcc || -n "${CUDA_PATH:-}" ]] || { echo "prepare: no CUDA toolkit here (nvcc)"; exit 1; }

bazel build --color=no --curses=no //tests/gpu:gpu_check
binary="$(bazel info bazel-bin 2>/dev/null)/tests/gpu/gpu_check"
[[ -x "$binary" ]] || { echo "prepare: $binary was not built (is CUDA detected? see docs/building.md)"; exit 1; }

rm -rf "$out/lib" "$out/loader" "$out/gpu_check" "$out/libraries.tar.gz"
mkdir -p "$out/lib" "$out/loader"
cp "$binary" "$out/gpu_check"
chmod u+w "$out/gpu_check"

# Core libraries every Linux has (kept in out/loader only, for the old-glibc fallback) and driver libraries that
# must come from the GPU machine itself.
core='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so'
driver='^(libcuda|libnvidia-|libcudnn)'
ldd "$binary" | awk '/=> \//{print $1, $3} /^\s*\/.*ld-linux/{print "ld-linux-x86-64.so.2", $1}' | sort -u |
  while read -r name path; do
    if [[ "$name" =~ $driver ]]; then continue; fi
    if [[ "$name" =~ $core ]]; then cp -L "$path" "$out/loader/$name"; else cp -L "$path" "$out/lib/$name"; fi
  done
[[ -f "$out/loader/ld-linux-x86-64.so.2" ]] || cp -L /lib64/ld-linux-x86-64.so.2 "$out/loader/"

{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "commit: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "glibc: $(ldd --version | head -1)"
  echo "newest GLIBC symbol version the binary needs: $(objdump -T "$out/gpu_check" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)"
  echo "bundled libraries: $(ls "$out/lib" | tr '\n' ' ')"
} > "$out/manifest.txt"

# It must start with only the bundle on the library path (what a GPU machine without Abseil etc. gives it).
LD_LIBRARY_PATH="$out/lib" "$out/gpu_check" --probe
missing="$(LD_LIBRARY_PATH="$out/lib" ldd "$out/gpu_check" | grep 'not found' || true)"
[[ -z "$missing" ]] || { echo "prepare: unresolved libraries: $missing"; exit 1; }
# Through the bundled loader too (the fallback for a GPU machine with an older glibc).
"$out/loader/ld-linux-x86-64.so.2" --library-path "$out/lib:$out/loader" "$out/gpu_check" --probe

# Without a GPU the driver must say so cleanly (never crash or hang).
if ! nvidia-smi > /dev/null 2>&1; then
  set +e
  LD_LIBRARY_PATH="$out/lib" timeout 60 "$out/gpu_check" --budget_s=30 --out="$out/no_gpu.txt" > /dev/null 2>&1
  status=$?
  set -e
  if [[ $status -ne 1 ]] || ! grep -q "^FAIL device: no CUDA device" "$out/no_gpu.txt"; then
    echo "prepare: without a GPU the check should fail cleanly with 'FAIL device: no CUDA device' (status $status)"
    cat "$out/no_gpu.txt"
    exit 1
  fi
  rm -f "$out/no_gpu.txt"
fi
# The bundle travels to the GPU machine with the working tree, under 64 MiB: lib/ and loader/ travel packed (run_gpu_check.sh
# unpacks them), 68 MB unpacked -> about 16 MB.
tar -czf "$out/libraries.tar.gz" -C "$out" lib loader
rm -rf "$out/lib" "$out/loader"
total_kib="$(du -sk "$out" | cut -f1)"
if (( total_kib > 56 * 1024 )); then
  echo "prepare: $out is $((total_kib / 1024)) MiB: over the 56 MiB this script allows (the carry limit is 64 MiB with the tree)"
  exit 1
fi
echo "prepare: OK: $(du -sh "$out" | cut -f1) in $out (binary $(du -h "$out/gpu_check" | cut -f1), libraries packed);" \
  "carry tests/gpu/out to the GPU machine and run tests/gpu/run_gpu_check.sh there"
