//===- AttentionCommon.cpp - what the attention kernels share -------------===//
//
// The members of AttentionBuilder (AttentionCommon.h), the base of the
// mma.sync flash attention kernels: the launch and its per-thread values,
// the staging of rounded factors into shared tiles (runs of kRun elements
// by vector loads where the host finds the source aligned), the warp's
// products on the tensor cores, the reuse of accumulator tiles as A
// fragments, reductions over a quad of lanes, guarded stores, and the
// relative keys' scores skewed through an f32 scratch in shared memory.
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::switchyard::tensor_cores;

Value AttentionBuilder::launch(Value rows, Value heads, Value batches,
                               int64_t sharedBytes, ValueRange sources) {
  alignedSources.clear();
  for (Value source : sources)
    if (source && !alignedSources.count(source))
      if (Value aligned = runsAligned(source))
        alignedSources[source] = aligned;
  Value one = cst(1);
  auto launchOp = gpu::LaunchOp::create(
      b, loc, arith::CeilDivUIOp::create(b, loc, rows, cst(kBlockRows)), heads,
      batches, cst(kThreads), one, one,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), sharedBytes));
  b.setInsertionPointToStart(&launchOp.getBody().front());
  shared = dynamicSharedMemory();
  tid = launchOp.getThreadIds().x;
  head = launchOp.getBlockIds().y;
  batch = launchOp.getBlockIds().z;
  lane = arith::RemUIOp::create(b, loc, tid, cst(kWarpLanes));
  lane16 = arith::RemUIOp::create(b, loc, lane, cst(16));
  warpRow = mul(arith::DivUIOp::create(b, loc, tid, cst(kWarpLanes)), kTileM);
  maps = fragmentMaps();
  tileRowOf.clear();
  rowOf.clear();
  colOf.clear();
  for (int64_t value = 0; value < kAccValues; ++value) {
    tileRowOf.push_back(apply(maps.acc, 0, {lane, cst(value)}));
    rowOf.push_back(add(warpRow, tileRowOf.back()));
    colOf.push_back(apply(maps.acc, 1, {lane, cst(value)}));
  }
  return mul(launchOp.getBlockIds().x, kBlockRows);
}

Value AttentionBuilder::sharedTile(int64_t offset, int64_t rows, int64_t cols,
                                   Type type) {
  return sharedView(shared, workgroupType({rows, cols}, type), offset);
}

void AttentionBuilder::stage(Value tile, int64_t rows, int64_t cols,
                             bool rowsContiguous, Value source,
                             function_ref<Value(Value, Value)> sourceRow,
                             Value rowLimit, int64_t tileRow0) {
  assert(rows * cols % (kThreads * kRun) == 0 && rows % kRun == 0 &&
         cols % kRun == 0 && "whole runs, as many for every thread");
  auto stageAll = [&](bool runs) {
    SmallVector<std::pair<Value, Value>> at;
    SmallVector<Value> values;
    int64_t step = runs ? kRun : 1;
    for (int64_t index = 0; index < rows * cols / kThreads; index += step) {
      auto [row, col] =
          stagedElement(tid, kThreads, index, rows, cols, rowsContiguous);
      llvm::append_range(values,
                         factors(source, sourceRow(row, col), rowLimit,
                                 rowsContiguous ? row : col, runs));
      // Element e of a run: the next e along F.
      for (int64_t e = 0; e < step; ++e)
        at.emplace_back(rowsContiguous ? add(row, cst(e)) : row,
                        rowsContiguous ? col : add(col, cst(e)));
    }
    for (auto [value, position] : llvm::zip_equal(values, at))
      memref::StoreOp::create(
          b, loc, value, tile,
          ValueRange{add(position.first, cst(tileRow0)), position.second});
  };
  // Runs of whole elements of the width (a run is inside or outside it as
  // a whole) from an aligned source: vector loads.
  Value aligned = width % kRun == 0 ? alignedSources.lookup(source) : Value();
  if (!aligned)
    return stageAll(/*runs=*/false);
  auto ifOp =
      scf::IfOp::create(b, loc, TypeRange{}, aligned, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  stageAll(/*runs=*/true);
  b.setInsertionPointToStart(ifOp.elseBlock());
  stageAll(/*runs=*/false);
}

SmallVector<Value> AttentionBuilder::factors(Value source, Value row,
                                             Value rowLimit, Value col,
                                             bool run) {
  Value inBounds = less(row, rowLimit);
  Value column = col;
  if (width % kTileK != 0 && width % kRun == 0) {
    // The staged runs of kRun columns start at multiples of kRun (stage),
    // so a run is inside or outside the width as a whole: one guard and
    // one clamp per run, not per element (the compiler sees col & -kRun as
    // the run's start, the same for its elements), which keeps fewer
    // loop-invariant values live across the kernels' loops.
    Value start = arith::AndIOp::create(b, loc, col, cst(-kRun));
    inBounds = both(inBounds, less(start, cst(width)));
    column = add(minIndex(start, cst(width - kRun)),
                 arith::AndIOp::create(b, loc, col, cst(kRun - 1)));
  } else if (width % kTileK != 0) {
    inBounds = both(inBounds, less(col, cst(width)));
    column = minIndex(col, cst(width - 1));
  }
  Value clamped = minIndex(row, sub1(rowLimit));
  SmallVector<Value> at{clamped, head, column};
  if (cast<MemRefType>(source.getType()).getRank() == 4)
    at.insert(at.begin(), batch);
  if (!run) {
    Value raw = memref::LoadOp::create(b, loc, source, at);
    return {arith::SelectOp::create(b, loc, inBounds, roundedFactor(raw),
                                    zeroOf(elementType))};
  }
  // The run rounded as a vector (two elements per conversion on sm_80+).
  Value rounded = roundedFactor(loadRun(source, at));
  auto type = cast<VectorType>(rounded.getType());
  Value zeros = arith::ConstantOp::create(
      b, loc, type,
      DenseElementsAttr::get(type, b.getFloatAttr(elementType, 0.0)));
  Value kept = arith::SelectOp::create(b, loc, inBounds, rounded, zeros);
  SmallVector<Value> result;
  for (int64_t e = 0; e < kRun; ++e)
    result.push_back(vector::ExtractOp::create(b, loc, kept, e));
  return result;
}

SmallVector<Value> AttentionBuilder::rowFragments(Value tile) {
  SmallVector<Value> fragments;
  for (int64_t kk = 0; kk < paddedWidth; kk += kTileK)
    fragments.push_back(loadA(maps, tile, lane, warpRow, cst(kk)));
  return fragments;
}

SmallVector<Value> AttentionBuilder::products(ArrayRef<Value> fragments,
                                              Value tile, Value rowOffset,
                                              int64_t tiles) {
  if (!rowOffset)
    rowOffset = cst(0);
  SmallVector<Value> acc(tiles * kAccValues, f32(0.0));
  for (int64_t kk = 0; kk < paddedWidth; kk += kTileK) {
    for (int64_t j = 0; j < tiles; ++j) {
      MutableArrayRef<Value> accTile =
          MutableArrayRef<Value>(acc).slice(j * kAccValues, kAccValues);
      SmallVector<Value> d = mma(
          fragments[kk / kTileK],
          loadB(maps, tile, lane16, add(rowOffset, cst(j * kTileN)), cst(kk)),
          accTile);
      llvm::copy(d, accTile.begin());
    }
  }
  return acc;
}

void AttentionBuilder::accumulate(MutableArrayRef<Value> acc,
                                  ArrayRef<Value> weights, Value tile,
                                  Layout layout, Value rowOffset) {
  assert(weights.size() % (2 * kAccValues) == 0 && "pairs of tiles");
  if (!rowOffset)
    rowOffset = cst(0);
  auto fragType = VectorType::get({4, 2}, elementType);
  for (int64_t c = 0; c < int64_t(weights.size()) / (2 * kAccValues); ++c) {
    SmallVector<Value> halves;
    for (int64_t index = 0; index < 2 * kAccValues; ++index)
      halves.push_back(arith::TruncFOp::create(
          b, loc, elementType, weights[2 * c * kAccValues + index]));
    Value w = vector::FromElementsOp::create(b, loc, fragType, halves);
    for (int64_t jf = 0; jf < outTiles; ++jf) {
      MutableArrayRef<Value> accTile = acc.slice(jf * kAccValues, kAccValues);
      Value k = add(rowOffset, cst(c * kTileK));
      Value x = layout == Layout::RowMajor
                    ? loadBTransposed(tile, lane16, k, cst(jf * kTileN))
                    : loadB(maps, tile, lane16, cst(jf * kTileN), k);
      SmallVector<Value> d = mma(w, x, accTile);
      llvm::copy(d, accTile.begin());
    }
  }
}

Value AttentionBuilder::quadReduce(Value x,
                                   function_ref<Value(Value, Value)> combine) {
  for (int32_t offset : {1, 2}) {
    Value other = gpu::ShuffleOp::create(b, loc, x, offset, kWarpLanes,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    x = combine(x, other);
  }
  return x;
}

void AttentionBuilder::storeIf(Value cond, Value value, Value buffer,
                               ValueRange indices) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, cond,
                                /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  memref::StoreOp::create(b, loc, value, buffer, indices);
}

void AttentionBuilder::storeRows(
    ValueRange acc, Value row0, Value rows, Value buffer,
    function_ref<Value(int64_t, Value)> transform) {
  Type outElement = cast<MemRefType>(buffer.getType()).getElementType();
  for (int64_t jf = 0; jf < outTiles; ++jf) {
    for (int64_t value = 0; value < kAccValues; ++value) {
      Value row = add(row0, rowOf[value]);
      Value col = add(cst(jf * kTileN), colOf[value]);
      Value inside = less(row, rows);
      if (width % kTileN != 0)
        inside = both(inside, less(col, cst(width)));
      Value result = acc[jf * kAccValues + value];
      if (transform)
        result = transform(value, result);
      if (outElement != result.getType())
        result = arith::TruncFOp::create(b, loc, outElement, result);
      storeIf(inside, result, buffer, {batch, row, head, col});
    }
  }
}

void AttentionBuilder::addRelativeScores(MutableArrayRef<Value> s,
                                         ArrayRef<Value> queryFrags,
                                         Value relTile, Value scratch,
                                         bool keyRows) {
  // One 16 x 8 tile at a time, stored as soon as it is summed over the
  // width (4 accumulators live, not 40).
  for (int64_t j = 0; j < kWarpRelTiles; ++j) {
    SmallVector<Value> rel = products(
        queryFrags, relTile, add(warpRow, cst(j * kTileN)), /*tiles=*/1);
    for (int64_t value = 0; value < kAccValues; ++value) {
      // Row i, distance row r = i - l + 63: key l = i + 63 - r, if in the
      // step (an index below zero wraps above 64).
      Value i = rowOf[value];
      Value r = add(warpRow, add(cst(j * kTileN), colOf[value]));
      Value l = arith::SubIOp::create(b, loc, add(i, cst(kBlockKeys - 1)), r);
      memref::StoreOp::create(b, loc, rel[value], scratch, skewIndices(i, l));
    }
  }
  gpu::BarrierOp::create(b, loc);
  for (int64_t j = 0; j < kKeyTiles; ++j) {
    for (int64_t value = 0; value < kAccValues; ++value) {
      Value at = memref::LoadOp::create(b, loc, scratch,
                                        scoreIndices(j, value, keyRows));
      Value &score = s[j * kAccValues + value];
      score = arith::AddFOp::create(b, loc, score, at);
    }
  }
}

void AttentionBuilder::storeScores(ArrayRef<Value> x, Value scratch,
                                   bool keyRows) {
  for (int64_t j = 0; j < kKeyTiles; ++j)
    for (int64_t value = 0; value < kAccValues; ++value)
      memref::StoreOp::create(b, loc, x[j * kAccValues + value], scratch,
                              scoreIndices(j, value, keyRows));
  zeroSkewMargins(scratch);
  gpu::BarrierOp::create(b, loc);
}

void AttentionBuilder::zeroSkewMargins(Value scratch) {
  Value row = add(warpRow, arith::DivUIOp::create(b, loc, lane, cst(2)));
  Value col =
      mul(arith::RemUIOp::create(b, loc, lane, cst(2)), kSkewLead + kBlockKeys);
  Value zero = f32(0.0);
  for (int64_t c = 0; c < kSkewLead; ++c)
    memref::StoreOp::create(b, loc, zero, scratch,
                            ValueRange{row, add(col, cst(c))});
}
