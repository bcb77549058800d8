#!/usr/bin/env bash
#===- scripts/fingerprint.sh - What a behaviour-preserving change keeps ----===#
#
# Prints one line per artefact that a refactoring must leave byte-identical:
# the sha256 of the tiny models' kernels for sm_80 (every gpu.binary's name
# and PTX: forward, gradients and AdamW step; f32 SIMT and bf16 tensor
# cores, with and without the fusions; host code not included) and of the
# CPU losses of a short training run of each tiny model. Run it before and
# after a change and compare the two outputs:
#
#   scripts/fingerprint.sh build > before.txt   # on the old commit
#   scripts/fingerprint.sh build > after.txt    # on the new one
#   diff before.txt after.txt
#
#===----------------------------------------------------------------------===#
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
opt=$build/bin/switchyard-opt
driver=$build/bin/switchyard
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every fusion and expert option spelled out, so that the hashes do not
# depend on the defaults: all fused; none fused with the experts grouped;
# and the driver's GPU choice (router and attention fused, experts grouped).
fused="fuse=all experts=dense"
unfused="fuse=none experts=grouped"
driver_default="fuse=router,attention experts=grouped"

for model in switchhead-tiny switchhead-tiny-xl switchall-tiny dense-tiny; do
  file=$here/examples/models/$model.mlir
  for variant in \
      "element-type=f32 $fused" "element-type=bf16 $fused" \
      "element-type=bf16 $unfused" "element-type=bf16 $driver_default"; do
    "$opt" "$file" \
      --switchyard-gpu-pipeline="chip=sm_80 format=isa train-step=1 $variant" \
      -o "$tmp/gpu.mlir"
    # The kernels: each gpu.binary's name and PTX text.
    sum=$(grep -o 'gpu\.binary @[A-Za-z0-9_]*\|assembly = "\([^"\\]\|\\.\)*"' \
            "$tmp/gpu.mlir" | sha256sum | cut -d' ' -f1)
    echo "ptx sm_80 $model [$variant] $sum"
  done
  for fuse in none all; do
    "$driver" train "$file" --steps 6 --batch 2 --eval-every 0 --eval-batches 1 \
      --fuse "$fuse" --summary "$tmp/$model.json" >"$tmp/$model.log" 2>&1
    sum=$(grep -E '"(loss|grad_norm|bits_per_byte)"' "$tmp/$model.json" |
            sha256sum | cut -d' ' -f1)
    echo "cpu losses $model [fuse=$fuse] $sum"
  done
done
