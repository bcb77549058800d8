//===- GpuModuleToBinary.cpp - gpu.modules serialized in parallel --------===//
//
// Implements `switchyard-gpu-module-to-binary` (see Passes.td): upstream's
// gpu-module-to-binary with the modules' serializations (translation, the
// NVPTX back end, ptxas) run concurrently.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUMODULETOBINARYPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-module-to-binary"

using namespace mlir;

namespace {

struct SwitchyardGpuModuleToBinaryPass
    : public switchyard::impl::SwitchyardGpuModuleToBinaryPassBase<
          SwitchyardGpuModuleToBinaryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The spellings of upstream's pass.
    std::optional<gpu::CompilationTarget> format =
        llvm::StringSwitch<std::optional<gpu::CompilationTarget>>(
            compilationTarget)
            .Cases({"offloading", "llvm"}, gpu::CompilationTarget::Offload)
            .Cases({"assembly", "isa"}, gpu::CompilationTarget::Assembly)
            .Cases({"binary", "bin"}, gpu::CompilationTarget::Binary)
            .Cases({"fatbinary", "fatbin"}, gpu::CompilationTarget::Fatbin)
            .Default(std::nullopt);
    if (!format) {
      module.emitError() << "switchyard-gpu-module-to-binary: unknown format '"
                         << compilationTarget
                         << "' (llvm, isa, bin or fatbin)";
      return signalPassFailure();
    }
    // Built before the threads start: they only read it.
    SymbolTable symbols(module);
    SymbolTable *table = &symbols;
    gpu::TargetOptions options(
        toolkitPath, /*librariesToLink=*/{}, cmdOptions,
        /*elfSection=*/{}, *format, [table]() { return table; });

    SmallVector<gpu::GPUModuleOp> kernels(module.getOps<gpu::GPUModuleOp>());
    SmallVector<SmallVector<Attribute>> objects(kernels.size());
    LogicalResult serialized = failableParallelForEach(
        &getContext(), llvm::seq<size_t>(0, kernels.size()),
        [&](size_t index) -> LogicalResult {
          gpu::GPUModuleOp kernel = kernels[index];
          ArrayAttr targets = kernel.getTargetsAttr();
          if (!targets)
            return kernel.emitError("the module has no target attributes");
          for (Attribute attribute : targets) {
            auto target = dyn_cast<gpu::TargetAttrInterface>(attribute);
            if (!target)
              return kernel.emitError("target ")
                     << attribute << " cannot serialize a module";
            std::optional<SmallVector<char, 0>> object =
                target.serializeToObject(kernel, options);
            if (!object)
              return kernel.emitError(
                  "an error happened while serializing the module");
            Attribute made = target.createObject(kernel, *object, options);
            if (!made)
              return kernel.emitError(
                  "an error happened while creating the object");
            objects[index].push_back(made);
          }
          LLVM_DEBUG(llvm::dbgs() << "serialized @" << kernel.getName()
                                  << "\n");
          return success();
        });
    if (failed(serialized))
      return signalPassFailure();

    OpBuilder builder(&getContext());
    for (auto [kernel, made] : llvm::zip(kernels, objects)) {
      builder.setInsertionPointAfter(kernel);
      gpu::BinaryOp::create(builder, kernel.getLoc(), kernel.getName(),
                            kernel.getOffloadingHandlerAttr(),
                            builder.getArrayAttr(made));
      kernel->erase();
    }
  }
};

} // namespace
