//===- HostCode.h - what host code of the GPU target may do -----*- C++ -*-===//
//
// The GPU target's host code never dereferences a buffer: buffers live in
// device memory (GpuPipeline.cpp, "Device memory design"). One test of
// whether an op reads or writes memory, shared by the pass that moves such
// ops into kernels (switchyard-gpu-launch-host-compute) and the GPU
// emulation's check that none is left (switchyard-gpu-launch-to-host-loops);
// the buffer a view reads and whether two pieces of work are independent,
// for the passes that reason about which accesses may touch the same
// buffer; and which ops only allocate and which form kernels, for the
// passes that move ops past others.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_HOSTCODE_H
#define SWITCHYARD_LIB_CODEGEN_COMMON_HOSTCODE_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir {
class Operation;
} // namespace mlir

namespace mlir::switchyard {

/// Whether `op` itself (its nested ops aside) may read or write (with
/// `writesOnly`, write) a buffer that `accepts`: an effect on an accepted
/// value, or on no value (a resource as a whole) by an op that takes a
/// buffer. Ops without the memory-effect interface count when they take a
/// buffer. So cf.assert, which writes its message, touches no buffer.
bool accessesBuffer(Operation *op, bool writesOnly,
                    llvm::function_ref<bool(Value)> accepts);

/// Whether `op` itself (its nested ops aside) reads or writes any buffer
/// (accessesBuffer of every memref value).
bool readsOrWritesMemory(Operation *op);

/// The buffer that `v` views: through view-like ops (subview,
/// collapse/expand_shape, cast, ...) to an allocation or a block argument.
Value viewedBuffer(Value v);

/// Whether the root buffer `root` (viewedBuffer) is memory of `op`'s own,
/// defined inside it: a kernel's shared memory or a thread's stack, which
/// no host code and no other kernel names.
bool isOwnMemory(Value root, Operation *op);

/// Whether the root buffer `root` (viewedBuffer) is an allocation of the
/// host code (memref.alloc, gpu.alloc): memory no other root names.
bool isFreshAllocation(Value root);

/// Whether two root buffers (viewedBuffer) may share memory: the same
/// buffer, or neither a fresh allocation of the host code.
bool mayAlias(Value a, Value b);

/// The root buffers (viewedBuffer) that some work reads and writes.
struct BufferAccesses {
  SmallVector<Value> reads, writes;
};

/// Whether two pieces of work may run in either order: neither writes a
/// buffer the other reads or writes (mayAlias).
bool independent(const BufferAccesses &a, const BufferAccesses &b);

/// Whether `op` only allocates: memory-effect free but for fresh buffers
/// (memref.alloc, gpu.alloc), which no other op's buffer can be.
bool onlyAllocates(Operation *op);

/// Whether `op` is a piece of work that code generation turns into loops or
/// a kernel of its own: a linalg op, a loop nest, or a moe kernel op, on
/// buffers (no results).
bool formsKernel(Operation *op);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_HOSTCODE_H
