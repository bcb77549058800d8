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

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDCPUMATHAPPROXIMATIONPASS
#include "lib/Codegen/CPU/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;

namespace {

struct SwitchyardCpuMathApproximationPass
    : public switchyard::impl::SwitchyardCpuMathApproximationPassBase<
          SwitchyardCpuMathApproximationPass> {
  using Base::Base;

  void runOnOperation() override {
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
