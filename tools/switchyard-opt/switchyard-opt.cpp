//===- switchyard-opt.cpp - Switchyard optimizer driver -------------------===//
//
// The mlir-opt of Switchyard: parses, verifies, transforms and prints IR
// with the `lm` and `moe` dialects, the upstream dialects the pipelines use,
// and every Switchyard pass and pipeline registered.
//
//===----------------------------------------------------------------------===//

#include "dialect/InitSwitchyard.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::switchyard::registerPassesAndPipelines();
  mlir::DialectRegistry registry;
  mlir::switchyard::registerDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Switchyard optimizer: MoE attention compiler\n",
      registry));
}
