# -*- Python -*-
# lit configuration of the Switchyard test suite: FileCheck tests of the
# dialects, passes, pipelines, tools and example models.

import os
import platform
import shutil
import subprocess
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

# --param gpu_emulation=1 runs the GPU execution tests (test/Integration/CUDA)
# without a GPU: %gpu-check and %gpu-device select the GPU emulation (the GPU
# route's kernels on the host CPU) instead of the GPU, and the feature
# `gpu-emulation` stands in for `cuda-gpu`. The suite then has its own name,
# so that no report passes an emulated run off as a GPU one.
gpu_emulation = lit_config.params.get("gpu_emulation", "0") not in ("0", "")
config.name = "Switchyard (GPU emulation)" if gpu_emulation else "Switchyard"
verify_roundtrip = (lit_config.params.get("verify_roundtrip", "0")
                    not in ("0", ""))


# lit's worker processes unpickle the test format: its class lives in a
# module of its own (test/switchyard_lit.py), not in this file.
sys.path.insert(0, os.path.dirname(__file__))
from switchyard_lit import RoundTripShTest  # noqa: E402


config.test_format = (RoundTripShTest if verify_roundtrip else
                      lit.formats.ShTest)(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.switchyard_obj_root, "test")
if gpu_emulation:
    # Its own Output/ directories, apart from a GPU run of the same tests.
    config.test_exec_root = os.path.join(config.test_exec_root,
                                         "gpu-emulation")
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py",
                   "lit.site.cfg.py", "switchyard_lit.py", "unit", "Inputs"]

# lit drops the environment; keep what the tools need.
llvm_config.with_system_environment(["HOME", "TMP", "TEMP", "PATH"])
# The tools' compile cache, shared by the tests, in the build tree (never the
# user's); tests of the cache itself set their own.
config.environment["SWITCHYARD_CACHE_DIR"] = os.path.join(
    config.test_exec_root, "compile-cache")
llvm_config.use_default_substitutions()

config.substitutions.append(("%switchyard_src", config.switchyard_src_root))
config.substitutions.append(("%examples",
                             os.path.join(config.switchyard_src_root,
                                          "examples")))

# The host's architecture, for the tests of CPU names (--cpu).
if platform.machine() in ("x86_64", "AMD64"):
    config.available_features.add("x86_64")

# Before the tool substitutions, which then resolve switchyard-gpu-check.
gpu_check = os.path.join(config.switchyard_tools_dir, "switchyard-gpu-check")
have_gpu_check = os.path.exists(gpu_check)
if have_gpu_check:
    config.available_features.add("switchyard-gpu-check")
if gpu_emulation and have_gpu_check:
    config.available_features.add("gpu-emulation")
    # The emulation checks what the kernels compute, not LLVM's
    # optimisations: both sides' JIT code at -O0 compiles in 40% less time
    # (18 s -> 11 s for the tiny model's gradients in bf16), and compiling is
    # nearly all of these tests' time.
    config.substitutions.append(("%gpu-check",
                                 "switchyard-gpu-check --emulate --opt-level 0"))
    config.substitutions.append(("%gpu-device", "gpu-emulation"))
else:
    config.substitutions.append(("%gpu-check", "switchyard-gpu-check"))
    config.substitutions.append(("%gpu-device", "gpu"))

# --param verify_roundtrip=1: every switchyard-opt run also checks that its
# output parses back to the same IR (as CIRCT's lit switch does). Feature
# `verify-roundtrip`: a test whose outputs are only upstream's dialects and
# whose compilation is long may say `UNSUPPORTED: verify-roundtrip`.
opt_extra = ["--verify-roundtrip"] if verify_roundtrip else []
if verify_roundtrip:
    config.available_features.add("verify-roundtrip")

tool_dirs = [config.switchyard_tools_dir, config.llvm_tools_dir]
tools = [
    ToolSubst("switchyard-opt", extra_args=opt_extra, unresolved="fatal"),
    ToolSubst("switchyard", unresolved="fatal"),
    ToolSubst("switchyard-bench", unresolved="fatal"),
    # Built only where CMake found the CUDA toolkit; used by
    # test/Integration/CUDA, which needs a GPU.
    ToolSubst("switchyard-gpu-check", unresolved="ignore"),
    "FileCheck", "count", "not",
    # LLVM's own tools, for tests of the code that LLVM generates from the
    # kernels for a given target (test/Codegen/CPU).
    "mlir-opt", "mlir-translate", "opt", "llc",
]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# The GPU target. Tests of emitted PTX need no GPU: `ptxas` (feature and
# %ptxas) is the CUDA toolkit's assembler that the pipeline also uses for
# format=bin and fatbin. `cuda-gpu` marks machines where a GPU is visible,
# for execution tests.
config.substitutions.append(("%python", sys.executable))
cuda_root = getattr(config, "cuda_toolkit_dir", "") or "/usr/local/cuda"
ptxas = os.path.join(cuda_root, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
# `torch`: Debian's python3-torch (bench/cpu.sh installs it), for the tests
# of switchyard-bench's PyTorch peers.
try:
    if subprocess.run(["/usr/bin/python3", "-c", "import torch, numpy"],
                      capture_output=True, timeout=120).returncode == 0:
        config.available_features.add("torch")
except (OSError, subprocess.SubprocessError):
    pass
# `rsvg-convert`: librsvg's SVG renderer (Debian librsvg2-bin, which the
# README's set-up command installs), for the pictures of switchyard analyze.
if shutil.which("rsvg-convert"):
    config.available_features.add("rsvg-convert")
# `mpirun`: Open MPI's launcher (Debian openmpi-bin), for data-parallel
# training. Root may run it (CI runs as root), on more ranks than cores.
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    config.substitutions.append(("%mpirun", shutil.which("mpirun")))
nvidia_smi = shutil.which("nvidia-smi")
if nvidia_smi:
    try:
        listing = subprocess.run([nvidia_smi, "-L"], capture_output=True,
                                 text=True, timeout=30)
        if listing.returncode == 0 and "GPU" in listing.stdout:
            config.available_features.add("cuda-gpu")
            # `cuda-sm90`: device 0 runs sm_90a's kernels (wgmma, TMA).
            capability = subprocess.run(
                [nvidia_smi, "--id=0", "--query-gpu=compute_cap",
                 "--format=csv,noheader"], capture_output=True, text=True,
                timeout=30)
            if capability.stdout.strip() == "9.0":
                config.available_features.add("cuda-sm90")
    except (OSError, subprocess.SubprocessError):
        pass
