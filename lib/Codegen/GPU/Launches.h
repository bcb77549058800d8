//===- Launches.h - what a kernel launch is and touches ---------*- C++ -*-===//
//
// The passes that combine the host code's gpu.launch ops into fewer
// (switchyard-gpu-merge-launches, switchyard-gpu-chain-launches) ask the
// same questions of each: whether its body can run inside another kernel,
// its block and shared memory sizes, the buffers it reads and writes, the
// host values it takes as parameters, and what it may move past.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_GPU_LAUNCHES_H
#define SWITCHYARD_LIB_CODEGEN_GPU_LAUNCHES_H

#include "lib/Codegen/Common/HostCode.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/SetVector.h"

#include <array>
#include <optional>

namespace mlir::switchyard {

/// The value of an index computed from constants on the host (the block
/// sizes that kernel formation leaves as affine.apply of constants).
std::optional<int64_t> constantIndex(Value value);

/// A launch: whether its body can run inside another kernel (one block in
/// its body, no attributions, no async token, no cluster, a static block
/// size and a static dynamic shared memory size, if any: its body then
/// runs the same under a condition on the block, which all the block's
/// threads evaluate alike, barriers included), and the buffers it
/// accesses.
struct LaunchInfo {
  gpu::LaunchOp launch;
  bool combinable = false;
  std::array<int64_t, 3> block = {0, 0, 0};
  int64_t sharedBytes = 0;
  /// The buffers (from outside) it reads and writes.
  BufferAccesses accesses;
  /// The host values its body uses: the kernel's parameters.
  llvm::SetVector<Value> captured;
};

/// `launch` analyzed; failure where an op's memory effects are unknown.
FailureOr<LaunchInfo> analyzeLaunch(gpu::LaunchOp launch);

/// The bytes a host value takes among a kernel's parameters: a memref is
/// its descriptor (two pointers, the offset, sizes and strides), anything
/// else at most 8 bytes.
int64_t parameterBytes(Value value);

/// The blocks of `func` that hold host code (not the kernels' bodies).
SmallVector<Block *> hostBlocks(func::FuncOp func);

/// A view of `shape` x `type` at byte `offset` of the kernel's dynamic
/// shared memory, built inside a launch's body.
Value sharedMemoryView(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                       Type type, int64_t offset);

/// Whether launches that access `accesses` can move down past `op` (not a
/// launch): an allocation, an op without memory effects or regions, or the
/// free of a buffer none of them touches.
bool canMoveLaunchesPast(Operation *op, const BufferAccesses &accesses);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_GPU_LAUNCHES_H
