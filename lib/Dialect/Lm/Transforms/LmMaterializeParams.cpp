//===- LmMaterializeParams.cpp - declare the parameters of layers ---------===//
//
// Implements `lm-materialize-params`: every parameter owned by a layer of an
// `lm.model` becomes an `lm.param` declaration in the enclosing module.
//
//===----------------------------------------------------------------------===//

#include "dialect/Lm/IR/LmOps.h"
#include "dialect/Lm/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Debug.h"

namespace mlir::lm {
#define GEN_PASS_DEF_LMMATERIALIZEPARAMSPASS
#include "dialect/Lm/Transforms/Passes.h.inc"
} // namespace mlir::lm

#define DEBUG_TYPE "lm-materialize-params"

using namespace mlir;
using namespace mlir::lm;

namespace {
/// Declares, before each model, the parameters its layers own.
struct LmMaterializeParamsPass
    : public lm::impl::LmMaterializeParamsPassBase<LmMaterializeParamsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (numLayers < 0) {
      module.emitError() << "lm-materialize-params: num-layers must be 0 "
                            "(count the attention blocks) or positive, found "
                         << numLayers;
      return signalPassFailure();
    }
    SymbolTable symbols(module);
    for (ModelOp model :
         llvm::make_early_inc_range(module.getOps<ModelOp>())) {
      if (failed(declareParams(model, symbols)))
        return signalPassFailure();
    }
  }

  /// Declares the parameters of one model's layers, checking any existing
  /// declaration of the same name.
  LogicalResult declareParams(ModelOp model, SymbolTable &symbols) {
    int64_t depth = numLayers > 0 ? int64_t(numLayers) : model.getNumLayers();
    LLVM_DEBUG(llvm::dbgs()
               << "@" << model.getSymName()
               << ": scaled initialisers for depth L = " << depth << "\n");
    OpBuilder builder(model);
    WalkResult walk = model.walk([&](ParamOwnerOpInterface layer) {
      SmallVector<ParamDecl> params;
      layer.getParams(params, depth);
      for (ParamDecl &param : params) {
        Operation *existing = symbols.lookup(param.name);
        StringAttr alias = param.alias.empty()
                               ? StringAttr()
                               : builder.getStringAttr(param.alias);
        if (!existing) {
          LLVM_DEBUG(llvm::dbgs() << "  declaring " << param.name << " : "
                                  << param.type << "\n");
          auto decl = ParamOp::create(builder, layer.getLoc(), param.name,
                                      param.type, param.init, alias);
          symbols.insert(decl, builder.getInsertionPoint());
          continue;
        }
        auto declared = dyn_cast<ParamOp>(existing);
        if (declared && declared.getType() == param.type) {
          LLVM_DEBUG(llvm::dbgs()
                     << "  keeping the declaration of " << param.name << "\n");
          // A declaration written by hand keeps its own alias, or gets the
          // layer's.
          if (!declared.getAliasAttr() && alias)
            declared.setAliasAttr(alias);
          continue;
        }
        InFlightDiagnostic diag = layer->emitOpError()
                                  << "owns parameter '" << param.name
                                  << "' of type " << param.type << ", but ";
        if (declared)
          diag << "it is declared with type " << declared.getType();
        else
          diag << "that name belongs to a '" << existing->getName() << "'";
        diag.attachNote(existing->getLoc()) << "declared here";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }
};
} // namespace
