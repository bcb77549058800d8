//===- AttentionCommon.h - what the attention kernels share -----*- C++ -*-===//
//
// Internal to switchyard-gpu-tensor-core-matmul: AttentionBuilder, the base
// of the mma.sync flash attention kernels (AttentionForward.cpp,
// AttentionBackward.cpp; its members are in AttentionCommon.cpp), with the
// block shape they share: a launch of 4-warp blocks over 64-row blocks of
// one (batch, head), the staging of rounded factors into padded shared
// tiles, the products of a warp's 16 rows with 64 staged rows on the tensor
// cores, accumulator tiles reused as A fragments, and guarded stores.
//
// Relative keys (Transformer-XL): the score of query t and key u gains
// Q[t]·rel[δ], δ = t + S - T - u. A step of 64 queries by 64 keys spans 127
// distances, staged as a 128-row tile next to the keys; each warp takes the
// product of its 16 rows with its 80 of them on the tensor cores (16 x 80,
// 1.25 times the 16 x 64 of Q·Kᵀ) and skews it through an f32 scratch in
// shared memory into the scores' layout (every store and load without a
// guard: the scratch has margins for the keys a warp's distances reach
// outside the step, so that no per-element predicate stays live across
// the loop). Shared memory with rel: up to 94 KiB at width 128 (the launch
// raises the 48 KiB default; sm_86, sm_89 and sm_120 allow 99 KiB).
//
// The attention*.test integration tests (test/Integration/CUDA) check the
// kernels against the CPU, on a GPU and, lane by lane, in the GPU
// emulation.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_GPU_TENSORCORE_ATTENTIONCOMMON_H
#define SWITCHYARD_LIB_CODEGEN_GPU_TENSORCORE_ATTENTIONCOMMON_H

#include "TensorCoreKernels.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::switchyard::tensor_cores {

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
  // TODO: keep the next step's loads in flight during this step's products
  // (the matmul kernel does), and stage by cp.async.
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

} // namespace mlir::switchyard::tensor_cores

#endif // SWITCHYARD_LIB_CODEGEN_GPU_TENSORCORE_ATTENTIONCOMMON_H
