//===- LmDecomposeLayers.cpp - lm layers to moe and linalg ----------------===//
//
// Implements `lm-decompose-layers`: each layer op of a model becomes the
// computation docs/Semantics.md specifies, written with `moe` routing ops
// (gate, top-k, expert projections, attention core) and linalg on tensors,
// reading its parameters with `lm.get_param`. Token-wise work happens on
// [B·T, D] matrices; blocks add their branch to the residual stream.
//
//===----------------------------------------------------------------------===//

#include "dialect/Lm/IR/LmOps.h"
#include "dialect/Lm/Transforms/Passes.h"
#include "dialect/Moe/IR/MoeOps.h"
#include "dialect/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <limits>

namespace mlir::lm {
#define GEN_PASS_DEF_LMDECOMPOSELAYERSPASS
#include "dialect/Lm/Transforms/Passes.h.inc"
} // namespace mlir::lm

using namespace mlir;
using namespace mlir::lm;
using namespace mlir::switchyard;

namespace {

/// -ln(10000): the frequencies of RoPE and of the XL sinusoids are
/// exp(-ln(10000)·2i/width).
const double kNegLogBase = -std::log(10000.0);

Value f32Constant(ImplicitLocOpBuilder &b, double value) {
  return arith::ConstantOp::create(b, b.getF32Type(),
                                   b.getF32FloatAttr(static_cast<float>(value)));
}

Value indexConstant(ImplicitLocOpBuilder &b, int64_t value) {
  return arith::ConstantIndexOp::create(b, value);
}

/// An index value as f32 (through i64, so negative positions survive).
Value indexToF32(ImplicitLocOpBuilder &b, Value index) {
  Value wide = arith::IndexCastOp::create(b, b.getI64Type(), index);
  return arith::SIToFPOp::create(b, b.getF32Type(), wide);
}

Type elementTypeOf(Value value) {
  return cast<ShapedType>(value.getType()).getElementType();
}

/// The helpers every layer decomposition uses, bound to one layer.
class LayerBuilder {
public:
  LayerBuilder(ParamOwnerOpInterface layer, PatternRewriter &rewriter)
      : b(layer.getLoc(), rewriter), layer(layer) {
    layer.getParams(params, /*numLayers=*/1);
  }

  /// Reads parameter `<layer>.<suffix>` (declared: the pass checked).
  Value param(StringRef suffix) {
    std::string name = (layer.getLayerName() + "." + suffix).str();
    for (const ParamDecl &decl : params)
      if (decl.name == name)
        return GetParamOp::create(b, decl.type, name);
    llvm_unreachable("layers only read the parameters they own");
  }

  /// LN over the last dimension, with `weight` and `bias` [D].
  Value layerNorm(Value x, Value weight, Value bias, double eps) {
    MLIRContext *ctx = b.getContext();
    auto type = cast<RankedTensorType>(x.getType());
    unsigned rank = type.getRank();
    SmallVector<unsigned> prefix, all;
    for (unsigned d = 0; d < rank; ++d) {
      all.push_back(d);
      if (d + 1 < rank)
        prefix.push_back(d);
    }
    AffineMap id = dimsMap(ctx, rank, all), pre = dimsMap(ctx, rank, prefix);
    AffineMap last = dimsMap(ctx, rank, {rank - 1});
    SmallVector<OpFoldResult> sizes = sizesOf(b, x);
    SmallVector<OpFoldResult> rowSizes(sizes.begin(), sizes.end() - 1);
    Value width = f32Constant(b, double(type.getShape().back()));

    Value sum = generic(b, {x}, filled(b, rowSizes, b.getF32Type(), 0.0),
                        {id, pre}, iterators(rank - 1, 1),
                        [](ImplicitLocOpBuilder &b, ValueRange args) {
                          return arith::AddFOp::create(b, args[1],
                                                       toF32(b, args[0]));
                        });
    Value mean = mapElements(b, sum, b.getF32Type(),
                             [&](ImplicitLocOpBuilder &b, Value v) -> Value {
                               return arith::DivFOp::create(b, v, width);
                             });
    Value squares = generic(
        b, {x, mean}, filled(b, rowSizes, b.getF32Type(), 0.0), {id, pre, pre},
        iterators(rank - 1, 1), [](ImplicitLocOpBuilder &b, ValueRange args) {
          Value centred = arith::SubFOp::create(b, toF32(b, args[0]), args[1]);
          return arith::AddFOp::create(
              b, args[2], arith::MulFOp::create(b, centred, centred));
        });
    Value rstd = mapElements(
        b, squares, b.getF32Type(),
        [&](ImplicitLocOpBuilder &b, Value v) -> Value {
          Value var = arith::DivFOp::create(b, v, width);
          Value shifted = arith::AddFOp::create(b, var, f32Constant(b, eps));
          return math::RsqrtOp::create(b, shifted);
        });
    Type element = type.getElementType();
    Value init = tensor::EmptyOp::create(b, sizes, element);
    return generic(
        b, {x, mean, rstd, weight, bias}, init, {id, pre, pre, last, last, id},
        iterators(rank), [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value centred = arith::SubFOp::create(b, toF32(b, args[0]), args[1]);
          Value normed = arith::MulFOp::create(b, centred, args[2]);
          Value scaled = arith::MulFOp::create(b, normed, toF32(b, args[3]));
          Value shifted = arith::AddFOp::create(b, scaled, toF32(b, args[4]));
          return fromF32(b, shifted, element);
        });
  }

  /// The block's pre-norm, `<layer>.norm.{weight,bias}`.
  Value blockNorm(Value x) {
    return layerNorm(x, param("norm.weight"), param("norm.bias"), 1e-5);
  }

  /// x [N, K] · wᵀ for w [M, K], scaled by `scale`, in x's element type.
  Value linear(Value x, Value w, double scale = 1.0) {
    Value product = matmulTransposedF32(b, x, w);
    Type element = elementTypeOf(x);
    if (scale == 1.0)
      return castElements(b, product, element);
    return mapElements(b, product, element,
                       [&](ImplicitLocOpBuilder &b, Value v) -> Value {
                         Value scaled =
                             arith::MulFOp::create(b, v, f32Constant(b, scale));
                         return fromF32(b, scaled, element);
                       });
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
    auto resultType = RankedTensorType::get(
        {type.getDimSize(0), heads, width}, type.getElementType());
    return tensor::ExpandShapeOp::create(
        b, resultType, x, ArrayRef<ReassociationIndices>{{0}, {1, 2}},
        ArrayRef<OpFoldResult>{sizesOf(b, x)[0], b.getIndexAttr(heads),
                               b.getIndexAttr(width)});
  }

  /// Element-wise a + b of two tensors of one type.
  Value add(Value lhs, Value rhs) {
    auto type = cast<RankedTensorType>(lhs.getType());
    AffineMap id = b.getMultiDimIdentityMap(type.getRank());
    Value init = tensor::EmptyOp::create(b, sizesOf(b, lhs),
                                         type.getElementType());
    return generic(b, {lhs, rhs}, init, {id, id, id},
                   iterators(type.getRank()),
                   [](ImplicitLocOpBuilder &b, ValueRange args) {
                     return arith::AddFOp::create(b, args[0], args[1]);
                   });
  }

  /// Concatenates [B, M, D] and [B, T, D] along the time dimension. (A
  /// generic rather than two tensor.insert_slice: the strided views those
  /// bufferize to crash upstream expand-strided-metadata in LLVM 22.)
  Value concatTime(Value first, Value second) {
    SmallVector<OpFoldResult> a = sizesOf(b, first), c = sizesOf(b, second);
    Value split = getValueOrCreateConstantIndexOp(b, b.getLoc(), a[1]);
    // Keep the length static when both parts are: a dynamic time dimension
    // next to the dynamic batch makes two dynamic sizes in one reshape
    // group, which upstream expand-strided-metadata cannot lower.
    std::optional<int64_t> m = getConstantIntValue(a[1]);
    std::optional<int64_t> t = getConstantIntValue(c[1]);
    OpFoldResult total =
        m && t ? OpFoldResult(b.getIndexAttr(*m + *t))
               : OpFoldResult(arith::AddIOp::create(
                     b, split,
                     getValueOrCreateConstantIndexOp(b, b.getLoc(), c[1])));
    Value init =
        tensor::EmptyOp::create(b, {a[0], total, a[2]}, elementTypeOf(first));
    AffineMap id = b.getMultiDimIdentityMap(3);
    return generic(
        b, {}, init, {id}, iterators(3),
        [&](ImplicitLocOpBuilder &b, ValueRange) -> Value {
          Value batch = linalg::IndexOp::create(b, 0);
          Value time = linalg::IndexOp::create(b, 1);
          Value column = linalg::IndexOp::create(b, 2);
          Value early =
              arith::CmpIOp::create(b, arith::CmpIPredicate::ult, time, split);
          auto branch = scf::IfOp::create(
              b, early,
              [&](OpBuilder &nested, Location loc) {
                Value v = tensor::ExtractOp::create(
                    nested, loc, first, ValueRange{batch, time, column});
                scf::YieldOp::create(nested, loc, v);
              },
              [&](OpBuilder &nested, Location loc) {
                Value shifted = arith::SubIOp::create(nested, loc, time, split);
                Value v = tensor::ExtractOp::create(
                    nested, loc, second, ValueRange{batch, shifted, column});
                scf::YieldOp::create(nested, loc, v);
              });
          return branch.getResult(0);
        });
  }

  /// Rotary embedding of x [B, L, H, F] at positions l - offset.
  Value rope(Value x, Value offset) {
    auto type = cast<RankedTensorType>(x.getType());
    int64_t width = type.getDimSize(3);
    int64_t rotated = 2 * (width / 4), half = rotated / 2;
    if (rotated == 0)
      return x;
    Type element = type.getElementType();
    AffineMap id = b.getMultiDimIdentityMap(4);
    Value init = tensor::EmptyOp::create(b, sizesOf(b, x), element);
    return generic(
        b, {x}, init, {id, id}, iterators(4),
        [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value position = indexToF32(
              b, arith::SubIOp::create(b, linalg::IndexOp::create(b, 1),
                                       offset));
          Value f = linalg::IndexOp::create(b, 3);
          Value cHalf = indexConstant(b, half);
          Value low = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, f,
                                            cHalf);
          Value inRotated = arith::CmpIOp::create(
              b, arith::CmpIPredicate::ult, f, indexConstant(b, rotated));
          Value pair = arith::SelectOp::create(
              b, low, f, arith::SubIOp::create(b, f, cHalf));
          Value partnerIndex = arith::SelectOp::create(
              b, low, arith::AddIOp::create(b, f, cHalf),
              arith::SubIOp::create(b, f, cHalf));
          partnerIndex = arith::SelectOp::create(b, inRotated, partnerIndex, f);
          Value inverseFrequency = math::ExpOp::create(
              b, arith::MulFOp::create(
                     b, indexToF32(b, pair),
                     f32Constant(b, 2.0 * kNegLogBase / double(rotated))));
          Value theta = arith::MulFOp::create(b, position, inverseFrequency);
          Value cos = math::CosOp::create(b, theta);
          Value sin = math::SinOp::create(b, theta);
          Value self = toF32(b, args[0]);
          Value partner = toF32(
              b, tensor::ExtractOp::create(
                     b, x,
                     ValueRange{linalg::IndexOp::create(b, 0),
                                linalg::IndexOp::create(b, 1),
                                linalg::IndexOp::create(b, 2), partnerIndex}));
          Value selfCos = arith::MulFOp::create(b, self, cos);
          Value partnerSin = arith::MulFOp::create(b, partner, sin);
          Value rotatedLow = arith::SubFOp::create(b, selfCos, partnerSin);
          Value rotatedHigh = arith::AddFOp::create(b, selfCos, partnerSin);
          Value rotatedValue =
              arith::SelectOp::create(b, low, rotatedLow, rotatedHigh);
          Value result =
              arith::SelectOp::create(b, inRotated, rotatedValue, self);
          return fromF32(b, result, element);
        });
  }

  /// The XL sinusoids pe [S, D] for distances 0 .. S-1, in f32.
  Value sinusoids(OpFoldResult distances, int64_t width) {
    Value init = tensor::EmptyOp::create(
        b, {distances, b.getIndexAttr(width)}, b.getF32Type());
    AffineMap id = b.getMultiDimIdentityMap(2);
    int64_t half = width / 2;
    return generic(
        b, {}, init, {id}, iterators(2),
        [&](ImplicitLocOpBuilder &b, ValueRange) -> Value {
          Value distance = indexToF32(b, linalg::IndexOp::create(b, 0));
          Value j = linalg::IndexOp::create(b, 1);
          Value cHalf = indexConstant(b, half);
          Value isSin =
              arith::CmpIOp::create(b, arith::CmpIPredicate::ult, j, cHalf);
          Value i = arith::SelectOp::create(
              b, isSin, j, arith::SubIOp::create(b, j, cHalf));
          Value omega = math::ExpOp::create(
              b, arith::MulFOp::create(
                     b, indexToF32(b, i),
                     f32Constant(b, 2.0 * kNegLogBase / double(width))));
          Value angle = arith::MulFOp::create(b, distance, omega);
          return arith::SelectOp::create(b, isSin, math::SinOp::create(b, angle),
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
template <typename AttentionOp>
Value buildAttention(AttentionOp op, LayerBuilder &lb,
                     function_ref<Value(Value)> values,
                     function_ref<Value(Value, Value)> project) {
  ImplicitLocOpBuilder &b = lb.b;
  Value x = op.getInput();
  int64_t heads = op.getHeads(), width = op.getHeadDim();
  double scale = std::pow(double(width), -0.25);

  Value h = lb.blockNorm(x);
  Value source = h;
  Value memoryLength = indexConstant(b, 0);
  if (Value memory = op.getMemory()) {
    source = lb.concatTime(lb.blockNorm(memory), h);
    memoryLength = dimOf(b, memory, 1);
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
    q = lb.rope(q, indexConstant(b, 0));
    k = lb.rope(k, memoryLength);
  } else if (op.getPos() == PosEncoding::xl) {
    int64_t modelWidth = cast<RankedTensorType>(x.getType()).getDimSize(2);
    Value pe = castElements(b, lb.sinusoids(sizesOf(b, source)[1], modelWidth),
                            elementTypeOf(x));
    rel = lb.splitHeads(lb.linear(pe, lb.param("pos"), scale), heads);
  }

  Value attended = moe::AttentionOp::create(b, q.getType(), q, k, v, rel);
  Value headsFlat = tensor::CollapseShapeOp::create(
      b, attended, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
  Value branch = project(headsFlat, hFlat);
  return lb.add(x, lb.unflatten(branch, x));
}

/// `[N, H, E]` router scores and their top-k for a SwitchHead selection.
std::pair<Value, Value> route(ImplicitLocOpBuilder &b, Value input,
                              Value weight, int64_t heads, int64_t experts,
                              int64_t k) {
  auto inputType = cast<RankedTensorType>(input.getType());
  int64_t tokens = inputType.getDimSize(0);
  Type f32 = b.getF32Type();
  auto scoresType = RankedTensorType::get({tokens, heads, experts}, f32);
  Value scores = moe::GateOp::create(b, scoresType, input, weight);
  auto topType = RankedTensorType::get({tokens, heads, k}, f32);
  auto indexType = RankedTensorType::get({tokens, heads, k}, b.getI32Type());
  auto topk = moe::TopKOp::create(b, TypeRange{topType, indexType}, scores, k,
                                  /*mask=*/Value());
  return {topk.getValues(), topk.getIndices()};
}

struct MhaDecomposition : public OpRewritePattern<MhaOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MhaOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter);
    int64_t heads = op.getHeads();
    Value result = buildAttention(
        op, lb,
        [&](Value source) {
          return lb.splitHeads(lb.linear(source, lb.param("v")), heads);
        },
        [&](Value attended, Value) {
          Value joined = tensor::CollapseShapeOp::create(
              lb.b, attended, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
          return lb.linear(joined, lb.param("o"));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct SwitchHeadDecomposition : public OpRewritePattern<SwitchHeadOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SwitchHeadOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter);
    ImplicitLocOpBuilder &b = lb.b;
    int64_t heads = op.getHeads(), experts = op.getExperts(), k = op.getK();
    int64_t width = op.getHeadDim();
    Value result = buildAttention(
        op, lb,
        [&](Value source) -> Value {
          // Source-side selection over memory and current tokens.
          auto [gates, indices] =
              route(b, source, lb.param("sel_v"), heads, experts, k);
          auto sourceType = cast<RankedTensorType>(source.getType());
          auto type = RankedTensorType::get(
              {sourceType.getDimSize(0), heads, width},
              sourceType.getElementType());
          return moe::ExpertProjOp::create(b, type, source, lb.param("v"),
                                           gates, indices);
        },
        [&](Value attended, Value queries) -> Value {
          // Destination-side selection from the current tokens.
          auto [gates, indices] =
              route(b, queries, lb.param("sel_o"), heads, experts, k);
          return moe::ExpertMergeOp::create(b, queries.getType(), attended,
                                            lb.param("o"), gates, indices);
        });
    rewriter.replaceOp(op, result);
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
    Value hidden = lb.linear(h, lb.param("up"));
    Type element = elementTypeOf(hidden);
    hidden = mapElements(lb.b, hidden, element,
                         [&](ImplicitLocOpBuilder &b, Value v) -> Value {
                           Value zero = arith::ConstantOp::create(
                               b, element, b.getFloatAttr(element, 0.0));
                           return arith::MaximumFOp::create(b, v, zero);
                         });
    Value branch = lb.linear(hidden, lb.param("down"));
    rewriter.replaceOp(op, lb.add(x, lb.unflatten(branch, x)));
    return success();
  }
};

struct SigmaMoeDecomposition : public OpRewritePattern<SigmaMoeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SigmaMoeOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter);
    ImplicitLocOpBuilder &b = lb.b;
    Value x = op.getInput();
    Value h = lb.flatten(lb.blockNorm(x));
    int64_t tokens = cast<RankedTensorType>(h.getType()).getDimSize(0);
    int64_t experts = op.getExperts(), k = op.getK();
    Type f32 = b.getF32Type();
    Value scores = moe::GateOp::create(
        b, RankedTensorType::get({tokens, experts}, f32), h, lb.param("sel"));
    auto topk = moe::TopKOp::create(
        b,
        TypeRange{RankedTensorType::get({tokens, k}, f32),
                  RankedTensorType::get({tokens, k}, b.getI32Type())},
        scores, k, /*mask=*/Value());
    Value branch = moe::ExpertMlpOp::create(
        b, h.getType(), h, lb.param("up"), lb.param("down"), topk.getValues(),
        topk.getIndices());
    rewriter.replaceOp(op, lb.add(x, lb.unflatten(branch, x)));
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
    ImplicitLocOpBuilder &b = lb.b;
    Value table = lb.param("weight"), tokens = op.getTokens();
    RankedTensorType type = op.getResult().getType();
    SmallVector<OpFoldResult> sizes = sizesOf(b, tokens);
    sizes.push_back(b.getIndexAttr(type.getDimSize(2)));
    Value init = tensor::EmptyOp::create(b, sizes, type.getElementType());
    MLIRContext *ctx = b.getContext();
    Value result = generic(
        b, {tokens}, init, {dimsMap(ctx, 3, {0, 1}), dimsMap(ctx, 3, {0, 1, 2})},
        iterators(3), [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value row = arith::IndexCastOp::create(b, b.getIndexType(), args[0]);
          return tensor::ExtractOp::create(
              b, table, ValueRange{row, linalg::IndexOp::create(b, 2)});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct LayerNormDecomposition : public OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    LayerBuilder lb(op, rewriter);
    rewriter.replaceOp(op,
                       lb.layerNorm(op.getInput(), lb.param("weight"),
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

/// mean over (b, t) of logsumexp(logits[b, t]) - logits[b, t, target].
struct CrossEntropyDecomposition : public OpRewritePattern<CrossEntropyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CrossEntropyOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    MLIRContext *ctx = b.getContext();
    Value logits = op.getLogits(), targets = op.getTargets();
    Type f32 = b.getF32Type();
    SmallVector<OpFoldResult> rows = sizesOf(b, targets);
    AffineMap all = dimsMap(ctx, 3, {0, 1, 2}), row = dimsMap(ctx, 3, {0, 1});

    Value maxima = generic(
        b, {logits},
        filled(b, rows, f32, -std::numeric_limits<double>::infinity()),
        {all, row}, iterators(2, 1),
        [](ImplicitLocOpBuilder &b, ValueRange args) {
          return arith::MaximumFOp::create(b, args[1], toF32(b, args[0]));
        });
    Value sums = generic(
        b, {logits, maxima}, filled(b, rows, f32, 0.0), {all, row, row},
        iterators(2, 1), [](ImplicitLocOpBuilder &b, ValueRange args) {
          Value shifted = arith::SubFOp::create(b, toF32(b, args[0]), args[1]);
          return arith::AddFOp::create(b, args[2],
                                       math::ExpOp::create(b, shifted));
        });
    // Per-token loss, summed into a 0-d tensor.
    Value total = generic(
        b, {targets, maxima, sums}, filled(b, {}, f32, 0.0),
        {dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {0, 1}),
         dimsMap(ctx, 2, {0, 1}), AffineMap::get(2, 0, {}, ctx)},
        iterators(0, 2), [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value target =
              arith::IndexCastOp::create(b, b.getIndexType(), args[0]);
          Value logit = toF32(
              b, tensor::ExtractOp::create(
                     b, logits,
                     ValueRange{linalg::IndexOp::create(b, 0),
                                linalg::IndexOp::create(b, 1), target}));
          Value logSumExp = arith::AddFOp::create(
              b, math::LogOp::create(b, args[2]), args[1]);
          Value loss = arith::SubFOp::create(b, logSumExp, logit);
          return arith::AddFOp::create(b, args[3], loss);
        });
    Value count = arith::MulIOp::create(b, dimOf(b, targets, 0),
                                        dimOf(b, targets, 1));
    Value countF32 = indexToF32(b, count);
    Value mean = mapElements(b, total, f32,
                             [&](ImplicitLocOpBuilder &b, Value v) -> Value {
                               return arith::DivFOp::create(b, v, countF32);
                             });
    rewriter.replaceOp(op, mean);
    return success();
  }
};

/// Decomposes every layer; checks first that their parameters are declared.
struct LmDecomposeLayersPass
    : public lm::impl::LmDecomposeLayersPassBase<LmDecomposeLayersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    WalkResult walk = module.walk([&](ParamOwnerOpInterface layer) {
      // Token-wise work reshapes [batch, time] into one token dimension;
      // upstream MLIR 22 cannot lower such a reshape when both are dynamic.
      for (Value result : layer->getResults()) {
        auto type = cast<RankedTensorType>(result.getType());
        if (type.isDynamicDim(0) && type.isDynamicDim(1)) {
          layer->emitOpError()
              << "expected a static sequence length (dim 1 of " << type
              << "): only the batch dimension may be dynamic";
          return WalkResult::interrupt();
        }
      }
      SmallVector<ParamDecl> params;
      layer.getParams(params, /*numLayers=*/1);
      for (const ParamDecl &param : params) {
        auto decl = symbols.lookupNearestSymbolFrom<ParamOp>(
            layer, StringAttr::get(&getContext(), param.name));
        if (!decl || decl.getType() != param.type) {
          layer->emitOpError()
              << "needs parameter '" << param.name << "' of type "
              << param.type
              << " to be declared; run lm-materialize-params first";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    patterns.add<EmbedDecomposition, LayerNormDecomposition, MhaDecomposition,
                 SwitchHeadDecomposition, FfnDecomposition,
                 SigmaMoeDecomposition, OutputDecomposition,
                 CrossEntropyDecomposition>(&getContext());
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(module, std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace
