//===- FlashAttention.cpp - row kernels of the flash-attention ops --------===//
//
// Lowers moe.flash_attention and moe.flash_attention_grad (the ops of
// moe-fuse-attention) to row kernels: scf.forall on tensors whose bodies
// work on scalars and vector<F> rows (F, the head width, is static), read
// their inputs with vector.transfer_read and write their own row of each
// shared output through tensor.parallel_insert_slice. No [B, H, T, S]
// tensor, and no tensor temporary inside a kernel, is ever built: the
// scores and softmax weights of a row live in scalars of an scf.for over
// the keys. Both targets lower these kernels (the CPU to loops, the GPU to
// one thread per forall iteration).
//
// Forward, per query row (b, t, a), over the visible keys u <= t + (S - T):
// the online softmax of FlashAttention (running maximum m, sum l and value
// accumulator, rescaled by exp(m_old - m_new)), then out = acc / l and
// logsumexp = m + log l. Backward (FlashAttention-2), with the weights
// recomputed as p = exp(score - logsumexp) and Δ = Σ_f dO·O:
//   - over query rows (b, t, a): dq = Σ_u ds·(k_u + rel_δ), and Δ;
//   - over key rows (b, u, a): dv = Σ_t p·dO_t, dk = Σ_t ds·q_t over the
//     queries t >= u - (S - T) that see u;
//   - with rel, over (δ, a): drel = Σ_{b, t} ds·q_t with u = t + (S - T) - δ,
// where ds = p·(dO_t·v_u - Δ).
//
//===----------------------------------------------------------------------===//

#include "lib/Conversion/MoeToLinalg/MoeToLinalg.h"
#include "lib/Dialect/Moe/Utils/Kernels.h"
#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

using namespace mlir;
using namespace mlir::switchyard;

namespace {

//===----------------------------------------------------------------------===//
// Row kernels
//===----------------------------------------------------------------------===//

/// A row kernel under construction: an scf.forall over `bounds` with one
/// shared output per `inits` entry. The body is built at the builder's
/// insertion point between the constructor and finish(); each iteration
/// writes one row (or one element) of each output.
class RowKernel {
public:
  RowKernel(ImplicitLocOpBuilder &b, ArrayRef<OpFoldResult> bounds,
            ValueRange inits)
      : b(b) {
    forall = scf::ForallOp::create(b, bounds, inits, std::nullopt);
    b.setInsertionPoint(forall.getTerminator());
  }

  /// The iteration's indices.
  ValueRange indices() {
    return forall.getBody()->getArguments().take_front(forall.getRank());
  }

  /// Writes `row` (an f32 vector<F>) as output `out`[leading..., 0:F],
  /// converted to the output's element type.
  void writeRow(unsigned out, ValueRange leading, Value row) {
    Value dest = forall.getRegionIterArgs()[out];
    auto type = cast<RankedTensorType>(dest.getType());
    int64_t width = type.getShape().back();
    Type element = type.getElementType();
    if (element != b.getF32Type())
      row = arith::TruncFOp::create(b, VectorType::get({width}, element), row);
    Slice slice = sliceOf(out, leading, width);
    Value zero = indexConstant(b, 0);
    SmallVector<Value> at(type.getRank(), zero);
    slice.source = vector::TransferWriteOp::create(b, row, slice.source, at,
                                                   ArrayRef<bool>{true})
                       .getResult();
    slices.push_back(std::move(slice));
  }

  /// Writes the f32 `scalar` as output `out`[indices...].
  void writeScalar(unsigned out, ValueRange at, Value scalar) {
    Slice slice = sliceOf(out, at, /*width=*/0);
    SmallVector<Value> zeros(at.size(), indexConstant(b, 0));
    slice.source = tensor::InsertOp::create(b, scalar, slice.source, zeros);
    slices.push_back(std::move(slice));
  }

  /// Emits the parallel inserts of the written rows and returns the
  /// kernel's results; the builder continues after the forall.
  ValueRange finish() {
    b.setInsertionPointToEnd(forall.getTerminator().getBody());
    for (Slice &slice : slices)
      tensor::ParallelInsertSliceOp::create(
          b, slice.source, forall.getRegionIterArgs()[slice.out], slice.offsets,
          slice.sizes, slice.strides);
    b.setInsertionPointAfter(forall);
    return forall.getResults();
  }

private:
  /// A unit slice of a shared output, written by one iteration.
  struct Slice {
    unsigned out;
    Value source;
    SmallVector<OpFoldResult> offsets, sizes, strides;
  };

  /// The slice [leading..., 0:width] (width 0: no trailing row dimension)
  /// of output `out`.
  Slice sliceOf(unsigned out, ValueRange leading, int64_t width) {
    Slice slice;
    slice.out = out;
    for (Value index : leading) {
      slice.offsets.push_back(index);
      slice.sizes.push_back(b.getIndexAttr(1));
      slice.strides.push_back(b.getIndexAttr(1));
    }
    if (width) {
      slice.offsets.push_back(b.getIndexAttr(0));
      slice.sizes.push_back(b.getIndexAttr(width));
      slice.strides.push_back(b.getIndexAttr(1));
    }
    slice.source = tensor::ExtractSliceOp::create(
        b, forall.getRegionIterArgs()[out], slice.offsets, slice.sizes,
        slice.strides);
    return slice;
  }

  ImplicitLocOpBuilder &b;
  scf::ForallOp forall;
  SmallVector<Slice> slices;
};

/// What the attention kernels share: the operands, the head width F, and
/// index values of the sizes.
struct Attention {
  Value q, k, v, rel;
  int64_t width;
  Value batch, queries, keys, heads;
  /// S - T: the keys run this many positions ahead of the queries.
  Value shift;

  /// The factors' rounding (null: none): see populateFlashAttention-
  /// LoweringPatterns.
  FloatType rounding;

  Attention(ImplicitLocOpBuilder &b, Value q, Value k, Value v, Value rel,
            FloatType rounding = {})
      : q(q), k(k), v(v), rel(rel), rounding(rounding) {
    width = cast<RankedTensorType>(q.getType()).getDimSize(3);
    batch = dimOf(b, q, 0);
    queries = dimOf(b, q, 1);
    keys = dimOf(b, k, 1);
    heads = dimOf(b, q, 2);
    shift = arith::SubIOp::create(b, keys, queries);
  }

  /// The sizes [B, T, H] of the query rows (static where the query's are).
  SmallVector<OpFoldResult> rowSizes(ImplicitLocOpBuilder &b) const {
    SmallVector<OpFoldResult> sizes = sizesOf(b, q);
    sizes.pop_back();
    return sizes;
  }

  VectorType rowType(ImplicitLocOpBuilder &b) const {
    return VectorType::get({width}, b.getF32Type());
  }

  /// tensor[leading..., 0:F] as an f32 vector<F>.
  Value readRow(ImplicitLocOpBuilder &b, Value tensor,
                ValueRange leading) const {
    Type element = elementTypeOf(tensor);
    SmallVector<Value> at(leading);
    at.push_back(indexConstant(b, 0));
    Value pad =
        arith::ConstantOp::create(b, cast<TypedAttr>(b.getZeroAttr(element)));
    Value row =
        vector::TransferReadOp::create(b, VectorType::get({width}, element),
                                       tensor, at, pad, ArrayRef<bool>{true});
    if (element != b.getF32Type())
      row = arith::ExtFOp::create(b, rowType(b), row);
    return row;
  }

  /// `x` (an f32 scalar or row) rounded to the factors' type, if any.
  Value round(ImplicitLocOpBuilder &b, Value x) const {
    if (!rounding)
      return x;
    Type narrow = rounding;
    if (auto row = dyn_cast<VectorType>(x.getType()))
      narrow = VectorType::get(row.getShape(), rounding);
    Value rounded = arith::TruncFOp::create(b, narrow, x);
    return arith::ExtFOp::create(b, x.getType(), rounded);
  }

  /// A factor row: readRow, rounded.
  Value readFactor(ImplicitLocOpBuilder &b, Value tensor,
                   ValueRange leading) const {
    return round(b, readRow(b, tensor, leading));
  }

  /// The key of query t for key u: k[bi, u, a] + rel[t + shift - u, a]
  /// (each a factor, rounded: the tensor-core kernels take Q·Kᵀ and
  /// Q·relᵀ as two products).
  Value keyRow(ImplicitLocOpBuilder &b, Value bi, Value t, Value u,
               Value a) const {
    Value key = readFactor(b, k, {bi, u, a});
    if (!rel)
      return key;
    return arith::AddFOp::create(
        b, key, readFactor(b, rel, {relativeDistance(b, t, u, shift), a}));
  }

  /// Σ_f x·y of two f32 rows.
  Value dot(ImplicitLocOpBuilder &b, Value x, Value y) const {
    return vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                       arith::MulFOp::create(b, x, y));
  }

  /// acc + scalar · row.
  Value axpy(ImplicitLocOpBuilder &b, Value acc, Value scalar,
             Value row) const {
    Value splat = vector::BroadcastOp::create(b, rowType(b), scalar);
    return vector::FMAOp::create(b, splat, row, acc);
  }

  Value zeroRow(ImplicitLocOpBuilder &b) const {
    return arith::ConstantOp::create(
        b, cast<TypedAttr>(b.getZeroAttr(rowType(b))));
  }

  /// The weight p = exp(q_t·key - lse[bi, t, a]) and ds = p·(dO_t·v_u - Δ)
  /// of query t for key u (the backward recomputation).
  std::pair<Value, Value> weightAndScoreGrad(ImplicitLocOpBuilder &b,
                                             Value qRow, Value key, Value lse,
                                             Value doRow, Value vRow,
                                             Value delta) const {
    Value score = dot(b, qRow, key);
    Value p = math::ExpOp::create(b, arith::SubFOp::create(b, score, lse));
    Value dp = dot(b, doRow, vRow);
    Value ds = arith::MulFOp::create(b, p, arith::SubFOp::create(b, dp, delta));
    return {p, ds};
  }
};

/// An scf.for from `lb` to `ub` whose body `body(b, iv, iterArgs)` returns
/// the next iter args; returns the loop's results.
SmallVector<Value> forLoop(
    ImplicitLocOpBuilder &b, Value lb, Value ub, ValueRange inits,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value, ValueRange)>
        body) {
  auto loop = scf::ForOp::create(
      b, lb, ub, indexConstant(b, 1), inits,
      [&](OpBuilder &nested, Location loc, Value iv, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nested);
        scf::YieldOp::create(ib, body(ib, iv, args));
      });
  return SmallVector<Value>(loop.getResults());
}

/// Whether the tensor-core kernels take an attention of these queries: a
/// head width of at most 128.
bool fitsKernel(Value query) {
  return cast<RankedTensorType>(query.getType()).getDimSize(3) <=
         moe::FlashAttentionKernelOp::kMaxHeadWidth;
}

/// The rounding of the row kernels' factors: `rounding` where the GPU's
/// tensor-core kernels would take the attention, none elsewhere.
FloatType roundingFor(Value query, FloatType rounding) {
  return fitsKernel(query) ? rounding : FloatType();
}

/// A tensor.empty of `value`'s shape and element type.
Value emptyLike(ImplicitLocOpBuilder &b, Value value) {
  return tensor::EmptyOp::create(b, sizesOf(b, value), elementTypeOf(value));
}

//===----------------------------------------------------------------------===//
// moe.flash_attention
//===----------------------------------------------------------------------===//

/// One kernel over the query rows (b, t, a) with an online softmax over the
/// visible keys.
struct FlashAttentionLowering : public OpRewritePattern<moe::FlashAttentionOp> {
  FlashAttentionLowering(MLIRContext *ctx, FloatType rounding)
      : OpRewritePattern(ctx), rounding(rounding) {}
  FloatType rounding;

  LogicalResult matchAndRewrite(moe::FlashAttentionOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Attention att(b, op.getQuery(), op.getKey(), op.getValue(), op.getRel(),
                  roundingFor(op.getQuery(), rounding));
    Type f32 = b.getF32Type();
    Value outInit = emptyLike(b, att.q);
    Value lseInit = tensor::EmptyOp::create(b, att.rowSizes(b), f32);

    RowKernel kernel(b, {att.batch, att.queries, att.heads},
                     {outInit, lseInit});
    Value bi = kernel.indices()[0], t = kernel.indices()[1],
          a = kernel.indices()[2];
    Value qRow = att.readFactor(b, att.q, {bi, t, a});
    // Keys 0 .. t + shift are visible (at least one: shift >= 0).
    Value end = arith::AddIOp::create(b, arith::AddIOp::create(b, t, att.shift),
                                      indexConstant(b, 1));
    Value negInf = f32Constant(b, -std::numeric_limits<double>::infinity());
    SmallVector<Value> state = forLoop(
        b, indexConstant(b, 0), end,
        {negInf, f32Constant(b, 0.0), att.zeroRow(b)},
        [&](ImplicitLocOpBuilder &b, Value u,
            ValueRange args) -> SmallVector<Value> {
          Value m = args[0], l = args[1], acc = args[2];
          Value score = att.dot(b, qRow, att.keyRow(b, bi, t, u, a));
          Value mNew = arith::MaximumFOp::create(b, m, score);
          // exp(-inf) = 0 on the first key.
          Value alpha =
              math::ExpOp::create(b, arith::SubFOp::create(b, m, mNew));
          Value p =
              math::ExpOp::create(b, arith::SubFOp::create(b, score, mNew));
          Value lNew =
              arith::AddFOp::create(b, arith::MulFOp::create(b, l, alpha), p);
          Value scaled = arith::MulFOp::create(
              b, acc, vector::BroadcastOp::create(b, att.rowType(b), alpha));
          Value accNew =
              att.axpy(b, scaled, p, att.readFactor(b, att.v, {bi, u, a}));
          return {mNew, lNew, accNew};
        });
    Value m = state[0], l = state[1], acc = state[2];
    Value out = arith::DivFOp::create(
        b, acc, vector::BroadcastOp::create(b, att.rowType(b), l));
    kernel.writeRow(0, {bi, t, a}, out);
    kernel.writeScalar(1, {bi, t, a},
                       arith::AddFOp::create(b, m, math::LogOp::create(b, l)));
    ValueRange results = kernel.finish();
    replaceCast(rewriter, b, op, results);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.flash_attention_grad
//===----------------------------------------------------------------------===//

/// Three (with rel) kernels: query rows (dq, Δ), key rows (dk, dv), and
/// relative-key rows (drel).
struct FlashAttentionGradLowering
    : public OpRewritePattern<moe::FlashAttentionGradOp> {
  FlashAttentionGradLowering(MLIRContext *ctx, FloatType rounding)
      : OpRewritePattern(ctx), rounding(rounding) {}
  FloatType rounding;

  LogicalResult matchAndRewrite(moe::FlashAttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Attention att(b, op.getQuery(), op.getKey(), op.getValue(), op.getRel(),
                  roundingFor(op.getQuery(), rounding));
    Type f32 = b.getF32Type();
    Value out = op.getResult(), lse = op.getLogsumexp();
    Value dout = op.getResultGrad();
    Value zero = indexConstant(b, 0);

    // dq and Δ over the query rows (b, t, a), summing over the visible keys.
    Value deltaInit = tensor::EmptyOp::create(b, att.rowSizes(b), f32);
    RowKernel queryKernel(b, {att.batch, att.queries, att.heads},
                          {emptyLike(b, att.q), deltaInit});
    {
      Value bi = queryKernel.indices()[0], t = queryKernel.indices()[1],
            a = queryKernel.indices()[2];
      Value qRow = att.readFactor(b, att.q, {bi, t, a});
      // Δ from dO itself; dO as a factor (of dP) rounded.
      Value doRow = att.readRow(b, dout, {bi, t, a});
      Value delta = att.dot(b, doRow, att.readRow(b, out, {bi, t, a}));
      doRow = att.round(b, doRow);
      Value rowLse = tensor::ExtractOp::create(b, lse, ValueRange{bi, t, a});
      Value end = arith::AddIOp::create(
          b, arith::AddIOp::create(b, t, att.shift), indexConstant(b, 1));
      SmallVector<Value> dq =
          forLoop(b, zero, end, {att.zeroRow(b)},
                  [&](ImplicitLocOpBuilder &b, Value u,
                      ValueRange args) -> SmallVector<Value> {
                    Value key = att.keyRow(b, bi, t, u, a);
                    auto [p, ds] = att.weightAndScoreGrad(
                        b, qRow, key, rowLse, doRow,
                        att.readFactor(b, att.v, {bi, u, a}), delta);
                    return {att.axpy(b, args[0], att.round(b, ds), key)};
                  });
      queryKernel.writeRow(0, {bi, t, a}, dq[0]);
      queryKernel.writeScalar(1, {bi, t, a}, delta);
    }
    ValueRange queryResults = queryKernel.finish();
    Value dq = queryResults[0], deltas = queryResults[1];

    // dk and dv over the key rows (b, u, a), summing over the queries
    // t >= u - shift that see key u.
    RowKernel keyKernel(b, {att.batch, att.keys, att.heads},
                        {emptyLike(b, att.k), emptyLike(b, att.v)});
    {
      Value bi = keyKernel.indices()[0], u = keyKernel.indices()[1],
            a = keyKernel.indices()[2];
      Value vRow = att.readFactor(b, att.v, {bi, u, a});
      Value first = arith::MaxSIOp::create(
          b, arith::SubIOp::create(b, u, att.shift), zero);
      SmallVector<Value> sums = forLoop(
          b, first, att.queries, {att.zeroRow(b), att.zeroRow(b)},
          [&](ImplicitLocOpBuilder &b, Value t,
              ValueRange args) -> SmallVector<Value> {
            Value qRow = att.readFactor(b, att.q, {bi, t, a});
            Value doRow = att.readFactor(b, dout, {bi, t, a});
            Value rowLse =
                tensor::ExtractOp::create(b, lse, ValueRange{bi, t, a});
            Value delta =
                tensor::ExtractOp::create(b, deltas, ValueRange{bi, t, a});
            auto [p, ds] =
                att.weightAndScoreGrad(b, qRow, att.keyRow(b, bi, t, u, a),
                                       rowLse, doRow, vRow, delta);
            return {att.axpy(b, args[0], att.round(b, ds), qRow),
                    att.axpy(b, args[1], att.round(b, p), doRow)};
          });
      keyKernel.writeRow(0, {bi, u, a}, sums[0]);
      keyKernel.writeRow(1, {bi, u, a}, sums[1]);
    }
    ValueRange keyResults = keyKernel.finish();
    SmallVector<Value> results = {dq, keyResults[0], keyResults[1]};

    if (att.rel) {
      // drel over (δ, a), summing over (b, t) with u = t + shift - δ >= 0.
      RowKernel relKernel(b, {att.keys, att.heads}, {emptyLike(b, att.rel)});
      Value distance = relKernel.indices()[0], a = relKernel.indices()[1];
      Value first = arith::MaxSIOp::create(
          b, arith::SubIOp::create(b, distance, att.shift), zero);
      SmallVector<Value> drel = forLoop(
          b, zero, att.batch, {att.zeroRow(b)},
          [&](ImplicitLocOpBuilder &b, Value bi,
              ValueRange outer) -> SmallVector<Value> {
            return forLoop(
                b, first, att.queries, outer,
                [&](ImplicitLocOpBuilder &b, Value t,
                    ValueRange args) -> SmallVector<Value> {
                  Value u = arith::SubIOp::create(
                      b, arith::AddIOp::create(b, t, att.shift), distance);
                  Value qRow = att.readFactor(b, att.q, {bi, t, a});
                  Value rowLse =
                      tensor::ExtractOp::create(b, lse, ValueRange{bi, t, a});
                  Value delta = tensor::ExtractOp::create(b, deltas,
                                                          ValueRange{bi, t, a});
                  auto [p, ds] = att.weightAndScoreGrad(
                      b, qRow, att.keyRow(b, bi, t, u, a), rowLse,
                      att.readFactor(b, dout, {bi, t, a}),
                      att.readFactor(b, att.v, {bi, u, a}), delta);
                  return {att.axpy(b, args[0], att.round(b, ds), qRow)};
                });
          });
      relKernel.writeRow(0, {distance, a}, drel[0]);
      results.push_back(relKernel.finish()[0]);
    }
    replaceCast(rewriter, b, op, results);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.flash_attention_kernel
//===----------------------------------------------------------------------===//

/// moe.flash_attention to the destination-style kernel op, its inits
/// empty.
struct FlashAttentionToKernel : public OpRewritePattern<moe::FlashAttentionOp> {
  FlashAttentionToKernel(MLIRContext *ctx)
      : OpRewritePattern(ctx, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(moe::FlashAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!fitsKernel(op.getQuery()))
      return rewriter.notifyMatchFailure(op, "a head wider than 128");
    // The kernel rounds Q and K. A backward row kernel would recompute the
    // weights from the unrounded ones against the logsumexp, which must then
    // come from the same scores (else they sum to 1 only within the
    // rounding, and the gradients drift by ~10% in relative L2 on the tiny
    // model): a forward pass whose logsumexp a row kernel reads stays a row
    // kernel. The backward kernels (FlashAttentionGradToKernel) round as
    // this one does.
    for (Operation *user : op.getLogsumexp().getUsers()) {
      auto grad = dyn_cast<moe::FlashAttentionGradOp>(user);
      if (!isa<moe::FlashAttentionGradKernelOp>(user) &&
          !(grad && fitsKernel(grad.getQuery())))
        return rewriter.notifyMatchFailure(
            op, "a backward row kernel reads its logsumexp");
    }
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Attention att(b, op.getQuery(), op.getKey(), op.getValue(), op.getRel());
    Value outInit = emptyLike(b, att.q);
    Value lseInit = tensor::EmptyOp::create(b, att.rowSizes(b), b.getF32Type());
    auto kernel = moe::FlashAttentionKernelOp::create(
        b, TypeRange{outInit.getType(), lseInit.getType()}, att.q, att.k, att.v,
        att.rel, outInit, lseInit);
    replaceCast(rewriter, b, op, kernel.getResults());
    return success();
  }
};

/// moe.flash_attention_grad to the destination-style kernel op: Δ = Σ_f dO·O
/// first (a linalg reduction in f32; math.fma, so that it is no contraction
/// for the tensor cores to round), the inits empty; with rel, the relative
/// keys' gradient accumulates into zeros in f32 and is then rounded to
/// rel's element type.
struct FlashAttentionGradToKernel
    : public OpRewritePattern<moe::FlashAttentionGradOp> {
  FlashAttentionGradToKernel(MLIRContext *ctx)
      : OpRewritePattern(ctx, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(moe::FlashAttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    if (!fitsKernel(op.getQuery()))
      return rewriter.notifyMatchFailure(op, "a head wider than 128");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Attention att(b, op.getQuery(), op.getKey(), op.getValue(), op.getRel());
    MLIRContext *ctx = b.getContext();
    AffineMap row = dimsMap(ctx, 4, {0, 1, 2, 3});
    Value delta =
        generic(b, {op.getResultGrad(), op.getResult()},
                filled(b, att.rowSizes(b), b.getF32Type(), 0.0),
                {row, row, dimsMap(ctx, 4, {0, 1, 2})}, iterators(3, 1),
                [](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                  return math::FmaOp::create(b, toF32(b, args[0]),
                                             toF32(b, args[1]), args[2]);
                });
    SmallVector<Value> inits = {emptyLike(b, att.q), emptyLike(b, att.k),
                                emptyLike(b, att.v)};
    Value relGradInit;
    if (att.rel) {
      relGradInit = filled(b, sizesOf(b, att.rel), b.getF32Type(), 0.0);
      inits.push_back(relGradInit);
    }
    auto kernel = moe::FlashAttentionGradKernelOp::create(
        b, ValueRange(inits).getTypes(), att.q, att.k, att.v, op.getLogsumexp(),
        delta, op.getResultGrad(), att.rel, inits[0], inits[1], inits[2],
        relGradInit);
    SmallVector<Value> results(kernel.getResults());
    if (att.rel)
      results.back() = castElements(b, results.back(), elementTypeOf(att.rel));
    replaceCast(rewriter, b, op, results);
    return success();
  }
};

} // namespace

void mlir::switchyard::populateFlashAttentionLoweringPatterns(
    RewritePatternSet &patterns, FloatType rounding) {
  patterns.add<FlashAttentionLowering, FlashAttentionGradLowering>(
      patterns.getContext(), rounding);
}

void mlir::switchyard::populateFlashAttentionKernelPatterns(
    RewritePatternSet &patterns) {
  patterns.add<FlashAttentionToKernel, FlashAttentionGradToKernel>(
      patterns.getContext());
}
