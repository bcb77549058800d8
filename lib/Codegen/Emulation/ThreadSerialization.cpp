//===- ThreadSerialization.cpp - cooperating GPU threads on the host ------===//
//
// The GPU emulation of kernels whose threads cooperate (the tensor-core
// route's: barriers, dynamic shared memory, ldmatrix, mma.sync, shuffles). The
// approach is the one of CPU back ends for SPMD kernels (POCL's and
// Polygeist's barrier elimination): the stretches of the kernel between
// barriers become loops over the threads, so that each stretch runs for
// every thread before the next begins, and what a thread keeps across a
// barrier lives in a buffer with one element per thread.
//
// The warp-wide ops are emulated from the PTX ISA's definition of their
// fragments, written out here independently of the maps that the
// tensor-core pass takes from upstream (nvgpu's MMAUtils): running the
// pass's kernels through this checks those maps and the pass's use of them.
//   mma.m16n8k16 (.bf16/.f16, A row-major, B column-major, f32 C/D), per
//   lane l, group g = l / 4 and t = l % 4 of a warp:
// clang-format off
//     A (16 x 16): a_i at row g + 8·((i / 2) % 2), column 2t + i % 2 + 8·(i / 4)
//     B (16 x 8):  b_i at row (k) 2t + i % 2 + 8·(i / 2), column (n) g
//     C, D (16 x 8): c_i at row g + 8·(i / 2), column 2t + i % 2
// clang-format on
//   a 32-bit register holds a_{2r} in its low half and a_{2r+1} in its high.
//   ldmatrix (.b16): lanes 8j .. 8j + 7 give the addresses of the eight
//   rows of matrix j; lane l receives, for each matrix j, the elements 2t
//   and 2t + 1 of row g (= l / 4), or with .trans the elements g of rows 2t
//   and 2t + 1.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Emulation/ThreadSerialization.h"
#include "lib/Codegen/Common/HostCode.h"
#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/SetVector.h"

#include <optional>

using namespace mlir;

namespace {
constexpr int64_t kWarpSize = 32;
/// Of the per-thread buffers' pool and of each buffer in it, in bytes: a
/// cache line, more than any vector element's alignment.
constexpr int64_t kPoolAlignment = 64;
/// The emulated dynamic shared memory starts kSharedMisalignment bytes
/// past a multiple of kSharedAllocationAlignment.
constexpr int64_t kSharedAllocationAlignment = 1024;
constexpr int64_t kSharedMisalignment = 16;

/// ldmatrix, mma.sync and shuffles: a lane's result depends on its warp's
/// values.
bool isWarpWide(Operation *op) {
  return isa<nvgpu::LdMatrixOp, nvgpu::MmaSyncOp, NVVM::MmaOp, gpu::ShuffleOp>(
      op);
}

bool containsBarrier(Operation *op) {
  return op->walk([](gpu::BarrierOp) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

/// The mma.sync forms the tensor-core route emits.
bool isMmaShape(ArrayRef<int64_t> shape) {
  return shape.size() == 3 && shape[0] == 16 && shape[1] == 8 &&
         shape[2] == 16;
}

LogicalResult checkNvvmMma(NVVM::MmaOp mma) {
  NVVM::MMAShapeAttr shape = mma.getShape();
  std::optional<NVVM::MMATypes> typeA = mma.getMultiplicandAPtxType();
  std::optional<NVVM::MMATypes> typeB = mma.getMultiplicandBPtxType();
  bool sixteenBit = typeA && typeB && *typeA == *typeB &&
                    (*typeA == NVVM::MMATypes::bf16 ||
                     *typeA == NVVM::MMATypes::f16);
  if (!isMmaShape({shape.getM(), shape.getN(), shape.getK()}) ||
      !sixteenBit || mma.getLayoutA() != NVVM::MMALayout::row ||
      mma.getLayoutB() != NVVM::MMALayout::col ||
      mma.getOperandA().size() != 4 || mma.getOperandB().size() != 2 ||
      mma.getOperandC().size() != 4 ||
      !llvm::all_of(llvm::concat<Value>(mma.getOperandA(), mma.getOperandB()),
                    [](Value v) { return v.getType().isInteger(32); }) ||
      !llvm::all_of(mma.getOperandC(),
                    [](Value v) { return v.getType().isF32(); }))
    return mma.emitOpError()
           << "is emulated only as m16n8k16 on bf16 or f16 (A row-major, B "
              "column-major) with f32 accumulators";
  for (Operation *user : mma->getUsers()) {
    auto extract = dyn_cast<LLVM::ExtractValueOp>(user);
    if (!extract || extract.getPosition().size() != 1)
      return user->emitOpError()
             << "uses an emulated mma.sync other than by extracting one of "
                "its four results";
  }
  return success();
}

LogicalResult checkNvgpuMma(nvgpu::MmaSyncOp mma) {
  auto a = mma.getMatrixA().getType(), b = mma.getMatrixB().getType(),
       c = mma.getMatrixC().getType();
  Type element = a.getElementType();
  if (!isMmaShape(mma.getMmaShapeAsArray()) || mma.getTf32Enabled() ||
      !(element.isF16() || element.isBF16()) ||
      a.getShape() != ArrayRef<int64_t>{4, 2} ||
      b.getShape() != ArrayRef<int64_t>{2, 2} ||
      b.getElementType() != element ||
      c.getShape() != ArrayRef<int64_t>{2, 2} ||
      !c.getElementType().isF32())
    return mma.emitOpError()
           << "is emulated only as m16n8k16 on bf16 or f16 with f32 "
              "accumulators";
  return success();
}

LogicalResult checkShuffle(gpu::ShuffleOp shuffle) {
  std::optional<int64_t> width = getConstantIntValue(shuffle.getWidth());
  std::optional<int64_t> offset = getConstantIntValue(shuffle.getOffset());
  if (shuffle.getMode() != gpu::ShuffleMode::XOR || width != kWarpSize ||
      !offset || *offset < 0 || *offset >= kWarpSize)
    return shuffle.emitOpError() << "is emulated only as a butterfly (xor) "
                                    "over the whole warp by a constant offset";
  return success();
}

/// Rewrites one launch; see serializeThreads.
class Serializer {
public:
  Serializer(gpu::LaunchOp launch, RewriterBase &rewriter)
      : launch(launch), rewriter(rewriter), loc(launch.getLoc()),
        tid(launch.getThreadIds().x),
        threadsInside(launch.getBlockSize().x) {}

  LogicalResult run();

private:
  /// Inside the launch: thread tid's lane and its warp's first thread.
  std::pair<Value, Value> laneAndWarpStart() {
    Value lane = arith::RemUIOp::create(rewriter, loc, tid, cst(kWarpSize));
    return {lane, arith::SubIOp::create(rewriter, loc, tid, lane)};
  }
  Value cst(int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v);
  }
  /// A buffer with one element of `type` (or one [trailing...] array of
  /// them) per thread of a block: a view of the launch's pool.
  Value perThreadBuffer(Type type, ArrayRef<int64_t> trailing = {});
  bool isUniform(Value v);
  void markUniform(Operation *op) {
    uniformOps.insert(op);
    for (Value result : op->getResults())
      uniformValues.insert(result);
  }
  bool isInvariantLoad(Operation *op);

  void replaceSharedMemory();
  void emulateLdMatrix(nvgpu::LdMatrixOp ld);
  /// The four f32 results of one lane's mma.sync from every lane's
  /// fragments (a: 8 values, b: 4, each 16-bit; c: 4 f32).
  SmallVector<Value> emulateMma(ArrayRef<Value> a, ArrayRef<Value> b,
                                ArrayRef<Value> c);
  void emulateNvvmMma(NVVM::MmaOp mma);
  void emulateNvgpuMma(nvgpu::MmaSyncOp mma);
  void emulateShuffle(gpu::ShuffleOp shuffle);

  LogicalResult serializeBlock(Block &block);
  LogicalResult privatizeLoop(scf::ForOp loop);
  void makeThreadLoop(ArrayRef<Operation *> ops);
  scf::ForOp enclosingThreadLoop(Value v) const;
  LogicalResult connectThreadLoops();

  gpu::LaunchOp launch;
  RewriterBase &rewriter;
  Location loc;
  /// Inside the body: thread x's id and the block's size in x.
  Value tid, threadsInside;
  DenseSet<Value> uniformValues;
  DenseSet<Operation *> uniformOps;
  SmallVector<scf::ForOp> threadLoops;
  DenseSet<Operation *> threadLoopOps;
  llvm::SetVector<Value> hostBuffers;
  /// The per-thread buffers' pool (bytes, allocated before the launch), the
  /// last op that made a view of it (at the top of the body) and the bytes
  /// that its views take so far.
  memref::AllocOp pool;
  Operation *lastPoolOp = nullptr;
  int64_t poolBytes = 0;
  /// What isInvariantLoad finds written in the launch (on its first call).
  std::optional<DenseSet<Value>> writtenBuffers;
  bool unnamedWrites = false;
};

// All of a launch's per-thread buffers are views of one allocation: a
// buffer each (one per value that crosses a barrier, two per emulated
// mma.sync) would make hundreds of mallocs and frees per tensor-core launch
// in the host code, each buffer one more argument of the outlined loops,
// and most of an emulated model's host code. The views, of static shape at
// static offsets, are made at the top of the kernel's body, where they are
// uniform, so that the loops take the pool alone.
Value Serializer::perThreadBuffer(Type type, ArrayRef<int64_t> trailing) {
  OpBuilder::InsertionGuard guard(rewriter);
  std::optional<int64_t> threads = getConstantIntValue(launch.getBlockSizeX());
  // A value without a size in bytes (a memref's descriptor that differs
  // between threads), or blocks of a size known only when launched: a
  // buffer of its own.
  if (!threads || (!type.isIntOrIndexOrFloat() && !isa<VectorType>(type))) {
    SmallVector<int64_t> shape{ShapedType::kDynamic};
    llvm::append_range(shape, trailing);
    rewriter.setInsertionPoint(launch);
    Value buffer = memref::AllocOp::create(
        rewriter, loc, MemRefType::get(shape, type),
        ValueRange{launch.getBlockSizeX()});
    hostBuffers.insert(buffer);
    return buffer;
  }
  Block &body = launch.getBody().front();
  if (!pool) {
    // Sized once every view is known (run, at the end).
    rewriter.setInsertionPoint(launch);
    pool = memref::AllocOp::create(
        rewriter, loc,
        MemRefType::get({ShapedType::kDynamic}, rewriter.getI8Type()),
        ValueRange{cst(0)}, /*symbolOperands=*/ValueRange(),
        rewriter.getI64IntegerAttr(kPoolAlignment));
    hostBuffers.insert(pool);
    rewriter.setInsertionPointToStart(&body);
  } else {
    rewriter.setInsertionPointAfter(lastPoolOp);
  }
  int64_t bytes = DataLayout::closest(launch).getTypeSize(type) * *threads;
  for (int64_t extent : trailing)
    bytes *= extent;
  SmallVector<int64_t> shape{*threads};
  llvm::append_range(shape, trailing);
  Value offset = cst(poolBytes);
  auto view = memref::ViewOp::create(rewriter, loc,
                                     MemRefType::get(shape, type), pool,
                                     offset, ValueRange{});
  // Each view at a multiple of the alignment: its elements, vectors
  // included, stay aligned.
  poolBytes += llvm::alignTo(bytes, kPoolAlignment);
  // Uniform: stretches between barriers made after the first look for what
  // is uniform (privatized loops, values that cross barriers) leave them
  // where they are.
  markUniform(offset.getDefiningOp());
  markUniform(view);
  lastPoolOp = view;
  return view;
}

bool Serializer::isUniform(Value v) {
  return uniformValues.contains(v) ||
         !launch.getBody().isAncestor(v.getParentRegion());
}

/// A load of a buffer from outside the launch that nothing in the launch
/// writes: with uniform indices, every thread reads the same value (the
/// grouped kernels' expert of a tile, or segment bounds, as loop bounds).
bool Serializer::isInvariantLoad(Operation *op) {
  auto load = dyn_cast<memref::LoadOp>(op);
  if (!load)
    return false;
  Value buffer = switchyard::viewedBuffer(load.getMemref());
  if (launch.getBody().isAncestor(buffer.getParentRegion()))
    return false;
  // The launch's writers, found once (a walk per load is quadratic in the
  // kernel's size): the buffers that ops write through a view, and whether
  // an op with resource-wide or unknown effects takes a buffer. The
  // serialization's own buffers (per thread, shared memory), written by
  // each thread, are host buffers allocated before the launch.
  if (!writtenBuffers) {
    writtenBuffers.emplace();
    launch.getBody().walk([&](Operation *user) {
      if (switchyard::accessesBuffer(user, /*writesOnly=*/true, [&](Value v) {
            writtenBuffers->insert(switchyard::viewedBuffer(v));
            return false;
          }))
        unnamedWrites = true;
    });
  }
  return !unnamedWrites && !writtenBuffers->contains(buffer) &&
         !hostBuffers.contains(buffer);
}

void Serializer::replaceSharedMemory() {
  SmallVector<gpu::DynamicSharedMemoryOp> shared;
  launch.getBody().walk(
      [&](gpu::DynamicSharedMemoryOp op) { shared.push_back(op); });
  if (!shared.empty()) {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(launch);
    Value bytes = arith::IndexCastUIOp::create(
        rewriter, loc, rewriter.getIndexType(),
        launch.getDynamicSharedMemorySize());
    // 16 bytes past a 1024-byte boundary: the weakest alignment the GPU
    // target's declaration of dynamic shared memory promises (16 bytes),
    // so that a kernel that assumes more (the 128-byte swizzle's 1024)
    // fails here rather than only on some GPUs.
    // (The host's allocations are aligned to 16 bytes: the view starts
    // at the shift that puts it there.)
    auto bytesType =
        MemRefType::get({ShapedType::kDynamic}, rewriter.getI8Type());
    Value allocation = memref::AllocOp::create(
        rewriter, loc, bytesType,
        ValueRange{arith::AddIOp::create(
            rewriter, loc, bytes,
            cst(kSharedAllocationAlignment + kSharedMisalignment))},
        /*symbolOperands=*/ValueRange(), rewriter.getI64IntegerAttr(16));
    hostBuffers.insert(allocation);
    Value address = memref::ExtractAlignedPointerAsIndexOp::create(
        rewriter, loc, allocation);
    Value shift = arith::AddIOp::create(
        rewriter, loc,
        arith::RemUIOp::create(
            rewriter, loc,
            arith::SubIOp::create(
                rewriter, loc, cst(kSharedAllocationAlignment),
                arith::RemUIOp::create(rewriter, loc, address,
                                       cst(kSharedAllocationAlignment))),
            cst(kSharedAllocationAlignment)),
        cst(kSharedMisalignment));
    Value buffer = memref::ViewOp::create(rewriter, loc, bytesType, allocation,
                                          shift, ValueRange{bytes});
    for (gpu::DynamicSharedMemoryOp op : shared)
      rewriter.replaceAllUsesWith(op.getResult(), buffer);
    for (gpu::DynamicSharedMemoryOp op : shared)
      rewriter.eraseOp(op);
  }
  // Views of it: host memory, the default memory space.
  launch.getBody().walk([&](Operation *op) {
    for (Value result : op->getResults()) {
      auto type = dyn_cast<MemRefType>(result.getType());
      if (type && isa_and_nonnull<gpu::AddressSpaceAttr>(type.getMemorySpace()))
        result.setType(MemRefType::get(type.getShape(), type.getElementType(),
                                       type.getLayout()));
    }
  });
}

void Serializer::emulateLdMatrix(nvgpu::LdMatrixOp ld) {
  rewriter.setInsertionPoint(ld);
  ValueRange indices = ld.getIndices();
  Value addresses =
      perThreadBuffer(rewriter.getIndexType(), {int64_t(indices.size())});
  for (auto [d, index] : llvm::enumerate(indices))
    memref::StoreOp::create(rewriter, loc, index, addresses,
                            ValueRange{tid, cst(d)});
  gpu::BarrierOp::create(rewriter, loc);
  auto [lane, warp0] = laneAndWarpStart();
  Value group = arith::DivUIOp::create(rewriter, loc, lane, cst(4));
  Value pair = arith::MulIOp::create(
      rewriter, loc, arith::RemUIOp::create(rewriter, loc, lane, cst(4)),
      cst(2));
  auto type = cast<VectorType>(ld.getRes().getType());
  // Element e of matrix j: at column `pair + e` of row `group`, or with
  // .trans at column `group` of row `pair + e`.
  bool transposed = ld.getTranspose();
  auto load = [&](int64_t j, Value row, Value col) {
    // The lane that gave the address of row `row` of matrix j.
    Value source = arith::AddIOp::create(
        rewriter, loc, warp0,
        arith::AddIOp::create(rewriter, loc, cst(8 * j), row));
    SmallVector<Value> at;
    for (int64_t d = 0; d < int64_t(indices.size()); ++d)
      at.push_back(memref::LoadOp::create(rewriter, loc, addresses,
                                          ValueRange{source, cst(d)}));
    at.back() = arith::AddIOp::create(rewriter, loc, at.back(), col);
    return memref::LoadOp::create(rewriter, loc, ld.getSrcMemref(), at);
  };
  SmallVector<Value> elements;
  for (int64_t j = 0; j < type.getDimSize(0); ++j) {
    for (int64_t e = 0; e < type.getDimSize(1); ++e) {
      Value second = arith::AddIOp::create(rewriter, loc, pair, cst(e));
      elements.push_back(transposed ? load(j, second, group)
                                    : load(j, group, second));
    }
  }
  Value result = vector::FromElementsOp::create(rewriter, loc, type, elements);
  gpu::BarrierOp::create(rewriter, loc);
  rewriter.replaceOp(ld, result);
}

void Serializer::emulateShuffle(gpu::ShuffleOp shuffle) {
  // shfl.sync.bfly over the whole warp: lane l reads lane l ^ offset.
  rewriter.setInsertionPoint(shuffle);
  Value values = perThreadBuffer(shuffle.getValue().getType());
  memref::StoreOp::create(rewriter, loc, shuffle.getValue(), values, tid);
  gpu::BarrierOp::create(rewriter, loc);
  auto [lane, warp0] = laneAndWarpStart();
  Value offset = arith::IndexCastUIOp::create(
      rewriter, loc, rewriter.getIndexType(), shuffle.getOffset());
  Value source = arith::AddIOp::create(
      rewriter, loc, warp0, arith::XOrIOp::create(rewriter, loc, lane, offset));
  Value result = memref::LoadOp::create(rewriter, loc, values, source);
  gpu::BarrierOp::create(rewriter, loc);
  Value valid =
      arith::ConstantIntOp::create(rewriter, loc, rewriter.getI1Type(), 1);
  rewriter.replaceOp(shuffle, ValueRange{result, valid});
}

SmallVector<Value> Serializer::emulateMma(ArrayRef<Value> a,
                                          ArrayRef<Value> b,
                                          ArrayRef<Value> c) {
  Type f32 = rewriter.getF32Type();
  auto toF32 = [&](Value v) -> Value {
    return v.getType().isF32()
               ? v
               : arith::ExtFOp::create(rewriter, loc, f32, v).getResult();
  };
  Value bufferA = perThreadBuffer(f32, {8});
  Value bufferB = perThreadBuffer(f32, {4});
  for (auto [i, v] : llvm::enumerate(a))
    memref::StoreOp::create(rewriter, loc, toF32(v), bufferA,
                            ValueRange{tid, cst(i)});
  for (auto [i, v] : llvm::enumerate(b))
    memref::StoreOp::create(rewriter, loc, toF32(v), bufferB,
                            ValueRange{tid, cst(i)});
  gpu::BarrierOp::create(rewriter, loc);

  auto rem = [&](Value x, int64_t y) -> Value {
    return arith::RemUIOp::create(rewriter, loc, x, cst(y));
  };
  auto div = [&](Value x, int64_t y) -> Value {
    return arith::DivUIOp::create(rewriter, loc, x, cst(y));
  };
  auto add = [&](Value x, Value y) -> Value {
    return arith::AddIOp::create(rewriter, loc, x, y);
  };
  auto mul = [&](Value x, int64_t y) -> Value {
    return arith::MulIOp::create(rewriter, loc, x, cst(y));
  };
  auto [lane, warp0] = laneAndWarpStart();
  Value group = div(lane, 4), inGroup = rem(lane, 4);
  SmallVector<Value> d;
  for (int64_t v = 0; v < 4; ++v) {
    // D[row, col] = C[row, col] + Σ_k A[row, k] · B[k, col]: this lane's
    // c_v (row g + 8·(v / 2), column 2t + v % 2) and the lanes holding A's
    // row and B's column.
    Value col = add(mul(inGroup, 2), cst(v % 2));
    auto loop = scf::ForOp::create(rewriter, loc, cst(0), cst(16), cst(1),
                                   ValueRange{c[v]});
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(loop.getBody());
    Value k = loop.getInductionVar();
    Value kLow = rem(k, 2), kPair = div(rem(k, 8), 2), kHigh = div(k, 8);
    // A[row, k] is a_i of lane 4g + (k % 8) / 2, i = k % 2 + 2·(v / 2) +
    // 4·(k / 8); B[k, col] is b_i of lane 4·col + (k % 8) / 2, i = k % 2 +
    // 2·(k / 8).
    Value laneA = add(warp0, add(mul(group, 4), kPair));
    Value indexA = add(kLow, add(cst(2 * (v / 2)), mul(kHigh, 4)));
    Value laneB = add(warp0, add(mul(col, 4), kPair));
    Value indexB = add(kLow, mul(kHigh, 2));
    Value x = memref::LoadOp::create(rewriter, loc, bufferA,
                                     ValueRange{laneA, indexA});
    Value y = memref::LoadOp::create(rewriter, loc, bufferB,
                                     ValueRange{laneB, indexB});
    Value product = arith::MulFOp::create(rewriter, loc, x, y);
    scf::YieldOp::create(
        rewriter, loc,
        ValueRange{arith::AddFOp::create(rewriter, loc,
                                         loop.getRegionIterArgs()[0], product)
                       .getResult()});
    d.push_back(loop.getResult(0));
  }
  gpu::BarrierOp::create(rewriter, loc);
  return d;
}

void Serializer::emulateNvvmMma(NVVM::MmaOp mma) {
  rewriter.setInsertionPoint(mma);
  Type half = *mma.getMultiplicandAPtxType() == NVVM::MMATypes::bf16
                  ? Type(rewriter.getBF16Type())
                  : Type(rewriter.getF16Type());
  // A 32-bit register's two 16-bit values, the low half first.
  auto halves = [&](ValueRange registers) {
    SmallVector<Value> values;
    Type i16 = rewriter.getI16Type();
    for (Value r : registers) {
      Value high = arith::ShRUIOp::create(
          rewriter, loc, r,
          arith::ConstantIntOp::create(rewriter, loc, r.getType(), 16));
      for (Value bits : {r, high})
        values.push_back(arith::BitcastOp::create(
            rewriter, loc, half,
            arith::TruncIOp::create(rewriter, loc, i16, bits)));
    }
    return values;
  };
  SmallVector<Value> d =
      emulateMma(halves(mma.getOperandA()), halves(mma.getOperandB()),
                 llvm::to_vector(mma.getOperandC()));
  for (Operation *user : llvm::make_early_inc_range(mma->getUsers())) {
    auto extract = cast<LLVM::ExtractValueOp>(user);
    rewriter.replaceOp(extract, d[extract.getPosition()[0]]);
  }
  rewriter.eraseOp(mma);
}

void Serializer::emulateNvgpuMma(nvgpu::MmaSyncOp mma) {
  rewriter.setInsertionPoint(mma);
  // Row r of a fragment vector is register r.
  auto values = [&](Value fragment) {
    auto type = cast<VectorType>(fragment.getType());
    SmallVector<Value> out;
    for (int64_t r = 0; r < type.getDimSize(0); ++r)
      for (int64_t h = 0; h < type.getDimSize(1); ++h)
        out.push_back(vector::ExtractOp::create(rewriter, loc, fragment,
                                                ArrayRef<int64_t>{r, h}));
    return out;
  };
  SmallVector<Value> d = emulateMma(values(mma.getMatrixA()),
                                    values(mma.getMatrixB()),
                                    values(mma.getMatrixC()));
  rewriter.replaceOp(mma, vector::FromElementsOp::create(
                              rewriter, loc, mma.getMatrixC().getType(), d));
}

LogicalResult Serializer::privatizeLoop(scf::ForOp loop) {
  for (Value bound : {loop.getLowerBound(), loop.getUpperBound(),
                      loop.getStep()})
    if (!isUniform(bound))
      return loop.emitOpError()
             << "contains a barrier but its bounds differ between threads; "
                "the GPU emulation cannot serialise its threads";
  uniformValues.insert(loop.getInductionVar());
  if (loop.getInitArgs().empty())
    return success();

  // Each iteration value in a buffer: stored before the loop and at the end
  // of each iteration, loaded where it is used.
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  SmallVector<Value> buffers;
  for (Value init : loop.getInitArgs()) {
    if (!MemRefType::isValidElementType(init.getType()))
      return loop.emitOpError()
             << "carries a value of type " << init.getType()
             << " across a barrier, which the GPU emulation cannot keep";
    buffers.push_back(perThreadBuffer(init.getType()));
    rewriter.setInsertionPoint(loop);
    memref::StoreOp::create(rewriter, loc, init, buffers.back(), tid);
  }
  for (auto [iterArg, result, buffer] :
       llvm::zip_equal(loop.getRegionIterArgs(), loop.getResults(), buffers)) {
    for (Value value : {Value(iterArg), Value(result)}) {
      for (OpOperand &use : llvm::make_early_inc_range(value.getUses())) {
        if (use.getOwner() == yield)
          continue;
        rewriter.setInsertionPoint(use.getOwner());
        Value loaded = memref::LoadOp::create(rewriter, loc, buffer, tid);
        rewriter.modifyOpInPlace(use.getOwner(), [&] { use.set(loaded); });
      }
    }
  }
  // At the end of an iteration, every yielded iteration argument is read
  // before any buffer is written (a loop may yield them swapped).
  rewriter.setInsertionPoint(yield);
  SmallVector<Value> next;
  for (Value yielded : yield.getOperands()) {
    auto arg = dyn_cast<BlockArgument>(yielded);
    if (arg && arg.getOwner() == loop.getBody() && arg.getArgNumber() > 0)
      yielded = memref::LoadOp::create(rewriter, loc,
                                       buffers[arg.getArgNumber() - 1], tid);
    next.push_back(yielded);
  }
  for (auto [value, buffer] : llvm::zip_equal(next, buffers))
    memref::StoreOp::create(rewriter, loc, value, buffer, tid);
  rewriter.setInsertionPoint(loop);
  auto plain = scf::ForOp::create(
      rewriter, loc, loop.getLowerBound(), loop.getUpperBound(),
      loop.getStep(), ValueRange{}, /*bodyBuilder=*/nullptr,
      loop.getUnsignedCmp());
  rewriter.eraseOp(plain.getBody()->getTerminator());
  rewriter.setInsertionPoint(yield);
  scf::YieldOp::create(rewriter, loc);
  rewriter.eraseOp(yield);
  // The old iteration arguments have no uses left: any value of their
  // type stands in for them.
  SmallVector<Value> arguments{plain.getInductionVar()};
  llvm::append_range(arguments, loop.getInitArgs());
  rewriter.mergeBlocks(loop.getBody(), plain.getBody(), arguments);
  rewriter.eraseOp(loop);
  uniformValues.insert(plain.getInductionVar());
  return success();
}

void Serializer::makeThreadLoop(ArrayRef<Operation *> ops) {
  rewriter.setInsertionPoint(ops.front());
  auto loop =
      scf::ForOp::create(rewriter, loc, cst(0), threadsInside, cst(1));
  for (Operation *op : ops)
    rewriter.moveOpBefore(op, loop.getBody()->getTerminator());
  Value thread = loop.getInductionVar();
  rewriter.replaceUsesWithIf(tid, thread, [&](OpOperand &use) {
    return loop->isProperAncestor(use.getOwner());
  });
  threadLoops.push_back(loop);
  threadLoopOps.insert(loop);
}

LogicalResult Serializer::serializeBlock(Block &block) {
  // What every thread computes alike stays outside the thread loops,
  // hoisted above them (its operands are uniform and defined earlier).
  Operation *anchor = nullptr;
  for (Operation &op : llvm::make_early_inc_range(block.without_terminator())) {
    // A load that every thread makes alike between two barriers (a last
    // block's flag): read once, where it is, after the stretch before it;
    // what follows it may be hoisted up to it only.
    if (op.hasAttr(switchyard::kBlockUniformAttr) &&
        llvm::all_of(op.getOperands(), [&](Value v) { return isUniform(v); })) {
      markUniform(&op);
      anchor = nullptr;
      continue;
    }
    bool uniform =
        op.getNumRegions() == 0 &&
        (isMemoryEffectFree(&op) || isInvariantLoad(&op)) &&
        llvm::all_of(op.getOperands(), [&](Value v) { return isUniform(v); });
    if (!uniform) {
      if (!anchor)
        anchor = &op;
      continue;
    }
    markUniform(&op);
    if (anchor)
      rewriter.moveOpBefore(&op, anchor);
  }

  // Then the loops around barriers (their bounds known uniform or not):
  // their iteration values become loads and stores in the stretches around
  // and inside them.
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops) {
    if (isa<gpu::BarrierOp>(op) || !containsBarrier(op))
      continue;
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      // Every thread of the block takes the same branch (a merged launch's
      // choice of body by the block index): its stretches are the branch's.
      if (branch.getNumResults() || !isUniform(branch.getCondition()))
        return op->emitOpError()
               << "contains a barrier under a condition that differs between "
                  "threads or with results; the GPU emulation cannot "
                  "serialise its threads";
      continue;
    }
    auto loop = dyn_cast<scf::ForOp>(op);
    if (!loop)
      return op->emitOpError()
             << "contains a barrier; the GPU emulation serialises threads "
                "around barriers at the top of a kernel, of scf.for loops "
                "and of scf.if branches on a uniform condition only";
    if (failed(privatizeLoop(loop)))
      return failure();
  }

  // The stretches between barriers.
  ops.clear();
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  SmallVector<Operation *> stretch;
  auto flush = [&] {
    if (!stretch.empty())
      makeThreadLoop(stretch);
    stretch.clear();
  };
  for (Operation *op : ops) {
    if (uniformOps.contains(op))
      continue;
    if (isa<gpu::BarrierOp>(op)) {
      flush();
      rewriter.eraseOp(op);
      continue;
    }
    if (containsBarrier(op)) {
      flush();
      for (Region &region : op->getRegions())
        for (Block &inner : region)
          if (failed(serializeBlock(inner)))
            return failure();
      continue;
    }
    stretch.push_back(op);
  }
  flush();
  return success();
}

scf::ForOp Serializer::enclosingThreadLoop(Value v) const {
  Operation *at = v.getParentBlock()->getParentOp();
  if (Operation *def = v.getDefiningOp())
    at = def;
  for (Operation *p = at; p; p = p->getParentOp())
    if (threadLoopOps.contains(p))
      return cast<scf::ForOp>(p);
  return {};
}

LogicalResult Serializer::connectThreadLoops() {
  DenseMap<Value, Value> buffers;
  for (scf::ForOp loop : threadLoops) {
    DenseMap<Value, Value> loaded;
    WalkResult walk = loop.getBody()->walk([&](Operation *op) {
      for (OpOperand &operand : op->getOpOperands()) {
        Value v = operand.get();
        if (isUniform(v))
          continue;
        scf::ForOp from = enclosingThreadLoop(v);
        if (from == loop)
          continue;
        if (!from) {
          op->emitOpError() << "uses a value that differs between threads "
                               "outside a stretch between barriers";
          return WalkResult::interrupt();
        }
        Value &value = loaded[v];
        if (!value) {
          Value &buffer = buffers[v];
          if (!buffer) {
            if (!MemRefType::isValidElementType(v.getType())) {
              op->emitOpError()
                  << "uses a value of type " << v.getType()
                  << " across a barrier, which the GPU emulation cannot keep";
              return WalkResult::interrupt();
            }
            buffer = perThreadBuffer(v.getType());
            OpBuilder::InsertionGuard guard(rewriter);
            rewriter.setInsertionPointAfterValue(v);
            memref::StoreOp::create(rewriter, loc, v, buffer,
                                    from.getInductionVar());
          }
          OpBuilder::InsertionGuard guard(rewriter);
          rewriter.setInsertionPointToStart(loop.getBody());
          value = memref::LoadOp::create(rewriter, loc, buffer,
                                         loop.getInductionVar());
        }
        rewriter.modifyOpInPlace(op, [&] { operand.set(value); });
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  return success();
}

LogicalResult Serializer::run() {
  Block &body = launch.getBody().front();
  // The thread ids in y and z are 0 (one-dimensional blocks); gpu.thread_id
  // queries are the body's arguments.
  rewriter.setInsertionPointToStart(&body);
  Value zero = cst(0);
  uniformValues.insert(zero);
  SmallVector<gpu::ThreadIdOp> queries;
  body.walk([&](gpu::ThreadIdOp q) { queries.push_back(q); });
  for (gpu::ThreadIdOp q : queries) {
    Value id = q.getDimension() == gpu::Dimension::x ? tid : zero;
    rewriter.replaceOp(q, id);
  }
  rewriter.replaceAllUsesWith(launch.getThreadIds().y, zero);
  rewriter.replaceAllUsesWith(launch.getThreadIds().z, zero);
  for (BlockArgument argument : body.getArguments())
    if (argument != tid)
      uniformValues.insert(argument);

  SmallVector<Operation *> collectives;
  body.walk([&](Operation *op) {
    if (isWarpWide(op))
      collectives.push_back(op);
  });
  for (Operation *op : collectives) {
    if (auto ld = dyn_cast<nvgpu::LdMatrixOp>(op))
      emulateLdMatrix(ld);
    else if (auto mma = dyn_cast<NVVM::MmaOp>(op))
      emulateNvvmMma(mma);
    else if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op))
      emulateShuffle(shuffle);
    else
      emulateNvgpuMma(cast<nvgpu::MmaSyncOp>(op));
  }
  replaceSharedMemory();

  if (failed(serializeBlock(body)) || failed(connectThreadLoops()))
    return failure();
  if (!tid.use_empty())
    return launch.emitOpError()
           << "still reads its thread id outside a loop over the threads";

  if (pool) {
    rewriter.setInsertionPoint(pool);
    Value size = cst(poolBytes);
    rewriter.modifyOpInPlace(pool, [&] { pool->setOperand(0, size); });
  }
  rewriter.setInsertionPointAfter(launch);
  for (Value buffer : hostBuffers)
    memref::DeallocOp::create(rewriter, loc, buffer);
  return success();
}
} // namespace

bool mlir::switchyard::needsSerializedThreads(Operation *op) {
  return isa<gpu::BarrierOp, gpu::DynamicSharedMemoryOp>(op) ||
         isWarpWide(op);
}

bool mlir::switchyard::needsSerializedThreads(gpu::LaunchOp launch) {
  if (launch.getDynamicSharedMemorySize())
    return true;
  return launch.getBody()
      .walk([](Operation *op) {
        return needsSerializedThreads(op) ? WalkResult::interrupt()
                                          : WalkResult::advance();
      })
      .wasInterrupted();
}

LogicalResult mlir::switchyard::checkSerializable(gpu::LaunchOp launch) {
  for (Value size : {launch.getBlockSizeY(), launch.getBlockSizeZ()}) {
    std::optional<int64_t> constant = getConstantIntValue(size);
    if (!constant || *constant != 1)
      return launch.emitOpError()
             << "synchronises its threads in blocks of more than one "
                "dimension, which the GPU emulation does not serialise";
  }
  bool warpWide = launch.getBody()
                      .walk([](Operation *op) {
                        return isWarpWide(op) ? WalkResult::interrupt()
                                              : WalkResult::advance();
                      })
                      .wasInterrupted();
  std::optional<int64_t> threads = getConstantIntValue(launch.getBlockSizeX());
  if (warpWide && (!threads || *threads % 32 != 0))
    return launch.emitOpError()
           << "runs warp-wide ops (ldmatrix, mma.sync, shuffles) in blocks "
              "that are "
              "not a known multiple of 32 threads, which the GPU emulation "
              "does not serialise";
  WalkResult walk = launch.getBody().walk([&](Operation *op) {
    if (isa<gpu::BarrierOp>(op)) {
      for (Operation *p = op->getParentOp(); p != launch; p = p->getParentOp())
        if (!isa<scf::ForOp, scf::IfOp>(p)) {
          op->emitOpError() << "inside " << p->getName()
                            << " is not emulated: the GPU emulation "
                               "serialises threads around barriers at the "
                               "top of a kernel, of scf.for loops and of "
                               "scf.if branches only";
          return WalkResult::interrupt();
        }
    } else if (auto ld = dyn_cast<nvgpu::LdMatrixOp>(op)) {
      auto type = cast<VectorType>(ld.getRes().getType());
      if (type.getRank() != 2 || type.getDimSize(1) != 2 ||
          type.getElementType().getIntOrFloatBitWidth() != 16) {
        ld.emitOpError() << "is emulated only on 16-bit elements";
        return WalkResult::interrupt();
      }
    } else if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
      if (failed(checkShuffle(shuffle)))
        return WalkResult::interrupt();
    } else if (auto mma = dyn_cast<NVVM::MmaOp>(op)) {
      if (failed(checkNvvmMma(mma)))
        return WalkResult::interrupt();
    } else if (auto mma = dyn_cast<nvgpu::MmaSyncOp>(op)) {
      if (failed(checkNvgpuMma(mma)))
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult mlir::switchyard::serializeThreads(gpu::LaunchOp launch,
                                                 RewriterBase &rewriter) {
  return Serializer(launch, rewriter).run();
}
