#!/usr/bin/env bash
#===- scripts/device-bundle.sh - binaries for the GPU machine --------------===#
#
# The GPU machine (the `device` tool) has CUDA but no LLVM/MLIR 22, no lit and
# no FileCheck, and fetches nothing. This builds, HERE, the binaries it runs,
# linked statically against MLIR/LLVM (-DSWITCHYARD_STATIC_LLVM=ON, in
# build-device/), strips them and writes a bundle (git-ignored):
#   (default) .device/: what bench/gpu-check.sh runs:
#     bin/{switchyard,switchyard-gpu-check,switchyard-cuda-unittests}
#   --bench   .device-bench/: what bench/gpu.sh runs: bin/switchyard-bench
# each with lib/libsentencepiece{,_train}.so.0 (no static library in Debian)
# and a MANIFEST (commit, date, sizes); binaries are xz-compressed when
# together over 60 MiB (the scripts unpack them). Then, on the device:
#   run(command="bench/gpu-check.sh --bundle .device", carry=[".device"])
#   run(command="bench/gpu.sh --bundle .device-bench", carry=[".device-bench"])
# (the tool carries at most 64 MiB with the working tree: one bundle a call).
#
# Usage: scripts/device-bundle.sh [--bench] [JOBS]   (default 2)
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-device
out=$root/.device
binaries="bin/switchyard bin/switchyard-gpu-check test/unit/switchyard-cuda-unittests"
if [ "${1:-}" = --bench ]; then
  out=$root/.device-bench
  binaries="bin/switchyard-bench"
  shift
fi
jobs=${1:-2}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$root")}

if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DSWITCHYARD_STATIC_LLVM=ON > "$build/cmake.log" 2>&1 ||
    { cat "$build/cmake.log"; exit 1; }
fi
targets=$(for binary in $binaries; do basename "$binary"; done)
ninja -C "$build" -j"$jobs" $targets

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for binary in $binaries; do
  strip -o "$out/bin/$(basename "$binary")" "$build/$binary"
done
# What the binaries still load: only universal libraries, and SentencePiece.
for library in $(ldd "$out"/bin/* | awk '/=>/ {print $3}' | sort -u); do
  case $(basename "$library") in
    libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|libz.so.*|libzstd.so.*|\
    ld-linux*|libdl.so.*|librt.so.*|libpthread.so.*) ;;
    libsentencepiece*) cp -L "$library" "$out/lib/" ;;
    *) echo "device-bundle: unexpected dependency $library" >&2; exit 1 ;;
  esac
done
size=$(du -sb "$out" | cut -f1)
if [ "$size" -gt $((60 * 1024 * 1024)) ]; then
  xz -T"$jobs" -6 "$out"/bin/*
fi
{
  echo "commit: $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "built:  $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  (cd "$out" && ls -l bin lib)
} > "$out/MANIFEST"
cat "$out/MANIFEST"
echo "bundle: $out, $(du -sh "$out" | cut -f1) ($(du -sb "$out" | cut -f1) bytes; the device tool carries at most 64 MiB with the working tree)"
