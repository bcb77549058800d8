//===- ThreadSerialization.h - cooperating GPU threads on the host -*- C++ -*-===//
//
// The GPU emulation runs a kernel's threads one after another. Threads that
// cooperate (barriers, shared memory, the warp-wide ldmatrix and mma.sync of
// the tensor-core route, shuffles) need more: this rewrites such a kernel so
// that, in each stretch between two barriers, every thread runs to the
// barrier before the next one starts, as on a GPU. Used by
// switchyard-gpu-launch-to-host-loops.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_EMULATION_THREADSERIALIZATION_H
#define SWITCHYARD_LIB_CODEGEN_EMULATION_THREADSERIALIZATION_H

#include "mlir/Support/LLVM.h"

namespace mlir {
class Operation;
class RewriterBase;
namespace gpu {
class LaunchOp;
} // namespace gpu
} // namespace mlir

namespace mlir::switchyard {

/// Whether `op`, inside a kernel, is one that only serialised threads can
/// emulate: gpu.barrier, gpu.dynamic_shared_memory, nvgpu.ldmatrix,
/// nvgpu.mma.sync, nvvm.mma.sync or gpu.shuffle.
bool needsSerializedThreads(Operation *op);

/// Whether `launch`'s threads cooperate (it has dynamic shared memory or
/// such an op), so that they must run one after another between barriers
/// rather than each to its end.
bool needsSerializedThreads(gpu::LaunchOp launch);

/// Checks that `launch` has the form serializeThreads handles, and emits why
/// not: one-dimensional blocks; barriers only at the top of the body, of
/// scf.for loops whose bounds all threads share and of scf.if branches
/// without results on a condition all threads share (a merged launch's
/// bodies; serializeThreads checks both); ldmatrix non-transposed on
/// 16-bit elements; mma.sync m16n8k16 on bf16 or f16 with f32 accumulators
/// (A row-major, B column-major); gpu.shuffle in xor mode over the whole
/// warp (width 32) by a constant offset; values that live across a barrier
/// of a type a buffer can hold.
LogicalResult checkSerializable(gpu::LaunchOp launch);

/// Rewrites the body of `launch` (checked by checkSerializable) so that its
/// threads run one after another between barriers:
/// - dynamic shared memory becomes a host buffer of the launch's size;
/// - ldmatrix and mma.sync become exchanges through per-thread buffers
///   between two barriers: each lane stores what it holds, then computes its
///   share of the result from its warp's values, as the PTX ISA defines the
///   fragments (not from the compiler's own maps, which this checks);
/// - a gpu.shuffle (xor) becomes the same kind of exchange: lane l reads the
///   value lane l ^ offset of its warp stored;
/// - each stretch of the body between barriers becomes a loop over the
///   threads, and a value that one stretch defines and a later one uses
///   lives in a buffer with one element per thread.
/// The body then no longer reads its thread ids: the launch runs once per
/// block, with one "thread" that loops over the real ones.
LogicalResult serializeThreads(gpu::LaunchOp launch, RewriterBase &rewriter);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_EMULATION_THREADSERIALIZATION_H
