//===- LmDecomposeLayers.cpp - lm layers to moe and linalg ----------------===//
//
// Implements `lm-decompose-layers`: each layer op of a model becomes the
// computation docs/Semantics.md specifies, written with `moe` ops (routing,
// expert projections, attention core, and the differentiable building
// blocks: linear, layer_norm, rope, embed, concat, relu, cross_entropy) and
// residual additions (arith.addf on tensors), reading its parameters with
// `lm.get_param`. Every op on a path from a parameter to the loss has a
// gradient rule; only the constant XL sinusoids are a plain linalg.generic.
// Token-wise work happens on [B·T, D] matrices.
//
//===----------------------------------------------------------------------===//

#include "dialect/Lm/IR/LmOps.h"
#include "lib/Conversion/Passes.h"
#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#include <cmath>
#include <limits>

namespace mlir::switchyard {
#define GEN_PASS_DEF_LMDECOMPOSELAYERSPASS
#include "lib/Conversion/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "lm-decompose-layers"

using namespace mlir;
using namespace mlir::lm;
using namespace mlir::switchyard;

namespace {

/// -ln(10000): the frequencies of RoPE and of the XL sinusoids are
/// exp(-ln(10000)·2i/width).
const double kNegLogBase = -std::log(10000.0);

/// The block function (`lm-outline-layers`) a layer is in, if any.
func::FuncOp layerFunction(Operation *layer) {
  auto func = dyn_cast<func::FuncOp>(layer->getParentOp());
  return func && func->hasAttr("lm.layer") ? func : func::FuncOp();
}

/// The argument of block function `func` marked `lm.layer_param = suffix`,
/// if any.
BlockArgument layerParamArgument(func::FuncOp func, StringRef suffix) {
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto marked = func.getArgAttrOfType<StringAttr>(i, "lm.layer_param");
        marked && marked.getValue() == suffix)
      return func.getArgument(i);
  return {};
}

/// The helpers every layer decomposition uses, bound to one layer.
class LayerBuilder {
public:
  /// Whether to mark the probes (the pass's `probes` option).
  bool probes;

  LayerBuilder(ParamOwnerOpInterface layer, PatternRewriter &rewriter,
               bool probes = false)
      : probes(probes), b(layer.getLoc(), rewriter), layer(layer) {
    layer.getParams(params, /*numLayers=*/1);
    // A decoding step (lm-build-decoder) returns its caches, not probes.
    if (auto model = layer->getParentOfType<ModelOp>();
        model && model->hasAttr(kDecoderAttr))
      this->probes = false;
  }

  /// Marks `op` as probe `<layer>.<what>` for lm-expose-probes, where the
  /// pass was asked to.
  void probe(Operation *op, StringRef what) {
    if (probes)
      op->setAttr(kProbeAttr,
                  b.getStringAttr(layer.getLayerName() + "." + what));
  }

  /// Reads parameter `<layer>.<suffix>` (declared: the pass checked); in a
  /// block function (`lm-outline-layers`), the argument marked with the
  /// suffix.
  Value param(StringRef suffix) {
    if (auto func = layerFunction(layer)) {
      BlockArgument arg = layerParamArgument(func, suffix);
      assert(arg && "block functions take every parameter of the block");
      return arg;
    }
    std::string name = (layer.getLayerName() + "." + suffix).str();
    for (const ParamDecl &decl : params)
      if (decl.name == name)
        return GetParamOp::create(b, decl.type, name);
    llvm_unreachable("layers only read the parameters they own");
  }

  /// LN over the last dimension, with `weight` and `bias` [D].
  Value layerNorm(Value x, Value weight, Value bias, double eps) {
    return moe::LayerNormOp::create(b, x.getType(), x, weight, bias,
                                    b.getF64FloatAttr(eps));
  }

  /// The block's pre-norm, `<layer>.norm.{weight,bias}`.
  Value blockNorm(Value x) {
    return layerNorm(x, param("norm.weight"), param("norm.bias"), 1e-5);
  }

  /// x [N, K] · wᵀ for w [M, K], scaled by `scale`, in x's element type.
  Value linear(Value x, Value w, double scale = 1.0) {
    auto xType = cast<RankedTensorType>(x.getType());
    auto wType = cast<RankedTensorType>(w.getType());
    auto type = RankedTensorType::get(
        {xType.getDimSize(0), wType.getDimSize(0)}, xType.getElementType());
    return moe::LinearOp::create(b, type, x, w, b.getF64FloatAttr(scale));
  }

  /// [B, T, D] -> [B·T, D].
  Value flatten(Value x) {
    return tensor::CollapseShapeOp::create(
        b, x, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  }

  /// [B·T, ...] -> [B, T, ...], with B and T taken from `like` [B, T, ...].
  Value unflatten(Value x, Value like) {
    auto type = cast<RankedTensorType>(x.getType());
    auto likeType = cast<RankedTensorType>(like.getType());
    SmallVector<OpFoldResult> shape = {sizesOf(b, like)[0],
                                       sizesOf(b, like)[1]};
    SmallVector<int64_t> staticShape = {likeType.getDimSize(0),
                                        likeType.getDimSize(1)};
    SmallVector<ReassociationIndices> groups = {{0, 1}};
    SmallVector<OpFoldResult> rest = sizesOf(b, x);
    for (int64_t d = 1; d < type.getRank(); ++d) {
      shape.push_back(rest[d]);
      staticShape.push_back(type.getDimSize(d));
      groups.push_back({d + 1});
    }
    auto resultType = RankedTensorType::get(staticShape, type.getElementType());
    return tensor::ExpandShapeOp::create(b, resultType, x, groups, shape);
  }

  /// [N, H·F] -> [N, H, F] (or [S, H·F] -> [S, H, F]).
  Value splitHeads(Value x, int64_t heads) {
    auto type = cast<RankedTensorType>(x.getType());
    int64_t width = type.getDimSize(1) / heads;
    auto resultType = RankedTensorType::get({type.getDimSize(0), heads, width},
                                            type.getElementType());
    return tensor::ExpandShapeOp::create(
        b, resultType, x, ArrayRef<ReassociationIndices>{{0}, {1, 2}},
        ArrayRef<OpFoldResult>{sizesOf(b, x)[0], b.getIndexAttr(heads),
                               b.getIndexAttr(width)});
  }

  /// Element-wise a + b of two tensors of one type.
  Value add(Value lhs, Value rhs) { return arith::AddFOp::create(b, lhs, rhs); }

  /// An inference-mode (unseeded) dropout mask shaped like `like`;
  /// lm-differentiate seeds it in the training function.
  Value dropoutMask(Value like, double rate) {
    auto type = cast<RankedTensorType>(like.getType());
    return moe::DropoutMaskOp::create(
        b, RankedTensorType::get(type.getShape(), b.getI1Type()), like,
        /*seed=*/Value(), b.getF64FloatAttr(rate), /*stream=*/0);
  }

  /// The residual addition x + branch, with dropout `rate` on the branch.
  Value residual(Value x, Value branch, double rate) {
    if (rate > 0.0)
      branch = moe::DropoutOp::create(b, branch.getType(), branch,
                                      dropoutMask(branch, rate),
                                      b.getF64FloatAttr(rate));
    return add(x, branch);
  }

  /// Concatenates [B, M, D] and [B, T, D] along the time dimension.
  Value concatTime(Value first, Value second) {
    auto a = cast<RankedTensorType>(first.getType());
    auto c = cast<RankedTensorType>(second.getType());
    int64_t total = a.isDynamicDim(1) || c.isDynamicDim(1)
                        ? ShapedType::kDynamic
                        : a.getDimSize(1) + c.getDimSize(1);
    auto type = RankedTensorType::get({a.getDimSize(0), total, a.getDimSize(2)},
                                      a.getElementType());
    return moe::ConcatOp::create(b, type, first, second);
  }

  /// Rotary embedding of x [B, L, H, F] at positions l - offset (+ start,
  /// an index, where given).
  Value rope(Value x, int64_t offset, Value start = {}) {
    return moe::RopeOp::create(b, x.getType(), x, start, offset);
  }

  /// `rows` [B, T, H, F] written into rows `position ..` of `cache`
  /// [B, C, H, F], `position` an i32 scalar tensor. One element-wise pass
  /// over the cache that reads the position itself, rather than an
  /// insert_slice at a position: no offset that a GPU's host would have to
  /// read back from the device.
  Value writeRows(Value cache, Value rows, Value position) {
    MLIRContext *ctx = b.getContext();
    int64_t count = cast<RankedTensorType>(rows.getType()).getDimSize(1);
    AffineMap scalar = AffineMap::get(4, 0, {}, ctx);
    AffineMap id = b.getMultiDimIdentityMap(4);
    return generic(
        b, {position}, cache, {scalar, id}, iterators(4),
        [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value first =
              arith::IndexCastOp::create(b, b.getIndexType(), args[0]);
          Value row = arith::SubIOp::create(b, loopIndex(b, 1), first);
          Value zero = indexConstant(b, 0);
          Value last = indexConstant(b, count - 1);
          Value written = arith::AndIOp::create(
              b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, row, zero),
              arith::CmpIOp::create(b, arith::CmpIPredicate::sle, row, last));
          Value clamped = arith::MaxSIOp::create(
              b, arith::MinSIOp::create(b, row, last), zero);
          Value value = tensor::ExtractOp::create(
              b, rows,
              ValueRange{loopIndex(b, 0), clamped, loopIndex(b, 2),
                         loopIndex(b, 3)});
          return arith::SelectOp::create(b, written, value, args[1]);
        });
  }

  /// The XL encodings pe [S, D] for the distances δ = 0 .. S-1 between a
  /// query and the keys it sees, in f32. Row δ encodes the relative
  /// position p = key − query = −δ as the official SwitchHeadXL does: sin
  /// at the even channels, cos at the odd ones,
  ///   pe[δ, 2i] = sin(p·ω_i),  pe[δ, 2i+1] = cos(p·ω_i),
  ///   ω_i = exp(2i · (−ln 10000 / D)),
  /// with the exponent and the angle rounded to f32 as the official code
  /// rounds them, so that weights trained there mean the same here.
  Value sinusoids(OpFoldResult distances, int64_t width) {
    Type f32 = b.getF32Type();
    // ω per channel, computed once: the exponential in f64 and rounded once
    // to f32, the correctly rounded value (an f32 exp may be an ulp off,
    // which at distance 1000 moves the angle by about 4e-6).
    Value omegaInit =
        tensor::EmptyOp::create(b, {b.getIndexAttr(width)}, f32);
    Value omegas = generic(
        b, {}, omegaInit, {b.getMultiDimIdentityMap(1)}, iterators(1),
        [&](ImplicitLocOpBuilder &b, ValueRange) -> Value {
          Value j = linalg::IndexOp::create(b, 0);
          Value twoI = arith::SubIOp::create(
              b, j, arith::AndIOp::create(b, j, indexConstant(b, 1)));
          Value exponent = arith::MulFOp::create(
              b, indexToF32(b, twoI),
              f32Constant(b, kNegLogBase / double(width)));
          Value wide = math::ExpOp::create(
              b, arith::ExtFOp::create(b, b.getF64Type(), exponent));
          return arith::TruncFOp::create(b, f32, wide);
        });
    Value init = tensor::EmptyOp::create(b, {distances, b.getIndexAttr(width)},
                                         f32);
    MLIRContext *context = b.getContext();
    AffineMap perChannel =
        AffineMap::get(2, 0, {getAffineDimExpr(1, context)}, context);
    return generic(
        b, {omegas}, init, {perChannel, b.getMultiDimIdentityMap(2)},
        iterators(2),
        [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value position = arith::NegFOp::create(
              b, indexToF32(b, linalg::IndexOp::create(b, 0)));
          Value j = linalg::IndexOp::create(b, 1);
          Value isSin = arith::CmpIOp::create(
              b, arith::CmpIPredicate::eq,
              arith::AndIOp::create(b, j, indexConstant(b, 1)),
              indexConstant(b, 0));
          Value angle = arith::MulFOp::create(b, position, args[0]);
          return arith::SelectOp::create(b, isSin,
                                         math::SinOp::create(b, angle),
                                         math::CosOp::create(b, angle));
        });
  }

  ImplicitLocOpBuilder b;

private:
  ParamOwnerOpInterface layer;
  SmallVector<ParamDecl> params;
};

//===----------------------------------------------------------------------===//
// Attention blocks
//===----------------------------------------------------------------------===//

/// The part of an attention block both kinds share: norms, queries, keys,
/// positions and the attention core. `values` builds V [B·S, H, F] from the
/// normalised sources [B·S, D]; `project` turns the head outputs
/// [B·T, H, F] and the normalised queries [B·T, D] into the branch [B·T, D].
/// The results: the block's, then, with a key/value cache, the caches with
/// this step's keys and values written at its position.
template <typename AttentionOp>
SmallVector<Value> buildAttention(AttentionOp op, LayerBuilder &lb,
                                  function_ref<Value(Value)> values,
                                  function_ref<Value(Value, Value)> project) {
  ImplicitLocOpBuilder &b = lb.b;
  Value x = op.getInput();
  int64_t heads = op.getHeads(), width = op.getHeadDim();
  double scale = std::pow(double(width), -0.25);
  // A decoding step: the position of its first token, as an index.
  Value position;
  if (Value scalar = op.getPosition())
    position = arith::IndexCastOp::create(
        b, b.getIndexType(),
        tensor::ExtractOp::create(b, scalar, ValueRange{}));

  Value h = lb.blockNorm(x);
  Value source = h;
  int64_t memoryLength = 0;
  if (Value memory = op.getMemory()) {
    source = lb.concatTime(lb.blockNorm(memory), h);
    memoryLength = cast<RankedTensorType>(memory.getType()).getDimSize(1);
  }
  Value hFlat = lb.flatten(h), sourceFlat = lb.flatten(source);

  Value q = lb.unflatten(
      lb.splitHeads(lb.linear(hFlat, lb.param("q"), scale), heads), x);
  Value k = lb.unflatten(
      lb.splitHeads(lb.linear(sourceFlat, lb.param("k"), scale), heads),
      source);
  Value v = lb.unflatten(values(sourceFlat), source);

  Value rel;
  if (op.getPos() == PosEncoding::rope) {
    q = lb.rope(q, 0, position);
    k = lb.rope(k, memoryLength, position);
  } else if (op.getPos() == PosEncoding::xl) {
    int64_t modelWidth = cast<RankedTensorType>(x.getType()).getDimSize(2);
    Value pe = castElements(b, lb.sinusoids(sizesOf(b, source)[1], modelWidth),
                            elementTypeOf(x));
    rel = lb.splitHeads(lb.linear(pe, lb.param("pos"), scale), heads);
  }

  SmallVector<Value> results;
  if (position) {
    // The step's keys and values join the cache; its queries see the rows
    // before them and their own.
    k = lb.writeRows(op.getKeys(), k, op.getPosition());
    v = lb.writeRows(op.getValues(), v, op.getPosition());
  }
  Value attended =
      moe::AttentionOp::create(b, q.getType(), q, k, v, rel, position);
  if (!position)
    lb.probe(attended.getDefiningOp(), "attention");
  Value headsFlat = tensor::CollapseShapeOp::create(
      b, attended, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
  Value branch = project(headsFlat, hFlat);
  results.push_back(lb.residual(x, lb.unflatten(branch, x),
                                op.getDropout().convertToDouble()));
  if (position)
    results.append({k, v});
  return results;
}

/// The top-k of router scores, experts masked with probability
/// `expertDropout` in training.
moe::TopKOp topK(LayerBuilder &lb, Value scores, int64_t k,
                 double expertDropout) {
  auto type = cast<RankedTensorType>(scores.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = k;
  Value mask =
      expertDropout > 0.0 ? lb.dropoutMask(scores, expertDropout) : Value();
  return moe::TopKOp::create(
      lb.b,
      TypeRange{RankedTensorType::get(shape, lb.b.getF32Type()),
                RankedTensorType::get(shape, lb.b.getI32Type())},
      scores, k, mask);
}

/// `[N, H, E]` router scores and their top-k for a SwitchHead selection,
/// the top-k probe `side`.
std::pair<Value, Value> route(LayerBuilder &lb, Value input, Value weight,
                              int64_t heads, int64_t experts, int64_t k,
                              double expertDropout, StringRef side) {
  ImplicitLocOpBuilder &b = lb.b;
  auto inputType = cast<RankedTensorType>(input.getType());
  int64_t tokens = inputType.getDimSize(0);
  Type f32 = b.getF32Type();
  auto scoresType = RankedTensorType::get({tokens, heads, experts}, f32);
  Value scores = moe::GateOp::create(b, scoresType, input, weight);
  moe::TopKOp topk = topK(lb, scores, k, expertDropout);
  lb.probe(topk, side);
  return {topk.getValues(), topk.getIndices()};
}

/// A decomposition of a layer with probes (attention, routers): it marks
/// them where the pass's `probes` option asks.
template <typename Op>
struct ProbedDecomposition : public OpRewritePattern<Op> {
  ProbedDecomposition(MLIRContext *ctx, bool probes)
      : OpRewritePattern<Op>(ctx), probes(probes) {}
  bool probes;
};

struct MhaDecomposition : public ProbedDecomposition<MhaOp> {
  using ProbedDecomposition::ProbedDecomposition;

  LogicalResult matchAndRewrite(MhaOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter, probes);
    int64_t heads = op.getHeads();
    SmallVector<Value> results = buildAttention(
        op, lb,
        [&](Value source) {
          return lb.splitHeads(lb.linear(source, lb.param("v")), heads);
        },
        [&](Value attended, Value) {
          Value joined = tensor::CollapseShapeOp::create(
              lb.b, attended, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
          return lb.linear(joined, lb.param("o"));
        });
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct SwitchHeadDecomposition : public ProbedDecomposition<SwitchHeadOp> {
  using ProbedDecomposition::ProbedDecomposition;

  LogicalResult matchAndRewrite(SwitchHeadOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter, probes);
    ImplicitLocOpBuilder &b = lb.b;
    int64_t heads = op.getHeads(), experts = op.getExperts(), k = op.getK();
    int64_t width = op.getHeadDim();
    double expertDropout = op.getExpertDropout().convertToDouble();
    SmallVector<Value> results = buildAttention(
        op, lb,
        [&](Value source) -> Value {
          // Source-side selection over memory and current tokens.
          auto [gates, indices] = route(lb, source, lb.param("sel_v"), heads,
                                        experts, k, expertDropout, "v");
          auto sourceType = cast<RankedTensorType>(source.getType());
          auto type =
              RankedTensorType::get({sourceType.getDimSize(0), heads, width},
                                    sourceType.getElementType());
          return moe::ExpertProjOp::create(b, type, source, lb.param("v"),
                                           gates, indices);
        },
        [&](Value attended, Value queries) -> Value {
          // Destination-side selection from the current tokens.
          auto [gates, indices] = route(lb, queries, lb.param("sel_o"), heads,
                                        experts, k, expertDropout, "o");
          return moe::ExpertMergeOp::create(b, queries.getType(), attended,
                                            lb.param("o"), gates, indices);
        });
    rewriter.replaceOp(op, results);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Feed-forward blocks
//===----------------------------------------------------------------------===//

struct FfnDecomposition : public OpRewritePattern<FfnOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(FfnOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter);
    Value x = op.getInput();
    Value h = lb.flatten(lb.blockNorm(x));
    Value up = lb.linear(h, lb.param("up"));
    Value hidden = moe::ReluOp::create(lb.b, up.getType(), up);
    Value branch = lb.linear(hidden, lb.param("down"));
    rewriter.replaceOp(op, lb.residual(x, lb.unflatten(branch, x),
                                       op.getDropout().convertToDouble()));
    return success();
  }
};

struct SigmaMoeDecomposition : public ProbedDecomposition<SigmaMoeOp> {
  using ProbedDecomposition::ProbedDecomposition;

  LogicalResult matchAndRewrite(SigmaMoeOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter, probes);
    ImplicitLocOpBuilder &b = lb.b;
    Value x = op.getInput();
    Value h = lb.flatten(lb.blockNorm(x));
    int64_t tokens = cast<RankedTensorType>(h.getType()).getDimSize(0);
    int64_t experts = op.getExperts(), k = op.getK();
    Type f32 = b.getF32Type();
    Value scores = moe::GateOp::create(
        b, RankedTensorType::get({tokens, experts}, f32), h, lb.param("sel"));
    moe::TopKOp topk =
        topK(lb, scores, k, op.getExpertDropout().convertToDouble());
    lb.probe(topk, "sel");
    Value branch = moe::ExpertMlpOp::create(b, h.getType(), h, lb.param("up"),
                                            lb.param("down"), topk.getValues(),
                                            topk.getIndices());
    // The balancing term: -λ·H(batch mean of softmax(router logits)).
    if (double lambda = op.getEntropyReg().convertToDouble(); lambda > 0.0) {
      Value logits = lb.linear(h, lb.param("sel"));
      Value entropy = moe::RoutingEntropyOp::create(
          b, RankedTensorType::get({}, f32), logits);
      branch = moe::AddLossOp::create(b, branch.getType(), branch, entropy,
                                      b.getF64FloatAttr(-lambda));
    }
    rewriter.replaceOp(op, lb.residual(x, lb.unflatten(branch, x),
                                       op.getDropout().convertToDouble()));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Embedding, norm, output and loss
//===----------------------------------------------------------------------===//

struct EmbedDecomposition : public OpRewritePattern<EmbedOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(EmbedOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter);
    rewriter.replaceOp(op, moe::EmbedOp::create(lb.b, op.getResult().getType(),
                                                lb.param("weight"),
                                                op.getTokens()));
    return success();
  }
};

struct LayerNormDecomposition : public OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter);
    rewriter.replaceOp(op, lb.layerNorm(op.getInput(), lb.param("weight"),
                                        lb.param("bias"),
                                        op.getEps().convertToDouble()));
    return success();
  }
};

struct OutputDecomposition : public OpRewritePattern<OutputOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(OutputOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter);
    Value x = op.getInput();
    Value logits = lb.linear(lb.flatten(x), lb.param("weight"));
    rewriter.replaceOp(op, lb.unflatten(logits, x));
    return success();
  }
};

struct CrossEntropyDecomposition : public OpRewritePattern<CrossEntropyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CrossEntropyOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<moe::CrossEntropyOp>(
        op, op.getResult().getType(), op.getLogits(), op.getTargets());
    return success();
  }
};

/// Decomposes every layer; checks first that their parameters are declared.
struct LmDecomposeLayersPass
    : public switchyard::impl::LmDecomposeLayersPassBase<LmDecomposeLayersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    WalkResult walk = module.walk([&](ParamOwnerOpInterface layer) {
      func::FuncOp function = layerFunction(layer);
      if (!function && !layer->getParentOfType<ModelOp>()) {
        layer->emitOpError("is outside an lm.model: only the layers of a "
                           "model own declared parameters");
        return WalkResult::interrupt();
      }
      // Token-wise work reshapes [batch, time] into one token dimension;
      // upstream MLIR 22 cannot lower such a reshape when both are dynamic.
      for (Value value :
           llvm::concat<Value>(layer->getOperands(), layer->getResults())) {
        auto type = dyn_cast<RankedTensorType>(value.getType());
        if (!type || type.getRank() < 2)
          continue;
        if (type.isDynamicDim(0) && type.isDynamicDim(1)) {
          layer->emitOpError()
              << "expected a static batch or sequence length, found " << type
              << ": the two cannot both be dynamic";
          return WalkResult::interrupt();
        }
        if (type.getDimSize(1) == 0) {
          layer->emitOpError()
              << "expected at least one time step, found " << type;
          return WalkResult::interrupt();
        }
      }
      SmallVector<ParamDecl> params;
      layer.getParams(params, /*numLayers=*/1);
      for (const ParamDecl &param : params) {
        if (function) {
          // Each parameter an argument of the function, by its suffix.
          StringRef suffix = StringRef(param.name).drop_front(
              layer.getLayerName().size() + 1);
          BlockArgument arg = layerParamArgument(function, suffix);
          if (!arg || arg.getType() != param.type) {
            layer->emitOpError()
                << "is in block function @" << function.getName()
                << ", which takes no argument marked lm.layer_param = \""
                << suffix << "\" of type " << param.type;
            return WalkResult::interrupt();
          }
          continue;
        }
        auto decl = symbols.lookupNearestSymbolFrom<ParamOp>(
            layer, StringAttr::get(&getContext(), param.name));
        if (!decl || decl.getType() != param.type) {
          layer->emitOpError()
              << "needs parameter '" << param.name << "' of type " << param.type
              << " to be declared; run lm-materialize-params first";
          return WalkResult::interrupt();
        }
      }
      LLVM_DEBUG(llvm::dbgs() << "decomposing " << layer->getName() << " at "
                              << layer->getLoc() << " (" << params.size()
                              << " parameters)\n");
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    patterns.add<EmbedDecomposition, LayerNormDecomposition, FfnDecomposition,
                 OutputDecomposition, CrossEntropyDecomposition>(&getContext());
    patterns
        .add<MhaDecomposition, SwitchHeadDecomposition, SigmaMoeDecomposition>(
            &getContext(), probes);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(module, std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace
