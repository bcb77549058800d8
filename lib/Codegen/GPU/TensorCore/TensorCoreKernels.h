//===- TensorCoreKernels.h - what the tensor-core kernels share -*- C++ -*-===//
//
// Internal to switchyard-gpu-tensor-core-matmul, whose pass
// (GpuTensorCoreMatmul.cpp) matches the ops and dispatches them to the
// kernel builders declared here, one file per instruction family: the
// mma.sync shape, the index and fragment helpers that every builder shares
// (KernelBuilderBase), the mma.sync matmul kernel of the contractions
// (MmaSync.cpp) and of the grouped expert kernels (GroupedKernels.cpp), the
// wgmma kernel of the contractions (Wgmma.cpp), and the flash attention
// kernels (AttentionForward.cpp, AttentionBackward.cpp; what those two share
// is in AttentionCommon.h).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_GPU_TENSORCORE_TENSORCOREKERNELS_H
#define SWITCHYARD_LIB_CODEGEN_GPU_TENSORCORE_TENSORCOREKERNELS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

#include <functional>
#include <optional>

namespace mlir::linalg {
class GenericOp;
} // namespace mlir::linalg

namespace mlir::moe {
class FlashAttentionKernelOp;
class FlashAttentionGradKernelOp;
} // namespace mlir::moe

namespace mlir::switchyard {
struct Contraction;
} // namespace mlir::switchyard

namespace mlir::switchyard::tensor_cores {

/// The mma.sync shape (m16n8k16, 16-bit multiplicands, f32 accumulators).
constexpr int64_t kTileM = 16;
constexpr int64_t kTileN = 8;
constexpr int64_t kTileK = 16;
constexpr int64_t kWarpLanes = 32;
/// Accumulator values per lane and 16 x 8 tile (c0..c3).
constexpr int64_t kAccValues = 4;
/// Elements adjacent in memory that one thread stages together.
constexpr int64_t kRun = 4;

/// Upstream's fragment maps (mlir/Dialect/NVGPU/Utils/MMAUtils.h): (lane,
/// value id) -> (row, col) of a 16 x 8 f32 accumulator element; lane -> the
/// row address (row, col) of ldmatrix for A (16 x 16, .x4, `aTiles`) and
/// for B stored as [n][k] (8 x 16, .x2, `bTiles`; lanes 0-15 give them).
struct FragmentMaps {
  AffineMap acc, aLd, bLd;
  int64_t aTiles, bTiles;
};

/// What the kernel builders share: the rewriter, the location, the element
/// type of the factors, index arithmetic, the mma.sync itself. The members
/// are defined in TensorCoreKernels.cpp, the mma.sync and ldmatrix ones
/// (mma, fragmentMaps, loadA, loadB, loadBTransposed) in MmaSync.cpp.
class KernelBuilderBase {
protected:
  KernelBuilderBase(RewriterBase &rewriter, Location loc, FloatType elementType)
      : b(rewriter), loc(loc), elementType(elementType) {}

  Value cst(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, int64_t y) {
    return arith::MulIOp::create(b, loc, x, cst(y));
  }
  Value less(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  Value both(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value minIndex(Value x, Value y) {
    return arith::MinUIOp::create(b, loc, x, y);
  }
  Value sub1(Value x) { return arith::SubIOp::create(b, loc, x, cst(1)); }
  Value zeroOf(Type type) {
    return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, 0.0));
  }
  /// Result `r` of `map` applied to `operands`.
  Value apply(AffineMap map, unsigned r, ValueRange operands);
  /// A raw factor (any float type) rounded to the element type.
  Value roundedFactor(Value raw);
  /// acc + a * b on the tensor cores, four f32 per lane: `a` the
  /// vector<4x2xelement> A fragment, `bFrag` the vector<2x2xelement> B one.
  SmallVector<Value> mma(Value a, Value bFrag, ValueRange acc);
  FragmentMaps fragmentMaps();
  /// The A fragment (16 x 16) at (row, col) of the shared `tile`, by
  /// ldmatrix .x4.
  Value loadA(const FragmentMaps &maps, Value tile, Value lane, Value row,
              Value col);
  /// The B fragment (8 x 16, stored [n][k]) at (row, col) of the shared
  /// `tile`, by ldmatrix .x2; `lane16` is the lane % 16 (only lanes 0-15
  /// give addresses; the others' stay inside the tile too).
  Value loadB(const FragmentMaps &maps, Value tile, Value lane16, Value row,
              Value col);
  /// The B fragment (16 x 8) whose k rows are rows `k` .. `k` + 15 and
  /// whose n columns are columns `n` .. `n` + 7 of the shared `tile`
  /// (stored [k][n]), by ldmatrix .x2 .trans: lane l < 16 gives the address
  /// of row k + l, and .trans hands each lane the elements (2t, 2t + 1) of
  /// column g of each 8 x 8 matrix, the B fragment's (PTX ISA).
  Value loadBTransposed(Value tile, Value lane16, Value k, Value n);
  /// Whether runs of kRun elements along the last dimension of `buffer`
  /// can be vector loads (a host value; null where they cannot): that
  /// dimension has unit stride, and the first element's address and the
  /// other strides are multiples of a run.
  Value runsAligned(Value buffer);
  /// Whether the index `v` is a multiple of `of` (an i1).
  Value multipleOf(Value v, int64_t of);
  /// The run of kRun elements of `buffer` from `indices` along its last
  /// dimension, in one vector load aligned to the run's size (runsAligned).
  Value loadRun(Value buffer, ValueRange indices);
  /// A memref type of `shape` and `type` in workgroup (shared) memory.
  MemRefType workgroupType(ArrayRef<int64_t> shape, Type type);
  /// The launch's dynamic shared memory as bytes, at the insertion point
  /// (convert-gpu-to-nvvm aligns it to 16 bytes).
  Value dynamicSharedMemory();
  /// A view of `type` (workgroup memory) at byte `offset` of `shared`.
  Value sharedView(Value shared, MemRefType type, int64_t offset);
  /// The (row, col) in a rows x cols tile of element `index` of thread
  /// `tid`'s share of a staging by `threads` threads: each thread stages
  /// runs of kRun elements adjacent in memory (along the columns, or along
  /// the rows where `rowsContiguous`), consecutive threads consecutive runs,
  /// so that a warp's loads are coalesced.
  std::pair<Value, Value> stagedElement(Value tid, int64_t threads,
                                        int64_t index, int64_t rows,
                                        int64_t cols, bool rowsContiguous);

  RewriterBase &b;
  Location loc;
  FloatType elementType;
};

/// Input `input` of `c` from its raw element `raw` (the block argument's
/// value), or from a vector of raw elements: the body's casts from the
/// block argument to the factor (arith.extf, arith.truncf), replayed
/// element by element.
Value replayCasts(OpBuilder &b, Contraction &c, unsigned input, Value raw);

//===----------------------------------------------------------------------===//
// The mma.sync matmul kernel (MmaSync.cpp)
//===----------------------------------------------------------------------===//

/// The block tile: 2 x 2 warps, each computing kWarpMTiles x kWarpNTiles
/// mma tiles (32 x 32 of C), so a block computes 64 x 64 of C and stages
/// kBlockK of K per step: 64 x 32 of A and of B, 32 multiply-accumulates
/// per staged element (a single warp on a 16 x 32 tile would do 10.7).
constexpr int64_t kWarpsM = 2;
constexpr int64_t kWarpsN = 2;
constexpr int64_t kWarpMTiles = 2;
constexpr int64_t kWarpNTiles = 4;
constexpr int64_t kBlockM = kWarpsM * kWarpMTiles * kTileM;
constexpr int64_t kBlockN = kWarpsN * kWarpNTiles * kTileN;
constexpr int64_t kBlockK = 32;
constexpr int64_t kBlockThreads = kWarpsM * kWarpsN * kWarpLanes;
/// Shared tiles are [rows][kBlockK] with each row padded to kSmemRow
/// elements (80 bytes for 16-bit types): the eight 16-byte row reads of
/// an ldmatrix matrix then fall in distinct banks (a 64-byte row stride
/// would put four of them in the same), and rows stay 16-byte aligned.
constexpr int64_t kSmemRow = kBlockK + 8;
static_assert(kBlockM * kBlockK % (kBlockThreads * kRun) == 0 &&
                  kBlockN * kBlockK % (kBlockThreads * kRun) == 0 &&
                  kBlockK % kRun == 0 && kBlockM % kRun == 0 &&
                  kBlockN % kRun == 0,
              "every thread stages whole runs, as many for every thread");

/// What one mma.sync kernel computes: C[b, m, n] += Σ_k A[b, m, k] ·
/// B[b, n, k] over a range of k per batch, for a grid of kBlockM x kBlockN
/// tiles of C per batch. The callbacks build code inside the kernel; the
/// operands are read element by element where the element lies inside the
/// problem (rounded to the element type by the builder), and by runs of
/// kRun elements in one vector load where a whole step of a block's tile is.
struct MmaProblem {
  /// Host values: the extents of M and N, the number of batches.
  Value sizeM, sizeN, batches;
  /// The block's K range [begin, end), and whether its tiles are computed
  /// at all (a padding tile of a grouped kernel is not); all three the same
  /// for every thread of the block.
  struct Range {
    Value begin, end, active;
  };
  std::function<Range(OpBuilder &b, Value batch, Value m0)> kRange;
  /// An operand: factor (batch, row, k) is `cast` of element `indices` of
  /// `buffer` (the body's casts from the raw element to the float factor).
  /// `runsInLastDim`: the staging's runs (along k, or along the rows where
  /// rowsContiguous) lie along the buffer's last dimension, so that a run
  /// is one vector load where that dimension has unit stride.
  struct Operand {
    Value buffer;
    std::function<SmallVector<Value>(OpBuilder &b, Value batch, Value row,
                                     Value k)>
        indices;
    std::function<Value(OpBuilder &b, Value raw)> cast;
    bool runsInLastDim = false;
    /// Where set, applied to the cast factor of (batch, row, k), an element
    /// or a run along the buffer's last dimension (whose elements share
    /// every other index): a gathered grouped operand's gate and padding
    /// (GroupedOperand::scale).
    std::function<Value(OpBuilder &b, Value batch, Value row, Value k,
                        Value factor)>
        scale;
  };
  Operand operandA, operandB;
  /// Whether consecutive rows (m of A, n of B) rather than consecutive k
  /// are adjacent in memory: the staging then walks the rows with
  /// consecutive threads, so that a warp's loads are coalesced either way.
  bool rowsContiguousA = false, rowsContiguousB = false;
  /// The output buffer and the indices of C[b, m, n] in it.
  Value out;
  std::function<SmallVector<Value>(OpBuilder &b, Value batch, Value m, Value n)>
      outIndices;
  /// C holds zeros (a zero fill that the kernel replaces): the
  /// accumulators start from zero without reading C, and split-K's parts
  /// are summed without it. Only where the grid writes every element of C.
  bool outZero = false;
  /// Where set, called with each element of C once its final value is
  /// known and stored (in the kernel's stores, or with split-K in the loop
  /// that adds the parts): the elementwise consumer computed there
  /// (switchyard-mark-epilogues).
  std::function<void(OpBuilder &b, Value batch, Value m, Value n, Value value)>
      epilogue;
  /// Split-K (a host value, or null for none): each batch's K range is cut
  /// into this many parts of whole K steps, the grid's third dimension runs
  /// over batches x parts, each block's tile goes to a buffer of partial
  /// results [parts, batches, M, N], and a parallel loop adds the parts to
  /// C in part order (deterministic). For grids of few tiles with long K:
  /// weight gradients, whose K is the token count.
  Value splits;
};

/// When the mma.sync kernels split K (switchyard-gpu-tensor-core-matmul's
/// split-k-blocks and split-k-min options).
struct SplitKPolicy {
  /// Blocks to aim for; 0 turns split-K off.
  int64_t targetBlocks = 0;
  /// The fewest elements of K per part.
  int64_t minK = 256;
};

/// Whether `c` has the shape the tensor-core kernel handles: one M, N and K
/// dimension, at most one batch dimension, and projected permutation maps
/// (every operand index is a loop index).
bool fitsTensorCores(Contraction &c);

/// The number of parts to cut K into for a grid over M x N x batches
/// (static sizes; nullopt: dynamic) whose batches each reduce about
/// `kPerBatch()` (a host value, built only if K is cut), or null where the
/// grid is dynamic or already large: clamp(kPerBatch / minK, 1,
/// ceil(targetBlocks / tiles)).
Value splitCount(OpBuilder &b, Location loc, const SplitKPolicy &policy,
                 std::optional<int64_t> m, std::optional<int64_t> n,
                 std::optional<int64_t> count, function_ref<Value()> kPerBatch);

/// The mma.sync problem of a contraction: M, N, K and the batch are its
/// loop dimensions; the whole K range for every block. Leaves the
/// rewriter's insertion point before `c.op`.
MmaProblem contractionProblem(RewriterBase &rewriter, Contraction &c,
                              const SplitKPolicy &policy);

/// Builds the mma.sync kernel of `problem` at the rewriter's insertion
/// point (the problem's op stays; its caller erases it).
void buildMmaKernel(RewriterBase &rewriter, Operation *op,
                    FloatType elementType, const MmaProblem &problem);

//===----------------------------------------------------------------------===//
// The grouped expert kernels on the mma.sync kernel (GroupedKernels.cpp)
//===----------------------------------------------------------------------===//

/// Builds the mma.sync kernel of `op` before it: a moe.grouped_matmul on
/// buffers whose tile_size is a multiple of kBlockM, or a
/// moe.grouped_weight_grad on buffers (the op stays; its caller erases it).
void buildGroupedKernel(RewriterBase &rewriter, Operation *op,
                        FloatType elementType, const SplitKPolicy &policy);

//===----------------------------------------------------------------------===//
// The wgmma matmul kernel, sm_90a (Wgmma.cpp)
//===----------------------------------------------------------------------===//

/// Whether `c` can take the wgmma route: the mma.sync shape, no batch
/// dimension, and static N and K that are multiples of the wgmma tile. M
/// (the token count) may be dynamic: TMA zero-fills the rows past it and
/// the stores are guarded.
bool fitsWgmma(Contraction &c);

/// Builds the wgmma + TMA kernel of `c` before it (the op stays; its caller
/// erases it): C starts from zero where `outZero` (a zero fill of C right
/// before, which the caller erases), and `epilogue` (a consumer marked by
/// switchyard-mark-epilogues, or null; the caller erases it) is computed
/// where each element of C is stored.
void buildWgmmaKernel(RewriterBase &rewriter, Contraction &c,
                      FloatType elementType, bool outZero,
                      linalg::GenericOp epilogue);

//===----------------------------------------------------------------------===//
// Flash attention (AttentionForward.cpp, AttentionBackward.cpp)
//===----------------------------------------------------------------------===//

/// Replaces `op` (on buffers) by its mma.sync kernel (AttentionForward.cpp).
void buildFlashAttentionKernel(RewriterBase &rewriter,
                               moe::FlashAttentionKernelOp op,
                               FloatType elementType);
/// Replaces `op` (on buffers) by its two mma.sync kernels, dK and dV over
/// blocks of keys, then dQ over blocks of queries (AttentionBackward.cpp).
void buildFlashAttentionGradKernels(RewriterBase &rewriter,
                                    moe::FlashAttentionGradKernelOp op,
                                    FloatType elementType);

} // namespace mlir::switchyard::tensor_cores

#endif // SWITCHYARD_LIB_CODEGEN_GPU_TENSORCORE_TENSORCOREKERNELS_H
