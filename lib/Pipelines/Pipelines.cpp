//===- Pipelines.cpp - Switchyard pass pipelines --------------------------===//
//
// Builds and registers the Switchyard pass pipelines from small stage
// functions, in the manner of upstream's GPUToNVVMPipeline.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialect/Pipelines/Pipelines.h"
#include "dialect/Lm/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void switchyard::buildFrontendPipeline(OpPassManager &pm,
                                       const FrontendPipelineOptions &options) {
  lm::LmMaterializeParamsPassOptions params;
  params.numLayers = options.numLayers;
  pm.addPass(lm::createLmMaterializeParamsPass(params));
}

void switchyard::registerPipelines() {
  PassPipelineRegistration<FrontendPipelineOptions>(
      "switchyard-frontend-pipeline",
      "Front end: verify lm model definitions and declare their parameters",
      buildFrontendPipeline);
}
