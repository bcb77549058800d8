//===- LmOutlineLayers.cpp - one function per distinct block --------------===//
//
// Implements `lm-outline-layers`: every attention and feed-forward block of
// a model becomes a call of a private function holding one block of its
// kind, so that a model of L identical layers is decomposed, differentiated
// and compiled once per kind rather than L times.
//
//===----------------------------------------------------------------------===//

#include "dialect/Lm/IR/LmOps.h"
#include "lib/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_LMOUTLINELAYERSPASS
#include "lib/Conversion/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "lm-outline-layers"

using namespace mlir;
using namespace mlir::lm;

namespace {

/// The blocks that repeat in a model: x [B, T, D] in, x [B, T, D] out.
bool isBlock(Operation *op) {
  return isa<MhaOp, SwitchHeadOp, FfnOp, SigmaMoeOp>(op);
}

/// A block's parameters as suffixes of its layer name ("norm.weight").
SmallVector<std::pair<std::string, RankedTensorType>>
paramSuffixes(ParamOwnerOpInterface layer) {
  SmallVector<ParamDecl> decls;
  layer.getParams(decls, /*numLayers=*/1);
  std::string prefix = (layer.getLayerName() + ".").str();
  SmallVector<std::pair<std::string, RankedTensorType>> suffixes;
  for (const ParamDecl &decl : decls) {
    assert(StringRef(decl.name).starts_with(prefix) &&
           "a layer's parameters carry its name");
    suffixes.emplace_back(decl.name.substr(prefix.size()), decl.type);
  }
  return suffixes;
}

/// What makes two blocks the same function: the op, its attributes without
/// the layer name, its operand and result types, and its parameters
/// (`suffixes`).
std::string blockKey(
    ParamOwnerOpInterface layer,
    ArrayRef<std::pair<std::string, RankedTensorType>> suffixes) {
  Operation *op = layer.getOperation();
  std::string key;
  llvm::raw_string_ostream os(key);
  os << op->getName() << "|";
  for (NamedAttribute attr : op->getAttrs())
    if (attr.getName() != "layer_name")
      os << attr.getName().strref() << "=" << attr.getValue() << ";";
  os << "|";
  llvm::interleaveComma(op->getOperandTypes(), os);
  os << "|";
  llvm::interleaveComma(op->getResultTypes(), os);
  os << "|";
  for (auto &[suffix, type] : suffixes)
    os << suffix << ":" << type << ";";
  return key;
}

struct LmOutlineLayersPass
    : public switchyard::impl::LmOutlineLayersPassBase<LmOutlineLayersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (ModelOp model : llvm::to_vector(module.getOps<ModelOp>()))
      outline(model, symbols);
  }

  void outline(ModelOp model, SymbolTable &symbols) {
    llvm::StringMap<func::FuncOp> functions;
    llvm::StringMap<unsigned> perOp;
    SmallVector<ParamOwnerOpInterface> blocks;
    model.walk([&](ParamOwnerOpInterface layer) {
      if (isBlock(layer))
        blocks.push_back(layer);
    });
    OpBuilder builder(model);
    for (ParamOwnerOpInterface layer : blocks) {
      Operation *op = layer.getOperation();
      auto suffixes = paramSuffixes(layer);
      func::FuncOp &callee = functions[blockKey(layer, suffixes)];
      if (!callee)
        callee = createFunction(model, layer, suffixes, perOp, symbols);

      // The call, with the block's own parameters.
      builder.setInsertionPoint(op);
      SmallVector<Value> operands(op->getOperands());
      for (auto &[suffix, type] : suffixes)
        operands.push_back(GetParamOp::create(
            builder, op->getLoc(), type,
            FlatSymbolRefAttr::get(builder.getStringAttr(
                layer.getLayerName() + "." + suffix))));
      auto call = func::CallOp::create(builder, op->getLoc(), callee, operands);
      op->replaceAllUsesWith(call.getResults());
      op->erase();
    }
    LLVM_DEBUG(llvm::dbgs() << "@" << model.getSymName() << ": "
                            << blocks.size() << " blocks, " << functions.size()
                            << " functions\n");
  }

  /// A private function holding a copy of `layer`, its operands then its
  /// parameters as arguments.
  func::FuncOp
  createFunction(ModelOp model, ParamOwnerOpInterface layer,
                 ArrayRef<std::pair<std::string, RankedTensorType>> suffixes,
                 llvm::StringMap<unsigned> &perOp, SymbolTable &symbols) {
    Operation *op = layer.getOperation();
    OpBuilder builder(model);
    SmallVector<Type> inputs(op->getOperandTypes());
    for (auto &[suffix, type] : suffixes)
      inputs.push_back(type);
    std::string name =
        (model.getSymName() + "__" + op->getName().stripDialect()).str();
    if (unsigned n = perOp[op->getName().getStringRef()]++)
      name += "_" + std::to_string(n);
    auto func = func::FuncOp::create(
        builder, op->getLoc(), name,
        builder.getFunctionType(inputs, op->getResultTypes()));
    func.setPrivate();
    func->setAttr("lm.layer", builder.getUnitAttr());
    // The caller's values stay as they are: a block writing its result
    // into its input would make every caller that keeps the input (the
    // backward pass does) copy it first.
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      func.setArgAttr(i, "bufferization.writable", builder.getBoolAttr(false));
    for (auto [i, suffix] : llvm::enumerate(suffixes))
      func.setArgAttr(op->getNumOperands() + i, "lm.layer_param",
                      builder.getStringAttr(suffix.first));
    // Inserted before the model: symbols.insert keeps names unique.
    symbols.insert(func, Block::iterator(model));

    Block *body = func.addEntryBlock();
    IRMapping mapping;
    mapping.map(op->getOperands(),
                body->getArguments().take_front(op->getNumOperands()));
    builder.setInsertionPointToStart(body);
    Operation *copy = builder.clone(*op, mapping);
    func::ReturnOp::create(builder, op->getLoc(), copy->getResults());
    return func;
  }
};

} // namespace
