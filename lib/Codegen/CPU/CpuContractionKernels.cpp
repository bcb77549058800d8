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
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
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
  /// Where b's dimensions must be permuted so that n is last: the order.
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
    SmallVector<unsigned> permuted;
    for (int64_t i : permutation)
      permuted.push_back(plan.bDims[i]);
    plan.bDims = permuted;
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

/// Builds the kernel of `plan` in place of its op.
class KernelBuilder {
public:
  KernelBuilder(RewriterBase &rewriter, KernelPlan plan, int64_t rows,
                int64_t columns, int64_t panelBytes)
      : b(rewriter), plan(std::move(plan)), rows(rows), columns(columns),
        panelBytes(panelBytes), loc(this->plan.contraction.op.getLoc()) {}

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

    Value packed;
    if (plan.bPermutation) {
      auto type = cast<MemRefType>(bMatrix.getType());
      SmallVector<int64_t> shape;
      SmallVector<Value> dynamic;
      for (int64_t i : *plan.bPermutation) {
        shape.push_back(type.getDimSize(i));
        if (type.isDynamicDim(i))
          dynamic.push_back(memref::DimOp::create(b, loc, bMatrix, i));
      }
      packed = memref::AllocOp::create(
          b, loc, MemRefType::get(shape, type.getElementType()), dynamic,
          b.getI64IntegerAttr(64));
      linalg::TransposeOp::create(b, loc, bMatrix, packed, *plan.bPermutation);
      bMatrix = packed;
    }

    auto outType = cast<MemRefType>(out.getType());
    inBounds = !outType.isDynamicDim(outType.getRank() - 1) &&
               outType.getShape().back() % columns == 0;
    blockColumns = chooseBlockColumns();
    LLVM_DEBUG(llvm::dbgs()
               << "  " << rows << " x " << columns << " register tile, "
               << blockColumns << " columns per block, b "
               << (plan.bPermutation ? "transposed" : "in place")
               << (inBounds ? "" : ", last columns masked") << "\n");
    buildOuter(0);
    if (packed)
      memref::DeallocOp::create(b, loc, packed);
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

  /// Columns per block: as many tiles as keep b's panel (the reduction's
  /// length × the block) within panelBytes, at least one; 4 tiles where the
  /// reduction's length is dynamic.
  int64_t chooseBlockColumns() {
    SmallVector<int64_t> ranges = plan.contraction.op.getStaticLoopRanges();
    int64_t length = 1;
    for (unsigned dim : plan.reductions) {
      if (ShapedType::isDynamic(ranges[dim]))
        return 4 * columns;
      length *= ranges[dim];
    }
    int64_t elementBytes =
        cast<MemRefType>(bMatrix.getType()).getElementTypeBitWidth() / 8;
    int64_t tiles = panelBytes / (std::max<int64_t>(length, 1) * elementBytes *
                                  columns);
    return std::max<int64_t>(tiles, 1) * columns;
  }

  void buildOuter(size_t depth) {
    if (depth == plan.outer.size())
      return buildBlocks();
    unsigned dim = plan.outer[depth];
    loop(constant(0), sizes[dim], constant(1), [&](Value iv) {
      ivs[dim] = iv;
      buildOuter(depth + 1);
    });
  }

  /// Blocks of `blockColumns` along n, each done by every row tile.
  void buildBlocks() {
    Value size = sizes[plan.n];
    loop(constant(0), size, constant(blockColumns), [&](Value start) {
      blockStart = start;
      blockEnd = arith::MinUIOp::create(
          b, loc, arith::AddIOp::create(b, loc, start, constant(blockColumns)),
          size);
      buildRows();
    });
  }

  /// Tiles of `rows` along m, then the rest one row at a time.
  void buildRows() {
    if (!plan.m)
      return buildColumns(1);
    unsigned m = *plan.m;
    Value size = sizes[m];
    Value full = arith::SubIOp::create(
        b, loc, size, arith::RemUIOp::create(b, loc, size, constant(rows)));
    loop(constant(0), full, constant(rows), [&](Value iv) {
      ivs[m] = iv;
      buildColumns(rows);
    });
    loop(full, size, constant(1), [&](Value iv) {
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

  void buildColumns(int64_t tileRows) {
    loop(blockStart, blockEnd, constant(columns), [&](Value n0) {
      ivs[plan.n] = n0;
      auto vectorType = VectorType::get({columns}, b.getF32Type());
      Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
      SmallVector<Value> acc;
      for (int64_t row = 0; row < tileRows; ++row)
        acc.push_back(vector::TransferReadOp::create(
            b, loc, vectorType, out, indices(plan.outDims, row), zero,
            ArrayRef<bool>{inBounds}));
      acc = buildReduction(0, acc, tileRows);
      for (int64_t row = 0; row < tileRows; ++row)
        vector::TransferWriteOp::create(b, loc, acc[row], out,
                                        indices(plan.outDims, row),
                                        ArrayRef<bool>{inBounds});
    });
  }

  SmallVector<Value> buildReduction(size_t depth, ValueRange acc,
                                    int64_t tileRows) {
    if (depth == plan.reductions.size())
      return step(acc, tileRows);
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

  /// One reduction step: a row of b against a column of a.
  SmallVector<Value> step(ValueRange acc, int64_t tileRows) {
    auto bElement = cast<MemRefType>(bMatrix.getType()).getElementType();
    Value padding =
        arith::ConstantOp::create(b, loc, b.getFloatAttr(bElement, 0.0));
    Value row = vector::TransferReadOp::create(
        b, loc, VectorType::get({columns}, bElement), bMatrix,
        indices(plan.bDims, 0), padding, ArrayRef<bool>{inBounds});
    row = replayCasts(b, loc, bFactor, row);
    SmallVector<Value> next;
    for (int64_t r = 0; r < tileRows; ++r) {
      Value scalar = memref::LoadOp::create(b, loc, a, indices(plan.aDims, r));
      scalar = replayCasts(b, loc, aFactor, scalar);
      Value splat = vector::BroadcastOp::create(b, loc, row.getType(), scalar);
      next.push_back(vector::FMAOp::create(b, loc, splat, row, acc[r]));
    }
    return next;
  }

  RewriterBase &b;
  KernelPlan plan;
  int64_t rows, columns, panelBytes, blockColumns = 0;
  Location loc;
  Value blockStart, blockEnd;
  SmallVector<Value> sizes;
  llvm::DenseMap<unsigned, Value> ivs;
  Value a, bMatrix, out, aFactor, bFactor;
  bool inBounds = false;
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
        KernelBuilder(rewriter, *plan, rows, columns, panelKiB * 1024).build();
    }
  }
};

} // namespace
