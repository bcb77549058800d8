//===- GpuChainLaunches.cpp - small launches run by the last block --------===//
//
// Implements `switchyard-gpu-chain-launches`: a launch of a few blocks that
// follows another one (typically its producer: the combination of a split
// reduction's partial results, the routes' sort after the router) runs in
// the block of the launch before it that finishes last, counted through a
// global counter (LastBlock.h). One launch fewer, and the small kernel no
// longer pays a launch and a trip through the GPU's front end.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Passes.h"
#include "lib/Codegen/GPU/LastBlock.h"
#include "lib/Codegen/GPU/Launches.h"
#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUCHAINLAUNCHESPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-chain-launches"

using namespace mlir;
using mlir::switchyard::LaunchInfo;

namespace {

/// The bytes of shared memory a launch that gets a tail needs at least:
/// the last-block flag.
constexpr int64_t kFlagBytes = 4;

/// The dynamic shared memory that a tail may bring to a launch that uses
/// less (the row kernels' partial results).
constexpr int64_t kSmallSharedBytes = 4096;

/// Whether each thread of `launch` works on its own: no barrier, shared
/// memory, shuffle or other op of the GPU dialects in its body. Its threads
/// then compute the same whichever threads of whichever block run them.
bool threadsIndependent(gpu::LaunchOp launch) {
  return !launch.getBody()
              .walk([](Operation *op) {
                if (isa<gpu::TerminatorOp>(op))
                  return WalkResult::advance();
                if (isa_and_nonnull<gpu::GPUDialect, NVVM::NVVMDialect,
                                    nvgpu::NVGPUDialect>(op->getDialect()))
                  return WalkResult::interrupt();
                return WalkResult::advance();
              })
              .wasInterrupted();
}

/// Whether `launch`'s body reads its block's position or the grid's size
/// other than through the launch's arguments (gpu.block_id, gpu.grid_dim,
/// gpu.global_id, the cluster queries, NVVM's special registers): a tail
/// could not give it the small launch's.
bool readsBlockIndexOps(gpu::LaunchOp launch) {
  return launch.getBody()
      .walk([](Operation *op) {
        if (isa<gpu::BlockIdOp, gpu::GridDimOp, gpu::GlobalIdOp,
                gpu::ClusterIdOp, gpu::ClusterDimOp, gpu::ClusterBlockIdOp,
                gpu::ClusterDimBlocksOp>(op) ||
            op->getName().getStringRef().starts_with("nvvm.read.ptx.sreg"))
          return WalkResult::interrupt();
        return WalkResult::advance();
      })
      .wasInterrupted();
}

/// The attribute on a tail's branch that counts its steps (tailSteps).
constexpr llvm::StringLiteral kTailStepsAttr = "switchyard.tail_steps";

/// The grid of `launch` if every extent is known when compiling.
std::optional<std::array<int64_t, 3>> staticGrid(gpu::LaunchOp launch) {
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  std::array<int64_t, 3> extents;
  for (auto [i, v] :
       llvm::enumerate(std::array<Value, 3>{grid.x, grid.y, grid.z})) {
    std::optional<int64_t> known = switchyard::constantIndex(v);
    if (!known)
      return std::nullopt;
    extents[i] = *known;
  }
  return extents;
}

int64_t product(ArrayRef<int64_t> values) {
  int64_t result = 1;
  for (int64_t v : values)
    result *= v;
  return result;
}

/// The branch of `launch`'s body that only its last block runs, if it has
/// one (a launch this pass chained onto before).
scf::IfOp tailOf(gpu::LaunchOp launch) {
  for (Operation &op : launch.getBody().front())
    if (op.hasAttr(switchyard::kLastBlockAttr))
      return cast<scf::IfOp>(op);
  return {};
}

class Chainer {
public:
  Chainer(RewriterBase &rewriter, int64_t maxTailBlocks,
          int64_t maxParameterBytes)
      : rewriter(rewriter), maxTailBlocks(maxTailBlocks),
        maxParameterBytes(maxParameterBytes) {}

  /// Whether `next` can run in the last block of `prev`, the launch before
  /// it with `between` between them.
  bool canChain(const LaunchInfo &prev, const LaunchInfo &next,
                ArrayRef<Operation *> between) const;

  /// Runs `next` in the last block of `prev`: `prev`'s body, followed by
  /// the count of blocks and `next`'s body in the branch of the last block,
  /// becomes a launch at the place of `next`. Returns it.
  gpu::LaunchOp chain(const LaunchInfo &prev, const LaunchInfo &next,
                      ArrayRef<Operation *> between);

private:
  /// The steps in which one block of `prev`'s shape runs `next`'s blocks;
  /// -1 where it cannot.
  int64_t tailSteps(const LaunchInfo &prev, const LaunchInfo &next) const;
  /// tailSteps, plus the steps of `prev`'s tail so far.
  int64_t totalSteps(const LaunchInfo &prev, const LaunchInfo &next) const {
    int64_t steps = tailSteps(prev, next);
    if (scf::IfOp tail = tailOf(prev.launch); tail && steps >= 0)
      if (auto before = tail->getAttrOfType<IntegerAttr>(kTailStepsAttr))
        steps += before.getInt();
    return steps;
  }
  /// Builds, at the builder's insertion point inside `merged`, `next`'s body
  /// for each of its blocks and threads.
  void emitTail(gpu::LaunchOp merged, const LaunchInfo &next);
  Value cst(Location loc, int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v);
  }
  /// Whether every one of `ids` is 0.
  Value allZero(Location loc, ArrayRef<Value> ids) {
    Value c0 = cst(loc, 0);
    Value all;
    for (Value id : ids) {
      Value isZero = arith::CmpIOp::create(rewriter, loc,
                                           arith::CmpIPredicate::eq, id, c0);
      all = all ? arith::AndIOp::create(rewriter, loc, all, isZero) : isZero;
    }
    return all;
  }
  /// `linear` as coordinates in `extents` (x fastest).
  std::array<Value, 3> delinearize(Location loc, Value linear,
                                   std::array<int64_t, 3> extents);

  RewriterBase &rewriter;
  int64_t maxTailBlocks, maxParameterBytes;
};

int64_t Chainer::tailSteps(const LaunchInfo &prev,
                           const LaunchInfo &next) const {
  std::optional<std::array<int64_t, 3>> grid = staticGrid(next.launch);
  if (!grid)
    return -1;
  int64_t blocks = product(*grid);
  if (threadsIndependent(next.launch))
    return llvm::divideCeil(blocks * product(next.block), product(prev.block));
  // Threads that cooperate keep their block's shape.
  return next.block == prev.block ? blocks : -1;
}

bool Chainer::canChain(const LaunchInfo &prev, const LaunchInfo &next,
                       ArrayRef<Operation *> between) const {
  if (!prev.combinable || !next.combinable)
    return false;
  // One-dimensional blocks, as kernel formation makes them (and as the GPU
  // emulation serialises a block's threads around the tail's barriers).
  if (prev.block[1] != 1 || prev.block[2] != 1 ||
      readsBlockIndexOps(next.launch))
    return false;
  int64_t steps = totalSteps(prev, next);
  if (steps < 0 || steps > maxTailBlocks)
    return false;
  // The kernel's parameters: both launches' host values and the counter.
  int64_t bytes = 8 * (3 + 2); // The counter's descriptor (rank 1).
  llvm::SmallDenseSet<Value> captured;
  for (const LaunchInfo *info : {&prev, &next})
    for (Value v : info->captured)
      if (captured.insert(v).second)
        bytes += switchyard::parameterBytes(v);
  if (bytes > maxParameterBytes)
    return false;
  if (next.sharedBytes > std::max(prev.sharedBytes, kSmallSharedBytes))
    return false;
  // Frees move after the launch that results (freeing later is safe).
  return llvm::all_of(between, [&](Operation *op) {
    return isa<gpu::DeallocOp, memref::DeallocOp>(op) ||
           switchyard::canMoveLaunchesPast(op, prev.accesses);
  });
}

std::array<Value, 3> Chainer::delinearize(Location loc, Value linear,
                                          std::array<int64_t, 3> extents) {
  Value x = arith::RemUIOp::create(rewriter, loc, linear, cst(loc, extents[0]));
  Value rest =
      arith::DivUIOp::create(rewriter, loc, linear, cst(loc, extents[0]));
  Value y = arith::RemUIOp::create(rewriter, loc, rest, cst(loc, extents[1]));
  Value z = arith::DivUIOp::create(rewriter, loc, rest, cst(loc, extents[1]));
  return {x, y, z};
}

void Chainer::emitTail(gpu::LaunchOp merged, const LaunchInfo &next) {
  gpu::LaunchOp launch = next.launch;
  Location loc = launch.getLoc();
  std::array<int64_t, 3> grid = *staticGrid(launch);
  int64_t blocks = product(grid);
  auto map3 = [](IRMapping &mapping, gpu::KernelDim3 from,
                 std::array<Value, 3> to) {
    mapping.map(from.x, to[0]);
    mapping.map(from.y, to[1]);
    mapping.map(from.z, to[2]);
  };
  auto constants = [&](std::array<int64_t, 3> values) {
    return std::array<Value, 3>{cst(loc, values[0]), cst(loc, values[1]),
                                cst(loc, values[2])};
  };
  auto cloneBody = [&](IRMapping &mapping) {
    for (Operation &op : launch.getBody().front().without_terminator())
      rewriter.clone(op, mapping);
  };
  gpu::KernelDim3 threads = merged.getThreadIds();
  gpu::KernelDim3 blockSize = merged.getBlockSize();
  if (threadsIndependent(launch)) {
    // Each of the block's threads runs every block-size-th thread of
    // `next`, block after block.
    int64_t perBlock = product(next.block);
    Value tid = arith::AddIOp::create(
        rewriter, loc, threads.x,
        arith::MulIOp::create(
            rewriter, loc, blockSize.x,
            arith::AddIOp::create(
                rewriter, loc, threads.y,
                arith::MulIOp::create(rewriter, loc, blockSize.y, threads.z))));
    Value stride = arith::MulIOp::create(
        rewriter, loc, blockSize.x,
        arith::MulIOp::create(rewriter, loc, blockSize.y, blockSize.z));
    auto loop = scf::ForOp::create(rewriter, loc, tid,
                                   cst(loc, blocks * perBlock), stride);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(loop.getBody()->getTerminator());
    Value v = loop.getInductionVar();
    IRMapping mapping;
    map3(mapping, launch.getBlockIds(),
         delinearize(
             loc, arith::DivUIOp::create(rewriter, loc, v, cst(loc, perBlock)),
             grid));
    map3(mapping, launch.getThreadIds(),
         delinearize(
             loc, arith::RemUIOp::create(rewriter, loc, v, cst(loc, perBlock)),
             next.block));
    map3(mapping, launch.getGridSize(), constants(grid));
    map3(mapping, launch.getBlockSize(), constants(next.block));
    cloneBody(mapping);
    return;
  }
  // Blocks of the same shape: the block runs `next`'s blocks one after
  // another, a barrier between two (its shared memory is reused).
  auto loop = scf::ForOp::create(rewriter, loc, cst(loc, 0), cst(loc, blocks),
                                 cst(loc, 1));
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(loop.getBody()->getTerminator());
  IRMapping mapping;
  map3(mapping, launch.getBlockIds(),
       delinearize(loc, loop.getInductionVar(), grid));
  map3(mapping, launch.getThreadIds(), {threads.x, threads.y, threads.z});
  map3(mapping, launch.getGridSize(), constants(grid));
  map3(mapping, launch.getBlockSize(), {blockSize.x, blockSize.y, blockSize.z});
  cloneBody(mapping);
  gpu::BarrierOp::create(rewriter, loc);
}

gpu::LaunchOp Chainer::chain(const LaunchInfo &prev, const LaunchInfo &next,
                             ArrayRef<Operation *> between) {
  gpu::LaunchOp first = prev.launch;
  gpu::LaunchOp second = next.launch;
  Location loc = first.getLoc();
  Type i32 = rewriter.getI32Type();
  scf::IfOp tail = tailOf(first);
  int64_t steps = totalSteps(prev, next);

  // The counter: zeroed by an earlier launch of the same host code (one
  // thread's store at its start), else by a memset before the kernel.
  Value counter;
  gpu::LaunchOp zeroing;
  if (!tail) {
    // (Every launch runs a block at least: the driver refuses an empty
    // grid.)
    for (Operation *op = first->getPrevNode(); op && !zeroing;
         op = op->getPrevNode())
      zeroing = dyn_cast<gpu::LaunchOp>(op);
    rewriter.setInsertionPoint(zeroing ? zeroing.getOperation()
                                       : second.getOperation());
    counter = gpu::AllocOp::create(rewriter, loc, MemRefType::get({1}, i32),
                                   /*asyncToken=*/Type(),
                                   /*asyncDependencies=*/ValueRange(),
                                   /*dynamicSizes=*/ValueRange(),
                                   /*symbolOperands=*/ValueRange())
                  .getMemref();
    Value zero = arith::ConstantIntOp::create(rewriter, loc, i32, 0);
    if (zeroing) {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(&zeroing.getBody().front());
      gpu::KernelDim3 b = zeroing.getBlockIds();
      gpu::KernelDim3 t = zeroing.getThreadIds();
      auto ifOp =
          scf::IfOp::create(rewriter, loc, TypeRange{},
                            allZero(loc, {b.x, b.y, b.z, t.x, t.y, t.z}),
                            /*withElseRegion=*/false);
      rewriter.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      memref::StoreOp::create(rewriter, loc, zero, counter,
                              ValueRange{cst(loc, 0)});
    } else {
      gpu::MemsetOp::create(rewriter, loc, /*asyncToken=*/Type(),
                            /*asyncDependencies=*/ValueRange(), counter, zero);
    }
  }

  // The launch at the place of `next`, with `first`'s body.
  rewriter.setInsertionPoint(second);
  int64_t sharedBytes =
      std::max({prev.sharedBytes, next.sharedBytes, kFlagBytes});
  gpu::KernelDim3 grid = first.getGridSizeOperandValues();
  gpu::KernelDim3 block = first.getBlockSizeOperandValues();
  auto merged = gpu::LaunchOp::create(
      rewriter, loc, grid.x, grid.y, grid.z, block.x, block.y, block.z,
      arith::ConstantIntOp::create(rewriter, loc, i32, sharedBytes));
  merged->setDiscardableAttrs(first->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(first.getBody(), merged.getBody(),
                              merged.getBody().end());
  rewriter.eraseBlock(&merged.getBody().front());
  Block &body = merged.getBody().front();

  if (tail) {
    // After the tail's earlier work, which other threads of the block did.
    rewriter.setInsertionPoint(tail.thenBlock()->getTerminator());
    gpu::BarrierOp::create(rewriter, loc);
  } else {
    rewriter.setInsertionPoint(body.getTerminator());
    gpu::KernelDim3 tid = merged.getThreadIds();
    gpu::KernelDim3 gridSize = merged.getGridSize();
    Value firstThread = allZero(loc, {tid.x, tid.y, tid.z});
    Value blocks = arith::MulIOp::create(
        rewriter, loc, gridSize.x,
        arith::MulIOp::create(rewriter, loc, gridSize.y, gridSize.z));
    Value lastCount = arith::IndexCastOp::create(
        rewriter, loc, i32,
        arith::SubIOp::create(rewriter, loc, blocks, cst(loc, 1)));
    Value flag =
        switchyard::sharedMemoryView(rewriter, loc, {1}, i32, /*offset=*/0);
    tail =
        switchyard::buildLastBlockIf(rewriter, loc, firstThread, counter,
                                     ValueRange{cst(loc, 0)}, lastCount, flag,
                                     /*freeFlag=*/true);
    tail->setAttr(switchyard::kLastBlockAttr, rewriter.getUnitAttr());
    rewriter.setInsertionPoint(tail.thenBlock()->getTerminator());
  }
  emitTail(merged, next);
  tail->setAttr(kTailStepsAttr, rewriter.getI64IntegerAttr(steps));

  rewriter.setInsertionPointAfter(merged);
  if (counter)
    gpu::DeallocOp::create(rewriter, loc, /*asyncToken=*/Type(),
                           /*asyncDependencies=*/ValueRange(), counter);
  for (Operation *op : llvm::reverse(between))
    if (isa<gpu::DeallocOp, memref::DeallocOp>(op))
      rewriter.moveOpAfter(op, merged);
  rewriter.eraseOp(first);
  rewriter.eraseOp(second);
  return merged;
}

struct SwitchyardGpuChainLaunchesPass
    : public switchyard::impl::SwitchyardGpuChainLaunchesPassBase<
          SwitchyardGpuChainLaunchesPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<Block *> blocks = switchyard::hostBlocks(func);
    IRRewriter rewriter(&getContext());
    Chainer chainer(rewriter, maxTailBlocks, maxParameterBytes);
    [[maybe_unused]] int64_t chained = 0;
    for (Block *block : blocks) {
      std::optional<LaunchInfo> prev;
      SmallVector<Operation *> between;
      // What chaining places after the launch it makes (frees) is visited
      // next, as ops between it and the following launch.
      for (Operation *op = &block->front(); op;) {
        Operation *next = op->getNextNode();
        auto launch = dyn_cast<gpu::LaunchOp>(op);
        if (!launch) {
          between.push_back(op);
          op = next;
          continue;
        }
        FailureOr<LaunchInfo> info = switchyard::analyzeLaunch(launch);
        if (failed(info)) {
          prev.reset();
        } else if (prev && chainer.canChain(*prev, *info, between)) {
          gpu::LaunchOp merged = chainer.chain(*prev, *info, between);
          next = merged->getNextNode();
          ++chained;
          FailureOr<LaunchInfo> mergedInfo = switchyard::analyzeLaunch(merged);
          if (succeeded(mergedInfo))
            prev = *mergedInfo;
          else
            prev.reset();
        } else {
          prev = *info;
        }
        between.clear();
        op = next;
      }
    }
    LLVM_DEBUG(llvm::dbgs() << "@" << func.getSymName() << ": " << chained
                            << " launches chained\n");
  }
};

} // namespace
