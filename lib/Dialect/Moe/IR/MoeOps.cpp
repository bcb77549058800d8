//===- MoeOps.cpp - moe dialect operations --------------------------------===//
//
// Verifiers of the `moe` operations. ODS already checked element types and
// ranks; these check that operands agree with each other: widths, token
// counts, head counts, and that k does not exceed the experts available.
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/IR/MoeOps.h"
#include "dialect/Support/ShapeChecks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::moe;
using switchyard::DimRef;
using switchyard::verifySameDim;

static int64_t dimOf(Value value, unsigned index) {
  return cast<ShapedType>(value.getType()).getDimSize(index);
}

/// Checks that `k` routes per token fit in the experts available.
/// `kWhat` names where k comes from, `experts` is the number of experts to
/// choose from (dynamic: nothing to check).
static LogicalResult verifyKFits(Operation *op, StringRef kWhat, int64_t k,
                                 int64_t experts, StringRef expertsWhat) {
  if (ShapedType::isDynamic(k) || ShapedType::isDynamic(experts) ||
      k <= experts)
    return success();
  return op->emitOpError() << "expected k (" << kWhat << ", " << k
                           << ") to be at most the number of experts ("
                           << expertsWhat << ", " << experts << ")";
}

/// Splits the leading dimension of a stacked per-head expert weight
/// [H·E, ...] into E, checking divisibility. Returns the experts per head, or
/// kDynamic when either size is unknown.
static FailureOr<int64_t> expertsPerHead(Operation *op, Value weight,
                                         int64_t heads) {
  int64_t stacked = dimOf(weight, 0);
  if (ShapedType::isDynamic(stacked) || ShapedType::isDynamic(heads))
    return ShapedType::kDynamic;
  if (heads < 1)
    return op->emitOpError() << "expected at least one head (gates dim 1), "
                                "found "
                             << heads;
  if (stacked % heads != 0)
    return op->emitOpError()
           << "expected weight dim 0 (" << stacked
           << " expert matrices, heads × experts) to be a multiple of the "
              "head count (gates dim 1, "
           << heads << ")";
  return stacked / heads;
}

//===----------------------------------------------------------------------===//
// GateOp
//===----------------------------------------------------------------------===//

LogicalResult GateOp::verify() {
  Value x = getInput(), w = getWeight(), s = getResult();
  if (failed(verifySameDim(*this, "the model width", {"input", x, 1},
                           {"weight", w, 1})) ||
      failed(verifySameDim(*this, "the token count", {"input", x, 0},
                           {"result", s, 0})))
    return failure();

  // The result is [N, G] or [N, H, E]; its trailing dims must cover the
  // weight rows exactly.
  ArrayRef<int64_t> shape = getResult().getType().getShape();
  int64_t routed = 1;
  for (int64_t dim : shape.drop_front()) {
    if (ShapedType::isDynamic(dim))
      return emitOpError() << "expected static expert dimensions (result "
                              "dims after the first), found "
                           << getResult().getType();
    routed *= dim;
  }
  int64_t rows = dimOf(w, 0);
  if (ShapedType::isDynamic(rows) || rows == routed)
    return success();
  return emitOpError() << "expected weight dim 0 (" << rows
                       << " router rows) to equal the experts scored per "
                          "token (result dims after the first: "
                       << routed << ")";
}

//===----------------------------------------------------------------------===//
// TopKOp
//===----------------------------------------------------------------------===//

LogicalResult TopKOp::verify() {
  ArrayRef<int64_t> scores = getScores().getType().getShape();
  if (failed(verifyKFits(*this, "the k attribute", getK(), scores.back(),
                         "the last dimension of scores")))
    return failure();
  if (Value mask = getMask())
    if (failed(switchyard::verifyShape(*this, "mask", mask.getType(), scores,
                                       "the shape of scores")))
      return failure();
  SmallVector<int64_t> expected(scores);
  expected.back() = getK();
  return switchyard::verifyShape(
      *this, "values", getValues().getType(), expected,
      "the shape of scores with the last dimension replaced by k");
}

//===----------------------------------------------------------------------===//
// ExpertProjOp
//===----------------------------------------------------------------------===//

/// The shape rules of moe.expert_proj, shared with moe.fused_expert_proj and
/// the gradient ops, where `y` (named `yName`) is the result or its adjoint.
template <typename OpTy>
static LogicalResult verifyExpertProj(OpTy op, Value y,
                                      StringRef yName = "result") {
  Value x = op.getInput(), w = op.getWeight(), g = op.getGates();
  if (failed(verifySameDim(op, "the token count", {"input", x, 0},
                           {"gates", g, 0})) ||
      failed(verifySameDim(op, "the token count", {"input", x, 0},
                           {yName, y, 0})) ||
      failed(verifySameDim(op, "the model width", {"input", x, 1},
                           {"weight", w, 1})) ||
      failed(verifySameDim(op, "the head count", {"gates", g, 1},
                           {yName, y, 1})) ||
      failed(
          verifySameDim(op, "the head width", {"weight", w, 2}, {yName, y, 2})))
    return failure();
  FailureOr<int64_t> experts = expertsPerHead(op, w, dimOf(g, 1));
  if (failed(experts))
    return failure();
  return verifyKFits(op, "gates dim 2", dimOf(g, 2), *experts,
                     "weight dim 0 / heads");
}

LogicalResult ExpertProjOp::verify() {
  return verifyExpertProj(*this, getResult());
}

//===----------------------------------------------------------------------===//
// ExpertMergeOp
//===----------------------------------------------------------------------===//

/// The shape rules of moe.expert_merge, shared with moe.fused_expert_merge
/// and the gradient ops, where `y` (named `yName`) is the result or its
/// adjoint.
template <typename OpTy>
static LogicalResult verifyExpertMerge(OpTy op, Value y,
                                       StringRef yName = "result") {
  Value o = op.getHeads(), w = op.getWeight(), g = op.getGates();
  if (failed(verifySameDim(op, "the token count", {"heads", o, 0},
                           {"gates", g, 0})) ||
      failed(verifySameDim(op, "the token count", {"heads", o, 0},
                           {yName, y, 0})) ||
      failed(verifySameDim(op, "the head count", {"heads", o, 1},
                           {"gates", g, 1})) ||
      failed(verifySameDim(op, "the head width", {"heads", o, 2},
                           {"weight", w, 1})) ||
      failed(verifySameDim(op, "the model width", {"weight", w, 2},
                           {yName, y, 1})))
    return failure();
  FailureOr<int64_t> experts = expertsPerHead(op, w, dimOf(g, 1));
  if (failed(experts))
    return failure();
  return verifyKFits(op, "gates dim 2", dimOf(g, 2), *experts,
                     "weight dim 0 / heads");
}

LogicalResult ExpertMergeOp::verify() {
  return verifyExpertMerge(*this, getResult());
}

LogicalResult ExpertProjGradOp::verify() {
  return verifyExpertProj(*this, getResultGrad(), "result_grad");
}

LogicalResult ExpertMergeGradOp::verify() {
  return verifyExpertMerge(*this, getResultGrad(), "result_grad");
}

//===----------------------------------------------------------------------===//
// ExpertMlpOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertMlpOp::verify() {
  Value x = getInput(), up = getUp(), down = getDown(), g = getGates();
  if (failed(verifySameDim(*this, "the token count", {"input", x, 0},
                           {"gates", g, 0})) ||
      failed(verifySameDim(*this, "the expert count", {"up", up, 0},
                           {"down", down, 0})) ||
      failed(verifySameDim(*this, "the model width", {"input", x, 1},
                           {"up", up, 1})) ||
      failed(verifySameDim(*this, "the expert width", {"up", up, 2},
                           {"down", down, 1})) ||
      failed(verifySameDim(*this, "the model width", {"input", x, 1},
                           {"down", down, 2})))
    return failure();
  return verifyKFits(*this, "gates dim 1", dimOf(g, 1), dimOf(up, 0),
                     "up dim 0");
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// The shape rules of the attention core, shared by moe.attention, its
/// gradient and the flash-attention ops.
/// The widest attention head the ops accept: the widest in use is 256, and
/// the kernels keep a head's row in registers or shared memory.
static constexpr int64_t kMaxHeadWidth = 1024;

/// Checks that dim `dim` of `value`, a head width, is within kMaxHeadWidth.
static LogicalResult verifyHeadWidth(Operation *op, StringRef name,
                                     Value value, unsigned dim) {
  int64_t width = dimOf(value, dim);
  if (ShapedType::isDynamic(width) || width <= kMaxHeadWidth)
    return success();
  return op->emitOpError() << "expected a head width of at most "
                           << kMaxHeadWidth << " (" << name << " dim " << dim
                           << "), found " << width;
}

static LogicalResult verifyAttentionOperands(Operation *op, Value q, Value k,
                                             Value v, Value rel) {
  if (failed(verifyHeadWidth(op, "query", q, 3)) ||
      failed(verifyHeadWidth(op, "key", k, 3)) ||
      failed(verifyHeadWidth(op, "value", v, 3)) ||
      (rel && failed(verifyHeadWidth(op, "rel", rel, 2))) ||failed(verifySameDim(op, "the batch", {"query", q, 0}, {"key", k, 0})) ||
      failed(
          verifySameDim(op, "the batch", {"query", q, 0}, {"value", v, 0})) ||
      failed(
          verifySameDim(op, "the key count", {"key", k, 1}, {"value", v, 1})) ||
      failed(verifySameDim(op, "the head count", {"query", q, 2},
                           {"key", k, 2})) ||
      failed(verifySameDim(op, "the head count", {"query", q, 2},
                           {"value", v, 2})) ||
      failed(verifySameDim(op, "the head width", {"query", q, 3},
                           {"key", k, 3})) ||
      failed(verifySameDim(op, "the head width", {"query", q, 3},
                           {"value", v, 3})))
    return failure();
  if (rel)
    if (failed(verifySameDim(op, "the key count", {"rel", rel, 0},
                             {"key", k, 1})) ||
        failed(verifySameDim(op, "the head count", {"rel", rel, 1},
                             {"query", q, 2})) ||
        failed(verifySameDim(op, "the head width", {"rel", rel, 2},
                             {"query", q, 3})))
      return failure();
  int64_t queries = dimOf(q, 1), keys = dimOf(k, 1);
  if (!ShapedType::isDynamic(queries) && !ShapedType::isDynamic(keys) &&
      queries > keys)
    return op->emitOpError() << "expected at least as many keys (key dim 1, "
                             << keys << ") as queries (query dim 1, " << queries
                             << "): the queries are the last keys";
  return success();
}

/// The relative-key gradient (`what`: "rel_grad result" or
/// "rel_grad_init") exists exactly when there are relative keys.
static LogicalResult verifyRelGradPresent(Operation *op, Value rel,
                                          Value relGrad, StringRef what) {
  if (bool(rel) != bool(relGrad))
    return op->emitOpError()
           << "expected a " << what
           << " exactly when there is a rel operand (rel "
           << (rel ? "present" : "absent") << ", " << what.split(' ').first
           << " " << (relGrad ? "present" : "absent") << ")";
  return success();
}

/// The relative-key gradient exists exactly when there are relative keys,
/// and has their type.
static LogicalResult verifyRelGrad(Operation *op, Value rel, Value relGrad) {
  if (failed(verifyRelGradPresent(op, rel, relGrad, "rel_grad result")))
    return failure();
  if (rel && rel.getType() != relGrad.getType())
    return op->emitOpError()
           << "expected rel_grad of the type of rel, " << rel.getType()
           << ", found " << relGrad.getType();
  return success();
}

/// The rules of the flash ops: a static head width (a row is a vector) and
/// a logsumexp (or another row statistic, `name`) of shape [B, T, H].
static LogicalResult verifyFlashOperands(Operation *op, Value q,
                                         Value logsumexp,
                                         StringRef name = "logsumexp") {
  if (ShapedType::isDynamic(dimOf(q, 3)))
    return op->emitOpError()
           << "expected a static head width (query dim 3), found "
           << q.getType();
  auto queryType = cast<ShapedType>(q.getType());
  return switchyard::verifyShape(op, name, logsumexp.getType(),
                                 queryType.getShape().drop_back(),
                                 "query dims 0-2");
}

LogicalResult AttentionOp::verify() {
  return verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                 getRel());
}

LogicalResult AttentionWeightsOp::verify() {
  // The keys stand in for the values, whose shape they share.
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getKey(),
                                     getRel())))
    return failure();
  ArrayRef<int64_t> q = getQuery().getType().getShape(),
                    k = getKey().getType().getShape();
  return switchyard::verifyShape(*this, "result", getResult().getType(),
                                 {q[0], q[2], q[1], k[1]},
                                 "[query dim 0, query dim 2, query dim 1, "
                                 "key dim 1]");
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getRel())))
    return failure();
  return verifyRelGrad(*this, getRel(), getRelGrad());
}

LogicalResult FlashAttentionOp::verify() {
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getRel())))
    return failure();
  return verifyFlashOperands(*this, getQuery(), getLogsumexp());
}

LogicalResult FlashAttentionGradOp::verify() {
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getRel())) ||
      failed(verifyFlashOperands(*this, getQuery(), getLogsumexp())))
    return failure();
  return verifyRelGrad(*this, getRel(), getRelGrad());
}

//===----------------------------------------------------------------------===//
// Dense building blocks
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  Value x = getInput(), w = getWeight(), y = getResult();
  if (failed(verifySameDim(*this, "the input width", {"input", x, 1},
                           {"weight", w, 1})) ||
      failed(verifySameDim(*this, "the row count", {"input", x, 0},
                           {"result", y, 0})) ||
      failed(verifySameDim(*this, "the output width", {"weight", w, 0},
                           {"result", y, 1})))
    return failure();
  return success();
}

LogicalResult LayerNormOp::verify() {
  Value x = getInput();
  unsigned last = cast<ShapedType>(x.getType()).getRank() - 1;
  return verifySameDim(*this, "the normalised width", {"input", x, last},
                       {"weight", getWeight(), 0});
}

LogicalResult RopeOp::verify() {
  if (!getInput().getType().isDynamicDim(3))
    return verifyHeadWidth(*this, "input", getInput(), 3);
  return emitOpError("expected a static head width (input dim 3): the rotated "
                     "channel pairs depend on it");
}

LogicalResult EmbedOp::verify() {
  Value table = getTable(), tokens = getTokens(), y = getResult();
  if (failed(verifySameDim(*this, "the batch", {"tokens", tokens, 0},
                           {"result", y, 0})) ||
      failed(verifySameDim(*this, "the time steps", {"tokens", tokens, 1},
                           {"result", y, 1})) ||
      failed(verifySameDim(*this, "the model width", {"table", table, 1},
                           {"result", y, 2})))
    return failure();
  return success();
}

LogicalResult EmbedGradOp::verify() {
  Value tokens = getTokens(), dy = getDy(), y = getResult();
  if (failed(verifySameDim(*this, "the tokens", {"tokens", tokens, 0},
                           {"dy", dy, 0})) ||
      failed(verifySameDim(*this, "the model width", {"dy", dy, 1},
                           {"result", y, 1})))
    return failure();
  return success();
}

LogicalResult ConcatOp::verify() {
  Value a = getFirst(), b = getSecond(), y = getResult();
  if (failed(verifySameDim(*this, "the batch", {"first", a, 0},
                           {"second", b, 0})) ||
      failed(verifySameDim(*this, "the batch", {"first", a, 0},
                           {"result", y, 0})) ||
      failed(verifySameDim(*this, "the width", {"first", a, 2},
                           {"second", b, 2})) ||
      failed(verifySameDim(*this, "the width", {"first", a, 2},
                           {"result", y, 2})))
    return failure();
  int64_t m = dimOf(a, 1), t = dimOf(b, 1), total = dimOf(y, 1);
  if (ShapedType::isDynamic(m) || ShapedType::isDynamic(t) ||
      ShapedType::isDynamic(total) || m + t == total)
    return success();
  return emitOpError() << "expected result dim 1 to be " << m + t
                       << " (first dim 1 + second dim 1), found " << total;
}

LogicalResult CrossEntropyOp::verify() {
  Value logits = getLogits(), targets = getTargets();
  if (failed(verifySameDim(*this, "the batch", {"logits", logits, 0},
                           {"targets", targets, 0})) ||
      failed(verifySameDim(*this, "the time steps", {"logits", logits, 1},
                           {"targets", targets, 1})))
    return failure();
  return success();
}

#define GET_OP_CLASSES
#include "dialect/Moe/IR/MoeOps.cpp.inc"

//===----------------------------------------------------------------------===//
// DropoutMaskOp and DropoutOp
//===----------------------------------------------------------------------===//

/// A dropout probability must lie in [0, 1).
static LogicalResult verifyRate(Operation *op, double rate) {
  if (rate >= 0.0 && rate < 1.0)
    return success();
  return op->emitOpError() << "expected a rate in [0, 1), found " << rate;
}

LogicalResult DropoutMaskOp::verify() {
  if (failed(verifyRate(*this, getRate().convertToDouble())))
    return failure();
  // The I64Attr getter reads the value as unsigned.
  if (auto stream = static_cast<int64_t>(getStream()); stream < 0)
    return emitOpError() << "expected a non-negative stream, found " << stream;
  return switchyard::verifyShape(*this, "mask", getMask().getType(),
                                 getLike().getType().getShape(),
                                 "the shape of the like operand");
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (failed(verifyRate(*this, rate)) ||
      failed(switchyard::verifyShape(*this, "mask", getMask().getType(),
                                     getInput().getType().getShape(),
                                     "the shape of the input")))
    return failure();
  if (auto source = getMask().getDefiningOp<DropoutMaskOp>())
    if (source.getRate().convertToDouble() != rate)
      return emitOpError() << "has rate " << rate
                           << " but its mask was drawn with rate "
                           << source.getRate().convertToDouble();
  return success();
}

/// A rate of 0 keeps every element and scales by 1. (An unseeded mask is
/// not an identity here: lm-differentiate seeds it in the gradient
/// function, so only the lowering may take it for inference mode.)
OpFoldResult DropoutOp::fold(FoldAdaptor) {
  if (getRate().convertToDouble() == 0.0)
    return getInput();
  return {};
}

/// With weight 0 the auxiliary loss adds nothing to the objective.
OpFoldResult AddLossOp::fold(FoldAdaptor) {
  if (getWeight().convertToDouble() == 0.0)
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Fused kernels
//===----------------------------------------------------------------------===//

LogicalResult FusedRouterOp::verify() {
  Value x = getInput(), w = getWeight(), s = getScores();
  if (failed(verifySameDim(*this, "the model width", {"input", x, 1},
                           {"weight", w, 1})) ||
      failed(verifySameDim(*this, "the token count", {"input", x, 0},
                           {"scores", s, 0})))
    return failure();
  // Scores are [N, G] or [N, H, E] with static trailing dims covering the
  // router rows, as for moe.gate.
  ArrayRef<int64_t> shape = getScores().getType().getShape();
  int64_t routed = 1;
  for (int64_t dim : shape.drop_front()) {
    if (ShapedType::isDynamic(dim))
      return emitOpError() << "expected static expert dimensions (scores "
                              "dims after the first), found "
                           << getScores().getType();
    routed *= dim;
  }
  int64_t rows = dimOf(w, 0);
  if (!ShapedType::isDynamic(rows) && rows != routed)
    return emitOpError() << "expected weight dim 0 (" << rows
                         << " router rows) to equal the experts scored per "
                            "token (scores dims after the first: "
                         << routed << ")";
  if (failed(verifyKFits(*this, "the k attribute", getK(), shape.back(),
                         "the last dimension of scores")))
    return failure();
  if (Value mask = getMask())
    if (failed(switchyard::verifyShape(*this, "mask", mask.getType(), shape,
                                       "the shape of scores")))
      return failure();
  SmallVector<int64_t> expected(shape);
  expected.back() = getK();
  return switchyard::verifyShape(
      *this, "values", getValues().getType(), expected,
      "the shape of scores with the last dimension replaced by k");
}

LogicalResult FusedExpertProjOp::verify() {
  if (failed(verifyExpertProj(*this, getResult())))
    return failure();
  if (getResult().getType().isDynamicDim(2))
    return emitOpError() << "expected a static head width (result dim 2): "
                            "it is the width of the kernel's accumulator, "
                            "found "
                         << getResult().getType();
  return success();
}

LogicalResult FusedExpertMergeOp::verify() {
  if (failed(verifyExpertMerge(*this, getResult())))
    return failure();
  if (getResult().getType().isDynamicDim(1))
    return emitOpError() << "expected a static model width (result dim 1): "
                            "it is the width of the kernel's accumulator, "
                            "found "
                         << getResult().getType();
  return success();
}

/// The fused gradient kernels keep vectors over both widths of the stacked
/// weight [H·E, A, B]: its dims 1 and 2 must be static.
static LogicalResult verifyStaticWeightWidths(Operation *op, Value weight) {
  auto type = cast<RankedTensorType>(weight.getType());
  if (type.isDynamicDim(1) || type.isDynamicDim(2))
    return op->emitOpError()
           << "expected static weight dims 1 and 2: they are the widths of "
              "the kernels' accumulators, found "
           << type;
  return success();
}

LogicalResult FusedExpertProjGradOp::verify() {
  if (failed(verifyExpertProj(*this, getResultGrad(), "result_grad")))
    return failure();
  return verifyStaticWeightWidths(*this, getWeight());
}

LogicalResult FusedExpertMergeGradOp::verify() {
  if (failed(verifyExpertMerge(*this, getResultGrad(), "result_grad")))
    return failure();
  return verifyStaticWeightWidths(*this, getWeight());
}

//===----------------------------------------------------------------------===//
// Grouped expert kernels
//===----------------------------------------------------------------------===//

/// Checks a destination-style kernel op (the grouped kernels, the flash
/// attention kernel): all operands ranked tensors (one result per init, of
/// its type) or all buffers (no result), not a mix.
static LogicalResult verifyTensorsOrBuffers(Operation *op) {
  OperandRange inits = cast<DestinationStyleOpInterface>(op).getDpsInits();
  bool tensors = isa<RankedTensorType>(inits.front().getType());
  for (Value operand : op->getOperands())
    if (isa<RankedTensorType>(operand.getType()) != tensors ||
        isa<UnrankedTensorType, UnrankedMemRefType>(operand.getType()))
      return op->emitOpError()
             << "expected ranked operands, all tensors or all buffers";
  if (tensors && TypeRange(op->getResultTypes()) != TypeRange(inits))
    return op->emitOpError() << "expected one result of the type of each "
                                "init, "
                             << TypeRange(inits);
  if (!tensors && op->getNumResults() != 0)
    return op->emitOpError() << "expected no result on buffers";
  return success();
}

/// Each named operand has its rank (absent optional operands: null).
static LogicalResult verifyRanks(Operation *op,
                                 ArrayRef<std::pair<StringRef, Value>> named,
                                 ArrayRef<int64_t> ranks) {
  for (auto [entry, rank] : llvm::zip_equal(named, ranks))
    if (entry.second &&
        cast<ShapedType>(entry.second.getType()).getRank() != rank)
      return op->emitOpError() << "expected " << entry.first << " of rank "
                               << rank << ", found " << entry.second.getType();
  return success();
}

/// Reads every buffer operand; reads and writes the inits.
static void kernelEffects(
    Operation *op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  auto dps = cast<DestinationStyleOpInterface>(op);
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    effects.emplace_back(MemoryEffects::Read::get(), &operand,
                         SideEffects::DefaultResource::get());
    if (dps.isDpsInit(&operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

/// The gather operands of a grouped kernel: `order` and `routes_per_row`
/// come together, gates only with them; each gate vector holds one gate per
/// route of its operand (`rows` dim 0 times its routes per row), and every
/// gathered operand has the same route count.
static LogicalResult
verifyGather(Operation *op, Value order, std::optional<size_t> perRowCount,
             ArrayRef<std::tuple<StringRef, Value, Value>> gathered,
             ArrayRef<int64_t> routesPerRow) {
  if (!order != !perRowCount)
    return op->emitOpError()
           << "expected gather and routes_per_row together";
  if (!order) {
    for (auto [name, rows, gates] : gathered)
      if (gates)
        return op->emitOpError() << "expected gates only with gather";
    return success();
  }
  if (*perRowCount != gathered.size())
    return op->emitOpError() << "expected " << gathered.size()
                             << " routes_per_row values, found "
                             << *perRowCount;
  if (cast<ShapedType>(order.getType()).getRank() != 1)
    return op->emitOpError() << "expected order of rank 1, found "
                             << order.getType();
  std::optional<int64_t> routes;
  for (auto [entry, perRow] : llvm::zip_equal(gathered, routesPerRow)) {
    auto [name, rows, gates] = entry;
    if (perRow <= 0)
      return op->emitOpError() << "expected positive routes_per_row";
    int64_t count = dimOf(rows, 0);
    int64_t total = ShapedType::isDynamic(count) ? ShapedType::kDynamic
                                                 : count * perRow;
    if (gates) {
      if (cast<ShapedType>(gates.getType()).getRank() != 1)
        return op->emitOpError() << "expected the gates of " << name
                                 << " of rank 1, found " << gates.getType();
      int64_t given = dimOf(gates, 0);
      if (!ShapedType::isDynamic(total) && !ShapedType::isDynamic(given) &&
          given != total)
        return op->emitOpError()
               << "expected one gate per route of " << name << " (" << total
               << "), found " << given;
    }
    if (ShapedType::isDynamic(total))
      continue;
    if (routes && *routes != total)
      return op->emitOpError() << "expected the gathered operands to have "
                                  "as many routes, found "
                               << *routes << " and " << total;
    routes = total;
  }
  return success();
}

LogicalResult GroupedMatmulOp::verify() {
  Value rows = getRows(), w = getWeight(), te = getTileExperts(),
        init = getInit(), padded = getPaddedRows();
  if (failed(verifyTensorsOrBuffers(*this)) ||
      failed(verifyRanks(
          *this,
          {{"rows", rows}, {"weight", w}, {"tile_experts", te}, {"init", init}},
          {2, 3, 1, 2})))
    return failure();
  std::optional<int64_t> perRow = getRoutesPerRow();
  if (failed(verifyGather(*this, getOrder(),
                          perRow ? std::optional<size_t>(1) : std::nullopt,
                          {{"rows", rows, getGates()}},
                          perRow ? ArrayRef<int64_t>(*perRow)
                                 : ArrayRef<int64_t>())))
    return failure();
  unsigned reduced = getTransposeWeight() ? 2 : 1;
  unsigned produced = getTransposeWeight() ? 1 : 2;
  StringRef paddedName = getOrder() ? "order" : "rows";
  if (failed(verifySameDim(*this, "the reduced width", {"rows", rows, 1},
                           {"weight", w, reduced})) ||
      failed(verifySameDim(*this, "the output width", {"init", init, 1},
                           {"weight", w, produced})) ||
      failed(verifySameDim(*this, "the padded row count",
                           {paddedName, padded, 0}, {"init", init, 0})))
    return failure();
  int64_t paddedRows = dimOf(padded, 0), tiles = dimOf(te, 0);
  if (!ShapedType::isDynamic(paddedRows) && !ShapedType::isDynamic(tiles) &&
      paddedRows != tiles * static_cast<int64_t>(getTileSize()))
    return emitOpError() << "expected " << paddedName << " dim 0 ("
                         << paddedRows << ") to be tile_experts dim 0 ("
                         << tiles << ") times tile_size (" << getTileSize()
                         << ")";
  return success();
}

void GroupedMatmulOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

LogicalResult GroupedWeightGradOp::verify() {
  Value lhs = getLhs(), rhs = getRhs(), seg = getSegments(), init = getInit();
  if (failed(verifyTensorsOrBuffers(*this)) ||
      failed(verifyRanks(
          *this,
          {{"lhs", lhs}, {"rhs", rhs}, {"segments", seg}, {"init", init}},
          {2, 2, 1, 3})))
    return failure();
  std::optional<ArrayRef<int64_t>> perRow = getRoutesPerRow();
  if (failed(verifyGather(
          *this, getOrder(),
          perRow ? std::optional<size_t>(perRow->size()) : std::nullopt,
          {{"lhs", lhs, getLhsGates()}, {"rhs", rhs, getRhsGates()}},
          perRow ? *perRow : ArrayRef<int64_t>())))
    return failure();
  if ((!getOrder() &&
       failed(verifySameDim(*this, "the padded row count", {"lhs", lhs, 0},
                            {"rhs", rhs, 0}))) ||
      failed(verifySameDim(*this, "the left width", {"lhs", lhs, 1},
                           {"init", init, 1})) ||
      failed(verifySameDim(*this, "the right width", {"rhs", rhs, 1},
                           {"init", init, 2})))
    return failure();
  int64_t experts = dimOf(init, 0), bounds = dimOf(seg, 0);
  if (!ShapedType::isDynamic(experts) && !ShapedType::isDynamic(bounds) &&
      bounds != experts + 1)
    return emitOpError() << "expected segments dim 0 (" << bounds
                         << ") to be one more than the experts (init dim 0, "
                         << experts << ")";
  return success();
}

void GroupedWeightGradOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

LogicalResult SortRoutesOp::verify() {
  Value indices = getIndices(), segments = getSegmentsInit(),
        order = getOrderInit(), slots = getSlotsInit(),
        tiles = getTileExpertsInit();
  if (failed(verifyTensorsOrBuffers(*this)) ||
      failed(verifyRanks(*this,
                         {{"indices", indices},
                          {"segments", segments},
                          {"order", order},
                          {"slots", slots},
                          {"tile_experts", tiles}},
                         {3, 1, 1, 3, 1})))
    return failure();
  for (unsigned d = 0; d < 3; ++d)
    if (failed(verifySameDim(*this, "the routes' shape", {"indices", indices, d},
                             {"slots", slots, d})))
      return failure();
  int64_t heads = dimOf(indices, 1), bounds = dimOf(segments, 0);
  if (!ShapedType::isDynamic(heads) && !ShapedType::isDynamic(bounds) &&
      bounds != heads * getExpertsPerHead() + 1)
    return emitOpError() << "expected segments dim 0 (" << bounds
                         << ") to be heads times experts_per_head plus one ("
                         << heads * getExpertsPerHead() + 1 << ")";
  int64_t padded = dimOf(order, 0), count = dimOf(tiles, 0);
  if (!ShapedType::isDynamic(padded) && !ShapedType::isDynamic(count) &&
      padded != count * static_cast<int64_t>(getTileSize()))
    return emitOpError() << "expected order dim 0 (" << padded
                         << ") to be tile_experts dim 0 (" << count
                         << ") times tile_size (" << getTileSize() << ")";
  return success();
}

void SortRoutesOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

LogicalResult FlashAttentionKernelOp::verify() {
  Value q = getQuery();
  if (failed(verifyTensorsOrBuffers(*this)) ||
      failed(verifyRanks(*this,
                         {{"query", q},
                          {"key", getKey()},
                          {"value", getValue()},
                          {"rel", getRel()},
                          {"result_init", getResultInit()},
                          {"logsumexp_init", getLogsumexpInit()}},
                         {4, 4, 4, 3, 4, 3})) ||
      failed(
          verifyAttentionOperands(*this, q, getKey(), getValue(), getRel())) ||
      failed(verifyFlashOperands(*this, q, getLogsumexpInit())))
    return failure();
  if (cast<ShapedType>(q.getType()).getShape() !=
      cast<ShapedType>(getResultInit().getType()).getShape())
    return emitOpError() << "expected result_init of the query's shape, "
                            "found "
                         << getResultInit().getType();
  if (dimOf(q, 3) > kMaxHeadWidth)
    return emitOpError() << "expected a head width of at most " << kMaxHeadWidth
                         << ", found " << dimOf(q, 3);
  return success();
}

void FlashAttentionKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

LogicalResult FlashAttentionGradKernelOp::verify() {
  Value q = getQuery(), k = getKey(), v = getValue();
  if (failed(verifyTensorsOrBuffers(*this)) ||
      failed(verifyRanks(*this,
                         {{"query", q},
                          {"key", k},
                          {"value", v},
                          {"logsumexp", getLogsumexp()},
                          {"delta", getDelta()},
                          {"result_grad", getResultGrad()},
                          {"query_grad_init", getQueryGradInit()},
                          {"key_grad_init", getKeyGradInit()},
                          {"value_grad_init", getValueGradInit()},
                          {"rel", getRel()},
                          {"rel_grad_init", getRelGradInit()}},
                         {4, 4, 4, 3, 3, 4, 4, 4, 4, 3, 3})) ||
      failed(verifyAttentionOperands(*this, q, k, v, getRel())) ||
      failed(verifyFlashOperands(*this, q, getLogsumexp())) ||
      failed(verifyFlashOperands(*this, q, getDelta(), "delta")))
    return failure();
  if (failed(verifyRelGradPresent(*this, getRel(), getRelGradInit(),
                                  "rel_grad_init")))
    return failure();
  auto shapeOf = [](Value x) {
    return cast<ShapedType>(x.getType()).getShape();
  };
  for (auto [name, x, like] :
       {std::tuple<StringRef, Value, Value>{"result_grad", getResultGrad(), q},
        {"query_grad_init", getQueryGradInit(), q},
        {"key_grad_init", getKeyGradInit(), k},
        {"value_grad_init", getValueGradInit(), v},
        {"rel_grad_init", getRelGradInit(), getRel()}})
    if (x && shapeOf(x) != shapeOf(like))
      return emitOpError() << "expected " << name << " of the shape of "
                           << like.getType() << ", found " << x.getType();
  if (dimOf(q, 3) > FlashAttentionKernelOp::kMaxHeadWidth)
    return emitOpError() << "expected a head width of at most "
                         << FlashAttentionKernelOp::kMaxHeadWidth << ", found "
                         << dimOf(q, 3);
  return success();
}

void FlashAttentionGradKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}
