//===- ProgramSupport.h - what every backend's Program shares ---*- C++ -*-===//
//
// Internal to the runtime (only backends include it; it uses MLIR): the
// compilation up to linalg on tensors, which records the signatures, the
// `lm.*` argument roles and the declared parameters, the checking of call
// arguments against a signature, and the memref descriptors of the C
// interface that generated functions are called through. CpuProgram and
// GpuProgram differ only in code generation and in where buffers live.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_ENGINE_PROGRAMSUPPORT_H
#define SWITCHYARD_RUNTIME_ENGINE_PROGRAMSUPPORT_H

#include "runtime/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace mlir {
class MLIRContext;
class PassManager;
class SourceMgrDiagnosticHandler;
} // namespace mlir

namespace switchyard::runtime::detail {

/// An llvm::Error with `message`.
llvm::Error failure(const llvm::Twine &message);

/// `options` resolved for `target`: unset fusions take the target's
/// defaults (FusionOptions::targetDefault), and on the GPU target (the GPU
/// and its emulation) a grouped formulation is the padded one, which reads
/// nothing on the host (kGpuGroupedTileRows rows per tile unless set).
CompileOptions resolveFor(CompileOptions options,
                          mlir::switchyard::Target target);

/// One module on its way through the compiler: parsed from source text,
/// with every diagnostic (and its location) collected for the error that a
/// failing stage returns.
class Compilation {
public:
  /// Parses nothing yet; `context` must have the dialects registered.
  Compilation(mlir::MLIRContext &context, llvm::StringRef source,
              llvm::StringRef bufferName);
  ~Compilation();

  /// Parses and verifies the source, runs the front end (declaring the
  /// parameters, recorded into `params`) and the lowering to linalg on
  /// tensors that `options` selects, and records the signature of every
  /// public function into `functions` with its arguments' roles. Marks the
  /// public functions for the runtime: arguments are never written
  /// (bufferization.writable = false) and each gets its C interface.
  /// `flashAttentionKernel`: the GPU's tensor-core route keeps the forward
  /// flash attention for its kernel (LoweringOptions::flashAttentionKernel).
  /// `scatterEmbeddingGradient`: the CPU target's embedding gradient
  /// (LoweringOptions::scatterEmbeddingGradient).
  /// `fusedForms`: how the fused ops lower (the CPU's, or row kernels).
  llvm::Error lowerToLinalg(const CompileOptions &options, ParamTable &params,
                            std::vector<FunctionSpec> &functions,
                            bool flashAttentionKernel = false,
                            bool scatterEmbeddingGradient = false,
                            mlir::switchyard::FusedKernelForms fusedForms = {});

  /// Runs `pm` on the module, with the MLIR pass-manager options of the
  /// command line (--mlir-print-ir-*, --mlir-timing, ...) where the tool
  /// registers them; a failure names `stage`.
  llvm::Error run(mlir::PassManager &pm, llvm::StringRef stage);

  /// An error saying that `stage` failed, with the diagnostics so far.
  llvm::Error stageFailed(llvm::StringRef stage) const;

  mlir::ModuleOp module() { return *moduleOp; }
  llvm::StringRef bufferName() const { return name; }
  const std::string &diagnostics() const { return diagnosticText; }

private:
  mlir::MLIRContext &context;
  std::string name;
  std::string diagnosticText;
  llvm::raw_string_ostream diagnosticStream;
  llvm::SourceMgr sources;
  std::unique_ptr<mlir::SourceMgrDiagnosticHandler> handler;
  mlir::OwningOpRef<mlir::ModuleOp> moduleOp;
};

/// Finds `name` in `functions` and checks `arguments` against its signature:
/// count, element types, ranks, static sizes, byte counts and token ids.
/// Errors name the argument.
llvm::Expected<const FunctionSpec *>
checkCall(const std::vector<FunctionSpec> &functions, llvm::StringRef name,
          llvm::ArrayRef<const HostTensor *> arguments);
/// The same for host tensors and handles: a handle's element type and shape
/// are checked (its contents are not read).
llvm::Expected<const FunctionSpec *>
checkCall(const std::vector<FunctionSpec> &functions, llvm::StringRef name,
          llvm::ArrayRef<CallArgument> arguments);

/// The memref descriptor of a dense row-major tensor of `shape` at `data`:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}, 8-byte words.
std::vector<int64_t> denseDescriptor(const void *data,
                                     llvm::ArrayRef<int64_t> shape);

/// One memref descriptor a generated function returned.
struct ResultDescriptor {
  void *allocated = nullptr;
  uint8_t *aligned = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;

  int64_t numElements() const;
  /// Elements from the first one of the view to its last, inclusive (0 for
  /// an empty view): what a copy of the whole view has to read.
  int64_t spanElements() const;
  /// Whether the view is dense in row-major order from its first element
  /// (dimensions of size 1 may have any stride).
  bool isDense() const;
};

/// Calls the packed entry point `entry` of `_mlir_ciface_<function.name>`
/// with one descriptor per argument, and decodes the descriptors it
/// returns.
llvm::Expected<std::vector<ResultDescriptor>>
invoke(void (*entry)(void **), const FunctionSpec &function,
       std::vector<std::vector<int64_t>> &arguments);

/// A binder (lib/Pipelines/TargetOptions.h) that prints each option as
/// `<prefix><name> <value>`.
struct OptionPrinter {
  llvm::raw_ostream &os;
  llvm::StringRef prefix;
  template <typename T> void bind(llvm::StringRef name, T &field,
                                  llvm::StringRef) {
    os << prefix << name << " " << field;
  }
};

/// This machine's CPU and its features, for a compile cache key of native
/// code.
std::string describeHostCpu();

/// Everything a program compiled from `source` with `options` (resolved
/// for its target: resolveFor) depends on, as text for CompileCache's key:
/// the compiler build (LLVM's version and this executable, by size and
/// modification time), the options, the text, and `backend` (the backend's
/// own options and targets). nullopt where the executable cannot be
/// identified (no cache then).
std::optional<std::string> describeCompilation(llvm::StringRef source,
                                               llvm::StringRef bufferName,
                                               const CompileOptions &options,
                                               llvm::StringRef backend);

/// Copies the elements of `result` into a dense HostTensor of `type`;
/// `first` points at its first element (`aligned + offset` elements) in host
/// memory, followed by at least spanElements() elements.
HostTensor gather(const ResultDescriptor &result, ElementType type,
                  const uint8_t *first);

} // namespace switchyard::runtime::detail

#endif // SWITCHYARD_RUNTIME_ENGINE_PROGRAMSUPPORT_H
