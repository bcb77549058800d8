//===- Pipelines.cpp - Switchyard pass pipelines --------------------------===//
//
// Builds and registers the Switchyard pass pipelines from small stage
// functions, in the manner of upstream's GPUToNVVMPipeline.cpp.
//
//===----------------------------------------------------------------------===//

#include "lib/Pipelines/Pipelines.h"
#include "lib/Autodiff/Passes.h"
#include "lib/Conversion/Passes.h"
#include "lib/Codegen/CPU/Passes.h"
#include "lib/Codegen/Common/Passes.h"
#include "lib/Codegen/Emulation/Passes.h"
#include "lib/Codegen/GPU/Passes.h"
#include "dialect/Lm/Transforms/Passes.h"
#include "dialect/Moe/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <algorithm>

using namespace mlir;

void switchyard::buildFrontendPipeline(OpPassManager &pm,
                                       const FrontendPipelineOptions &options) {
  pm.addPass(createSwitchyardCheckInputPass());
  lm::LmMaterializeParamsPassOptions params;
  params.numLayers = options.numLayers;
  pm.addPass(lm::createLmMaterializeParamsPass(params));
}

void switchyard::buildLowerToLinalgPipeline(OpPassManager &pm,
                                            const LoweringOptions &options) {
  pm.addPass(createSwitchyardCheckInputPass());
  if (options.decoder)
    pm.addPass(createLmBuildDecoderPass());
  // Probes are returned from the model's own function: its layers inline.
  bool outline = options.outlineLayers && !options.probes;
  if (outline)
    pm.addPass(createLmOutlineLayersPass());
  LmDecomposeLayersPassOptions decompose;
  decompose.probes = options.probes;
  pm.addPass(createLmDecomposeLayersPass(decompose));
  pm.addPass(createConvertLmToFuncPass());
  if (options.probes)
    pm.addPass(createLmExposeProbesPass());
  if (outline)
    pm.addPass(createLmHoistBlockInvariantsPass());
  if (options.gradients || options.trainStep)
    pm.addPass(createLmDifferentiatePass());
  if (options.trainStep) {
    LmBuildTrainStepPassOptions step;
    step.optimizerStep = options.optimizerStep;
    pm.addPass(createLmBuildTrainStepPass(step));
  }
  // Fusions, between differentiation (which sees the plain moe ops and their
  // gradient rules) and the lowering; each can be switched off.
  if (options.fusion.router)
    pm.addPass(moe::createMoeFuseRouterPass());
  if (options.fusion.expertProjection)
    pm.addPass(moe::createMoeFuseExpertProjectionPass());
  if (options.fusion.attention)
    pm.addPass(moe::createMoeFuseAttentionPass());
  ConvertMoeToLinalgPassOptions toLinalg;
  toLinalg.groupedExperts = options.fusion.groupedExperts;
  toLinalg.groupedTileRows = options.groupedTileRows;
  toLinalg.fusedExpertTileRows = options.fusedForms.expertTileRows;
  toLinalg.fusedRouterMatmul = options.fusedForms.routerLogitsMatmul;
  toLinalg.scatterEmbeddingGradient = options.scatterEmbeddingGradient;
  toLinalg.flashAttentionKernel = options.flashAttentionKernel;
  toLinalg.flashAttentionRounding = options.flashAttentionRounding;
  pm.addPass(createConvertMoeToLinalgPass(toLinalg));
  // Residual additions are arith ops on tensors.
  pm.addPass(createConvertElementwiseToLinalgPass());
  // Each block's backward pass reads the values of its forward call: after
  // the fusions, which pair forward ops with their gradients, and after
  // CSE, which merges the gradient rules' recomputations (layer norm
  // statistics, rotations) with the forward pass's own.
  if (options.gradients || options.trainStep) {
    pm.addPass(createCSEPass());
    pm.addPass(createLmSplitBlockGradientsPass());
  }
  // Last: the gradient functions' ops are all there, and the ops that
  // split-block-gradients moved between a block's functions are in place.
  if (options.fusion.elementwise)
    pm.addPass(createSwitchyardFuseElementwisePass());
  // After the elementwise fusion, whose fused ops it gathers by rows; large
  // reductions to one value split into rows for it first.
  if (options.fusion.rows) {
    pm.addPass(createSwitchyardSplitWholeReductionsPass());
    pm.addPass(createSwitchyardFuseRowsPass());
  }
}

void switchyard::buildBufferizePipeline(OpPassManager &pm,
                                        bool rematerializeFills) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Public functions return freshly allocated buffers that the caller owns
  // and frees (the ownership-based deallocation clones results it does not
  // own, such as returned arguments).
  // Each op that accumulates into zeros gets a fill of its own (CSE merged
  // them), not a copy of a shared one: on the GPU a kernel less per op. (On
  // the CPU the copies are cheap, and the LLVM code of the 47M step with
  // the fills rematerialized took four times as long to compile.)
  if (rematerializeFills)
    pm.addPass(createSwitchyardRematerializeFillsPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Upstream's buffer-deallocation-pipeline, with switchyard's rule for the
  // results of calls before its simplification.
  memref::ExpandReallocPassOptions expandRealloc;
  expandRealloc.emitDeallocs = false;
  pm.addPass(memref::createExpandReallocPass(expandRealloc));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSwitchyardSplitDeallocsPass());
  pm.addPass(bufferization::createBufferDeallocationSimplificationPass());
  pm.addPass(bufferization::createLowerDeallocationsPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createConvertBufferizationToMemRefPass());
}

void switchyard::buildModelToLinalgPipeline(OpPassManager &pm,
                                            int64_t numLayers,
                                            const LoweringOptions &options) {
  FrontendPipelineOptions frontend;
  frontend.numLayers = numLayers;
  buildFrontendPipeline(pm, frontend);
  buildLowerToLinalgPipeline(pm, options);
}

void switchyard::buildCpuLoopsToLLVMStages(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createForallToForLoopPass());
  pm.addNestedPass<func::FuncOp>(createConvertVectorToSCFPass());
  // The ops that switchyard-outline-ops moved into functions of their own,
  // lowered once per distinct op, back at their calls.
  pm.addPass(createSwitchyardInlineOutlinedOpsPass());
  // One function per loop nest: LLVM's time grows faster than linearly with
  // a function's size, and a training step is thousands of loop nests.
  pm.addPass(createSwitchyardCpuOutlineLoopsPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // Vector reductions (the row kernels' dot products) as trees, not as a
  // chain of dependent scalar additions: every f32 summation order is a
  // valid one (docs/Semantics.md fixes none), and a sequential one costs a
  // full add latency per element.
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.reassociateFPReductions = true;
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  // The poison that vector.from_elements starts from (the GPU emulation's
  // tensor-core fragments).
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  // memref before arith: memref.dim with a constant index then reads the
  // descriptor's field directly. After arith-to-llvm its index is a cast of
  // an llvm.mlir.constant, which the lowering takes for a dynamic index: an
  // alloca per dim, inside loops (the stack grows per iteration at -O0).
  // aligned_alloc: a buffer begins where it was allocated, which the bare
  // pointers of switchyard-cpu-bare-pointer-calls rely on.
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useAlignedAlloc = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createSwitchyardConvertAssertToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createSwitchyardCpuBarePointerCallsPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

switchyard::CpuKernelTile
switchyard::cpuKernelTile(unsigned vectorBits, unsigned vectorRegisters) {
  CpuKernelTile tile;
  tile.columns = 2 * std::max<int64_t>(vectorBits / 32, 1);
  tile.rows = std::clamp<int64_t>((int64_t(vectorRegisters) - 4) / 2, 1, 8);
  return tile;
}

void switchyard::buildCpuCodegenPipeline(OpPassManager &pm,
                                         StringRef roundContractionOperands,
                                         CpuKernelTile tile) {
  buildBufferizePipeline(pm);
  // Each distinct op lowered once (a model's layers are copies), the
  // functions in parallel; back in place before the loops are outlined.
  // A fill and the op that accumulates into its buffer in one function,
  // for the matmul kernel or the op's loop nest to fold.
  SwitchyardOutlineOpsPassOptions outline;
  outline.fillsWithUsers = true;
  pm.addPass(createSwitchyardOutlineOpsPass(outline));
  // The reference for the GPU's bf16/f16 matmuls: the same ops rounded the
  // same way (the tensor-core pass also runs right after bufferization).
  if (roundContractionOperands != "f32") {
    SwitchyardRoundContractionOperandsPassOptions round;
    round.elementType = roundContractionOperands.str();
    pm.addNestedPass<func::FuncOp>(
        createSwitchyardRoundContractionOperandsPass(round));
  }

  // Register-blocked vector kernels for the matmul-like ops; loops for the
  // rest (fused row kernels are scf.forall on vectors), nested for
  // unit-stride vector code, then the LLVM dialect.
  // The padded grouped formulation's kernels (the fused expert ops'):
  // register-blocked, gathering while packing; where the factors are
  // rounded (the GPU's reference), as loops.
  if (roundContractionOperands == "f32") {
    SwitchyardCpuGroupedKernelsPassOptions groupedKernels;
    groupedKernels.rows = tile.rows;
    groupedKernels.columns = tile.columns;
    pm.addNestedPass<func::FuncOp>(
        createSwitchyardCpuGroupedKernelsPass(groupedKernels));
  }
  SwitchyardLowerGroupedKernelsPassOptions grouped;
  grouped.elementType = roundContractionOperands.str();
  pm.addNestedPass<func::FuncOp>(
      createSwitchyardLowerGroupedKernelsPass(grouped));
  SwitchyardCpuContractionKernelsPassOptions kernels;
  kernels.rows = tile.rows;
  kernels.columns = tile.columns;
  pm.addNestedPass<func::FuncOp>(
      createSwitchyardCpuContractionKernelsPass(kernels));
  pm.addNestedPass<func::FuncOp>(createSwitchyardCpuLoopOrderPass());
  // exp and log as polynomials that LLVM vectorizes, not libm calls.
  pm.addNestedPass<func::FuncOp>(createSwitchyardCpuMathApproximationPass());
  // The outermost loops whose iterations are independent are marked, to
  // run on all cores; a reduction's initial fill is stored by its nest.
  SwitchyardLinalgToLoopsPassOptions loops;
  loops.markParallel = true;
  loops.foldFills = true;
  pm.addNestedPass<func::FuncOp>(createSwitchyardLinalgToLoopsPass(loops));
  // So are the foralls (the grouped experts' loop, the fused row kernels).
  pm.addNestedPass<func::FuncOp>(createSwitchyardCpuForallToLoopsPass());
  buildCpuLoopsToLLVMStages(pm);
}

void switchyard::buildCpuPipeline(OpPassManager &pm,
                                  const CpuPipelineOptions &options) {
  CpuKernelTile tile =
      cpuKernelTile(options.vectorBits, options.vectorRegisters);
  LoweringOptions lowering = options.lowering(Target::Cpu);
  lowering.fusedForms =
      FusedKernelForms::cpu(tile.rows, options.roundContractionOperands);
  buildModelToLinalgPipeline(pm, options.numLayers, lowering);
  buildCpuCodegenPipeline(pm, options.roundContractionOperands, tile);
}

void switchyard::registerPipelines() {
  PassPipelineRegistration<FrontendPipelineOptions>(
      "switchyard-frontend-pipeline",
      "Front end: verify lm model definitions and declare their parameters",
      buildFrontendPipeline);
  PassPipelineRegistration<CpuPipelineOptions>(
      "switchyard-cpu-pipeline",
      "CPU target: front end, reference lowering of moe ops, LLVM dialect",
      buildCpuPipeline);
  registerGpuPipelines();
}
