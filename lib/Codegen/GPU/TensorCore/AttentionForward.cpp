//===- AttentionForward.cpp - flash attention forward on tensor cores -----===//
//
// The mma.sync kernel of moe.flash_attention_kernel (part of
// switchyard-gpu-tensor-core-matmul), in the manner of FlashAttention-2's
// forward pass: one block of 4 warps per 64 query rows of one (batch,
// head), each warp 16 rows. The block stages its queries once through
// shared memory into A fragments (ldmatrix), then walks the visible keys 64
// at a time:
//   - K (64 x F) and Vᵀ (F x 64) are staged into padded shared tiles, the
//     factors rounded to the element type, zero outside the problem;
//   - S = Q·Kᵀ (16 x 64 per warp: 8 accumulator tiles) with mma.sync (with
//     relative keys, plus Q·relᵀ skewed: AttentionCommon.h), the keys a
//     query does not see (u > t + S - T, or past the keys) set to -inf;
//   - the online softmax per row: its maximum over the step (each lane's
//     values, then the four lanes of a quad by shuffles), the weights
//     P = exp(S - m), the running sum l (per lane, summed over the quad
//     at the end) and the accumulators rescaled by exp(m_old - m_new);
//   - O += P·V with mma.sync, P's A fragments built in registers from S's
//     accumulators: an m16n8 accumulator tile's (row, column) layout is that
//     of half an m16n8k16 A fragment (PTX ISA, mma.m16n8k16 fragments), so
//     the accumulator tiles 2c and 2c + 1, rounded, are the A fragment of
//     keys 16c .. 16c + 15.
// Then O / l and logsumexp m + log l are stored for the rows inside T.
// Nothing of size T x S is ever stored; the factors of both products are
// rounded to the element type and accumulate in f32 (the weights P rounded
// too, the sum l taken over the unrounded ones).
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.h"

#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>
#include <tuple>

using namespace mlir;
using namespace mlir::switchyard::tensor_cores;

namespace {
class FlashForwardBuilder : private AttentionBuilder {
public:
  FlashForwardBuilder(RewriterBase &rewriter, moe::FlashAttentionKernelOp op,
                      FloatType elementType)
      : AttentionBuilder(rewriter, op, op.getQuery(), elementType), op(op) {}

  void build();

private:
  moe::FlashAttentionKernelOp op;
};

void FlashForwardBuilder::build() {
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue(),
        rel = op.getRel();
  b.setInsertionPoint(op);
  Value batches = dim(q, 0), queries = dim(q, 1), heads = dim(q, 2),
        keys = dim(k, 1);
  // Key u is visible to query t iff u <= t + shift.
  Value shift = arith::SubIOp::create(b, loc, keys, queries);

  // Shared memory: the key tile [64][F + 8] at byte 0 (the queries' first),
  // Vᵀ [F][64 + 8] after it (dynamic shared memory, 16-byte aligned: both
  // tiles' rows are multiples of 16 bytes, as is the key tile's size); with
  // rel, the relative keys' tile and the skew scratch.
  int64_t bytesK = rowTileBytes();
  int64_t bytesV = tileBytes(paddedWidth, kBlockKeys + kPad, elementType);
  int64_t bytesRel = rel ? relativeBytes() : 0;
  Value t0 = launch(queries, heads, batches, bytesK + bytesV + bytesRel,
                    {k, v, rel});
  Value smemK = rowTile(0);
  Value smemV = sharedTile(bytesK, paddedWidth, kBlockKeys + kPad, elementType);
  Value smemRel, scratch;
  if (rel)
    std::tie(smemRel, scratch) = relativeTiles(bytesK + bytesV);

  // The warp's queries as A fragments, one per 16 of the head width.
  stageRows(smemK, q, t0, queries);
  gpu::BarrierOp::create(b, loc);
  SmallVector<Value> queryFrags = rowFragments(smemK);

  // The keys visible to some row of the block: [0, min(S, t0 + 64 + shift)).
  Value one = cst(1);
  Value kEnd = minIndex(keys, add(t0, add(cst(kBlockRows), shift)));
  Value negInf = f32(-std::numeric_limits<double>::infinity());
  // Loop state: the maximum m and sum l of rows g and g + 8, then O's
  // accumulators (outTiles tiles of kAccValues).
  SmallVector<Value> init{negInf, negInf, f32(0.0), f32(0.0)};
  init.append(outTiles * kAccValues, f32(0.0));
  auto keyLoop =
      scf::ForOp::create(b, loc, cst(0), kEnd, cst(kBlockKeys), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(keyLoop.getBody());
    Value u0 = keyLoop.getInductionVar();
    ValueRange args = keyLoop.getRegionIterArgs();
    // Every warp is done with the tiles (the queries' or the previous
    // step's ldmatrix) before they change.
    gpu::BarrierOp::create(b, loc);
    stageRows(smemK, k, u0, keys);
    stage(
        smemV, paddedWidth, kBlockKeys, /*rowsContiguous=*/true, v,
        [&](Value, Value col) { return add(u0, col); }, keys);
    if (rel)
      stageRel(smemRel, rel, firstDistance(t0, u0, shift));
    gpu::BarrierOp::create(b, loc);

    // S = Q·Kᵀ (+ Q·relᵀ skewed): tile j holds keys u0 + 8j .. u0 + 8j + 7.
    SmallVector<Value> s = products(queryFrags, smemK);
    if (rel)
      addRelativeScores(s, queryFrags, smemRel, scratch, /*keyRows=*/false);
    // Masked: a key past the keys or after the query's last visible one.
    SmallVector<Value> limit;
    for (int64_t value = 0; value < kAccValues; ++value) {
      Value query = add(t0, rowOf[value]);
      limit.push_back(minIndex(keys, add(query, add(shift, one))));
    }
    for (int64_t j = 0; j < kKeyTiles; ++j) {
      for (int64_t value = 0; value < kAccValues; ++value) {
        Value key = add(u0, add(cst(j * kTileN), colOf[value]));
        Value &score = s[j * kAccValues + value];
        score = arith::SelectOp::create(b, loc, less(key, limit[value]), score,
                                        negInf);
      }
    }
    // The online softmax of the two rows (h = value / 2).
    SmallVector<Value> next(args.begin(), args.end());
    Value base[2], alpha[2];
    for (int64_t h = 0; h < 2; ++h) {
      Value rowMax = negInf;
      for (int64_t j = 0; j < kKeyTiles; ++j)
        for (int64_t value = 2 * h; value < 2 * h + 2; ++value)
          rowMax = arith::MaximumFOp::create(b, loc, rowMax,
                                             s[j * kAccValues + value]);
      rowMax = quadReduce(rowMax, [&](Value x, Value y) {
        return arith::MaximumFOp::create(b, loc, x, y);
      });
      Value mOld = args[h];
      Value mNew = arith::MaximumFOp::create(b, loc, mOld, rowMax);
      // A row that has seen no key yet keeps m = -inf; its weights are
      // exp(-inf - 0) = 0, not exp(-inf + inf).
      Value unseen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                           mNew, negInf);
      base[h] = arith::SelectOp::create(b, loc, unseen, f32(0.0), mNew);
      alpha[h] = math::ExpOp::create(
          b, loc, arith::SubFOp::create(b, loc, mOld, base[h]));
      next[h] = mNew;
    }
    SmallVector<Value> p(s.size());
    Value partial[2] = {f32(0.0), f32(0.0)};
    for (int64_t j = 0; j < kKeyTiles; ++j) {
      for (int64_t value = 0; value < kAccValues; ++value) {
        int64_t h = value / 2;
        Value &weight = p[j * kAccValues + value];
        weight = math::ExpOp::create(
            b, loc,
            arith::SubFOp::create(b, loc, s[j * kAccValues + value], base[h]));
        partial[h] = arith::AddFOp::create(b, loc, partial[h], weight);
      }
    }
    for (int64_t h = 0; h < 2; ++h)
      next[2 + h] = arith::AddFOp::create(
          b, loc, arith::MulFOp::create(b, loc, args[2 + h], alpha[h]),
          partial[h]);
    MutableArrayRef<Value> o = MutableArrayRef<Value>(next).drop_front(4);
    for (int64_t index = 0; index < int64_t(o.size()); ++index)
      o[index] = arith::MulFOp::create(b, loc, o[index],
                                       alpha[index % kAccValues / 2]);
    // O += P·V, Vᵀ staged.
    accumulate(o, p, smemV, Layout::Transposed);
    scf::YieldOp::create(b, loc, next);
  }

  // The rows' sums over the quad, then O / l and m + log l inside T.
  Value sum[2];
  for (int64_t h = 0; h < 2; ++h)
    sum[h] = quadReduce(keyLoop.getResult(2 + h), [&](Value x, Value y) {
      return arith::AddFOp::create(b, loc, x, y);
    });
  storeRows(keyLoop.getResults().drop_front(4), t0, queries, op.getResultInit(),
            [&](int64_t value, Value x) -> Value {
              return arith::DivFOp::create(b, loc, x, sum[value / 2]);
            });
  Value quadLeader = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, loc, lane, cst(4)), cst(0));
  for (int64_t h = 0; h < 2; ++h) {
    Value query = add(t0, rowOf[2 * h]);
    Value logsumexp = arith::AddFOp::create(
        b, loc, keyLoop.getResult(h), math::LogOp::create(b, loc, sum[h]));
    storeIf(both(quadLeader, less(query, queries)), logsumexp,
            op.getLogsumexpInit(), {batch, query, head});
  }
  gpu::TerminatorOp::create(b, loc);
}
} // namespace

void mlir::switchyard::tensor_cores::buildFlashAttentionKernel(
    RewriterBase &rewriter, moe::FlashAttentionKernelOp op,
    FloatType elementType) {
  FlashForwardBuilder(rewriter, op, elementType).build();
  rewriter.eraseOp(op);
}
