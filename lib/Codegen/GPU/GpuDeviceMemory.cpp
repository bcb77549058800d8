//===- GpuDeviceMemory.cpp - host buffers in device memory ----------------===//
//
// Implements `switchyard-gpu-device-memory`: the buffers a bufferized host
// function allocates become device allocations (`gpu.alloc`), and its copies
// become `linalg.copy`, which later turns into a kernel like any linalg op.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUDEVICEMEMORYPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-device-memory"

using namespace mlir;

namespace {
/// True when `op` runs inside what will be (or already is) a kernel: a
/// linalg body, a parallel loop or a launch. Its buffers are not the host's.
bool isInsideKernelCode(Operation *op) {
  for (Operation *parent = op->getParentOp(); parent;
       parent = parent->getParentOp()) {
    if (isa<linalg::LinalgOp, scf::ParallelOp, gpu::LaunchOp>(parent))
      return true;
    if (isa<FunctionOpInterface>(parent))
      return false;
  }
  return false;
}

struct SwitchyardGpuDeviceMemoryPass
    : public switchyard::impl::SwitchyardGpuDeviceMemoryPassBase<
          SwitchyardGpuDeviceMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    IRRewriter rewriter(func.getContext());
    SmallVector<Operation *> hostOps;
    func.walk([&](Operation *op) {
      if (isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp,
              memref::AllocaOp, memref::GetGlobalOp, memref::ReallocOp>(op) &&
          !isInsideKernelCode(op))
        hostOps.push_back(op);
    });
    LLVM_DEBUG(llvm::dbgs() << "@" << func.getName() << ": " << hostOps.size()
                            << " host allocations, frees and copies to "
                               "device memory\n");

    bool failed = false;
    for (Operation *op : hostOps) {
      rewriter.setInsertionPoint(op);
      Location loc = op->getLoc();
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        // cuMemAlloc aligns to at least 256 bytes, so the alignment
        // attribute has nothing left to ask for.
        auto gpuAlloc = gpu::AllocOp::create(
            rewriter, loc, alloc.getType(), /*asyncToken=*/Type(),
            /*asyncDependencies=*/ValueRange(), alloc.getDynamicSizes(),
            alloc.getSymbolOperands(), /*hostShared=*/false);
        rewriter.replaceOp(alloc, gpuAlloc.getMemref());
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(rewriter, loc, /*asyncToken=*/Type(),
                               /*asyncDependencies=*/ValueRange(),
                               dealloc.getMemref());
        rewriter.eraseOp(dealloc);
      } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        linalg::CopyOp::create(rewriter, loc, copy.getSource(),
                               copy.getTarget());
        rewriter.eraseOp(copy);
      } else {
        op->emitOpError()
            << "has no device-memory equivalent in the GPU target: host "
               "code may only allocate buffers with memref.alloc";
        failed = true;
      }
    }
    if (failed)
      signalPassFailure();
  }
};
} // namespace
