//===- GpuTensorCoreMatmul.cpp - matmul-like linalg ops on tensor cores ---===//
//
// Implements `switchyard-gpu-tensor-core-matmul`: with a 16-bit element type
// the multiplicands of every matmul-like linalg op are rounded to it, and on
// sm_80+ the ops with one M, one N and one K dimension become explicit
// `gpu.launch`es in which each block of 2 x 2 warps computes a 64 x 64 tile
// of the f32 result with ldmatrix and mma.sync m16n8k16 (each warp 32 x 32,
// eight mma per 16 of K), K staged 32 at a time through padded shared
// tiles with the next step's loads in flight. The same kernel builder
// (MmaProblem: sizes, the K range of a block, the operands' loads) also
// takes the grouped expert kernels, moe.grouped_matmul (each block's
// expert read from its tile) and moe.grouped_weight_grad (a batch per
// expert, K over its segment). Grids of few tiles over a long K (weight
// gradients: K is the token count) split K into parts written to a buffer
// of partial results that a parallel loop adds to C in part order. moe.flash_attention_kernel has a kernel of
// its own (GpuTensorCoreAttention.cpp).
//
// The fragment layouts are not derived here: the lane -> ldmatrix row
// address map and the lane/value -> accumulator element map are upstream's
// (mlir/Dialect/NVGPU/Utils/MMAUtils.h, the maps convert-vector-to-gpu
// uses, exercised by upstream's sm80 integration tests on hardware). The
// kernels' PTX is assembled by ptxas for every chip, and their results
// were checked against the CPU's on an H200 (test/Integration/CUDA).
//
//===----------------------------------------------------------------------===//

#include "TensorCoreKernels.h"

#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/GPU/Passes.h"
#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/NVGPU/Utils/MMAUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <functional>

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUTENSORCOREMATMULPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;
using mlir::switchyard::Contraction;

using namespace mlir::switchyard::tensor_cores;

//===----------------------------------------------------------------------===//
// What the kernel builders share
//===----------------------------------------------------------------------===//

Value KernelBuilderBase::apply(AffineMap map, unsigned r, ValueRange operands) {
  OpFoldResult result = affine::makeComposedFoldedAffineApply(
      b, loc, map.getSubMap({r}), getAsOpFoldResult(operands));
  return getValueOrCreateConstantIndexOp(b, loc, result);
}

Value KernelBuilderBase::roundedFactor(Value raw) {
  // Element by element, or a vector of them at once.
  auto like = [&](Type element) -> Type {
    if (auto vector = dyn_cast<VectorType>(raw.getType()))
      return VectorType::get(vector.getShape(), element);
    return element;
  };
  Type f32 = like(b.getF32Type());
  if (raw.getType() != f32)
    raw = arith::ExtFOp::create(b, loc, f32, raw);
  return arith::TruncFOp::create(b, loc, like(elementType), raw);
}

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

MemRefType KernelBuilderBase::workgroupType(ArrayRef<int64_t> shape,
                                            Type type) {
  return MemRefType::get(
      shape, type, AffineMap(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
}

Value KernelBuilderBase::dynamicSharedMemory() {
  return gpu::DynamicSharedMemoryOp::create(
      b, loc, workgroupType({ShapedType::kDynamic}, b.getI8Type()));
}

Value KernelBuilderBase::runsAligned(Value buffer) {
  auto type = dyn_cast<MemRefType>(buffer.getType());
  if (!type || !type.isLastDimUnitStride() ||
      !type.getElementType().isIntOrFloat())
    return {};
  // The first element's address and every other stride a multiple of a
  // run: every run then starts at a multiple of its size in bytes.
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  Value pointer = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value start = add(pointer, mul(metadata.getOffset(), bytes));
  Value aligned = multipleOf(start, kRun * bytes);
  for (Value stride : metadata.getStrides().drop_back())
    aligned = both(aligned, multipleOf(stride, kRun));
  return aligned;
}

Value KernelBuilderBase::multipleOf(Value v, int64_t of) {
  Value rem = arith::RemUIOp::create(b, loc, v, cst(of));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rem, cst(0));
}

Value KernelBuilderBase::loadRun(Value buffer, ValueRange indices) {
  auto type = cast<MemRefType>(buffer.getType());
  return vector::LoadOp::create(
      b, loc, VectorType::get({kRun}, type.getElementType()), buffer, indices,
      /*nontemporal=*/false,
      llvm::MaybeAlign(kRun * type.getElementTypeBitWidth() / 8));
}

Value KernelBuilderBase::sharedView(Value shared, MemRefType type,
                                    int64_t offset) {
  return memref::ViewOp::create(b, loc, type, shared, cst(offset),
                                ValueRange{});
}

std::pair<Value, Value>
KernelBuilderBase::stagedElement(Value tid, int64_t threads, int64_t index,
                                 int64_t rows, int64_t cols,
                                 bool rowsContiguous) {
  // Element `index` of the thread is element index % kRun of its run
  // index / kRun; the runs are numbered with consecutive threads on
  // consecutive runs along the contiguous dimension.
  Value run = add(tid, cst(index / kRun * threads));
  Value offset = cst(index % kRun);
  Value runs = cst((rowsContiguous ? rows : cols) / kRun);
  Value along =
      add(mul(arith::RemUIOp::create(b, loc, run, runs), kRun), offset);
  Value across = arith::DivUIOp::create(b, loc, run, runs);
  if (rowsContiguous)
    return {along, across};
  return {across, along};
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

namespace {
/// The block tile: 2 x 2 warps, each computing kWarpMTiles x kWarpNTiles
/// mma tiles (32 x 32 of C), so a block computes 64 x 64 of C and stages
/// kBlockK of K per step: 64 x 32 of A and of B, 32 multiply-accumulates
/// per staged element (a single warp on a 16 x 32 tile had 10.7).
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

/// Whether `c` has the shape the tensor-core kernel handles: one M, N and K
/// dimension, at most one batch dimension, and projected permutation maps
/// (every operand index is a loop index).
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

/// Input `input` of `c` from its raw element `raw` (the block argument's
/// value), or from a vector of raw elements: the body's casts from the
/// block argument to the factor (arith.extf, arith.truncf), replayed
/// element by element.
Value replayCasts(OpBuilder &b, Contraction &c, unsigned input, Value raw) {
  SmallVector<Operation *> casts;
  for (Value v = c.factors[input]; Operation *def = v.getDefiningOp();
       v = def->getOperand(0))
    casts.push_back(def);
  Value value = raw;
  for (Operation *cast : llvm::reverse(casts)) {
    Type type = cast->getResult(0).getType();
    if (auto vector = dyn_cast<VectorType>(value.getType()))
      type = VectorType::get(vector.getShape(), type);
    OperationState state(cast->getLoc(), cast->getName(), ValueRange{value},
                         TypeRange{type}, cast->getAttrs());
    value = b.create(state)->getResult(0);
  }
  return value;
}

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

/// The number of parts to cut K into for a grid over M x N x batches
/// (static sizes; nullopt: dynamic) whose batches each reduce about
/// `kPerBatch()` (a host value, built only if K is cut), or null where the
/// grid is dynamic or already large: clamp(kPerBatch / minK, 1,
/// ceil(targetBlocks / tiles)).
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
  /// Stores what `fetch` returned into the shared tile.
  void store(ValueRange factors, Value tile, int64_t rows, bool rowsContiguous);
  /// After the split-K `launch`: adds the parts in `partial` to C and frees
  /// the buffer.
  void addParts(const MmaProblem &problem, gpu::LaunchOp launch,
                Value partial);

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
      Value raw = memref::LoadOp::create(
          b, loc, operand.buffer,
          operand.indices(b, batch, minIndex(rowIndex, sub1(rowSize)),
                          minIndex(kIndex, sub1(kEnd))));
      factors.push_back(arith::SelectOp::create(
          b, loc, inBounds, roundedFactor(operand.cast(b, raw)),
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
    Value run = loadRun(operand.buffer, operand.indices(b, batch,
                                                         add(rowStart, row),
                                                         add(k0, col)));
    // Rounded as a vector (two elements per conversion on sm_80+).
    Value rounded = roundedFactor(operand.cast(b, run));
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
  Value partial;
  if (splits) {
    auto type = MemRefType::get(SmallVector<int64_t>(4, ShapedType::kDynamic),
                                b.getF32Type());
    partial = gpu::AllocOp::create(b, loc, type, /*asyncToken=*/Type(),
                                   /*asyncDependencies=*/ValueRange(),
                                   ValueRange{splits, batches, sizeM, sizeN},
                                   /*symbolOperands=*/ValueRange())
                  .getMemref();
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
  // zero: the parts are added to C after the kernel.
  Type f32 = b.getF32Type();
  SmallVector<Value> init(kWarpMTiles * kWarpNTiles * kAccValues);
  for (int64_t i = 0; i < kWarpMTiles; ++i) {
    for (int64_t j = 0; j < kWarpNTiles; ++j) {
      for (int64_t v = 0; v < kAccValues; ++v) {
        if (splits) {
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

  // Store the accumulators inside C.
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
          memref::StoreOp::create(b, loc, result, problem.out,
                                  problem.outIndices(b, batch, at.row, at.col));
      }
    }
  }
  gpu::TerminatorOp::create(b, loc);
  if (splits)
    addParts(problem, launch, partial);
}

void KernelBuilder::addParts(const MmaProblem &problem, gpu::LaunchOp launch,
                             Value partial) {
  // C[b, m, n] += Σ_part partial[part, b, m, n], parts in order: a parallel
  // loop over C (n fastest, so consecutive threads read consecutive
  // partial results), which becomes a SIMT kernel.
  b.setInsertionPointAfter(launch);
  Value zero = cst(0), one = cst(1);
  auto loop = scf::ParallelOp::create(
      b, loc, ValueRange{zero, zero, zero},
      ValueRange{problem.batches, problem.sizeM, problem.sizeN},
      ValueRange{one, one, one});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value bi = loop.getInductionVars()[0], m = loop.getInductionVars()[1],
          n = loop.getInductionVars()[2];
    SmallVector<Value> at = problem.outIndices(b, bi, m, n);
    Value c = memref::LoadOp::create(b, loc, problem.out, at);
    auto sum = scf::ForOp::create(
        b, loc, zero, problem.splits, one, ValueRange{c},
        [&](OpBuilder &nb, Location nl, Value p, ValueRange acc) {
          Value x = memref::LoadOp::create(nb, nl, partial,
                                           ValueRange{p, bi, m, n});
          scf::YieldOp::create(
              nb, nl, ValueRange{arith::AddFOp::create(nb, nl, acc[0], x)});
        });
    memref::StoreOp::create(b, loc, sum.getResult(0), problem.out, at);
  }
  gpu::DeallocOp::create(b, loc, /*asyncToken=*/Type(),
                         /*asyncDependencies=*/ValueRange(), partial);
}

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

/// Whether `c` can take the wgmma route: the mma.sync shape, no batch
/// dimension, and static N and K that are multiples of the tile. M (the
/// token count) may be dynamic: TMA zero-fills the rows past it and the
/// stores are guarded.
bool fitsWgmma(Contraction &c) {
  if (!fitsTensorCores(c) || !c.dims.batch.empty())
    return false;
  SmallVector<int64_t> ranges = c.op.getStaticLoopRanges();
  int64_t n = ranges[c.dims.n[0]], k = ranges[c.dims.k[0]];
  return !ShapedType::isDynamic(n) && !ShapedType::isDynamic(k) &&
         n % kWgTileN == 0 && k % kWgTileK == 0;
}

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

//===----------------------------------------------------------------------===//
// The problems: contractions and the grouped expert kernels
//===----------------------------------------------------------------------===//

/// The mma.sync problem of a contraction: M, N, K and the batch are its
/// loop dimensions; the whole K range for every block.
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

/// An operand read as it is stored (no casts), with the staging's runs
/// along its last dimension: `indices` of (batch, row, k).
MmaProblem::Operand
plainOperand(Value buffer,
             std::function<SmallVector<Value>(Value, Value, Value)> indices) {
  MmaProblem::Operand operand;
  operand.buffer = buffer;
  operand.indices = [indices](OpBuilder &, Value batch, Value row, Value k) {
    return indices(batch, row, k);
  };
  operand.cast = [](OpBuilder &, Value raw) { return raw; };
  operand.runsInLastDim = true;
  return operand;
}

/// The mma.sync problem of moe.grouped_matmul: C = init [P, C], M the
/// padded rows, N the output width, K the reduced width. Each block's
/// kBlockM rows lie in one tile of tile_size rows (a multiple of kBlockM;
/// other sizes stay for switchyard-lower-grouped-kernels) and it reads its
/// expert's weight; a padding tile's blocks are inactive. `expert` holds
/// the block's expert once kRange has built it.
MmaProblem groupedMatmulProblem(RewriterBase &rewriter, moe::GroupedMatmulOp op,
                                Value &expert) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  auto dim = [&](Value v, int64_t d) -> Value {
    return memref::DimOp::create(rewriter, loc, v, d);
  };
  Value rows = op.getRows(), weight = op.getWeight(),
        tiles = op.getTileExperts();
  bool transposed = op.getTransposeWeight();
  int64_t tileSize = op.getTileSize();
  Value experts = dim(weight, 0), width = dim(rows, 1);
  MmaProblem problem;
  problem.sizeM = dim(rows, 0);
  problem.sizeN = dim(op.getInit(), 1);
  problem.batches = arith::ConstantIndexOp::create(rewriter, loc, 1);
  problem.kRange = [=, &expert](OpBuilder &b, Value, Value m0) {
    Value tile = arith::DivUIOp::create(
        b, loc, m0, arith::ConstantIndexOp::create(b, loc, tileSize));
    expert = memref::LoadOp::create(b, loc, tiles, tile);
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         expert, experts);
    return MmaProblem::Range{arith::ConstantIndexOp::create(b, loc, 0), width,
                             active};
  };
  problem.operandA = plainOperand(rows, [](Value, Value m, Value k) {
    return SmallVector<Value>{m, k};
  });
  problem.operandB =
      plainOperand(weight, [=, &expert](Value, Value n, Value k) {
        return transposed ? SmallVector<Value>{expert, n, k}
                          : SmallVector<Value>{expert, k, n};
      });
  problem.rowsContiguousB = !transposed;
  problem.out = op.getInit();
  problem.outIndices = [](OpBuilder &, Value, Value m, Value n) {
    return SmallVector<Value>{m, n};
  };
  return problem;
}

/// The mma.sync problem of moe.grouped_weight_grad: one batch per expert e,
/// C = init[e] [A, C], K over e's segment of rows.
MmaProblem groupedWeightGradProblem(RewriterBase &rewriter,
                                    moe::GroupedWeightGradOp op,
                                    const SplitKPolicy &policy) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  auto dim = [&](Value v, int64_t d) -> Value {
    return memref::DimOp::create(rewriter, loc, v, d);
  };
  Value lhs = op.getLhs(), rhs = op.getRhs(), segments = op.getSegments();
  MmaProblem problem;
  problem.sizeM = dim(op.getInit(), 1);
  problem.sizeN = dim(op.getInit(), 2);
  problem.batches = dim(op.getInit(), 0);
  // The sizes of init (the weights' shape) are static in practice; each
  // expert's K is its segment, about the rows over the experts.
  auto initType = cast<MemRefType>(op.getInit().getType());
  if (initType.hasStaticShape() && initType.getDimSize(0) > 0) {
    int64_t experts = initType.getDimSize(0);
    problem.splits = splitCount(
        rewriter, loc, policy, initType.getDimSize(1), initType.getDimSize(2),
        experts, [&]() -> Value {
          return arith::DivUIOp::create(
              rewriter, loc, dim(lhs, 0),
              arith::ConstantIndexOp::create(rewriter, loc, experts));
        });
  }
  problem.kRange = [=](OpBuilder &b, Value e, Value) {
    Value next = arith::AddIOp::create(
        b, loc, e, arith::ConstantIndexOp::create(b, loc, 1));
    return MmaProblem::Range{
        memref::LoadOp::create(b, loc, segments, e),
        memref::LoadOp::create(b, loc, segments, next),
        arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1)};
  };
  problem.operandA = plainOperand(lhs, [](Value, Value a, Value p) {
    return SmallVector<Value>{p, a};
  });
  problem.operandB = plainOperand(rhs, [](Value, Value c, Value p) {
    return SmallVector<Value>{p, c};
  });
  // K (the rows p) is the outer dimension of both.
  problem.rowsContiguousA = problem.rowsContiguousB = true;
  problem.out = op.getInit();
  problem.outIndices = [](OpBuilder &, Value e, Value a, Value c) {
    return SmallVector<Value>{e, a, c};
  };
  return problem;
}

struct SwitchyardGpuTensorCoreMatmulPass
    : public switchyard::impl::SwitchyardGpuTensorCoreMatmulPassBase<
          SwitchyardGpuTensorCoreMatmulPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    FailureOr<FloatType> parsed =
        switchyard::parseRoundingType(ctx, elementType);
    if (failed(parsed)) {
      func.emitError() << "switchyard-gpu-tensor-core-matmul: unsupported "
                          "element-type '"
                       << elementType << "'; expected f32, bf16 or f16";
      return signalPassFailure();
    }
    FloatType type = *parsed;
    if (!type)
      return;
    if (splitKBlocks < 0 || splitKMin < 1) {
      func.emitError() << "switchyard-gpu-tensor-core-matmul: split-k-blocks "
                          "must be >= 0 and split-k-min >= 1";
      return signalPassFailure();
    }
    SplitKPolicy policy{splitKBlocks, splitKMin};

    SmallVector<Contraction> contractions;
    func.walk([&](linalg::LinalgOp op) {
      if (op->getParentOfType<gpu::LaunchOp>())
        return;
      if (FailureOr<Contraction> c = switchyard::matchContraction(op);
          succeeded(c))
        contractions.push_back(*c);
    });

    IRRewriter rewriter(ctx);
    for (Contraction &c : contractions) {
      if (tensorCores && wgmma && fitsWgmma(c)) {
        WgmmaKernelBuilder(rewriter, c, type).build();
        rewriter.eraseOp(c.op);
      } else if (tensorCores && fitsTensorCores(c)) {
        MmaProblem problem = contractionProblem(rewriter, c, policy);
        KernelBuilder(rewriter, c.op, type).build(problem);
        rewriter.eraseOp(c.op);
      } else {
        // The SIMT fallback: the code switchyard-round-contraction-operands
        // runs, so the CPU reference rounds exactly these factors.
        switchyard::roundContractionFactors(rewriter, c, type);
      }
    }

    // moe.flash_attention_kernel and moe.flash_attention_grad_kernel
    // (buffers) have no other lowering.
    SmallVector<Operation *> attention;
    func.walk([&](Operation *op) {
      if (isa<moe::FlashAttentionKernelOp, moe::FlashAttentionGradKernelOp>(
              op) &&
          op->getNumResults() == 0)
        attention.push_back(op);
    });
    if (!attention.empty() && !tensorCores) {
      attention.front()->emitOpError()
          << "needs tensor cores (switchyard-gpu-tensor-core-matmul "
             "tensor-cores=true)";
      return signalPassFailure();
    }
    for (Operation *op : attention) {
      if (auto forward = dyn_cast<moe::FlashAttentionKernelOp>(op))
        switchyard::tensor_cores::buildFlashAttentionKernel(rewriter, forward,
                                                            type);
      else
        switchyard::tensor_cores::buildFlashAttentionGradKernels(
            rewriter, cast<moe::FlashAttentionGradKernelOp>(op), type);
    }

    // The grouped expert kernels (buffers) on sm_80+; the rest stay for
    // switchyard-lower-grouped-kernels (SIMT, rounded factors).
    if (!tensorCores)
      return;
    SmallVector<Operation *> grouped;
    func.walk([&](Operation *op) {
      if (auto matmul = dyn_cast<moe::GroupedMatmulOp>(op)) {
        if (matmul.getNumResults() == 0 &&
            static_cast<int64_t>(matmul.getTileSize()) % kBlockM == 0)
          grouped.push_back(op);
      } else if (auto grad = dyn_cast<moe::GroupedWeightGradOp>(op)) {
        if (grad.getNumResults() == 0)
          grouped.push_back(op);
      }
    });
    for (Operation *op : grouped) {
      Value expert;
      MmaProblem problem =
          isa<moe::GroupedMatmulOp>(op)
              ? groupedMatmulProblem(rewriter, cast<moe::GroupedMatmulOp>(op),
                                     expert)
              : groupedWeightGradProblem(
                    rewriter, cast<moe::GroupedWeightGradOp>(op), policy);
      KernelBuilder(rewriter, op, type).build(problem);
      rewriter.eraseOp(op);
    }
  }
};
} // namespace
