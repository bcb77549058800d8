#!/usr/bin/env bash
#===- bench/gpu-check.sh - the GPU checks, in one command ------------------===#
#
# On a machine with an NVIDIA GPU: builds Switchyard (in build/, configuring
# it if needed) and runs exactly the GPU checks -- the lit tests of
# test/Integration/CUDA (every moe op forward and gradient, the tiny model's
# forward and gradient, and `switchyard train --device gpu` against
# `--device cpu`, each against the CPU backend) and the CUDA unit tests
# (switchyard-cuda-unittests) -- then writes a log with the GPU model, the
# driver, the date and the commit to bench/results/gpu-check-<date>.log.
# Exit status: 0 only if every check passed; "unsupported" or "skipped"
# counts as a failure here, since this script exists to run them.
#
# Usage: bench/gpu-check.sh [BUILD_DIR]
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
mkdir -p "$root/bench/results"
log="$root/bench/results/gpu-check-$(date -u +%Y%m%dT%H%M%SZ).log"
exec > >(tee "$log") 2>&1

echo "# Switchyard GPU check"
echo "date:   $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "commit: $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet || echo ' (with uncommitted changes)')"
echo "host:   $(hostname)"
if ! command -v nvidia-smi > /dev/null; then
  echo "FAILED: no nvidia-smi: this machine has no NVIDIA driver"
  exit 1
fi
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
echo

if [ ! -f "$build/build.ninja" ]; then
  # As scripts/bootstrap.sh configures (which also installs the packages).
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release || exit 1
fi
ninja -C "$build" switchyard switchyard-gpu-check switchyard-cuda-unittests \
  switchyard-opt || exit 1

status=0
echo "## lit: test/Integration/CUDA"
/usr/lib/llvm-22/bin/lit -v "$build/test/Integration/CUDA" | tee "$log.lit" || status=1
if grep -qE '^(UNSUPPORTED|FAIL|XFAIL|UNRESOLVED):' "$log.lit"; then status=1; fi
rm -f "$log.lit"
echo
echo "## switchyard-cuda-unittests"
"$build/test/unit/switchyard-cuda-unittests" | tee "$log.unit" || status=1
if grep -q '^\[  SKIPPED \]' "$log.unit"; then
  echo "(some GPU unit tests were skipped: the driver or device was not usable)"
  status=1
fi
rm -f "$log.unit"
echo
if [ "$status" = 0 ]; then echo "RESULT: all GPU checks passed"; else echo "RESULT: FAILED"; fi
echo "log: $log"
exit $status
