#===- bench/device-env.sh - the GPU machine's bundle and toolkit -----------===#
#
# Sourced by bench/gpu-check-bundle.sh and bench/gpu.sh on the GPU machine
# (the device tool's: CUDA, but no LLVM/MLIR; see scripts/device-bundle.sh).
#
#   find_cuda_toolkit         exports SWITCHYARD_CUDA_TOOLKIT: the first
#                             directory with bin/ptxas and libdevice (for
#                             format=bin and the kernels' math functions);
#                             returns 1 where there is none
#   unpack_bundle DIR DEST    unpacks DIR/bin.tar.xz (or copies DIR/bin/*,
#                             decompressing .xz) into DEST, and puts DIR/lib
#                             on LD_LIBRARY_PATH; returns 1 where a binary
#                             cannot be unpacked
#   bundle_commit ROOT [DIR]  the commit: the bundle's MANIFEST where there is
#                             one (the .git the device tool sends can be
#                             older than the binaries), else git's
#===------------------------------------------------------------------------===#

find_cuda_toolkit() {
  local toolkit=${SWITCHYARD_CUDA_TOOLKIT:-} dir candidates="/usr/local/cuda"
  command -v ptxas > /dev/null &&
    candidates="$candidates $(dirname "$(dirname "$(command -v ptxas)")")"
  command -v nvcc > /dev/null &&
    candidates="$candidates $(dirname "$(dirname "$(command -v nvcc)")")"
  candidates="$candidates $(python3 -c 'import nvidia, os; [print(os.path.join(p, d)) for p in nvidia.__path__ for d in os.listdir(p)]' 2>/dev/null)"
  for dir in $candidates /usr/local/cuda-*; do
    [ -n "$toolkit" ] && break
    if [ -x "$dir/bin/ptxas" ] && [ -f "$dir/nvvm/libdevice/libdevice.10.bc" ]; then
      toolkit=$dir
    fi
  done
  if [ -z "$toolkit" ]; then
    echo "NO TOOLKIT: no directory with bin/ptxas and nvvm/libdevice/libdevice.10.bc (set SWITCHYARD_CUDA_TOOLKIT)"
    return 1
  fi
  export SWITCHYARD_CUDA_TOOLKIT=$toolkit
  echo "toolkit: $toolkit ($("$toolkit/bin/ptxas" --version | tail -1))"
}

unpack_bundle() {
  local bundle=$1 dest=$2 file
  mkdir -p "$dest"
  if [ -f "$bundle/bin.tar.xz" ]; then
    if command -v xz > /dev/null; then
      xz -dc "$bundle/bin.tar.xz" | tar -C "$dest" -xf -
    else # (python3's lzma where the machine has no xz)
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
        "$bundle/bin.tar.xz" "$dest"
    fi || { echo "cannot unpack $bundle/bin.tar.xz"; return 1; }
  fi
  for file in "$bundle"/bin/*; do
    [ -e "$file" ] || continue
    case $file in
      *.xz)
        if command -v xz > /dev/null; then
          xz -dc "$file" > "$dest/$(basename "$file" .xz)"
        else # (python3's lzma where the machine has no xz)
          python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            "$file" "$dest/$(basename "$file" .xz)"
        fi ;;
      *) cp "$file" "$dest/" ;;
    esac || { echo "cannot unpack $file"; return 1; }
  done
  chmod +x "$dest"/*
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

bundle_commit() {
  local root=$1 bundle=${2:-}
  # The bundle's own record first: the .git that travels with the working
  # tree can be older than the commit the binaries were built at.
  if [ -n "$bundle" ] && [ -f "$bundle/MANIFEST" ]; then
    sed -n 's/^commit: //p' "$bundle/MANIFEST" | head -1
  elif git -C "$root" rev-parse --short HEAD 2> /dev/null; then
    git -C "$root" diff --quiet HEAD 2> /dev/null || echo "(with uncommitted changes)"
  else
    echo unknown
  fi
}
