//===- Compile.cpp - switchyard compile -----------------------------------===//
//
// `switchyard compile MODEL.mlir`: parses and verifies a model definition,
// runs the front-end pipeline on it and writes the resulting IR to -o
// (default: stdout).
//
//===----------------------------------------------------------------------===//

#include "tools/switchyard/Commands.h"
#include "tools/switchyard/Common.h"

#include "runtime/TensorFile.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace switchyard::driver {

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

} // namespace switchyard::driver
