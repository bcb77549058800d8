# The training comparison of the GPU checks, sourced by bench/gpu-check.sh
# and bench/gpu-check-bundle.sh: the tiny SwitchHead model trained for 20
# steps on the CPU, on the GPU (f32) and on the GPU (bf16 tensor cores);
# the f32 losses must agree (compare_losses.py's tolerance), bf16 is shown
# for information. Needs $root, $tmp, $status and the switchyard binary as
# the first argument; sets status=1 on a failure.

compare_training() {
  local switchyard=$1
  train() {
    local name=$1
    shift
    local begin=$SECONDS
    if timeout 150 "$switchyard" train \
        "$root/examples/models/switchhead-tiny.mlir" \
        --data "$root/test/Integration/CUDA/Inputs" --steps 20 --batch 4 \
        --warmup 4 --eval-every 10 --eval-batches 1 --summary "$tmp/$name.json" \
        "$@" > "$tmp/$name.out" 2>&1; then
      echo "train $name: $((SECONDS - begin)) s (compile included); $(grep -m1 '^device:' "$tmp/$name.out")"
      tail -2 "$tmp/$name.out"
    else
      echo "FAILED: train $name"
      tail -20 "$tmp/$name.out"
      status=1
    fi
  }
  train cpu --device cpu
  train gpu --device gpu
  train gpu-bf16 --device gpu --gpu-element-type bf16
  if [ -f "$tmp/cpu.json" ] && [ -f "$tmp/gpu.json" ]; then
    python3 "$root/test/Integration/CUDA/Inputs/compare_losses.py" \
      "$tmp/cpu.json" "$tmp/gpu.json" || status=1
  fi
  if [ -f "$tmp/cpu.json" ] && [ -f "$tmp/gpu-bf16.json" ]; then
    # bf16 against f32: informational (different arithmetic), never a failure.
    echo "bf16 on the GPU against f32 on the CPU (informational):"
    python3 "$root/test/Integration/CUDA/Inputs/compare_losses.py" \
      "$tmp/cpu.json" "$tmp/gpu-bf16.json" --atol 5e-2 --rtol 5e-2 || true
  fi
}
