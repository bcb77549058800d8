//===- switchyard-gpu-check.cpp - the GPU backend against the CPU backend -===//
//
// `switchyard-gpu-check FILE.mlir` compiles FILE with both runtime backends
// (CpuProgram and GpuProgram: independent code generation from the same
// linalg), calls every public function (or those --function names) on the
// same seeded random inputs, and compares each result. Exit status 0 only
// when every result of every function matches; one line per result says
// how close it was. It needs a GPU; test/Integration/CUDA runs it.
//
// --emulate runs the GPU side without a GPU: the GPU target's kernels, as
// its SIMT route forms them, execute on the host one thread after another
// (CompileOptions::emulateGpu, switchyard-gpu-emulation-pipeline), with
// every load and store checked against its buffer's bounds. That checks
// everything of the GPU route up to the NVVM lowering (the fused kernels,
// the mapping to blocks and threads, the host code's kernels, device
// buffers) but not the NVVM lowering, the tensor cores or the driver;
// test/Integration/GpuEmulation runs it.
//
// Inputs: parameters (`lm.param`) get their declared initialisers where the
// module declares them, other floats are uniform in [-1, 1]; integer
// arguments are uniform in [0, lm.vocab) where the argument has `lm.vocab`,
// else in [0, --index-range); i1 arguments are fair coin flips; dynamic
// sizes are --dynamic-size (a list checks each size with the programs
// compiled once).
//
// Optimizer arguments of a train step get plausible values: the
// hyperparameters lr 1e-3, betas 0.9 / 0.99, eps 1e-8, weight decay 0.01,
// clip 0.25 and the bias corrections of step 10; first moments uniform in
// [-1e-2, 1e-2], second moments in [0, 1e-4].
//
// --element-type bf16|f16 compiles the GPU side with tensor-core matmuls
// (GpuTargetOptions::elementType) and the CPU side with the same rounding
// of the contraction factors (CompileOptions::roundContractionOperands,
// switchyard-round-contraction-operands, the same code on the same linalg
// ops), so that the two differ only in the order of the f32 accumulation.
// The tensor-core flash attention (moe.flash_attention_kernel and
// moe.flash_attention_grad_kernel, with the fusions, on sm_80+) rounds its
// factors Q, K, V, dO and the weights P and dS; the CPU's flash attention
// rounds the same (CompileOptions::roundAttentionFactors) but the forward
// pass's weights P, which the kernel rounds against a block's maximum and
// the row kernel would against the running one. --round-inputs
// bf16|f16 draws inputs that the type holds exactly
// (test/Integration/CUDA/attention.test).
// --fusion none compiles both sides without the moe fusions (the unfused
// route: linalg matmuls, softmax, top-k) instead of with all of them.
// --experts grouped then groups the expert projections by expert on both
// sides: the GPU's padded formulation (a parallel sort, moe.grouped_matmul,
// moe.grouped_weight_grad) against the CPU's (the sort read on the host,
// one linalg matmul per expert), which round the same factors.
//
// Tolerance: a float result matches when every element has
// |gpu - cpu| <= atol + rtol * |cpu| (defaults 1e-4 and 1e-3, for f32 sums
// accumulated in a different order), and NaN or infinity where the other
// has the same; integer and i1 results must be equal. With --rel-l2 T, a
// float result that fails this still matches when its relative error norm
// ||gpu - cpu||_2 / ||cpu||_2 is at most T: for whole low-precision models,
// where a last-bit difference of the f32 sums (another summation order) can
// round to a neighbouring bf16 value and change a top-k choice, so that a
// few tokens differ by far more than the rounding (see
// test/Integration/CUDA/tensor-cores-tiny.test).
//
//===----------------------------------------------------------------------===//

#include "lib/Pipelines/Pipelines.h"
#include "runtime/Engine/CpuProgram.h"
#include "runtime/Engine/GpuProgram.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <random>

namespace cl = llvm::cl;
namespace rt = switchyard::runtime;

namespace {

enum class Fusion { all, none };
cl::OptionCategory category("switchyard-gpu-check options");

cl::opt<std::string> input(cl::Positional, cl::desc("<file.mlir>"),
                           cl::Required, cl::cat(category));
cl::list<std::string>
    functionNames("function",
                  cl::desc("Check this function (repeatable; default: all)"),
                  cl::cat(category));
cl::opt<bool> gradients("gradients",
                        cl::desc("Also compile and check the <model>_grad "
                                 "functions (lm-differentiate)"),
                        cl::cat(category));
cl::opt<bool> trainStep("train-step",
                        cl::desc("Also compile the <model>_train_step "
                                 "functions (checked only if named)"),
                        cl::cat(category));
cl::opt<int64_t> numLayers("num-layers", cl::desc("As in switchyard"),
                           cl::init(0), cl::cat(category));
cl::list<int64_t> dynamicSizes(
    "dynamic-size",
    cl::desc("Size of every dynamic dimension (3); a comma-separated list "
             "checks each size in turn with the programs compiled once"),
    cl::CommaSeparated, cl::cat(category));
cl::opt<int64_t>
    indexRange("index-range",
               cl::desc("Integer arguments without lm.vocab lie in [0, N) (2)"),
               cl::init(2), cl::cat(category));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of the inputs (0)"), cl::init(0),
                       cl::cat(category));
cl::opt<double> absoluteTolerance("atol", cl::desc("Absolute tolerance (1e-4)"),
                                  cl::init(1e-4), cl::cat(category));
cl::opt<double> relativeTolerance("rtol", cl::desc("Relative tolerance (1e-3)"),
                                  cl::init(1e-3), cl::cat(category));
cl::opt<bool> emulate(
    "emulate",
    cl::desc("Run the GPU side's kernels on the host (the GPU emulation, "
             "with bounds checks) instead of on a GPU: no GPU needed; "
             "bf16/f16 matmuls run as tensor-core kernels (mma.sync, as on "
             "sm_80 and newer), or as sm_75's rounded SIMT route with "
             "--chip sm_75"),
    cl::cat(category));
cl::opt<unsigned> optLevel(
    "opt-level",
    cl::desc("LLVM optimisation level (0-3) of the JIT-compiled code on both "
             "sides, IR passes and code generation (default 2); on a GPU, the "
             "kernels take theirs from the GPU pipeline"),
    cl::init(2), cl::cat(category));
cl::opt<double> relativeL2(
    "rel-l2",
    cl::desc("Also accept a float result whose ||gpu - cpu||_2 is at most "
             "this fraction of ||cpu||_2 (default 0: elementwise only)"),
    cl::init(0.0), cl::cat(category));
cl::opt<std::string> chip("chip", cl::desc("GPU chip (default: the device's)"),
                          cl::cat(category));
cl::opt<bool> wgmma(
    "wgmma",
    cl::desc("With --chip sm_90a and --element-type bf16/f16: the wgmma + "
             "TMA kernels for the contractions that fit them (the GPU "
             "pipeline's wgmma option), on a GPU or in the emulation"),
    cl::cat(category));
cl::opt<std::string>
    toolkit("gpu-toolkit",
            cl::desc("CUDA toolkit root (default: "
                     "$SWITCHYARD_CUDA_TOOLKIT, else the build's)"),
            cl::cat(category));
cl::opt<std::string> elementType(
    "element-type",
    cl::desc("Matmul multiplicands on the GPU: f32 (default), bf16 or f16 "
             "(tensor cores); the CPU reference rounds them the same way"),
    cl::init("f32"), cl::cat(category));
cl::opt<std::string> roundInputs(
    "round-inputs",
    cl::desc("Round every float input to the nearest bf16 or f16 value "
             "(default f32: as drawn), so that a GPU route that rounds its "
             "inputs to that type rounds them exactly"),
    cl::init("f32"), cl::cat(category));
cl::opt<Fusion> fusion(
    "fusion", cl::desc("The moe fusions on both sides (default: all)"),
    cl::values(clEnumValN(Fusion::all, "all",
                          "router, expert projection and attention fused"),
               clEnumValN(Fusion::none, "none", "the unfused route")),
    cl::init(Fusion::all), cl::cat(category));

enum class Experts { dense, grouped };
cl::opt<Experts> experts(
    "experts",
    cl::desc("With --fusion none, how both sides compute the expert "
             "projections (default: dense)"),
    cl::values(clEnumValN(Experts::dense, "dense",
                          "every token through every expert"),
               clEnumValN(Experts::grouped, "grouped",
                          "grouped by expert: on the GPU side with no host "
                          "reads (padded segments), on the CPU with the "
                          "sort read on the host; both round the same "
                          "factors")),
    cl::init(Experts::dense), cl::cat(category));

/// Seeded random inputs for `function`.
llvm::Expected<std::vector<rt::HostTensor>>
makeInputs(const rt::FunctionSpec &function, const rt::ParamTable &params,
           int64_t dynamicSize, std::mt19937_64 &generator) {
  std::vector<rt::HostTensor> inputs;
  for (auto [index, spec] : llvm::enumerate(function.arguments)) {
    std::vector<int64_t> shape = spec.shape;
    for (int64_t &size : shape)
      if (size < 0)
        size = dynamicSize;
    int64_t count = 1;
    for (int64_t size : shape)
      count *= size;
    const rt::ParamSpec *param =
        spec.param.empty() ? nullptr : params.find(spec.param);
    switch (spec.type) {
    case rt::ElementType::f32: {
      std::vector<float> values(static_cast<size_t>(count));
      if (spec.role == rt::ArgRole::hyper && count == 8) {
        // lr, beta1, beta2, eps, weight decay, clip, 1 - beta1^10,
        // 1 - beta2^10.
        values = {1e-3f, 0.9f,  0.99f,      1e-8f,
                  0.01f, 0.25f, 0.6513216f, 0.0956179f};
      } else if (spec.role == rt::ArgRole::adamM ||
                 spec.role == rt::ArgRole::adamV) {
        bool second = spec.role == rt::ArgRole::adamV;
        std::uniform_real_distribution<float> uniform(second ? 0.0f : -1e-2f,
                                                      second ? 1e-4f : 1e-2f);
        for (float &v : values)
          v = uniform(generator);
      } else if (param && param->shape == shape) {
        rt::initialize(*param, generator(), values);
      } else {
        std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
        for (float &v : values)
          v = uniform(generator);
      }
      if (roundInputs != "f32") {
        const llvm::fltSemantics &narrow = roundInputs == "bf16"
                                               ? llvm::APFloat::BFloat()
                                               : llvm::APFloat::IEEEhalf();
        for (float &v : values) {
          llvm::APFloat x(v);
          bool lost = false;
          x.convert(narrow, llvm::APFloat::rmNearestTiesToEven, &lost);
          x.convert(llvm::APFloat::IEEEsingle(),
                    llvm::APFloat::rmNearestTiesToEven, &lost);
          v = x.convertToFloat();
        }
      }
      inputs.push_back(rt::HostTensor::fromValues<float>(spec.param, spec.type,
                                                         shape, values));
      break;
    }
    case rt::ElementType::i32:
    case rt::ElementType::i64: {
      int64_t range = spec.vocab ? *spec.vocab : int64_t(indexRange);
      // Seeds (0-d i64) take any value.
      if (shape.empty() && spec.type == rt::ElementType::i64 && !spec.vocab)
        range = int64_t(1) << 40;
      std::uniform_int_distribution<int64_t> uniform(0, range - 1);
      std::vector<int64_t> wide(static_cast<size_t>(count));
      for (int64_t &v : wide)
        v = uniform(generator);
      if (spec.type == rt::ElementType::i64) {
        inputs.push_back(
            rt::HostTensor::fromValues<int64_t>("", spec.type, shape, wide));
      } else {
        std::vector<int32_t> narrow(wide.begin(), wide.end());
        inputs.push_back(
            rt::HostTensor::fromValues<int32_t>("", spec.type, shape, narrow));
      }
      break;
    }
    case rt::ElementType::bool_: {
      std::vector<uint8_t> bits(static_cast<size_t>(count));
      for (uint8_t &v : bits)
        v = uint8_t(generator() & 1);
      inputs.push_back(
          rt::HostTensor::fromValues<uint8_t>("", spec.type, shape, bits));
      break;
    }
    default:
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("@{0} argument #{1}: the checker makes f32, i32, i64 "
                        "and i1 inputs only, not {2}",
                        function.name, index, rt::toString(spec.type)));
    }
  }
  return inputs;
}

/// Compares one result; prints a line; returns whether it matches.
bool compare(llvm::StringRef function, size_t index, const rt::HostTensor &cpu,
             const rt::HostTensor &gpu) {
  std::string where = llvm::formatv("@{0} result #{1} ({2}", function, index,
                                    rt::toString(cpu.type))
                          .str();
  for (int64_t size : cpu.shape)
    where += " " + std::to_string(size);
  where += ")";
  if (cpu.type != gpu.type || cpu.shape != gpu.shape ||
      cpu.bytes.size() != gpu.bytes.size()) {
    llvm::outs() << where << ": MISMATCH: different type or shape\n";
    return false;
  }
  if (cpu.type != rt::ElementType::f32 && cpu.type != rt::ElementType::f64) {
    bool equal = cpu.bytes == gpu.bytes;
    llvm::outs() << where << (equal ? ": equal\n" : ": MISMATCH: not equal\n");
    return equal;
  }
  auto value = [](const rt::HostTensor &t, size_t i) -> double {
    return t.type == rt::ElementType::f32 ? double(t.values<float>()[i])
                                          : t.values<double>()[i];
  };
  size_t count = size_t(cpu.numElements());
  double worst = 0, worstRatio = 0;
  size_t worstAt = 0, over = 0;
  double errorSquares = 0, referenceSquares = 0;
  bool ok = true, finite = true;
  for (size_t i = 0; i < count; ++i) {
    double c = value(cpu, i), g = value(gpu, i);
    if (!std::isfinite(c) || !std::isfinite(g)) {
      bool same = (std::isnan(c) && std::isnan(g)) || c == g;
      if (!same && ok) {
        llvm::outs() << llvm::formatv(
            "{0}: MISMATCH at element {1}: cpu {2}, gpu {3}\n", where, i, c, g);
      }
      ok &= same;
      finite = false;
      continue;
    }
    double error = std::abs(g - c);
    errorSquares += error * error;
    referenceSquares += c * c;
    double ratio =
        error / (absoluteTolerance + relativeTolerance * std::abs(c));
    over += ratio > 1.0;
    if (ratio > worstRatio) {
      worstRatio = ratio;
      worst = error;
      worstAt = i;
    }
  }
  double relative = referenceSquares > 0
                        ? std::sqrt(errorSquares / referenceSquares)
                        : std::sqrt(errorSquares);
  bool elementwise = worstRatio <= 1.0;
  ok &= elementwise || (relativeL2 > 0 && finite && relative <= relativeL2);
  std::string outside =
      over ? llvm::formatv(", {0} of {1} elements outside it; relative L2 "
                           "error {2:e2}",
                           over, count, relative)
                 .str()
           : std::string();
  llvm::outs() << llvm::formatv(
      "{0}: max |gpu - cpu| {1:e2} at element {2} ({3:f2} of the tolerance"
      "{4}){5}\n",
      where, worst, worstAt, worstRatio, outside,
      !ok           ? ": MISMATCH"
      : elementwise ? ": ok"
                    : ": ok (relative L2)");
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // --mlir-timing (and --mlir-print-ir-*, hidden): the runtime applies them
  // to every compilation stage, of both sides.
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  cl::getRegisteredOptions()["mlir-timing"]->addCategory(category);
  cl::getRegisteredOptions()["verify-each"]->addCategory(category);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard-gpu-check: run a module on the GPU (or the GPU emulation) "
      "and the CPU backend and compare\n");
  auto fail = [](llvm::Error error) {
    llvm::errs() << "switchyard-gpu-check: " << llvm::toString(std::move(error))
                 << "\n";
    return 2;
  };
  rt::CompileOptions options;
  options.numLayers = numLayers;
  options.gradients = gradients;
  options.trainStep = trainStep;
  if (optLevel > 3) {
    llvm::errs() << "switchyard-gpu-check: --opt-level: expected 0 to 3, "
                    "found "
                 << optLevel << "\n";
    return 2;
  }
  options.optLevel = optLevel;
  llvm::SmallVector<int64_t> sizes(dynamicSizes.begin(), dynamicSizes.end());
  if (sizes.empty())
    sizes.push_back(3);
  for (int64_t size : sizes) {
    if (size < 1) {
      llvm::errs() << "switchyard-gpu-check: --dynamic-size: expected sizes "
                      ">= 1, found "
                   << size << "\n";
      return 2;
    }
  }
  // Both sides compute the same route: every fusion, or none with the
  // expert projections dense (grouped with --experts grouped, below).
  options.fusion = fusion == Fusion::none
                       ? mlir::switchyard::FusionOptions::none(false)
                       : mlir::switchyard::FusionOptions::all(false);
  for (const cl::opt<std::string> *type : {&elementType, &roundInputs}) {
    if (!llvm::is_contained({"f32", "bf16", "f16"}, llvm::StringRef(*type))) {
      llvm::errs() << "switchyard-gpu-check: --" << type->ArgStr
                   << ": expected f32, bf16 or f16, found '" << *type << "'\n";
      return 2;
    }
  }
  // The CPU reference rounds the factors as the tensor cores do, and those
  // of the attention the tensor-core kernels take (sm_80+) as they do.
  options.roundContractionOperands = elementType;
  // The GPU side's options; the emulation takes what it reads of them.
  rt::GpuTargetOptions gpuOptions;
  gpuOptions.chip = chip;
  gpuOptions.toolkit = toolkit;
  gpuOptions.elementType = elementType;
  gpuOptions.wgmma = wgmma;
  if (gpuOptions.usesTensorCores())
    options.roundAttentionFactors = elementType;
  if (experts == Experts::grouped) {
    if (fusion != Fusion::none) {
      llvm::errs() << "switchyard-gpu-check: --experts grouped needs "
                      "--fusion none (the fused projections gather per "
                      "route)\n";
      return 2;
    }
    // Both sides grouped: the CPU's sort read on the host and one matmul
    // per expert, the GPU's padded formulation; the same factors rounded.
    options.fusion->groupedExperts = true;
  }
  auto cpu = rt::CpuProgram::compileFile(input, options);
  if (!cpu)
    return fail(cpu.takeError());
  std::unique_ptr<rt::Program> gpu;
  std::string target;
  if (emulate) {
    rt::CompileOptions emulation = options;
    emulation.roundAttentionFactors = "f32";
    emulation.emulateGpu = gpuOptions.emulation();
    emulation.emulateGpu->checkBounds = true;
    auto program = rt::CpuProgram::compileFile(input, emulation);
    if (!program)
      return fail(program.takeError());
    gpu = std::move(*program);
    target = "the GPU emulation";
  } else {
    auto program = rt::GpuProgram::compileFile(input, options, gpuOptions);
    if (!program)
      return fail(program.takeError());
    target = (*program)->chip();
    gpu = std::move(*program);
  }
  llvm::outs() << "compiled " << input << " for the CPU and for " << target
               << " (" << elementType << " multiplicands, "
               << (fusion == Fusion::all         ? "fused"
                   : experts == Experts::grouped ? "unfused, grouped experts"
                                                 : "unfused")
               << ")\n";

  std::vector<const rt::FunctionSpec *> selected;
  for (const rt::FunctionSpec &function : (*cpu)->functions())
    if (functionNames.empty()
            ? !llvm::StringRef(function.name).ends_with("_train_step")
            : llvm::is_contained(functionNames, function.name))
      selected.push_back(&function);
  if (selected.empty()) {
    llvm::errs() << "switchyard-gpu-check: no function to check\n";
    return 2;
  }
  // One generator for every size: each size's inputs are new draws.
  std::mt19937_64 generator(seed);
  int mismatches = 0;
  for (int64_t size : sizes) {
    if (sizes.size() > 1)
      llvm::outs() << "dynamic size " << size << ":\n";
    for (const rt::FunctionSpec *function : selected) {
      llvm::Expected<std::vector<rt::HostTensor>> inputs =
          makeInputs(*function, (*cpu)->params(), size, generator);
      if (!inputs)
        return fail(inputs.takeError());
      std::vector<const rt::HostTensor *> pointers;
      for (const rt::HostTensor &tensor : *inputs)
        pointers.push_back(&tensor);
      auto expected = (*cpu)->call(function->name, pointers);
      if (!expected)
        return fail(expected.takeError());
      auto actual = gpu->call(function->name, pointers);
      if (!actual)
        return fail(actual.takeError());
      for (size_t i = 0; i < expected->size(); ++i)
        mismatches += !compare(function->name, i, (*expected)[i], (*actual)[i]);
    }
  }
  llvm::outs() << llvm::formatv(
      "{0} functions checked{1}, {2} mismatching results (atol {3:e1}, rtol "
      "{4:e1}{5})\n",
      selected.size(),
      sizes.size() > 1
          ? llvm::formatv(" at {0} dynamic sizes", sizes.size()).str()
          : std::string(),
      mismatches, double(absoluteTolerance), double(relativeTolerance),
      relativeL2 > 0
          ? llvm::formatv(", relative L2 {0:e1}", double(relativeL2)).str()
          : std::string());
  return mismatches ? 1 : 0;
}
