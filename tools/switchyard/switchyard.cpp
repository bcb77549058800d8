//===- switchyard.cpp - the Switchyard driver -----------------------------===//
//
// The user-facing command: `switchyard <command> [options] MODEL.mlir`.
// Each command registers only its own options, so `switchyard <command>
// --help` lists exactly what that command takes. Commands run the same
// pipeline builders as switchyard-opt (lib/Pipelines/Pipelines.h).
//
// This file holds main() and the table of commands; each command is
// implemented in its own file (Commands.h lists them), and the options and
// helpers several commands share are in Common.h.
//
//===----------------------------------------------------------------------===//

#include "tools/switchyard/Commands.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

using namespace switchyard::driver;

namespace {

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
    {"cost",
     "MACs and attention memory per layer, from the IR and the "
     "paper's formulas",
     runCost},
    {"run", "compile a model and run it on .npy inputs (CPU or GPU)", runRun},
    {"train", "train a model on text (bytes or subwords), on the CPU or GPU",
     runTrain},
    {"eval", "validation bits per byte of a trained checkpoint", runEval},
    {"generate", "continue a prompt with a trained byte-level model",
     runGenerate},
    {"analyze", "draw a trained model's attention maps and expert choices",
     runAnalyze},
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
  llvm::StringRef name = argv[1];
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
