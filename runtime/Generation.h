//===- Generation.h - sampling text from a compiled model -------*- C++ -*-===//
//
// Autoregressive generation with a compiled language model: the model's
// forward function maps a window of T token ids to the next-token logits at
// every position, so generating a token runs the window that ends with the
// tokens so far and samples from the logits at its last position. The
// window is the whole prefix while it fits the context (positions from 0,
// as in training); past it, the last T tokens, which a model with rotary
// positions sees as it saw any window (attention is causal and rotary
// positions are relative). Every step recomputes its window: there is no
// key/value cache, so a step costs a forward pass over T positions.
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

/// A model's forward function as generation calls it: one argument of token
/// ids [?, T] (its parameters bound by name), one result of logits
/// [?, T, V].
struct LanguageModel {
  Program &program;
  const FunctionSpec &function;
  /// The parameters, by name (Program::params()' order is not needed).
  std::vector<const HostTensor *> params;
  int64_t context = 0, vocab = 0;

  /// Checks that `function` has that form and binds `params` to it; the
  /// error says what the function takes instead (an XL model's memories,
  /// a function without logits).
  static llvm::Expected<LanguageModel>
  bind(Program &program, const FunctionSpec &function,
       const std::vector<HostTensor> &params);

  /// The logits [V] after the last token of `tokens` (at most `context`
  /// of them, at positions from 0).
  llvm::Expected<std::vector<float>> nextLogits(std::span<const int32_t> tokens);
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
