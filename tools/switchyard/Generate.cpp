//===- Generate.cpp - switchyard generate ---------------------------------===//
//
// `switchyard generate MODEL.mlir --params FILE --prompt TEXT`: compiles a
// byte-level model for the CPU, the GPU or the GPU emulation, loads trained
// parameters and writes the prompt's continuation as it is sampled
// (runtime/Generation.h: rotary models over a sliding window, XL models
// segment by segment with their memories; greedy or temperature, top-k and
// top-p sampling with a seed).
//
//===----------------------------------------------------------------------===//

#include "tools/switchyard/Commands.h"
#include "tools/switchyard/Common.h"

#include "runtime/Generation.h"
#include "runtime/Training.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

namespace switchyard::driver {

int runGenerate(int argc, char **argv) {
  static ModelOptions model;
  static TrainedParams params(model.category);
  static cl::opt<std::string> prompt(
      "prompt", cl::desc("The text to continue, as bytes (at least one)"),
      cl::Required, cl::cat(model.category));
  static cl::opt<int64_t> tokens("tokens",
                                 cl::desc("How many tokens to generate (64)"),
                                 cl::init(64), cl::cat(model.category));
  static cl::opt<double> temperature(
      "temperature",
      cl::desc("Divide the logits by this before sampling; 0: greedy, the "
               "most probable token every step (1.0)"),
      cl::init(1.0), cl::cat(model.category));
  static cl::opt<int64_t> topK(
      "top-k",
      cl::desc("Sample among the k most probable tokens only (0: all)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<double> topP(
      "top-p",
      cl::desc("Sample among the most probable tokens whose probability "
               "reaches p (1: all)"),
      cl::init(1.0), cl::cat(model.category));
  static cl::opt<uint64_t> seed(
      "seed",
      cl::desc("Seed of the sampling (and, with --init-missing, of the "
               "initialisers); the same seed gives the same text (0)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<bool> ids(
      "ids",
      cl::desc("Write the generated token ids, one line, instead of the "
               "prompt and its continuation as text"),
      cl::init(false), cl::cat(model.category));
  static DeviceOption device(model.category);
  registerCommandOptions(model.category, {&device.gpuCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard generate: continue a prompt with a trained byte-level "
      "model\n(on the CPU, or the GPU with --device gpu). Each token runs "
      "the model's forward\nfunction on the window of tokens so far and "
      "samples from the logits at its end:\nthe last context-many tokens "
      "(rotary positions), or the current segment with\nthe memories the "
      "segments before it left (Transformer-XL). No key/value cache.\n");
  if (tokens < 0)
    return fail(llvm::formatv("--tokens: expected 0 or more, found {0}",
                              int64_t(tokens))
                    .str());
  rt::SamplingOptions sampling;
  sampling.temperature = temperature;
  sampling.topK = topK;
  sampling.topP = topP;
  sampling.seed = seed;
  if (llvm::Error error = sampling.check())
    return fail(std::move(error));
  if (prompt.empty())
    return fail("--prompt: expected at least one byte of text");

  llvm::Expected<std::unique_ptr<rt::Program>> compiled =
      compileFor(device, model);
  if (!compiled)
    return fail(compiled.takeError());
  rt::Program &program = **compiled;
  llvm::Expected<rt::ParamFileOptions> fileOptions = params.flags.options(seed);
  if (!fileOptions)
    return fail(fileOptions.takeError());
  std::vector<rt::HostTensor> loaded;
  llvm::Expected<rt::LanguageModel> language = bindByteModel(
      program, model.input,
      std::vector<std::string>(params.files.begin(), params.files.end()),
      *fileOptions, loaded, "generate");
  if (!language)
    return fail(language.takeError());

  std::vector<int32_t> promptIds;
  for (unsigned char byte : std::string(prompt))
    promptIds.push_back(byte);
  // A model with memories reads a longer prompt segment by segment.
  if (!language->hasMemories() &&
      static_cast<int64_t>(promptIds.size()) > language->context)
    return fail(llvm::formatv("--prompt: {0} bytes; the model's context "
                              "holds {1}",
                              promptIds.size(), language->context)
                    .str());
  if (!ids)
    llvm::outs() << prompt;
  llvm::outs().flush();
  auto start = std::chrono::steady_clock::now();
  bool first = true;
  llvm::Expected<std::vector<int32_t>> generated =
      rt::generate(*language, promptIds, tokens, sampling, [&](int32_t token) {
        if (ids)
          llvm::outs() << (first ? "" : " ") << token;
        else
          llvm::outs() << static_cast<char>(token);
        first = false;
        llvm::outs().flush();
      });
  llvm::outs() << "\n";
  llvm::outs().flush();
  if (!generated)
    return fail(generated.takeError());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  llvm::errs() << llvm::formatv(
      "generated {0} tokens in {1:f2} s ({2:f1} tokens/s, {3})\n",
      generated->size(), seconds,
      seconds > 0 ? generated->size() / seconds : 0.0, program.backend());
  return 0;
}

} // namespace switchyard::driver
