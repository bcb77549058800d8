//===- GpuProgram.h - compiled programs on an NVIDIA GPU --------*- C++ -*-===//
//
// The runtime's GPU backend. A GpuProgram is an MLIR module compiled
// through the GPU target: the same front end and lowering to linalg as the
// CPU backend (runtime/Engine/ProgramSupport.h), then the pipeline builder of
// `switchyard-opt --switchyard-gpu-codegen-pipeline` (kernels as a cubin for
// one chip, host code in the LLVM dialect), with the host code JIT-compiled
// by MLIR's ExecutionEngine and linked against the runtime's `mgpu*`
// wrappers (runtime/CudaDriver.h).
//
// Compiling needs no GPU (only the CUDA toolkit's ptxas); calling needs the
// NVIDIA driver and a device, and fails with a clear error without them.
//
// Calling convention: as on the CPU, through each function's C interface,
// but every buffer the generated code touches is device memory. call()
// copies the arguments into device memory from the driver's pool, passes
// device pointers in the memref descriptors, copies each result (device
// memory from mgpuMemAlloc, owned by the caller) back into a HostTensor and
// returns its buffer to the pool. callResident() takes DeviceTensor handles
// (device memory that stays between calls) as arguments without a copy and
// keeps the results asked for as handles, so a training loop moves only its
// batch, hyperparameters, loss and gradient norm each step.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_ENGINE_GPUPROGRAM_H
#define SWITCHYARD_RUNTIME_ENGINE_GPUPROGRAM_H

#include "runtime/Program.h"

#include <memory>

namespace switchyard::runtime {

/// How to generate GPU code (the options of buildGpuCodegenPipeline).
struct GpuCompileOptions {
  /// Target chip, e.g. "sm_90"; empty: the device's compute capability
  /// ("sm_<major><minor>") where a driver and device are present, else
  /// "sm_80".
  std::string chip;
  /// What the kernels are shipped as: "bin" (cubin, assembled by ptxas
  /// here), "fatbin" (cubin and PTX) or "isa" (PTX, JIT-compiled by the
  /// driver when the program is first called).
  std::string format = "bin";
  /// LLVM optimisation level of the kernels (0-3).
  unsigned kernelOptLevel = 3;
  /// Threads per block of the SIMT kernels (1-1024).
  int64_t blockSize = 256;
  /// CUDA toolkit root; empty: $SWITCHYARD_CUDA_TOOLKIT if set, else the one
  /// found when Switchyard was built.
  std::string toolkit;
  /// Element type of the matmul multiplicands in kernels: "f32" (exact,
  /// SIMT), "bf16" or "f16" (tensor cores on sm_80 and newer, SIMT with the
  /// factors rounded on sm_75; f32 accumulation). CompileOptions::
  /// roundContractionOperands gives the CPU backend the same rounding, as a
  /// reference.
  std::string elementType = "f32";
  /// With chip "sm_90a" and a 16-bit elementType: warpgroup MMA (wgmma)
  /// with TMA loads for the contractions whose N and K are static multiples
  /// of 128 and 64 (the pipeline's `wgmma` option; off by default).
  bool wgmma = false;
};

/// The chip that GpuCompileOptions::chip defaults to where the device has
/// compute capability `computeCapability` (e.g. 90 -> "sm_90").
std::string defaultChip(int computeCapability);

/// A module compiled for an NVIDIA GPU, ready to call.
class GpuProgram final : public Program {
public:
  ~GpuProgram() override;
  GpuProgram(const GpuProgram &) = delete;
  GpuProgram &operator=(const GpuProgram &) = delete;

  /// Compiles MLIR source text; `bufferName` names it in diagnostics.
  /// `options.optLevel` is the host code's JIT optimisation level. Needs no
  /// driver or device.
  static llvm::Expected<std::unique_ptr<GpuProgram>>
  compile(llvm::StringRef source, llvm::StringRef bufferName,
          const CompileOptions &options = {},
          const GpuCompileOptions &gpuOptions = {});

  /// Reads and compiles an MLIR file.
  static llvm::Expected<std::unique_ptr<GpuProgram>>
  compileFile(llvm::StringRef path, const CompileOptions &options = {},
              const GpuCompileOptions &gpuOptions = {});

  const std::vector<FunctionSpec> &functions() const override;
  const ParamTable &params() const override;
  /// Fails, before running anything, where there is no CUDA driver or
  /// device; errors the driver reports during the call are returned too.
  llvm::Expected<std::vector<HostTensor>>
  call(llvm::StringRef name,
       llvm::ArrayRef<const HostTensor *> arguments) override;
  llvm::StringRef backend() const override { return "gpu"; }

  /// Handles in device memory from the driver's pool (returned there when
  /// destroyed). upload() and download() copy synchronously; all three fail
  /// where there is no driver or device.
  llvm::Expected<std::unique_ptr<DeviceTensor>>
  upload(const HostTensor &tensor) override;
  llvm::Expected<HostTensor> download(const DeviceTensor &tensor) override;
  /// Handle arguments are passed as their device pointers, without a copy;
  /// a kept result that is a dense buffer of its own becomes a handle
  /// without a copy.
  llvm::Expected<std::vector<CallResult>>
  callResident(llvm::StringRef name, llvm::ArrayRef<CallArgument> arguments,
               llvm::ArrayRef<bool> keep) override;

  /// The chip the kernels were compiled for.
  llvm::StringRef chip() const;

private:
  GpuProgram();
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_ENGINE_GPUPROGRAM_H
