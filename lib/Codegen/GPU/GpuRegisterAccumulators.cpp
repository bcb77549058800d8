//===- GpuRegisterAccumulators.cpp - reductions accumulate in registers ---===//
//
// Implements `switchyard-gpu-register-accumulators`. A linalg reduction
// becomes, in each SIMT thread, a loop that loads its output element, adds
// to it and stores it back in every iteration: a chain of dependent global
// memory round trips (a store, then a load of the same address from L2),
// which LLVM cannot break because it cannot prove that the kernel's
// pointer arguments do not alias. Here such a load/store pair of a loop
// becomes a value the loop carries (scalar replacement): one load before
// the loop, one store after it, where the pass can show that nothing else
// in the loop touches the buffer.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/HostCode.h"
#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUREGISTERACCUMULATORSPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-register-accumulators"

using namespace mlir;

namespace {
/// Whether `root` is a buffer allocated in the function (no other value
/// may alias it but its views).
bool isAllocation(Value root) {
  return isa_and_nonnull<gpu::AllocOp, memref::AllocOp, memref::AllocaOp>(
      root.getDefiningOp());
}

/// The memory accesses of a loop's body, or failure if it has an op whose
/// memory effects the pass does not understand (calls, barriers, atomics,
/// vector or nvgpu accesses).
FailureOr<SmallVector<Operation *>> accessesOf(scf::ForOp loop) {
  SmallVector<Operation *> accesses;
  WalkResult result = loop.getBody()->walk([&](Operation *op) {
    if (isa<memref::LoadOp, memref::StoreOp>(op)) {
      accesses.push_back(op);
      return WalkResult::advance();
    }
    if (isa<scf::ForOp, scf::IfOp, scf::YieldOp>(op) || isMemoryEffectFree(op))
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  if (result.wasInterrupted())
    return failure();
  return accesses;
}

/// The accessed buffer of a load or store.
Value accessedMemref(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return load.getMemRef();
  return cast<memref::StoreOp>(op).getMemRef();
}

ValueRange accessIndices(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return load.getIndices();
  return cast<memref::StoreOp>(op).getIndices();
}

/// Whether `memref` is in global (default) memory: shared memory is also
/// written by other threads, between barriers.
bool isGlobal(Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  Attribute space = type.getMemorySpace();
  if (!space)
    return true;
  if (auto gpuSpace = dyn_cast<gpu::AddressSpaceAttr>(space))
    return gpuSpace.getValue() == gpu::AddressSpace::Global;
  return false;
}

/// Whether a zero of `type` can stand for the value a loop that runs no
/// iteration never loads.
bool hasZero(Type type) {
  return isa<FloatType, IntegerType, IndexType>(type);
}

/// A load and a store of one element that `loop` can carry instead.
struct Accumulator {
  memref::LoadOp load;
  memref::StoreOp store;
};

/// The first load/store pair in the body of `loop` (directly in it, load
/// before store) of the same element of a global buffer allocated in the
/// function, at indices defined outside the loop, with no other access to
/// that buffer (or a view of it) anywhere in the loop.
std::optional<Accumulator> findAccumulator(scf::ForOp loop) {
  FailureOr<SmallVector<Operation *>> accesses = accessesOf(loop);
  if (failed(accesses))
    return std::nullopt;
  for (Operation &op : *loop.getBody()) {
    auto load = dyn_cast<memref::LoadOp>(&op);
    // The buffer (a view made in the loop is another element each
    // iteration) and the indices must be the same in every iteration.
    if (!load || !isGlobal(load.getMemRef()) ||
        !loop.isDefinedOutsideOfLoop(load.getMemRef()) ||
        !hasZero(load.getType()))
      continue;
    Value root = switchyard::viewedBuffer(load.getMemRef());
    if (!isAllocation(root) ||
        !llvm::all_of(load.getIndices(), [&](Value index) {
          return loop.isDefinedOutsideOfLoop(index);
        }))
      continue;
    // Every access to the root in the loop: this load and one store of the
    // same element after it, in the same block.
    memref::StoreOp store;
    bool other = false;
    for (Operation *access : *accesses) {
      if (access == load ||
          switchyard::viewedBuffer(accessedMemref(access)) != root)
        continue;
      auto candidate = dyn_cast<memref::StoreOp>(access);
      if (!store && candidate &&
          candidate->getBlock() == loop.getBody() &&
          candidate.getMemRef() == load.getMemRef() &&
          llvm::equal(accessIndices(candidate), load.getIndices()) &&
          load->isBeforeInBlock(candidate))
        store = candidate;
      else
        other = true;
    }
    if (store && !other)
      return Accumulator{load, store};
  }
  return std::nullopt;
}

/// Whether `loop` runs at least once: a condition built before it, or null
/// where its bounds are constants and it does.
Value runsAtLeastOnce(RewriterBase &rewriter, scf::ForOp loop) {
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound());
  std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound());
  if (lb && ub && *lb < *ub)
    return {};
  return arith::CmpIOp::create(rewriter, loop.getLoc(),
                               loop.getUnsignedCmp() ? arith::CmpIPredicate::ult
                                                     : arith::CmpIPredicate::slt,
                               loop.getLowerBound(), loop.getUpperBound());
}

/// Carries `acc` through `loop`: a load before it, the stored value
/// yielded, a store after it, both only where the loop runs (the element
/// is not touched otherwise, as before). Returns the new loop.
scf::ForOp promote(RewriterBase &rewriter, scf::ForOp loop, Accumulator acc) {
  rewriter.setInsertionPoint(loop);
  Location loc = acc.load.getLoc();
  Value runs = runsAtLeastOnce(rewriter, loop);
  auto load = [&](OpBuilder &b, Location at) -> Value {
    return memref::LoadOp::create(b, at, acc.load.getMemRef(),
                                  acc.load.getIndices());
  };
  Value initial;
  if (!runs) {
    initial = load(rewriter, loc);
  } else {
    Type type = acc.load.getType();
    initial =
        scf::IfOp::create(
            rewriter, loc, runs,
            [&](OpBuilder &b, Location at) {
              scf::YieldOp::create(b, at, load(b, at));
            },
            [&](OpBuilder &b, Location at) {
              Value zero = arith::ConstantOp::create(
                  b, at, type, cast<TypedAttr>(b.getZeroAttr(type)));
              scf::YieldOp::create(b, at, zero);
            })
            .getResult(0);
  }
  Value stored = acc.store.getValueToStore();
  auto newLoop = cast<scf::ForOp>(
      *loop.replaceWithAdditionalYields(
          rewriter, ValueRange{initial},
          /*replaceInitOperandUsesInLoop=*/false,
          [&](OpBuilder &, Location, ArrayRef<BlockArgument>) {
            return SmallVector<Value>{stored};
          }));
  rewriter.replaceAllUsesWith(acc.load.getResult(),
                              newLoop.getRegionIterArgs().back());
  rewriter.setInsertionPointAfter(newLoop);
  Value result = newLoop.getResults().back();
  auto store = [&](OpBuilder &b, Location at) {
    memref::StoreOp::create(b, at, result, acc.store.getMemRef(),
                            acc.store.getIndices());
  };
  if (!runs) {
    store(rewriter, acc.store.getLoc());
  } else {
    scf::IfOp::create(rewriter, acc.store.getLoc(), runs,
                      [&](OpBuilder &b, Location at) {
                        store(b, at);
                        scf::YieldOp::create(b, at);
                      });
  }
  rewriter.eraseOp(acc.store);
  rewriter.eraseOp(acc.load);
  return newLoop;
}

struct SwitchyardGpuRegisterAccumulatorsPass
    : public switchyard::impl::SwitchyardGpuRegisterAccumulatorsPassBase<
          SwitchyardGpuRegisterAccumulatorsPass> {
  using Base::Base;

  void runOnOperation() override {
    // Innermost loops first (post-order), so that an outer reduction loop
    // sees the load and store an inner one moved out of itself.
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) {
      if (loop->getParentOfType<gpu::LaunchOp>())
        loops.push_back(loop);
    });
    IRRewriter rewriter(&getContext());
    for (scf::ForOp loop : loops) {
      while (std::optional<Accumulator> acc = findAccumulator(loop)) {
        LLVM_DEBUG(llvm::dbgs() << "scf.for at " << loop.getLoc()
                                << " carries the element that the load at "
                                << acc->load.getLoc() << " reads\n");
        loop = promote(rewriter, loop, *acc);
      }
    }
  }
};
} // namespace
