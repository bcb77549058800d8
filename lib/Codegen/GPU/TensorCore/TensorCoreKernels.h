//===- TensorCoreKernels.h - what the tensor-core kernels share -*- C++ -*-===//
//
// Internal to switchyard-gpu-tensor-core-matmul: the mma.sync shape, the
// index and fragment helpers of its kernel builders (GpuTensorCoreMatmul.cpp:
// the contractions and grouped expert kernels; GpuTensorCoreAttention.cpp:
// moe.flash_attention_kernel).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_GPU_TENSORCORE_TENSORCOREKERNELS_H
#define SWITCHYARD_LIB_CODEGEN_GPU_TENSORCORE_TENSORCOREKERNELS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::moe {
class FlashAttentionKernelOp;
class FlashAttentionGradKernelOp;
} // namespace mlir::moe

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
/// type of the factors, index arithmetic, the mma.sync itself.
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

/// Replaces `op` (on buffers) by its mma.sync kernel
/// (GpuTensorCoreAttention.cpp).
void buildFlashAttentionKernel(RewriterBase &rewriter,
                               moe::FlashAttentionKernelOp op,
                               FloatType elementType);
/// Replaces `op` (on buffers) by its two mma.sync kernels, dK and dV over
/// blocks of keys, then dQ over blocks of queries
/// (GpuTensorCoreAttention.cpp).
void buildFlashAttentionGradKernels(RewriterBase &rewriter,
                                    moe::FlashAttentionGradKernelOp op,
                                    FloatType elementType);

} // namespace mlir::switchyard::tensor_cores

#endif // SWITCHYARD_LIB_CODEGEN_GPU_TENSORCORE_TENSORCOREKERNELS_H
