#!/usr/bin/env bash
#===- bench/generate.sh - text generation: key/value caches or a window ----===#
#
# Times `switchyard generate` (greedy, a 16-byte prompt) with the models'
# key/value caches (one token per step, the default) and with
# --kv-cache=false (the forward function on the window every step), for
#   the tiny SwitchHead model (examples/models/switchhead-tiny.mlir,
#     context 128), 96 tokens;
#   the 47M RoPE SwitchHead configuration with bytes
#     (bench/Inputs/switchhead-47m-rope-bytes.mlir, 16 layers, context
#     512), 48 tokens;
# both within the context, so the two must choose the same tokens (checked:
# a difference fails the run). Parameters are the models' initialisers
# (seed 1): speed does not depend on training. Tokens/s are the driver's
# own figures (sampling loop only, compilation excluded).
#
# Usage: bench/generate.sh [--device cpu|gpu|gpu-emulation]
#                          [--driver PATH] [--out FILE]
#   (default: cpu, build/bin/switchyard, and
#   bench/results/generate-<date>-<commit>-<device>.md)
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
device=cpu
driver=${SWITCHYARD_BUILD_DIR:-$root/build}/bin/switchyard
out=
while [ $# -gt 0 ]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --driver) driver=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "bench/generate.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$driver" ] || { echo "bench/generate.sh: no driver at $driver (build first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$out" ] || out="$root/bench/results/generate-$(date -u +%Y-%m-%d)-$commit-$device.md"
mkdir -p "$(dirname "$out")"
exec > >(tee "$out") 2>&1

# Token ids [1, T] as .npy (int32), for `switchyard run --save-params`.
tokens_npy() {
  python3 - "$1" "$2" <<'PY'
import struct, sys
path, time = sys.argv[1], int(sys.argv[2])
header = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, %d), }" % time
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<%di" % time, *[(i * 7) % 256 for i in range(time)]))
PY
}

echo "# Text generation: key/value caches against a window per token"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "- commit: $commit"
echo "- device: $device"
echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores$(grep -q avx512f /proc/cpuinfo && echo ', AVX-512' || echo ', AVX2')"
[ "$device" = gpu ] && echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo unknown)"
echo
echo "| model | tokens | caches: tokens/s | window: tokens/s | speed-up | same tokens |"
echo "|---|---|---|---|---|---|"

status=0
prompt="The quick brown "
for entry in "$root/examples/models/switchhead-tiny.mlir 128 96" \
             "$root/bench/Inputs/switchhead-47m-rope-bytes.mlir 512 48"; do
  set -- $entry
  model=$1 context=$2 count=$3
  name=$(basename "$model" .mlir)
  tokens_npy "$tmp/tokens.npy" "$context"
  if ! "$driver" run "$model" --input "$tmp/tokens.npy" --seed 1 \
       --save-params "$tmp/$name.safetensors" > "$tmp/run.out" 2>&1; then
    echo "| $name | FAILED: switchyard run | | | | |"; tail -3 "$tmp/run.out"; status=1; continue
  fi
  declare -A rate=()
  for mode in caches window; do
    flags=()
    [ $mode = window ] && flags=(--kv-cache=false)
    if ! timeout 600 "$driver" generate "$model" --params "$tmp/$name.safetensors" \
         --prompt "$prompt" --tokens "$count" --temperature 0 --ids \
         --device "$device" "${flags[@]}" > "$tmp/$mode.ids" 2> "$tmp/$mode.err"; then
      echo "| $name | FAILED: generate ($mode) | | | | |"; tail -3 "$tmp/$mode.err"; status=1; continue 2
    fi
    rate[$mode]=$(sed -n 's/.*generated [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s.*/\1/p' "$tmp/$mode.err")
  done
  same=yes
  cmp -s "$tmp/caches.ids" "$tmp/window.ids" || { same=NO; status=1; }
  speedup=$(python3 -c "print(f'{${rate[caches]} / ${rate[window]}:.1f}x')")
  echo "| $name | $count | ${rate[caches]} | ${rate[window]} | $speedup | $same |"
done
echo
echo "$([ $status = 0 ] && echo 'all runs passed' || echo 'SOME RUNS FAILED'); written to ${out#$root/}"
exit $status
