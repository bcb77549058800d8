//===- Commands.h - the entry points of the switchyard commands -*- C++ -*-===//
//
// One function per `switchyard` command, each defined in its own file
// (Compile.cpp, Params.cpp, Cost.cpp, Run.cpp, Train.cpp, Eval.cpp).
// main() (switchyard.cpp) calls the one the command line names with the
// arguments that follow the command name, argv[0] being
// "switchyard <command>"; it registers and parses the command's own
// options and returns the process's exit status.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_TOOLS_SWITCHYARD_COMMANDS_H
#define SWITCHYARD_TOOLS_SWITCHYARD_COMMANDS_H

namespace switchyard::driver {

/// switchyard compile: the front end's IR of a model.
int runCompile(int argc, char **argv);

/// switchyard params: the parameters a model owns.
int runParams(int argc, char **argv);

/// switchyard cost: MACs and attention memory per layer.
int runCost(int argc, char **argv);

/// switchyard run: a model's forward pass on .npy inputs.
int runRun(int argc, char **argv);

/// switchyard train: training on text.
int runTrain(int argc, char **argv);

/// switchyard eval: the validation loss of trained parameters.
int runEval(int argc, char **argv);

/// switchyard generate: a prompt's continuation by a trained model.
int runGenerate(int argc, char **argv);

/// switchyard analyze: what a trained model computes on a window of text
/// (attention maps, expert selections) as pictures and JSON.
int runAnalyze(int argc, char **argv);

} // namespace switchyard::driver

#endif // SWITCHYARD_TOOLS_SWITCHYARD_COMMANDS_H
