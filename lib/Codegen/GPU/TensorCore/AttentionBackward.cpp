//===- AttentionBackward.cpp - flash attention backward on tensor cores ---===//
//
// The kernels of moe.flash_attention_grad_kernel (part of
// switchyard-gpu-tensor-core-matmul), in the manner of FlashAttention-2's
// backward pass: they recompute P = exp(Q·Kᵀ - logsumexp) from the same
// rounded factors as the forward kernel (so P sums to 1 against its
// logsumexp) and never store it either; with dS = P ∘ (dO·Vᵀ - Δ),
// Δ = Σ_f dO·O given:
//   - dK and dV: a block of 4 warps per 64 keys, each warp 16 keys, their
//     K and V rows staged once into A fragments; steps over the 64-query
//     blocks that see some of them, staging Q, dO (and the step's
//     logsumexp and Δ) into shared tiles: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, then
//     dV += Pᵀ·dO and dK += dSᵀ·Q with Pᵀ and dSᵀ as A fragments built from
//     the accumulators, Q and dO read as B by ldmatrix .trans from the
//     tiles that gave them as B for the scores;
//   - dQ: a block per 64 queries, its Q and dO rows in A fragments; steps
//     of 64 keys staging K and V: S = Q·Kᵀ, dP = dO·Vᵀ, dQ += dS·K (K by
//     ldmatrix .trans).
// Two kernels rather than atomics on dQ: dQ, dK and dV are written once,
// the results do not depend on the order of the blocks. P and dS are
// rounded to the element type as factors, as the forward kernel rounds P.
//
// With relative keys (AttentionCommon.h), the key kernel recomputes the
// same skewed scores and adds drel[δ] += Σ dS·Q: dSᵀ goes through the
// scratch (the margins zeroed), each warp takes its 16 queries by their 80
// distances (A fragments of dSᵀ by distance, Q by ldmatrix .trans) and adds
// the products with f32 atomics into a zeroed f32 buffer: the one gradient
// summed across blocks (and warps), so its low bits depend on their order.
// The query kernel adds dS·rel to dQ the same way, dS unskewed to each
// warp's 80 distance rows.
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.h"

#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <tuple>

using namespace mlir;
using namespace mlir::switchyard::tensor_cores;

namespace {
class FlashBackwardBuilder : private AttentionBuilder {
public:
  FlashBackwardBuilder(RewriterBase &rewriter,
                       moe::FlashAttentionGradKernelOp op,
                       FloatType elementType)
      : AttentionBuilder(rewriter, op, op.getQuery(), elementType), op(op) {}

  void build();

private:
  /// dK and dV: a block per 64 keys, over the queries that see them.
  void buildKeyKernel();
  /// dQ: a block per 64 queries, over the keys they see.
  void buildQueryKernel();
  /// In place, for the accumulator values of a step: the scores `s` become
  /// the weights P = exp(s - lse) (0 where not `visible`) and `dp` (dO·V)
  /// becomes dS = P ∘ (dp - Δ).
  void weightsAndScoreGrads(MutableArrayRef<Value> s, MutableArrayRef<Value> dp,
                            ArrayRef<Value> visible, ArrayRef<Value> lse,
                            ArrayRef<Value> delta);
  /// Key kernel, relative keys: adds the step's Σ_i dS[i, l]·Q[i] per
  /// distance to the f32 rel_grad_init, given dSᵀ in `ds` (keys by
  /// queries), Q in `tileQ` and δ0. dSᵀ goes through the skew scratch (its
  /// products with the relative keys read); each warp takes its 16 queries
  /// by their 80 distances: the A fragments dSᵀ(r, i) = ds[i][i + 63 - r]
  /// against Q as B (ldmatrix .trans), then one f32 atomic add per distance
  /// and column inside the problem (the warps' distances overlap).
  void accumulateRelativeKeyGrad(ArrayRef<Value> ds, Value tileQ, Value scratch,
                                 Value delta0);

  moe::FlashAttentionGradKernelOp op;
  Value batches, queries, heads, keys, shift;
};

void FlashBackwardBuilder::build() {
  Value q = op.getQuery();
  b.setInsertionPoint(op);
  batches = dim(q, 0);
  queries = dim(q, 1);
  heads = dim(q, 2);
  keys = dim(op.getKey(), 1);
  // Key u is visible to query t iff u <= t + shift.
  shift = arith::SubIOp::create(b, loc, keys, queries);
  buildKeyKernel();
  b.setInsertionPoint(op);
  buildQueryKernel();
}

void FlashBackwardBuilder::weightsAndScoreGrads(MutableArrayRef<Value> s,
                                                MutableArrayRef<Value> dp,
                                                ArrayRef<Value> visible,
                                                ArrayRef<Value> lse,
                                                ArrayRef<Value> delta) {
  Value zero = f32(0.0);
  for (int64_t i = 0; i < int64_t(s.size()); ++i) {
    Value p = math::ExpOp::create(b, loc,
                                  arith::SubFOp::create(b, loc, s[i], lse[i]));
    p = arith::SelectOp::create(b, loc, visible[i], p, zero);
    dp[i] = arith::MulFOp::create(
        b, loc, p, arith::SubFOp::create(b, loc, dp[i], delta[i]));
    s[i] = p;
  }
}

void FlashBackwardBuilder::accumulateRelativeKeyGrad(ArrayRef<Value> ds,
                                                     Value tileQ, Value scratch,
                                                     Value delta0) {
  storeScores(ds, scratch, /*keyRows=*/true);
  Value distances = dim(op.getRel(), 0);
  for (int64_t m = 0; m < kWarpRelTiles / 2; ++m) {
    // Distance rows r0 .. r0 + 15 of the warp's 80, by its 16 queries.
    Value r0 = add(warpRow, cst(m * kTileM));
    SmallVector<Value> weights;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t value = 0; value < kAccValues; ++value)
        weights.push_back(warpSkewedAt(
            scratch, add(warpRow, add(cst(h * kTileN), colOf[value])),
            add(r0, tileRowOf[value])));
    SmallVector<Value> grad(outTiles * kAccValues, f32(0.0));
    accumulate(grad, weights, tileQ, Layout::RowMajor, warpRow);
    for (int64_t jf = 0; jf < outTiles; ++jf) {
      for (int64_t value = 0; value < kAccValues; ++value) {
        Value distance = add(delta0, add(r0, tileRowOf[value]));
        Value col = add(cst(jf * kTileN), colOf[value]);
        Value inside = less(distance, distances);
        if (width % kTileN != 0)
          inside = both(inside, less(col, cst(width)));
        auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, inside,
                                      /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        memref::AtomicRMWOp::create(
            b, loc, arith::AtomicRMWKind::addf, grad[jf * kAccValues + value],
            op.getRelGradInit(), ValueRange{distance, head, col});
      }
    }
  }
}

void FlashBackwardBuilder::buildKeyKernel() {
  // Shared memory: the query and dO tiles [64][F + 8], then the step's
  // logsumexp and Δ ([2][64] f32); with rel, the relative keys' tile and
  // the skew scratch. The block's keys and values pass through the two
  // tiles first, into A fragments.
  Value rel = op.getRel();
  int64_t bytesTile = rowTileBytes();
  Type f32Type = b.getF32Type();
  int64_t relOffset = 2 * bytesTile + tileBytes(2, kBlockRows, f32Type);
  Value u0 =
      launch(keys, heads, batches, relOffset + (rel ? relativeBytes() : 0),
             {op.getQuery(), op.getResultGrad(), rel});
  Value smemQ = rowTile(0), smemDO = rowTile(bytesTile);
  Value smemStats = sharedTile(2 * bytesTile, 2, kBlockRows, f32Type);
  Value smemRel, scratch;
  if (rel)
    std::tie(smemRel, scratch) = relativeTiles(relOffset);
  stageRows(smemQ, op.getKey(), u0, keys);
  stageRows(smemDO, op.getValue(), u0, keys);
  gpu::BarrierOp::create(b, loc);
  SmallVector<Value> keyFrags = rowFragments(smemQ);
  SmallVector<Value> valueFrags = rowFragments(smemDO);

  // The queries that see some key of the block: t >= u0 - shift.
  Value one = cst(1);
  Value tStart = arith::MaxSIOp::create(
      b, loc, arith::SubIOp::create(b, loc, u0, shift), cst(0));
  // Loop state: dK's accumulators, then dV's.
  SmallVector<Value> init(2 * outTiles * kAccValues, f32(0.0));
  auto queryLoop =
      scf::ForOp::create(b, loc, tStart, queries, cst(kBlockRows), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(queryLoop.getBody());
    Value t0 = queryLoop.getInductionVar();
    gpu::BarrierOp::create(b, loc);
    stageRows(smemQ, op.getQuery(), t0, queries);
    stageRows(smemDO, op.getResultGrad(), t0, queries);
    // Thread i < 128 stages the logsumexp (i < 64) or Δ of query
    // t0 + i % 64.
    {
      Value which = arith::DivUIOp::create(b, loc, tid, cst(kBlockRows));
      Value at = arith::RemUIOp::create(b, loc, tid, cst(kBlockRows));
      Value t = minIndex(add(t0, at), sub1(queries));
      Value lse = memref::LoadOp::create(b, loc, op.getLogsumexp(),
                                         ValueRange{batch, t, head});
      Value delta = memref::LoadOp::create(b, loc, op.getDelta(),
                                           ValueRange{batch, t, head});
      Value isLse = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          which, cst(0));
      memref::StoreOp::create(
          b, loc, arith::SelectOp::create(b, loc, isLse, lse, delta), smemStats,
          ValueRange{which, at});
    }
    Value delta0;
    if (rel) {
      delta0 = firstDistance(t0, u0, shift);
      stageRel(smemRel, rel, delta0);
    }
    gpu::BarrierOp::create(b, loc);

    // Sᵀ = K·Qᵀ (+ the skewed Q·relᵀ, transposed) and dPᵀ = V·dOᵀ: the
    // warp's keys by the step's queries (tile j: queries t0 + 8j ..
    // t0 + 8j + 7).
    SmallVector<Value> s = products(keyFrags, smemQ);
    SmallVector<Value> dp = products(valueFrags, smemDO);
    if (rel)
      addRelativeScores(s, rowFragments(smemQ), smemRel, scratch,
                        /*keyRows=*/true);
    SmallVector<Value> visible, lse, delta;
    for (int64_t j = 0; j < kKeyTiles; ++j) {
      for (int64_t value = 0; value < kAccValues; ++value) {
        Value col = add(cst(j * kTileN), colOf[value]);
        Value t = add(t0, col);
        Value u = add(u0, rowOf[value]);
        visible.push_back(
            both(less(t, queries),
                 less(u, minIndex(keys, add(t, add(shift, one))))));
        lse.push_back(
            memref::LoadOp::create(b, loc, smemStats, ValueRange{cst(0), col}));
        delta.push_back(
            memref::LoadOp::create(b, loc, smemStats, ValueRange{cst(1), col}));
      }
    }
    weightsAndScoreGrads(s, dp, visible, lse, delta);
    // dV += Pᵀ·dO and dK += dSᵀ·Q (then drel, P and dSᵀ no longer live in
    // registers but dSᵀ in the scratch).
    ValueRange args = queryLoop.getRegionIterArgs();
    SmallVector<Value> next(args.begin(), args.end());
    MutableArrayRef<Value> dk =
        MutableArrayRef<Value>(next).take_front(outTiles * kAccValues);
    MutableArrayRef<Value> dv =
        MutableArrayRef<Value>(next).drop_front(outTiles * kAccValues);
    accumulate(dv, s, smemDO, Layout::RowMajor);
    accumulate(dk, dp, smemQ, Layout::RowMajor);
    if (rel)
      accumulateRelativeKeyGrad(dp, smemQ, scratch, delta0);
    scf::YieldOp::create(b, loc, next);
  }
  ValueRange sums = queryLoop.getResults();
  storeRows(sums.take_front(outTiles * kAccValues), u0, keys,
            op.getKeyGradInit());
  storeRows(sums.drop_front(outTiles * kAccValues), u0, keys,
            op.getValueGradInit());
  gpu::TerminatorOp::create(b, loc);
}

void FlashBackwardBuilder::buildQueryKernel() {
  // Shared memory: the key and value tiles [64][F + 8]; with rel, the
  // relative keys' tile and the skew scratch. The block's queries and dO
  // pass through the key and value tiles first, into A fragments.
  Value rel = op.getRel();
  int64_t bytesTile = rowTileBytes();
  Value t0 = launch(queries, heads, batches,
                    2 * bytesTile + (rel ? relativeBytes() : 0),
                    {op.getKey(), op.getValue(), rel});
  Value smemK = rowTile(0), smemV = rowTile(bytesTile);
  Value smemRel, scratch;
  if (rel)
    std::tie(smemRel, scratch) = relativeTiles(2 * bytesTile);
  stageRows(smemK, op.getQuery(), t0, queries);
  stageRows(smemV, op.getResultGrad(), t0, queries);
  gpu::BarrierOp::create(b, loc);
  SmallVector<Value> queryFrags = rowFragments(smemK);
  SmallVector<Value> gradFrags = rowFragments(smemV);
  // The logsumexp and Δ of the lane's rows g and g + 8, and the end of the
  // keys each sees.
  Value one = cst(1);
  SmallVector<Value> rowLse, rowDelta, limit;
  for (int64_t value = 0; value < kAccValues; ++value) {
    Value query = add(t0, rowOf[value]);
    Value t = minIndex(query, sub1(queries));
    rowLse.push_back(memref::LoadOp::create(b, loc, op.getLogsumexp(),
                                            ValueRange{batch, t, head}));
    rowDelta.push_back(memref::LoadOp::create(b, loc, op.getDelta(),
                                              ValueRange{batch, t, head}));
    limit.push_back(minIndex(keys, add(query, add(shift, one))));
  }

  Value kEnd = minIndex(keys, add(t0, add(cst(kBlockRows), shift)));
  SmallVector<Value> init(outTiles * kAccValues, f32(0.0));
  auto keyLoop =
      scf::ForOp::create(b, loc, cst(0), kEnd, cst(kBlockKeys), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(keyLoop.getBody());
    Value u0 = keyLoop.getInductionVar();
    gpu::BarrierOp::create(b, loc);
    stageRows(smemK, op.getKey(), u0, keys);
    stageRows(smemV, op.getValue(), u0, keys);
    if (rel)
      stageRel(smemRel, rel, firstDistance(t0, u0, shift));
    gpu::BarrierOp::create(b, loc);

    // S = Q·Kᵀ (+ Q·relᵀ skewed) and dP = dO·Vᵀ (tile j: keys u0 + 8j ..
    // u0 + 8j + 7).
    SmallVector<Value> s = products(queryFrags, smemK);
    SmallVector<Value> dp = products(gradFrags, smemV);
    if (rel)
      addRelativeScores(s, queryFrags, smemRel, scratch, /*keyRows=*/false);
    SmallVector<Value> visible, lse, delta;
    for (int64_t j = 0; j < kKeyTiles; ++j) {
      for (int64_t value = 0; value < kAccValues; ++value) {
        Value key = add(u0, add(cst(j * kTileN), colOf[value]));
        visible.push_back(less(key, limit[value]));
        lse.push_back(rowLse[value]);
        delta.push_back(rowDelta[value]);
      }
    }
    weightsAndScoreGrads(s, dp, visible, lse, delta);
    // dQ += dS·K (+ Σ_l dS[i, l]·rel[δ0 + i - l + 63]: dS unskewed to the
    // warp's 80 distance rows through the scratch).
    ValueRange args = keyLoop.getRegionIterArgs();
    SmallVector<Value> next(args.begin(), args.end());
    accumulate(next, dp, smemK, Layout::RowMajor);
    if (rel) {
      storeScores(dp, scratch, /*keyRows=*/false);
      SmallVector<Value> unskewed;
      for (int64_t j = 0; j < kWarpRelTiles; ++j)
        for (int64_t value = 0; value < kAccValues; ++value)
          unskewed.push_back(
              warpSkewedAt(scratch, rowOf[value],
                           add(warpRow, add(cst(j * kTileN), colOf[value]))));
      accumulate(next, unskewed, smemRel, Layout::RowMajor, warpRow);
    }
    scf::YieldOp::create(b, loc, next);
  }
  storeRows(keyLoop.getResults(), t0, queries, op.getQueryGradInit());
  gpu::TerminatorOp::create(b, loc);
}
} // namespace

void mlir::switchyard::tensor_cores::buildFlashAttentionGradKernels(
    RewriterBase &rewriter, moe::FlashAttentionGradKernelOp op,
    FloatType elementType) {
  FlashBackwardBuilder(rewriter, op, elementType).build();
  rewriter.eraseOp(op);
}
