//===- TargetOptions.h - how GPU code is generated --------------*- C++ -*-===//
//
// Plain structs for the GPU target's and the GPU emulation's code
// generation options, shared by the pipelines, the drivers and the runtime
// (whose headers carry no MLIR types). Each struct declares every option
// once, in bindOptions(): its name, the field that holds it and what it
// does. OptionsBinder.h turns those declarations into pass pipeline options
// and command-line flags, so that a name, a default or a description is
// written in one place.
//
// A binder is any type with a member template
//   template <typename T> void bind(llvm::StringRef name, T &field,
//                                   llvm::StringRef description);
// called once per option, in the order the options are listed.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_PIPELINES_TARGETOPTIONS_H
#define SWITCHYARD_LIB_PIPELINES_TARGETOPTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::switchyard {

struct GpuEmulationOptions;

/// The options the GPU target and its emulation share: how kernels are
/// formed.
template <typename Binder>
void bindKernelFormation(Binder &binder, int64_t &blockSize,
                         std::string &elementType, bool &epilogues) {
  binder.bind("block-size", blockSize,
              "Threads per block of the SIMT kernels (1-1024)");
  binder.bind("element-type", elementType,
              "Element type of matmul multiplicands in kernels: f32 "
              "(exact, SIMT), bf16 or f16 (tensor cores, mma.sync, on sm_80 "
              "and newer and in the emulation; rounded SIMT on sm_75); "
              "accumulation is f32");
  binder.bind("epilogues", epilogues,
              "With tensor cores: compute the elementwise op that reads a "
              "matmul's result (bias, activation, residual add, dropout) in "
              "the matmul kernel's stores (switchyard-mark-epilogues); "
              "false: a kernel of its own");
}

/// Checks the shared options, naming each as `prefix` and its name.
llvm::Error verifyKernelFormation(int64_t blockSize,
                                  llvm::StringRef elementType,
                                  llvm::StringRef prefix);

/// How the GPU target (NVIDIA, through NVVM) generates code: the options
/// of switchyard-gpu-pipeline after its model options, the driver's
/// `--gpu-*` flags and the runtime's GpuProgram options.
struct GpuTargetOptions {
  std::string chip;
  std::string features;
  std::string format = "bin";
  std::string toolkit;
  std::string ptxasOptions = "--split-compile=0";
  unsigned optLevel = 3;
  int64_t blockSize = 256;
  std::string elementType = "f32";
  bool epilogues = true;
  bool wgmma = false;
  std::string kernelReport;

  template <typename Binder> void bindOptions(Binder &binder) {
    binder.bind("chip", chip,
                "Target chip: sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, "
                "sm_90a, sm_100, sm_100a, sm_103, sm_103a, sm_120, sm_120a, "
                "sm_121, sm_121a; empty: device 0's where the runtime finds "
                "a driver and a device, else sm_80");
    binder.bind("features", features,
                "NVPTX target features, e.g. +ptx81; empty picks the lowest "
                "PTX version that the chip needs, 8.1 at least (kernels of "
                "up to 32764 bytes of parameters)");
    binder.bind("format", format,
                "How kernels are shipped: bin (cubin, through ptxas), "
                "fatbin (through ptxas and fatbinary) or isa (PTX text, "
                "compiled by the driver when first called)");
    binder.bind("toolkit", toolkit,
                "CUDA toolkit root (ptxas, fatbinary, libdevice); empty: "
                "$SWITCHYARD_CUDA_TOOLKIT if set, else the one found when "
                "Switchyard was built");
    binder.bind("ptxas-options", ptxasOptions,
                "Options for ptxas (formats bin and fatbin). The default, "
                "--split-compile=0, optimises on every core; ptxas before "
                "CUDA 12.8 may not know it: set this empty there");
    binder.bind("opt-level", optLevel,
                "LLVM optimisation level of the kernels (0-3)");
    bindKernelFormation(binder, blockSize, elementType, epilogues);
    binder.bind("wgmma", wgmma,
                "With chip sm_90a and element type bf16/f16: wgmma + TMA "
                "kernels for the contractions that fit them (static N and "
                "K, no batch dimension), mma.sync for the others");
    binder.bind("kernel-report", kernelReport,
                "Write a static table of the kernels (launches, grid, "
                "block, per-thread work; switchyard-gpu-kernel-report with "
                "its defaults: batch 16, 132 SMs) to this file (-: standard "
                "output) once they form; empty: none");
  }

  /// The chip kernels are compiled for where nobody asked for one and no
  /// device is at hand.
  static constexpr llvm::StringLiteral kDefaultChip = "sm_80";
  /// `chip`, or kDefaultChip where it is empty.
  llvm::StringRef chipOrDefault() const {
    return chip.empty() ? llvm::StringRef(kDefaultChip)
                        : llvm::StringRef(chip);
  }
  /// Whether matmuls run on tensor cores: a 16-bit element type and a chip
  /// with bf16/f16 mma.sync m16n8k16 (sm_80 and newer: all but sm_75).
  bool usesTensorCores() const;
  /// Whether the contractions that fit take the wgmma + TMA route: asked
  /// for, tensor cores, and sm_90a (plain sm_90 has no wgmma).
  bool usesWgmma() const;
  /// The CUDA toolkit root: `toolkit`, $SWITCHYARD_CUDA_TOOLKIT, or the
  /// build's.
  std::string toolkitDir() const;
  /// Checks every option; each message names the option as `prefix` and
  /// its name (e.g. "--gpu-" and "chip").
  llvm::Error verify(llvm::StringRef prefix) const;
  /// `features`, or the chip's default PTX version (defaultPtxFeature).
  std::string featuresOrDefault() const;
  /// The GPU emulation of these kernels: the same block size and element
  /// type and epilogues, tensor-core kernels where the chip has them
  /// (sm_75's SIMT route otherwise), wgmma where usesWgmma(). Reads chip,
  /// block-size, element-type, epilogues and wgmma only.
  GpuEmulationOptions emulation() const;
};

/// The PTX version (as an NVPTX feature, e.g. "+ptx81") that the GPU
/// target uses for `chip` by default: the lowest the chip needs, and 8.1 at
/// least; none for a chip the GPU target does not know.
std::optional<llvm::StringRef> defaultPtxFeature(llvm::StringRef chip);

/// The bytes of parameters a kernel may take with NVPTX `features` (every
/// chip of the GPU target is sm_70 or newer): 32764 from PTX ISA 8.1 on,
/// 4096 before.
int64_t maxKernelParameterBytes(llvm::StringRef features);

/// How the GPU emulation runs the GPU target's kernels on the host: the
/// options of switchyard-gpu-emulation-pipeline after its model options.
struct GpuEmulationOptions {
  int64_t blockSize = 256;
  std::string elementType = "f32";
  bool epilogues = true;
  bool tensorCores = true;
  bool wgmma = false;
  bool checkBounds = false;

  template <typename Binder> void bindOptions(Binder &binder) {
    bindKernelFormation(binder, blockSize, elementType, epilogues);
    binder.bind("tensor-cores", tensorCores,
                "With element-type bf16 or f16: run the matmuls' "
                "tensor-core kernels (ldmatrix + mma.sync, the GPU "
                "target's route on sm_80 and newer), their warps' threads "
                "serialised between barriers; false: the SIMT route with "
                "rounded factors (sm_75's)");
    binder.bind("wgmma", wgmma,
                "With tensor-cores: run sm_90a's wgmma + TMA kernels for "
                "the contractions that fit them (the GPU target's wgmma "
                "option), their TMA loads, mbarriers and warpgroup MMAs "
                "emulated as the PTX ISA defines them");
    binder.bind("check-bounds", checkBounds,
                "Check every load and store of the kernels against its "
                "buffer's bounds when it runs "
                "(generate-runtime-verification); a failing check prints "
                "the op and its location and aborts");
  }

  /// Whether the emulation runs the tensor-core kernels (mma.sync for
  /// matmuls and the flash attention): asked for, with a 16-bit element
  /// type.
  bool usesTensorCores() const {
    return tensorCores && elementType != "f32";
  }
  /// Whether the contractions that fit take the wgmma + TMA kernels.
  bool usesWgmma() const { return wgmma && usesTensorCores(); }
  /// Checks every option, as GpuTargetOptions::verify does.
  llvm::Error verify(llvm::StringRef prefix) const;
};

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_PIPELINES_TARGETOPTIONS_H
