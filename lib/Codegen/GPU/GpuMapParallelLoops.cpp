//===- GpuMapParallelLoops.cpp - parallel loops to a 1-D grid -------------===//
//
// Implements `switchyard-gpu-map-parallel-loops`, the SIMT fallback's
// mapping: every outermost scf.parallel is collapsed to one dimension, tiled
// by the block size and mapped to block_x / thread_x for
// `convert-parallel-loops-to-gpu`.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/Debug.h"

#include <numeric>

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUMAPPARALLELLOOPSPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-map-parallel-loops"

using namespace mlir;

namespace {
/// The mapping of a one-dimensional loop to `processor`.
gpu::ParallelLoopDimMappingAttr mapTo(MLIRContext *ctx,
                                      gpu::Processor processor) {
  AffineMap identity = AffineMap::getMultiDimIdentityMap(1, ctx);
  return gpu::ParallelLoopDimMappingAttr::get(ctx, processor, identity,
                                              identity);
}

struct SwitchyardGpuMapParallelLoopsPass
    : public switchyard::impl::SwitchyardGpuMapParallelLoopsPassBase<
          SwitchyardGpuMapParallelLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize < 1 || blockSize > 1024) {
      emitError(getOperation().getLoc())
          << "switchyard-gpu-map-parallel-loops: block-size must be in "
             "[1, 1024], found "
          << int64_t(blockSize);
      return signalPassFailure();
    }
    // The outermost parallel loops; nested ones stay sequential.
    SmallVector<scf::ParallelOp> loops;
    getOperation().walk([&](scf::ParallelOp loop) {
      if (!loop->getParentOfType<scf::ParallelOp>())
        loops.push_back(loop);
    });

    MLIRContext *ctx = &getContext();
    IRRewriter rewriter(ctx);
    for (scf::ParallelOp loop : loops) {
      if (!loop.getInitVals().empty()) {
        loop.emitOpError() << "with reductions is not supported by the GPU "
                              "fallback mapping";
        return signalPassFailure();
      }
      LLVM_DEBUG(llvm::dbgs() << "mapping the " << loop.getNumLoops()
                              << "-D scf.parallel at " << loop.getLoc()
                              << " to blocks of " << blockSize << " threads\n");
      // One dimension covering the whole iteration space. The collapse
      // normalises the loop (lower bound 0, step 1) and replaces it.
      if (loop.getNumLoops() > 1) {
        std::vector<unsigned> all(loop.getNumLoops());
        std::iota(all.begin(), all.end(), 0u);
        // The collapsed loop takes the place of the original one, which is
        // erased: it is the op just before the original's successor.
        Operation *next = loop->getNextNode();
        collapseParallelLoops(rewriter, loop, {all});
        loop = cast<scf::ParallelOp>(next->getPrevNode());
      }
      // Tiles of `blockSize` iterations; the last one checks its bounds.
      auto [outer, inner] = scf::tileParallelLoop(loop, {int64_t(blockSize)},
                                                  /*noMinMaxBounds=*/true);
      if (failed(gpu::setMappingAttr(outer,
                                     {mapTo(ctx, gpu::Processor::BlockX)})) ||
          failed(gpu::setMappingAttr(inner,
                                     {mapTo(ctx, gpu::Processor::ThreadX)}))) {
        outer.emitOpError() << "could not be mapped to blocks and threads";
        return signalPassFailure();
      }
      // Parallel loops nested in the body run sequentially in each thread.
      inner.getBody()->walk([&](scf::ParallelOp nested) {
        SmallVector<gpu::ParallelLoopDimMappingAttr> sequential(
            nested.getNumLoops(), mapTo(ctx, gpu::Processor::Sequential));
        (void)gpu::setMappingAttr(nested, sequential);
      });
    }
  }
};
} // namespace
