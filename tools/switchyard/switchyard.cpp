//===- switchyard.cpp - the Switchyard driver -----------------------------===//
//
// The user-facing command: `switchyard <command> [options] MODEL.mlir`.
// Each command registers only its own options, so `switchyard <command>
// --help` lists exactly what that command takes. Commands run the same
// pipeline builders as switchyard-opt (dialect/Pipelines/Pipelines.h).
//
//===----------------------------------------------------------------------===//

#include "dialect/InitSwitchyard.h"
#include "dialect/Lm/IR/LmOps.h"
#include "dialect/Pipelines/Pipelines.h"
#include "runtime/Params.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatAdapters.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

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
};

/// Registers MLIR's IR-printing, timing and pass-manager options (for
/// example --mlir-print-ir-after-all) and shows them, with `category`, in
/// --help; LLVM's many unrelated global options stay hidden.
void registerCommandOptions(cl::OptionCategory &category) {
  static cl::OptionCategory mlirCategory("MLIR options");
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  for (auto &[name, option] : cl::getRegisteredOptions())
    if (name.starts_with("mlir-print-ir") || name == "mlir-timing" ||
        name == "mlir-print-debuginfo" || name == "mlir-pass-statistics")
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

  MLIRContext context;
  setUpContext(context);
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &context);
  OwningOpRef<ModuleOp> module = loadModel(context, sources, model.input);
  if (!module || failed(runFrontend(*module, model.numLayers)))
    return 1;

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> out = openOutputFile(output, &error);
  if (!out) {
    llvm::errs() << "switchyard: cannot write '" << output << "': " << error
                 << "\n";
    return 1;
  }
  module->print(out->os());
  out->os() << "\n";
  out->keep();
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
         init.getStd().convertToDouble()});
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
      "key in checkpoints), shape, element count and initialiser, then the\n"
      "total parameter count.\n");

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
    for (const rt::ParamSpec &spec : table->params)
      params.push_back(llvm::json::Object{
          {"name", spec.name},
          {"shape", llvm::json::Array(spec.shape)},
          {"dtype", std::string(rt::toString(spec.dtype))},
          {"init", std::string(rt::toString(spec.init))},
          {"std", spec.std},
          {"elements", spec.numElements()}});
    os << llvm::formatv("{0:2}\n", llvm::json::Value(llvm::json::Object{
                                       {"params", std::move(params)},
                                       {"total", table->totalElements()}}));
    return 0;
  }
  size_t nameWidth = 4;
  for (const rt::ParamSpec &spec : table->params)
    nameWidth = std::max(nameWidth, spec.name.size());
  os << llvm::formatv("{0} {1,-14} {2,-5} {3,12}  {4}\n",
                      llvm::fmt_align("name", llvm::AlignStyle::Left,
                                      nameWidth),
                      "shape", "dtype", "elements", "init");
  for (const rt::ParamSpec &spec : table->params)
    os << llvm::formatv("{0} {1,-14} {2,-5} {3,12}  {4}\n",
                        llvm::fmt_align(spec.name, llvm::AlignStyle::Left,
                                        nameWidth),
                        shapeString(spec), rt::toString(spec.dtype),
                        spec.numElements(), initString(spec));
  os << llvm::formatv("total: {0} tensors, {1} parameters ({2:f2}M)\n",
                      table->params.size(), table->totalElements(),
                      table->totalElements() / 1e6);
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
