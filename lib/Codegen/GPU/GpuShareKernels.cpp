//===- GpuShareKernels.cpp - one kernel for identical kernels -------------===//
//
// Implements `switchyard-gpu-share-kernels` (see Passes.td) with the
// structural comparison of SameFunctions.h.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/GPU/Passes.h"
#include "lib/Codegen/Common/SameFunctions.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUSHAREKERNELSPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-share-kernels"

using namespace mlir;

namespace {

/// @module::@kernel
SymbolRefAttr kernelReference(gpu::GPUFuncOp kernel) {
  auto module = kernel->getParentOfType<gpu::GPUModuleOp>();
  return SymbolRefAttr::get(
      module.getSymNameAttr(),
      {FlatSymbolRefAttr::get(SymbolTable::getSymbolName(kernel))});
}

/// Whether `kernel` refers to no symbol (which may differ between modules
/// under the same name).
bool usesNoSymbol(gpu::GPUFuncOp kernel) {
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(&kernel.getBody());
  return uses && uses->empty();
}

struct SwitchyardGpuShareKernelsPass
    : public switchyard::impl::SwitchyardGpuShareKernelsPassBase<
          SwitchyardGpuShareKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    switchyard::SameFunctions kernels;
    DenseMap<SymbolRefAttr, SymbolRefAttr> sharedWith;
    SmallVector<gpu::GPUFuncOp> duplicates;
    for (auto gpuModule : module.getOps<gpu::GPUModuleOp>())
      for (auto kernel : gpuModule.getOps<gpu::GPUFuncOp>()) {
        if (!kernel.isKernel() || !usesNoSymbol(kernel))
          continue;
        if (FunctionOpInterface same = kernels.findOrInsert(kernel)) {
          LLVM_DEBUG(llvm::dbgs()
                     << kernelReference(kernel) << " is identical to "
                     << kernelReference(cast<gpu::GPUFuncOp>(same)) << "\n");
          sharedWith[kernelReference(kernel)] =
              kernelReference(cast<gpu::GPUFuncOp>(same));
          duplicates.push_back(kernel);
        }
      }
    if (duplicates.empty())
      return;

    module.walk([&](gpu::LaunchFuncOp launch) {
      if (SymbolRefAttr kernel = sharedWith.lookup(launch.getKernel()))
        launch.setKernelAttr(kernel);
    });
    for (gpu::GPUFuncOp kernel : duplicates)
      kernel.erase();
    numShared += duplicates.size();
    for (auto gpuModule :
         llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>()))
      if (gpuModule.getBody()->empty())
        gpuModule.erase();
  }
};

} // namespace
