//===- FusedKernels.cpp - row kernels of the fused moe ops ----------------===//
//
// Lowers the kernel-level ops of the fusion passes (moe.fused_router,
// moe.fused_expert_proj, moe.fused_expert_merge) to ONE row kernel each, and
// their gradients (moe.fused_expert_proj_grad, moe.fused_expert_merge_grad)
// to one row kernel per gradient: an
// `scf.forall` on tensors with `shared_outs`, whose iterations keep their
// state in scalars and static-size vectors (scf.for iter_args), read inputs
// with tensor.extract and vector.transfer_read, and write one disjoint
// slice of each result with vector.transfer_write and
// tensor.parallel_insert_slice. No tensor is created inside a kernel body:
// on the GPU target each iteration is one thread and a tensor would be an
// allocation in the kernel.
//
// The kernels accumulate in the order of the unfused lowerings in
// MoeToLinalg.cpp (router dot products over d; each route's projection
// over the reduced width, then the gated sum over routes), so the fused
// and unfused routes agree to rounding, the router bit for bit.
//
//===----------------------------------------------------------------------===//

#include "lib/Dialect/Moe/Utils/Kernels.h"
#include "lib/Conversion/MoeToLinalg/MoeToLinalg.h"
#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

using namespace mlir;
using namespace mlir::switchyard;

namespace {

//===----------------------------------------------------------------------===//
// Row kernel construction
//===----------------------------------------------------------------------===//

/// What one kernel iteration writes into one shared output: `tile` (a
/// [1, ..., 1, W] tensor) at `offsets`.
struct RowWrite {
  Value tile;
  SmallVector<OpFoldResult> offsets;
};

/// Builds the body of one iteration from the induction variables and the
/// shared outputs; returns one write per shared output.
using RowBody = function_ref<SmallVector<RowWrite>(
    ImplicitLocOpBuilder &b, ValueRange ivs, ValueRange outs)>;

/// `scf.forall (ivs) in (counts) shared_outs(inits)` with `body`; returns
/// the results.
SmallVector<Value> buildRowKernel(ImplicitLocOpBuilder &b,
                                  ArrayRef<OpFoldResult> counts,
                                  ValueRange inits, RowBody body) {
  auto forall = scf::ForallOp::create(b, counts, inits, std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(forall.getTerminator());
  SmallVector<RowWrite> writes =
      body(b, forall.getInductionVars(), forall.getRegionIterArgs());
  b.setInsertionPointToStart(forall.getTerminator().getBody());
  for (auto [write, dest] :
       llvm::zip_equal(writes, forall.getRegionIterArgs())) {
    auto tileType = cast<RankedTensorType>(write.tile.getType());
    SmallVector<OpFoldResult> sizes, strides(tileType.getRank(),
                                             b.getIndexAttr(1));
    for (int64_t size : tileType.getShape())
      sizes.push_back(b.getIndexAttr(size));
    tensor::ParallelInsertSliceOp::create(b, write.tile, dest, write.offsets,
                                          sizes, strides);
  }
  return forall.getResults();
}

/// Writes the 1-D `vector` (converted to `dest`'s element type) into the
/// [1, ..., 1, W] slice of the shared output `dest` at `offsets`.
RowWrite writeRow(ImplicitLocOpBuilder &b, Value vector, Value dest,
                  ArrayRef<Value> offsets) {
  auto destType = cast<RankedTensorType>(dest.getType());
  auto vectorType = cast<VectorType>(vector.getType());
  Type element = destType.getElementType();
  if (vectorType.getElementType() != element) {
    auto converted = VectorType::get(vectorType.getShape(), element);
    vector = isa<FloatType>(element)
                 ? arith::TruncFOp::create(b, converted, vector).getResult()
                 : arith::IndexCastOp::create(b, converted, vector).getResult();
  }
  int64_t rank = destType.getRank();
  SmallVector<OpFoldResult> at(getAsOpFoldResult(offsets)), sizes,
      strides(rank, b.getIndexAttr(1));
  for (int64_t dim = 0; dim + 1 < rank; ++dim)
    sizes.push_back(b.getIndexAttr(1));
  sizes.push_back(b.getIndexAttr(vectorType.getNumElements()));
  Value slice = tensor::ExtractSliceOp::create(b, dest, at, sizes, strides);
  SmallVector<Value> zeros(rank, indexConstant(b, 0));
  Value tile = vector::TransferWriteOp::create(b, vector, slice, zeros,
                                               ArrayRef<bool>{true})
                   .getResult();
  return {tile, std::move(at)};
}

/// A `vector<width x f32>` of zeros.
Value zeroVector(ImplicitLocOpBuilder &b, int64_t width) {
  auto type = VectorType::get({width}, b.getF32Type());
  return arith::ConstantOp::create(
      b, type, DenseElementsAttr::get(type, b.getF32FloatAttr(0.0f)));
}

/// `width` consecutive elements of `source` along its last dimension from
/// `indices`, as f32. Unless `inBounds`, elements past the end of the row
/// read as 0 (a masked load).
Value readRow(ImplicitLocOpBuilder &b, Value source, ValueRange indices,
              int64_t width, bool inBounds = true) {
  Type element = cast<RankedTensorType>(source.getType()).getElementType();
  Value padding = arith::ConstantOp::create(b, element,
                                            b.getFloatAttr(element, 0.0));
  Value row = vector::TransferReadOp::create(
      b, VectorType::get({width}, element), source, indices, padding,
      ArrayRef<bool>{inBounds});
  if (element.isF32())
    return row;
  return arith::ExtFOp::create(b, VectorType::get({width}, b.getF32Type()),
                               row);
}

/// Columns per chunk. A kernel iteration accumulates up to 32 columns of a
/// row in vector registers (two of 512 bits), so that each scalar it loads
/// (an input element, a gate, a routing coefficient) feeds that many
/// multiply-adds; a chunk whose columns are updated one by one (dsource's)
/// is 16 wide, one register. (Of 16, 32, 64 and 128, 32 is the fastest on
/// the 47M layer's kernels, bench/Inputs/kernels-47m.mlir.)
constexpr int64_t kRowColumns = 32, kScalarColumns = 16;

/// How a row of `width` columns splits into chunks: `count` chunks of
/// `size` columns, the last one partial unless `exact`. Partial chunks are
/// read with masked loads (zeros past the end) and written into padding
/// that `trimmed` slices off the kernel's result.
struct Chunks {
  int64_t width, size, count;

  Chunks(int64_t width, int64_t limit)
      : width(width), size(std::min(width, limit)),
        count(size > 0 ? (width + size - 1) / size : 0) {}
  bool exact() const { return size * count == width; }
  /// The row width of a result written chunk by chunk.
  int64_t padded() const { return size * count; }
  /// The first column of chunk `index`.
  Value start(ImplicitLocOpBuilder &b, Value index) const {
    return arith::MulIOp::create(b, index, indexConstant(b, size));
  }
  /// Adds the chunk dimension to a kernel's iteration counts, where the row
  /// takes more than one chunk.
  void addDimension(ImplicitLocOpBuilder &b,
                    SmallVectorImpl<OpFoldResult> &counts) const {
    if (count > 1)
      counts.push_back(b.getIndexAttr(count));
  }
  /// The first column of an iteration's chunk: from its last induction
  /// variable where addDimension added one, else 0.
  Value column(ImplicitLocOpBuilder &b, ValueRange ivs) const {
    return count > 1 ? start(b, ivs.back()) : indexConstant(b, 0);
  }
  /// `result` (last dimension padded()) cut back to `width` columns.
  Value trimmed(ImplicitLocOpBuilder &b, Value result) const {
    if (exact())
      return result;
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0)),
        sizes = sizesOf(b, result), strides(type.getRank(), b.getIndexAttr(1));
    sizes.back() = b.getIndexAttr(width);
    return tensor::ExtractSliceOp::create(b, result, offsets, sizes, strides);
  }
};

/// `sizes` with the last one replaced by `last`.
SmallVector<OpFoldResult> withLast(ArrayRef<OpFoldResult> sizes,
                                   OpFoldResult last) {
  SmallVector<OpFoldResult> result(sizes);
  result.back() = last;
  return result;
}

/// An `scf.for` from 0 to `count` with `inits`; `body` returns the yielded
/// values.
ValueRange loop(ImplicitLocOpBuilder &b, Value count, ValueRange inits,
                function_ref<SmallVector<Value>(ImplicitLocOpBuilder &,
                                                Value iv, ValueRange iters)>
                    body) {
  auto forOp = scf::ForOp::create(
      b, indexConstant(b, 0), count, indexConstant(b, 1), inits,
      [&](OpBuilder &nested, Location loc, Value iv, ValueRange iters) {
        ImplicitLocOpBuilder inner(loc, nested);
        scf::YieldOp::create(inner, body(inner, iv, iters));
      });
  return forOp.getResults();
}

/// Σ_w broadcast(source[prefix..., w]) · weight[row, w, column : column+C]
/// over the reduced width w in order: one route's projection, in f32.
Value routeProjection(ImplicitLocOpBuilder &b, Value source,
                      ValueRange prefix, Value weight, Value row, Value column,
                      int64_t chunk, bool inBounds) {
  Value reduced = dimOf(b, weight, 1);
  return loop(b, reduced, zeroVector(b, chunk),
              [&](ImplicitLocOpBuilder &b, Value w,
                  ValueRange acc) -> SmallVector<Value> {
                SmallVector<Value> at(prefix);
                at.push_back(w);
                Value scalar =
                    toF32(b, tensor::ExtractOp::create(b, source, at));
                Value weights = readRow(b, weight, ValueRange{row, w, column},
                                        chunk, inBounds);
                Value term = arith::MulFOp::create(
                    b, vector::BroadcastOp::create(b, weights.getType(), scalar),
                    weights);
                return {arith::AddFOp::create(b, acc[0], term)};
              })[0];
}

/// acc + broadcast(gate) · route.
Value addGated(ImplicitLocOpBuilder &b, Value acc, Value gate, Value route) {
  Value scaled = arith::MulFOp::create(
      b, vector::BroadcastOp::create(b, route.getType(), gate), route);
  return arith::AddFOp::create(b, acc, scaled);
}

//===----------------------------------------------------------------------===//
// moe.fused_router
//===----------------------------------------------------------------------===//

/// Experts per pass over a token's features in the fused router: their
/// dot products accumulate side by side in one vector (as kRowColumns).
constexpr int64_t kRouterExperts = 32;

/// One iteration per token (and head): E dot products over d, the sigmoid,
/// and a running top-k in k (key, value, index) scalar slots, sorted by
/// descending key with ties to the lower index. Empty slots hold
/// (-inf, 0, E), so that masked experts (key -inf) still fill them in index
/// order. The dot products of up to kRouterExperts experts accumulate
/// together in one pass over d (each feature of the token loaded once for
/// all of them, in order over d as each dot product alone would be), then
/// the sigmoid and the top-k take them one by one.
/// The logits of `count` consecutive expert rows from `row0` for token `n`:
/// Σ_d x[n, d] · w[row0 + j, d] in f32, all `count` in one pass over d
/// (x[n, d] loaded once per step), in moe.gate's order over d.
Value routerDots(ImplicitLocOpBuilder &b, Value x, Value w, Value n,
                 Value row0, int64_t count) {
  Type f32 = b.getF32Type();
  return loop(b, dimOf(b, x, 1), zeroVector(b, count),
              [&](ImplicitLocOpBuilder &b, Value d,
                  ValueRange acc) -> SmallVector<Value> {
                Value xv = toF32(
                    b, tensor::ExtractOp::create(b, x, ValueRange{n, d}));
                SmallVector<Value> weights;
                for (int64_t j = 0; j < count; ++j) {
                  Value row =
                      arith::AddIOp::create(b, row0, indexConstant(b, j));
                  weights.push_back(toF32(
                      b, tensor::ExtractOp::create(b, w, ValueRange{row, d})));
                }
                Value wv = vector::FromElementsOp::create(
                    b, VectorType::get({count}, f32), weights);
                Value xs = vector::BroadcastOp::create(b, wv.getType(), xv);
                return {arith::AddFOp::create(
                    b, acc[0], arith::MulFOp::create(b, xs, wv))};
              })[0];
}

struct FusedRouterLowering : public OpRewritePattern<moe::FusedRouterOp> {
  /// `logitsMatmul`: the logits [N, H·E] are one matmul first (moe.gate's),
  /// which the row kernel reads; else it computes them itself.
  FusedRouterLowering(MLIRContext *ctx, bool logitsMatmul)
      : OpRewritePattern(ctx), logitsMatmul(logitsMatmul) {}
  bool logitsMatmul;

  LogicalResult matchAndRewrite(moe::FusedRouterOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value x = op.getInput(), w = op.getWeight(), mask = op.getMask();
    RankedTensorType scoresType = op.getScores().getType();
    RankedTensorType indicesType = op.getIndices().getType();
    bool headed = scoresType.getRank() == 3;
    int64_t experts = scoresType.getShape().back();
    int64_t k = op.getK();
    bool writeScores = !op.getScores().use_empty();
    Type f32 = b.getF32Type();

    OpFoldResult tokens = sizesOf(b, x)[0];
    SmallVector<OpFoldResult> counts = {tokens};
    if (headed)
      counts.push_back(b.getIndexAttr(scoresType.getDimSize(1)));
    SmallVector<OpFoldResult> slotSizes(counts), scoreSizes(counts);
    slotSizes.push_back(b.getIndexAttr(k));
    scoreSizes.push_back(b.getIndexAttr(experts));
    SmallVector<Value> inits = {
        tensor::EmptyOp::create(b, slotSizes, f32),
        tensor::EmptyOp::create(b, slotSizes, indicesType.getElementType())};
    if (writeScores)
      inits.push_back(tensor::EmptyOp::create(b, scoreSizes, f32));
    Value logits = logitsMatmul ? matmulTransposedF32(b, x, w) : Value();

    SmallVector<Value> results = buildRowKernel(
        b, counts, inits,
        [&](ImplicitLocOpBuilder &b, ValueRange ivs,
            ValueRange outs) -> SmallVector<RowWrite> {
          Value n = ivs[0];
          Value h = headed ? ivs[1] : indexConstant(b, 0);
          Value negInf = f32Constant(b, -std::numeric_limits<float>::infinity());
          Value expertCount = indexConstant(b, experts);
          // Slots: k keys, k values, k indices, then the score vector.
          SmallVector<Value> state;
          state.append(k, negInf);
          state.append(k, f32Constant(b, 0.0));
          state.append(k, expertCount);
          if (writeScores)
            state.push_back(zeroVector(b, experts));

          // Expert e's score from its logit `dot`, bubbled into the slots.
          auto selectExpert = [&](ImplicitLocOpBuilder &b, Value e, Value dot,
                                  ValueRange slots) -> SmallVector<Value> {
            Value score = sigmoid(b, dot);
            Value key = score;
            if (mask) {
              SmallVector<Value> at = {n};
              if (headed)
                at.push_back(h);
              at.push_back(e);
              Value dropped = tensor::ExtractOp::create(b, mask, at);
              key = arith::SelectOp::create(b, dropped, negInf, score);
            }
            // Bubble the candidate down the sorted slots.
            Value carryKey = key, carryValue = score, carryIndex = e;
            SmallVector<Value> next(3 * k);
            for (int64_t j = 0; j < k; ++j) {
              Value slotKey = slots[j], slotValue = slots[k + j];
              Value slotIndex = slots[2 * k + j];
              Value greater = arith::CmpFOp::create(
                  b, arith::CmpFPredicate::OGT, carryKey, slotKey);
              Value equal = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ,
                                                  carryKey, slotKey);
              Value lower = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                                  carryIndex, slotIndex);
              Value better = arith::OrIOp::create(
                  b, greater, arith::AndIOp::create(b, equal, lower));
              auto pick = [&](Value ifBetter, Value otherwise) -> Value {
                return arith::SelectOp::create(b, better, ifBetter, otherwise);
              };
              next[j] = pick(carryKey, slotKey);
              next[k + j] = pick(carryValue, slotValue);
              next[2 * k + j] = pick(carryIndex, slotIndex);
              carryKey = pick(slotKey, carryKey);
              carryValue = pick(slotValue, carryValue);
              carryIndex = pick(slotIndex, carryIndex);
            }
            if (writeScores)
              next.push_back(vector::InsertOp::create(b, score, slots[3 * k],
                                                      OpFoldResult(e)));
            return next;
          };
          SmallVector<Value> final(state);
          for (int64_t first = 0; first < experts; first += kRouterExperts) {
            int64_t count = std::min(kRouterExperts, experts - first);
            Value row0 = arith::AddIOp::create(
                b, arith::MulIOp::create(b, h, expertCount),
                indexConstant(b, first));
            Value dots =
                logits ? readRow(b, logits, ValueRange{n, row0}, count)
                       : routerDots(b, x, w, n, row0, count);
            ValueRange chunk =
                loop(b, indexConstant(b, count), final,
                     [&](ImplicitLocOpBuilder &b, Value j,
                         ValueRange slots) -> SmallVector<Value> {
                       Value e =
                           arith::AddIOp::create(b, j, indexConstant(b, first));
                       Value dot =
                           vector::ExtractOp::create(b, dots, OpFoldResult(j));
                       return selectExpert(b, e, dot, slots);
                     });
            final.assign(chunk.begin(), chunk.end());
          }

          SmallVector<Value> offsets = {n};
          if (headed)
            offsets.push_back(h);
          offsets.push_back(indexConstant(b, 0));
          ArrayRef<Value> slots(final);
          Value values = vector::FromElementsOp::create(
              b, VectorType::get({k}, f32), slots.slice(k, k));
          Value indices = vector::FromElementsOp::create(
              b, VectorType::get({k}, b.getIndexType()), slots.slice(2 * k, k));
          SmallVector<RowWrite> writes = {
              writeRow(b, values, outs[0], offsets),
              writeRow(b, indices, outs[1], offsets)};
          if (writeScores)
            writes.push_back(writeRow(b, final[3 * k], outs[2], offsets));
          return writes;
        });

    Value scores = writeScores
                       ? results[2]
                       : tensor::EmptyOp::create(b, scoreSizes, f32).getResult();
    SmallVector<Value> computed = {results[0], results[1], scores};
    SmallVector<Value> replacements;
    for (auto [value, result] : llvm::zip_equal(computed, op->getResults()))
      replacements.push_back(castTo(b, value, result.getType()));
    rewriter.replaceOp(op, replacements);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.fused_expert_proj and moe.fused_expert_merge
//===----------------------------------------------------------------------===//

/// One iteration per (token n, head h, chunk c of the head width):
///   acc = Σ_j g[n, h, j] · (Σ_d x[n, d] · W[h·E + i[n, h, j], d, chunk c])
struct FusedExpertProjLowering
    : public OpRewritePattern<moe::FusedExpertProjOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::FusedExpertProjOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value x = op.getInput(), w = op.getWeight(), g = op.getGates();
    Value idx = op.getIndices();
    RankedTensorType type = op.getResult().getType();
    Chunks chunks(type.getDimSize(2), kRowColumns);
    SmallVector<OpFoldResult> gateSizes = sizesOf(b, g);
    Value init = tensor::EmptyOp::create(
        b, withLast(gateSizes, b.getIndexAttr(chunks.padded())),
        type.getElementType());
    Value perHead = expertsPerHead(b, w, g);
    Value routes = dimOf(b, g, 2);
    SmallVector<OpFoldResult> counts = {gateSizes[0], gateSizes[1]};
    chunks.addDimension(b, counts);
    Value result = buildRowKernel(
        b, counts, init,
        [&](ImplicitLocOpBuilder &b, ValueRange ivs,
            ValueRange outs) -> SmallVector<RowWrite> {
          Value n = ivs[0], h = ivs[1];
          Value column = chunks.column(b, ivs);
          Value acc = loop(
              b, routes, zeroVector(b, chunks.size),
              [&](ImplicitLocOpBuilder &b, Value j,
                  ValueRange acc) -> SmallVector<Value> {
                Value e = tensor::ExtractOp::create(b, idx, ValueRange{n, h, j});
                Value row = expertRow(b, h, perHead, e);
                Value route =
                    routeProjection(b, x, ValueRange{n}, w, row, column,
                                    chunks.size, chunks.exact());
                Value gate = tensor::ExtractOp::create(b, g, ValueRange{n, h, j});
                return {addGated(b, acc[0], gate, route)};
              })[0];
          return {writeRow(b, acc, outs[0], {n, h, column})};
        })[0];
    rewriter.replaceOp(op, castTo(b, chunks.trimmed(b, result), type));
    return success();
  }
};

/// One iteration per (token n, chunk c of the model width):
///   acc = Σ_h Σ_j g[n, h, j] · (Σ_f heads[n, h, f] · W[h·E + i, f, chunk c])
struct FusedExpertMergeLowering
    : public OpRewritePattern<moe::FusedExpertMergeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::FusedExpertMergeOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value heads = op.getHeads(), w = op.getWeight(), g = op.getGates();
    Value idx = op.getIndices();
    RankedTensorType type = op.getResult().getType();
    Chunks chunks(type.getDimSize(1), kRowColumns);
    OpFoldResult tokens = sizesOf(b, g)[0];
    Value init = tensor::EmptyOp::create(
        b, {tokens, b.getIndexAttr(chunks.padded())}, type.getElementType());
    Value perHead = expertsPerHead(b, w, g);
    Value headCount = dimOf(b, g, 1), routes = dimOf(b, g, 2);
    SmallVector<OpFoldResult> counts = {tokens};
    chunks.addDimension(b, counts);
    Value result = buildRowKernel(
        b, counts, init,
        [&](ImplicitLocOpBuilder &b, ValueRange ivs,
            ValueRange outs) -> SmallVector<RowWrite> {
          Value n = ivs[0];
          Value column = chunks.column(b, ivs);
          Value acc = loop(
              b, headCount, zeroVector(b, chunks.size),
              [&](ImplicitLocOpBuilder &b, Value h,
                  ValueRange accHead) -> SmallVector<Value> {
                return {loop(b, routes, accHead,
                             [&](ImplicitLocOpBuilder &b, Value j,
                                 ValueRange acc) -> SmallVector<Value> {
                               Value e = tensor::ExtractOp::create(
                                   b, idx, ValueRange{n, h, j});
                               Value row = expertRow(b, h, perHead, e);
                               Value route = routeProjection(
                                   b, heads, ValueRange{n, h}, w, row, column,
                                   chunks.size, chunks.exact());
                               Value gate = tensor::ExtractOp::create(
                                   b, g, ValueRange{n, h, j});
                               return {addGated(b, acc[0], gate, route)};
                             })[0]};
              })[0];
          return {writeRow(b, acc, outs[0], {n, column})};
        })[0];
    rewriter.replaceOp(op, castTo(b, chunks.trimmed(b, result), type));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.fused_expert_proj_grad and moe.fused_expert_merge_grad
//===----------------------------------------------------------------------===//

/// The operands of a gathered projection's gradient in the roles its kernels
/// give them. The weight is [H·E, A, B]; the source (what the forward op
/// projected) has width A and the result gradient width B:
///   V (moe.expert_proj):  source = input [N, A],    dres = dout [N, H, B]
///   O (moe.expert_merge): source = heads [N, H, A], dres = dy   [N, B]
/// With r = h·E + i[n, h, j] and g = gates[n, h, j]:
///   dsource[n, (h,) a] = Σ_{(h,) j} g · Σ_b dres[n, (h,) b] · W[r, a, b]
///   dg[n, h, j]        = Σ_b dres[n, (h,) b] · Σ_a source[n, (h,) a] · W[r, a,
///   b] dW[r, a, b]        = Σ_n (Σ_j [i[n, h, j] = e] · g) · source[n, (h,) a]
///                            · dres[n, (h,) b]
struct ProjectionGrad {
  Value source, weight, gates, indices, resultGrad;
  /// O: the source has the head dimension and the result gradient not; V:
  /// the other way round.
  bool sourceHeaded;

  /// Indices of source[n, (h,) ·] and dres[n, (h,) ·] before the width.
  SmallVector<Value> sourceAt(Value n, Value h) const {
    return sourceHeaded ? SmallVector<Value>{n, h} : SmallVector<Value>{n};
  }
  SmallVector<Value> resultGradAt(Value n, Value h) const {
    return sourceHeaded ? SmallVector<Value>{n} : SmallVector<Value>{n, h};
  }
};

/// The source-gradient kernel. One iteration per (token n, (head h,) chunk
/// of C source columns a): for the routes (h, j) of the token (V) or of the
/// head (O), acc[a] += g · (dres[n, (h,) :] · W[r, a, :]), each dot product
/// over contiguous rows of dres and W, chunk by chunk of B.
Value sourceGradKernel(ImplicitLocOpBuilder &b, const ProjectionGrad &p,
                       Type elementType) {
  auto weightType = cast<RankedTensorType>(p.weight.getType());
  Chunks chunks(weightType.getDimSize(1), kScalarColumns),
      dots(weightType.getDimSize(2), kRowColumns);
  SmallVector<OpFoldResult> sizes = sizesOf(b, p.source);
  Value init = tensor::EmptyOp::create(
      b, withLast(sizes, b.getIndexAttr(chunks.padded())), elementType);
  Value perHead = expertsPerHead(b, p.weight, p.gates);
  Value headCount = dimOf(b, p.gates, 1), routes = dimOf(b, p.gates, 2);
  SmallVector<OpFoldResult> counts(sizes.begin(), sizes.end() - 1);
  counts.push_back(b.getIndexAttr(chunks.count));
  Value lastColumn = indexConstant(b, chunks.width - 1);
  return chunks.trimmed(
      b,
      buildRowKernel(
          b, counts, init,
          [&](ImplicitLocOpBuilder &b, ValueRange ivs,
              ValueRange outs) -> SmallVector<RowWrite> {
            Value n = ivs[0];
            Value start = chunks.start(b, ivs.back());
            // The routes of one head h into acc.
            auto headRoutes = [&](ImplicitLocOpBuilder &b, Value h,
                                  Value init) -> Value {
              return loop(
                  b, routes, init,
                  [&](ImplicitLocOpBuilder &b, Value j,
                      ValueRange acc) -> SmallVector<Value> {
                    Value e = tensor::ExtractOp::create(b, p.indices,
                                                        ValueRange{n, h, j});
                    Value row = expertRow(b, h, perHead, e);
                    Value gate = tensor::ExtractOp::create(
                        b, p.gates, ValueRange{n, h, j});
                    SmallVector<Value> dresAt = p.resultGradAt(n, h);
                    dresAt.push_back(Value());
                    return {loop(
                        b, indexConstant(b, chunks.size), acc,
                        [&](ImplicitLocOpBuilder &b, Value c,
                            ValueRange acc) -> SmallVector<Value> {
                          // Columns of a partial chunk past the end read
                          // the last row of W; the padding drops them.
                          Value a = arith::MinUIOp::create(
                              b, arith::AddIOp::create(b, start, c),
                              lastColumn);
                          Value sum = loop(
                              b, indexConstant(b, dots.count),
                              zeroVector(b, dots.size),
                              [&](ImplicitLocOpBuilder &b, Value chunk,
                                  ValueRange sum) -> SmallVector<Value> {
                                Value column = dots.start(b, chunk);
                                dresAt.back() = column;
                                Value dres = readRow(b, p.resultGrad, dresAt,
                                                     dots.size, dots.exact());
                                Value weights = readRow(
                                    b, p.weight, ValueRange{row, a, column},
                                    dots.size, dots.exact());
                                return {vector::FMAOp::create(b, dres, weights,
                                                              sum[0])};
                              })[0];
                          Value dot = vector::ReductionOp::create(
                              b, vector::CombiningKind::ADD, sum);
                          Value old = vector::ExtractOp::create(
                              b, acc[0], OpFoldResult(c));
                          Value updated = arith::AddFOp::create(
                              b, old, arith::MulFOp::create(b, gate, dot));
                          return {vector::InsertOp::create(b, updated, acc[0],
                                                           OpFoldResult(c))};
                        })[0]};
                  })[0];
            };
            Value acc;
            SmallVector<Value> offsets = {n};
            if (p.sourceHeaded) {
              acc = headRoutes(b, ivs[1], zeroVector(b, chunks.size));
              offsets.push_back(ivs[1]);
            } else {
              acc = loop(b, headCount, zeroVector(b, chunks.size),
                         [&](ImplicitLocOpBuilder &b, Value h,
                             ValueRange acc) -> SmallVector<Value> {
                           return {headRoutes(b, h, acc[0])};
                         })[0];
            }
            offsets.push_back(start);
            return {writeRow(b, acc, outs[0], offsets)};
          })[0]);
}

/// The gate-gradient kernel. One iteration per route (n, h, j): chunk by
/// chunk of the B result columns, the route's projection
/// Σ_a source[n, (h,) a] · W[r, a, chunk] times dres[n, (h,) chunk],
/// summed.
Value gateGradKernel(ImplicitLocOpBuilder &b, const ProjectionGrad &p) {
  auto weightType = cast<RankedTensorType>(p.weight.getType());
  Chunks chunks(weightType.getDimSize(2), kRowColumns);
  SmallVector<OpFoldResult> sizes = sizesOf(b, p.gates);
  Value init = tensor::EmptyOp::create(b, sizes, b.getF32Type());
  Value perHead = expertsPerHead(b, p.weight, p.gates);
  return buildRowKernel(
      b, sizes, init,
      [&](ImplicitLocOpBuilder &b, ValueRange ivs,
          ValueRange outs) -> SmallVector<RowWrite> {
        Value n = ivs[0], h = ivs[1], j = ivs[2];
        Value e = tensor::ExtractOp::create(b, p.indices, ValueRange{n, h, j});
        Value row = expertRow(b, h, perHead, e);
        Value acc =
            loop(b, indexConstant(b, chunks.count), zeroVector(b, chunks.size),
                 [&](ImplicitLocOpBuilder &b, Value c,
                     ValueRange acc) -> SmallVector<Value> {
                   Value column = chunks.start(b, c);
                   Value route = routeProjection(
                       b, p.source, p.sourceAt(n, h), p.weight, row, column,
                       chunks.size, chunks.exact());
                   SmallVector<Value> at = p.resultGradAt(n, h);
                   at.push_back(column);
                   Value dres = readRow(b, p.resultGrad, at, chunks.size,
                                        chunks.exact());
                   return {arith::AddFOp::create(
                       b, acc[0], arith::MulFOp::create(b, route, dres))};
                 })[0];
        Value dot =
            vector::ReductionOp::create(b, vector::CombiningKind::ADD, acc);
        Value tile = vector::BroadcastOp::create(
            b, VectorType::get({1}, b.getF32Type()), dot);
        return {writeRow(b, tile, outs[0], {n, h, j})};
      })[0];
}

/// The routing coefficients c[n, r] = Σ_j [h·E + i[n, h, j] = r] · g[n, h, j]
/// as an f32 [N, H·E] tensor: one iteration per token.
Value routeCoefficients(ImplicitLocOpBuilder &b, const ProjectionGrad &p) {
  int64_t rows = cast<RankedTensorType>(p.weight.getType()).getDimSize(0);
  Value perHead = expertsPerHead(b, p.weight, p.gates);
  Value headCount = dimOf(b, p.gates, 1), routes = dimOf(b, p.gates, 2);
  OpFoldResult tokens = sizesOf(b, p.gates)[0];
  Value init = tensor::EmptyOp::create(b, {tokens, b.getIndexAttr(rows)},
                                       b.getF32Type());
  return buildRowKernel(
      b, {tokens}, init,
      [&](ImplicitLocOpBuilder &b, ValueRange ivs,
          ValueRange outs) -> SmallVector<RowWrite> {
        Value n = ivs[0];
        Value coefficients = loop(
            b, headCount, zeroVector(b, rows),
            [&](ImplicitLocOpBuilder &b, Value h,
                ValueRange acc) -> SmallVector<Value> {
              return {loop(b, routes, acc,
                           [&](ImplicitLocOpBuilder &b, Value j,
                               ValueRange acc) -> SmallVector<Value> {
                             Value e = tensor::ExtractOp::create(
                                 b, p.indices, ValueRange{n, h, j});
                             Value r = expertRow(b, h, perHead, e);
                             Value gate = toF32(b, tensor::ExtractOp::create(
                                                       b, p.gates,
                                                       ValueRange{n, h, j}));
                             Value old = vector::ExtractOp::create(
                                 b, acc[0], OpFoldResult(r));
                             return {vector::InsertOp::create(
                                 b, arith::AddFOp::create(b, old, gate),
                                 acc[0], OpFoldResult(r))};
                           })[0]};
            })[0];
        return {writeRow(b, coefficients, outs[0], {n, indexConstant(b, 0)})};
      })[0];
}

/// The weight-gradient kernel. One iteration per (expert row r, source
/// column a, chunk of C result columns) scans the tokens n and skips those
/// whose routes did not pick r (coefficient exactly 0):
/// acc += (c[n, r] · source[n, (h,) a]) · dres[n, (h,) chunk], h = r / E.
Value weightGradKernel(ImplicitLocOpBuilder &b, const ProjectionGrad &p,
                       Type elementType) {
  auto weightType = cast<RankedTensorType>(p.weight.getType());
  Chunks chunks(weightType.getDimSize(2), kRowColumns);
  Value coefficients = routeCoefficients(b, p);
  SmallVector<OpFoldResult> sizes = sizesOf(b, p.weight);
  Value init = tensor::EmptyOp::create(
      b, withLast(sizes, b.getIndexAttr(chunks.padded())), elementType);
  Value perHead = expertsPerHead(b, p.weight, p.gates);
  Value tokens = dimOf(b, p.gates, 0);
  SmallVector<OpFoldResult> counts = {sizes[0], sizes[1],
                                      b.getIndexAttr(chunks.count)};
  return chunks.trimmed(
      b,
      buildRowKernel(
          b, counts, init,
          [&](ImplicitLocOpBuilder &b, ValueRange ivs,
              ValueRange outs) -> SmallVector<RowWrite> {
            Value r = ivs[0], a = ivs[1];
            Value column = chunks.start(b, ivs[2]);
            Value h = arith::DivUIOp::create(b, r, perHead);
            Value zero = f32Constant(b, 0.0);
            Value acc = loop(
                b, tokens, zeroVector(b, chunks.size),
                [&](ImplicitLocOpBuilder &b, Value n,
                    ValueRange acc) -> SmallVector<Value> {
                  Value coefficient = tensor::ExtractOp::create(
                      b, coefficients, ValueRange{n, r});
                  Value routed = arith::CmpFOp::create(
                      b, arith::CmpFPredicate::UNE, coefficient, zero);
                  auto ifOp = scf::IfOp::create(
                      b, acc[0].getType(), routed, /*withElseRegion=*/true);
                  {
                    OpBuilder::InsertionGuard guard(b);
                    b.setInsertionPointToStart(ifOp.thenBlock());
                    SmallVector<Value> sourceAt = p.sourceAt(n, h);
                    sourceAt.push_back(a);
                    Value scale = arith::MulFOp::create(
                        b, coefficient,
                        toF32(b, tensor::ExtractOp::create(b, p.source,
                                                           sourceAt)));
                    SmallVector<Value> at = p.resultGradAt(n, h);
                    at.push_back(column);
                    Value dres = readRow(b, p.resultGrad, at, chunks.size,
                                         chunks.exact());
                    scf::YieldOp::create(b, addGated(b, acc[0], scale, dres));
                    b.setInsertionPointToStart(ifOp.elseBlock());
                    scf::YieldOp::create(b, acc[0]);
                  }
                  return {ifOp.getResult(0)};
                })[0];
            return {writeRow(b, acc, outs[0], {r, a, column})};
          })[0]);
}

/// Lowers a fused projection gradient to its three kernels and replaces
/// the op by (dsource, dW, dg).
void lowerProjectionGrad(PatternRewriter &rewriter, Operation *op,
                         const ProjectionGrad &p) {
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  auto elementOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  Value dsource = sourceGradKernel(b, p, elementOf(p.source));
  Value dweight = weightGradKernel(b, p, elementOf(p.weight));
  Value dgates = gateGradKernel(b, p);
  SmallVector<Value> computed = {dsource, dweight, dgates}, replacements;
  for (auto [value, result] : llvm::zip_equal(computed, op->getResults()))
    replacements.push_back(castTo(b, value, result.getType()));
  rewriter.replaceOp(op, replacements);
}

/// moe.fused_expert_proj_grad: the V roles (source = input [N, D]).
struct FusedExpertProjGradLowering
    : public OpRewritePattern<moe::FusedExpertProjGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::FusedExpertProjGradOp op,
                                PatternRewriter &rewriter) const override {
    lowerProjectionGrad(rewriter, op,
                        {op.getInput(), op.getWeight(), op.getGates(),
                         op.getIndices(), op.getResultGrad(),
                         /*sourceHeaded=*/false});
    return success();
  }
};

/// moe.fused_expert_merge_grad: the O roles (source = heads [N, H, F]).
struct FusedExpertMergeGradLowering
    : public OpRewritePattern<moe::FusedExpertMergeGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(moe::FusedExpertMergeGradOp op,
                                PatternRewriter &rewriter) const override {
    lowerProjectionGrad(rewriter, op,
                        {op.getHeads(), op.getWeight(), op.getGates(),
                         op.getIndices(), op.getResultGrad(),
                         /*sourceHeaded=*/true});
    return success();
  }
};

} // namespace

void mlir::switchyard::populateFusedKernelPatterns(RewritePatternSet &patterns,
                                                   bool routerLogitsMatmul) {
  patterns.add<FusedRouterLowering>(patterns.getContext(), routerLogitsMatmul);
  patterns.add<FusedExpertProjLowering, FusedExpertMergeLowering,
               FusedExpertProjGradLowering, FusedExpertMergeGradLowering>(
      patterns.getContext());
}
