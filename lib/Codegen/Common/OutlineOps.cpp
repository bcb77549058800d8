//===- OutlineOps.cpp - each distinct kernel-forming op compiled once -----===//
//
// Implements `switchyard-outline-ops` and `switchyard-inline-outlined-ops`
// (see Passes.td). The first moves every kernel-forming op of a function
// into a function of its own (switchyard::outlineOp), sharing one function
// among identical ops (SameFunctions.h), so that the function passes of
// code generation that follow run once per distinct op, in parallel over
// the functions; the second puts each op's code back at its calls.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Epilogues.h"
#include "lib/Codegen/Common/HostCode.h"
#include "lib/Codegen/Common/Outlining.h"
#include "lib/Codegen/Common/Passes.h"
#include "lib/Codegen/Common/SameFunctions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/FoldUtils.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDOUTLINEOPSPASS
#define GEN_PASS_DEF_SWITCHYARDINLINEOUTLINEDOPSPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-outline-ops"

using namespace mlir;
using switchyard::formsKernel;
using switchyard::onlyAllocates;

namespace {

/// The attribute that marks the functions switchyard-outline-ops makes.
constexpr llvm::StringLiteral kOutlinedAttr = "switchyard.outlined_op";

/// Whether `value` is computed, within its function, from a value read from
/// memory (a count loaded from a buffer, say); an op whose effects are not
/// known counts as a read. Results are remembered in `known`.
bool dependsOnMemoryRead(Value value, DenseMap<Value, bool> &known) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return false;
  if (auto it = known.find(value); it != known.end())
    return it->second;
  bool reads = !isMemoryEffectFree(def) && !matchPattern(value, m_Constant());
  for (Value operand : def->getOperands()) {
    if (reads)
      break;
    reads = dependsOnMemoryRead(operand, known);
  }
  known[value] = reads;
  return reads;
}

/// Whether every value `op` uses from above is a constant (cloned into the
/// function), a buffer, or an index that is not read from memory (passed to
/// it). The other values are host code's: on the GPU,
/// switchyard-gpu-launch-host-compute moves what reads a buffer (a learning
/// rate, a count) into a kernel and its users read the result from device
/// memory, which it can do for the ops of the function that computes them.
/// Those ops stay where they are.
bool usesOnlyBuffersIndicesAndConstants(Operation *op,
                                        DenseMap<Value, bool> &known) {
  WalkResult walk = op->walk([&](Operation *nested) {
    for (Value value : nested->getOperands()) {
      if (op->isAncestor(value.getParentRegion()->getParentOp()) ||
          isa<MemRefType>(value.getType()) ||
          matchPattern(value, m_Constant()))
        continue;
      if (isa<IndexType>(value.getType()) &&
          !dependsOnMemoryRead(value, known))
        continue;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return !walk.wasInterrupted();
}

/// Whether `group` is a single linalg.fill directly followed by `op`, an op
/// in destination style whose one output is the filled buffer.
bool fillsBufferOf(ArrayRef<Operation *> group, Operation *op) {
  auto fill = dyn_cast<linalg::FillOp>(group.front());
  auto user = dyn_cast<DestinationStyleOpInterface>(op);
  return group.size() == 1 && fill && user && fill->getNextNode() == op &&
         user.getNumDpsInits() == 1 &&
         user.getDpsInitOperand(0)->get() == fill.getDpsInitOperand(0)->get();
}

/// Moves each linalg.fill down to the op in destination style (a linalg op,
/// a grouped expert kernel) that writes the buffer it
/// filled, past allocations and ops without memory effects that do not use
/// that buffer (the allocation of the op's other buffers, index
/// arithmetic), so that fillsBufferOf groups them.
void sinkFillsToWriters(func::FuncOp func) {
  SmallVector<linalg::FillOp> fills;
  func.walk([&](linalg::FillOp fill) {
    if (fill.hasPureBufferSemantics())
      fills.push_back(fill);
  });
  for (linalg::FillOp fill : fills) {
    Value buffer = fill.getDpsInitOperand(0)->get();
    Operation *next = fill->getNextNode();
    while (next && !next->hasTrait<OpTrait::IsTerminator>() &&
           onlyAllocates(next) &&
           llvm::none_of(next->getOperands(),
                         [&](Value v) { return v == buffer; }))
      next = next->getNextNode();
    auto writer = dyn_cast_or_null<DestinationStyleOpInterface>(next);
    if (writer && next != fill->getNextNode() && writer.getNumDpsInits() == 1 &&
        writer.getDpsInitOperand(0)->get() == buffer)
      fill->moveBefore(next);
  }
}

struct SwitchyardOutlineOpsPass
    : public switchyard::impl::SwitchyardOutlineOpsPassBase<
          SwitchyardOutlineOpsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Each group: one op, or a fill and the op after it that writes the
    // buffer it filled; a contraction's marked epilogue joins its group.
    SmallVector<SmallVector<Operation *, 2>> groups;
    DenseMap<Value, bool> readsMemory;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func->hasAttr(kOutlinedAttr))
        continue;
      if (fillsWithUsers)
        sinkFillsToWriters(func);
      for (Block &block : func.getBody())
        for (Operation &op : block) {
          if (!formsKernel(&op))
            continue;
          bool outlinable = usesOnlyBuffersIndicesAndConstants(&op, readsMemory);
          // A marked epilogue goes with its contraction, the op before it
          // (switchyard-mark-epilogues); where it stays, so does that op.
          if (op.hasAttr(switchyard::kEpilogueAttr) && !groups.empty() &&
              groups.back().back()->getNextNode() == &op) {
            if (outlinable)
              groups.back().push_back(&op);
            else
              groups.pop_back();
            continue;
          }
          if (!outlinable)
            continue;
          if (fillsWithUsers && !groups.empty() &&
              fillsBufferOf(groups.back(), &op))
            groups.back().push_back(&op);
          else
            groups.push_back({&op});
        }
    }

    IRRewriter rewriter(&getContext());
    llvm::StringMap<unsigned> counts;
    switchyard::SameFunctions outlinedSoFar;
    [[maybe_unused]] unsigned shared = 0;
    for (ArrayRef<Operation *> group : groups) {
      auto parent = group.front()->getParentOfType<func::FuncOp>();
      unsigned &next = counts[parent.getSymName()];
      std::string name = switchyard::uniqueSymbolName(
          module, (parent.getSymName() + "_op").str(), next);
      Location loc = group.back()->getLoc();
      FailureOr<switchyard::OutlinedOp> outlined =
          switchyard::outlineOps(rewriter, group, name);
      if (failed(outlined)) {
        emitError(loc, "cannot outline this op");
        return signalPassFailure();
      }
      outlined->function->setAttr(kOutlinedAttr, rewriter.getUnitAttr());
      if (FunctionOpInterface same =
              outlinedSoFar.findOrInsert(outlined->function)) {
        outlined->call.setCallee(same.getName());
        rewriter.eraseOp(outlined->function);
        --counts[parent.getSymName()];
        ++shared;
      }
    }
    LLVM_DEBUG(llvm::dbgs() << groups.size() << " ops outlined into "
                            << groups.size() - shared << " functions\n");
  }
};

struct SwitchyardInlineOutlinedOpsPass
    : public switchyard::impl::SwitchyardInlineOutlinedOpsPassBase<
          SwitchyardInlineOutlinedOpsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    OpBuilder builder(&getContext());
    [[maybe_unused]] unsigned inlined = 0;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func->hasAttr(kOutlinedAttr))
        continue;
      SmallVector<func::CallOp> calls;
      func.walk([&](func::CallOp call) {
        auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
        if (callee && callee->hasAttr(kOutlinedAttr))
          calls.push_back(call);
      });
      // The copies' constants hoisted to the start of the caller and shared,
      // as the greedy rewriter's folding leaves them.
      OperationFolder constants(&getContext());
      Block &entry = func.getBody().front();
      for (func::CallOp call : calls) {
        auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
        if (!callee.getBody().hasOneBlock()) {
          callee.emitError("outlined op's function is no longer one block");
          return signalPassFailure();
        }
        Block &body = callee.getBody().front();
        IRMapping mapping;
        mapping.map(body.getArguments(), call.getOperands());
        builder.setInsertionPoint(call);
        for (Operation &op : body.without_terminator()) {
          Attribute value;
          if (op.getNumOperands() == 0 && op.getNumResults() == 1 &&
              op.getNumRegions() == 0 &&
              matchPattern(op.getResult(0), m_Constant(&value))) {
            if (Value hoisted = constants.getOrCreateConstant(
                    &entry, op.getDialect(), value, op.getResult(0).getType())) {
              mapping.map(op.getResult(0), hoisted);
              continue;
            }
          }
          builder.clone(op, mapping);
        }
        call.erase();
        ++inlined;
      }
    }
    for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (func->hasAttr(kOutlinedAttr))
        func.erase();
    LLVM_DEBUG(llvm::dbgs() << inlined << " calls inlined\n");
  }
};

} // namespace
