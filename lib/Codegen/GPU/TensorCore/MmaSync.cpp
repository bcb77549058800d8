//===- MmaSync.cpp - the mma.sync matmul kernel ---------------------------===//
//
// The mma.sync m16n8k16 builders of switchyard-gpu-tensor-core-matmul (sm_80
// and newer). First the members of KernelBuilderBase that issue mma.sync
// and ldmatrix and give upstream's fragment maps, which the attention
// kernels use too. Then the matmul kernel of an MmaProblem (sizes, the K
// range of a block, the operands' loads): each block of 2 x 2 warps
// computes a 64 x 64 tile of the f32 result (each warp 32 x 32, eight
// mma.sync per 16 of K), K staged 32 at a time through padded shared tiles
// with the next step's loads in flight. Grids of few tiles over a long K
// (weight gradients: K is the token count) split K into parts written to a
// buffer of partial results; the last block of a tile to finish (a counter
// per tile) adds them to C in part order.
// Last, the MmaProblem of a contraction; the grouped expert kernels make
// theirs in GroupedKernels.cpp.
//
// The fragment layouts are not derived here: the lane -> ldmatrix row
// address map and the lane/value -> accumulator element map are upstream's
// (mlir/Dialect/NVGPU/Utils/MMAUtils.h, the maps convert-vector-to-gpu
// uses, exercised by upstream's sm80 integration tests on hardware).
//
//===----------------------------------------------------------------------===//

#include "TensorCoreKernels.h"

#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/GPU/LastBlock.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/NVGPU/Utils/MMAUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

using namespace mlir::switchyard::tensor_cores;

//===----------------------------------------------------------------------===//
// mma.sync and ldmatrix
//===----------------------------------------------------------------------===//

SmallVector<Value> KernelBuilderBase::mma(Value a, Value bFrag,
                                          ValueRange acc) {
  Type f32 = b.getF32Type();
  if (elementType.isF16()) {
    // Upstream's nvgpu.mma.sync lowering handles f16 x f16 -> f32.
    auto accType = VectorType::get({2, 2}, f32);
    Value cVec = vector::FromElementsOp::create(b, loc, accType, acc);
    Value d = nvgpu::MmaSyncOp::create(
        b, loc, a, bFrag, cVec, ArrayRef<int64_t>{kTileM, kTileN, kTileK});
    SmallVector<Value> out;
    for (int64_t v = 0; v < kAccValues; ++v)
      out.push_back(vector::ExtractOp::create(b, loc, d,
                                              ArrayRef<int64_t>{v / 2, v % 2}));
    return out;
  }
  // bf16: convert-nvgpu-to-nvvm (LLVM 22) cannot type bf16 multiplicands,
  // so issue nvvm.mma.sync on the i32 registers (two bf16 each) that
  // nvgpu.ldmatrix filled: row r of the fragment vector is register r.
  auto registers = [&](Value fragment) {
    auto type = cast<VectorType>(fragment.getType());
    SmallVector<Value> regs;
    for (int64_t r = 0; r < type.getDimSize(0); ++r) {
      Value pair = vector::ExtractOp::create(b, loc, fragment, r);
      Value word = vector::BitCastOp::create(
          b, loc, VectorType::get({1}, b.getI32Type()), pair);
      regs.push_back(vector::ExtractOp::create(b, loc, word, 0));
    }
    return regs;
  };
  auto resultType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  Value d = NVVM::MmaOp::create(
      b, loc, resultType, registers(a), registers(bFrag), acc,
      {kTileM, kTileN, kTileK}, /*b1Op=*/std::nullopt,
      /*intOverflow=*/std::nullopt,
      std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16, NVVM::MMATypes::bf16},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> out;
  for (int64_t v = 0; v < kAccValues; ++v)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, d, v));
  return out;
}

Value KernelBuilderBase::loadA(const FragmentMaps &maps, Value tile, Value lane,
                               Value row, Value col) {
  return nvgpu::LdMatrixOp::create(
      b, loc, VectorType::get({4, 2}, elementType), tile,
      ValueRange{add(row, apply(maps.aLd, 0, lane)),
                 add(col, apply(maps.aLd, 1, lane))},
      /*transpose=*/false, maps.aTiles);
}

Value KernelBuilderBase::loadB(const FragmentMaps &maps, Value tile,
                               Value lane16, Value row, Value col) {
  return nvgpu::LdMatrixOp::create(
      b, loc, VectorType::get({2, 2}, elementType), tile,
      ValueRange{add(row, apply(maps.bLd, 0, lane16)),
                 add(col, apply(maps.bLd, 1, lane16))},
      /*transpose=*/false, maps.bTiles);
}

Value KernelBuilderBase::loadBTransposed(Value tile, Value lane16, Value k,
                                         Value n) {
  return nvgpu::LdMatrixOp::create(b, loc, VectorType::get({2, 2}, elementType),
                                   tile, ValueRange{add(k, lane16), n},
                                   /*transpose=*/true, /*numTiles=*/2);
}

FragmentMaps KernelBuilderBase::fragmentMaps() {
  // Upstream's maps (MMAUtils): lane and value id to the (row, col) of the
  // 16 x 8 f32 accumulator element, lane to the row address of ldmatrix.
  // They are computed for f16 fragments; bf16 has the same 16-bit layout.
  Type f16 = b.getF16Type();
  nvgpu::WarpMatrixInfo accInfo{
      VectorType::get({kTileM, kTileN}, b.getF32Type()),
      nvgpu::MatMulOperandRole::C};
  nvgpu::WarpMatrixInfo aInfo{VectorType::get({kTileM, kTileK}, f16),
                              nvgpu::MatMulOperandRole::A};
  nvgpu::WarpMatrixInfo bInfo{VectorType::get({kTileN, kTileK}, f16),
                              nvgpu::MatMulOperandRole::B};
  FailureOr<AffineMap> accMap =
      nvgpu::getLaneIdAndValueIdToOperandCoord(b, loc, accInfo);
  FailureOr<nvgpu::LdMatrixParams> aParams =
      nvgpu::getLdMatrixParams(aInfo, /*transpose=*/false);
  FailureOr<nvgpu::LdMatrixParams> bParams =
      nvgpu::getLdMatrixParams(bInfo, /*transpose=*/false);
  assert(succeeded(accMap) && succeeded(aParams) && succeeded(bParams) &&
         "MMAUtils handles f16 x f16 -> f32 m16n8k16");
  FailureOr<AffineMap> aLdMap =
      nvgpu::getLaneIdToLdMatrixMatrixCoord(b, loc, *aParams);
  FailureOr<AffineMap> bLdMap =
      nvgpu::getLaneIdToLdMatrixMatrixCoord(b, loc, *bParams);
  assert(succeeded(aLdMap) && succeeded(bLdMap) && "ldmatrix x4 / x2 maps");
  return {*accMap, *aLdMap, *bLdMap, aParams->numTiles, bParams->numTiles};
}

//===----------------------------------------------------------------------===//
// The matmul kernel
//===----------------------------------------------------------------------===//

namespace mlir::switchyard::tensor_cores {

bool fitsTensorCores(Contraction &c) {
  const linalg::ContractionDimensions &d = c.dims;
  if (d.m.size() != 1 || d.n.size() != 1 || d.k.size() != 1 ||
      d.batch.size() > 1)
    return false;
  if (c.op.getNumLoops() != 3 + d.batch.size())
    return false;
  return llvm::all_of(c.op.getIndexingMapsArray(), [](AffineMap map) {
    return map.isProjectedPermutation(/*allowZeroInResults=*/false);
  });
}

Value splitCount(OpBuilder &b, Location loc, const SplitKPolicy &policy,
                 std::optional<int64_t> m, std::optional<int64_t> n,
                 std::optional<int64_t> count,
                 function_ref<Value()> kPerBatch) {
  if (policy.targetBlocks <= 0 || !m || !n || !count)
    return {};
  int64_t tiles = llvm::divideCeil(*m, kBlockM) *
                  llvm::divideCeil(*n, kBlockN) * std::max<int64_t>(*count, 1);
  if (tiles <= 0)
    return {};
  int64_t most = llvm::divideCeil(policy.targetBlocks, tiles);
  if (most < 2)
    return {};
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value parts = arith::DivUIOp::create(b, loc, kPerBatch(),
                                       index(std::max<int64_t>(policy.minK, 1)));
  parts = arith::MinUIOp::create(b, loc, parts, index(most));
  return arith::MaxUIOp::create(b, loc, parts, index(1));
}

} // namespace mlir::switchyard::tensor_cores

namespace {
/// Builds one mma.sync kernel for a problem, in place of the op at the
/// builder's insertion point: blocks of 2 x 2 warps per 64 x 64 tile of C,
/// K in steps of 32 staged through padded shared tiles, the next step's
/// factors loaded into registers while the tensor cores work on the
/// current one.
class KernelBuilder : private KernelBuilderBase {
public:
  KernelBuilder(RewriterBase &rewriter, Operation *op, FloatType elementType)
      : KernelBuilderBase(rewriter, op->getLoc(), elementType) {}

  void build(const MmaProblem &problem);

private:
  /// Values of `types` built by `then` where the uniform `cond` holds,
  /// else `otherwise` (zeros where empty).
  SmallVector<Value> ifElse(Value cond, TypeRange types,
                            function_ref<SmallVector<Value>()> then,
                            ValueRange otherwise = {});
  /// The thread's factors of the K step from `k0` of one operand (rows
  /// from `rowStart`), zero outside the problem; k0 < kEnd, and the
  /// block's first row is inside it. Where the step of the block's tile
  /// lies inside the problem and `aligned` (runsAligned, inside the
  /// kernel) holds, by one vector load per run.
  SmallVector<Value> fetch(const MmaProblem::Operand &operand, Value aligned,
                           Value rowStart, Value rowSize, int64_t rows,
                           bool rowsContiguous, Value k0);
  /// The factor (or run of factors) of `operand` at (row, k) from its raw
  /// element(s), before rounding.
  Value castAndScale(const MmaProblem::Operand &operand, Value raw, Value row,
                     Value k) {
    Value factor = operand.cast(b, raw);
    return operand.scale ? operand.scale(b, batch, row, k, factor) : factor;
  }
  /// Stores what `fetch` returned into the shared tile.
  void store(ValueRange factors, Value tile, int64_t rows, bool rowsContiguous);
  /// At the end of a split-K kernel whose block has stored its part of the
  /// tile at (m0, n0) in `partial`: counts the block in `counters` (one per
  /// tile), and the last of the tile's blocks adds the parts of each
  /// element of the tile inside C to C in part order (none where the tile
  /// is not `active`).
  void addPartsInLastBlock(const MmaProblem &problem, Value shared,
                           gpu::LaunchOp launch, Value partial, Value counters,
                           Value m0, Value n0, Value active);
  /// Stores the final `value` of C[batch, m, n] and computes the problem's
  /// epilogue on it.
  void storeResult(const MmaProblem &problem, Value batch, Value m, Value n,
                   Value value);

  // Inside the kernel: the thread, its lane, the batch, the end of the
  // block's K range.
  Value tid, lane, batch, kEnd;
};

SmallVector<Value> KernelBuilder::ifElse(Value cond, TypeRange types,
                                         function_ref<SmallVector<Value>()> then,
                                         ValueRange otherwise) {
  auto ifOp = scf::IfOp::create(b, loc, types, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loc, then());
  b.setInsertionPointToStart(ifOp.elseBlock());
  SmallVector<Value> values(otherwise);
  if (values.empty())
    for (Type type : types)
      values.push_back(zeroOf(type));
  scf::YieldOp::create(b, loc, values);
  return ifOp.getResults();
}

SmallVector<Value> KernelBuilder::fetch(const MmaProblem::Operand &operand,
                                        Value aligned, Value rowStart,
                                        Value rowSize, int64_t rows,
                                        bool rowsContiguous, Value k0) {
  int64_t count = rows * kBlockK / kBlockThreads;
  // Element by element: every thread loads (no branch per element: the
  // loads can all be in flight at once), at the nearest element inside
  // the problem, and keeps zero where it was outside.
  auto elements = [&] {
    SmallVector<Value> factors;
    for (int64_t index = 0; index < count; ++index) {
      auto [row, col] = stagedElement(tid, kBlockThreads, index, rows, kBlockK,
                                      rowsContiguous);
      Value rowIndex = add(rowStart, row);
      Value kIndex = add(k0, col);
      Value inBounds = both(less(rowIndex, rowSize), less(kIndex, kEnd));
      Value clampedRow = minIndex(rowIndex, sub1(rowSize));
      Value clampedK = minIndex(kIndex, sub1(kEnd));
      Value raw = memref::LoadOp::create(
          b, loc, operand.buffer,
          operand.indices(b, batch, clampedRow, clampedK));
      factors.push_back(arith::SelectOp::create(
          b, loc, inBounds,
          roundedFactor(castAndScale(operand, raw, clampedRow, clampedK)),
          zeroOf(elementType)));
    }
    return factors;
  };
  if (!aligned)
    return elements();
  // Run by run, where the block's rows and this K step lie inside the
  // problem (the same for the whole block) and each run is aligned.
  Value inside = both(aligned, both(less(sub1(add(rowStart, cst(rows))), rowSize),
                                    less(sub1(add(k0, cst(kBlockK))), kEnd)));
  // Runs along K start at k0 + a multiple of kRun.
  if (!rowsContiguous)
    inside = both(inside, multipleOf(k0, kRun));
  SmallVector<Type> types(count, elementType);
  auto ifOp = scf::IfOp::create(b, loc, types, inside, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  SmallVector<Value> factors;
  for (int64_t index = 0; index < count; index += kRun) {
    // Element index + e of the thread is element e of the run.
    auto [row, col] =
        stagedElement(tid, kBlockThreads, index, rows, kBlockK, rowsContiguous);
    Value runRow = add(rowStart, row), runK = add(k0, col);
    Value run =
        loadRun(operand.buffer, operand.indices(b, batch, runRow, runK));
    // Rounded as a vector (two elements per conversion on sm_80+).
    Value rounded = roundedFactor(castAndScale(operand, run, runRow, runK));
    for (int64_t e = 0; e < kRun; ++e)
      factors.push_back(vector::ExtractOp::create(b, loc, rounded, e));
  }
  scf::YieldOp::create(b, loc, factors);
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, loc, elements());
  return ifOp.getResults();
}

void KernelBuilder::store(ValueRange factors, Value tile, int64_t rows,
                          bool rowsContiguous) {
  for (auto [index, factor] : llvm::enumerate(factors)) {
    auto [row, col] =
        stagedElement(tid, kBlockThreads, index, rows, kBlockK, rowsContiguous);
    memref::StoreOp::create(b, loc, factor, tile, ValueRange{row, col});
  }
}

void KernelBuilder::build(const MmaProblem &problem) {
  // Host side: a grid of one block per kBlockM x kBlockN tile of C, per
  // batch.
  Value sizeM = problem.sizeM, sizeN = problem.sizeN;
  Value batches = problem.batches;
  Value gridX = arith::CeilDivUIOp::create(b, loc, sizeN, cst(kBlockN));
  Value gridY = arith::CeilDivUIOp::create(b, loc, sizeM, cst(kBlockM));
  MemRefType tileA = workgroupType({kBlockM, kSmemRow}, elementType);
  MemRefType tileB = workgroupType({kBlockN, kSmemRow}, elementType);
  // The tiles live in dynamic shared memory, which convert-gpu-to-nvvm
  // aligns to 16 bytes (NVVM::kSharedMemoryAlignmentBit); workgroup
  // attributions would only get the element's alignment (2 bytes in LLVM
  // 22), and ldmatrix needs 16-byte aligned row addresses. The tiles' rows
  // are 80 bytes and tile B starts at byte 5120, so every row is aligned.
  // (Upstream lowers gpu.dynamic_shared_memory to an internal zero-sized
  // .shared global, as in its sm90 integration tests: ptxas reports 1 byte
  // of static shared memory and the tiles lie in the dynamic bytes after
  // it. Nothing else in the kernel uses shared memory.)
  int64_t bytesA = kBlockM * kSmemRow * elementType.getWidth() / 8;
  int64_t bytesB = kBlockN * kSmemRow * elementType.getWidth() / 8;
  Value sharedBytes =
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), bytesA + bytesB);
  Value one = cst(1);
  Value splits = problem.splits;
  // Split-K: the partial results, [parts, batches, M, N].
  Value partial, counters;
  if (splits) {
    auto type = MemRefType::get(SmallVector<int64_t>(4, ShapedType::kDynamic),
                                b.getF32Type());
    partial = gpu::AllocOp::create(b, loc, type, /*asyncToken=*/Type(),
                                   /*asyncDependencies=*/ValueRange(),
                                   ValueRange{splits, batches, sizeM, sizeN},
                                   /*symbolOperands=*/ValueRange())
                  .getMemref();
    // How many of each tile's parts are done, from zero (a fill that
    // depends on nothing: switchyard-gpu-merge-launches runs it with an
    // earlier kernel).
    Type i32 = b.getI32Type();
    auto countersType =
        MemRefType::get(SmallVector<int64_t>(3, ShapedType::kDynamic), i32);
    counters = gpu::AllocOp::create(b, loc, countersType,
                                    /*asyncToken=*/Type(),
                                    /*asyncDependencies=*/ValueRange(),
                                    ValueRange{batches, gridY, gridX},
                                    /*symbolOperands=*/ValueRange())
                   .getMemref();
    linalg::FillOp::create(
        b, loc, ValueRange{arith::ConstantIntOp::create(b, loc, i32, 0)},
        ValueRange{counters});
  }
  auto aligned = [&](const MmaProblem::Operand &operand) {
    return operand.runsInLastDim ? runsAligned(operand.buffer) : Value();
  };
  Value alignedA = aligned(problem.operandA);
  Value alignedB = aligned(problem.operandB);
  Value gridZ =
      splits ? arith::MulIOp::create(b, loc, batches, splits).getResult()
             : batches;
  auto launch = gpu::LaunchOp::create(
      b, loc, gridX, gridY, gridZ, cst(kBlockThreads), one, one, sharedBytes);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value shared = dynamicSharedMemory();
  Value smemA = sharedView(shared, tileA, 0);
  Value smemB = sharedView(shared, tileB, bytesA);
  tid = launch.getThreadIds().x;
  lane = arith::RemUIOp::create(b, loc, tid, cst(kWarpLanes));
  Value warp = arith::DivUIOp::create(b, loc, tid, cst(kWarpLanes));
  // The warp's 32 x 32 of the block tile: its first row and column.
  Value warpRow = mul(arith::DivUIOp::create(b, loc, warp, cst(kWarpsN)),
                      kWarpMTiles * kTileM);
  Value warpCol = mul(arith::RemUIOp::create(b, loc, warp, cst(kWarpsN)),
                      kWarpNTiles * kTileN);
  batch = launch.getBlockIds().z;
  Value part;
  if (splits) {
    part = arith::RemUIOp::create(b, loc, batch, splits);
    batch = arith::DivUIOp::create(b, loc, batch, splits);
  }
  Value m0 = mul(launch.getBlockIds().y, kBlockM);
  Value n0 = mul(launch.getBlockIds().x, kBlockN);
  MmaProblem::Range range = problem.kRange(b, batch, m0);
  if (splits) {
    // This part's whole K steps: [begin + part * chunk, + chunk), cut at
    // the range's end (a part past it runs no step).
    Value length = arith::SubIOp::create(b, loc, range.end, range.begin);
    Value chunk = arith::CeilDivUIOp::create(b, loc, length, splits);
    chunk = mul(arith::CeilDivUIOp::create(b, loc, chunk, cst(kBlockK)),
                kBlockK);
    Value begin = minIndex(
        add(range.begin, arith::MulIOp::create(b, loc, part, chunk)),
        range.end);
    range.end = minIndex(add(begin, chunk), range.end);
    range.begin = begin;
  }
  // An inactive block runs no K step and stores nothing.
  bool alwaysActive = matchPattern(range.active, m_One());
  kEnd = alwaysActive ? range.end
                      : arith::SelectOp::create(b, loc, range.active, range.end,
                                                range.begin)
                            .getResult();

  FragmentMaps maps = fragmentMaps();
  AffineMap accMap = maps.acc;

  // The accumulators: kAccValues per lane for each of the warp's mma tiles
  // (i, j), i over M and j over N, in that order.
  auto accIndex = [](int64_t i, int64_t j, int64_t v) {
    return (i * kWarpNTiles + j) * kAccValues + v;
  };
  // The output position (row, column) of accumulator value v of tile
  // (i, j), and whether it lies inside C (and the block is active).
  struct Position {
    Value row, col, inBounds;
  };
  auto accPosition = [&](int64_t i, int64_t j, int64_t v) {
    Value vId = cst(v);
    Value row = add(add(m0, warpRow),
                    add(cst(i * kTileM), apply(accMap, 0, {lane, vId})));
    Value col = add(add(n0, warpCol),
                    add(cst(j * kTileN), apply(accMap, 1, {lane, vId})));
    Value inBounds = both(less(row, sizeM), less(col, sizeN));
    if (!alwaysActive)
      inBounds = both(range.active, inBounds);
    return Position{row, col, inBounds};
  };

  // C's current values (zero outside C), so that C += A·B: read, like the
  // factors, without a branch at the nearest element of C (the block's
  // first row and column are inside it). A part of a split K starts from
  // zero: the parts are added to C after the kernel; so does a C known to
  // be zero.
  Type f32 = b.getF32Type();
  SmallVector<Value> init(kWarpMTiles * kWarpNTiles * kAccValues);
  for (int64_t i = 0; i < kWarpMTiles; ++i) {
    for (int64_t j = 0; j < kWarpNTiles; ++j) {
      for (int64_t v = 0; v < kAccValues; ++v) {
        if (splits || problem.outZero) {
          init[accIndex(i, j, v)] = zeroOf(f32);
          continue;
        }
        Position at = accPosition(i, j, v);
        Value old = memref::LoadOp::create(
            b, loc, problem.out,
            problem.outIndices(b, batch, minIndex(at.row, sub1(sizeM)),
                               minIndex(at.col, sub1(sizeN))));
        init[accIndex(i, j, v)] =
            arith::SelectOp::create(b, loc, at.inBounds, old, zeroOf(f32));
      }
    }
  }

  // The first K step's factors, then a loop that stages the current step's
  // and loads the next step's while it multiplies.
  int64_t numAcc = init.size();
  int64_t stagedA = kBlockM * kBlockK / kBlockThreads;
  int64_t stagedB = kBlockN * kBlockK / kBlockThreads;
  SmallVector<Type> stagedTypes(stagedA + stagedB, elementType);
  // Where the step starts past the block's K range (a branch the whole
  // block takes alike), `otherwise`: zeros before the loop; inside it, the
  // step's own factors (never staged: no loads, and no registers to zero
  // in every step). The first step's factors element by element: one
  // step, and the vector path's code once per kernel instead of twice.
  auto fetchBoth = [&](Value k0, ValueRange otherwise) {
    bool first = otherwise.empty();
    return ifElse(less(k0, kEnd), stagedTypes, [&] {
      SmallVector<Value> factors =
          fetch(problem.operandA, first ? Value() : alignedA, m0, sizeM,
                kBlockM, problem.rowsContiguousA, k0);
      llvm::append_range(factors,
                         fetch(problem.operandB, first ? Value() : alignedB,
                               n0, sizeN, kBlockN, problem.rowsContiguousB,
                               k0));
      return factors;
    }, otherwise);
  };
  llvm::append_range(init, fetchBoth(range.begin, {}));
  auto kLoop =
      scf::ForOp::create(b, loc, range.begin, kEnd, cst(kBlockK), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(kLoop.getBody());
    Value k0 = kLoop.getInductionVar();
    ValueRange args = kLoop.getRegionIterArgs();
    ValueRange staged = args.drop_front(numAcc);
    // The previous step's ldmatrix must be done before the tiles change.
    gpu::BarrierOp::create(b, loc);
    store(staged.take_front(stagedA), smemA, kBlockM, problem.rowsContiguousA);
    store(staged.drop_front(stagedA), smemB, kBlockN, problem.rowsContiguousB);
    gpu::BarrierOp::create(b, loc);
    // Past the block's K range nothing is loaded (the values are unused).
    SmallVector<Value> next = fetchBoth(add(k0, cst(kBlockK)), staged);

    SmallVector<Value> acc(args.take_front(numAcc));
    // ldmatrix .x2 uses the addresses of lanes 0-15 only; lane % 16 keeps
    // the others' inside the tile too.
    Value lane16 = arith::RemUIOp::create(b, loc, lane, cst(16));
    for (int64_t ks = 0; ks < kBlockK; ks += kTileK) {
      SmallVector<Value> aFrags, bFrags;
      for (int64_t i = 0; i < kWarpMTiles; ++i)
        aFrags.push_back(
            loadA(maps, smemA, lane, add(warpRow, cst(i * kTileM)), cst(ks)));
      for (int64_t j = 0; j < kWarpNTiles; ++j)
        bFrags.push_back(
            loadB(maps, smemB, lane16, add(warpCol, cst(j * kTileN)), cst(ks)));
      for (int64_t i = 0; i < kWarpMTiles; ++i) {
        for (int64_t j = 0; j < kWarpNTiles; ++j) {
          MutableArrayRef<Value> tileAcc =
              MutableArrayRef<Value>(acc).slice(accIndex(i, j, 0), kAccValues);
          SmallVector<Value> d = mma(aFrags[i], bFrags[j], tileAcc);
          llvm::copy(d, tileAcc.begin());
        }
      }
    }
    llvm::append_range(acc, next);
    scf::YieldOp::create(b, loc, acc);
  }

  // Store the accumulators inside C (or this part's).
  for (int64_t i = 0; i < kWarpMTiles; ++i) {
    for (int64_t j = 0; j < kWarpNTiles; ++j) {
      for (int64_t v = 0; v < kAccValues; ++v) {
        Position at = accPosition(i, j, v);
        auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, at.inBounds,
                                      /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value result = kLoop.getResult(accIndex(i, j, v));
        if (splits)
          memref::StoreOp::create(b, loc, result, partial,
                                  ValueRange{part, batch, at.row, at.col});
        else
          storeResult(problem, batch, at.row, at.col, result);
      }
    }
  }
  if (splits)
    addPartsInLastBlock(problem, shared, launch, partial, counters, m0, n0,
                        alwaysActive ? Value() : range.active);
  gpu::TerminatorOp::create(b, loc);
  if (splits) {
    b.setInsertionPointAfter(launch);
    for (Value buffer : {partial, counters})
      gpu::DeallocOp::create(b, loc, /*asyncToken=*/Type(),
                             /*asyncDependencies=*/ValueRange(), buffer);
  }
}

void KernelBuilder::storeResult(const MmaProblem &problem, Value batch,
                                Value m, Value n, Value value) {
  memref::StoreOp::create(b, loc, value, problem.out,
                          problem.outIndices(b, batch, m, n));
  if (problem.epilogue)
    problem.epilogue(b, batch, m, n, value);
}

void KernelBuilder::addPartsInLastBlock(const MmaProblem &problem,
                                        Value shared, gpu::LaunchOp launch,
                                        Value partial, Value counters, Value m0,
                                        Value n0, Value active) {
  // The serial reduction of split-K (LastBlock.h). The parts are added in
  // part order whichever block is last, so the result does not depend on
  // the order the blocks ran in.
  Type i32 = b.getI32Type();
  // The tiles' shared memory is free once every warp is past its last
  // ldmatrix (the barrier): the flag takes its first word.
  Value flag = sharedView(shared, workgroupType({1}, i32), 0);
  Value zero = cst(0);
  Value first =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
  scf::IfOp lastBlock = switchyard::buildLastBlockIf(
      b, loc, first, counters,
      ValueRange{batch, launch.getBlockIds().y, launch.getBlockIds().x},
      arith::IndexCastOp::create(b, loc, i32, sub1(problem.splits)), flag,
      /*freeFlag=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(lastBlock.thenBlock()->getTerminator());
  Value one = cst(1);
  Type f32 = b.getF32Type();
  // The tile's elements, consecutive threads on consecutive columns (the
  // parts' and C's loads coalesced), in one loop: its body, the epilogue's
  // included, is built once rather than per accumulator register.
  auto tileLoop = scf::ForOp::create(b, loc, tid, cst(kBlockM * kBlockN),
                                     cst(kBlockThreads));
  b.setInsertionPointToStart(tileLoop.getBody());
  Value e = tileLoop.getInductionVar();
  Value m = add(m0, arith::DivUIOp::create(b, loc, e, cst(kBlockN)));
  Value n = add(n0, arith::RemUIOp::create(b, loc, e, cst(kBlockN)));
  Value within = both(less(m, problem.sizeM), less(n, problem.sizeN));
  if (active)
    within = both(active, within);
  {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, within,
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value c = problem.outZero
                  ? zeroOf(f32)
                  : memref::LoadOp::create(b, loc, problem.out,
                                           problem.outIndices(b, batch, m, n))
                        .getResult();
    auto sum = scf::ForOp::create(
        b, loc, zero, problem.splits, one, ValueRange{c},
        [&](OpBuilder &nb, Location nl, Value p, ValueRange acc) {
          Value x = memref::LoadOp::create(nb, nl, partial,
                                           ValueRange{p, batch, m, n});
          scf::YieldOp::create(
              nb, nl, ValueRange{arith::AddFOp::create(nb, nl, acc[0], x)});
        });
    storeResult(problem, batch, m, n, sum.getResult(0));
  }
}

} // namespace

void mlir::switchyard::tensor_cores::buildMmaKernel(RewriterBase &rewriter,
                                                    Operation *op,
                                                    FloatType elementType,
                                                    const MmaProblem &problem) {
  KernelBuilder(rewriter, op, elementType).build(problem);
}

//===----------------------------------------------------------------------===//
// The problem of a contraction
//===----------------------------------------------------------------------===//

namespace mlir::switchyard::tensor_cores {

MmaProblem contractionProblem(RewriterBase &rewriter, Contraction &c,
                              const SplitKPolicy &policy) {
  linalg::LinalgOp op = c.op;
  Location loc = op.getLoc();
  unsigned dimM = c.dims.m[0], dimN = c.dims.n[0], dimK = c.dims.k[0];
  std::optional<unsigned> dimBatch;
  if (!c.dims.batch.empty())
    dimBatch = c.dims.batch[0];
  unsigned numLoops = op.getNumLoops();
  rewriter.setInsertionPoint(op);
  SmallVector<Range> ranges = op.createLoopRanges(rewriter, loc);
  auto size = [&](unsigned dim) {
    return getValueOrCreateConstantIndexOp(rewriter, loc, ranges[dim].size);
  };
  MmaProblem problem;
  problem.sizeM = size(dimM);
  problem.sizeN = size(dimN);
  problem.batches = dimBatch ? size(*dimBatch)
                             : arith::ConstantIndexOp::create(rewriter, loc, 1);
  Value sizeK = size(dimK);
  problem.splits = splitCount(
      rewriter, loc, policy, getConstantIntValue(problem.sizeM),
      getConstantIntValue(problem.sizeN), getConstantIntValue(problem.batches),
      [&] { return sizeK; });
  problem.kRange = [=](OpBuilder &b, Value, Value) {
    return MmaProblem::Range{
        arith::ConstantIndexOp::create(b, loc, 0), sizeK,
        arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1)};
  };
  auto loops = [=](Value batch, unsigned dim, Value index, Value k) {
    SmallVector<Value> result(numLoops, Value());
    if (dimBatch)
      result[*dimBatch] = batch;
    result[dim] = index;
    result[dimK] = k;
    return result;
  };
  // Input `input`, whose rows are loop dimension `dimRow`, read through
  // the body's casts.
  auto operand = [&](unsigned input, unsigned dimRow) {
    OpOperand *in = op.getDpsInputOperand(input);
    AffineMap map = op.getMatchingIndexingMap(in);
    MmaProblem::Operand result;
    result.buffer = in->get();
    result.indices = [=](OpBuilder &, Value batch, Value row, Value k) {
      SmallVector<Value> at = loops(batch, dimRow, row, k);
      SmallVector<Value> indices;
      for (unsigned r = 0; r < map.getNumResults(); ++r)
        indices.push_back(at[map.getDimPosition(r)]);
      return indices;
    };
    result.cast = [=, &c](OpBuilder &b, Value raw) {
      return replayCasts(b, c, input, raw);
    };
    // The runs go along the rows where they are innermost, else along K.
    unsigned innermost = map.getDimPosition(map.getNumResults() - 1);
    result.runsInLastDim = innermost == dimRow || innermost == dimK;
    return std::make_pair(result, innermost == dimRow);
  };
  std::tie(problem.operandA, problem.rowsContiguousA) = operand(0, dimM);
  std::tie(problem.operandB, problem.rowsContiguousB) = operand(1, dimN);
  OpOperand *out = op.getDpsInitOperand(0);
  problem.out = out->get();
  AffineMap outMap = op.getMatchingIndexingMap(out);
  problem.outIndices = [=](OpBuilder &, Value batch, Value m, Value n) {
    SmallVector<Value> at = loops(batch, dimM, m, Value());
    at[dimN] = n;
    SmallVector<Value> indices;
    for (unsigned r = 0; r < outMap.getNumResults(); ++r)
      indices.push_back(at[outMap.getDimPosition(r)]);
    return indices;
  };
  return problem;
}

} // namespace mlir::switchyard::tensor_cores
