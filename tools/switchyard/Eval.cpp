//===- Eval.cpp - switchyard eval -----------------------------------------===//
//
// `switchyard eval MODEL.mlir --params FILE`: compiles a model for the CPU,
// the GPU or the GPU emulation, loads trained parameters and prints the
// validation loss on a corpus's held-out text, per token and in bits per
// byte.
//
//===----------------------------------------------------------------------===//

#include "tools/switchyard/Commands.h"
#include "tools/switchyard/Common.h"

#include "runtime/Training.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace switchyard::driver {

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
  registerCommandOptions(model.category, {&device.gpuCategory});
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

} // namespace switchyard::driver
