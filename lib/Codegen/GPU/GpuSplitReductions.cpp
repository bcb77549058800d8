//===- GpuSplitReductions.cpp - reductions with few threads, in two steps -===//
//
// Implements `switchyard-gpu-split-reductions`. The GPU pipeline gives a
// linalg op one thread per point of its parallel dimensions, each running
// the reductions in order. A reduction into a scalar (a loss, the squared
// norm of a gradient for clipping) has no parallel dimension at all and,
// left alone, runs as host code in a single-thread kernel
// (switchyard-gpu-launch-host-compute), which over a model's parameters
// takes most of a training step. A reduction into a vector over many rows (a
// bias or norm gradient: 412 threads summing 4096 rows each) leaves most of
// the GPU idle. Here the trailing reduction dimensions of such an op become
// parallel dimensions of a buffer of partial results (each thread combining
// along the leading reduction dimensions, consecutive threads reading
// consecutive elements), and a second op combines the partial results into
// the op's output; that op is split in turn if it qualifies.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Reductions.h"
#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUSPLITREDUCTIONSPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-split-reductions"

using namespace mlir;

namespace {
/// The combiner of `op` if it is a reduction the pass can split: on
/// buffers, one output indexed by parallel dimensions only, at least two
/// reduction dimensions, and a body that combines the output's value with
/// one other value through a single op with a neutral element (arith.addf,
/// arith.maximumf, ...); null otherwise.
Operation *bufferReductionCombiner(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() < 2)
    return nullptr;
  AffineMap output = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (AffineExpr result : output.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(result);
    if (!dim || iterators[dim.getPosition()] != utils::IteratorType::parallel)
      return nullptr;
  }
  return switchyard::splittableCombiner(op);
}

struct SwitchyardGpuSplitReductionsPass
    : public switchyard::impl::SwitchyardGpuSplitReductionsPassBase<
          SwitchyardGpuSplitReductionsPass> {
  using Base::Base;

  /// The reduction dimensions of `op` to make parallel: the trailing ones,
  /// the fewest with which the parallel extent reaches minThreads (a
  /// dynamic extent counts as reaching it), keeping at least one. None
  /// where the parallel extent reaches minThreads already or the op is
  /// statically smaller than minElements.
  SmallVector<unsigned> dimsToParallelize(linalg::GenericOp op) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    int64_t total = 1, threads = 1;
    SmallVector<unsigned> reductions;
    for (auto [dim, range] : llvm::enumerate(ranges)) {
      bool dynamic = ShapedType::isDynamic(range);
      if (!ShapedType::isDynamic(total))
        total = dynamic ? ShapedType::kDynamic : total * range;
      if (iterators[dim] == utils::IteratorType::reduction)
        reductions.push_back(dim);
      else
        threads = dynamic ? minThreads : threads * range;
    }
    if ((!ShapedType::isDynamic(total) && total < minElements) ||
        threads >= minThreads)
      return {};
    SmallVector<unsigned> promoted;
    while (promoted.size() + 1 < reductions.size() && threads < minThreads) {
      unsigned dim = reductions[reductions.size() - 1 - promoted.size()];
      threads = ShapedType::isDynamic(ranges[dim]) ? minThreads
                                                   : threads * ranges[dim];
      promoted.push_back(dim);
    }
    return promoted;
  }

  /// Splits `op` (a reduction with `combiner`), making `promoted` parallel
  /// in a buffer of partial results; returns the op that combines them.
  linalg::GenericOp split(IRRewriter &rewriter, linalg::GenericOp op,
                          Operation *combiner, ArrayRef<unsigned> promoted) {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    unsigned loops = op.getNumLoops();
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    rewriter.setInsertionPoint(op);

    // The partial results: one per point of the parallel and promoted
    // dimensions (in dimension order), set to the combiner's neutral
    // element.
    SmallVector<unsigned> kept;
    for (unsigned dim = 0; dim < loops; ++dim)
      if (iterators[dim] == utils::IteratorType::parallel ||
          llvm::is_contained(promoted, dim))
        kept.push_back(dim);
    SmallVector<Range> ranges =
        cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(rewriter,
                                                                   loc);
    SmallVector<int64_t> shape;
    SmallVector<Value> dynamicSizes;
    SmallVector<AffineExpr> keptExprs;
    for (unsigned dim : kept) {
      OpFoldResult size = ranges[dim].size;
      if (std::optional<int64_t> known = getConstantIntValue(size)) {
        shape.push_back(*known);
      } else {
        shape.push_back(ShapedType::kDynamic);
        dynamicSizes.push_back(cast<Value>(size));
      }
      keptExprs.push_back(rewriter.getAffineDimExpr(dim));
    }
    Type elementType = op.getRegionOutputArgs()[0].getType();
    Value partial =
        gpu::AllocOp::create(rewriter, loc, MemRefType::get(shape, elementType),
                             /*asyncToken=*/Type(),
                             /*asyncDependencies=*/ValueRange(), dynamicSizes,
                             /*symbolOperands=*/ValueRange(),
                             /*hostShared=*/false)
            .getMemref();
    Value neutral = arith::ConstantOp::create(
        rewriter, loc, *arith::getNeutralElement(combiner));
    linalg::FillOp::create(rewriter, loc, neutral, partial);

    // The original op with the promoted dimensions parallel, into the
    // partial results (the same dimensions: linalg.index is unchanged).
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    AffineMap output = maps.back();
    maps.back() = AffineMap::get(loops, 0, keptExprs, context);
    SmallVector<utils::IteratorType> partialIterators = iterators;
    for (unsigned dim : promoted)
      partialIterators[dim] = utils::IteratorType::parallel;
    auto partialOp = linalg::GenericOp::create(
        rewriter, loc, TypeRange(), op.getDpsInputs(), ValueRange{partial},
        maps, partialIterators);
    rewriter.cloneRegionBefore(op.getRegion(), partialOp.getRegion(),
                               partialOp.getRegion().begin());

    // The partial results combined into the original output (its values
    // taken in once, as the original op took them): the kept dimensions,
    // the promoted ones reductions again.
    SmallVector<AffineExpr> outputExprs;
    for (AffineExpr result : output.getResults()) {
      unsigned dim = cast<AffineDimExpr>(result).getPosition();
      outputExprs.push_back(rewriter.getAffineDimExpr(
          llvm::find(kept, dim) - kept.begin()));
    }
    SmallVector<utils::IteratorType> combineIterators;
    for (unsigned dim : kept)
      combineIterators.push_back(iterators[dim]);
    SmallVector<AffineMap> combineMaps = {
        rewriter.getMultiDimIdentityMap(kept.size()),
        AffineMap::get(kept.size(), 0, outputExprs, context)};
    Value accumulator = op.getRegionOutputArgs()[0];
    auto combineOp = linalg::GenericOp::create(
        rewriter, loc, TypeRange(), ValueRange{partial},
        ValueRange{op.getDpsInits()[0]}, combineMaps, combineIterators,
        [&](OpBuilder &builder, Location bodyLoc, ValueRange args) {
          IRMapping mapping;
          for (Value operand : combiner->getOperands())
            mapping.map(operand, operand == accumulator ? args[1] : args[0]);
          Operation *combined = builder.clone(*combiner, mapping);
          linalg::YieldOp::create(builder, bodyLoc, combined->getResult(0));
        });
    gpu::DeallocOp::create(rewriter, loc, /*asyncToken=*/Type(),
                           /*asyncDependencies=*/ValueRange(), partial);
    rewriter.eraseOp(op);
    return combineOp;
  }

  void runOnOperation() override {
    SmallVector<linalg::GenericOp> worklist;
    getOperation().walk([&](linalg::GenericOp op) {
      if (bufferReductionCombiner(op))
        worklist.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    while (!worklist.empty()) {
      linalg::GenericOp op = worklist.pop_back_val();
      Operation *combiner = bufferReductionCombiner(op);
      if (!combiner)
        continue;
      SmallVector<unsigned> promoted = dimsToParallelize(op);
      if (promoted.empty())
        continue;
      LLVM_DEBUG({
        llvm::dbgs() << "splitting the " << combiner->getName()
                     << " reduction at " << op.getLoc()
                     << ": reduction dimensions ";
        llvm::interleaveComma(promoted, llvm::dbgs());
        llvm::dbgs() << " made parallel\n";
      });
      linalg::GenericOp combineOp = split(rewriter, op, combiner, promoted);
      if (bufferReductionCombiner(combineOp))
        worklist.push_back(combineOp);
    }
  }
};
} // namespace
