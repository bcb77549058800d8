//===- GpuTensorCoreAttention.cpp - flash attention on tensor cores -------===//
//
// The mma.sync kernels of moe.flash_attention_kernel and
// moe.flash_attention_grad_kernel (part of switchyard-gpu-tensor-core-matmul).
// The forward pass, in the manner of FlashAttention-2's: one block of 4
// warps per 64 query rows of one (batch, head), each warp 16 rows. The block
// stages its queries once through shared memory into A fragments (ldmatrix),
// then walks the visible keys 64 at a time:
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
// The kernels of moe.flash_attention_grad_kernel, in the manner of
// FlashAttention-2's backward pass, recompute P = exp(Q·Kᵀ - logsumexp)
// from the same rounded factors (so P sums to 1 against the forward
// kernel's logsumexp) and never store it either; with
// dS = P ∘ (dO·Vᵀ - Δ), Δ = Σ_f dO·O given:
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
// Relative keys (Transformer-XL): the score of query t and key u gains
// Q[t]·rel[δ], δ = t + S - T - u. A step of 64 queries by 64 keys spans 127
// distances, staged as a 128-row tile next to the keys; each warp takes the
// product of its 16 rows with its 80 of them on the tensor cores (16 x 80,
// 1.25 times the 16 x 64 of Q·Kᵀ) and skews it through an f32 scratch in
// shared memory into the scores' layout (every store and load without a
// guard: the scratch has margins for the keys a warp's distances reach
// outside the step, so that no per-element predicate stays live across
// the loop). Backward, the key kernel recomputes the same skewed scores
// and adds drel[δ] += Σ dS·Q: dSᵀ goes through the scratch (the margins
// zeroed), each warp takes its 16 queries by their 80 distances (A
// fragments of dSᵀ by distance, Q by ldmatrix .trans) and adds the
// products with f32 atomics into a zeroed f32 buffer: the one gradient
// summed across blocks (and warps), so its low bits depend on their order.
// The query kernel adds dS·rel to dQ the same way, dS unskewed to each
// warp's 80 distance rows.
// Shared memory with rel: up to 94 KiB at width 128 (the launch raises the
// 48 KiB default; sm_86, sm_89 and sm_120 allow 99 KiB).
//
// Not yet: the next step's loads in flight during this step's products
// (the matmul kernel does that), cp.async. Checked against the CPU on an
// H200 (attention*.test) and, lane by lane, in the GPU emulation.
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
#include <tuple>

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
/// With relative keys: the distances a block's step spans (query row i,
/// key l: distance δ0 + i - l + 63, 127 of them, staged as 128 rows) and
/// the distances of a warp's 16 rows (i - 16w - l + 63 in [0, 79): 10 tiles
/// of 8). The f32 scratch through which the products with them are skewed
/// holds, for each of the 64 rows, keys -16 .. 79 (the keys -16 .. -1 and
/// 64 .. 79 that a warp's distances reach outside the step: written without
/// a guard, never read as scores), columns 0 .. 95; rows of 100 (fewer bank
/// conflicts).
constexpr int64_t kRelRows = 2 * kBlockKeys;
constexpr int64_t kWarpRelTiles = (kTileM + kBlockKeys) / kTileN;
constexpr int64_t kSkewLead = kTileM;
constexpr int64_t kSkewStride = kSkewLead + kBlockKeys + kTileM + 4;
static_assert(kBlockKeys % (2 * kTileN) == 0 && kBlockKeys % kTileK == 0,
              "P's A fragments pair S's accumulator tiles");

/// How a shared tile holds the 64 x F factor X of a product W·X whose
/// left factor W (16 x 64 per warp) is built from accumulators: as X itself,
/// [64][F] (read with ldmatrix .trans), or as Xᵀ, [F][64] (plain ldmatrix).
enum class Layout { RowMajor, Transposed };

/// What the attention kernels share: a launch of 4-warp blocks over
/// (64-row blocks, heads, batches), the staging of rounded factors into
/// shared tiles, the products of a warp's 16 rows with 64 staged rows on
/// the tensor cores, and guarded stores of accumulator tiles.
class AttentionBuilder : protected KernelBuilderBase {
protected:
  AttentionBuilder(RewriterBase &rewriter, Operation *op, Value query,
                   FloatType elementType)
      : KernelBuilderBase(rewriter, op->getLoc(), elementType) {
    width = cast<MemRefType>(query.getType()).getDimSize(3);
    paddedWidth = llvm::alignTo(width, kTileK);
    // The accumulator tiles of a warp's 16 rows of width F: 8 columns
    // each, as many as cover the width (the padding's columns are zero).
    outTiles = llvm::divideCeil(width, kTileN);
  }

  Value dim(Value buffer, int64_t d) {
    return memref::DimOp::create(b, loc, buffer, d);
  }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32Type(),
                                     b.getF32FloatAttr(v));
  }
  /// Bytes of a rows x cols shared tile of `type`.
  static int64_t tileBytes(int64_t rows, int64_t cols, Type type) {
    return rows * cols * type.getIntOrFloatBitWidth() / 8;
  }
  /// Bytes of a shared tile of 64 rows of the padded width (+ 8 elements:
  /// ldmatrix's eight row reads in distinct banks, rows 16-byte aligned).
  int64_t rowTileBytes() {
    return tileBytes(kBlockKeys, paddedWidth + kPad, elementType);
  }

  /// Opens a gpu.launch of ceil(rows / 64) x heads x batches blocks of
  /// kThreads threads with `sharedBytes` of dynamic shared memory and leaves
  /// the builder in its body; returns the block's first row.
  /// `sources` are the buffers the kernel stages: whether their runs are
  /// aligned for vector loads is computed before the launch (stage).
  Value launch(Value rows, Value heads, Value batches, int64_t sharedBytes,
               ValueRange sources);
  /// The dynamic shared memory from byte `offset` as a rows x cols tile.
  Value sharedTile(int64_t offset, int64_t rows, int64_t cols, Type type);
  /// A shared tile of 64 rows of the padded width at byte `offset`.
  Value rowTile(int64_t offset) {
    return sharedTile(offset, kBlockKeys, paddedWidth + kPad, elementType);
  }
  /// Stages a rows x cols tile of factors from `source` [B, R, H, F] (or
  /// [R, H, F], the relative keys) into the shared `tile`: every thread
  /// loads its runs of kRun elements (stagedElement; along the rows where
  /// `rowsContiguous`), then stores them. The runs go along F: tile element
  /// (row, col) is source row `sourceRow(row, col)` (zero unless below
  /// `rowLimit`) at F index col (row where `rowsContiguous`). A run is one
  /// vector load where the source's runs are aligned (launch's `sources`),
  /// else element by element (the sources a kernel stages once, outside
  /// its loop, are not among launch's: the vector path's code only where
  /// it repeats). The staged rows land from row `tileRow0`.
  void stage(Value tile, int64_t rows, int64_t cols, bool rowsContiguous,
             Value source, function_ref<Value(Value, Value)> sourceRow,
             Value rowLimit, int64_t tileRow0 = 0);
  /// Stages rows row0 .. row0 + 63 of `source` [B, R, H, F] into a row
  /// tile.
  void stageRows(Value tile, Value source, Value row0, Value rowLimit) {
    stage(
        tile, kBlockKeys, paddedWidth, /*rowsContiguous=*/false, source,
        [&](Value row, Value) { return add(row0, row); }, rowLimit);
  }
  /// source[batch, row, head, col] (source[row, head, col] for the rank-3
  /// relative keys) rounded, zero unless row < rowLimit and col < F (an
  /// index below zero wraps above the limit); loaded without a branch at the
  /// nearest element inside. With `run`, the kRun elements from col (a
  /// multiple of kRun) in one vector load.
  SmallVector<Value> factors(Value source, Value row, Value rowLimit,
                             Value col, bool run);
  /// The warp's 16 rows of the staged row `tile` as A fragments, one per
  /// 16 of the padded width.
  SmallVector<Value> rowFragments(Value tile);
  /// The products of the warp's rows (A `fragments`) with `tiles` x 8 rows
  /// of the row `tile` from `rowOffset` (default 0), summed over the width:
  /// `tiles` accumulator tiles (tile j: tile rows rowOffset + 8j ..
  /// rowOffset + 8j + 7).
  SmallVector<Value> products(ArrayRef<Value> fragments, Value tile,
                              Value rowOffset = {}, int64_t tiles = kKeyTiles);
  /// acc += W·X for the warp's 16 x 8n `weights` (n accumulator tiles, n
  /// even, rounded to the element type here) and the 8n x F factor X in
  /// `tile` from row `rowOffset` (default 0): an m16n8 accumulator tile's
  /// (row, column) layout is that of half an m16n8k16 A fragment (PTX ISA,
  /// mma.m16n8k16 fragments), so the accumulator tiles 2c and 2c + 1 are
  /// the A fragment of X's rows rowOffset + 16c .. rowOffset + 16c + 15.
  void accumulate(MutableArrayRef<Value> acc, ArrayRef<Value> weights,
                  Value tile, Layout layout, Value rowOffset = {});
  /// `x` combined with the values of the other three lanes of its quad
  /// (the lanes that hold the same accumulator rows).
  Value quadReduce(Value x, function_ref<Value(Value, Value)> combine);
  /// Stores `acc` (outTiles tiles: the warp's 16 rows, width F) into
  /// buffer[batch, row0 + r, head, c] for the rows below `rows`;
  /// `transform(value id, x)`, if given, is stored instead of x.
  void storeRows(ValueRange acc, Value row0, Value rows, Value buffer,
                 function_ref<Value(int64_t, Value)> transform = nullptr);
  void storeIf(Value cond, Value value, Value buffer, ValueRange indices);

  // Relative keys. A step of 64 query rows from t0 and 64 keys from u0 sees
  // the distances δ0 + i - l + 63 (row i, key l; δ0 = t0 + S - T - u0 - 63),
  // staged as the 128 rows of a tile (zero outside [0, S)). The products of
  // the warp's 16 rows with its 80 of them are skewed through an f32
  // scratch: scratch[i][l + 16] is row i's product with the relative key of
  // key l.
  int64_t relTileBytes() {
    return tileBytes(kRelRows, paddedWidth + kPad, elementType);
  }
  /// Bytes of the relative keys' tile and the skew scratch after it.
  int64_t relativeBytes() {
    return relTileBytes() + tileBytes(kBlockKeys, kSkewStride, b.getF32Type());
  }
  /// The relative keys' tile at byte `offset`, and the skew scratch after
  /// it.
  std::pair<Value, Value> relativeTiles(int64_t offset) {
    return {sharedTile(offset, kRelRows, paddedWidth + kPad, elementType),
            sharedTile(offset + relTileBytes(), kBlockKeys, kSkewStride,
                       b.getF32Type())};
  }
  /// δ0 of the step (t0, u0); `shift` is S - T.
  Value firstDistance(Value t0, Value u0, Value shift) {
    return arith::SubIOp::create(b, loc, add(t0, shift),
                                 add(u0, cst(kBlockKeys - 1)));
  }
  /// Stages rel[δ0 .. δ0 + 127] into `tile`, 64 rows at a time (half the
  /// staged values live at once).
  void stageRel(Value tile, Value rel, Value delta0) {
    Value distances = dim(rel, 0);
    for (int64_t half = 0; half < kRelRows; half += kBlockKeys)
      stage(
          tile, kBlockKeys, paddedWidth, /*rowsContiguous=*/false, rel,
          [&](Value row, Value) { return add(delta0, add(cst(half), row)); },
          distances, /*tileRow0=*/half);
  }
  /// Adds to the scores `s` (kKeyTiles accumulator tiles: rows the step's
  /// queries and columns its keys, or the transpose where `keyRows`) their
  /// relative part: the products of the warp's query rows (A `queryFrags`)
  /// with its distances of `relTile`, skewed through `scratch`. Each scratch
  /// element is then read by one lane only, the one holding that score,
  /// which may overwrite it without a barrier.
  void addRelativeScores(MutableArrayRef<Value> s, ArrayRef<Value> queryFrags,
                         Value relTile, Value scratch, bool keyRows);
  /// The scratch's indices of row i, key l.
  SmallVector<Value> skewIndices(Value i, Value l) {
    return {i, add(l, cst(kSkewLead))};
  }
  /// The scratch's indices of the score in accumulator value `value` of
  /// tile j of kKeyTiles (rows the step's queries and columns its keys, or
  /// the transpose where `keyRows`).
  SmallVector<Value> scoreIndices(int64_t j, int64_t value, bool keyRows) {
    Value row = rowOf[value], col = add(cst(j * kTileN), colOf[value]);
    return keyRows ? skewIndices(col, row) : skewIndices(row, col);
  }
  /// Stores the warp's scores `x` (kKeyTiles tiles, laid out as
  /// scoreIndices says) into the scratch, zeros its margins (which held the
  /// relative scores outside the step) and waits for the block.
  void storeScores(ArrayRef<Value> x, Value scratch, bool keyRows);
  /// scratch[i][key i + 63 - r]: what query row i of the lane's warp holds
  /// for distance row r of the warp (r - warpRow in [0, 80)), without a
  /// guard: the keys outside the step, -16 .. -1 and 64 .. 79, must hold
  /// zeros (zeroSkewMargins).
  Value warpSkewedAt(Value scratch, Value i, Value r) {
    Value l = arith::SubIOp::create(b, loc, add(i, cst(kBlockKeys - 1)), r);
    return memref::LoadOp::create(b, loc, scratch, skewIndices(i, l));
  }
  /// Zeros the keys -16 .. -1 and 64 .. 79 of the warp's 16 scratch rows:
  /// lane L the 16 of row L / 2 on side L % 2.
  void zeroSkewMargins(Value scratch);

  int64_t width = 0, paddedWidth = 0, outTiles = 0;
  Value shared, tid, batch, head, lane, lane16, warpRow;
  FragmentMaps maps;
  /// Accumulator value `value` of a lane lies in row `tileRowOf[value]` of
  /// its 16 x 8 tile (values 0, 1: row g; 2, 3: row g + 8), so in row
  /// `rowOf[value]` of the block's 64 (the warp's 16 from warpRow), and in
  /// column `colOf[value]` of its tile.
  SmallVector<Value> tileRowOf, rowOf, colOf;
  /// The launch's staged buffers whose runs can be vector loads, and the
  /// (host) condition under which they are aligned.
  llvm::DenseMap<Value, Value> alignedSources;
};

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

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

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

void mlir::switchyard::tensor_cores::buildFlashAttentionKernel(
    RewriterBase &rewriter, moe::FlashAttentionKernelOp op,
    FloatType elementType) {
  FlashForwardBuilder(rewriter, op, elementType).build();
  rewriter.eraseOp(op);
}

void mlir::switchyard::tensor_cores::buildFlashAttentionGradKernels(
    RewriterBase &rewriter, moe::FlashAttentionGradKernelOp op,
    FloatType elementType) {
  FlashBackwardBuilder(rewriter, op, elementType).build();
  rewriter.eraseOp(op);
}
