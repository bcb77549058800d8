//===- Kernels.cpp - reference kernels of the moe ops ---------------------===//
//
// Implements the kernels shared by the moe lowerings and gradient rules.
//
//===----------------------------------------------------------------------===//

#include "lib/Dialect/Moe/Utils/Kernels.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::switchyard;

namespace {

/// One step of a softmax's row maximum, the shift that keeps exp in range:
/// maxnum, which passes over NaN, rather than maximum, which returns it. A
/// NaN in the row still makes the row NaN through its own exp(x - max), so
/// the softmax and log-sum-exp are the same either way, and maxnum is what
/// LLVM's loop vectorizer takes as a reduction where the row is masked (a
/// select before it; maximum is left scalar there) and the GPU's plain
/// max.f32.
Value shiftMaximum(ImplicitLocOpBuilder &b, Value accumulator, Value x) {
  return arith::MaxNumFOp::create(b, accumulator, x);
}

} // namespace

Value mlir::switchyard::finish(ImplicitLocOpBuilder &b, Value accumulator,
                               Value result) {
  Value converted = castElements(
      b, accumulator,
      cast<RankedTensorType>(result.getType()).getElementType());
  return castTo(b, converted, result.getType());
}

Value mlir::switchyard::expertRow(ImplicitLocOpBuilder &b, Value head,
                                  Value expertsPerHead, Value expert) {
  Value e = arith::IndexCastOp::create(b, b.getIndexType(), expert);
  Value base = arith::MulIOp::create(b, head, expertsPerHead);
  return arith::AddIOp::create(b, base, e);
}

Value mlir::switchyard::expertsPerHead(ImplicitLocOpBuilder &b, Value weight,
                                       Value gates) {
  return arith::DivUIOp::create(b, dimOf(b, weight, 0), dimOf(b, gates, 1));
}

Value mlir::switchyard::routeSums(
    ImplicitLocOpBuilder &b, Value gates, Value indices, Value perHead,
    OpFoldResult rows, OpFoldResult width,
    function_ref<Value(ImplicitLocOpBuilder &, Value n, Value h, Value j,
                       Value f)>
        value) {
  bool headed = cast<RankedTensorType>(indices.getType()).getRank() == 3;
  OpFoldResult tokens = sizesOf(b, indices)[0];
  Value routes = dimOf(b, indices, headed ? 2 : 1);
  Value init =
      tensor::EmptyOp::create(b, {tokens, rows, width}, b.getF32Type());
  AffineMap id = b.getMultiDimIdentityMap(3);
  return generic(
      b, {}, init, {id}, iterators(3),
      [&](ImplicitLocOpBuilder &b, ValueRange) -> Value {
        Value n = loopIndex(b, 0), row = loopIndex(b, 1), f = loopIndex(b, 2);
        Value h = arith::DivUIOp::create(b, row, perHead);
        Value e = arith::RemUIOp::create(b, row, perHead);
        Value zero = indexConstant(b, 0), one = indexConstant(b, 1);
        auto loop = scf::ForOp::create(
            b, zero, routes, one, ValueRange{f32Constant(b, 0.0)},
            [&](OpBuilder &nested, Location loc, Value j, ValueRange acc) {
              ImplicitLocOpBuilder b(loc, nested);
              SmallVector<Value> at = headed ? SmallVector<Value>{n, h, j}
                                             : SmallVector<Value>{n, j};
              Value chosen = arith::IndexCastOp::create(
                  b, b.getIndexType(),
                  tensor::ExtractOp::create(b, indices, at));
              Value match =
                  arith::CmpIOp::create(b, arith::CmpIPredicate::eq, chosen, e);
              Value term = value(b, n, h, j, f);
              if (gates)
                term = arith::MulFOp::create(
                    b, term, tensor::ExtractOp::create(b, gates, at));
              Value added = arith::AddFOp::create(b, acc[0], term);
              scf::YieldOp::create(b, ValueRange{arith::SelectOp::create(
                                          b, match, added, acc[0])});
            });
        return loop.getResult(0);
      });
}

std::pair<Value, Value>
mlir::switchyard::layerNormStatistics(ImplicitLocOpBuilder &b, Value x,
                                      double eps) {
  MLIRContext *ctx = b.getContext();
  unsigned rank = cast<RankedTensorType>(x.getType()).getRank();
  AffineMap id = b.getMultiDimIdentityMap(rank), pre = rowMap(ctx, rank);
  SmallVector<OpFoldResult> sizes = sizesOf(b, x);
  SmallVector<OpFoldResult> rowSizes(sizes.begin(), sizes.end() - 1);
  Value width = indexToF32(b, dimOf(b, x, rank - 1));

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
  return {mean, rstd};
}

Value mlir::switchyard::rotary(ImplicitLocOpBuilder &b, Value x, int64_t offset,
                               bool inverse, Value start) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t width = type.getDimSize(3);
  int64_t rotated = 2 * (width / 4), half = rotated / 2;
  if (rotated == 0)
    return x;
  Type element = type.getElementType();
  // Position l - offset + start is l - (offset - start).
  Value offsetValue = indexConstant(b, offset);
  if (start)
    offsetValue = arith::SubIOp::create(b, offsetValue, start);
  // exp(-ln(10000)·2i/r) is the frequency of pair i.
  double logStep = -2.0 * std::log(10000.0) / double(rotated);
  AffineMap id = b.getMultiDimIdentityMap(4);
  Value init = tensor::EmptyOp::create(b, sizesOf(b, x), element);
  return generic(
      b, {x}, init, {id, id}, iterators(4),
      [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
        Value position = indexToF32(
            b, arith::SubIOp::create(b, loopIndex(b, 1), offsetValue));
        Value f = loopIndex(b, 3);
        Value cHalf = indexConstant(b, half);
        Value low =
            arith::CmpIOp::create(b, arith::CmpIPredicate::ult, f, cHalf);
        Value inRotated = arith::CmpIOp::create(
            b, arith::CmpIPredicate::ult, f, indexConstant(b, rotated));
        Value pair = arith::SelectOp::create(
            b, low, f, arith::SubIOp::create(b, f, cHalf));
        Value partnerIndex = arith::SelectOp::create(
            b, low, arith::AddIOp::create(b, f, cHalf),
            arith::SubIOp::create(b, f, cHalf));
        partnerIndex = arith::SelectOp::create(b, inRotated, partnerIndex, f);
        Value frequency = math::ExpOp::create(
            b, arith::MulFOp::create(b, indexToF32(b, pair),
                                     f32Constant(b, logStep)));
        Value theta = arith::MulFOp::create(b, position, frequency);
        if (inverse)
          theta = arith::NegFOp::create(b, theta);
        Value cos = math::CosOp::create(b, theta);
        Value sin = math::SinOp::create(b, theta);
        Value self = toF32(b, args[0]);
        Value partner = toF32(
            b, tensor::ExtractOp::create(
                   b, x,
                   ValueRange{loopIndex(b, 0), loopIndex(b, 1),
                              loopIndex(b, 2), partnerIndex}));
        Value selfCos = arith::MulFOp::create(b, self, cos);
        Value partnerSin = arith::MulFOp::create(b, partner, sin);
        Value rotatedLow = arith::SubFOp::create(b, selfCos, partnerSin);
        Value rotatedHigh = arith::AddFOp::create(b, selfCos, partnerSin);
        Value rotatedValue =
            arith::SelectOp::create(b, low, rotatedLow, rotatedHigh);
        return fromF32(
            b, arith::SelectOp::create(b, inRotated, rotatedValue, self),
            element);
      });
}

std::pair<Value, Value>
mlir::switchyard::softmaxStatistics(ImplicitLocOpBuilder &b, Value logits) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  unsigned rank = cast<RankedTensorType>(logits.getType()).getRank();
  SmallVector<OpFoldResult> rows = sizesOf(b, logits);
  rows.pop_back();
  AffineMap all = b.getMultiDimIdentityMap(rank), row = rowMap(ctx, rank);
  Value maxima = generic(
      b, {logits},
      filled(b, rows, f32, -std::numeric_limits<double>::infinity()),
      {all, row}, iterators(rank - 1, 1),
      [](ImplicitLocOpBuilder &b, ValueRange args) {
        return shiftMaximum(b, args[1], toF32(b, args[0]));
      });
  Value sums = generic(
      b, {logits, maxima}, filled(b, rows, f32, 0.0), {all, row, row},
      iterators(rank - 1, 1), [](ImplicitLocOpBuilder &b, ValueRange args) {
        Value shifted = arith::SubFOp::create(b, toF32(b, args[0]), args[1]);
        return arith::AddFOp::create(b, args[2],
                                     math::ExpOp::create(b, shifted));
      });
  return {maxima, sums};
}

RoutingMean mlir::switchyard::routingMean(ImplicitLocOpBuilder &b,
                                          Value logits) {
  MLIRContext *ctx = b.getContext();
  auto [maxima, sums] = softmaxStatistics(b, logits);
  // P[e] = Σ_n exp(z[n, e] - max[n]) / sum[n], over dims (e | n).
  Value total = generic(
      b, {logits, maxima, sums}, filled(b, {sizesOf(b, logits)[1]},
                                        b.getF32Type(), 0.0),
      {dimsMap(ctx, 2, {1, 0}), dimsMap(ctx, 2, {1}), dimsMap(ctx, 2, {1}),
       dimsMap(ctx, 2, {0})},
      iterators(1, 1), [](ImplicitLocOpBuilder &b, ValueRange args) {
        Value shifted = arith::SubFOp::create(b, toF32(b, args[0]), args[1]);
        Value p = arith::DivFOp::create(b, math::ExpOp::create(b, shifted),
                                        args[2]);
        return arith::AddFOp::create(b, args[3], p);
      });
  Value count = indexToF32(b, dimOf(b, logits, 0));
  Value mean = mapElements(b, total, b.getF32Type(),
                           [&](ImplicitLocOpBuilder &b, Value v) -> Value {
                             return arith::DivFOp::create(b, v, count);
                           });
  return {mean, maxima, sums};
}

Value mlir::switchyard::attentionVisible(ImplicitLocOpBuilder &b, Value t,
                                         Value u, Value shift) {
  Value last = arith::AddIOp::create(b, t, shift);
  return arith::CmpIOp::create(b, arith::CmpIPredicate::ule, u, last);
}

Value mlir::switchyard::relativeDistance(ImplicitLocOpBuilder &b, Value t,
                                         Value u, Value shift) {
  return arith::SubIOp::create(b, arith::AddIOp::create(b, t, shift), u);
}

Value mlir::switchyard::skewed(ImplicitLocOpBuilder &b, Value x,
                               OpFoldResult width, Value shift) {
  SmallVector<OpFoldResult> sizes = sizesOf(b, x);
  Value columns = dimOf(b, x, 3);
  sizes[3] = width;
  AffineMap id = b.getMultiDimIdentityMap(4);
  Value init = tensor::EmptyOp::create(b, sizes, b.getF32Type());
  return generic(
      b, {}, init, {id}, iterators(4),
      [&](ImplicitLocOpBuilder &b, ValueRange) -> Value {
        Value column = relativeDistance(b, loopIndex(b, 2), loopIndex(b, 3),
                                        shift);
        Value zero = indexConstant(b, 0);
        Value valid = arith::AndIOp::create(
            b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, column, zero),
            arith::CmpIOp::create(b, arith::CmpIPredicate::slt, column,
                                  columns));
        Value clamped = arith::MaxSIOp::create(
            b,
            arith::MinSIOp::create(
                b, column, arith::SubIOp::create(b, columns, indexConstant(b, 1))),
            zero);
        Value element = tensor::ExtractOp::create(
            b, x, ValueRange{loopIndex(b, 0), loopIndex(b, 1), loopIndex(b, 2),
                             clamped});
        return arith::SelectOp::create(b, valid, element, f32Constant(b, 0.0));
      });
}

Value mlir::switchyard::attentionWeights(ImplicitLocOpBuilder &b, Value q,
                                         Value k, Value rel, Value shift) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  SmallVector<OpFoldResult> qSizes = sizesOf(b, q), kSizes = sizesOf(b, k);
  if (!shift)
    shift = arith::SubIOp::create(b, dimOf(b, k, 1), dimOf(b, q, 1));
  Value negInf = f32Constant(b, -std::numeric_limits<double>::infinity());
  SmallVector<OpFoldResult> pSizes = {qSizes[0], qSizes[2], qSizes[1],
                                      kSizes[1]};
  AffineMap id4 = b.getMultiDimIdentityMap(4);

  // score[b, a, t, u] = Σ_f q[b, t, a, f] · k[b, u, a, f], one contraction
  // over (b, a, t, u | f) with the keys in the unit-stride dimension.
  Value scores = contractF32(b, q, dimsMap(ctx, 5, {0, 2, 1, 4}), k,
                             dimsMap(ctx, 5, {0, 3, 1, 4}),
                             dimsMap(ctx, 5, {0, 1, 2, 3}), iterators(4, 1),
                             pSizes);
  if (rel) {
    // Transformer-XL's relative keys: every query against every distance
    // δ (a second contraction), then score[b, a, t, u] += that at
    // δ = t + shift - u, a skew of the rows.
    SmallVector<OpFoldResult> relSizes = pSizes;
    relSizes[3] = sizesOf(b, rel)[0];
    Value byDistance = contractF32(b, q, dimsMap(ctx, 5, {0, 2, 1, 4}), rel,
                                   dimsMap(ctx, 5, {3, 1, 4}),
                                   dimsMap(ctx, 5, {0, 1, 2, 3}),
                                   iterators(4, 1), relSizes);
    Value relative = skewed(b, byDistance, kSizes[1], shift);
    scores = generic(b, {scores, relative},
                     tensor::EmptyOp::create(b, pSizes, f32), {id4, id4, id4},
                     iterators(4), [](ImplicitLocOpBuilder &b, ValueRange args) {
                       return arith::AddFOp::create(b, args[0], args[1]);
                     });
  }

  // Row maxima over the visible keys: (b, a, t | u).
  Value maxInit = filled(b, {pSizes[0], pSizes[1], pSizes[2]}, f32,
                         -std::numeric_limits<double>::infinity());
  Value maxima = generic(
      b, {scores}, maxInit, {id4, dimsMap(ctx, 4, {0, 1, 2})}, iterators(3, 1),
      [&](ImplicitLocOpBuilder &b, ValueRange args) {
        Value ok = attentionVisible(b, loopIndex(b, 2), loopIndex(b, 3), shift);
        Value candidate = arith::SelectOp::create(b, ok, args[0], negInf);
        return shiftMaximum(b, args[1], candidate);
      });

  // Unnormalised weights exp(score - max), 0 where invisible.
  Value weights = generic(
      b, {scores, maxima}, tensor::EmptyOp::create(b, pSizes, f32),
      {id4, dimsMap(ctx, 4, {0, 1, 2}), id4}, iterators(4),
      [&](ImplicitLocOpBuilder &b, ValueRange args) {
        Value ok = attentionVisible(b, loopIndex(b, 2), loopIndex(b, 3), shift);
        Value e =
            math::ExpOp::create(b, arith::SubFOp::create(b, args[0], args[1]));
        return arith::SelectOp::create(b, ok, e, f32Constant(b, 0.0));
      });

  // Normalisers (b, a, t | u), then the normalised weights.
  Value sums = generic(
      b, {weights}, filled(b, {pSizes[0], pSizes[1], pSizes[2]}, f32, 0.0),
      {id4, dimsMap(ctx, 4, {0, 1, 2})}, iterators(3, 1),
      [](ImplicitLocOpBuilder &b, ValueRange args) {
        return arith::AddFOp::create(b, args[1], args[0]);
      });
  return generic(b, {weights, sums}, tensor::EmptyOp::create(b, pSizes, f32),
                 {id4, dimsMap(ctx, 4, {0, 1, 2}), id4}, iterators(4),
                 [](ImplicitLocOpBuilder &b, ValueRange args) {
                   return arith::DivFOp::create(b, args[0], args[1]);
                 });
}

Value mlir::switchyard::applyDropout(ImplicitLocOpBuilder &b, Value x,
                                     Value mask, double rate) {
  auto type = cast<RankedTensorType>(x.getType());
  unsigned rank = type.getRank();
  AffineMap id = b.getMultiDimIdentityMap(rank);
  Value init = tensor::EmptyOp::create(b, sizesOf(b, x), type.getElementType());
  return generic(b, {x, mask}, init, {id, id, id}, iterators(rank),
                 [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                   Value kept = arith::MulFOp::create(
                       b, toF32(b, args[0]), f32Constant(b, 1.0 / (1.0 - rate)));
                   Value y = arith::SelectOp::create(b, args[1],
                                                     f32Constant(b, 0.0), kept);
                   return fromF32(b, y, type.getElementType());
                 });
}

Location mlir::switchyard::kindLocation(Operation *op, StringRef suffix) {
  return NameLoc::get(StringAttr::get(op->getContext(),
                                      op->getName().stripDialect() + suffix),
                      op->getLoc());
}

void mlir::switchyard::replaceCast(PatternRewriter &rewriter,
                                   ImplicitLocOpBuilder &b, Operation *op,
                                   ValueRange values) {
  SmallVector<Value> cast;
  for (auto [value, result] : llvm::zip(values, op->getResults()))
    cast.push_back(castTo(b, value, result.getType()));
  rewriter.replaceOp(op, cast);
}
