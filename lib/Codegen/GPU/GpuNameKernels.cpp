//===- GpuNameKernels.cpp - one kernel module per host function -----------===//
//
// Implements `switchyard-gpu-name-kernels`: every gpu.launch of a host
// function `@f` is told to outline into `@f_kernels::@f_kernel_<i>`.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUNAMEKERNELSPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-name-kernels"

using namespace mlir;

namespace {
struct SwitchyardGpuNameKernelsPass
    : public switchyard::impl::SwitchyardGpuNameKernelsPassBase<
          SwitchyardGpuNameKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    auto module =
        FlatSymbolRefAttr::get(ctx, (func.getSymName() + "_kernels").str());
    unsigned index = 0;
    func.walk([&](gpu::LaunchOp launch) {
      if (!launch.getModuleAttr())
        launch.setModuleAttr(module);
      if (!launch.getFunctionAttr())
        launch.setFunctionAttr(FlatSymbolRefAttr::get(
            ctx, (func.getSymName() + "_kernel_" + Twine(index)).str()));
      ++index;
    });
    LLVM_DEBUG(llvm::dbgs() << "@" << func.getSymName() << ": " << index
                            << " launches named for " << module << "\n");
  }
};
} // namespace
