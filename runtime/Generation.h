//===- Generation.h - sampling text from a compiled model -------*- C++ -*-===//
//
// Autoregressive generation with a compiled language model: the model's
// forward function maps a window of T token ids to the next-token logits at
// every position, so generating a token runs the window that ends with the
// tokens so far and samples from the logits at its last position (the
// positions after it are padding, which causal attention keeps from it).
//
// - A model without memories (rotary positions): the window is the whole
//   prefix while it fits the context (positions from 0, as in training);
//   past it, the last T tokens, which a model with rotary positions sees as
//   it saw any window (rotary positions are relative).
// - A Transformer-XL model (its memories are the data arguments after the
//   tokens, the next memories the results after the logits, as
//   runtime/Training.h has them): the text is cut into segments of T
//   tokens, as in training; the window is the current segment, and each
//   full segment's block inputs become the memories of the next (zeros
//   before the first), so the model carries its memory as it did when it
//   trained.
//
// With the model's decoding step (CompileOptions::decoder, lm-build-decoder)
// a model without memories keeps a key/value cache instead: the prompt's
// tokens are decoded one by one into per-block caches of T positions, and
// each new token costs one token's work. While the text fits the context
// the logits are those of the window's forward pass (up to the order of f32
// sums); when the caches are full, they are rebuilt from the last T/2
// tokens (as llama.cpp's context shift drops half the context), so a token
// past the context sees between T/2 and T tokens, where the window sees T.
// Without the decoding step, or for XL models, every step recomputes its
// window: a forward pass over T positions.
//
// Sampling follows the usual definitions (as Hugging Face's generate()
// applies them): temperature 0 is greedy (the argmax, the lowest id on a
// tie); otherwise the logits are divided by the temperature, only the
// top_k largest kept (0: all), then the smallest set of most probable
// tokens whose probability reaches top_p (1: all), and a token is drawn
// from the softmax of what is left with a seeded generator, so that a seed
// fixes the sample on any machine.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_GENERATION_H
#define SWITCHYARD_RUNTIME_GENERATION_H

#include "runtime/Program.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

namespace switchyard::runtime {

/// How the next token is chosen from the logits.
struct SamplingOptions {
  /// 0: greedy; otherwise the logits are divided by it.
  double temperature = 1.0;
  /// Keep only the k most probable tokens (0: every token).
  int64_t topK = 0;
  /// Keep the smallest set of most probable tokens whose probability
  /// reaches top_p (1: every token).
  double topP = 1.0;
  uint64_t seed = 0;

  /// An error naming the option whose value is out of range.
  llvm::Error check() const;
};

/// The pseudo-random generator of sampling: the same sequence on every
/// platform (std::mt19937_64 is fully specified; the draw below uses its
/// raw output, not a library distribution).
using SamplingGenerator = std::mt19937_64;

/// The token chosen from `logits` (one per vocabulary entry).
int32_t sampleToken(std::span<const float> logits,
                    const SamplingOptions &options,
                    SamplingGenerator &generator);

/// A model's forward function as generation calls it: token ids [?, T]
/// first, then any XL memories [?, M, D] (its parameters bound by name);
/// logits [?, T, V] first, then one next memory per memory argument, of its
/// type and shape (then any probes, CompileOptions::probes).
struct LanguageModel {
  Program &program;
  const FunctionSpec &function;
  /// The parameters, by name (Program::params()' order is not needed).
  std::vector<const HostTensor *> params;
  int64_t context = 0, vocab = 0;
  /// Generation samples ids in [0, pieces): `vocab` unless a tokenizer has
  /// fewer pieces than the model has logits.
  int64_t pieces = 0;
  /// The memories the next window sees ([1, M, D]; none without XL).
  std::vector<HostTensor> memories;
  /// The model's decoding step, if the program has one (FunctionSpec::
  /// decoderOf): token [1, 1], position, then keys and values caches
  /// [1, T, H, F] per attention block; logits [1, 1, V], then the caches.
  const FunctionSpec *decoder = nullptr;
  /// The decoding step's caches, in its argument order, and how many
  /// positions of them hold a token (the next token's position).
  std::vector<std::unique_ptr<DeviceTensor>> caches;
  int64_t cached = 0;
  /// The parameters on the backend, for the decoding step (made by its
  /// first call).
  std::vector<std::unique_ptr<DeviceTensor>> residentParams;

  /// Checks that `function` has that form and binds `params` to it (the
  /// memories start as zeros), and to its decoding step where the program
  /// has one and `useDecoder` asks for it; the error says what a function
  /// takes instead.
  static llvm::Expected<LanguageModel>
  bind(Program &program, const FunctionSpec &function,
       const std::vector<HostTensor> &params, bool useDecoder = true);

  bool hasMemories() const { return !memories.empty(); }
  bool hasDecoder() const { return decoder != nullptr; }

  /// Empties the caches of the decoding step (zeros, position 0).
  llvm::Error resetCaches();

  /// Runs the decoding step for `token` at the next position (the caches
  /// must not be full): the logits [V] after it. Its key and value join
  /// the caches.
  llvm::Expected<std::vector<float>> decode(int32_t token);

  /// Runs the window `tokens` (1 to `context` of them, at positions from
  /// 0, padded to `context` after them) with the current memories: every
  /// result of the function (logits [1, T, V], the next memories, any
  /// probes).
  llvm::Expected<std::vector<HostTensor>> run(std::span<const int32_t> tokens);

  /// Runs the window `tokens` (1 to `context` of them, at positions from
  /// 0) with the current memories: the logits [V] after its last token.
  /// `advance`: the window is a full segment whose block inputs become the
  /// memories of the next one.
  llvm::Expected<std::vector<float>> nextLogits(std::span<const int32_t> tokens,
                                                bool advance = false);
};

/// Generates `count` tokens after `prompt` (at least one token, each in
/// [0, V)); calls `emit` with each token as it is chosen. Returns the
/// generated tokens.
llvm::Expected<std::vector<int32_t>>
generate(LanguageModel &model, std::span<const int32_t> prompt, int64_t count,
         const SamplingOptions &options,
         const std::function<void(int32_t)> &emit = nullptr);

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_GENERATION_H
