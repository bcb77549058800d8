#!/usr/bin/env bash
#===- bench/gpu-check.sh - the GPU checks, in one command ------------------===#
#
# On a machine with an NVIDIA GPU, from a fresh checkout: configures and
# builds (Release, -j$(nproc), only the targets the GPU checks need:
# switchyard, switchyard-opt, switchyard-gpu-check, switchyard-cuda-unittests),
# then runs
#   1. ctest: the CUDA unit tests (CudaDriverTest, GpuProgramTest: the driver
#      layer, GpuProgram against the CPU backend, resident tensors, training
#      with the state on the device);
#   2. lit test/Integration/CUDA: every moe op forward and gradient, the tiny
#      models' forward and gradients, fused and unfused, bf16/f16 tensor-core
#      matmuls and the tiny model in bf16/f16 against the CPU with the same
#      rounding, and `switchyard train --device gpu` against `--device cpu`;
#   3. `switchyard train` of the tiny model, 8 steps, --device cpu and
#      --device gpu (f32, then bf16), loss by loss, with wall times, and
#      `switchyard generate` from the CPU run's checkpoint on both devices;
# and writes one log, bench/results/gpu-check-<date>.log: GPU model, driver,
# date, commit, and each test's result. Sized to finish within about 8
# minutes on a 16-core H100/H200 machine with a cold build directory and no
# ccache; every phase has a time limit so that the log is always written.
# Exit status 0 only if every check passed; "unsupported" or "skipped"
# counts as a failure here, since this script exists to run them.
#
# Usage: bench/gpu-check.sh [BUILD_DIR]
#        bench/gpu-check.sh --bundle .device   (the device machine: no
#        LLVM there; see scripts/device-bundle.sh and bench/gpu-check-bundle.sh)
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = --bundle ]; then
  # The binaries of scripts/device-bundle.sh (static MLIR/LLVM): no build,
  # no lit, no FileCheck (bench/cuda-lit-runs.py runs the RUN lines).
  exec "$root/bench/gpu-check-bundle.sh" "${2:-$root/.device}"
fi
build=${1:-$root/build}
jobs=${JOBS:-$(nproc)}
lit=${LIT:-/usr/lib/llvm-22/bin/lit}
mkdir -p "$root/bench/results"
log="$root/bench/results/gpu-check-$(date -u +%Y%m%dT%H%M%SZ).log"
exec > >(tee "$log") 2>&1
start=$SECONDS
status=0
elapsed() { echo "($((SECONDS - start)) s so far)"; }

echo "# Switchyard GPU check"
echo "date:   $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "commit: $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet || echo ' (with uncommitted changes)')"
echo "branch: $(git -C "$root" rev-parse --abbrev-ref HEAD)"
echo "host:   $(hostname), $jobs cores"
if ! command -v nvidia-smi > /dev/null; then
  echo "FAILED: no nvidia-smi: this machine has no NVIDIA driver"
  exit 1
fi
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
command -v nvcc > /dev/null && nvcc --version | tail -2
echo

echo "## build $(elapsed)"
if [ ! -f "$build/build.ninja" ]; then
  # As scripts/bootstrap.sh configures (which also installs the packages).
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    > "$log.cmake" 2>&1 || { cat "$log.cmake"; echo "FAILED: cmake"; exit 1; }
  grep -iE 'cuda|warning' "$log.cmake"
  rm -f "$log.cmake"
fi
if ! timeout 420 ninja -C "$build" -j"$jobs" switchyard switchyard-opt \
    switchyard-gpu-check switchyard-cuda-unittests > "$log.ninja" 2>&1; then
  tail -40 "$log.ninja"
  rm -f "$log.ninja"
  echo "FAILED: build (or it ran past 7 minutes)"
  exit 1
fi
tail -1 "$log.ninja"
rm -f "$log.ninja"
echo

echo "## ctest: the CUDA unit tests $(elapsed)"
# Only switchyard-cuda-unittests was built: select its tests, less the two
# that check the behaviour without a driver (they skip where there is one).
(cd "$build" && timeout 240 ctest -j"$jobs" --output-on-failure \
  -R '^(CudaDriverTest|GpuProgramTest)\.' \
  -E 'CallsFailCleanlyWithoutADriver|ResidentTensorsNeedADriver|ReportsAMissingDriverOrDevice') \
  | tee "$log.ctest" || status=1
if grep -qE 'Not Run|\(Skipped\)|Failed|Timeout' "$log.ctest"; then
  echo "(some CUDA unit tests failed or were skipped)"
  status=1
fi
rm -f "$log.ctest"
echo

echo "## lit: test/Integration/CUDA $(elapsed)"
# (No per-test --timeout: it needs psutil; the phase has one.)
timeout 300 "$lit" -v -j"$jobs" --filter 'Integration/CUDA/' \
  "$build/test" | tee "$log.lit" || status=1
if grep -qE '^(UNSUPPORTED|FAIL|XFAIL|UNRESOLVED|TIMEOUT):' "$log.lit"; then
  status=1
fi
rm -f "$log.lit"
echo

echo "## switchyard train: --device cpu against --device gpu $(elapsed)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$root/bench/train-compare.sh"
compare_training "$build/bin/switchyard"
echo

echo "total: $((SECONDS - start)) s"
if [ "$status" = 0 ]; then echo "RESULT: all GPU checks passed"; else echo "RESULT: FAILED"; fi
echo "log: $log"
exit $status
