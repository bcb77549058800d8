//===- ConvertLmToFunc.cpp - decomposed models to functions ---------------===//
//
// Implements `convert-lm-to-func`: a decomposed `lm.model` becomes a
// func.func that takes the declared parameters as trailing arguments, the
// calling convention of the runtime.
//
//===----------------------------------------------------------------------===//

#include "dialect/Lm/IR/LmOps.h"
#include "lib/Conversion/Passes.h"
#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_CONVERTLMTOFUNCPASS
#include "lib/Conversion/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "convert-lm-to-func"

using namespace mlir;
using namespace mlir::lm;

namespace {
struct ConvertLmToFuncPass
    : public switchyard::impl::ConvertLmToFuncPassBase<ConvertLmToFuncPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<ParamOp> params(module.getOps<ParamOp>());

    // Only the routing and linalg ops of a decomposed model can follow.
    WalkResult leftover = module.walk([&](Operation *op) {
      if (isa<ParamOwnerOpInterface, CrossEntropyOp>(op)) {
        op->emitOpError("must be decomposed before convert-lm-to-func (run "
                        "lm-decompose-layers)");
        return WalkResult::interrupt();
      }
      if (isa<GetParamOp>(op) && !op->getParentOfType<ModelOp>()) {
        op->emitOpError("outside an lm.model has no parameter argument to "
                        "become");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (leftover.wasInterrupted())
      return signalPassFailure();

    OpBuilder builder(&getContext());
    for (ModelOp model : llvm::make_early_inc_range(module.getOps<ModelOp>()))
      convert(model, params, builder);
    for (ParamOp param : params)
      param.erase();
  }

  /// Rewrites one model into a function with parameter arguments.
  void convert(ModelOp model, MutableArrayRef<ParamOp> params,
               OpBuilder &builder) {
    LLVM_DEBUG(llvm::dbgs()
               << "converting lm.model @" << model.getSymName() << ": "
               << model.getNumArguments() << " arguments, then "
               << params.size() << " parameters\n");
    Block &body = model.getBody().front();
    llvm::StringMap<Value> arguments;
    SmallVector<Type> inputs(model.getArgumentTypes());
    for (ParamOp param : params) {
      inputs.push_back(param.getType());
      arguments[param.getSymName()] =
          body.addArgument(param.getType(), param.getLoc());
    }
    model.walk([&](GetParamOp read) {
      read.replaceAllUsesWith(arguments.lookup(read.getName()));
      read.erase();
    });
    auto returnOp = cast<ReturnOp>(body.getTerminator());
    builder.setInsertionPoint(returnOp);
    func::ReturnOp::create(builder, returnOp.getLoc(),
                           returnOp.getOperands());
    returnOp.erase();

    builder.setInsertionPoint(model);
    auto func = func::FuncOp::create(
        builder, model.getLoc(), model.getSymName(),
        builder.getFunctionType(inputs, model.getResultTypes()));
    func.getBody().takeBody(model.getBody());
    // Marks such as lm.decoder stay with the function.
    for (NamedAttribute attr : model->getDiscardableAttrs())
      func->setAttr(attr.getName(), attr.getValue());
    unsigned first = model.getNumArguments();
    for (auto [offset, param] : llvm::enumerate(params))
      func.setArgAttr(first + offset, "lm.param", param.getSymNameAttr());
    // Token-id arguments carry their vocabulary, for the runtime's check:
    // the smallest table they index.
    func.walk([&](moe::EmbedOp embed) {
      auto arg = dyn_cast<BlockArgument>(embed.getTokens());
      int64_t vocab = embed.getTable().getType().getDimSize(0);
      if (!arg || arg.getOwner() != &func.getBody().front() ||
          ShapedType::isDynamic(vocab))
        return;
      auto known = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                      "lm.vocab");
      if (!known || known.getInt() > vocab)
        func.setArgAttr(arg.getArgNumber(), "lm.vocab",
                        builder.getI64IntegerAttr(vocab));
    });
    // The caller's buffers (tokens, memories, parameters) are read-only.
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      func.setArgAttr(i, "bufferization.writable", builder.getBoolAttr(false));
    func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  builder.getUnitAttr());
    model.erase();
  }
};
} // namespace
