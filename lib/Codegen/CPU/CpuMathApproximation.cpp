//===- CpuMathApproximation.cpp - polynomial exp and log on the CPU -------===//
//
// Implements `switchyard-cpu-math-approximation` (see Passes.td) with
// upstream's polynomial approximation patterns.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDCPUMATHAPPROXIMATIONPASS
#include "lib/Codegen/CPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-cpu-math-approximation"

using namespace mlir;

namespace {

struct SwitchyardCpuMathApproximationPass
    : public switchyard::impl::SwitchyardCpuMathApproximationPassBase<
          SwitchyardCpuMathApproximationPass> {
  using Base::Base;

  void runOnOperation() override {
    LLVM_DEBUG({
      unsigned count = 0;
      getOperation().walk([&](Operation *op) {
        if (isa<math::ExpOp, math::LogOp>(op))
          ++count;
      });
      llvm::dbgs() << "@" << getOperation().getName() << ": " << count
                   << " math.exp / math.log to approximate where f32\n";
    });
    RewritePatternSet patterns(&getContext());
    // The predicate sees operation names ("math.exp").
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
      return name == math::ExpOp::getOperationName() ||
             name == math::LogOp::getOperationName();
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
