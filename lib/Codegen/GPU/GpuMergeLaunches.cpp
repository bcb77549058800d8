//===- GpuMergeLaunches.cpp - independent launches as one kernel ----------===//
//
// Implements `switchyard-gpu-merge-launches`: consecutive gpu.launch ops of
// a host function that neither read what another writes nor write what
// another touches, with the same block size, become one launch whose grid
// is theirs end to end; each block runs the body of the launch its index
// falls in (a multi-tensor kernel, as the optimizer's updates of all of a
// layer's parameters, or the gradient norm's sums of squares).
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/HostCode.h"
#include "lib/Codegen/GPU/Launches.h"
#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/Debug.h"

#include <list>

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUMERGELAUNCHESPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-merge-launches"

using namespace mlir;
using mlir::switchyard::mayAlias;
using mlir::switchyard::independent;
using mlir::switchyard::viewedBuffer;
using mlir::switchyard::analyzeLaunch;
using mlir::switchyard::LaunchInfo;
using mlir::switchyard::parameterBytes;

namespace {

/// The dynamic shared memory up to which launches merge whatever their
/// sizes, the merged launch taking the largest: the row kernels' partial
/// results beside kernels that use none.
constexpr int64_t kSmallSharedBytes = 4096;

/// Whether `a` and `b` launch blocks of the same size and the same shared
/// memory, or little enough of it.
bool sameShape(const LaunchInfo &a, const LaunchInfo &b) {
  return a.block == b.block &&
         (a.sharedBytes == b.sharedBytes ||
          std::max(a.sharedBytes, b.sharedBytes) <= kSmallSharedBytes);
}


/// Launches waiting to be merged, with what they access and the merged
/// kernel's parameters (every launch's host values, and per launch its
/// first block and grid size: 3 values).
struct Group {
  SmallVector<LaunchInfo> members;
  /// The buffers (from outside) the launches read and write.
  switchyard::BufferAccesses accesses;
  llvm::SmallDenseSet<Value> captured;
  int64_t bytes = 0;

  /// The parameter bytes with `c` added.
  int64_t bytesWith(const LaunchInfo &c) const {
    int64_t result = bytes + 3 * 8;
    for (Value v : c.captured)
      if (!captured.contains(v))
        result += parameterBytes(v);
    return result;
  }

  void add(const LaunchInfo &c) {
    bytes = bytesWith(c);
    captured.insert(c.captured.begin(), c.captured.end());
    members.push_back(c);
    llvm::append_range(accesses.reads, c.accesses.reads);
    llvm::append_range(accesses.writes, c.accesses.writes);
  }

  /// Whether the group's launches can move down past `op` (not a launch).
  bool canCross(Operation *op) const {
    return switchyard::canMoveLaunchesPast(op, accesses);
  }
};

/// Replaces `group` (two or more candidates, in order, the same block size)
/// by one launch at the place of the last: a one-dimensional grid of all
/// their blocks, each block running the body of the launch it belongs to
/// with its own block index and grid size.
void merge(RewriterBase &rewriter, ArrayRef<LaunchInfo> group) {
  gpu::LaunchOp last = group.back().launch;
  Location loc = last.getLoc();
  rewriter.setInsertionPoint(last);
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, v);
  };
  // Each launch's first block in the merged grid, and the total.
  SmallVector<Value> starts;
  Value total = index(0);
  for (const LaunchInfo &c : group) {
    starts.push_back(total);
    gpu::LaunchOp launch = c.launch;
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    Value blocks = arith::MulIOp::create(
        rewriter, loc, arith::MulIOp::create(rewriter, loc, grid.x, grid.y),
        grid.z);
    total = arith::AddIOp::create(rewriter, loc, total, blocks);
  }
  gpu::KernelDim3 block = last.getBlockSizeOperandValues();
  Value one = index(1);
  Value sharedBytes = last.getDynamicSharedMemorySize();
  int64_t mostShared = 0;
  for (const LaunchInfo &c : group)
    mostShared = std::max(mostShared, c.sharedBytes);
  if (mostShared != group.back().sharedBytes)
    sharedBytes = arith::ConstantIntOp::create(rewriter, loc,
                                               rewriter.getI32Type(), mostShared);
  auto merged = gpu::LaunchOp::create(rewriter, loc, total, one, one, block.x,
                                      block.y, block.z, sharedBytes);
  merged->setDiscardableAttrs(last->getDiscardableAttrDictionary());
  merged->setAttr(switchyard::kMergedLaunchAttr, rewriter.getUnitAttr());
  Block &body = merged.getBody().front();
  rewriter.setInsertionPointToStart(&body);
  Value blockId = merged.getBlockIds().x;
  gpu::TerminatorOp::create(rewriter, loc);
  rewriter.setInsertionPoint(body.getTerminator());

  // The body of `c` at the insertion point, with its own block index (x
  // fastest), grid and thread indices.
  auto emitBody = [&](gpu::LaunchOp launch, Value start) {
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    Value local = arith::SubIOp::create(rewriter, loc, blockId, start);
    Value rest = arith::DivUIOp::create(rewriter, loc, local, grid.x);
    IRMapping mapping;
    auto map3 = [&](gpu::KernelDim3 from, Value x, Value y, Value z) {
      mapping.map(from.x, x);
      mapping.map(from.y, y);
      mapping.map(from.z, z);
    };
    map3(launch.getBlockIds(),
         arith::RemUIOp::create(rewriter, loc, local, grid.x),
         arith::RemUIOp::create(rewriter, loc, rest, grid.y),
         arith::DivUIOp::create(rewriter, loc, rest, grid.y));
    gpu::KernelDim3 threads = merged.getThreadIds();
    map3(launch.getThreadIds(), threads.x, threads.y, threads.z);
    map3(launch.getGridSize(), grid.x, grid.y, grid.z);
    gpu::KernelDim3 blockSize = merged.getBlockSize();
    map3(launch.getBlockSize(), blockSize.x, blockSize.y, blockSize.z);
    for (Operation &op : launch.getBody().front().without_terminator())
      rewriter.clone(op, mapping);
  };

  // if (id < starts[1]) { body 0 } else if (id < starts[2]) { body 1 } ...
  for (auto [i, c] : llvm::enumerate(group)) {
    if (i + 1 == group.size()) {
      emitBody(c.launch, starts[i]);
      break;
    }
    Value inside = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, blockId, starts[i + 1]);
    auto branch = scf::IfOp::create(rewriter, loc, TypeRange{}, inside,
                                    /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(branch.thenBlock()->getTerminator());
      emitBody(c.launch, starts[i]);
    }
    rewriter.setInsertionPoint(branch.elseBlock()->getTerminator());
  }
  for (const LaunchInfo &c : group)
    rewriter.eraseOp(c.launch);
}

/// Whether `op` may be reordered among the launches around it: a launch
/// whose effects are known, an allocation or free, or an op without memory
/// effects or regions.
bool isSchedulable(Operation *op) {
  if (isa<gpu::LaunchOp>(op))
    return succeeded(analyzeLaunch(cast<gpu::LaunchOp>(op)));
  if (isa<gpu::AllocOp, memref::AllocOp, gpu::DeallocOp, memref::DeallocOp>(op))
    return true;
  return isMemoryEffectFree(op) && op->getNumRegions() == 0;
}

/// Reorders the launches of `ops` (a run of schedulable ops of one block)
/// so that independent launches that can merge come next to each other: a
/// list schedule of the launches' dependence graph that, from the earliest
/// launch whose predecessors are placed, takes along every other ready
/// launch of the next `window` of the same block size (within the merge
/// limits). Other ops follow their uses: each op is placed right before
/// the first launch that needs it (through its operands), a free right
/// after the group that last touches its buffer, the rest where the run
/// ends, each in its original order.
void scheduleRun(ArrayRef<Operation *> ops, int64_t window, int64_t maxLaunches,
                 int64_t maxParameterBytes) {
  SmallVector<LaunchInfo> launches;
  for (Operation *op : ops)
    if (auto launch = dyn_cast<gpu::LaunchOp>(op))
      launches.push_back(*analyzeLaunch(launch));
  int64_t n = launches.size();
  if (n < 2)
    return;
  // predecessors[j]: the earlier launches launch j depends on.
  SmallVector<SmallVector<int64_t>> predecessors(n);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < j; ++i)
      if (!independent(launches[i].accesses, launches[j].accesses))
        predecessors[j].push_back(i);

  SmallVector<bool> placed(n, false);
  auto ready = [&](int64_t j) {
    return !placed[j] &&
           llvm::all_of(predecessors[j], [&](int64_t i) { return placed[i]; });
  };
  SmallVector<SmallVector<int64_t>> groups;
  for (int64_t first = 0; first < n;) {
    while (first < n && placed[first])
      ++first;
    if (first == n)
      break;
    // The earliest unplaced launch is ready: all its predecessors come
    // before it.
    // The others join if every launch they depend on is placed before the
    // group (not in it).
    Group group;
    SmallVector<int64_t> members = {first};
    group.add(launches[first]);
    if (launches[first].combinable) {
      for (int64_t k = first + 1; k < n && k <= first + window; ++k) {
        const LaunchInfo &c = launches[k];
        if (!c.combinable || !sameShape(c, launches[first]) || !ready(k) ||
            static_cast<int64_t>(members.size()) >= maxLaunches ||
            group.bytesWith(c) > maxParameterBytes)
          continue;
        group.add(c);
        members.push_back(k);
      }
    }
    for (int64_t j : members)
      placed[j] = true;
    groups.push_back(members);
  }

  // The new order: the ops each group's launches use, the launches, then
  // the frees of the buffers no later group touches.
  DenseSet<Operation *> inRun(ops.begin(), ops.end());
  DenseSet<Operation *> emitted;
  SmallVector<Operation *> order;
  std::function<void(Operation *)> emitWithOperands = [&](Operation *op) {
    if (!inRun.contains(op) || emitted.contains(op))
      return;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        emitWithOperands(def);
    op->walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (def != op && !op->isAncestor(def))
            emitWithOperands(def);
    });
    emitted.insert(op);
    order.push_back(op);
  };
  // The position (in `groups`) of the last group that touches each root.
  DenseMap<Value, int64_t> lastUse;
  for (auto [g, members] : llvm::enumerate(groups))
    for (int64_t j : members) {
      for (Value v : launches[j].accesses.reads)
        lastUse[v] = g;
      for (Value v : launches[j].accesses.writes)
        lastUse[v] = g;
    }
  SmallVector<SmallVector<Operation *>> freesAfter(groups.size());
  for (Operation *op : ops) {
    if (!isa<gpu::DeallocOp, memref::DeallocOp>(op))
      continue;
    Value freed = viewedBuffer(op->getOperand(op->getNumOperands() - 1));
    int64_t last = -1;
    for (auto [root, g] : lastUse)
      if (mayAlias(root, freed))
        last = std::max(last, g);
    if (last >= 0)
      freesAfter[last].push_back(op);
  }
  for (auto [g, members] : llvm::enumerate(groups)) {
    for (int64_t j : members)
      emitWithOperands(launches[j].launch);
    for (Operation *free : freesAfter[g])
      emitWithOperands(free);
  }
  for (Operation *op : ops)
    emitWithOperands(op);

  // Move the ops into that order, in place of the run.
  Operation *anchor = ops.back()->getNextNode();
  Block *block = ops.front()->getBlock();
  for (Operation *op : order) {
    if (anchor)
      op->moveBefore(anchor);
    else
      op->moveBefore(block, block->end());
  }
}

struct SwitchyardGpuMergeLaunchesPass
    : public switchyard::impl::SwitchyardGpuMergeLaunchesPassBase<
          SwitchyardGpuMergeLaunchesPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // First bring independent launches together, run by run of ops that
    // can be reordered.
    SmallVector<Block *> blocks = switchyard::hostBlocks(func);
    for (Block *block : blocks) {
      SmallVector<Operation *> run;
      auto flush = [&] {
        scheduleRun(run, window, maxLaunches, maxParameterBytes);
        run.clear();
      };
      for (Operation &op : llvm::make_early_inc_range(*block)) {
        if (!op.hasTrait<OpTrait::IsTerminator>() && isSchedulable(&op))
          run.push_back(&op);
        else
          flush();
      }
      flush();
    }
    // Groups of launches, in order, each mergeable into one at the place
    // of its last: the launches between them in the same block are
    // independent of the group, the other ops between them allocations,
    // frees of other buffers and ops without memory effects.
    SmallVector<SmallVector<LaunchInfo>> groups;
    for (Block *block : blocks) {
      // The groups that may still grow; each floats down past what it can
      // cross.
      std::list<Group> open;
      auto close = [&](std::list<Group>::iterator it) {
        if (it->members.size() > 1)
          groups.push_back(it->members);
        return open.erase(it);
      };
      auto closeAll = [&] {
        while (!open.empty())
          close(open.begin());
      };
      for (Operation &op : *block) {
        auto launch = dyn_cast<gpu::LaunchOp>(op);
        if (!launch) {
          for (auto it = open.begin(); it != open.end();)
            it = it->canCross(&op) ? std::next(it) : close(it);
          continue;
        }
        FailureOr<LaunchInfo> candidate = analyzeLaunch(launch);
        if (failed(candidate)) {
          closeAll();
          continue;
        }
        // The first open group this launch can join; every other one must
        // be independent of it to move past it.
        auto joins = [&](const Group &g) {
          return candidate->combinable &&
                 sameShape(g.members.front(), *candidate) &&
                 static_cast<int64_t>(g.members.size()) < maxLaunches &&
                 g.bytesWith(*candidate) <= maxParameterBytes &&
                 independent(candidate->accesses, g.accesses);
        };
        Group *joined = nullptr;
        for (auto it = open.begin(); it != open.end();) {
          if (!joined && joins(*it)) {
            joined = &*it;
            ++it;
            continue;
          }
          it = independent(candidate->accesses, it->accesses) ? std::next(it)
                                                              : close(it);
        }
        if (joined) {
          joined->add(*candidate);
        } else if (candidate->combinable) {
          open.emplace_back();
          open.back().add(*candidate);
        }
      }
      closeAll();
    }
    IRRewriter rewriter(&getContext());
    [[maybe_unused]] int64_t merged = 0;
    for (ArrayRef<LaunchInfo> group : groups) {
      merge(rewriter, group);
      merged += group.size();
    }
    LLVM_DEBUG(llvm::dbgs()
               << "@" << func.getSymName() << ": " << merged
               << " launches merged into " << groups.size() << "\n");
  }
};

} // namespace
