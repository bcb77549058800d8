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

#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUMERGELAUNCHESPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-merge-launches"

using namespace mlir;

namespace {

/// The value of an index computed from constants on the host (the block
/// sizes that kernel formation leaves as affine.apply of constants).
std::optional<int64_t> constantIndex(Value value) {
  IntegerAttr attr;
  if (matchPattern(value, m_Constant(&attr)))
    return attr.getValue().getSExtValue();
  Operation *def = value.getDefiningOp();
  if (auto apply = dyn_cast_or_null<affine::AffineApplyOp>(def)) {
    Builder builder(value.getContext());
    SmallVector<Attribute> operands;
    for (Value operand : apply.getMapOperands()) {
      std::optional<int64_t> known = constantIndex(operand);
      if (!known)
        return std::nullopt;
      operands.push_back(builder.getIndexAttr(*known));
    }
    SmallVector<Attribute> folded;
    if (failed(apply.getAffineMap().constantFold(operands, folded)))
      return std::nullopt;
    return cast<IntegerAttr>(folded.front()).getInt();
  }
  if (isa_and_nonnull<arith::MulIOp, arith::AddIOp>(def)) {
    std::optional<int64_t> a = constantIndex(def->getOperand(0));
    std::optional<int64_t> b = constantIndex(def->getOperand(1));
    if (!a || !b)
      return std::nullopt;
    return isa<arith::MulIOp>(def) ? *a * *b : *a + *b;
  }
  return std::nullopt;
}

/// The buffer a memref value views: through view-like ops to an
/// allocation, a function argument or another op's result.
Value rootBuffer(Value memref) {
  while (auto view = memref.getDefiningOp<ViewLikeOpInterface>())
    memref = view.getViewSource();
  return memref;
}

/// Whether two root buffers may share memory: the same buffer, or neither
/// a fresh allocation of the host code.
bool mayAlias(Value a, Value b) {
  auto fresh = [](Value v) {
    return isa_and_nonnull<gpu::AllocOp, memref::AllocOp>(v.getDefiningOp());
  };
  return a == b || (!fresh(a) && !fresh(b));
}

/// The buffers (from outside) a launch reads and writes.
struct Accesses {
  SmallVector<Value> reads, writes;
};

/// A launch that this pass can merge: one block in its body, no
/// attributions, no barrier and no shared memory (its body then runs the
/// same under a condition on the block), a static block size; and the
/// buffers it accesses, or failure where an op's effects are unknown.
struct Candidate {
  gpu::LaunchOp launch;
  std::array<int64_t, 3> block;
  Accesses accesses;
  /// The host values its body uses: the kernel's parameters.
  SetVector<Value> captured;
};

/// The bytes a host value takes among a kernel's parameters: a memref is
/// its descriptor (two pointers, the offset, sizes and strides), anything
/// else at most 8 bytes.
int64_t parameterBytes(Value value) {
  if (auto memref = dyn_cast<MemRefType>(value.getType()))
    return 8 * (3 + 2 * memref.getRank());
  return 8;
}

FailureOr<Candidate> analyze(gpu::LaunchOp launch) {
  Candidate candidate{launch, {}, {}, {}};
  if (!launch.getBody().hasOneBlock() || launch.getAsyncToken() ||
      !launch.getWorkgroupAttributions().empty() ||
      !launch.getPrivateAttributions().empty() ||
      launch.getDynamicSharedMemorySize() || launch.hasClusterSize())
    return failure();
  gpu::KernelDim3 sizes = launch.getBlockSizeOperandValues();
  std::array<Value, 3> blockSizes = {sizes.x, sizes.y, sizes.z};
  for (auto [i, size] : llvm::enumerate(blockSizes)) {
    std::optional<int64_t> known = constantIndex(size);
    if (!known)
      return failure();
    candidate.block[i] = *known;
  }
  Region &body = launch.getBody();
  WalkResult walk = body.walk([&](Operation *op) {
    if (isa<gpu::BarrierOp, gpu::DynamicSharedMemoryOp>(op))
      return WalkResult::interrupt();
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects) {
      if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
          isa<gpu::TerminatorOp>(op))
        return WalkResult::advance();
      return WalkResult::interrupt();
    }
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &effect : instances) {
      Value value = effect.getValue();
      if (!value) {
        // An effect on memory it does not name: unknown, unless it only
        // allocates (within the thread).
        if (isa<MemoryEffects::Allocate, MemoryEffects::Free>(
                effect.getEffect()))
          continue;
        return WalkResult::interrupt();
      }
      Value root = rootBuffer(value);
      if (body.isAncestor(root.getParentRegion()))
        continue; // The thread's own memory.
      if (isa<MemoryEffects::Write>(effect.getEffect()))
        candidate.accesses.writes.push_back(root);
      else if (isa<MemoryEffects::Read>(effect.getEffect()))
        candidate.accesses.reads.push_back(root);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  getUsedValuesDefinedAbove(body, candidate.captured);
  return candidate;
}

/// Whether `a` and `b` may run in either order: neither writes a buffer
/// the other touches.
bool independent(const Accesses &a, const Accesses &b) {
  auto conflict = [](ArrayRef<Value> writes, const Accesses &other) {
    for (Value w : writes) {
      for (Value v : other.reads)
        if (mayAlias(w, v))
          return true;
      for (Value v : other.writes)
        if (mayAlias(w, v))
          return true;
    }
    return false;
  };
  return !conflict(a.writes, b) && !conflict(b.writes, a);
}

/// Whether a launch can move down past `op`: it allocates or has no memory
/// effects (index arithmetic, constants, the next launch's allocations).
bool canCross(Operation *op) {
  if (isa<gpu::AllocOp, memref::AllocOp>(op))
    return true;
  return isMemoryEffectFree(op) && op->getNumRegions() == 0;
}

/// Replaces `group` (two or more candidates, in order, the same block size)
/// by one launch at the place of the last: a one-dimensional grid of all
/// their blocks, each block running the body of the launch it belongs to
/// with its own block index and grid size.
void merge(RewriterBase &rewriter, ArrayRef<Candidate> group) {
  gpu::LaunchOp last = group.back().launch;
  Location loc = last.getLoc();
  rewriter.setInsertionPoint(last);
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, v);
  };
  // Each launch's first block in the merged grid, and the total.
  SmallVector<Value> starts;
  Value total = index(0);
  for (const Candidate &c : group) {
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
  auto merged = gpu::LaunchOp::create(rewriter, loc, total, one, one, block.x,
                                      block.y, block.z);
  merged->setDiscardableAttrs(last->getDiscardableAttrDictionary());
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
  for (const Candidate &c : group)
    rewriter.eraseOp(c.launch);
}

struct SwitchyardGpuMergeLaunchesPass
    : public switchyard::impl::SwitchyardGpuMergeLaunchesPassBase<
          SwitchyardGpuMergeLaunchesPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Groups of consecutive launches, each mergeable into its group.
    SmallVector<SmallVector<Candidate>> groups;
    func.walk([&](Block *block) {
      SmallVector<Candidate> group;
      Accesses groupAccesses;
      // The merged kernel's parameters: every launch's host values, and
      // per launch its first block and grid size (3 values).
      llvm::SmallDenseSet<Value> groupCaptured;
      int64_t groupBytes = 0;
      auto addParameters = [&](const Candidate &c, bool dryRun) {
        int64_t bytes = 3 * 8;
        for (Value v : c.captured)
          if (!groupCaptured.contains(v))
            bytes += parameterBytes(v);
        if (!dryRun) {
          groupCaptured.insert(c.captured.begin(), c.captured.end());
          groupBytes += bytes;
        }
        return groupBytes + (dryRun ? bytes : 0);
      };
      auto close = [&] {
        if (group.size() > 1)
          groups.push_back(group);
        group.clear();
        groupAccesses = Accesses();
        groupCaptured.clear();
        groupBytes = 0;
      };
      for (Operation &op : *block) {
        auto launch = dyn_cast<gpu::LaunchOp>(op);
        if (!launch) {
          if (!canCross(&op))
            close();
          continue;
        }
        FailureOr<Candidate> candidate = analyze(launch);
        if (failed(candidate)) {
          close();
          continue;
        }
        if (!group.empty() &&
            (candidate->block != group.front().block ||
             static_cast<int64_t>(group.size()) >= maxLaunches ||
             addParameters(*candidate, /*dryRun=*/true) > maxParameterBytes ||
             !independent(candidate->accesses, groupAccesses)))
          close();
        addParameters(*candidate, /*dryRun=*/false);
        group.push_back(*candidate);
        llvm::append_range(groupAccesses.reads, candidate->accesses.reads);
        llvm::append_range(groupAccesses.writes, candidate->accesses.writes);
      }
      close();
    });
    IRRewriter rewriter(&getContext());
    [[maybe_unused]] int64_t merged = 0;
    for (ArrayRef<Candidate> group : groups) {
      merge(rewriter, group);
      merged += group.size();
    }
    LLVM_DEBUG(llvm::dbgs() << "@" << func.getSymName() << ": " << merged
                            << " launches merged into " << groups.size()
                            << "\n");
  }
};

} // namespace
