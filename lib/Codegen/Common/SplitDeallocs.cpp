//===- SplitDeallocs.cpp - deallocs split by fresh allocations ------------===//
//
// Implements `switchyard-split-deallocs` (see Passes.td): the buffers of a
// bufferization.dealloc that a fresh allocation proves distinct get
// deallocs of their own, each retaining only what it may alias.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDSPLITDEALLOCSPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-split-deallocs"

using namespace mlir;

namespace {

/// The buffer `value` is a view of: views and the base buffer of
/// memref.extract_strided_metadata followed to their source.
Value rootOf(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(def);
        view && view->getResult(0) == value) {
      value = view.getViewSource();
      continue;
    }
    if (auto metadata = dyn_cast<memref::ExtractStridedMetadataOp>(def);
        metadata && metadata.getBaseBuffer() == value) {
      value = metadata.getSource();
      continue;
    }
    break;
  }
  return value;
}

/// Whether `op` makes a new buffer: memref.alloc, or bufferization.clone
/// (a new allocation holding a copy).
bool isAllocation(Operation *op) {
  return isa_and_present<memref::AllocOp, bufferization::CloneOp>(op);
}

/// Whether every result of `func` is a view of a new buffer of its own: an
/// allocation, or a result of a call of a function in `fresh` (different
/// calls, and different results of one call, are different buffers). A
/// call's results are then new allocations, distinct from each other.
bool returnsFreshBuffers(func::FuncOp func,
                         const llvm::DenseSet<Operation *> &fresh) {
  if (func.isDeclaration() || !func.getBody().hasOneBlock())
    return false;
  auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (!ret)
    return false;
  llvm::DenseSet<Value> roots;
  for (Value operand : ret.getOperands()) {
    if (!isa<BaseMemRefType>(operand.getType()))
      continue;
    Value root = rootOf(operand);
    bool isNew = isAllocation(root.getDefiningOp());
    if (auto call = root.getDefiningOp<func::CallOp>())
      isNew = fresh.contains(SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr()));
    if (!isNew || !roots.insert(root).second)
      return false;
  }
  return true;
}

/// The functions that return fresh buffers, callees before their callers.
llvm::DenseSet<Operation *> freshFunctionsOf(ModuleOp module) {
  llvm::DenseSet<Operation *> fresh;
  for (bool changed = true; changed;) {
    changed = false;
    for (func::FuncOp func : module.getOps<func::FuncOp>())
      if (!fresh.contains(func) && returnsFreshBuffers(func, fresh)) {
        fresh.insert(func);
        changed = true;
      }
  }
  return fresh;
}

/// Where a dealloc operand's buffer comes from, as seen from the dealloc's
/// block.
struct Origin {
  Value root;
  /// The position in the dealloc's block at which the root exists: -1 for
  /// a value of an enclosing region or a block argument, else the index of
  /// the op in the block that defines it (or that contains its definition).
  int64_t position = -1;
  /// Whether the root is a new allocation at `position` (a memref.alloc,
  /// or a result of a call of a function returning fresh buffers).
  bool fresh = false;
  /// Whether the origin is known (defined in the block or above it).
  bool known = false;
};

struct SwitchyardSplitDeallocsPass
    : public switchyard::impl::SwitchyardSplitDeallocsPassBase<
          SwitchyardSplitDeallocsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::DenseSet<Operation *> freshFunctions = freshFunctionsOf(module);
    unsigned split = 0, dropped = 0;
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      SmallVector<bufferization::DeallocOp> deallocs;
      func.walk([&](bufferization::DeallocOp op) { deallocs.push_back(op); });
      // The positions of the ops of each block, numbered once: the new ops
      // go before the deallocs they replace and are nobody's root.
      llvm::DenseMap<Block *, llvm::DenseMap<Operation *, int64_t>> positions;
      for (bufferization::DeallocOp dealloc : deallocs) {
        Block *block = dealloc->getBlock();
        auto [entry, inserted] = positions.try_emplace(block);
        if (inserted) {
          int64_t index = 0;
          for (Operation &op : *block)
            entry->second[&op] = index++;
        }
        rewrite(dealloc, entry->second, freshFunctions, split, dropped);
      }
    }
    LLVM_DEBUG(llvm::dbgs() << split << " buffers in deallocs of their own, "
                            << dropped << " retained buffers dropped\n");
  }

  Origin originOf(Value value, Block *block,
                  const llvm::DenseMap<Operation *, int64_t> &positions,
                  const llvm::DenseSet<Operation *> &freshFunctions) {
    Origin origin;
    origin.root = rootOf(value);
    Operation *def = origin.root.getDefiningOp();
    Region *region = origin.root.getParentRegion();
    if (!def) {
      // A block argument of this block or of an enclosing one.
      Block *owner = cast<BlockArgument>(origin.root).getOwner();
      origin.known =
          owner == block || owner->getParentOp()->isProperAncestor(
                                block->getParentOp());
      return origin;
    }
    if (Operation *inBlock = block->findAncestorOpInBlock(*def)) {
      origin.position = positions.lookup(inBlock);
      origin.known = true;
    } else {
      origin.known = region->isProperAncestor(block->getParent());
      return origin;
    }
    if (isAllocation(def)) {
      origin.fresh = def->getBlock() == block;
    } else if (auto call = dyn_cast<func::CallOp>(def)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      origin.fresh = def->getBlock() == block && callee &&
                     freshFunctions.contains(callee);
    }
    return origin;
  }

  /// Whether the buffers of `a` and `b`, both alive at the dealloc, are
  /// provably different allocations.
  static bool distinct(const Origin &a, const Origin &b) {
    if (!a.known || !b.known || a.root == b.root)
      return false;
    if (a.fresh && b.fresh)
      // New allocations at different points, or different results of one
      // call of a function returning distinct allocations.
      return true;
    if (a.fresh)
      return b.position < a.position;
    if (b.fresh)
      return a.position < b.position;
    return false;
  }

  void rewrite(bufferization::DeallocOp dealloc,
               const llvm::DenseMap<Operation *, int64_t> &positions,
               const llvm::DenseSet<Operation *> &freshFunctions,
               unsigned &split, unsigned &dropped) {
    Block *block = dealloc->getBlock();
    auto origins = [&](ValueRange values) {
      return llvm::map_to_vector(values, [&](Value v) {
        return originOf(v, block, positions, freshFunctions);
      });
    };
    SmallVector<Origin> freed = origins(dealloc.getMemrefs());
    SmallVector<Origin> retained = origins(dealloc.getRetained());

    // Groups of freed buffers: each one distinct from all others alone,
    // the rest together.
    SmallVector<SmallVector<unsigned>> groups;
    SmallVector<unsigned> rest;
    for (unsigned i = 0; i < freed.size(); ++i) {
      bool alone = true;
      for (unsigned j = 0; j < freed.size() && alone; ++j)
        alone = i == j || distinct(freed[i], freed[j]);
      if (alone && freed.size() > 1)
        groups.push_back({i});
      else
        rest.push_back(i);
    }
    if (!rest.empty())
      groups.push_back(rest);

    // Each group retains what it may alias.
    SmallVector<SmallVector<unsigned>> groupRetained;
    bool changed = groups.size() > 1;
    for (const SmallVector<unsigned> &group : groups) {
      SmallVector<unsigned> keep;
      for (unsigned r = 0; r < retained.size(); ++r)
        if (llvm::any_of(group, [&](unsigned i) {
              return !distinct(freed[i], retained[r]);
            }))
          keep.push_back(r);
      changed |= keep.size() != retained.size();
      groupRetained.push_back(std::move(keep));
    }
    if (!changed)
      return;
    split += groups.size() - 1;

    OpBuilder builder(dealloc);
    Location loc = dealloc.getLoc();
    SmallVector<Value> results(retained.size());
    for (auto [group, keep] : llvm::zip(groups, groupRetained)) {
      SmallVector<Value> memrefs, conditions, kept;
      for (unsigned i : group) {
        memrefs.push_back(dealloc.getMemrefs()[i]);
        conditions.push_back(dealloc.getConditions()[i]);
      }
      for (unsigned r : keep)
        kept.push_back(dealloc.getRetained()[r]);
      auto part = bufferization::DeallocOp::create(builder, loc, memrefs,
                                                   conditions, kept);
      for (auto [position, r] : llvm::enumerate(keep)) {
        Value updated = part.getUpdatedConditions()[position];
        results[r] = results[r] ? arith::OrIOp::create(builder, loc,
                                                       results[r], updated)
                                      .getResult()
                                : updated;
      }
    }
    Value falseValue;
    for (auto [r, result] : llvm::enumerate(results)) {
      if (!result) {
        ++dropped;
        if (!falseValue)
          falseValue = arith::ConstantOp::create(builder, loc,
                                                 builder.getBoolAttr(false));
        result = falseValue;
      }
      dealloc.getUpdatedConditions()[r].replaceAllUsesWith(result);
    }
    dealloc.erase();
  }
};

} // namespace
