//===- CpuContractionKernels.cpp - register-blocked CPU matmul kernels ----===//
//
// Implements `switchyard-cpu-contraction-kernels` (see Passes.td): each
// matmul-like linalg op on buffers becomes loops around a tile of
// `rows` x `columns` outputs held in vector registers over the whole
// reduction, one vector FMA per row and reduction step.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/CPU/Passes.h"
#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDCPUCONTRACTIONKERNELSPASS
#include "lib/Codegen/CPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-cpu-contraction-kernels"

using namespace mlir;
using namespace mlir::switchyard;

namespace {

/// Whether the last dimension of `value` (a memref) has stride 1.
bool hasUnitStrideRows(Value value) {
  return cast<MemRefType>(value.getType()).isLastDimUnitStride();
}

/// The loop dimension of each result of `map`, a projected permutation
/// (plain dimensions, each at most once: no diagonal, no constant), or
/// failure.
FailureOr<SmallVector<unsigned>> resultDims(AffineMap map) {
  if (!map.isProjectedPermutation())
    return failure();
  SmallVector<unsigned> dims;
  for (unsigned i = 0, e = map.getNumResults(); i < e; ++i)
    dims.push_back(map.getDimPosition(i));
  return dims;
}

/// Replays the casts (arith.extf / arith.truncf) that lead from the block
/// argument to `factor` in the op's body on `value`, a scalar or a vector.
Value replayCasts(OpBuilder &b, Location loc, Value factor, Value value) {
  SmallVector<Operation *> casts;
  for (Operation *def = factor.getDefiningOp(); def;
       def = def->getOperand(0).getDefiningOp())
    casts.push_back(def);
  for (Operation *cast : llvm::reverse(casts)) {
    Type element = cast->getResult(0).getType();
    Type type = element;
    if (auto vector = dyn_cast<VectorType>(value.getType()))
      type = VectorType::get(vector.getShape(), element);
    if (isa<arith::ExtFOp>(cast))
      value = arith::ExtFOp::create(b, loc, type, value);
    else
      value = arith::TruncFOp::create(b, loc, type, value);
  }
  return value;
}

/// One matmul-like op, in the roles of the kernel: `a` holds the register
/// tile's row dimension `m` (if any), `b` the vector dimension `n`.
struct KernelPlan {
  Contraction contraction;
  unsigned aInput = 0, bInput = 1;
  unsigned n = 0;
  std::optional<unsigned> m;
  /// The dimensions looped around the tile (parallel ones other than m and
  /// n, in the output's order) and inside it (the reductions).
  SmallVector<unsigned> outer, reductions;
  SmallVector<unsigned> aDims, bDims, outDims;
  /// b's dimensions as the op indexes it (bDims is the same, or the order
  /// of a transposed copy).
  SmallVector<unsigned> bSourceDims;
  /// Where n is not b's unit-stride dimension: the order of b's dimensions
  /// with n last.
  std::optional<SmallVector<int64_t>> bPermutation;
};

FailureOr<KernelPlan> planKernel(linalg::LinalgOp op, int64_t minColumns) {
  FailureOr<Contraction> contraction = matchContraction(op);
  if (failed(contraction))
    return failure();
  KernelPlan plan;
  plan.contraction = *contraction;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  FailureOr<SmallVector<unsigned>> in0 = resultDims(maps[0]),
                                   in1 = resultDims(maps[1]),
                                   out = resultDims(maps[2]);
  if (failed(in0) || failed(in1) || failed(out) || out->empty())
    return failure();
  Value output = op.getDpsInitOperand(0)->get();
  if (!hasUnitStrideRows(output))
    return failure();
  // The kernel reads the inputs while it writes output tiles: an input that
  // is the output buffer itself is left to the loops.
  for (OpOperand *input : op.getDpsInputOperands())
    if (input->get() == output)
      return failure();
  auto outType = cast<MemRefType>(output.getType());
  if (!outType.isDynamicDim(outType.getRank() - 1) &&
      outType.getShape().back() < minColumns)
    return failure();

  // The vector dimension: the output's last, found in exactly one input.
  plan.n = out->back();
  bool inA = llvm::is_contained(*in0, plan.n),
       inB = llvm::is_contained(*in1, plan.n);
  if (inA == inB)
    return failure();
  if (inA)
    std::swap(plan.aInput, plan.bInput);
  plan.aDims = plan.aInput == 0 ? *in0 : *in1;
  plan.bDims = plan.aInput == 0 ? *in1 : *in0;
  plan.outDims = *out;

  plan.bSourceDims = plan.bDims;
  Value b = op.getDpsInputOperand(plan.bInput)->get();
  if (plan.bDims.back() != plan.n || !hasUnitStrideRows(b)) {
    SmallVector<int64_t> permutation;
    int64_t nAt = -1;
    for (auto [i, dim] : llvm::enumerate(plan.bDims)) {
      if (dim == plan.n)
        nAt = i;
      else
        permutation.push_back(i);
    }
    permutation.push_back(nAt);
    plan.bPermutation = permutation;
  }

  // The tile's rows: the last output dimension that only `a` indexes.
  for (unsigned dim : llvm::reverse(plan.outDims))
    if (dim != plan.n && llvm::is_contained(plan.aDims, dim) &&
        !llvm::is_contained(plan.bDims, dim)) {
      plan.m = dim;
      break;
    }
  for (unsigned dim : plan.outDims)
    if (dim != plan.n && dim != plan.m)
      plan.outer.push_back(dim);
  for (unsigned dim = 0, e = op.getNumLoops(); dim < e; ++dim)
    if (!llvm::is_contained(plan.outDims, dim))
      plan.reductions.push_back(dim);
  return plan;
}

/// Blocks of columns the parallel loop has at least, where it is the loop
/// over the blocks and the columns allow: the pool's threads share them.
constexpr int64_t kMinBlocks = 8;
/// Row tiles per group where the loop over groups of rows is outermost.
constexpr int64_t kGroupTiles = 8;
/// The shortest chunk of the reduction over groups of rows (the output tile
/// is read and written once per chunk).
constexpr int64_t kMinChunk = 32;

/// Builds the kernel of `plan` in place of its op.
class KernelBuilder {
public:
  /// `zeroFill`: the linalg.fill of zeros into the op's output just before
  /// it, folded into the kernel (null if there is none).
  KernelBuilder(RewriterBase &rewriter, KernelPlan plan, int64_t rows,
                int64_t columns, int64_t panelBytes, linalg::FillOp zeroFill)
      : b(rewriter), plan(std::move(plan)), rows(rows), columns(columns),
        panelBytes(panelBytes), loc(this->plan.contraction.op.getLoc()),
        zeroFill(zeroFill) {}

  void build() {
    linalg::LinalgOp op = plan.contraction.op;
    b.setInsertionPoint(op);
    for (Range range : op.createLoopRanges(b, loc))
      sizes.push_back(getValueOrCreateConstantIndexOp(b, loc, range.size));
    a = op.getDpsInputOperand(plan.aInput)->get();
    bMatrix = op.getDpsInputOperand(plan.bInput)->get();
    out = op.getDpsInitOperand(0)->get();
    aFactor = plan.contraction.factors[plan.aInput];
    bFactor = plan.contraction.factors[plan.bInput];
    bElement = cast<MemRefType>(bMatrix.getType()).getElementType();
    auto outType = cast<MemRefType>(out.getType());
    inBounds = !outType.isDynamicDim(outType.getRank() - 1) &&
               outType.getShape().back() % columns == 0;
    // A static n whose last tile is at most half full ends in a tile half
    // as wide (n = 76 with 32 columns: 32 + 32 + 16, not 32 + 32 + 32):
    // a third fewer multiply-adds wasted on the padding.
    int64_t n = op.getStaticLoopRanges()[plan.n];
    if (!ShapedType::isDynamic(n) && columns % 2 == 0) {
      int64_t tail = n % columns;
      if (tail > 0 && tail <= columns / 2) {
        narrowStart = n - tail;
        narrowInBounds = tail == columns / 2;
      }
    }

    // One reduction, or several where a is packed too: b is packed panel
    // by panel, the reductions taken as one (their linear index, the last
    // fastest); otherwise b is read where it is, transposed first if its
    // rows are not n's.
    bool aAlongReduction = plan.aDims.back() == plan.reductions.back() &&
                           hasUnitStrideRows(a);
    packA = plan.m && !aAlongReduction;
    packed = plan.reductions.size() == 1 || packA;
    Value transposed;
    if (packed) {
      // Over groups of rows where a's copies are the cost and a panel of
      // kMinChunk steps over all of n fits.
      int64_t n = op.getStaticLoopRanges()[plan.n];
      rowsOuter =
          packA && !ShapedType::isDynamic(n) &&
          int64_t(llvm::divideCeil(n, columns)) * columns * elementBytes() *
                  kMinChunk <=
              panelBytes;
      reductionChunk = chooseReductionChunk();
    } else if (plan.bPermutation) {
      transposed = transposeB();
      bMatrix = transposed;
    }
    blockColumns = chooseBlockColumns();
    LLVM_DEBUG(llvm::dbgs()
               << "  " << rows << " x " << columns << " register tile, "
               << blockColumns << " columns per block, b "
               << (packed ? "packed" : plan.bPermutation ? "transposed"
                                                          : "in place")
               << (packA ? ", a packed" : "")
               << (packed ? ", reduction chunks of " +
                                std::to_string(reductionChunk)
                          : std::string())
               << (inBounds ? "" : ", last columns masked")
               << (narrowStart >= 0 ? ", a narrow last tile" : "") << "\n");
    if (zeroFill)
      foldZeroFill();
    buildOuter(0);
    if (transposed)
      memref::DeallocOp::create(b, loc, transposed);
    b.eraseOp(op);
  }

private:
  Value constant(int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }

  /// A loop from `lb` to `ub` by `step` whose body `body` builds at the
  /// builder's insertion point.
  void loop(Value lb, Value ub, Value step, function_ref<void(Value)> body) {
    auto forOp = scf::ForOp::create(b, loc, lb, ub, step);
    // The outermost loop (a batch dimension's, or the blocks of columns'):
    // each iteration writes its own part of the output.
    if (!outerBuilt) {
      forOp->setAttr(switchyard::kParallelLoopAttr, b.getUnitAttr());
      outerBuilt = true;
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    body(forOp.getInductionVar());
  }

  /// Whether the outermost loop exists yet.
  bool outerBuilt = false;

  /// b with its dimensions permuted so that n is last (the several
  /// reductions' path), in a new buffer.
  Value transposeB() {
    auto type = cast<MemRefType>(bMatrix.getType());
    SmallVector<int64_t> shape;
    SmallVector<Value> dynamic;
    for (int64_t i : *plan.bPermutation) {
      shape.push_back(type.getDimSize(i));
      if (type.isDynamicDim(i))
        dynamic.push_back(memref::DimOp::create(b, loc, bMatrix, i));
    }
    Value copy = memref::AllocOp::create(
        b, loc, MemRefType::get(shape, type.getElementType()), dynamic,
        b.getI64IntegerAttr(64));
    linalg::TransposeOp::create(b, loc, bMatrix, copy, *plan.bPermutation);
    plan.bDims.clear();
    for (int64_t i : *plan.bPermutation)
      plan.bDims.push_back(plan.bSourceDims[i]);
    return copy;
  }

  int64_t elementBytes() const {
    return std::max<int64_t>(bElement.getIntOrFloatBitWidth() / 8, 1);
  }

  /// The reduction's length per packed panel: a panel of four tiles within
  /// panelBytes, and no longer than a static reduction.
  int64_t chooseReductionChunk() {
    // Over groups of rows, the panel holds all of n's tiles.
    int64_t tiles = 4;
    if (rowsOuter)
      tiles = llvm::divideCeil(
          plan.contraction.op.getStaticLoopRanges()[plan.n], columns);
    int64_t chunk = std::max<int64_t>(
        panelBytes / (tiles * columns * elementBytes()),
        rowsOuter ? kMinChunk : 1);
    SmallVector<int64_t> ranges = plan.contraction.op.getStaticLoopRanges();
    int64_t length = 1;
    for (unsigned dim : plan.reductions) {
      if (ShapedType::isDynamic(ranges[dim]))
        return chunk;
      length *= ranges[dim];
    }
    return std::min(chunk, std::max<int64_t>(length, 1));
  }

  /// Columns per block: as many tiles as keep b's panel (the reduction's
  /// length, or its chunk, × the block) within panelBytes, at least one; 4
  /// tiles where an unpacked reduction's length is dynamic; no more than a
  /// static n has. Where the blocks' loop is the parallel one, at most as
  /// many tiles as leave kMinBlocks blocks.
  int64_t chooseBlockColumns() {
    SmallVector<int64_t> ranges = plan.contraction.op.getStaticLoopRanges();
    int64_t length = 1;
    if (rowsOuter)
      return llvm::divideCeil(ranges[plan.n], columns) * columns;
    if (packed) {
      length = reductionChunk;
    } else {
      for (unsigned dim : plan.reductions) {
        if (ShapedType::isDynamic(ranges[dim]))
          return 4 * columns;
        length *= ranges[dim];
      }
    }
    int64_t tiles = std::max<int64_t>(
        panelBytes / (std::max<int64_t>(length, 1) * elementBytes() * columns),
        1);
    int64_t n = ranges[plan.n];
    if (!ShapedType::isDynamic(n)) {
      int64_t allTiles = std::max<int64_t>(llvm::divideCeil(n, columns), 1);
      tiles = std::min(tiles, allTiles);
      if (plan.outer.empty())
        tiles = std::min<int64_t>(tiles, llvm::divideCeil(allTiles, kMinBlocks));
    }
    return tiles * columns;
  }

  /// The number of reduction steps: the reductions' sizes multiplied.
  Value reductionLength() {
    Value length = sizes[plan.reductions.front()];
    for (unsigned dim : llvm::drop_begin(plan.reductions))
      length = arith::MulIOp::create(b, loc, length, sizes[dim]);
    return length;
  }

  /// The tiles start from zero instead of reading the zeros the fill
  /// wrote (one pass over the output less, and no read of it in the first
  /// chunk); the fill stays only for an empty reduction, which writes no
  /// tile.
  void foldZeroFill() {
    SmallVector<int64_t> ranges = plan.contraction.op.getStaticLoopRanges();
    bool empty = false, maybeEmpty = false;
    for (unsigned dim : plan.reductions) {
      empty |= ranges[dim] == 0;
      maybeEmpty |= ShapedType::isDynamic(ranges[dim]);
    }
    if (empty)
      return; // Only the fill's zeros: the kernel adds nothing to them.
    zeroStart = true;
    if (!maybeEmpty) {
      b.eraseOp(zeroFill);
      return;
    }
    Value none = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       reductionLength(), constant(0));
    auto ifEmpty = scf::IfOp::create(b, loc, none);
    zeroFill->moveBefore(ifEmpty.thenBlock()->getTerminator());
  }

  /// The accumulators of a tile of `tileRows` rows at the start of a chunk
  /// (or of the whole reduction): the output's values, or zeros where the
  /// zero fill is folded and the chunk is the first.
  SmallVector<Value> startTile(int64_t tileRows) {
    auto vectorType = VectorType::get({tileColumns}, b.getF32Type());
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    auto read = [&] {
      SmallVector<Value> acc;
      for (int64_t row = 0; row < tileRows; ++row)
        acc.push_back(vector::TransferReadOp::create(
            b, loc, vectorType, out, indices(plan.outDims, row), zero,
            ArrayRef<bool>{tileInBounds}));
      return acc;
    };
    if (!zeroStart)
      return read();
    Value zeros = arith::ConstantOp::create(
        b, loc, vectorType, DenseElementsAttr::get(vectorType, 0.0f));
    if (!packed)
      return SmallVector<Value>(tileRows, zeros);
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        chunkStart, constant(0));
    SmallVector<Type> types(tileRows, vectorType);
    auto ifFirst = scf::IfOp::create(b, loc, types, first,
                                     /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifFirst.thenBlock());
      scf::YieldOp::create(b, loc, SmallVector<Value>(tileRows, zeros));
      b.setInsertionPointToStart(ifFirst.elseBlock());
      scf::YieldOp::create(b, loc, read());
    }
    return ifFirst.getResults();
  }

  void buildOuter(size_t depth) {
    if (depth == plan.outer.size())
      return rowsOuter ? buildRowGroups() : buildBlocks();
    unsigned dim = plan.outer[depth];
    loop(constant(0), sizes[dim], constant(1), [&](Value iv) {
      ivs[dim] = iv;
      buildOuter(depth + 1);
    });
  }

  /// Blocks of `blockColumns` along n, each done by every row tile; packed,
  /// chunk by chunk of the reduction, b's panel (and a's for a row tile)
  /// copied first.
  void buildBlocks() {
    Value size = sizes[plan.n];
    loop(constant(0), size, constant(blockColumns), [&](Value start) {
      blockStart = start;
      blockEnd = arith::MinUIOp::create(
          b, loc, arith::AddIOp::create(b, loc, start, constant(blockColumns)),
          size);
      if (!packed)
        return buildAllRows();
      buildChunks([&] { buildAllRows(); });
    });
  }

  /// Groups of kGroupTiles row tiles, each over all of n: where a is packed
  /// too, so that each tile's part of a is copied once per chunk rather
  /// than once per block of columns.
  void buildRowGroups() {
    unsigned m = *plan.m;
    Value size = sizes[m];
    int64_t groupRows = rows * kGroupTiles;
    loop(constant(0), size, constant(groupRows), [&](Value start) {
      Value end = arith::MinUIOp::create(
          b, loc, arith::AddIOp::create(b, loc, start, constant(groupRows)),
          size);
      blockStart = constant(0);
      blockEnd = sizes[plan.n];
      buildChunks([&] { buildRows(start, end); });
    });
  }

  /// The panels on the stack of the thread that runs the block or group
  /// (no allocation per block), and the chunks of the reduction, each
  /// packing b's panel before `rowsBody`. A stack save and restore frees
  /// the panels at the end rather than memref.alloca_scope, whose region
  /// would hold several blocks once scf is lowered to branches.
  void buildChunks(function_ref<void()> rowsBody) {
    Value stack = LLVM::StackSaveOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext()));
    panel = memref::AllocaOp::create(
        b, loc,
        MemRefType::get({blockColumns / columns, reductionChunk, columns},
                        bElement),
        ValueRange{}, b.getI64IntegerAttr(64));
    if (packA)
      aPanel = memref::AllocaOp::create(
          b, loc,
          MemRefType::get({reductionChunk, rows},
                          cast<MemRefType>(a.getType()).getElementType()),
          ValueRange{}, b.getI64IntegerAttr(64));
    Value length = reductionLength();
    loop(constant(0), length, constant(reductionChunk), [&](Value k0) {
      chunkStart = k0;
      chunkLength = arith::MinUIOp::create(
          b, loc, constant(reductionChunk),
          arith::SubIOp::create(b, loc, length, k0));
      packB();
      rowsBody();
    });
    LLVM::StackRestoreOp::create(b, loc, stack);
  }

  /// Sets the reduction dimensions' indices to step chunkStart + `kk` of
  /// their linear order (the last dimension fastest).
  void setReductionIndex(Value kk) {
    Value linear = arith::AddIOp::create(b, loc, chunkStart, kk);
    for (unsigned dim : llvm::reverse(llvm::drop_begin(plan.reductions))) {
      ivs[dim] = arith::RemUIOp::create(b, loc, linear, sizes[dim]);
      linear = arith::DivUIOp::create(b, loc, linear, sizes[dim]);
    }
    ivs[plan.reductions.front()] = linear;
  }

  /// The tile of the block that column `n` starts.
  Value tileOf(Value n) {
    return arith::DivUIOp::create(
        b, loc, arith::SubIOp::create(b, loc, n, blockStart),
        constant(columns));
  }

  /// panel[j, kk, c] = b[.., chunkStart + kk, .., n] for the block's column
  /// n = blockStart + j·columns + c, zero past n's end.
  void packB() {
    Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(bElement, 0));
    if (!plan.bPermutation) {
      // n is b's unit-stride dimension: a vector per tile and step.
      loop(constant(0), chunkLength, constant(1), [&](Value kk) {
        setReductionIndex(kk);
        loop(blockStart, blockEnd, constant(columns), [&](Value n) {
          ivs[plan.n] = n;
          Value row = vector::TransferReadOp::create(
              b, loc, VectorType::get({columns}, bElement), bMatrix,
              indices(plan.bSourceDims, 0), zero, ArrayRef<bool>{inBounds});
          vector::TransferWriteOp::create(b, loc, row, panel,
                                          ValueRange{tileOf(n), kk, constant(0)},
                                          ArrayRef<bool>{true});
        });
      });
      return;
    }
    // Element by element, the reduction innermost (b's rows run along it
    // where b is Wᵀ); columns past n's end read its last one and store 0.
    Value last = arith::SubIOp::create(b, loc, sizes[plan.n], constant(1));
    Value width = arith::AddIOp::create(b, loc, blockStart,
                                        constant(blockColumns));
    loop(blockStart, width, constant(1), [&](Value n) {
      Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           n, sizes[plan.n]);
      ivs[plan.n] = arith::MinUIOp::create(b, loc, n, last);
      Value offset = arith::SubIOp::create(b, loc, n, blockStart);
      Value tile = arith::DivUIOp::create(b, loc, offset, constant(columns));
      Value column = arith::RemUIOp::create(b, loc, offset, constant(columns));
      loop(constant(0), chunkLength, constant(1), [&](Value kk) {
        setReductionIndex(kk);
        Value value = memref::LoadOp::create(b, loc, bMatrix,
                                             indices(plan.bSourceDims, 0));
        value = arith::SelectOp::create(b, loc, inside, value, zero);
        memref::StoreOp::create(b, loc, value, panel,
                                ValueRange{tile, kk, column});
      });
    });
  }

  /// aPanel[kk, r] = a[.., m + r, .., chunkStart + kk] for the row tile at
  /// ivs[m]: the tile's scalars of a reduction step side by side.
  void packRows() {
    Type element = cast<MemRefType>(a.getType()).getElementType();
    bool contiguous = plan.aDims.back() == *plan.m && hasUnitStrideRows(a);
    loop(constant(0), chunkLength, constant(1), [&](Value kk) {
      setReductionIndex(kk);
      if (contiguous) {
        // The tile's rows are side by side in a (a = dYᵀ): one vector.
        Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(element, 0));
        Value step = vector::TransferReadOp::create(
            b, loc, VectorType::get({rows}, element), a,
            indices(plan.aDims, 0), zero, ArrayRef<bool>{true});
        vector::TransferWriteOp::create(b, loc, step, aPanel,
                                        ValueRange{kk, constant(0)},
                                        ArrayRef<bool>{true});
        return;
      }
      for (int64_t r = 0; r < rows; ++r) {
        Value value = memref::LoadOp::create(b, loc, a, indices(plan.aDims, r));
        memref::StoreOp::create(b, loc, value, aPanel,
                                ValueRange{kk, constant(r)});
      }
    });
  }

  void buildAllRows() {
    if (!plan.m)
      return buildColumns(1);
    buildRows(constant(0), sizes[*plan.m]);
  }

  /// Tiles of `rows` along m from `first` to `end`, then the rest one row
  /// at a time.
  void buildRows(Value first, Value end) {
    unsigned m = *plan.m;
    Value full = arith::SubIOp::create(
        b, loc, end,
        arith::RemUIOp::create(b, loc,
                               arith::SubIOp::create(b, loc, end, first),
                               constant(rows)));
    loop(first, full, constant(rows), [&](Value iv) {
      ivs[m] = iv;
      if (packA)
        packRows();
      buildColumns(rows);
    });
    loop(full, end, constant(1), [&](Value iv) {
      ivs[m] = iv;
      buildColumns(1);
    });
  }

  /// The indices of an operand whose dimensions are `dims`, with row `row`
  /// of the tile (m offset by it).
  SmallVector<Value> indices(ArrayRef<unsigned> dims, int64_t row) {
    SmallVector<Value> result;
    for (unsigned dim : dims) {
      Value index = ivs.lookup(dim);
      if (plan.m && dim == *plan.m && row > 0)
        index = arith::AddIOp::create(b, loc, index, constant(row));
      result.push_back(index);
    }
    return result;
  }

  /// The block's column tiles for a row tile of `tileRows` rows: all
  /// `columns` wide, or, where n ends in a narrow tile, the full ones and
  /// then that one (in the block that holds it: a loop of at most one
  /// iteration).
  void buildColumns(int64_t tileRows) {
    auto tile = [&](Value n0) {
      ivs[plan.n] = n0;
      if (packed)
        panelTile = tileOf(n0);
      SmallVector<Value> acc = startTile(tileRows);
      acc = packed ? buildChunk(acc, tileRows)
                   : buildReduction(0, acc, tileRows);
      for (int64_t row = 0; row < tileRows; ++row)
        vector::TransferWriteOp::create(b, loc, acc[row], out,
                                        indices(plan.outDims, row),
                                        ArrayRef<bool>{tileInBounds});
    };
    tileColumns = columns;
    if (narrowStart < 0) {
      tileInBounds = inBounds;
      loop(blockStart, blockEnd, constant(columns), tile);
      return;
    }
    Value narrow = constant(narrowStart);
    tileInBounds = true;
    loop(blockStart, arith::MinUIOp::create(b, loc, blockEnd, narrow),
         constant(columns), tile);
    tileColumns = columns / 2;
    tileInBounds = narrowInBounds;
    loop(arith::MaxUIOp::create(b, loc, blockStart, narrow), blockEnd,
         constant(columns), tile);
  }

  SmallVector<Value> buildReduction(size_t depth, ValueRange acc,
                                    int64_t tileRows) {
    if (depth == plan.reductions.size())
      return step(acc, tileRows, /*kk=*/nullptr);
    unsigned dim = plan.reductions[depth];
    auto forOp =
        scf::ForOp::create(b, loc, constant(0), sizes[dim], constant(1), acc);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    ivs[dim] = forOp.getInductionVar();
    SmallVector<Value> next =
        buildReduction(depth + 1, forOp.getRegionIterArgs(), tileRows);
    scf::YieldOp::create(b, loc, next);
    return forOp.getResults();
  }

  /// The packed reduction: the steps of the current chunk.
  SmallVector<Value> buildChunk(ValueRange acc, int64_t tileRows) {
    auto forOp =
        scf::ForOp::create(b, loc, constant(0), chunkLength, constant(1), acc);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    Value kk = forOp.getInductionVar();
    setReductionIndex(kk);
    SmallVector<Value> next = step(forOp.getRegionIterArgs(), tileRows, kk);
    scf::YieldOp::create(b, loc, next);
    return forOp.getResults();
  }

  /// One reduction step: a row of b against a column of a (from the packed
  /// panels at chunk step `kk` where packed).
  SmallVector<Value> step(ValueRange acc, int64_t tileRows, Value kk) {
    Value row;
    if (packed) {
      row = vector::TransferReadOp::create(
          b, loc, VectorType::get({tileColumns}, bElement), panel,
          ValueRange{panelTile, kk, constant(0)},
          arith::ConstantOp::create(b, loc, b.getFloatAttr(bElement, 0.0)),
          ArrayRef<bool>{true});
    } else {
      Value padding =
          arith::ConstantOp::create(b, loc, b.getFloatAttr(bElement, 0.0));
      row = vector::TransferReadOp::create(
          b, loc, VectorType::get({tileColumns}, bElement), bMatrix,
          indices(plan.bDims, 0), padding, ArrayRef<bool>{tileInBounds});
    }
    row = replayCasts(b, loc, bFactor, row);
    bool fromPanel = packA && tileRows == rows;
    SmallVector<Value> next;
    for (int64_t r = 0; r < tileRows; ++r) {
      Value scalar =
          fromPanel
              ? memref::LoadOp::create(b, loc, aPanel,
                                       ValueRange{kk, constant(r)})
                    .getResult()
              : memref::LoadOp::create(b, loc, a, indices(plan.aDims, r))
                    .getResult();
      scalar = replayCasts(b, loc, aFactor, scalar);
      Value splat = vector::BroadcastOp::create(b, loc, row.getType(), scalar);
      next.push_back(vector::FMAOp::create(b, loc, splat, row, acc[r]));
    }
    return next;
  }

  RewriterBase &b;
  KernelPlan plan;
  int64_t rows, columns, panelBytes, blockColumns = 0, reductionChunk = 0;
  /// Where n's narrow last tile starts (-1: none), and whether it is full.
  int64_t narrowStart = -1;
  bool narrowInBounds = false;
  /// The width of the tile being built, and whether it lies within n.
  int64_t tileColumns = 0;
  bool tileInBounds = false;
  Location loc;
  Value blockStart, blockEnd, chunkStart, chunkLength, panelTile;
  SmallVector<Value> sizes;
  llvm::DenseMap<unsigned, Value> ivs;
  Value a, bMatrix, out, aFactor, bFactor, panel, aPanel;
  Type bElement;
  linalg::FillOp zeroFill;
  bool inBounds = false, packed = false, packA = false, rowsOuter = false,
       zeroStart = false;
};

struct SwitchyardCpuContractionKernelsPass
    : public switchyard::impl::SwitchyardCpuContractionKernelsPassBase<
          SwitchyardCpuContractionKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (rows < 1 || columns < 1 || panelKiB < 1) {
      getOperation().emitError()
          << "rows, columns and panel-kib must be positive";
      return signalPassFailure();
    }
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      FailureOr<KernelPlan> plan = planKernel(op, minColumns);
      LLVM_DEBUG(llvm::dbgs()
                 << (succeeded(plan) ? "register-blocked kernel for "
                                     : "left to the loops: ")
                 << op->getName() << " at " << op->getLoc() << "\n");
      if (succeeded(plan))
        KernelBuilder(rewriter, *plan, rows, columns, panelKiB * 1024,
                      switchyard::precedingZeroFill(op))
            .build();
    }
  }
};

} // namespace
