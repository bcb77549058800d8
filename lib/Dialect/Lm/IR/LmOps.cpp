//===- LmOps.cpp - lm dialect operations ----------------------------------===//
//
// The model container (a FunctionOpInterface op), parameter declarations,
// and the layer ops: their verifiers and the parameters each one owns.
//
//===----------------------------------------------------------------------===//

#include "dialect/Lm/IR/LmOps.h"
#include "dialect/Support/ShapeChecks.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>

using namespace mlir;
using namespace mlir::lm;
using switchyard::DimRef;
using switchyard::elementTypeOf;
using switchyard::verifySameDim;

#include "dialect/Lm/IR/LmInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Layer names
//===----------------------------------------------------------------------===//

LogicalResult mlir::lm::detail::verifyLayer(Operation *op, StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  for (StringRef part : parts) {
    if (part.empty() || !llvm::all_of(part, [](char c) {
          return llvm::isAlnum(c) || c == '_';
        }))
      return op->emitOpError()
             << "expected a layer name made of dot-separated identifiers "
                "(like \"layers.0.att\"), found \""
             << name << "\"";
  }
  for (NamedAttribute attr : op->getDiscardableAttrs()) {
    if (attr.getName().strref().contains('.'))
      continue;
    SmallVector<StringRef> known;
    for (StringAttr inherent :
         op->getName().getRegisteredInfo()->getAttributeNames())
      if (!llvm::is_contained(
              {"layer_name", "operandSegmentSizes", "resultSegmentSizes"},
              inherent.strref()))
        known.push_back(inherent.strref());
    llvm::sort(known);
    InFlightDiagnostic diag = op->emitOpError()
                              << "has no attribute '" << attr.getName().strref()
                              << "' (it takes: ";
    llvm::interleaveComma(known, diag);
    return diag << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Parameter collection
//===----------------------------------------------------------------------===//

namespace {
/// Appends the parameters of one layer, all of the layer's element type.
class ParamCollector {
public:
  ParamCollector(Operation *op, Type elementType,
                 SmallVectorImpl<ParamDecl> &params)
      : op(op), elementType(elementType), params(params) {}

  /// Adds `<layer>.<suffix>` of the given shape; `official` is the suffix
  /// the official module's state dict uses for the same tensor, if any.
  void add(StringRef suffix, ArrayRef<int64_t> shape, InitKind kind,
           double std = 0.0, StringRef official = {}) {
    StringRef layer = cast<ParamOwnerOpInterface>(op).getLayerName();
    params.push_back(
        {(layer + "." + suffix).str(),
         RankedTensorType::get(shape, elementType),
         InitAttr::get(op->getContext(), kind, std),
         official.empty() ? std::string() : (layer + "." + official).str()});
  }

  /// Adds the pre-norm parameters of a residual block.
  void addNorm(StringRef prefix, int64_t width) {
    add((prefix + ".weight").str(), {width}, InitKind::ones);
    add((prefix + ".bias").str(), {width}, InitKind::zeros);
  }

private:
  Operation *op;
  Type elementType;
  SmallVectorImpl<ParamDecl> &params;
};
} // namespace

static int64_t widthOf(Value hidden) {
  return cast<RankedTensorType>(hidden.getType()).getShape().back();
}

/// The residual-branch scale s = √(2/L) of the pre-LN initialisation.
static double depthScale(int64_t numLayers) {
  return std::sqrt(2.0 / static_cast<double>(std::max<int64_t>(numLayers, 1)));
}

/// The widest model the layers accept: with the attribute limits of
/// LmOps.td it keeps every parameter and count the compiler forms within
/// 64 bits.
static constexpr int64_t kMaxModelWidth = 65536;
static constexpr int64_t kMaxTime = int64_t(1) << 20;

/// Parameters must have static shapes, so the model width must be known,
/// and within kMaxModelWidth.
static LogicalResult verifyStaticWidth(Operation *op, StringRef name,
                                       Value hidden) {
  auto type = cast<RankedTensorType>(hidden.getType());
  int64_t width = type.getShape().back();
  if (ShapedType::isDynamic(width))
    return op->emitOpError() << "expected a static model width (" << name
                             << " dim " << type.getRank() - 1
                             << "): parameter shapes depend on it";
  if (width > kMaxModelWidth)
    return op->emitOpError() << "expected a model width of at most "
                             << kMaxModelWidth << " (" << name << " dim "
                             << type.getRank() - 1 << "), found " << width;
  if (type.getRank() == 3 && type.getDimSize(1) > kMaxTime)
    return op->emitOpError() << "expected at most " << kMaxTime
                             << " positions (" << name << " dim 1), found "
                             << type.getDimSize(1);
  return success();
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  auto type = cast<RankedTensorType>(getType());
  int64_t elements = 1;
  for (int64_t size : type.getShape())
    if (size > switchyard::kMaxDimSize ||
        (elements *= size) > switchyard::kMaxElements)
      return emitOpError() << "expected a parameter of at most 2^36 elements "
                              "and dimensions up to "
                           << switchyard::kMaxDimSize << ", found " << type;
  return success();
}

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

void ModelOp::build(OpBuilder &builder, OperationState &state, StringRef name,
                    FunctionType type) {
  state.addAttribute(SymbolTable::getSymbolAttrName(),
                     builder.getStringAttr(name));
  state.addAttribute(getFunctionTypeAttrName(state.name), TypeAttr::get(type));
  state.addRegion();
}

ParseResult ModelOp::parse(OpAsmParser &parser, OperationState &result) {
  auto buildFuncType =
      [](Builder &builder, ArrayRef<Type> argTypes, ArrayRef<Type> results,
         function_interface_impl::VariadicFlag,
         std::string &) { return builder.getFunctionType(argTypes, results); };
  return function_interface_impl::parseFunctionOp(
      parser, result, /*allowVariadic=*/false,
      getFunctionTypeAttrName(result.name), buildFuncType,
      getArgAttrsAttrName(result.name), getResAttrsAttrName(result.name));
}

void ModelOp::print(OpAsmPrinter &printer) {
  function_interface_impl::printFunctionOp(
      printer, *this, /*isVariadic=*/false, getFunctionTypeAttrName(),
      getArgAttrsAttrName(), getResAttrsAttrName());
}

int64_t ModelOp::getNumLayers() {
  int64_t layers = 0;
  getBody().walk([&](Operation *op) {
    if (isa<MhaOp, SwitchHeadOp>(op))
      ++layers;
  });
  return std::max<int64_t>(layers, 1);
}

LogicalResult ModelOp::verifyRegions() {
  ArrayRef<Type> inputs = getArgumentTypes(), results = getResultTypes();
  auto first = inputs.empty() ? RankedTensorType()
                              : dyn_cast<RankedTensorType>(inputs.front());
  bool tokens = first && first.getRank() == 2 &&
                first.getElementType().isSignlessInteger();
  bool hidden = first && first.getRank() == 3 &&
                isa<FloatType>(first.getElementType());
  if (!tokens && !hidden)
    return emitOpError("expected the first argument to be the token ids, a "
                       "2-D tensor of integers [batch, time], or hidden "
                       "states, a 3-D float tensor [batch, time, width]");
  auto logits = results.empty() ? RankedTensorType()
                                : dyn_cast<RankedTensorType>(results.front());
  if (!logits || logits.getRank() != 3 ||
      !isa<FloatType>(logits.getElementType()))
    return emitOpError("expected the first result to be the logits or hidden "
                       "states, a 3-D float tensor [batch, time, vocab or "
                       "width]");

  // Layer names prefix parameter names, so two layers may not share one.
  llvm::StringMap<Operation *> owners;
  WalkResult walk = getBody().walk([&](ParamOwnerOpInterface layer) {
    auto [it, inserted] =
        owners.try_emplace(layer.getLayerName(), layer.getOperation());
    if (inserted)
      return WalkResult::advance();
    InFlightDiagnostic diag = layer->emitOpError()
                              << "reuses the layer name \""
                              << layer.getLayerName()
                              << "\"; layer names must be unique in a model";
    diag.attachNote(it->second->getLoc()) << "first used here";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

//===----------------------------------------------------------------------===//
// ReturnOp
//===----------------------------------------------------------------------===//

LogicalResult ReturnOp::verify() {
  auto model = (*this)->getParentOfType<ModelOp>();
  ArrayRef<Type> expected = model.getResultTypes();
  if (getNumOperands() != expected.size())
    return emitOpError() << "expected " << expected.size()
                         << " operands (the model's results), found "
                         << getNumOperands();
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip(getOperandTypes(), expected))) {
    auto [found, want] = pair;
    if (found != want)
      return emitOpError() << "expected operand #" << index << " of type "
                           << want << " (model result type), found " << found;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// GetParamOp
//===----------------------------------------------------------------------===//

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param =
      symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, getNameAttr());
  if (!param)
    return emitOpError() << "expected " << getNameAttr()
                         << " to name an lm.param declaration";
  if (param.getType() != getResult().getType())
    return emitOpError() << "expected result type " << param.getType()
                         << " (the declared type of " << getNameAttr()
                         << "), found " << getResult().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// EmbedOp
//===----------------------------------------------------------------------===//

LogicalResult EmbedOp::verify() {
  if (failed(verifyStaticWidth(*this, "result", getResult())))
    return failure();
  for (unsigned dim : {0u, 1u})
    if (failed(verifySameDim(*this, dim ? "the time steps" : "the batch",
                             {"tokens", getTokens(), dim},
                             {"result", getResult(), dim})))
      return failure();
  return success();
}

void EmbedOp::getParams(SmallVectorImpl<ParamDecl> &params, int64_t) {
  int64_t width = widthOf(getResult());
  ParamCollector(*this, elementTypeOf(getResult()), params)
      .add("weight", {static_cast<int64_t>(getVocab()), width},
           InitKind::normal, 1.0 / std::sqrt(double(width)));
}

//===----------------------------------------------------------------------===//
// LayerNormOp
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::verify() {
  return verifyStaticWidth(*this, "input", getInput());
}

void LayerNormOp::getParams(SmallVectorImpl<ParamDecl> &params, int64_t) {
  ParamCollector collector(*this, elementTypeOf(getInput()), params);
  collector.add("weight", {widthOf(getInput())}, InitKind::ones);
  collector.add("bias", {widthOf(getInput())}, InitKind::zeros);
}

//===----------------------------------------------------------------------===//
// Attention blocks
//===----------------------------------------------------------------------===//

/// A decoding step's key/value cache: all of keys, values and position or
/// none, the next caches exactly with them and of their type, [batch,
/// capacity >= time, heads, head_dim] in the input's element type, and
/// positions that a cache can hold (rope or none, no memory).
template <typename AttentionOp>
static LogicalResult verifyCache(AttentionOp op) {
  Value keys = op.getKeys(), values = op.getValues();
  unsigned present = bool(keys) + bool(values) + bool(op.getPosition());
  if (present == 0 && !op.getNextKeys() && !op.getNextValues())
    return success();
  if (present != 3 || !op.getNextKeys() || !op.getNextValues())
    return op.emitOpError("expected a cache's keys, values and position, and "
                          "the next keys and values, all together");
  if (op.getPos() == PosEncoding::xl || op.getMemory())
    return op.emitOpError("expected pos = #lm.pos<rope> or #lm.pos<none> "
                          "and no memory with a key/value cache (XL blocks "
                          "carry their memory instead)");
  Type type = keys.getType();
  for (auto [name, other] : {std::pair<StringRef, Value>{"values", values},
                             {"next keys", op.getNextKeys()},
                             {"next values", op.getNextValues()}})
    if (other.getType() != type)
      return op.emitOpError()
             << "expected the " << name << " of type " << type
             << " (that of the keys), found " << other.getType();
  auto input = cast<RankedTensorType>(op.getInput().getType());
  if (elementTypeOf(keys) != input.getElementType())
    return op.emitOpError()
           << "expected cache element type " << input.getElementType()
           << " (that of input), found " << elementTypeOf(keys);
  int64_t heads = op.getHeads(), width = op.getHeadDim();
  if (failed(switchyard::verifyShape(
          op, "keys", type,
          {input.getDimSize(0), ShapedType::kDynamic, heads, width},
          "[input dim 0, capacity, heads, head_dim]")))
    return failure();
  int64_t capacity = cast<RankedTensorType>(type).getDimSize(1);
  if (ShapedType::isDynamic(capacity) || input.isDynamicDim(1) ||
      capacity < input.getDimSize(1))
    return op.emitOpError()
           << "expected a static cache capacity (keys dim 1) of at least the "
              "static time steps of the input, found "
           << switchyard::formatShape({capacity}) << " for " << input;
  return success();
}

/// Rules shared by the dense and SwitchHead attention blocks.
template <typename AttentionOp>
static LogicalResult verifyAttention(AttentionOp op) {
  if (failed(verifyStaticWidth(op, "input", op.getInput())))
    return failure();
  PosEncoding pos = op.getPos();
  if (pos == PosEncoding::rope && op.getHeadDim() < 4)
    return op.emitOpError()
           << "expected head_dim of at least 4 with rope (half the channels "
              "rotate, in pairs), found "
           << op.getHeadDim();
  int64_t width = cast<RankedTensorType>(op.getInput().getType()).getDimSize(2);
  if (pos == PosEncoding::xl && width % 2 != 0)
    return op.emitOpError() << "expected an even model width with xl "
                               "positions (sinusoids come in sin/cos "
                               "pairs), found "
                            << width;
  if (failed(verifyCache(op)))
    return failure();
  Value memory = op.getMemory();
  if (!memory)
    return success();
  if (pos != PosEncoding::xl)
    return op.emitOpError()
           << "expected pos = #lm.pos<xl> for a memory operand, found "
              "#lm.pos<"
           << stringifyPosEncoding(pos) << ">";
  if (failed(verifySameDim(op, "the batch", {"memory", memory, 0},
                           {"input", op.getInput(), 0})) ||
      failed(verifySameDim(op, "the model width", {"memory", memory, 2},
                           {"input", op.getInput(), 2})))
    return failure();
  if (elementTypeOf(memory) != elementTypeOf(op.getInput()))
    return op.emitOpError()
           << "expected memory element type " << elementTypeOf(op.getInput())
           << " (that of input), found " << elementTypeOf(memory);
  return success();
}

LogicalResult MhaOp::verify() { return verifyAttention(*this); }

void MhaOp::getParams(SmallVectorImpl<ParamDecl> &params, int64_t numLayers) {
  int64_t width = widthOf(getInput());
  int64_t inner = static_cast<int64_t>(getHeads() * getHeadDim());
  double s = depthScale(numLayers);
  double inStd = s / std::sqrt(double(width));
  ParamCollector collector(*this, elementTypeOf(getInput()), params);
  collector.addNorm("norm", width);
  for (StringRef proj : {"q", "k", "v"})
    collector.add(proj, {inner, width}, InitKind::normal, inStd);
  collector.add("o", {width, inner}, InitKind::normal,
                s / std::sqrt(double(inner)));
  if (getPos() == PosEncoding::xl)
    collector.add("pos", {inner, width}, InitKind::normal, inStd);
}

LogicalResult SwitchHeadOp::verify() {
  if (getK() > getExperts())
    return emitOpError() << "expected k (" << getK()
                         << ") to be at most experts (" << getExperts() << ")";
  return verifyAttention(*this);
}

void SwitchHeadOp::getParams(SmallVectorImpl<ParamDecl> &params,
                             int64_t numLayers) {
  int64_t width = widthOf(getInput());
  int64_t headDim = static_cast<int64_t>(getHeadDim());
  int64_t inner = static_cast<int64_t>(getHeads()) * headDim;
  int64_t routes = static_cast<int64_t>(getHeads() * getExperts());
  double s = depthScale(numLayers);
  double inStd = s / std::sqrt(double(width));
  // The official SwitchHeadRope/SwitchHeadXL names. With one expert the
  // official module drops the value gate and stores v and o as dense
  // matrices, so only q, k and pos_to_pk correspond then.
  auto official = [&](StringRef name) {
    return getExperts() > 1 ? name : StringRef();
  };
  ParamCollector collector(*this, elementTypeOf(getInput()), params);
  collector.addNorm("norm", width);
  collector.add("q", {inner, width}, InitKind::normal, inStd, "q.weight");
  collector.add("k", {inner, width}, InitKind::normal, inStd, "k.weight");
  collector.add("v", {routes, width, headDim}, InitKind::normal, inStd,
                official("v"));
  collector.add("o", {routes, headDim, width}, InitKind::normal,
                s / std::sqrt(double(inner)), official("o"));
  collector.add("sel_v", {routes, width}, InitKind::row_normal, inStd,
                official("sel_v"));
  collector.add("sel_o", {routes, width}, InitKind::row_normal, inStd,
                official("sel_o"));
  if (getPos() == PosEncoding::xl)
    collector.add("pos", {inner, width}, InitKind::normal, inStd,
                  "pos_to_pk");
}

//===----------------------------------------------------------------------===//
// Feed-forward blocks
//===----------------------------------------------------------------------===//

LogicalResult FfnOp::verify() {
  return verifyStaticWidth(*this, "input", getInput());
}

void FfnOp::getParams(SmallVectorImpl<ParamDecl> &params, int64_t numLayers) {
  int64_t width = widthOf(getInput());
  int64_t hidden = static_cast<int64_t>(getDFf());
  double s = depthScale(numLayers);
  ParamCollector collector(*this, elementTypeOf(getInput()), params);
  collector.addNorm("norm", width);
  collector.add("up", {hidden, width}, InitKind::normal,
                s / std::sqrt(double(width)));
  collector.add("down", {width, hidden}, InitKind::normal,
                s / std::sqrt(double(hidden)));
}

LogicalResult SigmaMoeOp::verify() {
  if (getK() > getExperts())
    return emitOpError() << "expected k (" << getK()
                         << ") to be at most experts (" << getExperts() << ")";
  return verifyStaticWidth(*this, "input", getInput());
}

void SigmaMoeOp::getParams(SmallVectorImpl<ParamDecl> &params,
                           int64_t numLayers) {
  int64_t width = widthOf(getInput());
  int64_t experts = static_cast<int64_t>(getExperts());
  int64_t hidden = static_cast<int64_t>(getExpertDim());
  double s = depthScale(numLayers);
  double inStd = s / std::sqrt(double(width));
  ParamCollector collector(*this, elementTypeOf(getInput()), params);
  collector.addNorm("norm", width);
  // The official σ-MoE (RobertCsordas/moe_layer) names.
  collector.add("sel", {experts, width}, InitKind::row_normal, inStd,
                "expert_sel");
  collector.add("up", {experts, width, hidden}, InitKind::normal, inStd,
                "keys");
  collector.add("down", {experts, hidden, width}, InitKind::normal,
                s / std::sqrt(double(experts * hidden)), "values");
}

//===----------------------------------------------------------------------===//
// OutputOp
//===----------------------------------------------------------------------===//

LogicalResult OutputOp::verify() {
  if (failed(verifyStaticWidth(*this, "input", getInput())))
    return failure();
  for (unsigned dim : {0u, 1u})
    if (failed(verifySameDim(*this, dim ? "the time steps" : "the batch",
                             {"input", getInput(), dim},
                             {"result", getResult(), dim})))
      return failure();
  int64_t vocab = getResult().getType().getShape().back();
  if (!ShapedType::isDynamic(vocab) &&
      vocab != static_cast<int64_t>(getVocab()))
    return emitOpError() << "expected result dim 2 to be the vocabulary size "
                         << getVocab() << ", found " << vocab;
  return success();
}

void OutputOp::getParams(SmallVectorImpl<ParamDecl> &params, int64_t) {
  int64_t width = widthOf(getInput());
  ParamCollector(*this, elementTypeOf(getInput()), params)
      .add("weight", {static_cast<int64_t>(getVocab()), width},
           InitKind::normal, 1.0 / std::sqrt(double(width)));
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::verify() {
  for (unsigned dim : {0u, 1u})
    if (failed(verifySameDim(*this, dim ? "the time steps" : "the batch",
                             {"logits", getLogits(), dim},
                             {"targets", getTargets(), dim})))
      return failure();
  return success();
}

#define GET_OP_CLASSES
#include "dialect/Lm/IR/LmOps.cpp.inc"
