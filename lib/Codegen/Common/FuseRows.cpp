//===- FuseRows.cpp - row reductions and their consumers in one loop ------===//
//
// Implements `switchyard-fuse-rows` (see Passes.td): a row reduction and
// the ops that read its rows become one scf.forall over the rows, each op
// computing one row per iteration.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Passes.h"
#include "lib/Codegen/Common/Reductions.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDFUSEROWSPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-fuse-rows"

using namespace mlir;

namespace {

/// Whether `expr` reads one of the first `rows` loops.
bool readsRows(AffineExpr expr, unsigned rows) {
  bool reads = false;
  expr.walk([&](AffineExpr e) {
    if (auto dim = dyn_cast<AffineDimExpr>(e))
      reads |= dim.getPosition() < rows;
  });
  return reads;
}

/// Whether `map`'s first `rows` results are the first `rows` loops, in
/// order, and no other result reads them.
bool startsWithRows(AffineMap map, unsigned rows) {
  if (map.getNumResults() < rows)
    return false;
  for (auto [i, expr] : llvm::enumerate(map.getResults())) {
    if (i < rows) {
      if (expr != getAffineDimExpr(i, map.getContext()))
        return false;
    } else if (readsRows(expr, rows)) {
      return false;
    }
  }
  return true;
}

/// Whether every result of `map` is a row loop by itself or reads none.
bool slicesByRows(AffineMap map, unsigned rows) {
  return llvm::all_of(map.getResults(), [&](AffineExpr expr) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    return (dim && dim.getPosition() < rows) || !readsRows(expr, rows);
  });
}

/// Whether `op`'s body is plain scalar code: no indices, no reads of
/// tensors, no regions.
bool hasScalarBody(linalg::GenericOp op) {
  return llvm::all_of(op.getBody()->getOperations(), [](Operation &inner) {
    return !isa<linalg::IndexOp, tensor::ExtractOp>(inner) &&
           inner.getNumRegions() == 0;
  });
}

/// Whether `op` is a matmul (rows of one factor times columns of the
/// other), which the targets' matmul kernels take; a product with a vector
/// (a row's dot product with a norm's weight) is a row reduction like any
/// other.
bool isMatmulLike(linalg::GenericOp op) {
  if (!linalg::isaContractionOpInterface(op))
    return false;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  return failed(dims) || (!dims->m.empty() && !dims->n.empty());
}

/// The number of rows of a row reduction (parallel loops, then reductions,
/// its one result indexed by the parallel ones), or 0.
unsigned rowReductionRows(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || !op.hasPureTensorSemantics() ||
      isMatmulLike(op) || !hasScalarBody(op))
    return 0;
  unsigned rows = op.getNumParallelLoops();
  if (rows == 0 || op.getNumReductionLoops() == 0)
    return 0;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (unsigned i = 0; i < rows; ++i)
    if (iterators[i] != utils::IteratorType::parallel)
      return 0;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (out.getNumResults() != rows || !startsWithRows(out, rows))
    return 0;
  return rows;
}

/// Whether `op` reduces a small static tensor to one value (a parameter's
/// sum of squares for the gradient norm): a group without rows, one
/// thread block on the GPU where it was one thread.
bool isSmallWholeReduction(linalg::GenericOp op) {
  std::optional<int64_t> elements = switchyard::wholeReductionElements(op);
  return elements && *elements <= switchyard::kMaxBlockReduction &&
         !isMatmulLike(op) && hasScalarBody(op);
}

/// Where a dimension's size comes from: a constant, or the dimension of a
/// value that no op here defines from another (a function argument, a
/// reshape's result).
struct DimSize {
  Value source;
  int64_t dim = 0;
  int64_t constant = ShapedType::kDynamic;
  bool operator==(const DimSize &other) const {
    return source == other.source && dim == other.dim &&
           constant == other.constant;
  }
};

DimSize sizeOf(Value shaped, int64_t dim);

/// The size an index value stands for: a constant or a dimension.
DimSize sizeFrom(Value size) {
  if (std::optional<int64_t> constant = getConstantIntValue(size))
    return {Value(), 0, *constant};
  if (auto dimOp = size.getDefiningOp<tensor::DimOp>())
    if (std::optional<int64_t> index = dimOp.getConstantIndex())
      return sizeOf(dimOp.getSource(), *index);
  return {size, -1, ShapedType::kDynamic};
}

/// Dimension `dim` of `shaped`, traced through the ops that take it from
/// another value: a destination-style op's result has its init's size, an
/// empty tensor its size operand's.
DimSize sizeOf(Value shaped, int64_t dim) {
  auto type = cast<ShapedType>(shaped.getType());
  if (!type.isDynamicDim(dim))
    return {Value(), 0, type.getDimSize(dim)};
  if (auto result = dyn_cast<OpResult>(shaped)) {
    if (auto dps = dyn_cast<DestinationStyleOpInterface>(result.getOwner()))
      return sizeOf(dps.getTiedOpOperand(result)->get(), dim);
    if (auto empty = dyn_cast<tensor::EmptyOp>(result.getOwner()))
      return sizeFrom(empty.getDynamicSize(dim));
  }
  return {shaped, dim, ShapedType::kDynamic};
}

/// A row reduction and the ops that read its rows, in program order.
struct RowGroup {
  unsigned rows = 0;
  SmallVector<linalg::GenericOp> ops;
  /// Where each row loop's size is known to come from: the dimensions
  /// that the group's ops index by that loop alone.
  SmallVector<SmallVector<DimSize>> rowSizes;

  /// The sizes of `op`'s row loops, as the dimensions of its operands that
  /// it indexes by one row loop alone.
  SmallVector<SmallVector<DimSize>> sizesOf(linalg::GenericOp op) const {
    SmallVector<SmallVector<DimSize>> sizes(rows);
    for (OpOperand &operand : op->getOpOperands()) {
      AffineMap map = op.getMatchingIndexingMap(&operand);
      for (auto [position, expr] : llvm::enumerate(map.getResults()))
        if (auto dim = dyn_cast<AffineDimExpr>(expr))
          if (dim.getPosition() < rows)
            sizes[dim.getPosition()].push_back(sizeOf(operand.get(), position));
    }
    return sizes;
  }

  void add(linalg::GenericOp op) {
    ops.push_back(op);
    for (auto [known, sizes] : llvm::zip(rowSizes, sizesOf(op)))
      known.append(sizes);
  }

  bool contains(Operation *op) const {
    return llvm::is_contained(ops, dyn_cast<linalg::GenericOp>(op));
  }
  /// Whether `op` or an op in its regions reads a result of the group.
  bool readsGroup(Operation *op) const {
    WalkResult walk = op->walk([&](Operation *inner) {
      return llvm::any_of(inner->getOperands(),
                          [&](Value v) {
                            return v.getDefiningOp() &&
                                   contains(v.getDefiningOp());
                          })
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    });
    return walk.wasInterrupted();
  }
};

/// Whether `op` can join `group`: see the pass description.
bool canJoin(const RowGroup &group, linalg::GenericOp op) {
  unsigned rows = group.rows;
  if (!op.hasPureTensorSemantics() || isMatmulLike(op) || !hasScalarBody(op) ||
      op.getNumLoops() < rows)
    return false;
  // Without rows, the group is one thread block: only small reductions
  // and scalar ops join it.
  if (rows == 0 && op.getNumLoops() != 0 && !isSmallWholeReduction(op))
    return false;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (unsigned i = 0; i < rows; ++i)
    if (iterators[i] != utils::IteratorType::parallel)
      return false;
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    bool internal = operand.get().getDefiningOp() &&
                    group.contains(operand.get().getDefiningOp());
    bool init = op.isDpsInit(&operand);
    if (internal && init)
      return false;
    if (internal || init) {
      if (!startsWithRows(map, rows))
        return false;
    } else if (!slicesByRows(map, rows)) {
      return false;
    }
  }
  // The same rows: each row loop's size equals the group's, known from a
  // dimension they share or from a result of the group read by the rows
  // (an operand's dimension equals the loop's that indexes it).
  if (group.readsGroup(op))
    return true;
  for (auto [known, sizes] : llvm::zip(group.rowSizes, group.sizesOf(op)))
    if (llvm::none_of(sizes, [&](const DimSize &size) {
          return llvm::is_contained(known, size);
        }))
      return false;
  return true;
}

/// `map` without its row results and its row loops.
AffineMap dropRows(AffineMap map, unsigned rows) {
  SmallVector<AffineExpr> results;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (dim && dim.getPosition() < rows)
      continue;
    results.push_back(expr.shiftDims(map.getNumDims(), -int64_t(rows)));
  }
  return AffineMap::get(map.getNumDims() - rows, 0, results, map.getContext());
}

/// The slice of `source` that one row of an op reading it through `map`
/// reads: each result that is a row loop fixed at that row's index and
/// dropped, the others whole.
struct RowSlice {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  SmallVector<int64_t> shape;
  bool sliced = false;
};

RowSlice rowSlice(OpBuilder &b, Location loc, Value source, AffineMap map,
                  ValueRange rowIndices) {
  RowSlice slice;
  auto type = cast<RankedTensorType>(source.getType());
  for (auto [i, expr] : llvm::enumerate(map.getResults())) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    slice.strides.push_back(b.getIndexAttr(1));
    if (dim && dim.getPosition() < rowIndices.size()) {
      slice.offsets.push_back(rowIndices[dim.getPosition()]);
      slice.sizes.push_back(b.getIndexAttr(1));
      slice.sliced = true;
      continue;
    }
    slice.offsets.push_back(b.getIndexAttr(0));
    slice.sizes.push_back(tensor::getMixedSize(b, loc, source, i));
    slice.shape.push_back(type.getDimSize(i));
  }
  return slice;
}

Value extractRow(OpBuilder &b, Location loc, Value source, const RowSlice &s) {
  auto type = cast<RankedTensorType>(source.getType());
  auto rowType = RankedTensorType::get(s.shape, type.getElementType());
  return tensor::ExtractSliceOp::create(b, loc, rowType, source, s.offsets,
                                        s.sizes, s.strides);
}

/// Replaces `group`'s ops with one scf.forall over its rows.
void fuseGroup(RewriterBase &rewriter, const RowGroup &group) {
  unsigned rows = group.rows;
  linalg::GenericOp last = group.ops.back();
  Location loc = last.getLoc();
  MLIRContext *ctx = rewriter.getContext();
  rewriter.setInsertionPoint(last);

  // The full-sized results, one per init of each op, in order: a fresh
  // tensor where an op starts from a fill (made per row inside the loop)
  // or overwrites its init without reading it (all its loops parallel, so
  // that it writes every element: bufferization would otherwise copy the
  // init into the loop's result first), the op's own init otherwise.
  SmallVector<Value> sharedOuts;
  SmallVector<linalg::FillOp> fills;
  for (linalg::GenericOp op : group.ops) {
    bool overwrites = op.getNumReductionLoops() == 0;
    for (OpOperand &initOperand : op.getDpsInitsMutable()) {
      Value init = initOperand.get();
      auto fill = init.getDefiningOp<linalg::FillOp>();
      fills.push_back(fill);
      if (fill ||
          (overwrites && !op.payloadUsesValueFromOperand(&initOperand))) {
        SmallVector<OpFoldResult> sizes =
            tensor::getMixedSizes(rewriter, loc, init);
        init = tensor::EmptyOp::create(
            rewriter, loc, sizes,
            cast<RankedTensorType>(init.getType()).getElementType());
      }
      sharedOuts.push_back(init);
    }
  }
  // A group without rows: a loop of one iteration (one thread block).
  SmallVector<OpFoldResult> rowSizes;
  for (unsigned i = 0; i < rows; ++i)
    rowSizes.push_back(
        tensor::getMixedSize(rewriter, loc, sharedOuts.front(), i));
  if (rows == 0)
    rowSizes.push_back(rewriter.getIndexAttr(1));
  SmallVector<Attribute> mapping;
  for (unsigned i = 0; i < rowSizes.size(); ++i)
    mapping.push_back(gpu::GPUBlockMappingAttr::get(
        ctx, static_cast<gpu::MappingId>(
                 static_cast<unsigned>(gpu::MappingId::LinearDim0) + i)));
  auto forall = scf::ForallOp::create(rewriter, loc, rowSizes, sharedOuts,
                                      rewriter.getArrayAttr(mapping));

  Block *body = forall.getBody();
  SmallVector<Value> rowIndices(
      llvm::drop_begin(forall.getInductionVars(), rows == 0 ? 1 : 0));
  rewriter.setInsertionPointToStart(body);
  IRMapping rowsOf; // a group op's result -> its row
  SmallVector<RowSlice, 4> outSlices;
  SmallVector<Value> rowResults;
  for (linalg::GenericOp op : group.ops) {
    SmallVector<Value> inputs, inits;
    SmallVector<AffineMap> maps;
    for (OpOperand *operand : op.getDpsInputOperands()) {
      AffineMap map = op.getMatchingIndexingMap(operand);
      maps.push_back(dropRows(map, rows));
      if (Value row = rowsOf.lookupOrNull(operand->get())) {
        inputs.push_back(row);
        continue;
      }
      RowSlice slice = rowSlice(rewriter, loc, operand->get(), map, rowIndices);
      inputs.push_back(slice.sliced
                           ? extractRow(rewriter, loc, operand->get(), slice)
                           : operand->get());
    }
    for (OpOperand &initOperand : op.getDpsInitsMutable()) {
      AffineMap outMap = op.getMatchingIndexingMap(&initOperand);
      maps.push_back(dropRows(outMap, rows));
      unsigned index = outSlices.size();
      Value shared = forall.getRegionIterArgs()[index];
      RowSlice outSlice = rowSlice(rewriter, loc, shared, outMap, rowIndices);
      Value init = extractRow(rewriter, loc, shared, outSlice);
      if (linalg::FillOp fill = fills[index])
        init =
            linalg::FillOp::create(rewriter, fill.getLoc(), fill.value(), init)
                .getResult(0);
      inits.push_back(init);
      outSlices.push_back(outSlice);
    }
    SmallVector<utils::IteratorType> iterators(
        llvm::drop_begin(op.getIteratorTypesArray(), rows));
    auto rowOp = linalg::GenericOp::create(rewriter, op.getLoc(),
                                           ValueRange(inits).getTypes(), inputs,
                                           inits, maps, iterators);
    rewriter.cloneRegionBefore(op.getRegion(), rowOp.getRegion(),
                               rowOp.getRegion().end());
    for (auto [result, row] :
         llvm::zip(op->getResults(), rowOp->getResults())) {
      rowsOf.map(result, row);
      rowResults.push_back(row);
    }
  }
  rewriter.setInsertionPointToStart(forall.getTerminator().getBody());
  for (auto [index, row] : llvm::enumerate(rowResults)) {
    const RowSlice &s = outSlices[index];
    tensor::ParallelInsertSliceOp::create(rewriter, loc, row,
                                          forall.getRegionIterArgs()[index],
                                          s.offsets, s.sizes, s.strides);
  }

  unsigned next = 0;
  for (linalg::GenericOp op : group.ops)
    for (Value result : op->getResults())
      rewriter.replaceAllUsesWith(result, forall.getResult(next++));
  for (linalg::GenericOp op : llvm::reverse(group.ops))
    rewriter.eraseOp(op);
  // Each fill once: ops of the group may start from the same one.
  llvm::SmallSetVector<Operation *, 4> unused;
  for (linalg::FillOp fill : fills)
    if (fill && fill->use_empty())
      unused.insert(fill);
  for (Operation *fill : unused)
    rewriter.eraseOp(fill);
}

struct SwitchyardFuseRowsPass
    : public switchyard::impl::SwitchyardFuseRowsPassBase<
          SwitchyardFuseRowsPass> {
  void runOnOperation() override {
    SmallVector<RowGroup> groups;
    getOperation().walk([&](func::FuncOp func) {
      for (Block &block : func.getBody()) {
        RowGroup group;
        auto close = [&] {
          if (!group.ops.empty())
            groups.push_back(std::move(group));
          group = RowGroup();
        };
        for (Operation &op : block) {
          auto generic = dyn_cast<linalg::GenericOp>(op);
          if (!group.ops.empty() && generic && canJoin(group, generic)) {
            group.add(generic);
            continue;
          }
          if (!group.ops.empty() && group.readsGroup(&op))
            close();
          unsigned rows = generic ? rowReductionRows(generic) : 0;
          if (rows || (generic && isSmallWholeReduction(generic))) {
            close();
            group.rows = rows;
            group.rowSizes.resize(rows);
            group.add(generic);
          }
        }
        close();
      }
    });
    IRRewriter rewriter(&getContext());
    for (const RowGroup &group : groups) {
      LLVM_DEBUG(llvm::dbgs()
                 << "fusing " << group.ops.size() << " ops over " << group.rows
                 << " row loops at " << group.ops.front().getLoc() << "\n");
      fuseGroup(rewriter, group);
    }
  }
};

} // namespace
