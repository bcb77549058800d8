#!/usr/bin/env bash
#===- bench/gpu.sh - the GPU benchmarks, in one command --------------------===#
#
# On a machine with an NVIDIA GPU (an H100 or H200 for the issue's targets)
# and PyTorch with CUDA (the peers only), runs switchyard-bench with
# --device gpu, bf16 tensor-core kernels (f32 accumulation) against
# PyTorch's bf16, phase by phase:
#   kernels  the layer's ops one by one at the 47M and 262M shapes
#            (bench/Inputs/kernels-{47m,262m}.mlir): Switchyard fused,
#            unfused and with grouped expert projections on tensor cores
#            (--fuse grouped), PyTorch per-expert loop, dense and torch.mm of equal
#            FLOPs, scaled_dot_product_attention's flash/cuDNN/efficient/math
#            backends; TFLOP/s and % of the bf16 matmul peak measured in the
#            same run;
#   matmuls  bf16 matmuls (bench/Inputs/matmuls-262m.mlir: 4096³ and the
#            262M model's projections at batch 64), forward, dX and dW, for
#            sm_90a with mma.sync and with wgmma (--gpu-wgmma) against
#            PyTorch and torch.mm of equal FLOPs in the same run;
#   layer    the SwitchHead layer forward and forward+backward, 47M (batch 8)
#            and 262M (batch 2): default (grouped), fused, unfused, PyTorch, and the
#            dense MHA layer of the same parameter count (Switchyard and
#            PyTorch);
#   train    training steps of the 47M SwitchHead and dense models (batch
#            16), with their compile times, each with its default fusions
#            (on the GPU: router and attention fused, the expert
#            projections grouped by expert on tensor cores), and the same
#            models in PyTorch (bench/torch_train_step.py, bf16 autocast);
#   train-fused  the same with --fuse all (the SwitchHead model's expert
#            projections fused too);
#   train-no-epilogues  the train phase's Switchyard steps with
#            --gpu-epilogues=false (the matmuls' elementwise consumers as
#            kernels of their own), without the peers: against the train
#            phase's;
#   train-planned  the train phase's Switchyard steps with
#            SWITCHYARD_MEMORY_PLAN=1 (temporaries from one arena per call,
#            docs/GPU.md), without the peers: against the train phase's;
#   train-graphs  the train phase's Switchyard steps with
#            SWITCHYARD_CUDA_GRAPHS=1 (each step replayed as a CUDA graph,
#            its temporaries from a memory plan, docs/GPU.md), without the
#            peers: against the train phase's;
#   paper-47m, paper-262m  the paper's configurations at its batch, 64
#            sequences: the 47M SwitchHead models (Transformer-XL, C4
#            setting; RoPE, Wikitext-103 setting) and the 262M one, each
#            against its dense baseline and against PyTorch (per-expert
#            loop, and the official SwitchHead module with its CVMM Triton
#            kernels where SWITCHHEAD_OFFICIAL names the folder that holds
#            its `switchhead` package: by default .peers/switchhead-official,
#            a copy of ../shared/peers/switchhead-official carried with the
#            checkout); tokens/s, step ms and MFU (switchyard cost's model
#            FLOPs over the bf16 peak torch.mm measures in the same run,
#            bench/paper_summary.py);
#   generate  text generation with key/value caches against a window per
#            token, the tiny and the 47M RoPE (bytes) models
#            (bench/generate.sh --device gpu; no peer);
#   nccl     the 47M SwitchHead model's training steps (batch 16) as
#            usual and as data-parallel steps of one rank through NCCL
#            (--allreduce nccl; NCCL from PyTorch's nvidia-nccl wheel unless
#            SWITCHYARD_NCCL_LIBRARY names it): the same losses, and the
#            all-reduce's share of a step;
#   profile  a few training steps of each 47M model (default fusions) with
#            SWITCHYARD_KERNEL_PROFILE=${PROFILE_TOP:-40}: each launch timed
#            alone (CUDA events), the longest kernels by name with their
#            geometry (not among the defaults: it serialises launches);
# and writes what it printed, with the GPU, driver, date and commit, to
# bench/results/gpu-<date>-<commit>-<phases>.md (and, as it goes, to $OUT
# when set).
# Every run has a time limit; the exit status is 0 only if all passed.
#
# Each phase fits one 10-minute call of the device tool (on an H200,
# `kernels layer train` took 310 s in one call).
# Usage: bench/gpu.sh [--bundle DIR] [PHASE...]
#   (default: kernels layer train train-fused)
#   --bundle DIR  the static binaries of `scripts/device-bundle.sh` (.device)
#                 (the device machine has no LLVM); otherwise switchyard-bench
#                 is built in $SWITCHYARD_BUILD_DIR (default build/)
#   PYTHON=...    Python with PyTorch (default python3); REPS=N (default 20)
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$root/bench/device-env.sh"

bundle=
if [ "${1:-}" = --bundle ]; then
  bundle=$(cd "$2" && pwd) || { echo "no bundle $2"; exit 1; }
  shift 2
fi
phases=${*:-kernels layer train train-fused}
reps=${REPS:-20}
# switchyard-bench starts Python itself: give it a path, and check first
# that it has PyTorch with CUDA.
python=$(command -v "${PYTHON:-python3}") || { echo "no ${PYTHON:-python3}"; exit 1; }
"$python" -c 'import numpy, torch; assert torch.cuda.is_available(), "torch sees no GPU"' ||
  { echo "$python: needs numpy and PyTorch with CUDA"; exit 1; }
find_cuda_toolkit > "$tmp/toolkit" || { cat "$tmp/toolkit"; exit 1; }

if [ -n "$bundle" ]; then
  unpack_bundle "$bundle" "$tmp/bin" || exit 1
  bench=$tmp/bin/switchyard-bench
  driver=$tmp/bin/switchyard
else
  build=${SWITCHYARD_BUILD_DIR:-$root/build}
  [ -f "$build/build.ninja" ] || "$root/scripts/bootstrap.sh" build > /dev/null
  cmake --build "$build" --target switchyard-bench switchyard || exit 1
  bench=$build/bin/switchyard-bench
  driver=$build/bin/switchyard
fi

commit=$(bundle_commit "$root" "$bundle" | tr '\n' ' ')
short=$(echo "$commit" | cut -c1-7)
mkdir -p "$root/bench/results"
name="gpu-$(date -u +%Y-%m-%d)-$short-$(echo $phases | tr ' ' '-').md"
out="$root/bench/results/$name"
# Also written into $OUT as it goes: a call killed at its limit still
# brings back what was measured.
exec > >(tee "$out" ${OUT:+"$OUT/$name"}) 2>&1
status=0
start=$SECONDS

echo "# GPU benchmarks"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "- commit: $commit"
echo "- GPU: $(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'none: no nvidia-smi')"
echo "- host: $(nproc) cores; $(cat "$tmp/toolkit"); $(ldd --version | head -1)"
echo "- PyTorch: $("$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())' 2>&1 | tail -1)"
[ -n "$bundle" ] && echo "- bundle: $(head -1 "$bundle/MANIFEST" 2>/dev/null)"
echo "- Switchyard: bf16 multiplicands on tensor cores (mma.sync), f32 accumulation; PyTorch: bf16 (autocast, SDPA in bf16)"
echo

common=(--device gpu --gpu-element-type bf16
        --script "$root/bench/torch_switchhead.py"
        --kernel-script "$root/bench/torch_kernels.py"
        --step-script "$root/bench/torch_train_step.py")
# The PyTorch peers (every phase but the kernel profile).
peers=(--python "$python")

# run LIMIT TITLE ARGS...: one switchyard-bench run in a fenced block.
run() {
  local limit=$1 title=$2
  shift 2
  echo "## $title ($((SECONDS - start)) s so far)"
  echo
  echo '```'
  timeout -k 10 "$limit" "$bench" "${common[@]}" "${peers[@]}" "$@"
  local rc=$?
  echo '```'
  if [ $rc != 0 ]; then
    echo "FAILED (exit $rc$([ $rc = 124 ] && echo ': past its time limit'))"
    status=1
  fi
  echo
}

for phase in $phases; do
  case $phase in
    kernels)
      for config in 47m 262m; do
        run 270 "The layer's ops one by one, $config shapes" \
          --kernels "$root/bench/Inputs/kernels-$config.mlir" --reps "$reps"
      done ;;
    matmuls)
      for route in mma.sync wgmma; do
        flags=(--gpu-chip sm_90a)
        [ "$route" = wgmma ] && flags+=(--gpu-wgmma)
        run 270 "Matmuls, 4096³ and the 262M shapes at batch 64, $route" \
          --kernels "$root/bench/Inputs/matmuls-262m.mlir" --fuse default \
          --reps "$reps" "${flags[@]}"
      done ;;
    layer)
      run 240 "SwitchHead layer, 47M, batch 8" --config 47m --batch 8 \
        --reps "$reps" --skip-reference
      run 300 "SwitchHead layer, 262M, batch 2" --config 262m --batch 2 \
        --reps "$reps" --skip-reference ;;
    train|train-fused)
      # Compiling both 47M models takes about 80 s on an H200 machine
      # (sm_90, bf16; 180 s on 2 cores for sm_90a).
      fuse=default title=
      [ "$phase" = train-fused ] && fuse=all title=", all fusions"
      run 570 "Training steps, 47M SwitchHead against dense, batch 16$title" \
        --train-step "$root/examples/models/switchhead-47m.mlir,$root/examples/models/dense-47m.mlir" \
        --fuse "$fuse" --batch 16 --reps 10 ;;
    train-no-epilogues)
      # The train phase's Switchyard steps with the matmuls' elementwise
      # consumers as kernels of their own: what the epilogues gain.
      peers=(--python=)
      run 570 \
        "Training steps, 47M SwitchHead and dense, batch 16, epilogues off" \
        --train-step "$root/examples/models/switchhead-47m.mlir,$root/examples/models/dense-47m.mlir" \
        --batch 16 --reps 10 --gpu-epilogues=false
      peers=(--python "$python") ;;
    train-planned|train-graphs)
      peers=(--python=)
      if [ "$phase" = train-planned ]; then
        setting=SWITCHYARD_MEMORY_PLAN what="memory plans"
      else
        setting=SWITCHYARD_CUDA_GRAPHS what="CUDA graphs"
      fi
      export "$setting=1"
      run 570 "Training steps, 47M SwitchHead and dense, batch 16, $what" \
        --train-step "$root/examples/models/switchhead-47m.mlir,$root/examples/models/dense-47m.mlir" \
        --batch 16 --reps 10
      unset "$setting"
      peers=(--python "$python") ;;
    paper-47m|paper-262m)
      export SWITCHHEAD_OFFICIAL=${SWITCHHEAD_OFFICIAL:-$root/.peers/switchhead-official}
      export TORCH_STEP_ROWS=loop,official
      peak=$("$python" "$root/bench/paper_summary.py" --measure-peak) ||
        { echo "measuring the bf16 peak failed"; status=1; continue; }
      # Two runs of at most 240 s, or one of 420: within one device call.
      if [ "$phase" = paper-47m ]; then
        pairs="switchhead-47m,dense-47m switchhead-47m-rope,dense-47m-rope"
        limit=240
      else
        pairs="switchhead-262m,dense-262m"
        limit=420
      fi
      for pair in $pairs; do
        models= costs=()
        for model in ${pair//,/ }; do
          models="$models${models:+,}$root/examples/models/$model.mlir"
          "$driver" cost --json "$root/examples/models/$model.mlir" \
            > "$tmp/cost-$model.json" || status=1
          costs+=(--cost "$model.mlir=$tmp/cost-$model.json")
        done
        run "$limit" "Training steps at the paper's batch: ${pair//,/ against }, batch 64" \
          --train-step "$models" --batch 64 --reps 5 --json "$tmp/paper.json"
        [ -f "$tmp/paper.json" ] &&
          "$python" "$root/bench/paper_summary.py" --peak "$peak" \
            "${costs[@]}" "$tmp/paper.json"
        rm -f "$tmp/paper.json"
        echo
      done
      unset TORCH_STEP_ROWS ;;
    generate)
      echo "## Text generation ($((SECONDS - start)) s so far)"
      echo
      timeout -k 10 400 "$root/bench/generate.sh" --device gpu \
          --driver "$driver" --out "$tmp/generate.md" > /dev/null 2>&1
      rc=$?
      cat "$tmp/generate.md" 2>/dev/null | sed 1,2d
      [ $rc = 0 ] || { echo "FAILED (exit $rc)"; status=1; }
      echo ;;
    nccl)
      echo "## Data-parallel steps through NCCL, one rank ($((SECONDS - start)) s so far)"
      echo
      # NCCL from PyTorch's nvidia-nccl wheel unless named.
      nccl=${SWITCHYARD_NCCL_LIBRARY:-$("$python" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)}
      echo "NCCL: ${nccl:-not found}"
      echo '```'
      for mode in auto nccl; do
        SWITCHYARD_NCCL_LIBRARY=$nccl timeout -k 10 240 "$driver" train \
            "$root/examples/models/switchhead-47m.mlir" --data "$root/README.md" \
            --device gpu --gpu-element-type bf16 --steps 12 --batch 16 \
            --eval-every 0 --eval-batches 1 --no-cache --allreduce $mode \
            --summary "$tmp/nccl-$mode.json" > "$tmp/nccl-$mode.out" 2>&1
        rc=$?
        echo "--allreduce $mode:"
        grep -E "data parallel|step 12/|averaging|trained|error" "$tmp/nccl-$mode.out"
        [ $rc = 0 ] || { echo "FAILED (exit $rc)"; status=1; }
      done
      # The same losses: NCCL's mean over one rank is the gradient itself.
      "$python" "$root/test/Tools/Inputs/same_losses.py" "$tmp/nccl-auto.json" \
          "$tmp/nccl-nccl.json" --tolerance 1e-4 || status=1
      echo '```'
      echo ;;
    profile)
      peers=(--python=)
      for model in switchhead-47m dense-47m; do
        SWITCHYARD_KERNEL_PROFILE=${PROFILE_TOP:-40} run 300 \
          "Kernel profile, training steps of $model, batch 16 (launches timed one by one)" \
          --train-step "$root/examples/models/$model.mlir" --batch 16 --reps 2
      done
      peers=(--python "$python") ;;
    *) echo "unknown phase '$phase' (kernels, matmuls, layer, train, train-fused, train-no-epilogues, train-planned, train-graphs, paper-47m, paper-262m, generate, nccl, profile)"; status=1 ;;
  esac
done

echo "total: $((SECONDS - start)) s; $([ $status = 0 ] && echo 'all runs passed' || echo 'SOME RUNS FAILED')"
echo "written to ${out#$root/}${OUT:+ and \$OUT/$name}"
exit $status
