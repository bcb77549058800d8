//===- HopperOps.h - sm_90's asynchronous ops on the host -------*- C++ -*-===//
//
// The GPU emulation of the wgmma route (sm_90a): TMA loads, mbarriers and
// warpgroup MMAs, rewritten into plain loads, stores and loops before the
// kernel's threads are serialised (ThreadSerialization.h). Used by
// switchyard-gpu-launch-to-host-loops.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_EMULATION_HOPPEROPS_H
#define SWITCHYARD_LIB_CODEGEN_EMULATION_HOPPEROPS_H

#include "mlir/Support/LLVM.h"

namespace mlir {
class Operation;
class RewriterBase;
namespace gpu {
class LaunchOp;
} // namespace gpu
} // namespace mlir

namespace mlir::switchyard {

/// Whether `op`, inside a kernel, is one of the sm_90 ops that
/// emulateHopperOps rewrites: nvgpu.tma.async.load,
/// nvgpu.tma.prefetch.descriptor, nvgpu.mbarrier.create / init /
/// arrive.expect_tx / arrive / try_wait.parity and nvgpu.warpgroup.*
/// (generate.descriptor, mma.init.accumulator, mma, mma.store).
bool isHopperOp(Operation *op);

/// Checks that the sm_90 ops of `launch` have the forms emulateHopperOps
/// handles, and emits why not: 2-D TMA tiles from a descriptor that
/// nvgpu.tma.create.descriptor made of a ranked buffer, into views of
/// dynamic shared memory, without multicast; wgmma with A K-major and B
/// N-major (transposeB) in swizzled shared memory, 16-bit factors and f32
/// accumulators that flow from one init through mmas and loops to stores;
/// warpgroup ops where all threads of a block reach them (at the top of the
/// kernel, of scf.for loops and of scf.if branches), in blocks of a known
/// multiple of 128 threads.
LogicalResult checkHopperOps(gpu::LaunchOp launch);

/// Rewrites the sm_90 ops of `launch` (checked by checkHopperOps) into
/// plain loads, stores and loops, as the PTX ISA defines them: a TMA load
/// copies its tile into the swizzled shared-memory layout at once and
/// completes its bytes on the mbarrier; an mbarrier is four integers in a
/// host buffer (arrival count, pending arrivals, pending transaction bytes,
/// phase), and a wait on a phase that has not completed in the emulation's
/// order of threads aborts with a message; each warpgroup op runs once per
/// warpgroup, between two barriers, on a host buffer that holds the
/// warpgroup's accumulators. The threads are then serialised as usual.
LogicalResult emulateHopperOps(gpu::LaunchOp launch, RewriterBase &rewriter);

/// Erases the TMA descriptors made in host code (`root`'s
/// nvgpu.tma.create.descriptor ops) that no kernel uses any more: the
/// emulation reads the tensors themselves.
void eraseUnusedTmaDescriptors(Operation *root, RewriterBase &rewriter);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_EMULATION_HOPPEROPS_H
