//===- Wgmma.cpp - the wgmma matmul kernel (sm_90a) -----------------------===//
//
// The wgmma route of switchyard-gpu-tensor-core-matmul (its `wgmma` option,
// sm_90a): a contraction without batch dimension whose N and K are static
// becomes a kernel in which two warpgroups of 128 threads compute a
// 128 x 128 tile of C, 64 rows each. The host first copies the factors,
// rounded to the element type, to device buffers in the layouts TMA loads
// (A as M x K, B as K x N, rows padded to 16 bytes); the kernel keeps a
// ring of up to four stages of 128-byte swizzled shared tiles, one
// mbarrier per stage: thread 0 loads 64 of K per stage by TMA, up to three
// stages ahead of the step that the warpgroups multiply with wgmma
// m64n128k16 on descriptors of the tiles. TMA fills tiles past M, N and K
// with zeros; the accumulators are added to C through shared memory, rows
// past M and columns past N skipped (a zero fill of C folded, a marked
// elementwise epilogue computed on each element, as in MmaSync.cpp).
//
//===----------------------------------------------------------------------===//

#include "TensorCoreKernels.h"

#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/Common/Epilogues.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using mlir::switchyard::Contraction;

using namespace mlir::switchyard::tensor_cores;

namespace {
/// The wgmma tile (sm_90a): a block of two warpgroups computes a
/// kWgTileM x kWgTileN tile of C, each warpgroup 64 of its rows, kWgTileK of
/// K per stage. A stage holds A's 128 x 64 box and B's two 64 x 64 boxes
/// (K x N, N contiguous), all with the 128-byte swizzle (a 64-element row of
/// a 16-bit type is one 128-byte swizzle span), as upstream's sm90 GEMM
/// (mlir/test/Integration/GPU/CUDA/sm90/gemm_f32_f16_f16_128x128x128.mlir)
/// lays them out; wgmma m64n128k16.
constexpr int64_t kWgTileM = 128;
constexpr int64_t kWgTileN = 128;
constexpr int64_t kWgTileK = 64;
constexpr int64_t kWarpgroupSize = 128;
constexpr int64_t kWarpgroupRows = 64;
constexpr int64_t kWarpgroups = kWgTileM / kWarpgroupRows;
/// The stages of the ring of shared-memory tiles: up to kMaxStages - 1
/// loads in flight while the warpgroups multiply the oldest.
constexpr int64_t kMaxStages = 4;
/// TMA needs the global strides to be multiples of 16 bytes: the converted
/// copies' rows are padded to a multiple of this many elements.
constexpr int64_t kRowAlignment = 8;
/// The 128-byte swizzle's pattern repeats every 8 rows of 128 bytes: a
/// tile must start at a multiple of this many bytes of the shared window
/// (the descriptors' base offset is 0, and TMA swizzles by address).
constexpr int64_t kSwizzleAlignment = 1024;
/// Bytes at the start of dynamic shared memory that the tiles leave alone:
/// the lowering declares dynamic shared memory as a symbol of its own
/// beside the static mbarriers, which ptxas may lay out over its first
/// bytes (8 per stage).
constexpr int64_t kStaticReserve = 128;

/// Builds the wgmma + TMA kernel of one contraction (sm_90a).
class WgmmaKernelBuilder : private KernelBuilderBase {
public:
  WgmmaKernelBuilder(RewriterBase &rewriter, Contraction &c,
                     FloatType elementType, bool outZero,
                     linalg::GenericOp epilogue)
      : KernelBuilderBase(rewriter, c.op.getLoc(), elementType), c(c),
        outZero(outZero), epilogue(epilogue) {}

  void build();

private:
  Contraction &c;
  bool outZero;
  linalg::GenericOp epilogue;
  /// A rows x cols view of a new device buffer of the element type whose
  /// rows are padded to kRowAlignment elements (rows dynamic where
  /// `dynamicRows` is given), filled with input `input` of the contraction
  /// read through the body's casts and rounded: loop dimension `rowDim`
  /// along the rows. Returns the view and the buffer (to free).
  std::pair<Value, Value> convertedCopy(unsigned input, unsigned rowDim,
                                        int64_t rows, int64_t cols,
                                        Value dynamicRows);
  /// A 2-D TMA box of the element type in shared memory.
  MemRefType box(int64_t rows, int64_t cols) {
    return workgroupType({rows, cols}, elementType);
  }
  nvgpu::TensorMapDescriptorType tensorMap(MemRefType box) {
    return nvgpu::TensorMapDescriptorType::get(
        b.getContext(), box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
        nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
        nvgpu::TensorMapOOBKind::OOB_ZERO,
        nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  }
  /// A TMA descriptor of `view` (a 2-D buffer of the element type) for
  /// boxes of type `boxType`.
  Value descriptor(Value view, MemRefType boxType) {
    auto unranked = UnrankedMemRefType::get(elementType, /*memorySpace=*/0);
    return nvgpu::TmaCreateDescriptorOp::create(
        b, loc, tensorMap(boxType),
        memref::CastOp::create(b, loc, unranked, view),
        ValueRange{cst(boxType.getDimSize(0)), cst(boxType.getDimSize(1))});
  }
};

std::pair<Value, Value>
WgmmaKernelBuilder::convertedCopy(unsigned input, unsigned rowDim, int64_t rows,
                                  int64_t cols, Value dynamicRows) {
  MLIRContext *ctx = b.getContext();
  int64_t pitch = llvm::alignTo(cols, kRowAlignment);
  auto type = MemRefType::get({rows, pitch}, elementType);
  SmallVector<Value> sizes;
  if (dynamicRows)
    sizes.push_back(dynamicRows);
  Value buffer = gpu::AllocOp::create(b, loc, type, /*asyncToken=*/Type(),
                                      /*asyncDependencies=*/ValueRange(), sizes,
                                      /*symbolOperands=*/ValueRange(),
                                      /*hostShared=*/false)
                     .getMemref();
  // The padding columns stay as allocated: TMA reads the view, whose
  // extent is `cols`, and fills past it with zeros.
  Value view = buffer;
  if (pitch != cols) {
    SmallVector<OpFoldResult> offsets(2, b.getIndexAttr(0));
    SmallVector<OpFoldResult> extents{dynamicRows ? OpFoldResult(dynamicRows)
                                                  : b.getIndexAttr(rows),
                                      b.getIndexAttr(cols)};
    SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
    view = memref::SubViewOp::create(b, loc, buffer, offsets, extents, strides);
  }
  // The operand's map in the copy's loops (d0 along rows, d1 along
  // columns): the contraction's map with rowDim -> d0, the other -> d1.
  OpOperand *operand = c.op.getDpsInputOperand(input);
  AffineMap map = c.op.getMatchingIndexingMap(operand);
  SmallVector<AffineExpr> exprs;
  for (unsigned r = 0; r < map.getNumResults(); ++r)
    exprs.push_back(
        getAffineDimExpr(map.getDimPosition(r) == rowDim ? 0 : 1, ctx));
  AffineMap inputMap = AffineMap::get(2, 0, exprs, ctx);
  AffineMap outputMap = AffineMap::getMultiDimIdentityMap(2, ctx);
  SmallVector<utils::IteratorType> iterators(2,
                                             utils::IteratorType::parallel);
  linalg::GenericOp::create(
      b, loc, ValueRange{operand->get()}, ValueRange{view},
      ArrayRef<AffineMap>{inputMap, outputMap}, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        Value factor = replayCasts(nested, c, input, args[0]);
        Value rounded =
            arith::TruncFOp::create(nested, nestedLoc, elementType, factor);
        linalg::YieldOp::create(nested, nestedLoc, rounded);
      });
  return {view, buffer};
}

void WgmmaKernelBuilder::build() {
  linalg::LinalgOp op = c.op;
  MLIRContext *ctx = b.getContext();
  unsigned dimM = c.dims.m[0], dimN = c.dims.n[0], dimK = c.dims.k[0];
  SmallVector<int64_t> staticRanges = op.getStaticLoopRanges();
  int64_t sizeN = staticRanges[dimN], sizeK = staticRanges[dimK];
  int64_t steps = llvm::divideCeil(sizeK, kWgTileK);
  int64_t stages = std::min(kMaxStages, steps);

  // Host side. TMA copies bytes, so the factors first go to device buffers
  // of the element type in the layouts upstream's sm90 GEMM uses: A as
  // M x K and B as K x N, both row-major, their rows padded to 16 bytes.
  // TMA reads views of their true extents and fills the tiles past M, N and
  // K with zeros, so that any N and K (and the dynamic M) need no masks in
  // the main loop.
  b.setInsertionPoint(op);
  SmallVector<Range> ranges = op.createLoopRanges(b, loc);
  Value sizeM = getValueOrCreateConstantIndexOp(b, loc, ranges[dimM].size);
  auto [a, bufferA] =
      convertedCopy(/*input=*/0, dimM, ShapedType::kDynamic, sizeK, sizeM);
  auto [bt, bufferB] = convertedCopy(/*input=*/1, dimK, sizeK, sizeN, Value());
  MemRefType boxA = box(kWgTileM, kWgTileK);
  MemRefType boxB = box(kWgTileK, kWgTileN / 2);
  Value descA = descriptor(a, boxA);
  Value descB = descriptor(bt, boxB);

  // A block of two warpgroups per 128 x 128 tile of C. Shared memory: a
  // ring of `stages` stages, each A's box, then B's two boxes (each box at
  // a multiple of 1024 bytes, as the 128-byte swizzle needs); after the
  // main loop, the f32 accumulators over it; all of it from the first
  // 1024-byte boundary past the reserve for static shared memory.
  int64_t elementBytes = elementType.getWidth() / 8;
  int64_t bytesA = kWgTileM * kWgTileK * elementBytes;
  int64_t bytesBHalf = kWgTileK * (kWgTileN / 2) * elementBytes;
  int64_t stageBytes = bytesA + 2 * bytesBHalf;
  int64_t bytesAcc = kWgTileM * kWgTileN * 4;
  int64_t sharedBytes = std::max(stages * stageBytes, bytesAcc) +
                        kStaticReserve + kSwizzleAlignment;
  Value gridX = cst(llvm::divideCeil(sizeN, kWgTileN));
  Value gridY = arith::CeilDivUIOp::create(b, loc, sizeM, cst(kWgTileM));
  Value one = cst(1);
  auto launch = gpu::LaunchOp::create(
      b, loc, gridX, gridY, one, cst(kWarpgroups * kWarpgroupSize), one, one,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), sharedBytes));
  b.setInsertionPointToStart(&launch.getBody().front());
  Value shared = dynamicSharedMemory();
  // The tiles start at the first multiple of kSwizzleAlignment of the
  // shared window past kStaticReserve bytes of dynamic shared memory,
  // which the declaration aligns to 16 bytes only.
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, shared);
  Value aligned =
      mul(arith::DivUIOp::create(
              b, loc, add(address, cst(kStaticReserve + kSwizzleAlignment - 1)),
              cst(kSwizzleAlignment)),
          kSwizzleAlignment);
  Value tiles = arith::SubIOp::create(b, loc, aligned, address);
  auto view = [&](MemRefType type, Value offset) -> Value {
    return memref::ViewOp::create(b, loc, type, shared, add(tiles, offset),
                                  ValueRange{});
  };
  Value tid = launch.getThreadIds().x;
  Value warpgroup = arith::DivUIOp::create(b, loc, tid, cst(kWarpgroupSize));
  Value m0 = mul(launch.getBlockIds().y, kWgTileM);
  Value n0 = mul(launch.getBlockIds().x, kWgTileN);
  Value zero = cst(0);
  Value leader = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                       zero);

  // One mbarrier per stage, each initialised by thread 0 for its one
  // arrival; a stage's barrier completes a phase each time its tiles land.
  auto barrierType = nvgpu::MBarrierGroupType::get(
      ctx, gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup),
      /*num_barriers=*/stages);
  Value barriers = nvgpu::MBarrierCreateOp::create(b, loc, barrierType);
  // Thread 0 loads step `step` of K into stage `stage`: A's box and B's two
  // boxes, armed with their bytes on the stage's barrier (TMA counts whole
  // boxes, the zero-filled parts too). Coordinates innermost first.
  auto load = [&](Value step, Value stage) {
    Value k0 = mul(step, kWgTileK);
    Value base = mul(stage, stageBytes);
    nvgpu::MBarrierArriveExpectTxOp::create(b, loc, barriers, cst(stageBytes),
                                            stage, /*predicate=*/Value());
    nvgpu::TmaAsyncLoadOp::create(b, loc, view(boxA, base), barriers, descA,
                                  ValueRange{k0, m0}, stage,
                                  /*multicastMask=*/Value(),
                                  /*predicate=*/Value());
    nvgpu::TmaAsyncLoadOp::create(b, loc, view(boxB, add(base, cst(bytesA))),
                                  barriers, descB, ValueRange{n0, k0}, stage,
                                  Value(), Value());
    nvgpu::TmaAsyncLoadOp::create(
        b, loc, view(boxB, add(base, cst(bytesA + bytesBHalf))), barriers,
        descB, ValueRange{add(n0, cst(kWgTileN / 2)), k0}, stage, Value(),
        Value());
  };
  // The prologue: the first stages - 1 steps in flight.
  {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, leader,
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    for (int64_t s = 0; s < stages; ++s)
      nvgpu::MBarrierInitOp::create(b, loc, barriers, one, cst(s),
                                    /*predicate=*/Value());
    nvgpu::TmaPrefetchOp::create(b, loc, descA, /*predicate=*/Value());
    nvgpu::TmaPrefetchOp::create(b, loc, descB, /*predicate=*/Value());
    for (int64_t s = 0; s + 1 < stages; ++s)
      load(cst(s), cst(s));
  }

  auto accType = nvgpu::WarpgroupAccumulatorType::get(
      ctx, VectorType::get({kWarpgroupRows, kWgTileN}, b.getF32Type()));
  Value init = nvgpu::WarpgroupMmaInitAccumulatorOp::create(b, loc, accType);
  auto kLoop =
      scf::ForOp::create(b, loc, zero, cst(steps), one, ValueRange{init});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(kLoop.getBody());
    Value step = kLoop.getInductionVar();
    // Every warpgroup's wgmma of the previous step has completed (waitGroup
    // 0 below): its stage, (step - 1) % stages, is free, and thread 0 loads
    // step + stages - 1 into it.
    gpu::BarrierOp::create(b, loc);
    Value ahead = add(step, cst(stages - 1));
    Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, ahead,
                                       cst(steps));
    {
      auto ifOp = scf::IfOp::create(b, loc, TypeRange{},
                                    arith::AndIOp::create(b, loc, leader, more),
                                    /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      load(ahead, arith::RemUIOp::create(b, loc, ahead, cst(stages)));
    }
    // Stage step % stages completes its (step / stages)-th phase.
    Value stage = arith::RemUIOp::create(b, loc, step, cst(stages));
    Value phase = arith::DivUIOp::create(b, loc, step, cst(stages));
    Value parity = arith::TruncIOp::create(
        b, loc, b.getI1Type(),
        arith::IndexCastUIOp::create(b, loc, b.getI64Type(), phase));
    nvgpu::MBarrierTryWaitParityOp::create(b, loc, barriers, parity,
                                           cst(10000000), stage);
    // The warpgroup's 64 rows of A's box, and all of B's.
    Value base = mul(stage, stageBytes);
    Value tileA = view(box(kWarpgroupRows, kWgTileK),
                       add(base, mul(warpgroup, bytesA / kWarpgroups)));
    Value tileB = view(box(kWgTileK, kWgTileN), add(base, cst(bytesA)));
    Value descriptorA = nvgpu::WarpgroupGenerateDescriptorOp::create(
        b, loc,
        nvgpu::WarpgroupMatrixDescriptorType::get(
            ctx, cast<MemRefType>(tileA.getType())),
        tileA, descA);
    Value descriptorB = nvgpu::WarpgroupGenerateDescriptorOp::create(
        b, loc,
        nvgpu::WarpgroupMatrixDescriptorType::get(
            ctx, cast<MemRefType>(tileB.getType())),
        tileB, descB);
    // B is K x N with N contiguous: upstream's {transposeB}. waitGroup 0
    // (the op's default is 1): the stage must be read before the barrier
    // at the top of the next step frees it.
    Value acc = nvgpu::WarpgroupMmaOp::create(
        b, loc, accType, descriptorA, descriptorB, b.getI64IntegerAttr(0),
        /*transposeA=*/nullptr, b.getUnitAttr(),
        kLoop.getRegionIterArgs()[0]);
    scf::YieldOp::create(b, loc, acc);
  }

  // The accumulators to C: each warpgroup's to shared memory (over the
  // ring, once every warpgroup is done with it), then C += them (C = them
  // where C's zero fill was folded), one column per thread and each
  // warpgroup's half of the rows, rows past M and columns past N skipped,
  // the marked epilogue computed on each element stored.
  gpu::BarrierOp::create(b, loc);
  MemRefType accTile =
      workgroupType({kWarpgroupRows, kWgTileN}, b.getF32Type());
  Value smemAcc = view(accTile, mul(warpgroup, kWarpgroupRows * kWgTileN * 4));
  nvgpu::WarpgroupMmaStoreOp::create(b, loc, kLoop.getResult(0), smemAcc);
  gpu::BarrierOp::create(b, loc);
  Value column = arith::RemUIOp::create(b, loc, tid, cst(kWgTileN));
  Value n = add(n0, column);
  Value firstRow = add(m0, mul(warpgroup, kWarpgroupRows));
  Value columnInside = less(n, cst(sizeN));
  auto rows = scf::ForOp::create(b, loc, zero, cst(kWarpgroupRows), one);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(rows.getBody());
    Value row = rows.getInductionVar();
    Value m = add(firstRow, row);
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{},
                                  both(columnInside, less(m, sizeM)),
                                  /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    OpOperand *out = op.getDpsInitOperand(0);
    AffineMap outMap = op.getMatchingIndexingMap(out);
    SmallVector<Value> indices;
    for (unsigned r = 0; r < outMap.getNumResults(); ++r)
      indices.push_back(outMap.getDimPosition(r) == dimM ? m : n);
    Value value =
        memref::LoadOp::create(b, loc, smemAcc, ValueRange{row, column});
    if (!outZero)
      value = arith::AddFOp::create(
          b, loc, memref::LoadOp::create(b, loc, out->get(), indices), value);
    memref::StoreOp::create(b, loc, value, out->get(), indices);
    if (epilogue)
      switchyard::buildEpilogue(b, epilogue.getLoc(), epilogue, out->get(),
                                indices, value);
  }
  gpu::TerminatorOp::create(b, loc);

  b.setInsertionPointAfter(launch);
  gpu::DeallocOp::create(b, loc, /*asyncToken=*/Type(), ValueRange(), bufferA);
  gpu::DeallocOp::create(b, loc, /*asyncToken=*/Type(), ValueRange(), bufferB);
}
} // namespace

namespace mlir::switchyard::tensor_cores {

bool fitsWgmma(Contraction &c) {
  if (!fitsTensorCores(c) || !c.dims.batch.empty())
    return false;
  SmallVector<int64_t> ranges = c.op.getStaticLoopRanges();
  return !ShapedType::isDynamic(ranges[c.dims.n[0]]) &&
         !ShapedType::isDynamic(ranges[c.dims.k[0]]);
}

void buildWgmmaKernel(RewriterBase &rewriter, Contraction &c,
                      FloatType elementType, bool outZero,
                      linalg::GenericOp epilogue) {
  WgmmaKernelBuilder(rewriter, c, elementType, outZero, epilogue).build();
}

} // namespace mlir::switchyard::tensor_cores
