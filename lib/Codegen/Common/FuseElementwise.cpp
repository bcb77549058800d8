//===- FuseElementwise.cpp - elementwise producers into their consumers ---===//
//
// Implements `switchyard-fuse-elementwise`: upstream's elementwise fusion of
// linalg.generic ops on tensors, with the rules that keep Switchyard's
// kernels intact: matmul-like consumers keep plain operands, and a producer
// is fused into a larger iteration space only where it is cheap to compute
// again.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDFUSEELEMENTWISEPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;

namespace {

/// At most this many operations in a producer's body that a consumer
/// recomputes per element of a larger iteration space (a row's mean read
/// by every element of the row).
constexpr int64_t kMaxRecomputedOps = 4;

/// Whether `producer`'s body is cheap enough to compute once per element of
/// a consumer that broadcasts it: a few operations (arithmetic or math
/// functions: a row's reciprocal square root costs the CPU nothing
/// measurable per element, and the GPU a kernel less), no loops and no
/// reads of other tensors.
bool isCheapToRecompute(linalg::GenericOp producer) {
  int64_t count = 0;
  for (Operation &op : producer.getBody()->without_terminator()) {
    if (op.getNumRegions() || isa<tensor::ExtractOp>(op))
      return false;
    if (!isa<linalg::IndexOp>(op))
      ++count;
  }
  return count <= kMaxRecomputedOps;
}

/// How a producer goes into the consumer of one of its results.
enum class Fusion {
  /// Not at all.
  None,
  /// The fused op computes the producer's elements and yields them too
  /// where other ops read them: one op instead of two.
  Merge,
  /// The consumer computes the producer's elements it reads itself, from
  /// a copy of the producer that only it uses; the producer stays for its
  /// other users.
  Recompute,
};

/// Whether, and how, the producer of `operand` goes into its consumer.
Fusion chooseFusion(OpOperand *operand) {
  auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
  auto consumer = dyn_cast<linalg::GenericOp>(operand->getOwner());
  if (!producer || !consumer || !linalg::areElementwiseOpsFusable(operand))
    return Fusion::None;
  // The CPU's register-blocked kernels and the GPU's tensor-core kernels
  // take matmul-like ops with plain factors.
  if (linalg::isaContractionOpInterface(consumer))
    return Fusion::None;
  // A gather stays an op of its own: the consumer's loops vectorize, a
  // gather's indexed reads do not.
  if (producer.getBody()
          ->walk([](tensor::ExtractOp) { return WalkResult::interrupt(); })
          .wasInterrupted())
    return Fusion::None;
  if (!consumer.getMatchingIndexingMap(operand).isPermutation()) {
    // Into a larger iteration space, the producer is computed again for
    // every element that reads it.
    return isCheapToRecompute(producer) ? Fusion::Recompute : Fusion::None;
  }
  // The fused op replaces the producer: its other users must come after the
  // consumer, and read the producer's elements as other results of the
  // fused op, whose loops must then all be parallel.
  Block *block = consumer->getBlock();
  bool otherUsers = false;
  for (Operation *user : producer->getUsers()) {
    if (user == consumer.getOperation())
      continue;
    otherUsers = true;
    Operation *ancestor = block->findAncestorOpInBlock(*user);
    if (!ancestor || !consumer->isBeforeInBlock(ancestor))
      return Fusion::None;
  }
  if (otherUsers && consumer.getNumReductionLoops() > 0)
    return Fusion::None;
  return Fusion::Merge;
}

/// Fuses the producers of a generic op's inputs into it, one at a time.
struct FuseProducers : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    for (OpOperand *operand : consumer.getDpsInputOperands()) {
      Fusion fusion = chooseFusion(operand);
      if (fusion == Fusion::None)
        continue;
      auto result = cast<OpResult>(operand->get());
      Operation *producer = result.getOwner();
      bool otherUses = llvm::any_of(
          producer->getUses(), [&](OpOperand &use) { return &use != operand; });
      if (fusion == Fusion::Recompute && otherUses) {
        rewriter.setInsertionPoint(producer);
        producer = rewriter.clone(*producer);
        rewriter.modifyOpInPlace(consumer, [&] {
          operand->set(producer->getResult(result.getResultNumber()));
        });
      }
      rewriter.setInsertionPoint(consumer);
      FailureOr<linalg::ElementwiseOpFusionResult> fused =
          linalg::fuseElementwiseOps(rewriter, operand);
      if (failed(fused)) {
        if (producer != result.getOwner()) {
          rewriter.modifyOpInPlace(consumer, [&] { operand->set(result); });
          rewriter.eraseOp(producer);
        }
        return failure();
      }
      // The consumer's users read the fused op's results, and so do the
      // producer's other users (all after the consumer).
      for (auto [original, replacement] : fused->replacements)
        rewriter.replaceUsesWithIf(original, replacement, [&](OpOperand &use) {
          return use.getOwner() != fused->fusedOp;
        });
      rewriter.eraseOp(consumer);
      if (producer->use_empty())
        rewriter.eraseOp(producer);
      return success();
    }
    return failure();
  }
};

struct FuseElementwisePass
    : public switchyard::impl::SwitchyardFuseElementwisePassBase<
          FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseProducers>(&getContext());
    // Drops the results nobody reads (a merged producer's, once its users
    // are fused in as well).
    linalg::GenericOp::getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
