//===- CpuConvertAssertToLLVM.cpp - cf.assert to LLVM, in linear time -----===//
//
// Implements `switchyard-convert-assert-to-llvm`: what upstream's cf.assert
// lowering emits (a branch to a block that prints the message with `puts`
// and calls `abort`), built with one symbol table for the whole module and
// one global per distinct message. Upstream's lowering
// (LLVM::createPrintStrCall) checks each new global's name with
// ModuleOp::lookupSymbol, a walk over the module: quadratic in the number
// of assertions, which the GPU emulation's bounds checks make by the
// thousand.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/CPU/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDCONVERTASSERTTOLLVMPASS
#include "lib/Codegen/CPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-convert-assert-to-llvm"

using namespace mlir;

namespace {
struct SwitchyardConvertAssertToLLVMPass
    : public switchyard::impl::SwitchyardConvertAssertToLLVMPassBase<
          SwitchyardConvertAssertToLLVMPass> {
  void runOnOperation() override;
};

void SwitchyardConvertAssertToLLVMPass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<cf::AssertOp> asserts;
  module.walk([&](cf::AssertOp op) { asserts.push_back(op); });
  if (asserts.empty())
    return;

  MLIRContext *ctx = &getContext();
  SymbolTableCollection symbolTables;
  SymbolTable &symbols = symbolTables.getSymbolTable(module);
  IRRewriter b(ctx);
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  // The C library's functions, declared once (an error if the module
  // declares them with other types).
  FailureOr<LLVM::LLVMFuncOp> puts = LLVM::lookupOrCreateFn(
      b, module, "puts", {ptr}, IntegerType::get(ctx, 32),
      /*isVarArg=*/false, /*isReserved=*/false, &symbolTables);
  FailureOr<LLVM::LLVMFuncOp> abort = LLVM::lookupOrCreateFn(
      b, module, "abort", {}, LLVM::LLVMVoidType::get(ctx),
      /*isVarArg=*/false, /*isReserved=*/false, &symbolTables);
  if (failed(puts) || failed(abort))
    return signalPassFailure();

  // One zero-terminated global per distinct message.
  DenseMap<StringAttr, LLVM::GlobalOp> messages;
  auto message = [&](cf::AssertOp op) {
    LLVM::GlobalOp &global = messages[op.getMsgAttr()];
    if (global)
      return global;
    SmallVector<char> bytes(op.getMsg().begin(), op.getMsg().end());
    bytes.push_back(0);
    auto type =
        LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), bytes.size());
    b.setInsertionPointToStart(module.getBody());
    global = LLVM::GlobalOp::create(
        b, op.getLoc(), type, /*isConstant=*/true, LLVM::Linkage::Private,
        "assert_msg", b.getStringAttr(StringRef(bytes.data(), bytes.size())));
    symbols.insert(global); // Renamed to a unique name where needed.
    return global;
  };

  // Last first: each split then moves only the operations up to the
  // previous split, once (first first would move a block's tail once per
  // assertion in it: quadratic again).
  for (cf::AssertOp op : llvm::reverse(asserts)) {
    Region *region = op->getParentRegion();
    if (region->getParentOp()->hasTrait<OpTrait::SingleBlock>()) {
      op.emitOpError() << "switchyard-convert-assert-to-llvm: in a "
                          "single-block region";
      return signalPassFailure();
    }
    Location loc = op.getLoc();
    LLVM::GlobalOp global = message(op);
    // before: ... cf.cond_br %ok, ^after, ^fail; ^fail: puts, abort.
    Block *before = op->getBlock();
    Block *after = b.splitBlock(before, std::next(op->getIterator()));
    Block *fail = b.createBlock(after);
    Value text = LLVM::AddressOfOp::create(b, loc, ptr, global.getSymName());
    LLVM::CallOp::create(b, loc, *puts, ValueRange{text});
    LLVM::CallOp::create(b, loc, *abort, ValueRange{});
    LLVM::UnreachableOp::create(b, loc);
    b.setInsertionPoint(op);
    cf::CondBranchOp::create(b, loc, op.getArg(), after, ValueRange{}, fail,
                             ValueRange{});
    b.eraseOp(op);
  }
  LLVM_DEBUG(llvm::dbgs() << "lowered " << asserts.size() << " assertions with "
                          << messages.size() << " distinct messages\n");
}
} // namespace
