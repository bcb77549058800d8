//===- SplitWholeReductions.cpp - big reductions to one value, by rows ----===//
//
// Implements `switchyard-split-whole-reductions` (see Passes.td): a
// reduction of a large static tensor to one value becomes partial
// reductions over rows of consecutive elements, then the reduction of the
// partial results, so that switchyard-fuse-rows gives each its thread
// block.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Passes.h"
#include "lib/Codegen/Common/Reductions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/Debug.h"

#include <cstdlib>

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDSPLITWHOLEREDUCTIONSPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-split-whole-reductions"

using namespace mlir;

namespace {

/// The fewest elements a row of partial reduction has (a thread block's
/// threads each combine several).
constexpr int64_t kMinRowElements = 1024;

/// The combiner of `op` if it is a reduction of a whole static tensor to
/// one value that can be split (wholeReductionElements): every input read
/// whole in loop order, a scalar body whose result combines the
/// accumulator with one other value through a single op with a neutral
/// element (arith.addf, arith.maximumf, ...); null otherwise.
Operation *wholeReductionCombiner(linalg::GenericOp op) {
  AffineMap identity =
      AffineMap::getMultiDimIdentityMap(op.getNumLoops(), op.getContext());
  for (OpOperand *input : op.getDpsInputOperands())
    if (op.getMatchingIndexingMap(input) != identity)
      return nullptr;
  if (llvm::any_of(op.getBody()->getOperations(), [](Operation &inner) {
        return isa<linalg::IndexOp>(inner) || inner.getNumRegions() != 0;
      }))
    return nullptr;
  return switchyard::splittableCombiner(op);
}

struct SwitchyardSplitWholeReductionsPass
    : public switchyard::impl::SwitchyardSplitWholeReductionsPassBase<
          SwitchyardSplitWholeReductionsPass> {
  using Base::Base;

  /// The number of rows for `elements`: the divisor of `elements` nearest
  /// to elements / rowElements whose rows have at least kMinRowElements
  /// elements; 1 (no split) where there is none but 1.
  int64_t rowsFor(int64_t elements) const {
    int64_t target = llvm::divideCeil(elements, rowElements);
    int64_t best = 1;
    for (int64_t rows = 2; rows * kMinRowElements <= elements; ++rows)
      if (elements % rows == 0 &&
          std::llabs(rows - target) < std::llabs(best - target))
        best = rows;
    return best;
  }

  /// Splits `op`, a reduction to one value with `combiner`, into `rows`
  /// partial reductions and the reduction of their results.
  void split(IRRewriter &rewriter, linalg::GenericOp op, Operation *combiner,
             int64_t elements, int64_t rows) {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    rewriter.setInsertionPoint(op);
    int64_t columns = elements / rows;

    // Each input as [rows, columns]: its elements in order (a view once in
    // buffers).
    SmallVector<Value> inputs;
    for (Value input : op.getDpsInputs()) {
      auto type = cast<RankedTensorType>(input.getType());
      Value flat = input;
      if (type.getRank() != 1) {
        ReassociationIndices all;
        for (int64_t d = 0; d < type.getRank(); ++d)
          all.push_back(d);
        flat = tensor::CollapseShapeOp::create(rewriter, loc, input,
                                               ArrayRef<ReassociationIndices>{all});
      }
      inputs.push_back(tensor::ExpandShapeOp::create(
          rewriter, loc,
          RankedTensorType::get({rows, columns}, type.getElementType()), flat,
          ArrayRef<ReassociationIndices>{{0, 1}}));
    }

    // The partial results, from the combiner's neutral element; the body
    // as it was.
    Type resultType = op->getResult(0).getType();
    Type elementType = cast<RankedTensorType>(resultType).getElementType();
    Value neutral = arith::ConstantOp::create(
        rewriter, loc, *arith::getNeutralElement(combiner));
    Value empty = tensor::EmptyOp::create(rewriter, loc, {rows}, elementType);
    Value init =
        linalg::FillOp::create(rewriter, loc, neutral, empty).getResult(0);
    AffineMap rowMap = AffineMap::get(
        2, 0, {getAffineDimExpr(0, context)}, context);
    SmallVector<AffineMap> maps(inputs.size(),
                                AffineMap::getMultiDimIdentityMap(2, context));
    maps.push_back(rowMap);
    auto partial = linalg::GenericOp::create(
        rewriter, loc, TypeRange{init.getType()}, inputs, ValueRange{init},
        maps,
        {utils::IteratorType::parallel, utils::IteratorType::reduction});
    rewriter.cloneRegionBefore(op.getRegion(), partial.getRegion(),
                               partial.getRegion().end());

    // The partial results combined into the op's output.
    Value accumulator = op.getRegionOutputArgs()[0];
    auto final = linalg::GenericOp::create(
        rewriter, loc, TypeRange{resultType}, ValueRange{partial.getResult(0)},
        op.getDpsInits(),
        {AffineMap::getMultiDimIdentityMap(1, context),
         AffineMap::get(1, 0, {}, context)},
        {utils::IteratorType::reduction},
        [&](OpBuilder &b, Location bodyLoc, ValueRange args) {
          IRMapping map;
          for (Value operand : combiner->getOperands())
            map.map(operand, operand == accumulator ? args[1] : args[0]);
          Operation *combined = b.clone(*combiner, map);
          combined->setLoc(bodyLoc);
          linalg::YieldOp::create(b, bodyLoc, combined->getResults());
        });
    rewriter.replaceOp(op, final->getResults());
  }

  void runOnOperation() override {
    struct Candidate {
      linalg::GenericOp op;
      Operation *combiner;
      int64_t elements;
    };
    SmallVector<Candidate> candidates;
    getOperation().walk([&](linalg::GenericOp op) {
      std::optional<int64_t> elements = switchyard::wholeReductionElements(op);
      if (!elements || *elements <= maxUnsplit)
        return;
      if (Operation *combiner = wholeReductionCombiner(op))
        candidates.push_back({op, combiner, *elements});
    });
    IRRewriter rewriter(&getContext());
    for (auto [op, combiner, elements] : candidates) {
      int64_t rows = rowsFor(elements);
      if (rows == 1)
        continue;
      LLVM_DEBUG(llvm::dbgs() << "splitting a reduction of " << elements
                              << " elements into " << rows << " rows at "
                              << op.getLoc() << "\n");
      split(rewriter, op, combiner, elements, rows);
    }
  }
};

} // namespace
