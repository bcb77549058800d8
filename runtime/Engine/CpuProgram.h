//===- CpuProgram.h - compiled programs on the CPU --------------*- C++ -*-===//
//
// The runtime's CPU backend. A CpuProgram is an MLIR module (a model
// definition in the `lm` dialect, or functions on tensors using `moe` and
// upstream ops) compiled through the CPU target: the same pipeline builders
// as `switchyard-opt --switchyard-cpu-pipeline`, JIT-compiled to native
// code. Functions take and return HostTensors; no MLIR type crosses this
// header.
//
// With CompileOptions::emulateGpu, the module goes through the GPU target's
// kernel formation instead and its kernels run on the host (the GPU
// emulation).
//
// Calling convention: every public function is called through its C
// interface; arguments are read-only; results are fresh buffers the runtime
// copies into HostTensors and frees.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_ENGINE_CPUPROGRAM_H
#define SWITCHYARD_RUNTIME_ENGINE_CPUPROGRAM_H

#include "runtime/Program.h"

#include <memory>

namespace switchyard::runtime {

/// A module compiled for the CPU, ready to call.
class CpuProgram final : public Program {
public:
  ~CpuProgram() override;
  CpuProgram(const CpuProgram &) = delete;
  CpuProgram &operator=(const CpuProgram &) = delete;

  /// Compiles MLIR source text; `bufferName` names it in diagnostics.
  /// Compiler diagnostics are returned in the error.
  static llvm::Expected<std::unique_ptr<CpuProgram>>
  compile(llvm::StringRef source, llvm::StringRef bufferName,
          const CompileOptions &options = {});

  /// Reads and compiles an MLIR file.
  static llvm::Expected<std::unique_ptr<CpuProgram>>
  compileFile(llvm::StringRef path, const CompileOptions &options = {});

  const std::vector<FunctionSpec> &functions() const override;
  const ParamTable &params() const override;
  llvm::Expected<std::vector<HostTensor>>
  call(llvm::StringRef name,
       llvm::ArrayRef<const HostTensor *> arguments) override;
  /// "cpu", or "gpu-emulation" (CompileOptions::emulateGpu).
  llvm::StringRef backend() const override;

  /// What the compile cache did for this program, for the tools to say:
  /// empty without a cache (CompileOptions::cacheDirectory), else "hit
  /// <entry>", "stored <entry>", or "not stored: <reason>".
  llvm::StringRef cacheReport() const;

private:
  CpuProgram();
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_ENGINE_CPUPROGRAM_H
