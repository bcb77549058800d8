//===- GpuProgram.h - compiled programs on an NVIDIA GPU --------*- C++ -*-===//
//
// The runtime's GPU backend. A GpuProgram is an MLIR module compiled
// through the GPU target: the same front end and lowering to linalg as the
// CPU backend (runtime/Engine/ProgramSupport.h), then the pipeline builder of
// `switchyard-opt --switchyard-gpu-codegen-pipeline` (kernels as a cubin for
// one chip, host code in the LLVM dialect), with the host code JIT-compiled
// (runtime/Engine/NativeCode.h) and linked against the runtime's `mgpu*`
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

#include "lib/Pipelines/TargetOptions.h"
#include "runtime/Program.h"

#include <memory>

namespace switchyard::runtime {

/// How to generate GPU code: the GPU pipeline's options
/// (lib/Pipelines/TargetOptions.h). An empty chip is device 0's
/// ("sm_<major><minor>") where a driver and a device are present, else
/// sm_80; an empty toolkit is $SWITCHYARD_CUDA_TOOLKIT if set, else the one
/// found when Switchyard was built. CompileOptions::roundContractionOperands
/// gives the CPU backend the element type's rounding, as a reference.
using mlir::switchyard::GpuTargetOptions;

/// The chip that an empty GpuTargetOptions::chip stands for where the device has
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
          const GpuTargetOptions &gpuOptions = {});

  /// Reads and compiles an MLIR file.
  static llvm::Expected<std::unique_ptr<GpuProgram>>
  compileFile(llvm::StringRef path, const CompileOptions &options = {},
              const GpuTargetOptions &gpuOptions = {});

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
  /// NCCL's all-reduce of the handles' device memory, on a stream of its
  /// own, synchronised before it returns.
  llvm::Error allReduceMean(llvm::ArrayRef<DeviceTensor *> tensors,
                            NcclGroup &group) override;
  /// Handle arguments are passed as their device pointers, without a copy;
  /// a kept result that is a dense buffer of its own becomes a handle
  /// without a copy.
  llvm::Expected<std::vector<CallResult>>
  callResident(llvm::StringRef name, llvm::ArrayRef<CallArgument> arguments,
               llvm::ArrayRef<bool> keep) override;

  /// The chip the kernels were compiled for.
  llvm::StringRef chip() const;

  /// What the compile cache did for this program (CpuProgram::cacheReport):
  /// a hit skips the compiler's stages and ptxas; the host code is still
  /// JIT-compiled.
  llvm::StringRef cacheReport() const;

private:
  GpuProgram();
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_ENGINE_GPUPROGRAM_H
