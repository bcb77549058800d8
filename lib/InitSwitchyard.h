//===- InitSwitchyard.h - register Switchyard dialects and passes -*- C++ -*-===//
//
// One place that lists what a Switchyard tool must register: the project's
// dialects, the upstream dialects its pipelines produce, and every project
// pass and pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_INITSWITCHYARD_H
#define SWITCHYARD_LIB_INITSWITCHYARD_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::switchyard {

/// Adds the `lm` and `moe` dialects and the upstream dialects Switchyard's
/// pipelines use to `registry`.
void registerDialects(DialectRegistry &registry);

/// Registers every Switchyard pass and pipeline with the global registry.
void registerPassesAndPipelines();

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_INITSWITCHYARD_H
