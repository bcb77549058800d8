//===- Optimize.cpp - LLVM's IR pipeline for the JIT ----------------------===//
//
// optimizeModule: the pipeline of mlir::makeOptimizingTransformer with
// LLVM's standard pass instrumentation registered, which includes the
// instrumentation that skips optional passes on `optnone` functions.
//
//===----------------------------------------------------------------------===//

#include "lib/Target/LLVMIR/Optimize.h"

#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassInstrumentation.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/OptimizationLevel.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/StandardInstrumentations.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Transforms/IPO/AlwaysInliner.h"

llvm::Error mlir::switchyard::optimizeModule(llvm::Module &module,
                                             unsigned optLevel,
                                             llvm::TargetMachine *targetMachine) {
  llvm::OptimizationLevel level;
  switch (optLevel) {
  case 0:
    level = llvm::OptimizationLevel::O0;
    break;
  case 1:
    level = llvm::OptimizationLevel::O1;
    break;
  case 2:
    level = llvm::OptimizationLevel::O2;
    break;
  case 3:
    level = llvm::OptimizationLevel::O3;
    break;
  default:
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("optimisation level {0}: expected 0 to 3", optLevel));
  }

  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  llvm::PassInstrumentationCallbacks callbacks;
  llvm::StandardInstrumentations instrumentations(module.getContext(),
                                                  /*DebugLogging=*/false);
  instrumentations.registerCallbacks(callbacks, &modules);

  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder builder(targetMachine, tuning, std::nullopt, &callbacks);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);

  llvm::ModulePassManager pipeline;
  if (level == llvm::OptimizationLevel::O0) {
    pipeline = builder.buildO0DefaultPipeline(level);
  } else {
    // The default pipeline without its interprocedural simplification: the
    // functions of a compiled model are loop nests that nothing inlines
    // (noinline) and straight-line code that nothing optimises (optnone),
    // linked by calls with thousands of arguments, on which passes such as
    // called-value propagation take as long as all the loop nests' code.
    // Each function is simplified, then the module optimised (vectorizers,
    // unrolling) as at that level.
    pipeline.addPass(llvm::AlwaysInlinerPass(
        /*InsertLifetimeIntrinsics=*/false));
    pipeline.addPass(llvm::createModuleToFunctionPassAdaptor(
        builder.buildFunctionSimplificationPipeline(
            level, llvm::ThinOrFullLTOPhase::None)));
    pipeline.addPass(builder.buildModuleOptimizationPipeline(
        level, llvm::ThinOrFullLTOPhase::None));
  }
  pipeline.run(module, modules);
  return llvm::Error::success();
}
