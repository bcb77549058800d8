//===- switchyard-opt.cpp - Switchyard optimizer driver -------------------===//
//
// The mlir-opt of Switchyard: parses, verifies, transforms and prints IR
// with the `lm` and `moe` dialects, the upstream dialects the pipelines use,
// and every Switchyard pass and pipeline registered.
//
// Unlike mlir-opt it takes any number of input files and processes each one
// in turn with the same options (`switchyard-opt examples/models/*.mlir`
// verifies every example); their outputs are concatenated. The exit code is
// non-zero when any input fails.
//
//===----------------------------------------------------------------------===//

#include "lib/InitSwitchyard.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::switchyard::registerPassesAndPipelines();
  mlir::DialectRegistry registry;
  mlir::switchyard::registerDialects(registry);

  static cl::list<std::string> inputs(
      cl::Positional, cl::desc("<input files> (default: stdin)"));
  static cl::opt<std::string> output("o", cl::desc("Output filename"),
                                     cl::value_desc("filename"),
                                     cl::init("-"));
  std::string header = mlir::registerCLIOptions(
      "Switchyard optimizer: MoE attention compiler", registry);
  cl::ParseCommandLineOptions(argc, argv, header);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();

  // Informational modes read no input: let upstream handle them.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, "-", output, registry));

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> out =
      mlir::openOutputFile(output, &error);
  if (!out) {
    llvm::errs() << "switchyard-opt: " << error << "\n";
    return 1;
  }
  std::vector<std::string> files(inputs.begin(), inputs.end());
  if (files.empty())
    files.push_back("-");
  bool ok = true;
  for (const std::string &file : files) {
    std::unique_ptr<llvm::MemoryBuffer> buffer =
        mlir::openInputFile(file, &error);
    if (!buffer) {
      llvm::errs() << "switchyard-opt: " << error << "\n";
      ok = false;
      continue;
    }
    if (failed(mlir::MlirOptMain(out->os(), std::move(buffer), registry,
                                 config)))
      ok = false;
  }
  if (!ok)
    return 1;
  out->keep();
  return 0;
}
