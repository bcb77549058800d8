#!/usr/bin/env bash
#===- scripts/device-bundle.sh - binaries for the GPU machine --------------===#
#
# The GPU machine (the `device` tool) has CUDA but no LLVM/MLIR 22, no lit and
# no FileCheck, and fetches nothing. This builds, HERE, the binaries it runs,
# linked statically against MLIR/LLVM (-DSWITCHYARD_STATIC_LLVM=ON, in
# build-device/), strips them and writes one bundle, .device/ (git-ignored):
#   bin.tar.xz  switchyard, switchyard-gpu-check, switchyard-cuda-unittests
#               (bench/gpu-check.sh) and switchyard-bench (bench/gpu.sh), as
#               one solid archive: the four binaries are mostly the same
#               MLIR/LLVM code, so with a dictionary larger than one binary
#               they compress to about 34 MB together (xz file by file: 67 MB,
#               over what the tool carries)
#   lib/        libsentencepiece{,_train}.so.0 (no static library in Debian)
#   MANIFEST    commit, date, sizes
# Compressing takes about 6 minutes on 2 cores. Then, on the device, one call:
#   run(command="bench/gpu-check.sh --bundle .device; bench/gpu.sh --bundle .device train",
#       carry=[".device"])
# (the tool carries at most 64 MiB with the working tree).
#
# Usage: scripts/device-bundle.sh [JOBS]   (default 2)
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-device
out=$root/.device
binaries="bin/switchyard bin/switchyard-gpu-check test/unit/switchyard-cuda-unittests
          bin/switchyard-bench"
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
mkdir -p "$out/lib"
stripped=$(mktemp -d)
trap 'rm -rf "$stripped"' EXIT
for binary in $binaries; do
  strip -o "$stripped/$(basename "$binary")" "$build/$binary"
done
# What the binaries still load: only universal libraries, and SentencePiece.
for library in $(ldd "$stripped"/* | awk '/=>/ {print $3}' | sort -u); do
  case $(basename "$library") in
    libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|libz.so.*|libzstd.so.*|\
    ld-linux*|libdl.so.*|librt.so.*|libpthread.so.*) ;;
    libsentencepiece*) cp -L "$library" "$out/lib/" ;;
    *) echo "device-bundle: unexpected dependency $library" >&2; exit 1 ;;
  esac
done
(cd "$stripped" && ls -l) > "$stripped.list"
tar -C "$stripped" -cf - . | xz -T1 --lzma2=preset=6,dict=320MiB > "$out/bin.tar.xz"
{
  echo "commit: $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "built:  $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "bin.tar.xz: $(du -b "$out/bin.tar.xz" | cut -f1) bytes of"
  cat "$stripped.list"
  (cd "$out" && ls -l lib)
} > "$out/MANIFEST"
rm -f "$stripped.list"
cat "$out/MANIFEST"
echo "bundle: $out, $(du -sh "$out" | cut -f1) ($(du -sb "$out" | cut -f1) bytes; the device tool carries at most 64 MiB with the working tree)"
