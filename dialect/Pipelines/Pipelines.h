//===- Pipelines.h - Switchyard pass pipelines ------------------*- C++ -*-===//
//
// The pass pipelines of Switchyard. switchyard-opt registers them, and the
// driver, the runtime and the examples call the same builder functions;
// nobody assembles pipeline strings by hand outside tests.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_PIPELINES_PIPELINES_H
#define SWITCHYARD_DIALECT_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace mlir::switchyard {

/// Options of the front end: model definition in, parameters declared.
struct FrontendPipelineOptions
    : public PassPipelineOptions<FrontendPipelineOptions> {
  PassOptions::Option<int64_t> numLayers{
      *this, "num-layers",
      llvm::cl::desc("Model depth L for the scaled initialisers; 0 counts "
                     "the attention blocks of each model"),
      llvm::cl::init(0)};
};

/// Stage 1 of the architecture: verified `lm` model definitions in, every
/// owned parameter declared as an `lm.param`.
void buildFrontendPipeline(OpPassManager &pm,
                           const FrontendPipelineOptions &options);

/// Options of the CPU target.
struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  PassOptions::Option<int64_t> numLayers{
      *this, "num-layers",
      llvm::cl::desc("Model depth L for the scaled initialisers; 0 counts "
                     "the attention blocks of each model"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> gradients{
      *this, "gradients",
      llvm::cl::desc("Also build each model's loss-and-gradient function "
                     "(<model>_grad)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> trainStep{
      *this, "train-step",
      llvm::cl::desc("Also build each model's AdamW train step "
                     "(<model>_train_step; implies gradients)"),
      llvm::cl::init(false)};
};

/// Stages 2-3 and the reference lowering: lm layers decomposed into moe
/// ops, models turned into functions taking their parameters, with
/// `gradients` their loss-and-gradient functions (lm-differentiate), and moe
/// ops lowered to linalg on tensors.
/// With `trainStep` (which implies `gradients`), also each model's
/// optimizer step (lm-build-train-step).
void buildLowerToLinalgPipeline(OpPassManager &pm, bool gradients,
                                bool trainStep = false);

/// Stages 5-6 for the CPU: linalg on tensors (with arith, math, scf,
/// tensor) in func.func, to the LLVM dialect. Public functions return
/// freshly allocated result buffers that the caller owns.
void buildCpuCodegenPipeline(OpPassManager &pm);

/// The whole CPU target: the front end, the lowering to linalg, and CPU
/// code generation.
void buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options);

/// Registers every Switchyard pipeline with the global pass registry.
void registerPipelines();

} // namespace mlir::switchyard

#endif // SWITCHYARD_DIALECT_PIPELINES_PIPELINES_H
