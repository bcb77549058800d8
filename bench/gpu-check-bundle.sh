#!/usr/bin/env bash
#===- bench/gpu-check-bundle.sh - the GPU checks from the device bundle -----===#
#
# bench/gpu-check.sh --bundle DIR runs this: on the GPU machine, which has
# CUDA but no LLVM/MLIR, lit or FileCheck, with the static binaries that
# scripts/device-bundle.sh wrote into DIR (.device, carried by the device
# tool). Runs
#   1. switchyard-cuda-unittests (less the three that check the behaviour
#      without a driver: they skip where there is one);
#   2. the RUN lines of test/Integration/CUDA/*.test (bench/cuda-lit-runs.py;
#      verdicts by exit status);
#   3. `switchyard train` of the tiny model, --device cpu and gpu, compared,
#      and `switchyard generate` from the CPU run's checkpoint on both;
# and writes bench/results/gpu-check-<date>.log (and, as it goes, the same
# file under $OUT where the device tool sets it). The three steps run at
# once (the RUN lines of step 2 in parallel, the three training runs of step
# 3 at once), each time-limited: at most 5 minutes in all.
# Exit status 0 only if every check passed (skipped counts as failed).
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$(cd "${1:-$root/.device}" && pwd) || { echo "no bundle ${1:-}"; exit 1; }
mkdir -p "$root/bench/results"
log="$root/bench/results/gpu-check-$(date -u +%Y%m%dT%H%M%SZ).log"
# Where the device tool collects files ($OUT), the log is written there as it
# goes, so that a run stopped at the tool's limit still returns what it did.
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  exec > >(tee "$log" "$OUT/$(basename "$log")") 2>&1
else
  exec > >(tee "$log") 2>&1
fi
start=$SECONDS
status=0
elapsed() { echo "($((SECONDS - start)) s so far)"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# Switchyard GPU check (device bundle)"
echo "date:   $(date -u +%Y-%m-%dT%H:%M:%SZ)"
. "$root/bench/device-env.sh"
echo "commit: $(bundle_commit "$root" "$bundle" | tr '\n' ' ')"
echo "host:   $(hostname), $(nproc) cores"
echo "bundle: $bundle"
sed 's/^/  /' "$bundle/MANIFEST" 2>/dev/null | head -3
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
else
  echo "NO DRIVER: no nvidia-smi on this machine; every GPU check will fail"
  status=1
fi

# The CUDA toolkit (libdevice at compile time, ptxas for format=bin) and
# the binaries, unpacked where the bundle has them compressed.
find_cuda_toolkit || status=1
unpack_bundle "$bundle" "$tmp/bin" || exit 1
bin=$tmp/bin
export SWITCHYARD_SOURCE_DIR=$root
echo "unpacked $(elapsed)"
echo

# The three steps at once (the GPU and 16 cores are shared); reports in
# order: the unit tests' and the training runs' after the RUN lines'.
timeout 180 "$bin/switchyard-cuda-unittests" \
  --gtest_filter='-*CallsFailCleanlyWithoutADriver*:*ResidentTensorsNeedADriver*:*ReportsAMissingDriverOrDevice*' \
  > "$tmp/unit.out" 2>&1 &
unit_pid=$!
. "$root/bench/train-compare.sh"
(status=0; TRAIN_TIMEOUT=150 compare_training "$bin/switchyard" \
   > "$tmp/train.log" 2>&1; echo $status > "$tmp/train.status") &
train_pid=$!

echo "## test/Integration/CUDA (RUN lines, no lit; steps 1 and 3 beside them) $(elapsed)"
timeout 300 python3 "$root/bench/cuda-lit-runs.py" --bin "$bin" --root "$root" \
  --timeout 240 --jobs "$(nproc)" || status=1
echo

wait $unit_pid
unit=$?
echo "## the CUDA unit tests $(elapsed)"
grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) *\]' "$tmp/unit.out" | tail -60
if [ $unit != 0 ]; then
  echo "FAILED: switchyard-cuda-unittests (exit $unit)"; tail -30 "$tmp/unit.out"; status=1
elif grep -q '^\[  SKIPPED \]' "$tmp/unit.out"; then
  echo "FAILED: some CUDA unit tests were skipped (no GPU?)"; status=1
fi
echo

wait $train_pid
echo "## switchyard train: --device cpu against --device gpu $(elapsed)"
cat "$tmp/train.log"
[ "$(cat "$tmp/train.status" 2>/dev/null)" = 0 ] || status=1
echo

echo "total: $((SECONDS - start)) s"
if [ "$status" = 0 ]; then echo "RESULT: all GPU checks passed"; else echo "RESULT: FAILED"; fi
echo "log: $log"
exit $status
