//===- switchyard-bench.cpp - Switchyard's kernels against their peers ----===//
//
// The benchmark driver (bench/cpu.sh and bench/gpu.sh run it). Three
// benchmarks, each timing Switchyard's compiled code on the CPU or the GPU
// against peers measured in the same run on the same inputs, after checking
// that every implementation computes the same thing:
//
//   (default)        one SwitchHead attention layer, forward and
//                    forward+backward (LayerBench.cpp);
//   --kernels FILE   the layer's ops one by one, with TFLOP/s and the
//                    fraction of the matmul peak (KernelBench.cpp);
//   --train-step M,  whole AdamW training steps of models, e.g. the 47M
//                    SwitchHead against its dense baseline, and against
//                    the same models in PyTorch (TrainStepBench.cpp).
//
//===----------------------------------------------------------------------===//

#include "bench/Bench.h"
#include "lib/Pipelines/OptionsBinder.h"
#include "runtime/ComputeThreads.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"

using namespace switchyard::bench;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("Benchmark options");
cl::OptionCategory deviceCategory("Device options");

cl::opt<std::string> configName(
    "config",
    cl::desc("Layer benchmark: the paper's 47m (default) or 262m "
             "configuration, or tiny (the test model's width)"),
    cl::init("47m"), cl::cat(category));
cl::opt<std::string> kernels(
    "kernels",
    cl::desc("Instead of the layer: time every function of this file and its "
             "loss-and-gradient function (lm-differentiate), on seeded "
             "random inputs (bench/Inputs/kernels-47m.mlir: the layer's ops "
             "one by one)"),
    cl::value_desc("file.mlir"), cl::cat(category));
cl::list<std::string> trainStep(
    "train-step", cl::CommaSeparated,
    cl::desc("Instead of the layer: time whole training steps of these "
             "models (the first is the one the others are compared with), "
             "e.g. examples/models/switchhead-47m.mlir,examples/models/"
             "dense-47m.mlir"),
    cl::value_desc("model.mlir,..."), cl::cat(category));
cl::opt<bool> compileOnly(
    "compile-only",
    cl::desc("With --train-step: only compile, and report the compile times "
             "(for --device gpu this needs no GPU, only the CUDA toolkit)"),
    cl::init(false), cl::cat(category));
cl::opt<bool> inlineLayers(
    "inline-layers",
    cl::desc("Compile every layer inline instead of each distinct block once "
             "(lm-outline-layers off): the program structure it replaced, "
             "for comparison"),
    cl::init(false), cl::cat(category));
cl::list<std::string> fuse(
    "fuse", cl::CommaSeparated,
    cl::desc("With --kernels or --train-step: the fusion settings to measure, "
             "default (the device's: on the GPU the same as grouped, on the "
             "CPU router, expert-projection and elementwise), all, "
             "none, grouped (router and attention fused, the expert "
             "projections unfused and grouped by expert: on the GPU on "
             "tensor cores; switchyard --experts) and/or, on the CPU, dense "
             "(none, with the expert projections dense over all experts "
             "instead of grouped by expert), no-rows (default without "
             "switchyard-fuse-rows), moe (default with the router and the "
             "expert projections fused: the mission's fusion) (default for "
             "--kernels: "
             "all,none,grouped on the GPU, all,none,dense on the CPU; for "
             "--train-step: default; the layer benchmark measures them all, "
             "each setting once)"),
    cl::cat(category));
cl::opt<int64_t> batch("batch", cl::desc("Sequences per call or step (2)"),
                       cl::init(2), cl::cat(category));
cl::opt<unsigned> reps("reps",
                       cl::desc("Timed runs per measurement (the median is "
                                "reported), after one warm-up run (5)"),
                       cl::init(5), cl::cat(category));
cl::opt<unsigned> threads(
    "cpu-threads",
    cl::desc("Threads Switchyard's CPU code runs its parallel loops on (0: "
             "one per core, the default)"),
    cl::init(0), cl::cat(category));
cl::opt<std::string>
    cpu("cpu",
        cl::desc("Generate Switchyard's CPU code for this CPU instead of this "
                 "machine's: an LLVM CPU name, as clang's -mcpu takes "
                 "(x86-64-v3 or znver1 times AVX2's kernels on an AVX-512 "
                 "machine); it must be one this machine can run"),
        cl::value_desc("name"), cl::cat(category));
cl::opt<std::string> cpuFeatures(
    "cpu-features",
    cl::desc("Features added to or taken from the CPU's, as clang's -mattr "
             "takes them (+avx512f,-avx512vl)"),
    cl::value_desc("list"), cl::cat(category));
cl::opt<std::string> python(
    "python",
    cl::desc("Python with PyTorch for the peer baselines (default "
             "/usr/bin/python3); empty: no PyTorch peers"),
    cl::init("/usr/bin/python3"), cl::cat(category));
cl::list<unsigned> torchThreads(
    "torch-threads", cl::CommaSeparated,
    cl::desc("PyTorch CPU thread counts to measure (layer and train step: "
             "default 1 and every core; kernels: the first, default 1)"),
    cl::cat(category));
cl::opt<std::string> layerScript(
    "script", cl::desc("The PyTorch layer baseline script"),
    cl::init(SWITCHYARD_BENCH_DIR "/torch_switchhead.py"), cl::cat(category));
cl::opt<std::string> kernelScript(
    "kernel-script", cl::desc("The PyTorch baseline script of --kernels"),
    cl::init(SWITCHYARD_BENCH_DIR "/torch_kernels.py"), cl::cat(category));
cl::opt<std::string> stepScript(
    "step-script", cl::desc("The PyTorch baseline script of --train-step"),
    cl::init(SWITCHYARD_BENCH_DIR "/torch_train_step.py"), cl::cat(category));
cl::opt<bool> skipReference("skip-reference",
                            cl::desc("Do not time the C++ reference"),
                            cl::init(false), cl::cat(category));
cl::opt<std::string> jsonOut("json",
                             cl::desc("Also write the results here as JSON"),
                             cl::value_desc("file"), cl::cat(category));

cl::opt<std::string> device(
    "device",
    cl::desc("Where Switchyard's code runs: cpu (default) or gpu (the CUDA "
             "backend, device 0; PyTorch's peers then run on cuda too)"),
    cl::init("cpu"), cl::cat(deviceCategory));
/// The GPU target's options as --gpu-<option> (with --device gpu).
mlir::switchyard::CommandLineBinding<mlir::switchyard::GpuTargetOptions>
    gpuTarget("gpu-", deviceCategory);

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // The runtime's: compile times are measured without them. --mlir-timing
  // shows where a compilation's time goes, stage by stage.
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  cl::getRegisteredOptions()["mlir-timing"]->addCategory(category);
  cl::getRegisteredOptions()["verify-each"]->addCategory(category);
  cl::HideUnrelatedOptions({&category, &deviceCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard-bench: Switchyard's compiled code against its peers\n\n"
      "Times code compiled by Switchyard, for the CPU or (--device gpu) the "
      "GPU, against peers\nmeasured in the same run on the same inputs, "
      "after checking that every implementation\ncomputes the same loss and "
      "gradient norms. Ratios are a peer's median time over\nSwitchyard's: "
      "above 1, Switchyard is faster.\n\n"
      "  (default)      one SwitchHead layer (embedding, lm.switchhead with "
      "Transformer-XL\n                 memory, cross-entropy), forward and "
      "forward+backward: the device's\n                 default fusions "
      "(CPU: router, expert projections, elementwise; GPU: grouped),\n"
      "                 then all and none where they differ, on the CPU "
      "unfused with dense\n                 expert projections, the "
      "default with the router and expert projections\n"
      "                 fused (moe) where it lacks them, the C++ reference "
      "(forward), the dense\n                 MHA layer of the same "
      "parameter count, and PyTorch (bench/torch_switchhead.py)\n"
      "                 for both\n"
      "  --kernels F    every function of F and its _grad, fused and "
      "unfused, against PyTorch\n                 (bench/torch_kernels.py: "
      "per-expert loop, dense, torch.mm of equal\n                 FLOPs, "
      "scaled_dot_product_attention), in TFLOP/s and % of the matmul peak\n"
      "  --train-step M training steps of models compared (the 47M SwitchHead "
      "against dense),\n                 and each against the same model "
      "in PyTorch (bench/torch_train_step.py)\n");
  if (device != "cpu" && device != "gpu") {
    llvm::errs() << "switchyard-bench: error: --device: expected cpu or gpu, "
                    "found '"
                 << device << "'\n";
    return 1;
  }
  if (llvm::SmallVector<std::string> given = gpuTarget.given();
      device != "gpu" && !given.empty()) {
    llvm::errs() << "switchyard-bench: error: " << given.front()
                 << " needs --device gpu\n";
    return 1;
  }
  if (device == "gpu")
    if (llvm::Error error = gpuTarget.value().verify("--gpu-")) {
      llvm::errs() << "switchyard-bench: error: "
                   << llvm::toString(std::move(error)) << "\n";
      return 1;
    }
  if (device == "gpu" &&
      (cpu.getNumOccurrences() || cpuFeatures.getNumOccurrences())) {
    llvm::errs() << "switchyard-bench: error: --cpu and --cpu-features need "
                    "--device cpu\n";
    return 1;
  }
  if (compileOnly && trainStep.empty()) {
    llvm::errs() << "switchyard-bench: error: --compile-only needs "
                    "--train-step\n";
    return 1;
  }

  Options options;
  options.config = configName;
  options.batch = batch;
  options.reps = reps;
  rt::setComputeThreads(threads);
  options.device = device;
  options.gpuTarget = gpuTarget.value();
  options.cpu = cpu;
  options.cpuFeatures = cpuFeatures;
  options.python = python;
  options.layerScript = layerScript;
  options.kernelScript = kernelScript;
  options.stepScript = stepScript;
  options.torchThreads.assign(torchThreads.begin(), torchThreads.end());
  options.skipReference = skipReference;
  options.compileOnly = compileOnly;
  options.inlineLayers = inlineLayers;
  options.fusions.assign(fuse.begin(), fuse.end());
  options.jsonOut = jsonOut;
  if (options.fusions.empty()) {
    options.fusions = trainStep.empty() ? std::vector<std::string>{"all", "none"}
                                        : std::vector<std::string>{"default"};
    if (trainStep.empty())
      options.fusions.push_back(options.gpu() ? kGroupedExperts.str()
                                              : kDenseExperts.str());
  }
  for (const std::string &setting : options.fusions)
    if (setting != "default" && setting != "all" && setting != "none" &&
        setting != kGroupedExperts && setting != kWithoutRows &&
        setting != kMoeFusion && (setting != kDenseExperts || options.gpu())) {
      llvm::errs()
          << "switchyard-bench: error: --fuse: expected default, all, "
             "none, grouped, no-rows, moe or (on the CPU) dense, found '"
          << setting << "'\n";
      return 1;
    }

  if (!kernels.empty())
    return runKernels(options, kernels);
  if (!trainStep.empty())
    return runTrainSteps(options, std::vector<std::string>(
                                      trainStep.begin(), trainStep.end()));
  return runLayer(options);
}
