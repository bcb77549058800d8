//===- InitSwitchyard.cpp - register Switchyard dialects and passes -------===//
//
// Implements the registration entry points used by switchyard-opt, the
// driver and the unit tests.
//
//===----------------------------------------------------------------------===//

#include "dialect/InitSwitchyard.h"
#include "dialect/Lm/IR/LmDialect.h"
#include "dialect/Lm/Transforms/Passes.h"
#include "dialect/Moe/IR/MoeDialect.h"
#include "dialect/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void mlir::switchyard::registerDialects(DialectRegistry &registry) {
  registry.insert<lm::LmDialect, moe::MoeDialect, arith::ArithDialect,
                  func::FuncDialect, linalg::LinalgDialect, math::MathDialect,
                  scf::SCFDialect, tensor::TensorDialect>();
}

void mlir::switchyard::registerPassesAndPipelines() {
  lm::registerLmPasses();
  registerPipelines();
  // The upstream cleanups every pipeline uses.
  registerCanonicalizerPass();
  registerCSEPass();
}
