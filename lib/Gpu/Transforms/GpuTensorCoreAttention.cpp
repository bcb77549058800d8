//===- GpuTensorCoreAttention.cpp - flash attention on tensor cores -------===//
//
// The mma.sync kernel of moe.flash_attention_kernel (part of
// switchyard-gpu-tensor-core-matmul), in the manner of FlashAttention-2's
// forward pass: one block of 4 warps per 64 query rows of one (batch, head),
// each warp 16 rows. The block stages its queries once through shared
// memory into A fragments (ldmatrix), then walks the visible keys 64 at a
// time:
//   - K (64 x F) and Vᵀ (F x 64) are staged into padded shared tiles, the
//     factors rounded to the element type, zero outside the problem;
//   - S = Q·Kᵀ (16 x 64 per warp: 8 accumulator tiles) with mma.sync, the
//     keys a query does not see (u > t + S - T, or past the keys) set to
//     -inf;
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
// Not yet: the next step's K and V loads in flight during this step's
// products (the matmul kernel does that), cp.async, the backward pass
// (moe.flash_attention_grad stays a SIMT row kernel), relative keys. Not
// run on a GPU yet; the GPU emulation runs it lane by lane.
//
//===----------------------------------------------------------------------===//

#include "TensorCoreKernels.h"
#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::switchyard::tensor_cores;

namespace {
constexpr int64_t kWarps = 4;
constexpr int64_t kThreads = kWarps * kWarpLanes;
/// Query rows per block (16 per warp) and keys per step.
constexpr int64_t kBlockRows = kWarps * kTileM;
constexpr int64_t kBlockKeys = 64;
/// S's accumulator tiles per warp and step (16 x 8 each).
constexpr int64_t kKeyTiles = kBlockKeys / kTileN;
/// Shared rows are padded by 8 elements (16 bytes), as in the matmul
/// kernel: ldmatrix's eight row reads in distinct banks, rows 16-byte
/// aligned (the row widths are multiples of 16 elements).
constexpr int64_t kPad = 8;
static_assert(kBlockRows == kBlockKeys,
              "the queries and the keys are staged through the same tile");
static_assert(kBlockKeys % (2 * kTileN) == 0 && kBlockKeys % kTileK == 0,
              "P's A fragments pair S's accumulator tiles");

class FlashKernelBuilder : private KernelBuilderBase {
public:
  FlashKernelBuilder(RewriterBase &rewriter, moe::FlashAttentionKernelOp op,
                     FloatType elementType)
      : KernelBuilderBase(rewriter, op.getLoc(), elementType), op(op) {}

  void build();

private:
  /// Stages a rows x cols tile of factors into the shared `tile`: every
  /// thread loads its runs of kRun elements (stagedElement; along the rows
  /// where `rowsContiguous`), then stores them.
  /// `factor(row, col)` loads one element, rounded, zero outside.
  void stage(Value tile, int64_t rows, int64_t cols, bool rowsContiguous,
             function_ref<Value(Value, Value)> factor);
  /// source[batch, row, head, col] rounded, zero unless row < rowLimit and
  /// col < F; loaded without a branch at the nearest element inside.
  Value factor(Value source, Value row, Value rowLimit, Value col);
  /// `x` combined with the values of the other three lanes of its quad
  /// (the lanes that hold the same accumulator rows).
  Value quadReduce(Value x, function_ref<Value(Value, Value)> combine);
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32Type(),
                                     b.getF32FloatAttr(v));
  }

  moe::FlashAttentionKernelOp op;
  int64_t width = 0;
  Value tid, batch, head;
};

void FlashKernelBuilder::stage(Value tile, int64_t rows, int64_t cols,
                               bool rowsContiguous,
                               function_ref<Value(Value, Value)> factor) {
  assert(rows * cols % (kThreads * kRun) == 0 && rows % kRun == 0 &&
         cols % kRun == 0 && "whole runs, as many for every thread");
  SmallVector<std::pair<Value, Value>> at;
  SmallVector<Value> values;
  for (int64_t index = 0; index < rows * cols / kThreads; ++index) {
    auto [row, col] =
        stagedElement(tid, kThreads, index, rows, cols, rowsContiguous);
    at.emplace_back(row, col);
    values.push_back(factor(row, col));
  }
  for (auto [value, position] : llvm::zip_equal(values, at))
    memref::StoreOp::create(b, loc, value, tile,
                            ValueRange{position.first, position.second});
}

Value FlashKernelBuilder::factor(Value source, Value row, Value rowLimit,
                                 Value col) {
  Value inBounds = less(row, rowLimit);
  Value column = col;
  if (width % kTileK != 0) {
    inBounds = both(inBounds, less(col, cst(width)));
    column = minIndex(col, cst(width - 1));
  }
  Value raw = memref::LoadOp::create(
      b, loc, source,
      ValueRange{batch, minIndex(row, sub1(rowLimit)), head, column});
  return arith::SelectOp::create(b, loc, inBounds, roundedFactor(raw),
                                 zeroOf(elementType));
}

Value FlashKernelBuilder::quadReduce(
    Value x, function_ref<Value(Value, Value)> combine) {
  for (int32_t offset : {1, 2}) {
    Value other = gpu::ShuffleOp::create(b, loc, x, offset, kWarpLanes,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    x = combine(x, other);
  }
  return x;
}

void FlashKernelBuilder::build() {
  MLIRContext *ctx = b.getContext();
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  Value out = op.getResultInit(), lse = op.getLogsumexpInit();
  width = cast<MemRefType>(q.getType()).getDimSize(3);
  int64_t paddedWidth = llvm::alignTo(width, kTileK);
  b.setInsertionPoint(op);
  auto dim = [&](Value buffer, int64_t d) -> Value {
    return memref::DimOp::create(b, loc, buffer, d);
  };
  Value batches = dim(q, 0), queries = dim(q, 1), heads = dim(q, 2),
        keys = dim(k, 1);
  // Key u is visible to query t iff u <= t + shift.
  Value shift = arith::SubIOp::create(b, loc, keys, queries);

  // Shared memory: the key tile [64][F + 8] at byte 0 (the queries' first),
  // Vᵀ [F][64 + 8] after it (dynamic shared memory, 16-byte aligned: both
  // tiles' rows are multiples of 16 bytes, as is the key tile's size).
  Attribute workgroup =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto tileK = MemRefType::get({kBlockKeys, paddedWidth + kPad}, elementType,
                               AffineMap(), workgroup);
  auto tileV = MemRefType::get({paddedWidth, kBlockKeys + kPad}, elementType,
                               AffineMap(), workgroup);
  int64_t elementBytes = elementType.getWidth() / 8;
  int64_t bytesK = tileK.getNumElements() * elementBytes;
  int64_t bytesV = tileV.getNumElements() * elementBytes;
  Value one = cst(1);
  auto launch = gpu::LaunchOp::create(
      b, loc, arith::CeilDivUIOp::create(b, loc, queries, cst(kBlockRows)),
      heads, batches, cst(kThreads), one, one,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), bytesK + bytesV));
  b.setInsertionPointToStart(&launch.getBody().front());
  auto bytesType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                   AffineMap(), workgroup);
  Value shared = gpu::DynamicSharedMemoryOp::create(b, loc, bytesType);
  Value smemK =
      memref::ViewOp::create(b, loc, tileK, shared, cst(0), ValueRange{});
  Value smemV =
      memref::ViewOp::create(b, loc, tileV, shared, cst(bytesK), ValueRange{});
  tid = launch.getThreadIds().x;
  head = launch.getBlockIds().y;
  batch = launch.getBlockIds().z;
  Value lane = arith::RemUIOp::create(b, loc, tid, cst(kWarpLanes));
  Value lane16 = arith::RemUIOp::create(b, loc, lane, cst(16));
  Value warpRow =
      mul(arith::DivUIOp::create(b, loc, tid, cst(kWarpLanes)), kTileM);
  Value t0 = mul(launch.getBlockIds().x, kBlockRows);
  FragmentMaps maps = fragmentMaps();
  // Accumulator value `value` of a lane lies in row `rowOf[value]` of its
  // warp's 16 (values 0, 1: row g; 2, 3: row g + 8) and column
  // `colOf[value]` of its 8-wide tile.
  SmallVector<Value> rowOf, colOf;
  for (int64_t value = 0; value < kAccValues; ++value) {
    rowOf.push_back(add(warpRow, apply(maps.acc, 0, {lane, cst(value)})));
    colOf.push_back(apply(maps.acc, 1, {lane, cst(value)}));
  }

  // The warp's queries as A fragments, one per 16 of the head width.
  stage(smemK, kBlockRows, paddedWidth, /*rowsContiguous=*/false,
        [&](Value row, Value col) {
          return factor(q, add(t0, row), queries, col);
        });
  gpu::BarrierOp::create(b, loc);
  SmallVector<Value> queryFrags;
  for (int64_t kk = 0; kk < paddedWidth; kk += kTileK)
    queryFrags.push_back(loadA(maps, smemK, lane, warpRow, cst(kk)));

  // The keys visible to some row of the block: [0, min(S, t0 + 64 + shift)).
  Value kEnd = minIndex(keys, add(t0, add(cst(kBlockRows), shift)));
  Value negInf = f32(-std::numeric_limits<double>::infinity());
  // O's accumulator tiles: 8 columns each, as many as cover the width
  // (the padding's columns of Vᵀ are zero and need no product).
  int64_t outTiles = llvm::divideCeil(width, kTileN);
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
    stage(smemK, kBlockKeys, paddedWidth, /*rowsContiguous=*/false,
          [&](Value row, Value col) {
            return factor(k, add(u0, row), keys, col);
          });
    stage(smemV, paddedWidth, kBlockKeys, /*rowsContiguous=*/true,
          [&](Value row, Value col) {
            return factor(v, add(u0, col), keys, row);
          });
    gpu::BarrierOp::create(b, loc);

    // S = Q·Kᵀ: tile j holds keys u0 + 8j .. u0 + 8j + 7.
    SmallVector<Value> s(kKeyTiles * kAccValues, f32(0.0));
    for (int64_t kk = 0; kk < paddedWidth; kk += kTileK) {
      for (int64_t j = 0; j < kKeyTiles; ++j) {
        MutableArrayRef<Value> tile =
            MutableArrayRef<Value>(s).slice(j * kAccValues, kAccValues);
        SmallVector<Value> d =
            mma(queryFrags[kk / kTileK],
                loadB(maps, smemK, lane16, cst(j * kTileN), cst(kk)), tile);
        llvm::copy(d, tile.begin());
      }
    }
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

    // O += P·V: keys 16c .. 16c + 15 are S's tiles 2c and 2c + 1.
    auto fragType = VectorType::get({4, 2}, elementType);
    for (int64_t c = 0; c < kBlockKeys / kTileK; ++c) {
      SmallVector<Value> halves;
      for (int64_t index = 0; index < 2 * kAccValues; ++index)
        halves.push_back(arith::TruncFOp::create(
            b, loc, elementType, p[2 * c * kAccValues + index]));
      Value weights = vector::FromElementsOp::create(b, loc, fragType, halves);
      for (int64_t jf = 0; jf < outTiles; ++jf) {
        MutableArrayRef<Value> tile = o.slice(jf * kAccValues, kAccValues);
        SmallVector<Value> d =
            mma(weights,
                loadB(maps, smemV, lane16, cst(jf * kTileN), cst(c * kTileK)),
                tile);
        llvm::copy(d, tile.begin());
      }
    }
    scf::YieldOp::create(b, loc, next);
  }

  // The rows' sums over the quad, then O / l and m + log l inside T.
  Value sum[2];
  for (int64_t h = 0; h < 2; ++h)
    sum[h] = quadReduce(keyLoop.getResult(2 + h), [&](Value x, Value y) {
      return arith::AddFOp::create(b, loc, x, y);
    });
  Type outElement = cast<MemRefType>(out.getType()).getElementType();
  auto storeIf = [&](Value cond, Value value, Value buffer,
                     ValueRange indices) {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, cond,
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    memref::StoreOp::create(b, loc, value, buffer, indices);
  };
  for (int64_t jf = 0; jf < outTiles; ++jf) {
    for (int64_t value = 0; value < kAccValues; ++value) {
      Value query = add(t0, rowOf[value]);
      Value col = add(cst(jf * kTileN), colOf[value]);
      Value inside = less(query, queries);
      if (width % kTileN != 0)
        inside = both(inside, less(col, cst(width)));
      Value result = arith::DivFOp::create(
          b, loc, keyLoop.getResult(4 + jf * kAccValues + value),
          sum[value / 2]);
      if (outElement != result.getType())
        result = arith::TruncFOp::create(b, loc, outElement, result);
      storeIf(inside, result, out, {batch, query, head, col});
    }
  }
  Value quadLeader = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, loc, lane, cst(4)), cst(0));
  for (int64_t h = 0; h < 2; ++h) {
    Value query = add(t0, rowOf[2 * h]);
    Value logsumexp = arith::AddFOp::create(
        b, loc, keyLoop.getResult(h), math::LogOp::create(b, loc, sum[h]));
    storeIf(both(quadLeader, less(query, queries)), logsumexp, lse,
            {batch, query, head});
  }
  gpu::TerminatorOp::create(b, loc);
}
} // namespace

void mlir::switchyard::tensor_cores::buildFlashAttentionKernel(
    RewriterBase &rewriter, moe::FlashAttentionKernelOp op,
    FloatType elementType) {
  FlashKernelBuilder(rewriter, op, elementType).build();
  rewriter.eraseOp(op);
}
