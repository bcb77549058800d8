//===- NativeCode.h - a compiled module's objects, in parallel --*- C++ -*-===//
//
// The JIT's code generation: a module in the LLVM dialect becomes
// relocatable objects for this machine, which ObjectLoader.h links into the
// process (and the compile cache keeps). The straight lines (entry points,
// layer blocks, a GPU program's host code) are compiled at level 0 on the
// calling thread; the loop nests, in parts, are optimised and compiled at
// the requested level on other threads meanwhile.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_ENGINE_NATIVECODE_H
#define SWITCHYARD_RUNTIME_ENGINE_NATIVECODE_H

#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace llvm {
class Module;
} // namespace llvm

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace switchyard::runtime::detail {

/// The CPU that code is generated for: an LLVM CPU name and features
/// (CompileOptions::cpu and cpuFeatures); both empty: this machine's.
struct CpuTarget {
  std::string cpu;
  std::string features;

  bool isHost() const { return cpu.empty() && features.empty(); }
};

/// Checks that `target` names a CPU and features LLVM knows for this
/// machine's architecture, and that this machine can run its code: an
/// error names the unknown name, or the instruction set extensions the
/// target needs and this machine lacks.
llvm::Error checkCpuTarget(const CpuTarget &target);

struct NativeCodeOptions {
  /// The CPU to generate code for (checked by checkCpuTarget).
  CpuTarget target;
  /// LLVM's optimisation level (0-3) for the loop nests: its IR pipeline
  /// (lib/Target/LLVMIR/Optimize.h) and its code generator.
  unsigned optLevel = 3;
  /// Threads for the loop nests' parts; 0: one per core.
  unsigned threads = 0;
  /// Whether the loop nests marked parallel (kParallelForAttr) run on the
  /// runtime's compute threads (switchyardParallelFor,
  /// runtime/ComputeThreads.h), which the program must then resolve; else
  /// they run on the calling thread.
  bool parallelLoops = false;
  /// Run on the module right after the translation to LLVM IR (the GPU
  /// host code's checks and its constructors taken out); an error stops
  /// the compilation.
  std::function<llvm::Error(llvm::Module &)> afterTranslation;
};

/// The relocatable objects of `module`, in the LLVM dialect, which is
/// readied first (mlir::switchyard::prepareForJit): the straight lines with
/// the packed entry point `_mlir__mlir_ciface_NAME` of each C interface,
/// then the parts of the loop nests. They link with each other by name.
llvm::Expected<std::vector<std::string>>
generateObjects(mlir::ModuleOp module, const NativeCodeOptions &options);

/// The vector registers the JIT's code generation uses for `target`:
/// their width in bits and their number, from LLVM's cost model of its
/// target machine (512 × 32 where AVX-512's 512-bit registers are used,
/// 256 × 32 where AVX-512 prefers 256-bit vectors, 256 × 16 with AVX2,
/// 128 × 16 with SSE2 only, 128 × 32 on AArch64).
std::pair<unsigned, unsigned> vectorRegisters(const CpuTarget &target = {});

} // namespace switchyard::runtime::detail

#endif // SWITCHYARD_RUNTIME_ENGINE_NATIVECODE_H
