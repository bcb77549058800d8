//===- Generate.cpp - switchyard generate ---------------------------------===//
//
// `switchyard generate MODEL.mlir --params FILE --prompt TEXT`: compiles a
// byte-level model for the CPU, the GPU or the GPU emulation, loads trained
// parameters and writes the prompt's continuation as it is sampled
// (runtime/Generation.h: rotary models one token per step against
// key/value caches, or over a sliding window; XL models segment by segment
// with their memories; greedy or temperature, top-k and top-p sampling with
// a seed).
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
  static cl::opt<bool> kvCache(
      "kv-cache",
      cl::desc("Decode one token per step against key/value caches of the "
               "attention blocks (models without memories); =false: run the "
               "whole window every step (true)"),
      cl::init(true), cl::cat(model.category));
  static DeviceOption device(model.category);
  registerCommandOptions(model.category, {&device.gpuCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard generate: continue a prompt with a trained model (bytes, "
      "or the\nSentencePiece subwords of --tokenizer-model) on the CPU or "
      "the GPU\n(--device gpu), sampling each token from the logits after "
      "the tokens so far.\nA model with rotary or no positions decodes one "
      "token per step against\nkey/value caches of its attention blocks "
      "(the prompt first); when they are\nfull, they are rebuilt from the "
      "last half-context of tokens. A Transformer-XL\nmodel (or "
      "--kv-cache=false) runs its forward function on a window each step:\n"
      "the current segment with the memories the segments before it left, "
      "or the\nlast context-many tokens.\n");
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

  CompileRequest request;
  request.decoder = kvCache;
  llvm::Expected<std::unique_ptr<rt::Program>> compiled =
      compileFor(device, model, request);
  if (!compiled)
    return fail(compiled.takeError());
  rt::Program &program = **compiled;
  llvm::Expected<rt::ParamFileOptions> fileOptions = params.flags.options(seed);
  if (!fileOptions)
    return fail(fileOptions.takeError());
  std::vector<rt::HostTensor> loaded;
  llvm::Expected<std::unique_ptr<rt::SentencePieceTokenizer>> read =
      params.loadTokenizer();
  if (!read)
    return fail(read.takeError());
  std::unique_ptr<rt::SentencePieceTokenizer> subwords = std::move(*read);
  llvm::Expected<rt::LanguageModel> language = bindLanguageModel(
      program, model.input,
      std::vector<std::string>(params.files.begin(), params.files.end()),
      *fileOptions, loaded, "generate", subwords.get());
  if (!language)
    return fail(language.takeError());

  std::vector<int32_t> promptIds;
  if (subwords) {
    llvm::Expected<std::vector<int32_t>> encoded = subwords->encodeText(prompt);
    if (!encoded)
      return fail(encoded.takeError());
    promptIds = std::move(*encoded);
    if (promptIds.empty())
      return fail("--prompt: the tokenizer made no tokens of it");
  } else {
    for (unsigned char byte : std::string(prompt))
      promptIds.push_back(byte);
  }
  // A model with memories reads a longer prompt segment by segment.
  if (!language->hasMemories() &&
      static_cast<int64_t>(promptIds.size()) > language->context)
    return fail(llvm::formatv("--prompt: {0} {1}; the model's context "
                              "holds {2}",
                              promptIds.size(), subwords ? "tokens" : "bytes",
                              language->context)
                    .str());
  if (!ids)
    llvm::outs() << prompt;
  llvm::outs().flush();
  auto start = std::chrono::steady_clock::now();
  // Subwords are written as their text grows: the decoding of all the
  // tokens so far, past what is written already (a byte piece may wait for
  // the rest of its character).
  std::vector<int32_t> sofar;
  std::string written;
  llvm::Error streamError = llvm::Error::success();
  // The subwords' text past what is written, unless it is not the text
  // written and more (decoding joins pieces) or ends in an incomplete
  // character (U+FFFD); `last`: write whatever there is.
  auto writeText = [&](bool last) {
    llvm::Expected<std::string> text = subwords->decode(sofar);
    if (!text) {
      streamError = text.takeError();
      return;
    }
    llvm::StringRef all = *text;
    if (last || (all.starts_with(written) && !all.ends_with("\xEF\xBF\xBD"))) {
      llvm::outs() << (all.starts_with(written) ? all.drop_front(written.size())
                                                : all);
      written = all.str();
    }
  };
  auto emit = [&](int32_t token) {
    bool firstToken = sofar.empty();
    sofar.push_back(token);
    if (ids)
      llvm::outs() << (firstToken ? "" : " ") << token;
    else if (!subwords)
      llvm::outs() << static_cast<char>(token);
    else if (!streamError)
      writeText(/*last=*/false);
    llvm::outs().flush();
  };
  llvm::Expected<std::vector<int32_t>> generated =
      rt::generate(*language, promptIds, tokens, sampling, emit);
  if (generated && subwords && !ids && !streamError)
    writeText(/*last=*/true);
  if (streamError)
    return fail(std::move(streamError));
  llvm::outs() << "\n";
  llvm::outs().flush();
  if (!generated)
    return fail(generated.takeError());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  llvm::errs() << llvm::formatv(
      "generated {0} tokens in {1:f2} s ({2:f1} tokens/s, {3}, {4})\n",
      generated->size(), seconds,
      seconds > 0 ? generated->size() / seconds : 0.0, program.backend(),
      language->hasDecoder()    ? "key/value caches"
      : language->hasMemories() ? "segments with memories"
                                : "a window per token");
  return 0;
}

} // namespace switchyard::driver
