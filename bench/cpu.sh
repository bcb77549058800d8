#!/usr/bin/env bash
#===- bench/cpu.sh - the CPU benchmarks, in one command --------------------===#
#
# Installs Debian's python3-torch if it is missing (the peer baseline only:
# nothing else in Switchyard uses Python at run time), builds
# switchyard-bench, and runs
#   1. the SwitchHead layer of the paper's 47M configuration (embedding,
#      lm.switchhead with Transformer-XL memory, cross-entropy; batch 2),
#      forward and forward+backward: Switchyard with the CPU's default
#      fusions (none) and with all of them, the plain
#      C++ reference (forward), PyTorch eager (dense-all-experts and
#      per-expert loop, 1 thread and all cores), and the dense MHA layer of
#      the same parameter count (Switchyard and PyTorch), after checking
#      that all of them compute the same loss and gradient norms;
#   2. the same for the tiny configuration (the test model's layer), and the
#      47M layer again with glibc's heap trimming off for every process, so
#      that PyTorch's temporaries reuse their pages as Switchyard's do;
#   3. the layer's ops one by one (bench/Inputs/kernels-47m.mlir), fused and
#      unfused, forward and loss-and-gradient, against PyTorch
#      (bench/torch_kernels.py);
#   4. the matmuls of the 47M models at batch 4 (output layer, FFN, a
#      query projection, one expert's value and output projections:
#      bench/Inputs/matmuls-47m.mlir) against PyTorch on the same shapes;
#   5. whole training steps against the same models in PyTorch
#      (bench/torch_train_step.py): one block at the 47M widths, batch 4
#      (bench/Inputs/*-47m-1block.mlir) on all cores and on one thread
#      each, and the 47M SwitchHead and dense models, batch 2, with the
#      CPU's default fusions (with the peer's check of each model: its
#      inference loss and parameter count against Switchyard's);
# and writes everything it printed, with the machine, date and commit, to
# bench/results/cpu-<date>-<commit>.md.
#
# Usage: bench/cpu.sh [BUILD_DIR]     (default: build/, or
#        $SWITCHYARD_BUILD_DIR); REPS=N sets the timed runs per measurement.
#        AVX2=1 runs everything as an AVX2 machine would, on a machine with
#        AVX-512: Switchyard's code for x86-64-v3 (--cpu: AVX2's 16
#        registers of 256 bits and their kernels), PyTorch's at
#        ATEN_CPU_CAPABILITY=avx2 and OpenBLAS's Haswell kernels
#        (OPENBLAS_CORETYPE); the results file ends in -avx2.
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${SWITCHYARD_BUILD_DIR:-$root/build}}
reps=${REPS:-5}

# Debian's python3-torch does its matmuls through the libblas.so.3
# alternative; with only the reference BLAS installed (netlib, about 6
# GFLOP/s on one core here) the baseline would be crippled, so OpenBLAS
# (about 90 GFLOP/s on one core) is installed with it and becomes the
# alternative.
if ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null ||
   ! dpkg -s libopenblas0-pthread > /dev/null 2>&1; then
  echo "==> Installing python3-torch and OpenBLAS (the PyTorch eager baseline)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    --no-install-recommends python3-torch python3-numpy libopenblas0-pthread
fi
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)

if [ ! -f "$build/build.ninja" ]; then
  "$root/scripts/bootstrap.sh" build >/dev/null
fi
cmake --build "$build" --target switchyard-bench

commit=$(git -C "$root" rev-parse --short HEAD)
dirty=$(git -C "$root" status --porcelain --untracked-files=no | grep -q . &&
        echo " (with uncommitted changes)" || true)
mkdir -p "$root/bench/results"
out="$root/bench/results/cpu-$(date -u +%Y-%m-%d)-$commit.md"
bench=("$build/bin/switchyard-bench")
if [ "${AVX2:-0}" = 1 ]; then
  out="${out%.md}-avx2.md"
  bench+=(--cpu x86-64-v3)
  export ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell
fi
{
  echo "# CPU benchmarks"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- commit: $commit$dirty"
  echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "- compiled code: every core unless a run says otherwise (its CPU line); PyTorch: $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') (Debian), BLAS: $blas"
  # The instruction sets of the peer's kernels: ATen's (its CPU capability)
  # and OpenBLAS's (the core whose kernels it chose).
  aten=$(/usr/bin/python3 -c 'import torch; print(torch.__config__.show())' |
         sed -n 's/.*CPU capability usage: //p')
  core=$(OPENBLAS_VERBOSE=2 /usr/bin/python3 -c 'import numpy' 2>&1 |
         sed -n 's/^Core: //p')
  echo "- PyTorch's kernels: ATen ${aten:-unknown}, OpenBLAS ${core:-unknown} (sgemm)"
  if [ "${AVX2:-0}" = 1 ]; then
    echo "- as an AVX2 machine: Switchyard's code for x86-64-v3 (--cpu), PyTorch at ATEN_CPU_CAPABILITY=avx2, OpenBLAS with OPENBLAS_CORETYPE=Haswell"
  fi
  echo
  echo '```'
  "${bench[@]}" --config 47m --reps "$reps"
  echo '```'
  echo
  echo '```'
  "${bench[@]}" --config tiny --reps "$reps"
  echo '```'
  echo
  echo "The 47M layer again with glibc's heap trimming and mmap threshold off for"
  echo "every process (GLIBC_TUNABLES): PyTorch's freed temporaries then keep their"
  echo "pages too, as Switchyard's do through its buffer cache (runtime/BufferCache.h):"
  echo
  echo '```'
  GLIBC_TUNABLES=glibc.malloc.trim_threshold=4294967296:glibc.malloc.mmap_threshold=4294967296 \
    "${bench[@]}" --config 47m --reps "$reps" --skip-reference --torch-threads 1
  echo '```'
  echo
  echo "The 47M layer's ops one by one (bench/Inputs/kernels-47m.mlir):"
  echo
  echo '```'
  "${bench[@]}" --kernels "$root/bench/Inputs/kernels-47m.mlir" --reps "$reps"
  echo '```'
  echo
  echo "The matmuls of the 47M models at batch 4 × 256 (bench/Inputs/matmuls-47m.mlir):"
  echo
  echo '```'
  "${bench[@]}" --kernels "$root/bench/Inputs/matmuls-47m.mlir" --fuse none --reps "$reps" \
    --cpu-threads 1 --torch-threads 1
  echo '```'
  echo
  echo "Training steps of one block at the 47M widths, batch 4 × 256, against"
  echo "PyTorch: all cores, then one thread each:"
  echo
  for threads in 0 1; do
    echo '```'
    "${bench[@]}" --train-step "$root/bench/Inputs/switchhead-47m-1block.mlir,$root/bench/Inputs/dense-47m-1block.mlir" \
      --reps "$reps" --batch 4 --cpu-threads "$threads" \
      $([ "$threads" = 1 ] && echo --torch-threads 1) 2>&1 | grep -v '^torch_'
    echo '```'
  done
  echo
  echo "Training steps of the 47M models (the examples), against PyTorch:"
  echo
  echo '```'
  "${bench[@]}" --train-step "$root/examples/models/switchhead-47m.mlir,$root/examples/models/dense-47m.mlir" \
    --reps 3 --batch 2 2>&1 | grep -v '^torch_'
  echo '```'
} | tee "$out.tmp"
mv "$out.tmp" "$out"
echo
echo "written to ${out#$root/}"
