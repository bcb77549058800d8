//===- CpuOutlineLoops.cpp - one function per top-level CPU loop nest -----===//
//
// Implements `switchyard-cpu-outline-loops` (see Passes.td) with
// switchyard::outlineOp (Outlining.h). A loop nest identical to one outlined
// before (same operations, attributes and types, up to locations) calls that
// function instead.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/CPU/Passes.h"
#include "lib/Codegen/Common/Outlining.h"
#include "lib/Codegen/Common/Passes.h"
#include "lib/Codegen/Common/SameFunctions.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDCPUOUTLINELOOPSPASS
#include "lib/Codegen/CPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-cpu-outline-loops"

using namespace mlir;

namespace {

/// The messages of the checks (cf.assert) in the copies of one loop nest:
/// for each check of the function kept, in walk order, the distinct
/// messages of that check in the copies it stands for.
using CheckMessages = SmallVector<SmallVector<std::string, 1>>;

/// `function`'s cf.assert ops, in walk order (the same in equivalent
/// functions).
SmallVector<cf::AssertOp> checksOf(func::FuncOp function) {
  SmallVector<cf::AssertOp> checks;
  function.walk([&](cf::AssertOp check) { checks.push_back(check); });
  return checks;
}

/// The messages of checks that differ only in them: their texts, the
/// first's first.
std::string joinMessages(ArrayRef<std::string> messages) {
  std::string joined = messages.front();
  for (const std::string &other : messages.drop_front())
    joined +=
        "\n(or, in a copy of this loop nest that shares its code:)\n" + other;
  return joined;
}

/// Whether `func` is one block without loops or other regions.
bool isStraightLine(func::FuncOp func) {
  if (!func.getBody().hasOneBlock())
    return false;
  return llvm::none_of(func.getBody().front(),
                       [](Operation &op) { return op.getNumRegions() != 0; });
}

/// Where `function` (just outlined, called by `call`) is one loop marked
/// switchyard.parallel with a constant step: its bounds become its first
/// two arguments (the call passes the loop's), so that the loop can run in
/// chunks (the JIT's dispatchParallelLoops, lib/Target/LLVMIR); the step.
/// nullopt, and nothing changed, otherwise.
std::optional<int64_t> takeBounds(RewriterBase &rewriter,
                                  func::FuncOp function, func::CallOp &call) {
  Block &body = function.getBody().front();
  auto loops = body.getOps<scf::ForOp>();
  if (!llvm::hasSingleElement(loops))
    return std::nullopt;
  scf::ForOp loop = *loops.begin();
  if (!loop->hasAttr(switchyard::kParallelLoopAttr))
    return std::nullopt;
  loop->removeAttr(switchyard::kParallelLoopAttr);
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (!step || *step <= 0)
    return std::nullopt;
  // The caller's value of each bound: the argument it passes, or a copy of
  // the constant that outlining cloned in.
  rewriter.setInsertionPoint(call);
  SmallVector<Value> bounds;
  for (Value bound : {loop.getLowerBound(), loop.getUpperBound()}) {
    if (auto argument = dyn_cast<BlockArgument>(bound)) {
      bounds.push_back(call.getOperand(argument.getArgNumber()));
      continue;
    }
    Operation *def = bound.getDefiningOp();
    if (!def || def->getNumOperands() != 0 || !matchPattern(bound, m_Constant()))
      return std::nullopt;
    bounds.push_back(rewriter.clone(*def)->getResult(0));
  }
  Location loc = loop.getLoc();
  Type index = rewriter.getIndexType();
  if (failed(function.insertArguments({0, 0}, {index, index}, {{}, {}},
                                      {loc, loc})))
    return std::nullopt;
  loop.getLowerBoundMutable().assign(body.getArgument(0));
  loop.getUpperBoundMutable().assign(body.getArgument(1));
  SmallVector<Value> operands(bounds);
  llvm::append_range(operands, call.getOperands());
  call = rewriter.replaceOpWithNewOp<func::CallOp>(call, function, operands);
  return step;
}

/// Moves the static stack allocations of `function`'s loops (the
/// per-iteration temporaries of switchyard-cpu-forall-to-loops) to its
/// entry: one per call, each chunk of a parallel loop its own, reused by
/// the iterations (each writes its temporaries before reading them), and
/// in the entry block, where LLVM promotes them to registers. An alloca in
/// a loop would grow the stack with every iteration.
void hoistStackTemporaries(func::FuncOp function) {
  Block &entry = function.getBody().front();
  SmallVector<memref::AllocaOp> allocas;
  function.walk([&](memref::AllocaOp alloca) {
    if (alloca->getBlock() != &entry && alloca.getType().hasStaticShape() &&
        alloca.getDynamicSizes().empty() && alloca.getSymbolOperands().empty())
      allocas.push_back(alloca);
  });
  for (memref::AllocaOp alloca : allocas)
    alloca->moveBefore(&entry, entry.begin());
}

struct SwitchyardCpuOutlineLoopsPass
    : public switchyard::impl::SwitchyardCpuOutlineLoopsPassBase<
          SwitchyardCpuOutlineLoopsPass> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (Block &block : func.getBody())
        for (auto loop : block.getOps<scf::ForOp>())
          if (loop.getNumResults() == 0)
            loops.push_back(loop);
    }

    IRRewriter rewriter(&getContext());
    llvm::StringMap<unsigned> counts;
    // The functions outlined so far (SameFunctions.h): most loop nests are
    // copies of others (the tiny SwitchHead training step's 2,854 nests are
    // 236 functions), and LLVM would compile each copy again.
    switchyard::SameFunctions outlinedSoFar;
    // Runtime checks (the GPU emulation's bounds checks) name the op and
    // its location in their message: nests that differ in nothing else
    // (a model's layers) share one function, whose checks then give every
    // copy's message. Their messages are set aside while the nests are
    // compared.
    llvm::MapVector<Operation *, CheckMessages> checkMessages;
    for (scf::ForOp loop : loops) {
      auto parent = loop->getParentOfType<func::FuncOp>();
      // <function>_loop<N>, the first N that names no symbol yet.
      unsigned &next = counts[parent.getSymName()];
      std::string name = switchyard::uniqueSymbolName(
          getOperation(), (parent.getSymName() + "_loop").str(), next);
      Location loc = loop.getLoc();
      FailureOr<switchyard::OutlinedOp> outlinedOp =
          switchyard::outlineOp(rewriter, loop, name);
      if (failed(outlinedOp)) {
        emitError(loc, "cannot outline this loop nest");
        return signalPassFailure();
      }
      func::FuncOp outlined = outlinedOp->function;
      func::CallOp call = outlinedOp->call;
      hoistStackTemporaries(outlined);
      SmallVector<Attribute> passthrough{rewriter.getStringAttr("noinline")};
      if (std::optional<int64_t> step = takeBounds(rewriter, outlined, call))
        passthrough.push_back(rewriter.getStrArrayAttr(
            {switchyard::kParallelForAttr, std::to_string(*step)}));
      outlined->setAttr("passthrough", rewriter.getArrayAttr(passthrough));
      SmallVector<cf::AssertOp> checks = checksOf(outlined);
      SmallVector<std::string> messages;
      for (cf::AssertOp check : checks) {
        messages.push_back(check.getMsg().str());
        check.setMsg("");
      }
      if (FunctionOpInterface same = outlinedSoFar.findOrInsert(outlined)) {
        call.setCallee(same.getName());
        rewriter.eraseOp(outlined);
        --counts[parent.getSymName()];
        CheckMessages &kept = checkMessages[same];
        for (auto [distinct, message] : llvm::zip_equal(kept, messages))
          if (!llvm::is_contained(distinct, message))
            distinct.push_back(message);
      } else if (!checks.empty()) {
        CheckMessages &kept = checkMessages[outlined];
        for (std::string &message : messages)
          kept.push_back({std::move(message)});
      }
      LLVM_DEBUG(llvm::dbgs()
                 << "loop nest of @" << parent.getSymName() << " at " << loc
                 << " calls @" << call.getCallee() << "\n");
    }
    for (auto &[function, messages] : checkMessages)
      for (auto [check, distinct] :
           llvm::zip_equal(checksOf(cast<func::FuncOp>(function)), messages))
        check.setMsg(joinMessages(distinct));

    // What remains of an entry point (a public function that nothing in the
    // module calls, or that only other such functions call: a training step
    // calls its gradient function, which calls the forward and backward
    // functions of each block) without loops is straight-line code that
    // runs once per call (allocations, calls to its loop nests, frees):
    // nothing to optimise, but thousands of instructions in one block, on
    // which LLVM's instruction selection and schedulers take longer than on
    // all the loops together. It and its C interface wrapper (which
    // func-to-llvm gives the same passthrough) get LLVM's code generation at
    // -O0 and none of its IR passes (optnone), and no implicit vector code
    // (noimplicitfloat): the SLP vectorizer would otherwise spend most of a
    // GPU model's compile on the kernel-argument stores of its host code's
    // one block. A function called from a loop stays as it is.
    ModuleOp module = getOperation();
    auto calledOnlyFromStraightLine = [&](func::FuncOp func) {
      std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(func, module);
      return uses && llvm::all_of(*uses, [](const SymbolTable::SymbolUse &use) {
               auto caller = dyn_cast<func::FuncOp>(use.getUser()->getParentOp());
               return isa<func::CallOp>(use.getUser()) && caller &&
                      isStraightLine(caller);
             });
    };
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && isStraightLine(func) &&
          !func->hasAttr("passthrough") && calledOnlyFromStraightLine(func)) {
        LLVM_DEBUG(llvm::dbgs() << "entry point @" << func.getSymName()
                                << " is straight-line: optnone\n");
        func->setAttr("passthrough",
                      rewriter.getStrArrayAttr(
                          {"noinline", "optnone", "noimplicitfloat"}));
      }
  }
};

} // namespace
