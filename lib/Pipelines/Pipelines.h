//===- Pipelines.h - Switchyard pass pipelines ------------------*- C++ -*-===//
//
// The pass pipelines of Switchyard. switchyard-opt registers them, and the
// driver, the runtime and the examples call the same builder functions;
// nobody assembles pipeline strings by hand outside tests.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_PIPELINES_PIPELINES_H
#define SWITCHYARD_LIB_PIPELINES_PIPELINES_H

#include "lib/Pipelines/FusionOptions.h"
#include "lib/Pipelines/OptionsBinder.h"
#include "lib/Pipelines/TargetOptions.h"

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace mlir::switchyard {

/// Options of the front end: model definition in, parameters declared.
struct FrontendPipelineOptions
    : public PassPipelineOptions<FrontendPipelineOptions> {
  detail::PassOptions::Option<int64_t> numLayers{
      *this, "num-layers",
      llvm::cl::desc("Model depth L for the scaled initialisers; 0 counts "
                     "the attention blocks of each model"),
      llvm::cl::init(0)};
};

/// Stage 1 of the architecture: verified `lm` model definitions in, every
/// owned parameter declared as an `lm.param`.
void buildFrontendPipeline(OpPassManager &pm,
                           const FrontendPipelineOptions &options);

/// What the lowering to linalg builds from each model.
struct LoweringOptions {
  /// Also each model's loss-and-gradient function `<model>_grad`.
  bool gradients = false;
  /// Also each model's AdamW step `<model>_train_step` (implies gradients).
  bool trainStep = false;
  /// With trainStep: also `<model>_optimizer_step`, the step's update from
  /// given gradients (lm-build-train-step `optimizer-step`).
  bool optimizerStep = false;
  /// Each distinct block of a model in a function of its own, called once
  /// per layer (lm-outline-layers): compile time independent of the depth.
  bool outlineLayers = true;
  /// The model's forward functions also return their probes: each attention
  /// block's weights and each router's gates and experts (lm-expose-probes;
  /// for `switchyard analyze`), every layer inline (outlineLayers is then
  /// ignored).
  bool probes = false;
  /// Also each model's decoding step over key/value caches, `<model>_decode`
  /// (lm-build-decoder; for generation), where the model can have one.
  bool decoder = false;
  /// The fusions and the expert grouping (convert-moe-to-linalg
  /// `grouped-experts`).
  FusionOptions fusion;
  /// With fusion.groupedExperts: 0 reads the routes' sort on the host (the
  /// CPU target's formulation); T > 0 pads each expert's rows to multiples
  /// of T and reads nothing on the host (`grouped-tile-rows`; the GPU's).
  int64_t groupedTileRows = 0;
  /// How the fused ops lower (the target's kernels).
  FusedKernelForms fusedForms;
  /// moe.embed_grad as a scatter-add (the CPU's) rather than a one-hot
  /// matmul (convert-moe-to-linalg `scatter-embedding-gradient`).
  bool scatterEmbeddingGradient = false;
  /// moe.flash_attention(_grad) kept, as moe.flash_attention(_grad)_kernel,
  /// for the GPU's tensor-core kernels
  /// (convert-moe-to-linalg `flash-attention-kernel`).
  bool flashAttentionKernel = false;
  /// The row kernels of that attention round its factors to this type
  /// (convert-moe-to-linalg `flash-attention-rounding`): the CPU reference
  /// of the GPU's bf16/f16 tensor-core route.
  std::string flashAttentionRounding = "f32";
};

/// The GPU targets' grouped formulation pads each expert's rows to this
/// many: a multiple of the tensor-core kernels' 64-row block tiles.
constexpr int64_t kGpuGroupedTileRows = 64;

/// The options every target shares: which functions to build from each
/// model (its forward pass always; gradients and train step on request),
/// and which fusions to apply.
template <typename Derived>
struct ModelPipelineOptions : public PassPipelineOptions<Derived> {
  detail::PassOptions::Option<int64_t> numLayers{
      *this, "num-layers",
      llvm::cl::desc("Model depth L for the scaled initialisers; 0 counts "
                     "the attention blocks of each model"),
      llvm::cl::init(0)};
  detail::PassOptions::Option<bool> gradients{
      *this, "gradients",
      llvm::cl::desc("Also build each model's loss-and-gradient function "
                     "(<model>_grad)"),
      llvm::cl::init(false)};
  detail::PassOptions::Option<bool> trainStep{
      *this, "train-step",
      llvm::cl::desc("Also build each model's AdamW train step "
                     "(<model>_train_step; implies gradients)"),
      llvm::cl::init(false)};
  detail::PassOptions::Option<bool> outlineLayers{
      *this, "outline-layers",
      llvm::cl::desc("Compile each distinct block once, as a function called "
                     "per layer (lm-outline-layers); off: every layer "
                     "inline"),
      llvm::cl::init(true)};
  detail::PassOptions::Option<std::string, FusionSettingParser> fuse{
      *this, "fuse",
      llvm::cl::desc("Fusions to apply: default (the target's, "
                     "docs/Fusions.md), all, none, or a comma-separated "
                     "list of router (moe-fuse-router), expert-projection "
                     "(moe-fuse-expert-projection), attention "
                     "(moe-fuse-attention), elementwise "
                     "(switchyard-fuse-elementwise), rows "
                     "(switchyard-fuse-rows)"),
      llvm::cl::init("default")};
  detail::PassOptions::Option<std::string, ExpertsSettingParser> experts{
      *this, "experts",
      llvm::cl::desc("How the unfused expert projections and their "
                     "gradients compute: grouped (routes sorted by expert, "
                     "one matmul per expert; on the GPU targets without "
                     "host reads, each expert's rows padded to 64-row "
                     "tiles), dense (every token through every expert), or "
                     "default (the target's: grouped)"),
      llvm::cl::init("default")};

  /// The lowering these options select for `target` (whose defaults
  /// FusionOptions::targetDefault sets).
  LoweringOptions lowering(Target target) const {
    LoweringOptions result;
    result.gradients = gradients;
    result.trainStep = trainStep;
    result.outlineLayers = outlineLayers;
    // The option parsers accepted both settings.
    result.fusion = llvm::cantFail(resolveFusions(fuse, experts, target));
    result.scatterEmbeddingGradient = target == Target::Cpu;
    return result;
  }
};

/// The register tile of the CPU's matmul kernels
/// (switchyard-cpu-contraction-kernels): output rows × f32 columns.
struct CpuKernelTile {
  int64_t rows = 8, columns = 32;
};

/// The tile for vector registers `vectorBits` wide, `vectorRegisters` of
/// them: two vectors of columns per row, and as many rows (at most 8) as
/// leave four registers for b's row and a's broadcast: 8 × 32 on AVX-512
/// (16 accumulators of 32 registers), 6 × 16 on AVX2 (12 of 16: BLIS's
/// Haswell kernel), 8 × 8 on NEON (16 of 32).
CpuKernelTile cpuKernelTile(unsigned vectorBits, unsigned vectorRegisters);

/// Options of the CPU target.
struct CpuPipelineOptions : public ModelPipelineOptions<CpuPipelineOptions> {
  detail::PassOptions::Option<unsigned> vectorBits{
      *this, "vector-bits",
      llvm::cl::desc("Width of the target's vector registers in bits (512: "
                     "AVX-512, 256: AVX2, 128: NEON or SSE); with "
                     "vector-registers, it sets the matmul kernels' "
                     "register tile (cpuKernelTile)"),
      llvm::cl::init(512)};
  detail::PassOptions::Option<unsigned> vectorRegisters{
      *this, "vector-registers",
      llvm::cl::desc("Number of the target's vector registers (32: AVX-512 "
                     "and NEON, 16: AVX2 and SSE)"),
      llvm::cl::init(32)};
  detail::PassOptions::Option<std::string> roundContractionOperands{
      *this, "round-contraction-operands",
      llvm::cl::desc("Round the factors of matmul-like contractions to this "
                     "type (f32: exact; bf16 or f16: what the GPU's tensor "
                     "cores compute, as a reference for them)"),
      llvm::cl::init("f32")};
};

/// Stages 2-4: lm layers decomposed into moe ops, models turned into
/// functions taking their parameters, with `options.gradients` their
/// loss-and-gradient functions (lm-differentiate), with `options.trainStep`
/// (which implies gradients) each model's optimizer step
/// (lm-build-train-step), the fusions `options.fusion` selects, and moe ops
/// lowered to linalg on tensors.
void buildLowerToLinalgPipeline(OpPassManager &pm,
                                const LoweringOptions &options);

/// The front end with `numLayers`, then buildLowerToLinalgPipeline: what
/// every target runs before its own code generation.
void buildModelToLinalgPipeline(OpPassManager &pm, int64_t numLayers,
                                const LoweringOptions &options);

/// Linalg on tensors to buffers: one-shot bufferization across function
/// boundaries (identity layouts) and ownership-based deallocation; public
/// functions return fresh buffers their caller owns. Shared by the targets.
/// With `rematerializeFills` (the GPU's), every op that starts from a
/// shared fill gets a fill of its own first (switchyard-rematerialize-fills)
/// instead of a copy of the filled buffer.
void buildBufferizePipeline(OpPassManager &pm, bool rematerializeFills = false);

/// Stages 5-6 for the CPU: linalg on tensors (with arith, math, scf,
/// tensor) in func.func, to the LLVM dialect. Public functions return
/// freshly allocated result buffers that the caller owns.
/// With `roundContractionOperands` bf16 or f16, the factors of matmul-like
/// contractions are rounded to it after bufferization
/// (switchyard-round-contraction-operands), at the point where the GPU
/// target's tensor-core pass sees the same ops.
/// `tile` is the matmul kernels' register tile.
void buildCpuCodegenPipeline(OpPassManager &pm,
                             llvm::StringRef roundContractionOperands = "f32",
                             CpuKernelTile tile = {});

/// The CPU target's last stages: bufferized loops (scf, with vector, math,
/// arith, memref) to the LLVM dialect, each top-level loop nest in a
/// function of its own. Shared by buildCpuCodegenPipeline and the GPU
/// emulation.
void buildCpuLoopsToLLVMStages(OpPassManager &pm);

/// The whole CPU target: the front end, the lowering to linalg, and CPU
/// code generation.
void buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options);

/// Options of the GPU target (NVIDIA, through NVVM): the model options,
/// then GpuTargetOptions's.
struct GpuPipelineOptions : public ModelPipelineOptions<GpuPipelineOptions> {
  PassOptionsBinding<GpuTargetOptions> target{*this};
};

/// Stages 5-6 for NVIDIA GPUs: linalg on tensors (with arith, math, scf,
/// tensor) in func.func, to host code in the LLVM dialect that launches
/// kernels (gpu.launch_func) and one gpu.binary of kernels per function.
/// Buffers live in device memory; see lib/Pipelines/GpuPipeline.cpp.
void buildGpuCodegenPipeline(OpPassManager &pm,
                             const GpuTargetOptions &options);

/// The whole GPU target: the front end, the lowering to linalg, and GPU
/// code generation.
void buildGpuPipeline(OpPassManager &pm, const GpuPipelineOptions &options);

/// Options of the GPU emulation: the GPU target's kernels run on the
/// host CPU (switchyard-gpu-launch-to-host-loops). The model options, then
/// GpuEmulationOptions's.
struct GpuEmulationPipelineOptions
    : public ModelPipelineOptions<GpuEmulationPipelineOptions> {
  PassOptionsBinding<GpuEmulationOptions> emulation{*this};
};

/// Stages 5-6 of the GPU target up to its kernels (bufferization into
/// device memory, kernel formation, host leftovers into kernels), then the
/// kernels as loops on the host (switchyard-gpu-launch-to-host-loops) and
/// the CPU target's last stages: host code in the LLVM dialect that runs
/// the GPU route's kernels one thread after another. For running and
/// testing the GPU route's code on machines without a GPU.
void buildGpuEmulationCodegenPipeline(OpPassManager &pm,
                                      const GpuEmulationOptions &options);

/// The front end, the lowering to linalg, and the GPU emulation.
void buildGpuEmulationPipeline(OpPassManager &pm,
                               const GpuEmulationPipelineOptions &options);

/// Adds the dialects and interfaces the GPU pipeline produces and needs
/// (gpu, nvvm, the NVVM target, LLVM IR translations) to `registry`.
void registerGpuDialects(DialectRegistry &registry);

/// Registers the GPU pipelines and the Switchyard GPU passes.
void registerGpuPipelines();

/// Registers every Switchyard pipeline with the global pass registry.
void registerPipelines();

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_PIPELINES_PIPELINES_H
