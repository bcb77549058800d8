//===- MoeToLinalg.cpp - moe to linalg lowering ---------------------------===//
//
// The reference lowering of the `moe` ops: each becomes a few
// linalg.generic ops on tensors that follow docs/Semantics.md literally.
// The expert projections are dense contractions over all experts, weighted
// by dense gates, top-k is a rank computation per output slot, and attention
// (moe.attention and moe.attention_grad) materialises its score tensor. It
// is the unfused baseline that the fusions are checked against; the ops of
// the fusions lower here too (FlashAttention.cpp: row kernels of the
// flash-attention ops).
//
//===----------------------------------------------------------------------===//

#include "lib/Conversion/MoeToLinalg/MoeToLinalg.h"
#include "lib/Dialect/Moe/Utils/Kernels.h"
#include "lib/Conversion/Passes.h"
#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/Support/Debug.h"

#include <cmath>
#include <limits>

namespace mlir::switchyard {
#define GEN_PASS_DEF_CONVERTMOETOLINALGPASS
#include "lib/Conversion/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "convert-moe-to-linalg"

using namespace mlir;
using namespace mlir::switchyard;
using utils::IteratorType;

namespace {

//===----------------------------------------------------------------------===//
// moe.gate
//===----------------------------------------------------------------------===//

/// sigmoid(x · wᵀ) in f32, reshaped to [N, H, E] for a multi-head router.
struct GateLowering : public OpRewritePattern<moe::GateOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::GateOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value logits = matmulTransposedF32(b, op.getInput(), op.getWeight());
    Value scores =
        mapElements(b, logits, b.getF32Type(),
                    [](ImplicitLocOpBuilder &b, Value z) { return sigmoid(b, z); });
    RankedTensorType type = op.getResult().getType();
    if (type.getRank() == 3) {
      // The verifier guarantees static H and E.
      auto expanded = RankedTensorType::get(
          {cast<RankedTensorType>(scores.getType()).getDimSize(0),
           type.getDimSize(1), type.getDimSize(2)},
          type.getElementType());
      scores = tensor::ExpandShapeOp::create(
          b, expanded, scores, ArrayRef<ReassociationIndices>{{0}, {1, 2}},
          ArrayRef<OpFoldResult>{sizesOf(b, scores)[0],
                                 b.getIndexAttr(type.getDimSize(1)),
                                 b.getIndexAttr(type.getDimSize(2))});
    }
    replaceCast(rewriter, b, op, scores);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.topk
//===----------------------------------------------------------------------===//

/// Slot j of each row holds the expert whose rank is j, where the rank of e
/// counts the experts with a larger key or an equal key and a lower index;
/// masked experts have key -inf. O(k·E²) per row: a reference, not a kernel.
struct TopKLowering : public OpRewritePattern<moe::TopKOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::TopKOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value scores = op.getScores(), mask = op.getMask();
    RankedTensorType valuesType = op.getValues().getType();
    RankedTensorType indicesType = op.getIndices().getType();
    int64_t rank = valuesType.getRank();

    SmallVector<OpFoldResult> sizes = sizesOf(b, scores);
    Value experts = getValueOrCreateConstantIndexOp(b, b.getLoc(), sizes.back());
    sizes.back() = b.getIndexAttr(op.getK());
    Value valuesInit = tensor::EmptyOp::create(b, sizes, b.getF32Type());
    Value indicesInit =
        tensor::EmptyOp::create(b, sizes, indicesType.getElementType());
    AffineMap identity = b.getMultiDimIdentityMap(rank);

    auto body = [&](OpBuilder &nested, Location loc, ValueRange) {
      ImplicitLocOpBuilder b(loc, nested);
      SmallVector<Value> position;
      for (int64_t dim = 0; dim + 1 < rank; ++dim)
        position.push_back(loopIndex(b, dim));
      Value slot = loopIndex(b, rank - 1);
      Value zero = indexConstant(b, 0), one = indexConstant(b, 1);
      Value negInf =
          f32Constant(b, -std::numeric_limits<float>::infinity());

      auto at = [&](Value expert) {
        SmallVector<Value> index(position);
        index.push_back(expert);
        return index;
      };
      auto key = [&](ImplicitLocOpBuilder &b, Value expert) -> Value {
        Value score = tensor::ExtractOp::create(b, scores, at(expert));
        if (!mask)
          return score;
        Value dropped = tensor::ExtractOp::create(b, mask, at(expert));
        return arith::SelectOp::create(b, dropped, negInf, score);
      };

      auto search = scf::ForOp::create(
          b, zero, experts, one, ValueRange{zero},
          [&](OpBuilder &nested, Location loc, Value e, ValueRange found) {
            ImplicitLocOpBuilder b(loc, nested);
            Value keyE = key(b, e);
            auto count = scf::ForOp::create(
                b, zero, experts, one, ValueRange{zero},
                [&](OpBuilder &nested, Location loc, Value other,
                    ValueRange rankSoFar) {
                  ImplicitLocOpBuilder b(loc, nested);
                  Value keyOther = key(b, other);
                  Value larger = arith::CmpFOp::create(
                      b, arith::CmpFPredicate::OGT, keyOther, keyE);
                  Value equal = arith::CmpFOp::create(
                      b, arith::CmpFPredicate::OEQ, keyOther, keyE);
                  Value lower = arith::CmpIOp::create(
                      b, arith::CmpIPredicate::ult, other, e);
                  Value ahead = arith::OrIOp::create(
                      b, larger, arith::AndIOp::create(b, equal, lower));
                  Value step = arith::SelectOp::create(b, ahead, one, zero);
                  scf::YieldOp::create(
                      b, ValueRange{arith::AddIOp::create(b, rankSoFar[0],
                                                          step)});
                });
            Value isSlot = arith::CmpIOp::create(
                b, arith::CmpIPredicate::eq, count.getResult(0), slot);
            scf::YieldOp::create(
                b, ValueRange{arith::SelectOp::create(b, isSlot, e, found[0])});
          });
      Value chosen = search.getResult(0);
      Value value = tensor::ExtractOp::create(b, scores, at(chosen));
      Value index = arith::IndexCastOp::create(
          b, indicesType.getElementType(), chosen);
      linalg::YieldOp::create(b, ValueRange{value, index});
    };
    auto generic = linalg::GenericOp::create(
        b, TypeRange{valuesInit.getType(), indicesInit.getType()},
        ValueRange{}, ValueRange{valuesInit, indicesInit},
        {identity, identity}, iterators(rank), body);
    replaceCast(rewriter, b, op, generic.getResults());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.expert_proj and moe.expert_merge
//===----------------------------------------------------------------------===//

/// The dense formulation splits the stacked weights into heads and experts
/// with expand_shape, which needs them static where the weight's first
/// dimension is (and LLVM 22's expand-strided-metadata fails on the
/// dynamic ones); the lowered models always have a static head count.
LogicalResult needStaticHeads(PatternRewriter &rewriter, Operation *op,
                              Value gates) {
  if (!cast<RankedTensorType>(gates.getType()).isDynamicDim(1))
    return success();
  return rewriter.notifyMatchFailure(
      op, "the dense expert lowering needs a static head count");
}

/// The unfused route: the dense all-experts formulation, as PyTorch's dense
/// implementation computes it. Every token is projected through every expert
/// of every head: for V one contraction over the weight viewed as
/// [H, E, D, F], for O one matmul [N, H·E·F] · [H·E·F, D] (the weight's
/// rows (h, e, f) flattened); the routes then only select and scale,
/// through the dense gates
/// G[n, h, e] = Σ_j gates[n, h, j] · [indices[n, h, j] = e] (0 for an
/// expert no route picks). That costs E/k times the MACs of the routes, all
/// of them in plain matmuls that the targets' matmul kernels take (the CPU's
/// register-blocked kernels, the GPU's tensor cores), where the routes'
/// gathers do not vectorize. moe-fuse-expert-projection replaces it by row
/// kernels that gather per route (FusedKernels.cpp).
class DenseExperts {
public:
  DenseExperts(ImplicitLocOpBuilder &b, Value gates, Value indices,
               Value weight)
      : b(b), gates(gates), indices(indices) {
    auto type = cast<RankedTensorType>(weight.getType());
    staticHeads = cast<RankedTensorType>(gates.getType()).getDimSize(1);
    heads = sizesOf(b, gates)[1];
    if (!ShapedType::isDynamic(staticHeads) && !type.isDynamicDim(0)) {
      staticExperts = type.getDimSize(0) / staticHeads;
      experts = b.getIndexAttr(staticExperts);
    } else {
      experts = expertsPerHead(b, weight, gates);
    }
  }

  /// [N, H·E·W] with columns (h, e, w) as [N, H, E, W].
  Value split(Value t, OpFoldResult width) {
    auto type = cast<RankedTensorType>(t.getType());
    std::optional<int64_t> staticWidth = getConstantIntValue(width);
    auto resultType = RankedTensorType::get(
        {type.getDimSize(0), staticHeads, staticExperts,
         staticWidth ? *staticWidth : ShapedType::kDynamic},
        type.getElementType());
    return tensor::ExpandShapeOp::create(
        b, resultType, t, ArrayRef<ReassociationIndices>{{0}, {1, 2, 3}},
        ArrayRef<OpFoldResult>{sizesOf(b, t)[0], heads, experts, width});
  }

  /// A stacked weight [H·E, A, B] as [H, E, A, B].
  Value byHead(Value w) {
    auto type = cast<RankedTensorType>(w.getType());
    SmallVector<OpFoldResult> sizes = sizesOf(b, w);
    auto resultType = RankedTensorType::get(
        {staticHeads, staticExperts, type.getDimSize(1), type.getDimSize(2)},
        type.getElementType());
    return tensor::ExpandShapeOp::create(
        b, resultType, w, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}},
        ArrayRef<OpFoldResult>{heads, experts, sizes[1], sizes[2]});
  }

  /// A weight gradient [H, E, A, B] back as [H·E, A, B].
  Value stacked(Value w) {
    return tensor::CollapseShapeOp::create(
        b, w, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
  }

  /// [N, H, E, W] as [N, H·E·W].
  Value join(Value t) {
    return tensor::CollapseShapeOp::create(
        b, t, ArrayRef<ReassociationIndices>{{0}, {1, 2, 3}});
  }

  /// G[n, h, e] in f32, over (n, h, e | j).
  Value denseGates() {
    MLIRContext *ctx = b.getContext();
    SmallVector<OpFoldResult> sizes = sizesOf(b, gates);
    sizes[2] = experts;
    return generic(
        b, {gates, indices}, filled(b, sizes, b.getF32Type(), 0.0),
        {dimsMap(ctx, 4, {0, 1, 3}), dimsMap(ctx, 4, {0, 1, 3}),
         dimsMap(ctx, 4, {0, 1, 2})},
        iterators(3, 1), [](ImplicitLocOpBuilder &b, ValueRange args) {
          Value e = arith::IndexCastOp::create(b, b.getIndexType(), args[1]);
          Value match = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, e,
                                              loopIndex(b, 2));
          Value gate = arith::SelectOp::create(b, match, toF32(b, args[0]),
                                               f32Constant(b, 0.0));
          return arith::AddFOp::create(b, args[2], gate);
        });
  }

  /// spread[n, h, e, f] = G[n, h, e] · v[n, h, f]: each head's row once
  /// per expert, scaled by the expert's dense gate.
  Value spread(Value g, Value v) {
    MLIRContext *ctx = b.getContext();
    SmallVector<OpFoldResult> sizes = sizesOf(b, g);
    sizes.push_back(sizesOf(b, v)[2]);
    Value init = tensor::EmptyOp::create(b, sizes, b.getF32Type());
    return generic(
        b, {g, v}, init,
        {dimsMap(ctx, 4, {0, 1, 2}), dimsMap(ctx, 4, {0, 1, 3}),
         dimsMap(ctx, 4, {0, 1, 2, 3})},
        iterators(4), [](ImplicitLocOpBuilder &b, ValueRange args) {
          return arith::MulFOp::create(b, args[0], toF32(b, args[1]));
        });
  }

  /// combine[n, h, f] = Σ_e G[n, h, e] · p[n, h, e, f], over (n, h, f | e).
  Value combine(Value g, Value p) {
    MLIRContext *ctx = b.getContext();
    SmallVector<OpFoldResult> sizes = sizesOf(b, p);
    sizes.erase(sizes.begin() + 2);
    return generic(b, {p, g}, filled(b, sizes, b.getF32Type(), 0.0),
                   {dimsMap(ctx, 4, {0, 1, 3, 2}), dimsMap(ctx, 4, {0, 1, 3}),
                    dimsMap(ctx, 4, {0, 1, 2})},
                   iterators(3, 1), [](ImplicitLocOpBuilder &b, ValueRange args) {
                     Value gated = arith::MulFOp::create(b, args[1], args[0]);
                     return arith::AddFOp::create(b, args[2], gated);
                   });
  }

  /// The gate gradients: dg[n, h, j] = Σ_f v[n, h, f] · p[n, h, e, f] at
  /// e = indices[n, h, j], with `p` each expert's dense projection or its
  /// adjoint. The dots are dense ([N, H, E]); the routes read theirs.
  Value routeDots(Value v, Value p) {
    MLIRContext *ctx = b.getContext();
    SmallVector<OpFoldResult> sizes = sizesOf(b, p);
    sizes.pop_back();
    Value dots = contractF32(b, v, dimsMap(ctx, 4, {0, 1, 3}), p,
                             dimsMap(ctx, 4, {0, 1, 2, 3}),
                             dimsMap(ctx, 4, {0, 1, 2}), iterators(3, 1),
                             sizes);
    AffineMap id = b.getMultiDimIdentityMap(3);
    Value init = tensor::EmptyOp::create(b, sizesOf(b, indices),
                                         b.getF32Type());
    return generic(b, {indices}, init, {id, id}, iterators(3),
                   [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                     Value e = arith::IndexCastOp::create(
                         b, b.getIndexType(), args[0]);
                     return tensor::ExtractOp::create(
                         b, dots, ValueRange{loopIndex(b, 0), loopIndex(b, 1),
                                             e});
                   });
  }

private:
  ImplicitLocOpBuilder &b;
  Value gates, indices;
  int64_t staticHeads, staticExperts = ShapedType::kDynamic;
  OpFoldResult heads, experts;
};

/// p[n, h, e, f] = Σ_d x[n, d] · W[h, e, d, f]: every token through every
/// expert, over (n, h, e, f | d).
Value projectAll(ImplicitLocOpBuilder &b, Value x, Value w4) {
  MLIRContext *ctx = b.getContext();
  SmallVector<OpFoldResult> w = sizesOf(b, w4);
  return contractF32(b, x, dimsMap(ctx, 5, {0, 4}), w4,
                     dimsMap(ctx, 5, {1, 2, 4, 3}),
                     dimsMap(ctx, 5, {0, 1, 2, 3}), iterators(4, 1),
                     {sizesOf(b, x)[0], w[0], w[1], w[3]});
}

/// out[n, h, f] = Σ_e G[n, h, e] · Σ_d x[n, d] · W[h·E + e, d, f].
struct ExpertProjLowering : public OpRewritePattern<moe::ExpertProjOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::ExpertProjOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(needStaticHeads(rewriter, op, op.getGates())))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value w = op.getWeight();
    DenseExperts dense(b, op.getGates(), op.getIndices(), w);
    Value p = projectAll(b, op.getInput(), dense.byHead(w));
    Value acc = dense.combine(dense.denseGates(), p);
    rewriter.replaceOp(op, finish(b, acc, op.getResult()));
    return success();
  }
};

/// The O projection's stacked weight [H·E, F, D] as the matrix [H·E·F, D].
Value mergeRows(ImplicitLocOpBuilder &b, Value w) {
  return tensor::CollapseShapeOp::create(
      b, w, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
}

/// y[n, o] = Σ_{(h, e, f)} A[n, (h, e, f)] · W[(h, e, f), o], A = G · heads:
/// one matmul [N, H·E·F] · [H·E·F, D].
struct ExpertMergeLowering : public OpRewritePattern<moe::ExpertMergeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::ExpertMergeOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(needStaticHeads(rewriter, op, op.getGates())))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    MLIRContext *ctx = b.getContext();
    Value w = op.getWeight();
    DenseExperts dense(b, op.getGates(), op.getIndices(), w);
    Value a = dense.join(dense.spread(dense.denseGates(), op.getHeads()));
    Value acc = contractF32(b, a, dimsMap(ctx, 3, {0, 2}), mergeRows(b, w),
                            dimsMap(ctx, 3, {2, 1}), dimsMap(ctx, 3, {0, 1}),
                            iterators(2, 1),
                            {sizesOf(b, a)[0], sizesOf(b, w)[2]});
    rewriter.replaceOp(op, finish(b, acc, op.getResult()));
    return success();
  }
};

/// The gradients in the same dense formulation, with C = G · dout
/// [N, H, E, F] the adjoint of every expert's projection:
///   dx[n, d]       = Σ_{h, e, f} C[n, h, e, f] · W[h, e, d, f]
///   dW[h, e, d, f] = Σ_n x[n, d] · C[n, h, e, f]
///   dg[n, h, j]    = Σ_f dout[n, h, f] · P[n, h, e, f] at e = i[n, h, j],
/// P the forward's dense projection, recomputed.
struct ExpertProjGradLowering : public OpRewritePattern<moe::ExpertProjGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::ExpertProjGradOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(needStaticHeads(rewriter, op, op.getGates())))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value w = op.getWeight();
    MLIRContext *ctx = b.getContext();
    Value x = op.getInput(), dout = op.getResultGrad();
    DenseExperts dense(b, op.getGates(), op.getIndices(), w);
    Value c = dense.spread(dense.denseGates(), dout);
    // Per expert, with the weight as [H, E, D, F]: dx over (n, d | h, e, f);
    // dW over (h, e, d, f | n). (With the weight flattened to [D, H·E·F],
    // one matmul each, the CPU's loss-and-gradient is slower.)
    Value w4 = dense.byHead(w);
    Value dx = contractF32(b, c, dimsMap(ctx, 5, {0, 2, 3, 4}), w4,
                           dimsMap(ctx, 5, {2, 3, 1, 4}),
                           dimsMap(ctx, 5, {0, 1}), iterators(2, 3),
                           sizesOf(b, x));
    Value dw = dense.stacked(
        contractF32(b, x, dimsMap(ctx, 5, {4, 2}), c,
                    dimsMap(ctx, 5, {4, 0, 1, 3}),
                    dimsMap(ctx, 5, {0, 1, 2, 3}), iterators(4, 1),
                    sizesOf(b, w4)));
    Value dg = dense.routeDots(dout, projectAll(b, x, w4));
    rewriter.replaceOp(op, {finish(b, dx, op.getInputGrad()),
                            finish(b, dw, op.getWeightGrad()),
                            castTo(b, dg, op.getGatesGrad().getType())});
    return success();
  }
};

/// With A = G · heads as in the forward, Wr the weight as [H·E·F, D] and
/// dA = dy · Wrᵀ the adjoint of every expert's input [N, H·E·F]:
///   dheads[n, h, f] = Σ_e G[n, h, e] · dA[n, h, e, f]
///   dg[n, h, j]     = Σ_f heads[n, h, f] · dA[n, h, e, f] at e = i[n, h, j]
///   dWr             = Aᵀ · dy
struct ExpertMergeGradLowering
    : public OpRewritePattern<moe::ExpertMergeGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::ExpertMergeGradOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(needStaticHeads(rewriter, op, op.getGates())))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value w = op.getWeight();
    MLIRContext *ctx = b.getContext();
    Value heads = op.getHeads(), dy = op.getResultGrad();
    DenseExperts dense(b, op.getGates(), op.getIndices(), w);
    Value rows = mergeRows(b, w);
    Value g = dense.denseGates();
    // dA over (n, c | o); dWr over (c, o | n).
    Value da = dense.split(
        contractF32(b, dy, dimsMap(ctx, 3, {0, 2}), rows,
                    dimsMap(ctx, 3, {1, 2}), dimsMap(ctx, 3, {0, 1}),
                    iterators(2, 1), {sizesOf(b, dy)[0], sizesOf(b, rows)[0]}),
        sizesOf(b, w)[1]);
    Value dwRows = contractF32(b, dense.join(dense.spread(g, heads)),
                               dimsMap(ctx, 3, {2, 0}), dy,
                               dimsMap(ctx, 3, {2, 1}),
                               dimsMap(ctx, 3, {0, 1}), iterators(2, 1),
                               sizesOf(b, rows));
    SmallVector<OpFoldResult> wSizes = sizesOf(b, w);
    auto f32Weight = RankedTensorType::get(
        cast<RankedTensorType>(w.getType()).getShape(), b.getF32Type());
    Value dw = tensor::ExpandShapeOp::create(
        b, f32Weight, dwRows, ArrayRef<ReassociationIndices>{{0, 1}, {2}},
        wSizes);
    rewriter.replaceOp(op, {finish(b, dense.combine(g, da), op.getHeadsGrad()),
                            finish(b, dw, op.getWeightGrad()),
                            castTo(b, dense.routeDots(heads, da),
                                   op.getGatesGrad().getType())});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.expert_mlp
//===----------------------------------------------------------------------===//

/// hidden[n, j, g] = ReLU(Σ_d x[n, d] · up[i[n, j], d, g]) over (n, j, g | d),
/// then y[n, o] = Σ_j Σ_g gate[n, j] · hidden[n, j, g] · down[i[n, j], g, o]
/// over (n, o | j, g).
struct ExpertMlpLowering : public OpRewritePattern<moe::ExpertMlpOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::ExpertMlpOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    MLIRContext *ctx = b.getContext();
    Value x = op.getInput(), up = op.getUp(), down = op.getDown();
    Value gates = op.getGates(), indices = op.getIndices();

    SmallVector<OpFoldResult> hiddenSizes = sizesOf(b, gates);
    hiddenSizes.push_back(sizesOf(b, up)[2]);
    Value hiddenInit = filled(b, hiddenSizes, b.getF32Type(), 0.0);
    Value hidden = generic(
        b, {x, indices}, hiddenInit,
        {dimsMap(ctx, 4, {0, 3}), dimsMap(ctx, 4, {0, 1}),
         dimsMap(ctx, 4, {0, 1, 2})},
        iterators(3, 1), [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value e = arith::IndexCastOp::create(b, b.getIndexType(), args[1]);
          Value weight = tensor::ExtractOp::create(
              b, up, ValueRange{e, loopIndex(b, 3), loopIndex(b, 2)});
          Value product =
              arith::MulFOp::create(b, toF32(b, args[0]), toF32(b, weight));
          return arith::AddFOp::create(b, args[2], product);
        });
    hidden = mapElements(b, hidden, b.getF32Type(),
                         [](ImplicitLocOpBuilder &b, Value v) -> Value {
                           return arith::MaximumFOp::create(
                               b, v, f32Constant(b, 0.0f));
                         });

    Value init = filled(b, {sizesOf(b, x)[0], sizesOf(b, down)[2]},
                        b.getF32Type(), 0.0);
    Value acc = generic(
        b, {hidden, gates, indices}, init,
        {dimsMap(ctx, 4, {0, 2, 3}), dimsMap(ctx, 4, {0, 2}),
         dimsMap(ctx, 4, {0, 2}), dimsMap(ctx, 4, {0, 1})},
        iterators(2, 2), [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value e = arith::IndexCastOp::create(b, b.getIndexType(), args[2]);
          Value weight = tensor::ExtractOp::create(
              b, down, ValueRange{e, loopIndex(b, 3), loopIndex(b, 1)});
          Value product = arith::MulFOp::create(
              b, arith::MulFOp::create(b, args[0], toF32(b, weight)), args[1]);
          return arith::AddFOp::create(b, args[3], product);
        });
    rewriter.replaceOp(op, finish(b, acc, op.getResult()));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.attention
//===----------------------------------------------------------------------===//

/// Softmax weights (see attentionWeights()), then the weighted values.
struct AttentionLowering : public OpRewritePattern<moe::AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::AttentionOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    MLIRContext *ctx = b.getContext();
    Value weights = attentionWeights(b, op.getQuery(), op.getKey(), op.getRel(),
                                     op.getPosition());
    // result[b, t, a, f] = Σ_u weights[b, a, t, u] · v[b, u, a, f]
    // over (b, t, a, f | u).
    Value acc = contractF32(b, weights, dimsMap(ctx, 5, {0, 2, 1, 4}),
                            op.getValue(), dimsMap(ctx, 5, {0, 4, 2, 3}),
                            dimsMap(ctx, 5, {0, 1, 2, 3}), iterators(4, 1),
                            sizesOf(b, op.getQuery()));
    rewriter.replaceOp(op, finish(b, acc, op.getResult()));
    return success();
  }
};

/// The softmax weights themselves (attentionWeights()).
struct AttentionWeightsLowering
    : public OpRewritePattern<moe::AttentionWeightsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::AttentionWeightsOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    rewriter.replaceOp(
        op, attentionWeights(b, op.getQuery(), op.getKey(), op.getRel()));
    return success();
  }
};

/// With P the softmax weights (recomputed, [B, H, T, S]) and
/// ds = P·(dP - Σ_u P·dP), every product a contraction:
///   dv = Σ_t P · do,  dP = do · v,  dq = Σ_u ds · k + Σ_δ dsrel · rel,
///   dk = Σ_t ds · q,  drel[δ] = Σ_{b, t} dsrel[.., t, δ] · q,
/// where dsrel = skew(ds) holds ds[b, a, t, t + shift - δ] by distance.
struct AttentionGradLowering : public OpRewritePattern<moe::AttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    MLIRContext *ctx = b.getContext();
    Value q = op.getQuery(), k = op.getKey();
    Value v = op.getValue(), rel = op.getRel();
    Value dout = op.getResultGrad();
    Type f32 = b.getF32Type();
    Value p = attentionWeights(b, q, k, rel, op.getPosition());
    SmallVector<OpFoldResult> pSizes = sizesOf(b, p);
    // Rows of P are (b, a, t) and its columns the keys u: over loop dims
    // (b, x, a, f | y) a [B, L, H, F] operand reads (b, x/y, a, f).
    AffineMap byRow = dimsMap(ctx, 5, {0, 1, 2, 3});

    // dv[b, u, a, f] over (b, u, a, f | t).
    Value dv = contractF32(b, p, dimsMap(ctx, 5, {0, 2, 4, 1}), dout,
                           dimsMap(ctx, 5, {0, 4, 2, 3}), byRow,
                           iterators(4, 1), sizesOf(b, v));
    // dP[b, a, t, u] over (b, a, t, u | f).
    Value dp = contractF32(b, dout, dimsMap(ctx, 5, {0, 2, 1, 4}), v,
                           dimsMap(ctx, 5, {0, 3, 1, 4}), byRow,
                           iterators(4, 1), pSizes);
    // Row sums Σ_u P·dP over (b, a, t | u), then ds.
    AffineMap id4 = b.getMultiDimIdentityMap(4);
    AffineMap rows = dimsMap(ctx, 4, {0, 1, 2});
    Value rowSums = contractF32(b, p, id4, dp, id4, rows, iterators(3, 1),
                                {pSizes[0], pSizes[1], pSizes[2]});
    Value ds =
        generic(b, {p, dp, rowSums}, tensor::EmptyOp::create(b, pSizes, f32),
                {id4, id4, rows, id4}, iterators(4),
                [](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                  return arith::MulFOp::create(
                      b, args[0], arith::SubFOp::create(b, args[1], args[2]));
                });
    // dq[b, t, a, f] over (b, t, a, f | u); dk[b, u, a, f] over
    // (b, u, a, f | t).
    Value dq = contractF32(b, ds, dimsMap(ctx, 5, {0, 2, 1, 4}), k,
                           dimsMap(ctx, 5, {0, 4, 2, 3}), byRow,
                           iterators(4, 1), sizesOf(b, q));
    Value dk = contractF32(b, ds, dimsMap(ctx, 5, {0, 2, 4, 1}), q,
                           dimsMap(ctx, 5, {0, 4, 2, 3}), byRow,
                           iterators(4, 1), sizesOf(b, k));
    Value drel;
    if (rel) {
      Value shift = op.getPosition();
      if (!shift)
        shift = arith::SubIOp::create(b, dimOf(b, k, 1), dimOf(b, q, 1));
      SmallVector<OpFoldResult> relSizes = sizesOf(b, rel);
      Value dsrel = skewed(b, ds, relSizes[0], shift);
      // dq += Σ_δ dsrel[b, a, t, δ] · rel[δ, a, f] over (b, t, a, f | δ).
      dq = accumulateF32(b, dsrel, dimsMap(ctx, 5, {0, 2, 1, 4}), rel,
                         dimsMap(ctx, 5, {4, 2, 3}), byRow, iterators(4, 1),
                         dq);
      // drel[δ, a, f] over (δ, a, f | b, t).
      drel = contractF32(b, dsrel, dimsMap(ctx, 5, {3, 1, 4, 0}), q,
                         dimsMap(ctx, 5, {3, 4, 1, 2}),
                         dimsMap(ctx, 5, {0, 1, 2}), iterators(3, 2),
                         relSizes);
    }
    SmallVector<Value> results = {finish(b, dq, op.getQueryGrad()),
                                  finish(b, dk, op.getKeyGrad()),
                                  finish(b, dv, op.getValueGrad())};
    if (rel)
      results.push_back(finish(b, drel, op.getRelGrad()));
    rewriter.replaceOp(op, results);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Dense building blocks
//===----------------------------------------------------------------------===//

/// scale · x · wᵀ, accumulated in f32, in the result's element type.
struct LinearLowering : public OpRewritePattern<moe::LinearOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::LinearOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value product = matmulTransposedF32(b, op.getInput(), op.getWeight());
    double scale = op.getScale().convertToDouble();
    Type element = op.getResult().getType().getElementType();
    Value result =
        scale == 1.0
            ? castElements(b, product, element)
            : mapElements(b, product, element,
                          [&](ImplicitLocOpBuilder &b, Value v) -> Value {
                            Value scaled = arith::MulFOp::create(
                                b, v, f32Constant(b, scale));
                            return fromF32(b, scaled, element);
                          });
    replaceCast(rewriter, b, op, result);
    return success();
  }
};

/// Mean and variance reductions over the last dimension, then the affine
/// normalisation, all in f32.
struct LayerNormLowering : public OpRewritePattern<moe::LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    MLIRContext *ctx = b.getContext();
    Value x = op.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    unsigned rank = type.getRank();
    auto [mean, rstd] =
        layerNormStatistics(b, x, op.getEps().convertToDouble());
    AffineMap id = b.getMultiDimIdentityMap(rank);
    AffineMap pre = rowMap(ctx, rank), last = dimsMap(ctx, rank, {rank - 1});
    Type element = type.getElementType();
    Value init = tensor::EmptyOp::create(b, sizesOf(b, x), element);
    Value result = generic(
        b, {x, mean, rstd, op.getWeight(), op.getBias()}, init,
        {id, pre, pre, last, last, id}, iterators(rank),
        [&](ImplicitLocOpBuilder &b, ValueRange args) {
          Value centred = arith::SubFOp::create(b, toF32(b, args[0]), args[1]);
          Value normed = arith::MulFOp::create(b, centred, args[2]);
          Value scaled = arith::MulFOp::create(b, normed, toF32(b, args[3]));
          Value shifted = arith::AddFOp::create(b, scaled, toF32(b, args[4]));
          return fromF32(b, shifted, element);
        });
    replaceCast(rewriter, b, op, result);
    return success();
  }
};

/// The rotation of docs/Semantics.md, one generic (see rotary()).
struct RopeLowering : public OpRewritePattern<moe::RopeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::RopeOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getInput().getType().isDynamicDim(3))
      return rewriter.notifyMatchFailure(op, "dynamic head width");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    replaceCast(rewriter, b, op,
                rotary(b, op.getInput(), op.getOffset(), /*inverse=*/false,
                       op.getStart()));
    return success();
  }
};

/// max(x, 0), element-wise.
struct ReluLowering : public OpRewritePattern<moe::ReluOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::ReluOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Type element = op.getResult().getType().getElementType();
    replaceCast(
        rewriter, b, op, mapElements(b, op.getInput(), element,
                        [&](ImplicitLocOpBuilder &b, Value v) -> Value {
                          Value zero = arith::ConstantOp::create(
                              b, element, b.getFloatAttr(element, 0.0));
                          return arith::MaximumFOp::create(b, v, zero);
                        }));
    return success();
  }
};

/// A gather generic over [B, T, D].
struct EmbedLowering : public OpRewritePattern<moe::EmbedOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::EmbedOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    MLIRContext *ctx = b.getContext();
    Value table = op.getTable(), tokens = op.getTokens();
    SmallVector<OpFoldResult> sizes = sizesOf(b, tokens);
    sizes.push_back(sizesOf(b, table)[1]);
    Value init = tensor::EmptyOp::create(
        b, sizes, op.getResult().getType().getElementType());
    Value result = generic(
        b, {tokens}, init, {dimsMap(ctx, 3, {0, 1}), dimsMap(ctx, 3, {0, 1, 2})},
        iterators(3), [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value row = arith::IndexCastOp::create(b, b.getIndexType(), args[0]);
          return tensor::ExtractOp::create(b, table,
                                           ValueRange{row, loopIndex(b, 2)});
        });
    replaceCast(rewriter, b, op, result);
    return success();
  }
};

/// moe.embed_grad: the one-hot matrix of the tokens [N, V] (f32)
/// contracted with dy [N, D] over the tokens, a matmul the targets' kernels
/// take (V·N·D multiply-adds at matmul speed; one reduction dimension, which
/// the GPU's tensor-core kernels need); or, with `scatter`, each row of dy
/// added into its id's row: an scf.forall over blocks of kScatterColumns
/// columns (independent: on the CPU, in parallel), each a loop over the
/// tokens in order (N·D additions).
struct EmbedGradLowering : public OpRewritePattern<moe::EmbedGradOp> {
  EmbedGradLowering(MLIRContext *context, bool scatter)
      : OpRewritePattern(context), scatter(scatter) {}

  static constexpr int64_t kScatterColumns = 64;

  LogicalResult matchAndRewrite(moe::EmbedGradOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value result = scatter ? scatterRows(b, op) : oneHotProduct(b, op);
    replaceCast(rewriter, b, op, result);
    return success();
  }

private:
  static Value oneHotProduct(ImplicitLocOpBuilder &b, moe::EmbedGradOp op) {
    MLIRContext *ctx = b.getContext();
    Value tokens = op.getTokens(), dy = op.getDy();
    SmallVector<OpFoldResult> table = sizesOf(b, op.getResult());
    SmallVector<OpFoldResult> oneHotSizes = {sizesOf(b, tokens)[0], table[0]};
    Type f32 = b.getF32Type();
    Value oneHot = generic(
        b, {tokens}, tensor::EmptyOp::create(b, oneHotSizes, f32),
        {dimsMap(ctx, 2, {0}), dimsMap(ctx, 2, {0, 1})}, iterators(2),
        [](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value token =
              arith::IndexCastOp::create(b, b.getIndexType(), args[0]);
          Value hit = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, token,
                                            loopIndex(b, 1));
          return arith::SelectOp::create(b, hit, f32Constant(b, 1.0),
                                         f32Constant(b, 0.0));
        });
    // Over (v, d | n), n the token.
    return contractF32(b, oneHot, dimsMap(ctx, 3, {2, 0}), dy,
                       dimsMap(ctx, 3, {2, 1}), dimsMap(ctx, 3, {0, 1}),
                       iterators(2, 1), table);
  }

  static Value scatterRows(ImplicitLocOpBuilder &b, moe::EmbedGradOp op) {
    Value tokens = op.getTokens(), dy = op.getDy();
    SmallVector<OpFoldResult> table = sizesOf(b, op.getResult());
    Value width = getValueOrCreateConstantIndexOp(b, b.getLoc(), table[1]);
    Value count = dimOf(b, tokens, 0);
    Value zero = filled(b, table, b.getF32Type(), 0.0);
    OpFoldResult blocks =
        getConstantIntValue(table[1])
            ? OpFoldResult(b.getIndexAttr(
                  llvm::divideCeil(*getConstantIntValue(table[1]),
                                   kScatterColumns)))
            : OpFoldResult(arith::CeilDivUIOp::create(
                  b, width, indexConstant(b, kScatterColumns)));
    auto forall = scf::ForallOp::create(b, ArrayRef<OpFoldResult>{blocks},
                                        ValueRange{zero}, std::nullopt);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getTerminator());
    Value first = arith::MulIOp::create(b, forall.getInductionVars()[0],
                                        indexConstant(b, kScatterColumns));
    Value columns = arith::MinUIOp::create(
        b, indexConstant(b, kScatterColumns),
        arith::SubIOp::create(b, width, first));
    Value out = forall.getRegionIterArgs()[0];
    OpFoldResult one = b.getIndexAttr(1), origin = b.getIndexAttr(0);
    SmallVector<OpFoldResult> blockOffsets{origin, first},
        blockSizes{table[0], columns}, units{one, one};
    Value block = tensor::ExtractSliceOp::create(b, out, blockOffsets,
                                                 blockSizes, units);
    auto rowType = RankedTensorType::get({ShapedType::kDynamic}, b.getF32Type());
    auto loop = scf::ForOp::create(
        b, indexConstant(b, 0), count, indexConstant(b, 1), ValueRange{block},
        [&](OpBuilder &nested, Location loc, Value n, ValueRange acc) {
          ImplicitLocOpBuilder b(loc, nested);
          Value id = arith::IndexCastOp::create(
              b, b.getIndexType(), tensor::ExtractOp::create(b, tokens, n));
          SmallVector<OpFoldResult> rowSizes{one, columns};
          Value sum = tensor::ExtractSliceOp::create(
              b, rowType, acc[0], ArrayRef<OpFoldResult>{id, origin},
              rowSizes, units);
          Value add = tensor::ExtractSliceOp::create(
              b, rowType, dy, ArrayRef<OpFoldResult>{n, first}, rowSizes,
              units);
          AffineMap id1 = b.getMultiDimIdentityMap(1);
          Value next = generic(
              b, {add}, sum, {id1, id1}, iterators(1),
              [](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                return arith::AddFOp::create(b, args[1], toF32(b, args[0]));
              });
          scf::YieldOp::create(
              b, tensor::InsertSliceOp::create(
                     b, next, acc[0], ArrayRef<OpFoldResult>{id, origin},
                     rowSizes, units)
                     .getResult());
        });
    b.setInsertionPointToStart(forall.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(b, loop.getResult(0), out,
                                          blockOffsets, blockSizes, units);
    return forall.getResult(0);
  }

  bool scatter;
};

/// A generic reading from one part or the other. (Not two
/// tensor.insert_slice: their strided views break upstream
/// expand-strided-metadata in LLVM 22 when sizes are dynamic.)
struct ConcatLowering : public OpRewritePattern<moe::ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::ConcatOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value first = op.getFirst(), second = op.getSecond();
    Value split = dimOf(b, first, 1);
    SmallVector<OpFoldResult> sizes = sizesOf(b, first);
    RankedTensorType type = op.getResult().getType();
    SmallVector<OpFoldResult> resultSizes = {sizes[0], OpFoldResult(),
                                             sizes[2]};
    resultSizes[1] =
        type.isDynamicDim(1)
            ? OpFoldResult(arith::AddIOp::create(b, split,
                                                 dimOf(b, second, 1)))
            : OpFoldResult(b.getIndexAttr(type.getDimSize(1)));
    Value init =
        tensor::EmptyOp::create(b, resultSizes, type.getElementType());
    AffineMap id = b.getMultiDimIdentityMap(3);
    Value result = generic(
        b, {}, init, {id}, iterators(3),
        [&](ImplicitLocOpBuilder &b, ValueRange) -> Value {
          Value batch = loopIndex(b, 0), time = loopIndex(b, 1);
          Value column = loopIndex(b, 2);
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
    replaceCast(rewriter, b, op, result);
    return success();
  }
};

/// Row maxima, exp-sums, then the mean of logsumexp - target logit.
struct CrossEntropyLowering : public OpRewritePattern<moe::CrossEntropyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::CrossEntropyOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    MLIRContext *ctx = b.getContext();
    Value logits = op.getLogits(), targets = op.getTargets();
    Type f32 = b.getF32Type();
    auto [maxima, sums] = softmaxStatistics(b, logits);
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
                     ValueRange{loopIndex(b, 0), loopIndex(b, 1), target}));
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
    replaceCast(rewriter, b, op, mean);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Training-only ops
//===----------------------------------------------------------------------===//

/// SplitMix64's finaliser on an i64 value (wrapping arithmetic).
Value splitMix64(ImplicitLocOpBuilder &b, Value z) {
  Type i64 = b.getI64Type();
  auto constant = [&](uint64_t v) -> Value {
    return arith::ConstantOp::create(b, i64, b.getI64IntegerAttr(int64_t(v)));
  };
  auto mix = [&](Value v, uint64_t shift, uint64_t multiplier) -> Value {
    Value shifted = arith::ShRUIOp::create(b, v, constant(shift));
    return arith::MulIOp::create(b, arith::XOrIOp::create(b, v, shifted),
                                 constant(multiplier));
  };
  z = arith::AddIOp::create(b, z, constant(0x9e3779b97f4a7c15ULL));
  z = mix(z, 30, 0xbf58476d1ce4e5b9ULL);
  z = mix(z, 27, 0x94d049bb133111ebULL);
  return arith::XOrIOp::create(b, z,
                               arith::ShRUIOp::create(b, z, constant(31)));
}

/// All false without a seed; else element i (row-major) is dropped when
/// splitmix64(splitmix64(seed + stream) + i) >> 40 < floor(rate · 2^24).
struct DropoutMaskLowering : public OpRewritePattern<moe::DropoutMaskOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::DropoutMaskOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value like = op.getLike();
    unsigned rank = op.getLike().getType().getRank();
    Type i1 = b.getI1Type(), i64 = b.getI64Type();
    Value init = tensor::EmptyOp::create(b, sizesOf(b, like), i1);
    AffineMap id = b.getMultiDimIdentityMap(rank);
    Value seed = op.getSeed();
    if (!seed) {
      Value none = arith::ConstantOp::create(b, b.getBoolAttr(false));
      replaceCast(rewriter, b, op,
                  linalg::FillOp::create(b, none, init).getResult(0));
      return success();
    }
    Value stream = arith::ConstantOp::create(
        b, b.getI64IntegerAttr(op.getStream()));
    // A block function's seed is `seed + offset` made from elements:
    // folded, the key is arithmetic on the step's seed alone.
    Value key = splitMix64(
        b, arith::AddIOp::create(
               b, b.createOrFold<tensor::ExtractOp>(seed, ValueRange{}),
               stream));
    auto threshold = static_cast<int64_t>(
        std::floor(op.getRate().convertToDouble() * double(1 << 24)));
    SmallVector<Value> dims;
    for (unsigned d = 0; d < rank; ++d)
      dims.push_back(dimOf(b, like, d));
    Value mask = generic(
        b, {}, init, {id}, iterators(rank),
        [&](ImplicitLocOpBuilder &b, ValueRange) -> Value {
          Value linear = loopIndex(b, 0);
          for (unsigned d = 1; d < rank; ++d)
            linear = arith::AddIOp::create(
                b, arith::MulIOp::create(b, linear, dims[d]), loopIndex(b, d));
          Value counter = arith::AddIOp::create(
              b, key, arith::IndexCastUIOp::create(b, i64, linear));
          Value bits = arith::ShRUIOp::create(
              b, splitMix64(b, counter),
              arith::ConstantOp::create(b, b.getI64IntegerAttr(40)));
          return arith::CmpIOp::create(
              b, arith::CmpIPredicate::ult, bits,
              arith::ConstantOp::create(b, b.getI64IntegerAttr(threshold)));
        });
    replaceCast(rewriter, b, op, mask);
    return success();
  }
};

/// Whether `mask` is an inference-mode (unseeded) dropout mask: by the
/// time of the lowering, lm-differentiate has seeded every training mask.
bool isInferenceMask(Value mask) {
  auto source = mask.getDefiningOp<moe::DropoutMaskOp>();
  return source && !source.getSeed();
}

/// mask ? 0 : x / (1 - rate); the identity for an unseeded mask. (Rate 0
/// folds away before the patterns run: DropoutOp::fold.)
struct DropoutLowering : public OpRewritePattern<moe::DropoutOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::DropoutOp op,
                                PatternRewriter &rewriter) const override {
    if (isInferenceMask(op.getMask())) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }
    double rate = op.getRate().convertToDouble();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    replaceCast(rewriter, b, op,
                applyDropout(b, op.getInput(), op.getMask(), rate));
    return success();
  }
};

/// -Σ_e P_e log P_e of the token-averaged softmax P.
struct RoutingEntropyLowering
    : public OpRewritePattern<moe::RoutingEntropyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::RoutingEntropyOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    MLIRContext *ctx = b.getContext();
    Type f32 = b.getF32Type();
    Value mean = routingMean(b, op.getLogits()).mean;
    Value entropy = generic(
        b, {mean}, filled(b, {}, f32, 0.0),
        {dimsMap(ctx, 1, {0}), AffineMap::get(1, 0, {}, ctx)}, iterators(0, 1),
        [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          // 0 · log 0 = 0.
          Value p = args[0];
          Value term = arith::MulFOp::create(b, p, math::LogOp::create(b, p));
          Value positive = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                                 p, f32Constant(b, 0.0));
          term = arith::SelectOp::create(b, positive, term, f32Constant(b, 0.0));
          return arith::SubFOp::create(b, args[1], term);
        });
    replaceCast(rewriter, b, op, entropy);
    return success();
  }
};

/// The auxiliary loss only matters to differentiation.
struct AddLossLowering : public OpRewritePattern<moe::AddLossOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::AddLossOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, op.getInput());
    return success();
  }
};

/// Rewrites every moe op; any left over is a legalisation error.
struct ConvertMoeToLinalgPass
    : public switchyard::impl::ConvertMoeToLinalgPassBase<
          ConvertMoeToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<moe::MoeDialect>();
    // The grouped kernels stay until after bufferization.
    target.addLegalOp<moe::GroupedMatmulOp, moe::GroupedWeightGradOp,
                      moe::SortRoutesOp, moe::FlashAttentionKernelOp,
                      moe::FlashAttentionGradKernelOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    FailureOr<FloatType> rounding =
        parseRoundingType(ctx, flashAttentionRounding);
    if (failed(rounding)) {
      emitError(getOperation()->getLoc())
          << "convert-moe-to-linalg: flash-attention-rounding must be f32, "
             "bf16 or f16, found '"
          << flashAttentionRounding << "'";
      return signalPassFailure();
    }
    RewritePatternSet patterns(ctx);
    populateMoeToLinalgPatterns(patterns, *rounding, scatterEmbeddingGradient,
                                fusedRouterMatmul);
    for (auto [name, rows] :
         {std::pair<StringRef, int64_t>("grouped-tile-rows", groupedTileRows),
          {"fused-expert-tile-rows", fusedExpertTileRows}})
      if (rows < 0) {
        // Not op.emitError(): the module itself would be printed as a note.
        emitError(getOperation()->getLoc())
            << "convert-moe-to-linalg: " << name
            << " must be 0 or positive, found " << rows;
        return signalPassFailure();
      }
    if (groupedExperts)
      populateGroupedExpertPatterns(patterns, groupedTileRows);
    if (fusedExpertTileRows > 0)
      populateFusedGroupedExpertPatterns(patterns, fusedExpertTileRows);
    if (flashAttentionKernel)
      populateFlashAttentionKernelPatterns(patterns);
    LLVM_DEBUG({
      llvm::dbgs() << "expert projections: ";
      if (!groupedExperts)
        llvm::dbgs() << "dense over all experts";
      else if (groupedTileRows == 0)
        llvm::dbgs() << "grouped, sorted on the host";
      else
        llvm::dbgs() << "grouped, segments padded to "
                     << static_cast<int64_t>(groupedTileRows) << " rows";
      llvm::dbgs() << "; flash attention "
                   << (flashAttentionKernel ? "kept for the tensor-core kernels"
                                            : "as row kernels")
                   << ", factors rounded to " << flashAttentionRounding
                   << "\n";
    });
    // What each op lowers to keeps its kind in its location, which the
    // GPU kernel report shows per kernel (switchyard-gpu-kernel-report).
    getOperation()->walk([](Operation *op) {
      if (!isa<moe::MoeDialect>(op->getDialect()))
        return;
      // Named already: by lm-differentiate, after the op it differentiates.
      if (isa<NameLoc>(op->getLoc()))
        return;
      op->setLoc(kindLocation(op));
    });
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::switchyard::populateMoeToLinalgPatterns(
    RewritePatternSet &patterns, FloatType attentionRounding,
    bool scatterEmbeddingGradient, bool routerLogitsMatmul) {
  patterns.add<EmbedGradLowering>(patterns.getContext(),
                                  scatterEmbeddingGradient);
  patterns.add<GateLowering, TopKLowering, ExpertProjLowering,
               ExpertMergeLowering, ExpertMlpLowering, AttentionLowering,
               AttentionWeightsLowering, AttentionGradLowering,
               ExpertProjGradLowering, ExpertMergeGradLowering, LinearLowering,
               LayerNormLowering, RopeLowering, EmbedLowering, ConcatLowering,
               CrossEntropyLowering, ReluLowering, DropoutMaskLowering,
               DropoutLowering, RoutingEntropyLowering, AddLossLowering>(
      patterns.getContext());
  populateFusedKernelPatterns(patterns, routerLogitsMatmul);
  populateFlashAttentionLoweringPatterns(patterns, attentionRounding);
}
