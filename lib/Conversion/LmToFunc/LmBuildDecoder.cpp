//===- LmBuildDecoder.cpp - a model's decoding step over key/value caches -===//
//
// Implements `lm-build-decoder`: next to each lm.model that a key/value
// cache can serve, a second model `<model>_decode` that runs one token at a
// given position against per-block caches of the keys and values of the
// positions before it, and returns its logits and the caches with its own
// keys and values written in. Generation then costs one token's work per
// step instead of a forward pass over the whole window.
//
//===----------------------------------------------------------------------===//

#include "dialect/Lm/IR/LmOps.h"
#include "lib/Conversion/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_LMBUILDDECODERPASS
#include "lib/Conversion/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "lm-build-decoder"

using namespace mlir;
using namespace mlir::lm;

namespace {

/// `type` [B, T, ...] as one token's [1, 1, ...].
Type oneToken(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() < 2)
    return type;
  SmallVector<int64_t> shape(tensor.getShape());
  shape[0] = shape[1] = 1;
  return tensor.clone(shape);
}

/// Why `model` has no decoding step, or an empty string if it can have
/// one: token ids [?, T] with a static T in, logits out, nothing else; only
/// layer ops; attention without memory and without XL positions (whose
/// relative keys are per segment: an XL model carries its memory instead).
std::string whyNoDecoder(ModelOp model) {
  ArrayRef<Type> inputs = model.getArgumentTypes();
  auto tokens = inputs.size() == 1 ? dyn_cast<RankedTensorType>(inputs[0])
                                   : RankedTensorType();
  if (!tokens || tokens.getRank() != 2 ||
      !tokens.getElementType().isSignlessInteger() || tokens.isDynamicDim(1))
    return "it takes more than token ids [?, T] with a static T";
  if (model.getNumResults() != 1)
    return "it returns more than its logits";
  for (Operation &op : model.getBody().front()) {
    if (isa<ReturnOp>(op))
      continue;
    if (!isa<ParamOwnerOpInterface>(op))
      return ("it holds an op that is not a layer: " +
              op.getName().getStringRef())
          .str();
    auto usesXl = [](auto attention) {
      return attention.getMemory() || attention.getKeys() ||
             attention.getPos() == PosEncoding::xl;
    };
    if ((isa<MhaOp>(op) && usesXl(cast<MhaOp>(op))) ||
        (isa<SwitchHeadOp>(op) && usesXl(cast<SwitchHeadOp>(op))))
      return "its attention has XL positions, a memory or a cache already";
  }
  return "";
}

/// The attention block `op` as a decoding step over `keys` and `values` at
/// `position`: the same op with its cache operands and results.
template <typename AttentionOp>
Operation *withCache(OpBuilder &builder, AttentionOp op, Value keys,
                     Value values, Value position) {
  typename AttentionOp::Properties properties = op.getProperties();
  // input, memory, keys, values, position; result, next keys, next values.
  properties.operandSegmentSizes = {1, 0, 1, 1, 1};
  properties.resultSegmentSizes = {1, 1, 1};
  Type cache = keys.getType();
  return AttentionOp::create(
      builder, op.getLoc(), TypeRange{op.getInput().getType(), cache, cache},
      ValueRange{op.getInput(), keys, values, position}, properties,
      llvm::to_vector(op->getDiscardableAttrs()));
}

struct LmBuildDecoderPass
    : public switchyard::impl::LmBuildDecoderPassBase<LmBuildDecoderPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (ModelOp model : llvm::to_vector(module.getOps<ModelOp>())) {
      if (model->hasAttr(kDecoderAttr))
        continue;
      std::string name = (model.getSymName() + "_decode").str();
      if (symbols.lookup(name))
        continue;
      if (std::string why = whyNoDecoder(model); !why.empty()) {
        LLVM_DEBUG(llvm::dbgs() << "@" << model.getSymName()
                                << ": no decoding step, " << why << "\n");
        continue;
      }
      build(model, name, symbols);
    }
  }

  void build(ModelOp model, StringRef name, SymbolTable &symbols) {
    MLIRContext *ctx = &getContext();
    OpBuilder builder(model);
    builder.setInsertionPointAfter(model);
    auto decoder = cast<ModelOp>(builder.clone(*model));
    decoder.setSymName(name);
    symbols.insert(decoder);
    decoder->setAttr(kDecoderAttr, model.getSymNameAttr());
    decoder->removeAttr(decoder.getArgAttrsAttrName());
    decoder->removeAttr(decoder.getResAttrsAttrName());

    Block &body = decoder.getBody().front();
    Location loc = decoder.getLoc();
    BlockArgument tokens = body.getArgument(0);
    int64_t capacity = cast<RankedTensorType>(tokens.getType()).getDimSize(1);
    tokens.setType(oneToken(tokens.getType()));
    Value position = body.addArgument(
        RankedTensorType::get({}, IntegerType::get(ctx, 32)), loc);

    SmallVector<Value> caches;
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (isa<ReturnOp>(op))
        continue;
      if (!isa<MhaOp, SwitchHeadOp>(op)) {
        for (OpResult result : op.getResults())
          result.setType(oneToken(result.getType()));
        continue;
      }
      // A cache [1, T, H, F] of keys and one of values per attention block.
      auto attention = cast<ParamOwnerOpInterface>(op);
      int64_t heads = 0, width = 0;
      if (auto mha = dyn_cast<MhaOp>(op)) {
        heads = mha.getHeads();
        width = mha.getHeadDim();
      } else {
        auto switchHead = cast<SwitchHeadOp>(op);
        heads = switchHead.getHeads();
        width = switchHead.getHeadDim();
      }
      auto input = cast<RankedTensorType>(op.getOperand(0).getType());
      auto cacheType = RankedTensorType::get({1, capacity, heads, width},
                                             input.getElementType());
      Value keys = body.addArgument(cacheType, attention.getLoc());
      Value values = body.addArgument(cacheType, attention.getLoc());
      builder.setInsertionPoint(&op);
      Operation *step =
          isa<MhaOp>(op)
              ? withCache(builder, cast<MhaOp>(op), keys, values, position)
              : withCache(builder, cast<SwitchHeadOp>(op), keys, values,
                          position);
      op.getResult(0).replaceAllUsesWith(step->getResult(0));
      caches.append({step->getResult(1), step->getResult(2)});
      op.erase();
    }

    auto returnOp = cast<ReturnOp>(body.getTerminator());
    returnOp->insertOperands(returnOp->getNumOperands(), caches);
    decoder.setFunctionTypeAttr(TypeAttr::get(FunctionType::get(
        ctx, body.getArgumentTypes(), returnOp->getOperandTypes())));
    LLVM_DEBUG(llvm::dbgs() << "@" << name << ": " << caches.size() / 2
                            << " attention blocks with a cache of " << capacity
                            << " positions\n");
  }
};

} // namespace
