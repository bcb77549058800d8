//===- GpuPipeline.cpp - the NVIDIA GPU target ----------------------------===//
//
// Builds and registers the GPU pipeline: linalg on tensors in func.func to
// host code in the LLVM dialect that launches kernels, and one gpu.binary
// per host function with the kernels as PTX, cubin or fatbin for one chip.
//
// This is the SIMT fallback route, which handles everything a train step
// contains (linalg.generic with reductions, linalg.index, tensor.extract
// gathers, reshapes, math ops): every linalg op (after elementwise fusion,
// with the fill of its initial value) becomes one kernel with one thread per
// element of its parallel iteration space, reductions running sequentially
// in each thread, and consecutive kernels that do not depend on each other
// are launched as one. The fused kernels of the moe fusion passes arrive as
// scf.forall row kernels on vectors: one thread per iteration.
//
// Tensor cores: with element-type=bf16 or f16 (the default f32 leaves the
// SIMT route as it is), switchyard-gpu-tensor-core-matmul first turns every
// matmul-like contraction with one M, N and K dimension into a gpu.launch of
// 2 x 2 warps per 64 x 64 tile of C: zero-filling staging of the A and Bᵀ
// tiles (32 of K per step, the next step's loads in flight) in dynamic
// shared memory, nvgpu.ldmatrix, mma.sync m16n8k16 with f32 accumulators,
// guarded stores. That needs sm_80 (bf16 mma.sync); on
// sm_75 the contractions stay SIMT with their factors rounded to the element
// type, so both chips compute the same products. With tensor cores the
// flash attention (with or without relative keys) is kept through
// bufferization (moe.flash_attention_kernel, moe.flash_attention_grad_kernel)
// and becomes mma.sync kernels of its own (forward: 4 warps per 64 query
// rows, QKᵀ and PV on the tensor cores, the online softmax in registers;
// backward: dK and dV per 64 keys, dQ per 64 queries, FlashAttention-2's
// recomputation; Q·relᵀ skewed through shared memory). The PTX
// of this route is checked with ptxas for sm_80 … sm_120, and its results
// against the CPU's on a GPU (test/Integration/CUDA; docs/GPU.md, "Checks on
// a GPU"). With wgmma=true and chip=sm_90a (opt-in), the
// contractions with static N and K and no batch dimension instead get two
// warpgroups per 128 x 128 tile: the factors converted to device buffers of
// the element type, TMA loads (128-byte swizzle, descriptors made on the host
// by mgpuTensorMapEncodeTiledMemref) into a ring of up to four stages, an
// mbarrier per stage, and nvgpu.warpgroup.mma (wgmma m64n128k16); its PTX is
// checked by ptxas, its kernels against the CPU in the GPU emulation and on
// an sm_90 GPU (test/Integration/CUDA/wgmma.test).
//
// Device memory design
// --------------------
// Every buffer that generated code touches lives in device memory, and host
// code never dereferences one:
// - Function arguments and results are device pointers (memref descriptors
//   whose pointers come from cuMemAlloc). The caller (the runtime) owns the
//   arguments and frees the results, as on the CPU target.
// - Buffers allocated by host code are `gpu.alloc` / `gpu.dealloc` (through
//   gpu-to-llvm: mgpuMemAlloc / mgpuMemFree, i.e. cuMemAlloc / cuMemFree),
//   placed by ownership-based buffer deallocation exactly as on the CPU.
//   Copies are `linalg.copy` and become kernels (switchyard-gpu-device-memory).
// - Host code that would read or write a buffer (a tensor.extract of a loss,
//   the optimizer's hyper-parameters, 0-d or reduction-only linalg ops) runs
//   instead in a single-thread kernel; scalars it computes reach later kernels
//   through 0-d device buffers (switchyard-gpu-launch-host-compute). The host
//   only computes shapes, grid sizes and allocation sizes.
// - There is no managed (host-shared) memory and no implicit copy: moving
//   data between host and device is the runtime's job.
// Each call runs on one stream of its own (gpu-async-region): allocations,
// launches and frees in program order on it, one synchronisation before
// returning. The runtime's mgpuMemAlloc / mgpuMemFree draw on its caching
// device pool (runtime/CudaDriver.h).
//
// Stages, by function:
//   1. buildBufferizationStages: tensors to buffers in device memory.
//   2. buildKernelFormationStages: (bf16/f16) matmuls to tensor-core
//      launches, linalg to parallel loops to gpu.launch, host leftovers into
//      kernels, consecutive independent launches merged into one;
//      buildOutliningStages: one gpu.module per function.
//   3. buildDeviceStages: gpu.module to NVVM for the chip (nvgpu first).
//   4. buildHostStages: host code to the LLVM dialect.
//   5. switchyard-gpu-module-to-binary: PTX (LLVM's NVPTX backend), then
//      ptxas / fatbinary from the CUDA toolkit for bin / fatbin, the modules
//      in parallel.
//
// The GPU emulation (switchyard-gpu-emulation-pipeline) shares stages 1 and
// 2 up to outlining, then runs each launch as loops on the host
// (switchyard-gpu-launch-to-host-loops) and takes the CPU target's last
// stages: the kernels' code, executed on a machine without a GPU.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/CPU/Passes.h"
#include "lib/Codegen/Common/Passes.h"
#include "lib/Codegen/Emulation/Passes.h"
#include "lib/Codegen/GPU/Passes.h"
#include "lib/Pipelines/Pipelines.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
#include "mlir/Conversion/GPUCommon/GPUToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToGPU/SCFToGPUPass.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {
/// A pass that only reports a bad pipeline option: pipeline builders cannot
/// fail, so the error surfaces when the pipeline runs, naming the option.
struct ReportPipelineErrorPass
    : public PassWrapper<ReportPipelineErrorPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ReportPipelineErrorPass)
  explicit ReportPipelineErrorPass(std::string message)
      : message(std::move(message)) {}
  StringRef getArgument() const override {
    return "switchyard-gpu-pipeline-error";
  }
  void runOnOperation() override {
    // Not op.emitError(): the module itself would be printed as a note.
    emitError(getOperation().getLoc()) << message;
    signalPassFailure();
  }
  std::string message;
};

/// Adds a pass reporting `error` to `pm` where there is one; returns whether
/// it did (the pipeline is then that pass alone).
bool addedOptionError(OpPassManager &pm, llvm::Error error) {
  if (!error)
    return false;
  pm.addPass(
      std::make_unique<ReportPipelineErrorPass>(toString(std::move(error))));
  return true;
}

/// Tensors to buffers, the buffers in device memory.
void buildBufferizationStages(OpPassManager &pm) {
  // As on the CPU: public functions return fresh buffers the caller owns.
  switchyard::buildBufferizePipeline(pm, /*rematerializeFills=*/true);
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuDeviceMemoryPass());
}

/// How kernels are formed: what the GPU pipeline's options ask for, and
/// what the emulation runs.
struct KernelFormation {
  std::string elementType = "f32";
  bool tensorCores = false;
  /// Elementwise consumers of matmuls in the tensor-core kernels' stores.
  bool epilogues = true;
  bool wgmma = false;
  int64_t blockSize = 256;
  /// Where switchyard-gpu-kernel-report writes; empty: no report.
  std::string kernelReport;
  /// The bytes of parameters a kernel may take (maxKernelParameterBytes).
  int64_t maxParameterBytes = 4096;
};

/// Linalg to kernels: tensor-core kernels for matmuls (16-bit element types
/// only; rounded SIMT contractions without tensor cores), whole-buffer
/// reductions split in two parallel steps, parallel loops, one thread per
/// element, host leftovers in single-thread kernels, reduction loops with
/// their accumulators in registers, independent neighbours launched as one;
/// each
/// launch named @<func>_kernels::@<func>_kernel_<i> for the outlining that
/// follows (buildOutliningStages).
void buildKernelFormationStages(OpPassManager &pm,
                                const KernelFormation &formation) {
  // Each distinct op formed into kernels once (a model's layers are
  // copies), the functions in parallel; back in place once they are
  // launches.
  // A fill goes with the op that accumulates into its buffer, whose
  // kernel stores it (switchyard-linalg-to-loops fold-fills).
  // A matmul's elementwise consumer goes with it, computed in the
  // tensor-core kernel's stores.
  if (formation.epilogues && formation.tensorCores &&
      formation.elementType != "f32")
    pm.addNestedPass<func::FuncOp>(
        switchyard::createSwitchyardMarkEpiloguesPass());
  switchyard::SwitchyardOutlineOpsPassOptions outline;
  outline.fillsWithUsers = true;
  pm.addPass(switchyard::createSwitchyardOutlineOpsPass(outline));
  switchyard::SwitchyardGpuRowKernelsPassOptions rowKernels;
  rowKernels.blockSize = formation.blockSize;
  rowKernels.elementType = formation.elementType;
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuRowKernelsPass(rowKernels));
  if (formation.elementType != "f32") {
    switchyard::SwitchyardGpuTensorCoreMatmulPassOptions matmul;
    matmul.elementType = formation.elementType;
    matmul.tensorCores = formation.tensorCores;
    matmul.wgmma = formation.wgmma;
    pm.addNestedPass<func::FuncOp>(
        switchyard::createSwitchyardGpuTensorCoreMatmulPass(matmul));
  }
  // The routes' sort for the grouped kernels: one thread block.
  switchyard::SwitchyardGpuSortRoutesPassOptions sortRoutes;
  sortRoutes.blockSize = formation.blockSize;
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuSortRoutesPass(sortRoutes));
  // The grouped kernels that got no tensor-core kernel: SIMT, their factors
  // rounded as the tensor cores would.
  switchyard::SwitchyardLowerGroupedKernelsPassOptions grouped;
  grouped.elementType = formation.elementType;
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardLowerGroupedKernelsPass(grouped));
  // Whole-buffer reductions (losses, gradient norms) in two parallel steps
  // instead of a single-thread kernel.
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuSplitReductionsPass());
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuParallelDimsFirstPass());
  switchyard::SwitchyardLinalgToLoopsPassOptions loops;
  loops.parallel = true;
  loops.foldFills = true;
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardLinalgToLoopsPass(loops));
  // Fused row kernels: one thread per scf.forall iteration.
  pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
  switchyard::SwitchyardGpuMapParallelLoopsPassOptions map;
  map.blockSize = formation.blockSize;
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuMapParallelLoopsPass(map));
  // No canonicalization here: it would merge the nested block and thread
  // loops back into one scf.parallel and drop their mapping.
  pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
  pm.addPass(switchyard::createSwitchyardInlineOutlinedOpsPass());
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuLaunchHostComputePass());
  // Reduction loops carry their accumulators in registers.
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuRegisterAccumulatorsPass());
  // Consecutive independent kernels launched as one.
  // (Parameters estimated before constants sink into the kernels: a
  // quarter to spare.)
  switchyard::SwitchyardGpuMergeLaunchesPassOptions merge;
  merge.maxParameterBytes = formation.maxParameterBytes * 3 / 4;
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuMergeLaunchesPass(merge));
  // Small launches (a split reduction's last step, the routes' sort) run by
  // the last block of the launch before them.
  switchyard::SwitchyardGpuChainLaunchesPassOptions chain;
  chain.maxParameterBytes = merge.maxParameterBytes;
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuChainLaunchesPass(chain));
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuNameKernelsPass());
  if (!formation.kernelReport.empty()) {
    switchyard::SwitchyardGpuKernelReportPassOptions report;
    report.output = formation.kernelReport;
    pm.addPass(switchyard::createSwitchyardGpuKernelReportPass(report));
  }
}

/// The launches outlined into one gpu.module per function, each call on a
/// stream of its own.
void buildOutliningStages(OpPassManager &pm, bool wgmma) {
  // The TMA descriptors are made on the host (mgpuTensorMapEncodeTiledMemref)
  // and reach the kernels as pointers: lower the nvgpu ops before outlining,
  // host and kernels alike, as upstream's gpu-lower-to-nvvm-pipeline does.
  if (wgmma)
    pm.addPass(createConvertNVGPUToNVVMPass());
  // Constants (and other index computations) used in a launch are cloned
  // into it, so that the kernels see them: without this they become kernel
  // parameters, and the device code divides by a "dynamic" 32 and cannot
  // fold, unroll or schedule on known sizes.
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  // Identical kernels (a model's layers, a training step's forward pass)
  // compiled once.
  pm.addPass(switchyard::createSwitchyardGpuShareKernelsPass());
  // One stream per call: allocations, launches and frees in program order on
  // it, one synchronisation before returning. gpu-to-llvm only lowers the
  // async forms of gpu.alloc / gpu.dealloc.
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
}

/// The kernels to NVVM for the chip.
void buildDeviceStages(OpPassManager &pm,
                       const switchyard::GpuTargetOptions &options) {
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chipOrDefault().str();
  target.features = options.featuresOrDefault();
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));

  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createStripDebugInfoPass());
  kernels.addPass(createConvertVectorToSCFPass());
  kernels.addPass(createSCFToControlFlowPass());
  kernels.addPass(memref::createExpandStridedMetadataPass());
  kernels.addPass(createLowerAffinePass());
  kernels.addPass(arith::createArithExpandOpsPass());
  if (options.usesTensorCores())
    kernels.addPass(createConvertNVGPUToNVVMPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64;
  kernels.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
}

/// Host code to the LLVM dialect; kernel launches and device allocations
/// become calls of the mgpu* wrappers that the runtime provides.
void buildHostStages(OpPassManager &pm) {
  // Host code is CPU code: its loop nests (if any) in functions of their
  // own, and straight-line entry points with code generation at -O0.
  pm.addPass(switchyard::createSwitchyardCpuOutlineLoopsPass());
  pm.addNestedPass<func::FuncOp>(createSCFToControlFlowPass());
  pm.addNestedPass<func::FuncOp>(memref::createExpandStridedMetadataPass());
  pm.addNestedPass<func::FuncOp>(createLowerAffinePass());
  pm.addNestedPass<func::FuncOp>(arith::createArithExpandOpsPass());
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}
} // namespace

void switchyard::buildGpuCodegenPipeline(OpPassManager &pm,
                                         const GpuTargetOptions &options) {
  if (addedOptionError(pm, options.verify("switchyard-gpu-pipeline option ")))
    return;
  buildBufferizationStages(pm);
  KernelFormation formation{options.elementType, options.usesTensorCores(),
                            options.epilogues,   options.usesWgmma(),
                            options.blockSize,   options.kernelReport,
                            switchyard::maxKernelParameterBytes(
                                options.featuresOrDefault())};
  buildKernelFormationStages(pm, formation);
  buildOutliningStages(pm, formation.wgmma);
  buildDeviceStages(pm, options);
  buildHostStages(pm);

  // The modules (one per host function) serialized in parallel.
  switchyard::SwitchyardGpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  binary.toolkitPath = options.toolkitDir();
  binary.cmdOptions = options.ptxasOptions;
  pm.addPass(switchyard::createSwitchyardGpuModuleToBinaryPass(binary));
}

/// The lowering options of a GPU pipeline: the GPU target's defaults; its
/// grouped formulation is the padded one; with tensor cores, the flash
/// attention is their kernel.
template <typename Options>
static switchyard::LoweringOptions gpuLowering(const Options &options,
                                               bool tensorCores) {
  switchyard::LoweringOptions lowering = options.lowering(switchyard::Target::Gpu);
  lowering.groupedTileRows = switchyard::kGpuGroupedTileRows;
  lowering.flashAttentionKernel = tensorCores;
  return lowering;
}

void switchyard::buildGpuPipeline(OpPassManager &pm,
                                  const GpuPipelineOptions &options) {
  GpuTargetOptions target = options.target.value();
  buildModelToLinalgPipeline(pm, options.numLayers,
                             gpuLowering(options, target.usesTensorCores()));
  buildGpuCodegenPipeline(pm, target);
}

void switchyard::buildGpuEmulationCodegenPipeline(
    OpPassManager &pm, const GpuEmulationOptions &options) {
  if (addedOptionError(
          pm, options.verify("switchyard-gpu-emulation-pipeline option ")))
    return;
  buildBufferizationStages(pm);
  // The tensor-core route of sm_80+ (mma.sync, and sm_90a's wgmma where
  // asked for), or the SIMT one. The kernels of the default PTX version.
  KernelFormation formation{options.elementType,
                            options.usesTensorCores(),
                            options.epilogues,
                            options.usesWgmma(),
                            options.blockSize,
                            /*kernelReport=*/"",
                            switchyard::maxKernelParameterBytes(
                                *switchyard::defaultPtxFeature("sm_80"))};
  buildKernelFormationStages(pm, formation);
  // The kernels' own loads and stores checked, before the launches become
  // host loops: the buffers through which serialised threads pass values
  // across barriers are indexed by thread and need no checks (checking them
  // too would multiply the checks many times over, and the lowering of each
  // check's message looks up a unique symbol name: quadratic).
  if (options.checkBounds)
    pm.addPass(createGenerateRuntimeVerificationPass());
  pm.addNestedPass<func::FuncOp>(
      switchyard::createSwitchyardGpuLaunchToHostLoopsPass());
  // The kernels are built element by element, a constant and an index
  // computation at each use, and the serialisation adds its own: folded
  // and shared here (no barrier is left to keep apart what CSE merges), the
  // LLVM lowering and JIT compilation have less to do.
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createCSEPass());
  buildCpuLoopsToLLVMStages(pm);
}

void switchyard::buildGpuEmulationPipeline(
    OpPassManager &pm, const GpuEmulationPipelineOptions &options) {
  GpuEmulationOptions emulation = options.emulation.value();
  buildModelToLinalgPipeline(
      pm, options.numLayers, gpuLowering(options, emulation.usesTensorCores()));
  buildGpuEmulationCodegenPipeline(pm, emulation);
}

void switchyard::registerGpuDialects(DialectRegistry &registry) {
  registry.insert<affine::AffineDialect, gpu::GPUDialect, index::IndexDialect,
                  nvgpu::NVGPUDialect, NVVM::NVVMDialect, ub::UBDialect,
                  vector::VectorDialect>();
  // What convert-gpu-to-nvvm and gpu-to-llvm convert through the
  // ConvertToLLVMPatternInterface of each dialect.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  gpu::registerConvertGpuToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  // Row kernels' vectors and the tensor-core kernels' fragment shuffles.
  vector::registerConvertVectorToLLVMInterface(registry);
  // #nvvm.target serialises gpu.modules; that needs the LLVM IR
  // translations of what the kernels contain.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
}

void switchyard::registerGpuPipelines() {
  registerCodegenCommonPasses();
  registerCodegenCPUPasses();
  registerCodegenGPUPasses();
  registerCodegenEmulationPasses();
  PassPipelineRegistration<GpuPipelineOptions>(
      "switchyard-gpu-pipeline",
      "NVIDIA GPU target: front end, reference lowering of moe ops, kernels "
      "as PTX/cubin/fatbin for one chip, host code in the LLVM dialect",
      buildGpuPipeline);
  PassPipelineRegistration<GpuPipelineOptions>(
      "switchyard-gpu-codegen-pipeline",
      "NVIDIA GPU code generation from linalg on tensors (the last stages "
      "of switchyard-gpu-pipeline; its model options are ignored)",
      [](OpPassManager &pm, const GpuPipelineOptions &options) {
        buildGpuCodegenPipeline(pm, options.target.value());
      });
  PassPipelineRegistration<GpuEmulationPipelineOptions>(
      "switchyard-gpu-emulation-pipeline",
      "The GPU target's kernels run on the host CPU, one thread after "
      "another: front end, lowering, the GPU pipeline's kernel formation, "
      "then loops over blocks and threads in the LLVM dialect (the SIMT "
      "and mma.sync routes; for testing without a GPU)",
      buildGpuEmulationPipeline);
}
