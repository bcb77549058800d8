//===- CpuBarePointerCalls.cpp - static buffers as bare pointers ----------===//
//
// Implements `switchyard-cpu-bare-pointer-calls` (see Passes.td): private
// functions whose buffers all have static shapes and identity layouts get
// upstream's bare-pointer calling convention (`llvm.bareptr`).
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDCPUBAREPOINTERCALLSPASS
#include "lib/Codegen/CPU/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;

namespace {

/// The attribute `convert-func-to-llvm` reads on a function and on the
/// callee of each call.
constexpr llvm::StringLiteral kBarePointerAttr = "llvm.bareptr";

/// Whether a value of `type` can cross a call as its aligned pointer alone.
bool passesBare(Type type) {
  if (isa<UnrankedMemRefType>(type))
    return false;
  auto memref = dyn_cast<MemRefType>(type);
  return !memref ||
         (memref.hasStaticShape() && memref.getLayout().isIdentity());
}

struct SwitchyardCpuBarePointerCallsPass
    : public switchyard::impl::SwitchyardCpuBarePointerCallsPassBase<
          SwitchyardCpuBarePointerCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Functions referred to other than by a call (the conversion rewrites
    // only calls to match). Unknown uses: none is marked.
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(&module.getBodyRegion());
    if (!uses)
      return;
    llvm::StringSet<> notOnlyCalled;
    for (const SymbolTable::SymbolUse &use : *uses)
      if (!isa<func::CallOp>(use.getUser()))
        notOnlyCalled.insert(use.getSymbolRef().getRootReference());
    for (auto function : module.getOps<func::FuncOp>()) {
      FunctionType type = function.getFunctionType();
      if (function.isPrivate() && !function.isExternal() &&
          !notOnlyCalled.contains(function.getSymName()) &&
          llvm::all_of(type.getInputs(), passesBare) &&
          llvm::all_of(type.getResults(), passesBare))
        function->setAttr(kBarePointerAttr, UnitAttr::get(&getContext()));
    }
  }
};

} // namespace
