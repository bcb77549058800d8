//===- Wgmma.cpp - the wgmma matmul kernel (sm_90a) -----------------------===//
//
// The wgmma route of switchyard-gpu-tensor-core-matmul (its `wgmma` option,
// sm_90a): a contraction without batch dimension whose N and K are static
// multiples of the tile becomes a kernel in which one warpgroup of 128
// threads computes a 64 x 128 tile of C. The host first copies the factors,
// rounded to the element type, to device buffers in the layouts TMA loads
// (A as M x K, B as K x N); the kernel then loads 64 of K per step by TMA
// into 128-byte swizzled shared boxes, waits on an mbarrier and issues
// wgmma m64n128k16 on descriptors of the boxes, and finally adds the
// accumulators to C through shared memory.
//
//===----------------------------------------------------------------------===//

#include "TensorCoreKernels.h"

#include "lib/Codegen/Common/Contractions.h"

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
/// The wgmma tile (sm_90a): one warpgroup of 128 threads computes a
/// kWgTileM x kWgTileN tile of C, kWgTileK of K per TMA load. The tiles are
/// upstream's (mlir/test/Integration/GPU/CUDA/sm90/
/// gemm_f32_f16_f16_128x128x128.mlir) with M halved: A is one 64 x 64 box,
/// B (K x N, N contiguous) two 64 x 64 boxes, all with the 128-byte swizzle;
/// wgmma m64n128k16.
constexpr int64_t kWgTileM = 64;
constexpr int64_t kWgTileN = 128;
constexpr int64_t kWgTileK = 64;
constexpr int64_t kWarpgroupSize = 128;

/// Builds the wgmma + TMA kernel of one contraction (sm_90a).
class WgmmaKernelBuilder : private KernelBuilderBase {
public:
  WgmmaKernelBuilder(RewriterBase &rewriter, Contraction &c,
                     FloatType elementType)
      : KernelBuilderBase(rewriter, c.op.getLoc(), elementType), c(c) {}

  void build();

private:
  Contraction &c;
  /// A device buffer of the element type with the given shape (dimension 0
  /// of size `dynamicSize` where it is dynamic), filled with input `input`
  /// of the contraction read through the body's casts and rounded: loop
  /// dimension `rowDim` along the buffer's rows, `colDim` along its columns.
  Value convertedCopy(unsigned input, unsigned rowDim, unsigned colDim,
                      ArrayRef<int64_t> shape, ValueRange dynamicSizes);
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
};

Value WgmmaKernelBuilder::convertedCopy(unsigned input, unsigned rowDim,
                                        unsigned colDim,
                                        ArrayRef<int64_t> shape,
                                        ValueRange dynamicSizes) {
  MLIRContext *ctx = b.getContext();
  auto type = MemRefType::get(shape, elementType);
  Value buffer = gpu::AllocOp::create(b, loc, type, /*asyncToken=*/Type(),
                                      /*asyncDependencies=*/ValueRange(),
                                      dynamicSizes,
                                      /*symbolOperands=*/ValueRange(),
                                      /*hostShared=*/false)
                     .getMemref();
  // The operand's map in the copy's loops (d0 along rows, d1 along
  // columns): the contraction's map with rowDim -> d0, colDim -> d1.
  OpOperand *operand = c.op.getDpsInputOperand(input);
  AffineMap map = c.op.getMatchingIndexingMap(operand);
  SmallVector<AffineExpr> exprs;
  for (unsigned r = 0; r < map.getNumResults(); ++r)
    exprs.push_back(getAffineDimExpr(map.getDimPosition(r) == rowDim ? 0 : 1,
                                     ctx));
  (void)colDim;
  AffineMap inputMap = AffineMap::get(2, 0, exprs, ctx);
  AffineMap outputMap = AffineMap::getMultiDimIdentityMap(2, ctx);
  SmallVector<utils::IteratorType> iterators(2,
                                             utils::IteratorType::parallel);
  linalg::GenericOp::create(
      b, loc, ValueRange{operand->get()}, ValueRange{buffer},
      ArrayRef<AffineMap>{inputMap, outputMap}, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        Value factor = replayCasts(nested, c, input, args[0]);
        Value rounded =
            arith::TruncFOp::create(nested, nestedLoc, elementType, factor);
        linalg::YieldOp::create(nested, nestedLoc, rounded);
      });
  return buffer;
}

void WgmmaKernelBuilder::build() {
  linalg::LinalgOp op = c.op;
  MLIRContext *ctx = b.getContext();
  unsigned dimM = c.dims.m[0], dimN = c.dims.n[0], dimK = c.dims.k[0];
  SmallVector<int64_t> staticRanges = op.getStaticLoopRanges();
  int64_t sizeN = staticRanges[dimN], sizeK = staticRanges[dimK];

  // Host side. TMA copies bytes, so the factors first go to device buffers
  // of the element type in the layouts upstream's sm90 GEMM uses: A as
  // M x K and B as K x N, both row-major. cuMemAlloc aligns the buffers to
  // 256 bytes and their rows are multiples of 128 bytes, as TMA needs.
  b.setInsertionPoint(op);
  SmallVector<Range> ranges = op.createLoopRanges(b, loc);
  Value sizeM = getValueOrCreateConstantIndexOp(b, loc, ranges[dimM].size);
  Value a = convertedCopy(/*input=*/0, dimM, dimK,
                          {ShapedType::kDynamic, sizeK}, ValueRange{sizeM});
  Value bt = convertedCopy(/*input=*/1, dimK, dimN, {sizeK, sizeN},
                           ValueRange{});
  MemRefType boxA = box(kWgTileM, kWgTileK);
  MemRefType boxB = box(kWgTileK, kWgTileN / 2);
  auto unranked = UnrankedMemRefType::get(elementType, /*memorySpace=*/0);
  Value descA = nvgpu::TmaCreateDescriptorOp::create(
      b, loc, tensorMap(boxA), memref::CastOp::create(b, loc, unranked, a),
      ValueRange{cst(kWgTileM), cst(kWgTileK)});
  Value descB = nvgpu::TmaCreateDescriptorOp::create(
      b, loc, tensorMap(boxB), memref::CastOp::create(b, loc, unranked, bt),
      ValueRange{cst(kWgTileK), cst(kWgTileN / 2)});

  // One warpgroup per 64 x 128 tile of C. Shared memory: A's box at 0, B's
  // two boxes at 8 KiB and 16 KiB (each 1024-byte aligned relative to the
  // dynamic shared memory, as the 128-byte swizzle needs), then, after the
  // K loop, the f32 accumulators over all of it (32 KiB).
  int64_t elementBytes = elementType.getWidth() / 8;
  int64_t bytesA = kWgTileM * kWgTileK * elementBytes;
  int64_t bytesBHalf = kWgTileK * (kWgTileN / 2) * elementBytes;
  int64_t bytesAcc = kWgTileM * kWgTileN * 4;
  int64_t sharedBytes = std::max(bytesA + 2 * bytesBHalf, bytesAcc);
  Value gridX = cst(sizeN / kWgTileN);
  Value gridY = arith::CeilDivUIOp::create(b, loc, sizeM, cst(kWgTileM));
  Value one = cst(1);
  auto launch = gpu::LaunchOp::create(
      b, loc, gridX, gridY, one, cst(kWarpgroupSize), one, one,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), sharedBytes));
  b.setInsertionPointToStart(&launch.getBody().front());
  Value shared = dynamicSharedMemory();
  auto view = [&](MemRefType type, int64_t offset) {
    return sharedView(shared, type, offset);
  };
  Value smemA = view(boxA, 0);
  Value smemB0 = view(boxB, bytesA);
  Value smemB1 = view(boxB, bytesA + bytesBHalf);
  Value smemB = view(box(kWgTileK, kWgTileN), bytesA);
  Value tid = launch.getThreadIds().x;
  Value m0 = mul(launch.getBlockIds().y, kWgTileM);
  Value n0 = mul(launch.getBlockIds().x, kWgTileN);
  Value zero = cst(0);
  Value leader = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                       zero);

  // One mbarrier, initialised by thread 0 for its one arrival.
  auto barrierType = nvgpu::MBarrierGroupType::get(
      ctx, gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup),
      /*num_barriers=*/1);
  Value barrier = nvgpu::MBarrierCreateOp::create(b, loc, barrierType);
  {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, leader,
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    nvgpu::MBarrierInitOp::create(b, loc, barrier, one, zero,
                                  /*predicate=*/Value());
    nvgpu::TmaPrefetchOp::create(b, loc, descA, /*predicate=*/Value());
    nvgpu::TmaPrefetchOp::create(b, loc, descB, /*predicate=*/Value());
  }
  gpu::BarrierOp::create(b, loc);

  auto accType = nvgpu::WarpgroupAccumulatorType::get(
      ctx, VectorType::get({kWgTileM, kWgTileN}, b.getF32Type()));
  Value init = nvgpu::WarpgroupMmaInitAccumulatorOp::create(b, loc, accType);
  auto kLoop = scf::ForOp::create(b, loc, zero, cst(sizeK / kWgTileK), one,
                                  ValueRange{init});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(kLoop.getBody());
    Value step = kLoop.getInductionVar();
    Value k0 = mul(step, kWgTileK);
    // Every thread's wgmma of the previous step has completed (waitGroup
    // 0 below) before thread 0 lets TMA overwrite the tiles.
    gpu::BarrierOp::create(b, loc);
    {
      auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, leader,
                                    /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      nvgpu::MBarrierArriveExpectTxOp::create(
          b, loc, barrier, cst(bytesA + 2 * bytesBHalf), zero,
          /*predicate=*/Value());
      // TMA coordinates are innermost first: (column, row).
      nvgpu::TmaAsyncLoadOp::create(b, loc, smemA, barrier, descA,
                                    ValueRange{k0, m0}, zero,
                                    /*multicastMask=*/Value(),
                                    /*predicate=*/Value());
      nvgpu::TmaAsyncLoadOp::create(b, loc, smemB0, barrier, descB,
                                    ValueRange{n0, k0}, zero, Value(),
                                    Value());
      nvgpu::TmaAsyncLoadOp::create(b, loc, smemB1, barrier, descB,
                                    ValueRange{add(n0, cst(kWgTileN / 2)), k0},
                                    zero, Value(), Value());
    }
    // The barrier completes one phase per step: wait for parity step % 2.
    Value parity = arith::TruncIOp::create(
        b, loc, b.getI1Type(),
        arith::IndexCastUIOp::create(b, loc, b.getI64Type(), step));
    nvgpu::MBarrierTryWaitParityOp::create(b, loc, barrier, parity,
                                           cst(10000000), zero);
    Value descriptorA = nvgpu::WarpgroupGenerateDescriptorOp::create(
        b, loc,
        nvgpu::WarpgroupMatrixDescriptorType::get(
            ctx, cast<MemRefType>(smemA.getType())),
        smemA, descA);
    Value descriptorB = nvgpu::WarpgroupGenerateDescriptorOp::create(
        b, loc,
        nvgpu::WarpgroupMatrixDescriptorType::get(
            ctx, cast<MemRefType>(smemB.getType())),
        smemB, descB);
    // B is K x N with N contiguous: upstream's {transposeB}. waitGroup 0
    // (the op's default is 1): with one stage, every wgmma of this step
    // must be done before the next step's TMA overwrites the tiles.
    Value acc = nvgpu::WarpgroupMmaOp::create(
        b, loc, accType, descriptorA, descriptorB, b.getI64IntegerAttr(0),
        /*transposeA=*/nullptr, b.getUnitAttr(),
        kLoop.getRegionIterArgs()[0]);
    scf::YieldOp::create(b, loc, acc);
  }

  // Epilogue: the accumulators to shared memory (over the tiles, once every
  // thread is done with them), then C += them, one column per thread, rows
  // past M skipped.
  gpu::BarrierOp::create(b, loc);
  Value smemAcc = view(workgroupType({kWgTileM, kWgTileN}, b.getF32Type()), 0);
  nvgpu::WarpgroupMmaStoreOp::create(b, loc, kLoop.getResult(0), smemAcc);
  gpu::BarrierOp::create(b, loc);
  auto rows = scf::ForOp::create(b, loc, zero, cst(kWgTileM), one);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(rows.getBody());
    Value row = rows.getInductionVar();
    Value m = add(m0, row);
    Value inBounds =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, m, sizeM);
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, inBounds,
                                  /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    OpOperand *out = op.getDpsInitOperand(0);
    AffineMap outMap = op.getMatchingIndexingMap(out);
    SmallVector<Value> indices;
    Value n = add(n0, tid);
    for (unsigned r = 0; r < outMap.getNumResults(); ++r)
      indices.push_back(outMap.getDimPosition(r) == dimM ? m : n);
    Value old = memref::LoadOp::create(b, loc, out->get(), indices);
    Value sum = memref::LoadOp::create(b, loc, smemAcc, ValueRange{row, tid});
    memref::StoreOp::create(b, loc,
                            Value(arith::AddFOp::create(b, loc, old, sum)),
                            out->get(), indices);
  }
  gpu::TerminatorOp::create(b, loc);

  b.setInsertionPointAfter(launch);
  gpu::DeallocOp::create(b, loc, /*asyncToken=*/Type(), ValueRange(), a);
  gpu::DeallocOp::create(b, loc, /*asyncToken=*/Type(), ValueRange(), bt);
}
} // namespace

namespace mlir::switchyard::tensor_cores {

bool fitsWgmma(Contraction &c) {
  if (!fitsTensorCores(c) || !c.dims.batch.empty())
    return false;
  SmallVector<int64_t> ranges = c.op.getStaticLoopRanges();
  int64_t n = ranges[c.dims.n[0]], k = ranges[c.dims.k[0]];
  return !ShapedType::isDynamic(n) && !ShapedType::isDynamic(k) &&
         n % kWgTileN == 0 && k % kWgTileK == 0;
}

void buildWgmmaKernel(RewriterBase &rewriter, Contraction &c,
                      FloatType elementType) {
  WgmmaKernelBuilder(rewriter, c, elementType).build();
}

} // namespace mlir::switchyard::tensor_cores
