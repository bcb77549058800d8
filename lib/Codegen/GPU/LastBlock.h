//===- LastBlock.h - the last block of a kernel to finish -------*- C++ -*-===//
//
// Work that needs every block of a kernel done, run by whichever block
// finishes last instead of by a kernel of its own: the serial reduction of
// split-K (CUTLASS's semaphore, the CUDA samples' threadFenceReduction) and
// a small dependent launch chained onto the one before it
// (switchyard-gpu-chain-launches).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_GPU_LASTBLOCK_H
#define SWITCHYARD_LIB_CODEGEN_GPU_LASTBLOCK_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace mlir::switchyard {

/// Counts the block done and branches to what only the last block runs.
/// Built at the end of a kernel's body, where every thread of the block
/// has stored its results: after a barrier, the thread for which
/// `countingThread` holds makes the block's stores visible to the GPU
/// (membar.gl, cumulative over the stores the barrier ordered before it),
/// adds one to the i32 `counters[indices]` and fences again (acquiring the
/// other blocks' stores when its count is the last), then stores whether
/// the count it saw was `lastCount` (i32) to `flag` (a one-element i32
/// buffer in shared memory); after a second barrier every thread reads it.
/// With `freeFlag`, a third barrier follows the read (the branch may then
/// reuse the flag's shared memory), and the read carries
/// kBlockUniformAttr. Returns the branch, without results; its then-block
/// starts with each thread's own acquiring fence. The builder's insertion
/// point is after the branch.
scf::IfOp buildLastBlockIf(OpBuilder &b, Location loc, Value countingThread,
                           Value counters, ValueRange indices, Value lastCount,
                           Value flag, bool freeFlag);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_GPU_LASTBLOCK_H
