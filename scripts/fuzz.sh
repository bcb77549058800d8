#!/usr/bin/env bash
#===- scripts/fuzz.sh - build and run the compiler's fuzzer ---------------===#
#
#   scripts/fuzz.sh [SECONDS] [libFuzzer options...]
#
# Builds switchyard-fuzz (tools/switchyard-fuzz: parse, verify, the front
# end, the CPU pipeline and the GPU pipeline to PTX; instrumented for
# libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer) in
# $SWITCHYARD_FUZZ_DIR (default build-fuzz/ in the checkout), seeds its
# corpus from examples/ and test/ (each `// -----` split a seed of its own),
# and fuzzes for SECONDS (default 60) with the dialects' dictionary and a
# 20 s limit per input. A crash, a sanitizer report or a hang leaves the
# input in $SWITCHYARD_FUZZ_DIR/artifacts/ and exits non-zero; reproduce it
# with `$SWITCHYARD_FUZZ_DIR/bin/switchyard-fuzz FILE`, then turn it into a
# regression test. Longer runs: scripts/fuzz.sh 3600 (one CPU-hour), or
# scripts/fuzz.sh 3600 -fork=2 on two cores. Extra arguments go to
# libFuzzer (-seed=N, -runs=N, ...).
#
#===------------------------------------------------------------------------===#
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${SWITCHYARD_FUZZ_DIR:-$root/build-fuzz}
seconds=${1:-60}
shift || true
jobs=${SWITCHYARD_JOBS:-$(nproc)}

if [ ! -f "$dir/build.ninja" ]; then
  mkdir -p "$dir"
  cmake -G Ninja -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
    -DSWITCHYARD_FUZZ=ON > "$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; exit 1; }
fi
echo "==> Building switchyard-fuzz in $dir ($jobs jobs)"
cmake --build "$dir" --target switchyard-fuzz -j "$jobs"

# Seeds: the tiny example models and every lit input, split at // -----
# into single modules. (The 47M and 262M models and the GPU checks' widest
# attention heads take longer than the per-input limit to compile under the
# sanitizers; the tiny models and narrower heads have the same layers.)
corpus=$dir/corpus
mkdir -p "$corpus" "$dir/artifacts"
if [ -z "$(ls -A "$corpus")" ]; then
  n=0
  while IFS= read -r -d '' file; do
    awk -v prefix="$corpus/seed-$n-" '
      /^\/\/ -----/ { part++; next }
      { print > (prefix part ".mlir") }' part=0 "$file"
    n=$((n + 1))
  done < <(find "$root/examples" "$root/test" -name '*.mlir' \
             ! -name '*-47m*' ! -name '*-262m*' ! -name '*-wide*' -print0 |
             sort -z)
  echo "==> Seeded $corpus from $n files"
fi

# LLVM's allocators poison and unpoison their slabs when the including code
# is instrumented, but libMLIR.so's copies of the same inline functions are
# not: user poisoning off keeps that from being reported as use-after-poison
# (instrumented code is still checked for every other error).
export ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0:detect_container_overflow=0:detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

echo "==> Fuzzing for $seconds s"
exec "$dir/bin/switchyard-fuzz" "$corpus" \
  -dict="$root/tools/switchyard-fuzz/switchyard.dict" \
  -max_total_time="$seconds" -timeout=20 -rss_limit_mb=6144 \
  -max_len=32768 -detect_leaks=0 -print_final_stats=1 \
  -artifact_prefix="$dir/artifacts/" "$@"
