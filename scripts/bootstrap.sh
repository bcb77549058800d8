#!/usr/bin/env bash
#===- scripts/bootstrap.sh - set up, build, run ----------------------------===#
#
# One command for a fresh Debian 12 machine:
#   scripts/bootstrap.sh demo   install what is missing, build, run the main job
#   scripts/bootstrap.sh test   install what is missing, build, run every test
#   scripts/bootstrap.sh build  install what is missing, build
#
# Environment: SWITCHYARD_BUILD_DIR (default: build/ in the checkout),
# SWITCHYARD_JOBS (default: all cores).
#
#===------------------------------------------------------------------------===#
set -euo pipefail

mode=${1:-demo}
case "$mode" in
  demo|test|build) ;;
  -h|--help|help)
    sed -n '3,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 0 ;;
  *)
    echo "bootstrap.sh: unknown mode '$mode' (expected demo, test or build)" >&2
    exit 2 ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SWITCHYARD_BUILD_DIR:-$root/build}
jobs=${SWITCHYARD_JOBS:-$(nproc)}

# Debian packages: the MLIR/LLVM 22 toolchain (with compiler-rt for the
# fuzzer and sanitizers), the build tools, GoogleTest, librsvg's
# rsvg-convert (the test of `switchyard analyze` renders its pictures) and
# Open MPI (`mpirun -np N switchyard train`: data-parallel training; the
# runtime loads libmpi when a launcher starts it).
packages=(
  cmake ninja-build ccache mold python3
  clang-22 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libclang-rt-22-dev libgtest-dev libsentencepiece-dev fortunes
  librsvg2-bin openmpi-bin
)

step() { printf '\n==> %s\n' "$*"; }

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null |
       grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  step "Installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
fi

if [ ! -f "$build/build.ninja" ]; then
  step "Configuring in $build"
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
fi

step "Building ($jobs jobs)"
start=$(date +%s)
cmake --build "$build" -j "$jobs"
echo "built in $(( $(date +%s) - start )) s"

case "$mode" in
  build) ;;
  test)
    step "Running every test (lit + unit + docs)"
    ctest --test-dir "$build" --output-on-failure -j "$jobs"
    # The compiler under the fuzzer for a minute (docs/BadInputs.md): its
    # own sanitized build in build-fuzz/ next to the build directory.
    step "Fuzzing the compiler for 60 s"
    # A fixed seed, so that a run repeats; longer runs take any.
    SWITCHYARD_FUZZ_DIR="$build-fuzz" "$root/scripts/fuzz.sh" 60 -seed=1 ;;
  demo)
    # The main job: train the tiny SwitchHead example on the default corpus
    # (the text of Debian's fortunes, as bytes) on the CPU and report its
    # validation bits per byte against the corpus's unigram entropy.
    model="$root/examples/models/switchhead-tiny.mlir"
    step "Parameters of $(basename "$model")"
    "$build/bin/switchyard" params "$model" | tail -n 1
    step "Training $(basename "$model") on the CPU"
    "$build/bin/switchyard" train "$model" --steps 120 --batch 4 --lr 3e-3 \
      --warmup 12 --eval-every 40 \
      --checkpoint "$build/switchhead-tiny.safetensors" \
      --summary "$build/switchhead-tiny.train.json" \
      --curve "$build/switchhead-tiny.loss.svg"
    echo "checkpoint, summary and loss curve in $build/switchhead-tiny.*"
    step "What the trained model writes after \"Q: \""
    "$build/bin/switchyard" generate "$model" \
      --params "$build/switchhead-tiny.safetensors" --prompt "Q: " \
      --tokens 160 --temperature 0.8 --seed 1 ;;
esac
