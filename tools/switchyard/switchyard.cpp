//===- switchyard.cpp - the Switchyard driver -----------------------------===//
//
// The user-facing command: `switchyard <command> [options] MODEL.mlir`.
// Each command registers only its own options, so `switchyard <command>
// --help` lists exactly what that command takes. Commands run the same
// pipeline builders as switchyard-opt (lib/Pipelines/Pipelines.h).
//
//===----------------------------------------------------------------------===//

#include "lib/InitSwitchyard.h"
#include "dialect/Lm/IR/LmOps.h"
#include "dialect/Lm/Transforms/CostAnalysis.h"
#include "dialect/Lm/Transforms/Passes.h"
#include "lib/Conversion/Passes.h"
#include "lib/Pipelines/Pipelines.h"
#include "runtime/Engine/CpuProgram.h"
#ifdef SWITCHYARD_HAVE_GPU_RUNTIME
#include "runtime/CudaDriver.h"
#include "runtime/Engine/GpuProgram.h"
#endif
#include "runtime/Params.h"
#include "runtime/TensorFile.h"
#include "runtime/Training.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatAdapters.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <numbers>

using namespace mlir;
namespace cl = llvm::cl;
namespace rt = ::switchyard::runtime;

namespace {

/// Parses and verifies a model definition, reporting errors with locations
/// on stderr. Returns null on failure.
OwningOpRef<ModuleOp> loadModel(MLIRContext &context, llvm::SourceMgr &sources,
                                StringRef path) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(path, &error);
  if (!file) {
    llvm::errs() << "switchyard: cannot read model '" << path
                 << "': " << error << "\n";
    return nullptr;
  }
  sources.AddNewSourceBuffer(std::move(file), SMLoc());
  return parseSourceFile<ModuleOp>(sources, &context);
}

/// Runs the front-end pipeline (the one switchyard-opt registers as
/// --switchyard-frontend-pipeline) on `module`.
LogicalResult runFrontend(ModuleOp module, int64_t numLayers) {
  PassManager pm(module.getContext());
  if (failed(applyPassManagerCLOptions(pm))) {
    llvm::errs() << "switchyard: invalid pass manager options\n";
    return failure();
  }
  applyDefaultTimingPassManagerCLOptions(pm);
  mlir::switchyard::FrontendPipelineOptions options;
  options.numLayers = numLayers;
  mlir::switchyard::buildFrontendPipeline(pm, options);
  return pm.run(module);
}

/// Prints `error` as "switchyard: ..." and returns 1.
int fail(llvm::Error error) {
  llvm::errs() << "switchyard: " << llvm::toString(std::move(error)) << "\n";
  return 1;
}

int fail(const llvm::Twine &message) {
  llvm::errs() << "switchyard: " << message << "\n";
  return 1;
}

/// Options every model command takes.
struct ModelOptions {
  cl::OptionCategory category{"Model options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<model.mlir>"),
                             cl::Required, cl::cat(category)};
  cl::opt<int64_t> numLayers{
      "num-layers",
      cl::desc("Model depth L for the scaled initialisers (default: the "
               "number of attention blocks)"),
      cl::init(0), cl::cat(category)};
  cl::opt<std::string> fuse{
      "fuse",
      cl::desc("Fusions to apply: default (the fastest set measured for "
               "the device: router,attention on the GPU and in its "
               "emulation, with the expert projections grouped; none on "
               "the CPU), all, none, or "
               "a comma-separated list of router, expert-projection, "
               "attention (the unfused route computes the same results; see "
               "README, Fusions)"),
      cl::init("default"), cl::cat(category)};
  cl::opt<std::string> experts{
      "experts",
      cl::desc("How the unfused expert projections (V and O, and their "
               "gradients) compute: grouped (routes sorted by expert, one "
               "matmul per expert: the routes' MACs; on the GPU and in "
               "its emulation without host reads: a parallel sort, each "
               "expert's rows padded to 64-row tiles, one grouped kernel "
               "for all experts), dense (every token through every "
               "expert, E/k times the MACs, as plain matmuls), or default "
               "(grouped, on every device). The fused projections gather "
               "per route either way"),
      cl::init("default"), cl::cat(category)};

  /// Checks the values that need no compiling.
  llvm::Error check() const {
    if (numLayers < 0 || numLayers > kMaxLayers)
      return llvm::createStringError(
          llvm::formatv("--num-layers: expected 0 (count the attention "
                        "blocks) to {0}, found {1}",
                        kMaxLayers, int64_t(numLayers))
              .str());
    return llvm::Error::success();
  }
  static constexpr int64_t kMaxLayers = 100000;

  /// The compile options these select for the CPU or the GPU, or an error
  /// naming a bad --fuse or --experts.
  llvm::Expected<rt::CompileOptions> compileOptions(bool gpu) const {
    if (llvm::Error error = check())
      return std::move(error);
    rt::CompileOptions options;
    options.numLayers = numLayers;
    if (experts != "default" && experts != "grouped" && experts != "dense")
      return llvm::createStringError("--experts: expected default, grouped "
                                     "or dense, found '" +
                                     experts + "'");
    options.groupedExperts = experts != "dense";
    llvm::Expected<mlir::switchyard::FusionOptions> fusion =
        mlir::switchyard::parseFusions(fuse, gpu);
    if (!fusion)
      return llvm::createStringError("--fuse: " +
                                     llvm::toString(fusion.takeError()));
    options.fusion = *fusion;
    return options;
  }
};

/// Registers MLIR's IR-printing, timing and pass-manager options (for
/// example --mlir-print-ir-after-all; they apply to every stage of the
/// compile, the runtime's included) and shows them, with `category`, in
/// --help; LLVM's many unrelated global options stay hidden. Switchyard's
/// passes are registered, as in switchyard-opt, so that
/// --mlir-print-ir-after=PASS can name them.
void registerCommandOptions(cl::OptionCategory &category) {
  static cl::OptionCategory mlirCategory("MLIR options");
  mlir::switchyard::registerPassesAndPipelines();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  for (auto &[name, option] : cl::getRegisteredOptions())
    if (name.starts_with("mlir-print-ir") || name == "mlir-timing" ||
        name == "mlir-print-debuginfo" || name == "mlir-pass-statistics" ||
        name == "verify-each")
      option->addCategory(mlirCategory);
  cl::HideUnrelatedOptions({&category, &mlirCategory});
}

/// Sets up a context with every Switchyard dialect.
void setUpContext(MLIRContext &context) {
  DialectRegistry registry;
  mlir::switchyard::registerDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
}

//===----------------------------------------------------------------------===//
// switchyard compile
//===----------------------------------------------------------------------===//

int runCompile(int argc, char **argv) {
  static ModelOptions model;
  static cl::opt<std::string> output(
      "o", cl::desc("Write the compiled IR here (default: stdout)"),
      cl::value_desc("file"), cl::init("-"), cl::cat(model.category));
  registerCommandOptions(model.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard compile: run a model definition through the compiler\n\n"
      "Parses and verifies MODEL.mlir, then runs the front-end pipeline\n"
      "(--switchyard-frontend-pipeline in switchyard-opt): every parameter a\n"
      "layer owns is declared as an lm.param. The resulting IR is written to\n"
      "-o. Use --mlir-print-ir-after-all to see every stage.\n");

  if (llvm::Error error = model.check())
    return fail(std::move(error));
  MLIRContext context;
  setUpContext(context);
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &context);
  OwningOpRef<ModuleOp> module = loadModel(context, sources, model.input);
  if (!module || failed(runFrontend(*module, model.numLayers)))
    return 1;

  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  os << "\n";
  if (output == "-") {
    llvm::outs() << text;
    llvm::outs().flush();
    if (llvm::outs().has_error()) {
      std::error_code error = llvm::outs().error();
      llvm::outs().clear_error();
      return fail("cannot write the IR to standard output: " +
                  error.message());
    }
    return 0;
  }
  if (llvm::Error error = rt::writeTextFile(output, text))
    return fail(std::move(error));
  return 0;
}

//===----------------------------------------------------------------------===//
// switchyard params
//===----------------------------------------------------------------------===//

/// Reads the runtime's parameter table off the declared `lm.param`s.
FailureOr<rt::ParamTable> collectParams(ModuleOp module) {
  rt::ParamTable table;
  for (lm::ParamOp param : module.getOps<lm::ParamOp>()) {
    auto type = cast<RankedTensorType>(param.getType());
    std::string element;
    llvm::raw_string_ostream(element) << type.getElementType();
    std::optional<rt::DType> dtype = rt::parseDType(element);
    if (!dtype) {
      param.emitError() << "parameter element type " << type.getElementType()
                        << " is not supported by the runtime (f32, f16, bf16)";
      return failure();
    }
    lm::InitAttr init = param.getInit();
    table.params.push_back(
        {param.getSymName().str(),
         {type.getShape().begin(), type.getShape().end()},
         *dtype,
         *rt::parseInitKind(lm::stringifyInitKind(init.getKind())),
         init.getStd().convertToDouble(), param.getAlias().value_or("").str()});
  }
  return table;
}

std::string shapeString(const rt::ParamSpec &spec) {
  std::string text;
  for (size_t i = 0; i < spec.shape.size(); ++i)
    text += (i ? "x" : "") + std::to_string(spec.shape[i]);
  return text;
}

std::string initString(const rt::ParamSpec &spec) {
  std::string text(rt::toString(spec.init));
  if (spec.std > 0)
    text += llvm::formatv("(std={0})", llvm::format("%.4g", spec.std)).str();
  return text;
}

int runParams(int argc, char **argv) {
  static ModelOptions model;
  static cl::opt<bool> json(
      "json", cl::desc("Print a JSON object instead of a table"),
      cl::cat(model.category));
  registerCommandOptions(model.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard params: list the parameters a model owns\n\n"
      "Runs the front end on MODEL.mlir and prints each parameter's name (its\n"
      "key in checkpoints), shape, element count and initialiser, and the\n"
      "name the official SwitchHead or sigma-MoE code gives the same tensor\n"
      "where it has one (parameter files may use either name; see\n"
      "docs/Parameters.md), then the total parameter count.\n");

  if (llvm::Error error = model.check())
    return fail(std::move(error));
  MLIRContext context;
  setUpContext(context);
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &context);
  OwningOpRef<ModuleOp> module = loadModel(context, sources, model.input);
  if (!module || failed(runFrontend(*module, model.numLayers)))
    return 1;
  FailureOr<rt::ParamTable> table = collectParams(*module);
  if (failed(table))
    return 1;

  llvm::raw_ostream &os = llvm::outs();
  if (json) {
    llvm::json::Array params;
    for (const rt::ParamSpec &spec : table->params) {
      llvm::json::Object param{
          {"name", spec.name},
          {"shape", llvm::json::Array(spec.shape)},
          {"dtype", std::string(rt::toString(spec.dtype))},
          {"init", std::string(rt::toString(spec.init))},
          {"std", spec.std},
          {"elements", spec.numElements()}};
      if (!spec.alias.empty())
        param["official_name"] = spec.alias;
      params.push_back(std::move(param));
    }
    os << llvm::formatv("{0:2}\n", llvm::json::Value(llvm::json::Object{
                                       {"params", std::move(params)},
                                       {"total", table->totalElements()}}));
    return 0;
  }
  size_t nameWidth = 4;
  bool anyAlias = false;
  for (const rt::ParamSpec &spec : table->params) {
    nameWidth = std::max(nameWidth, spec.name.size());
    anyAlias |= !spec.alias.empty();
  }
  auto row = [&](StringRef name, StringRef shape, StringRef dtype,
                 StringRef elements, StringRef init, StringRef alias) {
    std::string line =
        llvm::formatv("{0} {1,-14} {2,-5} {3,12}  ",
                      llvm::fmt_align(name, llvm::AlignStyle::Left, nameWidth),
                      shape, dtype, elements)
            .str();
    line += anyAlias ? llvm::formatv("{0,-24} {1}", init, alias).str()
                     : init.str();
    os << StringRef(line).rtrim() << "\n";
  };
  row("name", "shape", "dtype", "elements", "init", "official name");
  for (const rt::ParamSpec &spec : table->params)
    row(spec.name, shapeString(spec), rt::toString(spec.dtype),
        std::to_string(spec.numElements()), initString(spec), spec.alias);
  if (table->totalElements() == std::numeric_limits<int64_t>::max())
    return fail(model.input + ": the parameter count exceeds 2^63 - 1");
  os << llvm::formatv("total: {0} tensors, {1} parameters ({2:f2}M)\n",
                      table->params.size(), table->totalElements(),
                      table->totalElements() / 1e6);
  return 0;
}

//===----------------------------------------------------------------------===//
// switchyard cost
//===----------------------------------------------------------------------===//

/// Loads `path`, runs the front end and lm-decompose-layers, and analyses
/// its model (the first lm.model). Reports errors on stderr.
FailureOr<lm::ModelCost> analyzeCost(MLIRContext &context, StringRef path,
                                     int64_t seqLen) {
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &context);
  OwningOpRef<ModuleOp> module = loadModel(context, sources, path);
  if (!module || failed(runFrontend(*module, 0)))
    return failure();
  auto models = module->getOps<lm::ModelOp>();
  if (models.empty()) {
    llvm::errs() << "switchyard: " << path << ": no lm.model\n";
    return failure();
  }
  lm::ModelOp model = *models.begin();
  auto tokens = cast<RankedTensorType>(model.getArgumentTypes().front());
  // Token ids [batch, time] or hidden states [batch, time, width].
  if (tokens.isDynamicDim(1)) {
    llvm::errs() << "switchyard: " << path
                 << ": the model's first argument needs a static sequence "
                    "length\n";
    return failure();
  }
  if (seqLen && seqLen != tokens.getDimSize(1)) {
    llvm::errs() << "switchyard: " << path << ": --seq-len " << seqLen
                 << " differs from the model's sequence length "
                 << tokens.getDimSize(1) << " (the costs are read from the "
                 << "compiled shapes; change the model to change T)\n";
    return failure();
  }
  PassManager pm(&context);
  pm.addPass(mlir::switchyard::createLmDecomposeLayersPass());
  if (failed(pm.run(*module)))
    return failure();
  FailureOr<lm::ModelCost> cost = lm::analyzeModelCost(model);
  if (succeeded(cost) && cost->saturated()) {
    llvm::errs() << "switchyard: " << path
                 << ": the model's counts exceed 2^63 - 1 and cannot be "
                    "shown\n";
    return failure();
  }
  return cost;
}

int runCost(int argc, char **argv) {
  static cl::OptionCategory category("Cost options");
  static cl::list<std::string> inputs(
      cl::Positional, cl::desc("<model.mlir> [<switchhead.mlir>]"),
      cl::OneOrMore, cl::cat(category));
  static cl::opt<bool> json(
      "json", cl::desc("Print JSON (an array with --compare) instead of tables"),
      cl::cat(category));
  static cl::opt<bool> compare(
      "compare",
      cl::desc("Two models, baseline first: print both reports and the "
               "ratios second / first of attention MACs and memory"),
      cl::cat(category));
  static cl::opt<int64_t> seqLen(
      "seq-len",
      cl::desc("Expected sequence length T (default: the model's; the "
               "analysis fails if the model's differs)"),
      cl::init(0), cl::cat(category));
  registerCommandOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard cost: MACs and attention memory of a model, per layer\n\n"
      "Compiles MODEL.mlir through the front end and lm-decompose-layers and\n"
      "counts, for one sequence of T tokens (batch 1, T from the model), the\n"
      "multiply-accumulates of every attention and feed-forward layer by role\n"
      "(q, k, v, o, pos projections, routers, QK^T, positional scores, A.V,\n"
      "gates; up/down) and the floats an attention layer keeps for the\n"
      "backward (attention matrices, Q, K, V, relative keys, head outputs,\n"
      "router scores), read from the compiled IR's shapes (the pass\n"
      "lm-cost-analysis). Next to each attention layer: the SwitchHead paper's\n"
      "closed-form formulas (arXiv 2312.07987) on the same dimensions. With\n"
      "--compare DENSE.mlir SWITCHHEAD.mlir (or any two models), also the\n"
      "ratios of attention MACs and memory, by the formulas and from the IR.\n"
      "README.md, 'Cost accounting', explains where the two differ.\n");
  if (inputs.size() != (compare ? 2u : 1u)) {
    llvm::errs() << "switchyard cost: expected "
                 << (compare ? "two models with --compare" : "one model")
                 << ", got " << inputs.size() << "\n";
    return 1;
  }

  MLIRContext context;
  setUpContext(context);
  std::vector<lm::ModelCost> costs;
  for (const std::string &input : inputs) {
    FailureOr<lm::ModelCost> cost = analyzeCost(context, input, seqLen);
    if (failed(cost))
      return 1;
    costs.push_back(std::move(*cost));
  }
  llvm::raw_ostream &os = llvm::outs();
  if (json) {
    if (!compare) {
      os << llvm::formatv("{0:2}\n", lm::toJSON(costs[0]));
      return 0;
    }
    auto ratio = [](int64_t a, int64_t b) { return b ? double(a) / b : 0.0; };
    const lm::ModelCost &base = costs[0], &other = costs[1];
    os << llvm::formatv(
        "{0:2}\n",
        llvm::json::Value(llvm::json::Object{
            {"baseline", lm::toJSON(base)},
            {"candidate", lm::toJSON(other)},
            {"ratios",
             llvm::json::Object{
                 {"attention_formula_macs",
                  ratio(other.attentionFormulaMacs(),
                        base.attentionFormulaMacs())},
                 {"attention_formula_memory",
                  ratio(other.attentionFormulaMemory(),
                        base.attentionFormulaMemory())},
                 {"attention_macs",
                  ratio(other.attentionMacs(), base.attentionMacs())},
                 {"attention_memory",
                  ratio(other.attentionMemory(), base.attentionMemory())},
                 {"model_macs", ratio(other.totalMacs(), base.totalMacs())}}}}));
    return 0;
  }
  for (const lm::ModelCost &cost : costs)
    lm::printCostTable(os, cost);
  if (compare)
    lm::printCostComparison(os, costs[0], costs[1]);
  return 0;
}

//===----------------------------------------------------------------------===//
// switchyard run
//===----------------------------------------------------------------------===//

/// Where a command runs the compiled model.
enum class Device { cpu, gpu, gpuEmulation };

/// How run, eval and train read parameter files (runtime/ParamFiles.h):
/// rename rules and whether parameters no file holds are initialised.
struct ParamFileFlags {
  cl::list<std::string> renames;
  cl::opt<bool> initMissing;
  explicit ParamFileFlags(cl::OptionCategory &category)
      : renames("rename",
                cl::desc("Read parameter-file tensors whose names start with "
                         "FROM as starting with TO (repeatable; the first "
                         "matching rule applies; an empty FROM prefixes "
                         "every name, e.g. --rename =layers.0.att. for a "
                         "file of one official module)"),
                cl::value_desc("FROM=TO"), cl::cat(category)),
        initMissing("init-missing",
                    cl::desc("Initialise the parameters that no parameter "
                             "file holds from their declared initialisers "
                             "(--seed), each named on stderr, instead of "
                             "failing"),
                    cl::init(false), cl::cat(category)) {}

  llvm::Expected<rt::ParamFileOptions> options(uint64_t seed) const {
    rt::ParamFileOptions result;
    for (const std::string &text : renames) {
      llvm::Expected<rt::Rename> rule = rt::parseRename(text);
      if (!rule)
        return rule.takeError();
      result.renames.push_back(std::move(*rule));
    }
    result.initMissing = initMissing;
    result.seed = seed;
    result.note = [](const std::string &line) {
      llvm::errs() << "switchyard: note: " << line << "\n";
    };
    return result;
  }
};

/// The --device option of the commands that run a model, with the GPU
/// target's code generation options.
struct DeviceOption {
  cl::opt<Device> device;
  cl::opt<std::string> gpuChip;
  cl::opt<std::string> gpuElementType;
  cl::opt<std::string> gpuFormat;
  cl::opt<std::string> gpuToolkit;
  explicit DeviceOption(cl::OptionCategory &category)
      : device("device",
               cl::desc("Where to run the compiled model (default: cpu)"),
               cl::values(clEnumValN(Device::cpu, "cpu",
                                     "the CPU target, JIT-compiled here"),
                          clEnumValN(Device::gpu, "gpu",
                                     "the GPU target (NVIDIA, through the "
                                     "CUDA driver) on device 0"),
                          clEnumValN(Device::gpuEmulation, "gpu-emulation",
                                     "the GPU target's SIMT kernels run on "
                                     "this CPU, one thread after another "
                                     "(slow; checks the GPU route without a "
                                     "GPU)")),
               cl::init(Device::cpu), cl::cat(category)),
        gpuChip("gpu-chip",
                cl::desc("With --device gpu: the chip to compile for, e.g. "
                         "sm_90a (default: device 0's, sm_<cc>)"),
                cl::value_desc("sm_XY"), cl::cat(category)),
        gpuElementType(
            "gpu-element-type",
            cl::desc("With --device gpu or gpu-emulation: element type of "
                     "the matmul multiplicands, f32 (default, exact SIMT), "
                     "bf16 or f16 (tensor cores, mma.sync, on sm_80+ and "
                     "in the emulation; rounded SIMT on sm_75; f32 "
                     "accumulation)"),
            cl::value_desc("f32|bf16|f16"), cl::init("f32"), cl::cat(category)),
        gpuFormat("gpu-format",
                  cl::desc("With --device gpu: how kernels are shipped, bin "
                           "(default: cubin through ptxas), fatbin, or isa "
                           "(PTX, JIT-compiled by the driver)"),
                  cl::value_desc("bin|fatbin|isa"), cl::init("bin"),
                  cl::cat(category)),
        gpuToolkit("gpu-toolkit",
                   cl::desc("With --device gpu: the CUDA toolkit root "
                            "(bin/ptxas, nvvm/libdevice; default: "
                            "$SWITCHYARD_CUDA_TOOLKIT, else the build's)"),
                   cl::value_desc("dir"), cl::cat(category)) {}

  /// The GPU options chosen; an error for a GPU option that the device
  /// would ignore silently (all but the element type need --device gpu).
  llvm::Expected<rt::GpuCompileOptions> gpuOptions() const {
    bool gpuOptionGiven =
        gpuChip.getNumOccurrences() || gpuFormat.getNumOccurrences();
    if (device != Device::gpu && gpuOptionGiven)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--gpu-chip and --gpu-format need "
                                     "--device gpu");
    if (device == Device::cpu && gpuElementType.getNumOccurrences())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "--gpu-element-type needs --device gpu or gpu-emulation");
    // Checked here too (the GPU pipeline checks every option), so that a
    // typo fails before the driver is looked for.
    if (!llvm::is_contained({"f32", "bf16", "f16"}, StringRef(gpuElementType)))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "--gpu-element-type: expected f32, bf16 or f16, found '" +
              gpuElementType + "'");
    if (!llvm::is_contained({"bin", "fatbin", "isa"}, StringRef(gpuFormat)))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "--gpu-format: expected bin, fatbin or isa, found '" + gpuFormat +
              "'");
    rt::GpuCompileOptions options;
    options.chip = gpuChip;
    options.elementType = gpuElementType;
    options.format = gpuFormat;
    options.toolkit = gpuToolkit;
    return options;
  }
};

/// Compiles the model `model` names, with its --num-layers and --fuse (and
/// its train step with `trainStep`), for the device `device` selects. For the
/// GPU, checks first that a driver and a device are there, so that a
/// machine without one fails before the compilation, with the driver
/// layer's reason. (The GPU options themselves are checked by the GPU
/// pipeline, which names the allowed values.)
llvm::Expected<std::unique_ptr<rt::Program>>
compileFor(const DeviceOption &device, const ModelOptions &model,
           bool trainStep = false) {
  llvm::Expected<rt::CompileOptions> selected =
      model.compileOptions(device.device != Device::cpu);
  if (!selected)
    return selected.takeError();
  rt::CompileOptions options = *selected;
  options.trainStep = trainStep;
  StringRef path = model.input;
  llvm::Expected<rt::GpuCompileOptions> gpuOptions = device.gpuOptions();
  if (!gpuOptions)
    return gpuOptions.takeError();
  // Progress on stderr (a 47M model takes seconds to compile for the CPU,
  // minutes for a GPU), once the device is known to be there.
  std::chrono::steady_clock::time_point start;
  auto announce = [&] {
    llvm::errs() << "compiling " << path
                 << (trainStep ? " with its train step\n" : "\n");
    start = std::chrono::steady_clock::now();
  };
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  if (device.device == Device::gpuEmulation) {
    options.emulateGpu = true;
    options.roundContractionOperands = gpuOptions->elementType;
    llvm::errs() << "device: GPU emulation on this CPU (the GPU route's "
                    "kernels, one thread after another), "
                 << gpuOptions->elementType << " multiplicands"
                 << (gpuOptions->elementType == "f32"
                         ? ""
                         : " on emulated tensor cores (mma.sync)")
                 << "\n";
  }
  if (device.device != Device::gpu) {
    announce();
    llvm::Expected<std::unique_ptr<rt::CpuProgram>> program =
        rt::CpuProgram::compileFile(path, options);
    if (!program)
      return program.takeError();
    llvm::errs() << llvm::formatv("compiled in {0:f1} s\n", seconds());
    return std::unique_ptr<rt::Program>(std::move(*program));
  }
#ifdef SWITCHYARD_HAVE_GPU_RUNTIME
  llvm::Expected<rt::cuda::Driver &> driver = rt::cuda::Driver::get();
  if (!driver)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--device gpu: " + llvm::toString(driver.takeError()));
  llvm::errs() << llvm::formatv(
      "device: {0} (sm_{1}, {2} multiprocessors, {3:f1} GiB, driver {4})\n",
      driver->device().name, driver->device().computeCapability,
      driver->device().multiprocessors,
      double(driver->device().totalMemory) / double(1ull << 30),
      driver->device().driverVersion);
  announce();
  llvm::Expected<std::unique_ptr<rt::GpuProgram>> program =
      rt::GpuProgram::compileFile(path, options, *gpuOptions);
  if (!program)
    return program.takeError();
  llvm::errs() << llvm::formatv(
      "compiled in {0:f1} s for {1}, {2} multiplicands, {3}\n", seconds(),
      (*program)->chip(), gpuOptions->elementType, gpuOptions->format);
  return std::unique_ptr<rt::Program>(std::move(*program));
#else
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "--device gpu: this switchyard was built without the CUDA toolkit, so "
      "it has no GPU backend; rebuild where CMake finds the toolkit");
#endif
}

std::string describe(rt::ElementType type, llvm::ArrayRef<int64_t> shape) {
  std::string text = std::string(rt::toString(type)) + " [";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") +
            (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return text + "]";
}

std::string describe(const rt::TensorSpec &spec) {
  return describe(spec.type, spec.shape);
}

/// Token ids from NumPy are int64 by default: narrow them to the i32 the
/// model takes (the runtime then checks them against the vocabulary).
llvm::Error narrowTokens(rt::HostTensor &tensor, const rt::TensorSpec &spec) {
  if (!spec.vocab || spec.type != rt::ElementType::i32 ||
      tensor.type != rt::ElementType::i64)
    return llvm::Error::success();
  std::vector<int32_t> narrow;
  std::span<const int64_t> ids = tensor.values<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= *spec.vocab)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}: token id {1} at position {2} is outside the "
                        "vocabulary [0, {3})",
                        tensor.name, ids[i], i, *spec.vocab));
    narrow.push_back(static_cast<int32_t>(ids[i]));
  }
  std::string name = tensor.name;
  tensor = rt::HostTensor::fromValues<int32_t>(name, rt::ElementType::i32,
                                               tensor.shape, narrow);
  return llvm::Error::success();
}

/// The elements of a float tensor as doubles (f32 or f64), or nothing.
std::optional<std::vector<double>> floatValues(const rt::HostTensor &tensor) {
  if (tensor.type == rt::ElementType::f32) {
    std::span<const float> values = tensor.values<float>();
    return std::vector<double>(values.begin(), values.end());
  }
  if (tensor.type == rt::ElementType::f64) {
    std::span<const double> values = tensor.values<double>();
    return std::vector<double>(values.begin(), values.end());
  }
  return std::nullopt;
}

/// Compares `result` with the expected values in `path`, element by element:
/// |result − expected| ≤ atol + rtol·|expected| (numpy.allclose). Prints the
/// largest errors on stdout; returns false with the worst element named
/// when an element is outside the tolerance.
llvm::Expected<bool> compareWith(const rt::HostTensor &result, size_t index,
                                 const std::string &path, double rtol,
                                 double atol) {
  llvm::Expected<rt::HostTensor> expected = rt::readNpy(path);
  if (!expected)
    return expected.takeError();
  std::optional<std::vector<double>> want = floatValues(*expected);
  std::optional<std::vector<double>> got = floatValues(result);
  if (!want || !got || expected->shape != result.shape)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("{0}: holds {1}, result #{2} is {3}; --compare needs "
                      "float tensors of the same shape",
                      path, describe(expected->type, expected->shape), index,
                      describe(result.type, result.shape))
            .str());
  double maxError = 0, maxRelative = 0, errorSquares = 0, expectedSquares = 0;
  size_t worst = 0, outside = 0;
  double worstExcess = -INFINITY;
  for (size_t i = 0; i < want->size(); ++i) {
    double e = (*want)[i], g = (*got)[i], error = std::abs(g - e);
    // Equal values (infinities of one sign included) are close; a NaN on
    // either side is not (as numpy.allclose has it).
    if (g == e)
      error = 0;
    else if (std::isnan(error))
      error = INFINITY;
    maxError = std::max(maxError, error);
    if (e != 0)
      maxRelative = std::max(maxRelative, error / std::abs(e));
    errorSquares += error * error;
    expectedSquares += e * e;
    double bound = atol + rtol * std::abs(e);
    double excess = g == e                          ? -bound
                    : std::isnan(g) || std::isnan(e) ? INFINITY
                    : std::isinf(bound)              ? INFINITY
                                                     : error - bound;
    if (excess > 0)
      ++outside;
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
  }
  std::string position;
  for (size_t rest = worst, d = want->empty() ? 0 : result.shape.size();
       d-- > 0;) {
    size_t extent = size_t(result.shape[d]);
    position = std::to_string(rest % extent) + (position.empty() ? "" : ", ") +
               position;
    rest /= extent;
  }
  bool ok = outside == 0;
  llvm::outs() << llvm::formatv(
      "result #{0} against {1}: max |error| {2:e2}, max |error|/|expected| "
      "{3:e2}, ||error||/||expected|| {4:e2}; {5} of {6} elements outside "
      "atol {7:e1} + rtol {8:e1}·|expected|{9}\n",
      index, path, maxError, maxRelative,
      expectedSquares > 0 ? std::sqrt(errorSquares / expectedSquares) : 0.0,
      outside, want->size(), atol, rtol,
      want->empty()
          ? ""
          : llvm::formatv(" (closest to failing: [{0}], expected {1:e6}, "
                          "got {2:e6})",
                          position, (*want)[worst], (*got)[worst])
                .str());
  return ok;
}

int runRun(int argc, char **argv) {
  static ModelOptions model;
  static cl::list<std::string> inputs(
      "input",
      cl::desc("A .npy file for the next non-parameter argument (token ids "
               "first, then XL memories); repeat in argument order"),
      cl::value_desc("file.npy"), cl::cat(model.category));
  static cl::list<std::string> outputs(
      "output",
      cl::desc("Write the next result (logits first, then new XL memories) "
               "to this .npy file; repeat in result order"),
      cl::value_desc("file.npy"), cl::cat(model.category));
  static cl::list<std::string> params(
      "params",
      cl::desc("Read the parameters from this safetensors file, by "
               "Switchyard's or the official names (repeatable: each "
               "parameter from exactly one file)"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static ParamFileFlags paramFlags(model.category);
  static cl::opt<uint64_t> seed(
      "seed",
      cl::desc("Without --params (or with --init-missing): initialise the "
               "parameters with their declared initialisers from this seed "
               "(default 0)"),
      cl::init(0), cl::cat(model.category));
  static cl::list<std::string> compare(
      "compare",
      cl::desc("Compare the next result with this .npy file (repeatable, in "
               "result order): exit 1 when an element differs by more than "
               "--atol + --rtol·|expected|"),
      cl::value_desc("file.npy"), cl::cat(model.category));
  static cl::opt<double> rtol("rtol",
                              cl::desc("Relative tolerance of --compare "
                                       "(1e-5)"),
                              cl::init(1e-5), cl::cat(model.category));
  static cl::opt<double> atol("atol",
                              cl::desc("Absolute tolerance of --compare "
                                       "(1e-6)"),
                              cl::init(1e-6), cl::cat(model.category));
  static cl::opt<std::string> saveParams(
      "save-params",
      cl::desc("Write the parameters used to this safetensors file"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static cl::opt<std::string> function(
      "function",
      cl::desc("The function to run when the module has several (default: "
               "the only one)"),
      cl::cat(model.category));
  static DeviceOption device(model.category);
  registerCommandOptions(model.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard run: compile a model and run its forward pass\n\n"
      "Compiles MODEL.mlir with the CPU pipeline (--switchyard-cpu-pipeline\n"
      "in switchyard-opt; with --device gpu, the GPU pipeline), binds the\n"
      "parameters by name (from --params, or\n"
      "initialised from --seed), binds each --input .npy to the next\n"
      "non-parameter argument (int64 token ids are narrowed to the model's\n"
      "i32), runs, and writes each result to the next --output .npy; without\n"
      "--output it prints a summary of each result. Use it to cross-check\n"
      "Switchyard against another implementation with the same weights:\n"
      "--params reads the official SwitchHead and sigma-MoE names too\n"
      "(docs/Parameters.md), and --compare checks each result against that\n"
      "implementation's output.\n");

  for (auto [name, value] : {std::pair{"rtol", double(rtol)},
                             std::pair{"atol", double(atol)}})
    if (!std::isfinite(value) || value < 0)
      return fail(llvm::formatv("--{0}: expected a finite tolerance, 0 or "
                                "more, found {1}",
                                name, llvm::format("%g", value))
                      .str());
  std::vector<std::string> written(outputs.begin(), outputs.end());
  if (!saveParams.empty())
    written.push_back(saveParams);
  for (const std::string &path : written)
    if (llvm::Error error = rt::checkWritable(path))
      return fail(std::move(error));

  llvm::Expected<std::unique_ptr<rt::Program>> compiled =
      compileFor(device, model);
  if (!compiled)
    return fail(compiled.takeError());
  rt::Program &program = **compiled;

  const rt::FunctionSpec *callee = nullptr;
  if (!function.empty()) {
    callee = program.lookup(function);
    if (!callee)
      return fail("no function @" + function + " in " + model.input);
  } else if (program.functions().size() == 1) {
    callee = &program.functions().front();
  } else {
    std::string names;
    for (const rt::FunctionSpec &f : program.functions())
      names += " @" + f.name;
    return fail(model.input + " has " +
                std::to_string(program.functions().size()) +
                " functions; choose one with --function:" + names);
  }

  // Parameters: from the files, or every one initialised from the seed.
  llvm::Expected<rt::ParamFileOptions> fileOptions = paramFlags.options(seed);
  if (!fileOptions)
    return fail(fileOptions.takeError());
  if (params.empty()) {
    fileOptions->initMissing = true;
    fileOptions->note = nullptr;
  }
  llvm::Expected<std::vector<rt::HostTensor>> ordered = rt::readParamFiles(
      program.params(), std::vector<std::string>(params.begin(), params.end()),
      *fileOptions);
  if (!ordered)
    return fail(ordered.takeError());
  std::map<std::string, const rt::HostTensor *> bound;
  for (const rt::HostTensor &tensor : *ordered)
    bound[tensor.name] = &tensor;
  if (!saveParams.empty())
    if (llvm::Error error = rt::writeSafetensors(
            saveParams, *ordered, {{"format", rt::kParamsFormat},
                                   {"model", callee->name}}))
      return fail(std::move(error));

  // Inputs, in argument order.
  std::vector<const rt::TensorSpec *> dataArguments;
  for (const rt::TensorSpec &spec : callee->arguments)
    if (spec.param.empty())
      dataArguments.push_back(&spec);
  if (inputs.size() != dataArguments.size()) {
    std::string expected;
    for (const rt::TensorSpec *spec : dataArguments)
      expected += "\n  " + describe(*spec) +
                  (spec->vocab ? " token ids in [0, " +
                                     std::to_string(*spec->vocab) + ")"
                               : "");
    return fail(llvm::formatv("@{0} takes {1} inputs, {2} given with "
                              "--input; expected, in order:{3}",
                              callee->name, dataArguments.size(),
                              inputs.size(), expected)
                    .str());
  }
  if (compare.size() > callee->results.size())
    return fail(llvm::formatv("@{0} has {1} results, {2} --compare given",
                              callee->name, callee->results.size(),
                              compare.size())
                    .str());
  if (outputs.size() > callee->results.size())
    return fail(llvm::formatv("@{0} has {1} results, {2} --output given",
                              callee->name, callee->results.size(),
                              outputs.size())
                    .str());
  std::vector<rt::HostTensor> data;
  for (auto [path, spec] : llvm::zip(inputs, dataArguments)) {
    llvm::Expected<rt::HostTensor> tensor = rt::readNpy(path);
    if (!tensor)
      return fail(tensor.takeError());
    tensor->name = path;
    if (llvm::Error error = narrowTokens(*tensor, *spec))
      return fail(std::move(error));
    data.push_back(std::move(*tensor));
  }

  std::vector<const rt::HostTensor *> arguments;
  size_t next = 0;
  for (const rt::TensorSpec &spec : callee->arguments)
    arguments.push_back(spec.param.empty() ? &data[next++]
                                           : bound.at(spec.param));
  llvm::Expected<std::vector<rt::HostTensor>> results =
      program.call(callee->name, arguments);
  if (!results)
    return fail(results.takeError());

  bool allClose = true;
  for (auto [index, result] : llvm::enumerate(*results)) {
    if (index < outputs.size())
      if (llvm::Error error = rt::writeNpy(outputs[index], result))
        return fail(std::move(error));
    if (index < compare.size()) {
      llvm::Expected<bool> close =
          compareWith(result, index, compare[index], rtol, atol);
      if (!close)
        return fail(close.takeError());
      allClose &= *close;
    }
    if (index < outputs.size() || index < compare.size())
      continue;
    std::string summary = llvm::formatv("result #{0}: {1}", index,
                                        describe(result.type, result.shape))
                              .str();
    if (result.type == rt::ElementType::f32 && result.numElements() > 0) {
      std::span<const float> values = result.values<float>();
      double sum = 0, low = INFINITY, high = -INFINITY;
      for (float v : values) {
        sum += v;
        low = std::min<double>(low, v);
        high = std::max<double>(high, v);
      }
      summary += llvm::formatv(", mean {0:e4}, min {1:e4}, max {2:e4}",
                               values.empty() ? 0.0 : sum / values.size(), low,
                               high)
                     .str();
    }
    llvm::outs() << summary << "\n";
  }
  if (!allClose)
    return fail("the results differ from the --compare files beyond the "
                "tolerance");
  return 0;
}

//===----------------------------------------------------------------------===//
// switchyard train / eval
//===----------------------------------------------------------------------===//

/// Options of the corpus and its tokens, shared by train and eval.
struct CorpusOptions {
  cl::list<std::string> data;
  cl::opt<double> validFraction;
  cl::opt<std::string> tokenizer;
  cl::opt<int64_t> vocabSize;
  cl::opt<std::string> tokenizerModel;
  explicit CorpusOptions(cl::OptionCategory &category)
      : data("data",
             cl::desc("Text files or directories to train on (default: "
                      "Debian's fortunes)"),
             cl::value_desc("path"), cl::cat(category)),
        validFraction("valid-fraction",
                      cl::desc("Share of the text held out for validation, in "
                               "interleaved 4 KiB blocks (default 0.05)"),
                      cl::init(0.05), cl::cat(category)),
        tokenizer("tokenizer",
                  cl::desc("Tokens: 'bytes' (the Enwik8 setting, default) or "
                           "'sentencepiece' subwords (the Wikitext/C4 "
                           "setting)"),
                  cl::init("bytes"), cl::cat(category)),
        vocabSize("vocab-size",
                  cl::desc("SentencePiece vocabulary to train (8000)"),
                  cl::init(8000), cl::cat(category)),
        tokenizerModel(
            "tokenizer-model",
            cl::desc("SentencePiece model file: loaded when it exists, else "
                     "trained on the training text and written there"),
            cl::value_desc("file.model"), cl::cat(category)) {}

  /// Checks the values before any text is read (load() does too; commands
  /// call it first to refuse bad values before compiling).
  llvm::Error check() const {
    if (!(validFraction > 0 && validFraction < 1))
      return llvm::createStringError(
          llvm::formatv("--valid-fraction: expected a number in (0, 1), "
                        "found {0}",
                        llvm::format("%g", double(validFraction)))
              .str());
    if (tokenizer != "bytes" && tokenizer != "sentencepiece")
      return llvm::createStringError("--tokenizer: expected bytes or "
                                     "sentencepiece, found '" +
                                     tokenizer + "'");
    if (tokenizer == "sentencepiece") {
      // SentencePiece needs room for its special pieces; beyond 2^20 the
      // model's embedding and output alone would not fit a machine.
      if (vocabSize < 16 || vocabSize > (int64_t(1) << 20))
        return llvm::createStringError(
            llvm::formatv("--vocab-size: expected 16 to {0}, found {1}",
                          int64_t(1) << 20, int64_t(vocabSize))
                .str());
      if (!tokenizerModel.empty() && !llvm::sys::fs::exists(tokenizerModel))
        return rt::checkWritable(tokenizerModel);
    }
    return llvm::Error::success();
  }

  /// Reads the corpus (after check()).
  llvm::Expected<rt::TokenCorpus> load() const {
    if (llvm::Error error = check())
      return std::move(error);
    llvm::Expected<rt::ByteCorpus> bytes =
        data.empty()
            ? rt::ByteCorpus::loadFortunes(validFraction)
            : rt::ByteCorpus::load(
                  std::vector<std::string>(data.begin(), data.end()),
                  validFraction);
    if (!bytes)
      return bytes.takeError();
    if (tokenizer == "bytes")
      return rt::TokenCorpus::fromBytes(*bytes);
    std::unique_ptr<rt::SentencePieceTokenizer> sp;
    if (!tokenizerModel.empty() && llvm::sys::fs::exists(tokenizerModel)) {
      llvm::Expected<std::unique_ptr<rt::SentencePieceTokenizer>> loaded =
          rt::SentencePieceTokenizer::load(tokenizerModel);
      if (!loaded)
        return loaded.takeError();
      sp = std::move(*loaded);
    } else {
      llvm::errs() << "training a SentencePiece model of " << vocabSize
                   << " pieces on the training text\n";
      llvm::Expected<std::unique_ptr<rt::SentencePieceTokenizer>> trained =
          rt::SentencePieceTokenizer::train(*bytes, vocabSize);
      if (!trained)
        return trained.takeError();
      sp = std::move(*trained);
      if (!tokenizerModel.empty())
        if (llvm::Error error = sp->save(tokenizerModel))
          return std::move(error);
    }
    return sp->encode(*bytes);
  }
};

std::string formatDuration(double seconds) {
  int64_t s = int64_t(seconds + 0.5);
  if (s >= 3600)
    return llvm::formatv("{0}h{1:2}m", s / 3600, (s / 60) % 60).str();
  if (s >= 60)
    return llvm::formatv("{0}m{1:2}s", s / 60, s % 60).str();
  return llvm::formatv("{0}s", s).str();
}

/// A loss curve as SVG: training loss per step and validation points, in
/// bits per byte.
std::string lossCurveSvg(const rt::TrainSummary &summary, double unigram,
                         double bytesPerToken) {
  const double width = 640, height = 400, left = 60, bottom = 40, top = 20,
               right = 20;
  double maxY = unigram;
  auto bits = [&](double nats) {
    return nats / std::numbers::ln2 / bytesPerToken;
  };
  for (const rt::StepRecord &s : summary.steps)
    maxY = std::max(maxY, bits(s.loss));
  maxY = std::ceil(maxY);
  double maxX = summary.steps.empty() ? 1 : double(summary.steps.back().step);
  auto x = [&](double step) {
    return left + (width - left - right) * step / maxX;
  };
  auto y = [&](double bits) {
    return height - bottom - (height - top - bottom) * bits / maxY;
  };
  std::string svg = llvm::formatv(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
      "height=\"{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"14\">{3}: loss in bits per byte</text>\n",
      width, height, left, summary.model);
  for (int tick = 0; tick <= int(maxY); ++tick)
    svg += llvm::formatv("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" "
                         "stroke=\"#ddd\"/><text x=\"{3}\" y=\"{4}\">{5}</text>\n",
                         left, width - right, y(tick), left - 25, y(tick) + 4,
                         tick);
  svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\">step</text>\n",
                       width / 2, height - 8);
  svg += llvm::formatv("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" "
                       "stroke=\"#999\" stroke-dasharray=\"4\"/><text x=\"{3}\" "
                       "y=\"{4}\" fill=\"#666\">unigram entropy</text>\n",
                       left, width - right, y(unigram), width - right - 110,
                       y(unigram) - 4);
  std::string points;
  for (const rt::StepRecord &s : summary.steps)
    points += llvm::formatv("{0:f1},{1:f1} ", x(double(s.step)),
                            y(bits(s.loss)))
                  .str();
  svg += "<polyline fill=\"none\" stroke=\"#1f77b4\" points=\"" + points +
         "\"/>\n";
  for (const rt::EvalRecord &e : summary.evals)
    svg += llvm::formatv("<circle cx=\"{0:f1}\" cy=\"{1:f1}\" r=\"4\" "
                         "fill=\"#d62728\"/>\n",
                         x(double(e.step)), y(e.bitsPerByte));
  svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\" fill=\"#1f77b4\">train</text>"
                       "<text x=\"{0}\" y=\"{2}\" fill=\"#d62728\">validation"
                       "</text>\n</svg>\n",
                       width - right - 80, top + 20, top + 36);
  return svg;
}

int runTrain(int argc, char **argv) {
  static ModelOptions model;
  static CorpusOptions corpus(model.category);
  static cl::opt<int64_t> steps("steps", cl::desc("Optimizer steps (300)"),
                                cl::init(300), cl::cat(model.category));
  static cl::opt<int64_t> batch("batch", cl::desc("Sequences per step (8)"),
                                cl::init(8), cl::cat(model.category));
  static cl::opt<double> lr("lr", cl::desc("Peak learning rate (2e-3)"),
                            cl::init(2e-3), cl::cat(model.category));
  static cl::opt<int64_t> warmup(
      "warmup", cl::desc("Linear warm-up steps before the cosine decay (30)"),
      cl::init(30), cl::cat(model.category));
  static cl::opt<double> clip(
      "clip", cl::desc("Clip gradients to this global norm; 0: off (0.25)"),
      cl::init(0.25), cl::cat(model.category));
  static cl::opt<double> weightDecay(
      "weight-decay", cl::desc("AdamW weight decay on matrices (0)"),
      cl::init(0.0), cl::cat(model.category));
  static cl::opt<uint64_t> seed(
      "seed", cl::desc("Seed of the initialisation and the batches (0)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<int64_t> evalEvery(
      "eval-every", cl::desc("Validate every N steps; 0: at the end only (100)"),
      cl::init(100), cl::cat(model.category));
  static cl::opt<int64_t> evalBatches(
      "eval-batches", cl::desc("Validation batches per evaluation (4)"),
      cl::init(4), cl::cat(model.category));
  static cl::opt<std::string> checkpoint(
      "checkpoint",
      cl::desc("Write parameters and optimizer state here (safetensors, "
               "atomically) at the end and every --checkpoint-every steps"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static cl::opt<int64_t> checkpointEvery(
      "checkpoint-every", cl::desc("Checkpoint period in steps (0: end only)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<std::string> resume(
      "resume", cl::desc("Continue from this checkpoint, exactly"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static cl::list<std::string> initFrom(
      "init-from",
      cl::desc("Start from the parameters in this safetensors file (by "
               "Switchyard's or the official names; repeatable) with fresh "
               "optimizer state, e.g. to fine-tune official weights"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static ParamFileFlags paramFlags(model.category);
  static cl::opt<int64_t> stopAfter(
      "interrupt-after",
      cl::desc("End after this step, as if interrupted (the schedule still "
               "runs to --steps; a checkpoint is written)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<std::string> summaryPath(
      "summary", cl::desc("Write a JSON summary of the run here"),
      cl::value_desc("file.json"), cl::cat(model.category));
  static cl::opt<std::string> curvePath(
      "curve", cl::desc("Draw the loss curve here (SVG)"),
      cl::value_desc("file.svg"), cl::cat(model.category));
  static DeviceOption device(model.category);
  registerCommandOptions(model.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard train: train a language model on text, on the CPU or GPU\n\n"
      "Compiles MODEL.mlir with its gradients and AdamW step\n"
      "(--switchyard-cpu-pipeline=train-step=1; with --device gpu, the GPU\n"
      "pipeline), then trains it on a byte-level corpus (default: Debian's\n"
      "fortunes) with a linear warm-up and\n"
      "cosine decay, gradient clipping and validation in bits per byte;\n"
      "--tokenizer sentencepiece trains (or loads) a subword vocabulary\n"
      "instead.\n"
      "Batches and dropout masks depend only on the seed and the step, and\n"
      "checkpoints hold the optimizer state (and XL memories), so --resume\n"
      "continues a run exactly.\n"
      "Regularisation is part of the model definition: 'dropout' (residual),\n"
      "'expert_dropout' and the sigma-MoE 'entropy_reg' on each block.\n"
      "Transformer-XL models read the text as --batch contiguous streams and\n"
      "carry their memories from step to step.\n");

  // Every setting and output path is checked before the corpus is read
  // and the model compiled, so that a bad value costs no time.
  rt::TrainConfig config;
  config.steps = steps;
  config.batch = batch;
  config.lr = lr;
  config.warmup = warmup;
  config.clip = clip;
  config.weightDecay = weightDecay;
  config.seed = seed;
  config.evalEvery = evalEvery;
  config.evalBatches = evalBatches;
  config.checkpoint = checkpoint;
  config.checkpointEvery = checkpointEvery;
  config.resume = resume;
  config.initFrom.assign(initFrom.begin(), initFrom.end());
  llvm::Expected<rt::ParamFileOptions> fileOptions = paramFlags.options(seed);
  if (!fileOptions)
    return fail(fileOptions.takeError());
  config.initOptions = std::move(*fileOptions);
  config.stopAfter = stopAfter;
  if (llvm::Error error = rt::validate(config))
    return fail(std::move(error));
  if (llvm::Error error = model.check())
    return fail(std::move(error));
  if (llvm::Error error = corpus.check())
    return fail(std::move(error));
  for (const std::string *path : {&checkpoint.getValue(),
                                  &summaryPath.getValue(),
                                  &curvePath.getValue()})
    if (!path->empty())
      if (llvm::Error error = rt::checkWritable(*path))
        return fail(std::move(error));

  llvm::Expected<rt::TokenCorpus> text = corpus.load();
  if (!text)
    return fail(text.takeError());
  llvm::Expected<std::unique_ptr<rt::Program>> compiled =
      compileFor(device, model, /*trainStep=*/true);
  if (!compiled)
    return fail(compiled.takeError());
  double unigram = text->unigramEntropyBits();
  llvm::errs() << llvm::formatv(
      "corpus: {0}: {1} training and {2} validation tokens, unigram entropy "
      "{3:f3} bits/byte\n",
      text->source, text->train.size(), text->valid.size(), unigram);

  bool terminal = llvm::errs().is_displayed();
  double elapsed = 0;
  int64_t done = 0;
  auto onStep = [&](const rt::StepRecord &record) {
    elapsed += record.seconds;
    ++done;
    double perStep = elapsed / double(done);
    double eta = perStep * double(steps - record.step);
    std::string line = llvm::formatv(
        "step {0}/{1}  loss {2:f4}  lr {3:e2}  |g| {4:f3}  {5:f0} tok/s  "
        "ETA {6}",
        record.step, int64_t(steps), record.loss, record.lr, record.gradNorm,
        double(batch) * double((*compiled)->functions().front().arguments
                                   .front().shape[1]) /
            record.seconds,
        formatDuration(eta));
    if (terminal)
      llvm::errs() << "\r" << line << "\x1b[K";
    else if (record.step == 1 || record.step % std::max<int64_t>(1, steps / 20) == 0 ||
             record.step == steps)
      llvm::errs() << line << "\n";
  };
  auto onEval = [&](const rt::EvalRecord &record) {
    llvm::errs() << (terminal ? "\n" : "")
                 << llvm::formatv("validation at step {0}: {1:f4} nats, "
                                  "{2:f4} bits/byte\n",
                                  record.step, record.loss,
                                  record.bitsPerByte);
  };
  llvm::Expected<rt::TrainSummary> summary =
      rt::train(**compiled, *text, config, onStep, onEval);
  if (!summary)
    return fail(summary.takeError());

  const rt::EvalRecord &final = summary->evals.back();
  llvm::outs() << llvm::formatv(
      "trained {0} to step {1} ({2} tokens this run) in {3}; validation "
      "{4:f4} bits/byte (unigram entropy of the corpus {5:f4})\n",
      summary->model, final.step,
      int64_t(summary->steps.size()) * summary->tokensPerStep,
      formatDuration(summary->seconds), final.bitsPerByte, unigram);

  if (!summaryPath.empty()) {
    llvm::json::Array stepsJson, evalsJson;
    for (const rt::StepRecord &s : summary->steps)
      stepsJson.push_back(llvm::json::Object{{"step", s.step},
                                             {"loss", s.loss},
                                             {"lr", s.lr},
                                             {"grad_norm", s.gradNorm},
                                             {"seconds", s.seconds}});
    for (const rt::EvalRecord &e : summary->evals)
      evalsJson.push_back(llvm::json::Object{{"step", e.step},
                                             {"loss", e.loss},
                                             {"bits_per_byte", e.bitsPerByte}});
    llvm::json::Object root{
        {"model", summary->model},
        {"model_file", std::string(model.input)},
        {"corpus", text->source},
        {"unigram_entropy_bits_per_byte", unigram},
        {"steps", int64_t(steps)},
        {"batch", int64_t(batch)},
        {"tokens_per_step", summary->tokensPerStep},
        {"lr", double(lr)},
        {"seed", int64_t(seed)},
        {"seconds", summary->seconds},
        {"final_validation_bits_per_byte", final.bitsPerByte},
        {"train", std::move(stepsJson)},
        {"validation", std::move(evalsJson)}};
    if (llvm::Error error = rt::writeTextFile(
            summaryPath,
            llvm::formatv("{0:2}\n", llvm::json::Value(std::move(root))).str()))
      return fail(std::move(error));
  }
  if (!curvePath.empty())
    if (llvm::Error error =
            rt::writeTextFile(curvePath, lossCurveSvg(*summary, unigram,
                                              text->trainBytesPerToken)))
      return fail(std::move(error));
  return 0;
}

int runEval(int argc, char **argv) {
  static ModelOptions model;
  static CorpusOptions corpus(model.category);
  static cl::list<std::string> params(
      "params",
      cl::desc("The parameters to evaluate: a checkpoint of switchyard "
               "train, or safetensors files by Switchyard's or the official "
               "names (repeatable)"),
      cl::value_desc("file.safetensors"), cl::OneOrMore,
      cl::cat(model.category));
  static ParamFileFlags paramFlags(model.category);
  static cl::opt<uint64_t> seed(
      "seed",
      cl::desc("With --init-missing: the seed of the initialisers (0)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<int64_t> windows(
      "windows", cl::desc("Validation sequences to score (64)"), cl::init(64),
      cl::cat(model.category));
  static DeviceOption device(model.category);
  registerCommandOptions(model.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard eval: validation loss of a trained model, in bits per byte\n"
      "(on the CPU, or the GPU with --device gpu)\n");
  if (windows < 1)
    return fail(llvm::formatv("--windows: expected a positive count, found {0}",
                              int64_t(windows))
                    .str());
  if (llvm::Error error = corpus.check())
    return fail(std::move(error));
  llvm::Expected<rt::TokenCorpus> text = corpus.load();
  if (!text)
    return fail(text.takeError());
  llvm::Expected<std::unique_ptr<rt::Program>> compiled =
      compileFor(device, model);
  if (!compiled)
    return fail(compiled.takeError());
  llvm::Expected<rt::ParamFileOptions> fileOptions = paramFlags.options(seed);
  if (!fileOptions)
    return fail(fileOptions.takeError());
  llvm::Expected<std::vector<rt::HostTensor>> loaded = rt::loadParams(
      **compiled, std::vector<std::string>(params.begin(), params.end()),
      text->tokenizer, *fileOptions);
  if (!loaded)
    return fail(loaded.takeError());
  llvm::Expected<rt::EvalRecord> record =
      rt::evaluate(**compiled, *text, *loaded, windows, 8);
  if (!record)
    return fail(record.takeError());
  llvm::outs() << llvm::formatv(
      "validation: {0:f4} nats per token (perplexity {1:f2}), {2:f4} "
      "bits/byte over {3} sequences (unigram entropy {4:f4})\n",
      record->loss, std::exp(record->loss), record->bitsPerByte,
      int64_t(windows), text->unigramEntropyBits());
  return 0;
}

//===----------------------------------------------------------------------===//
// Command dispatch
//===----------------------------------------------------------------------===//

struct Command {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
};

const Command commands[] = {
    {"compile", "run a model definition through the compiler, print the IR",
     runCompile},
    {"params", "list a model's parameters: names, shapes, initialisers",
     runParams},
    {"cost", "MACs and attention memory per layer, from the IR and the "
             "paper's formulas", runCost},
    {"run", "compile a model and run it on .npy inputs (CPU or GPU)",
     runRun},
    {"train", "train a model on text (bytes or subwords), on the CPU or GPU",
     runTrain},
    {"eval", "validation bits per byte of a trained checkpoint", runEval},
};

void printUsage(llvm::raw_ostream &os) {
  os << "OVERVIEW: Switchyard, a compiler for Mixture-of-Experts attention\n"
        "(SwitchHead, SwitchAll) built on MLIR\n\n"
        "USAGE: switchyard <command> [options] MODEL.mlir\n\nCOMMANDS:\n";
  for (const Command &command : commands)
    os << llvm::formatv("  {0,-10} {1}\n", command.name, command.summary);
  os << "\nRun 'switchyard <command> --help' for the options of a command.\n"
        "Model definitions are .mlir files in the lm dialect; see\n"
        "examples/models/ and docs/LmDialect.md.\n";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (argc < 2) {
    printUsage(llvm::errs());
    return 1;
  }
  StringRef name = argv[1];
  if (name == "--help" || name == "-help" || name == "-h" || name == "help") {
    printUsage(llvm::outs());
    return 0;
  }
  for (const Command &command : commands) {
    if (name != command.name)
      continue;
    // The command sees "switchyard <command>" as its program name.
    std::string program = std::string("switchyard ") + command.name;
    std::vector<char *> args(argv + 1, argv + argc);
    args[0] = program.data();
    return command.run(static_cast<int>(args.size()), args.data());
  }
  llvm::errs() << "switchyard: unknown command '" << name << "'\n\n";
  printUsage(llvm::errs());
  return 1;
}
