//===- SmallTraining.h - a model and a corpus small enough to train -------===//
//
// What the GPU backend's unit tests train: a one-layer SwitchHead model
// over bytes, and a corpus of one repeated sentence.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_TEST_UNIT_SMALLTRAINING_H
#define SWITCHYARD_TEST_UNIT_SMALLTRAINING_H

#include "runtime/Training.h"

#include <string>

namespace switchyard::test {

/// A SwitchHead layer (RoPE, 3 experts, k = 2) between a byte embedding and
/// the output layer.
inline constexpr const char *kSmallModel = R"mlir(
  lm.model @small(%t: tensor<?x8xi32>) -> tensor<?x8x256xf32> {
    %x0 = lm.embed "embed" %t {vocab = 256} : tensor<?x8xi32> -> tensor<?x8x8xf32>
    %a0 = lm.switchhead "att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x8x8xf32>
    %h = lm.layer_norm "norm" %a0 : tensor<?x8x8xf32>
    %l = lm.output "out" %h {vocab = 256} : tensor<?x8x8xf32> -> tensor<?x8x256xf32>
    lm.return %l : tensor<?x8x256xf32>
  })mlir";

/// `repeats` copies of a sentence as byte tokens, the last `validBytes` of
/// them for validation.
inline runtime::TokenCorpus smallCorpus(int repeats, size_t validBytes) {
  std::string text;
  for (int i = 0; i < repeats; ++i)
    text += "the cat sat on the mat; the dog sat on the log. ";
  runtime::ByteCorpus bytes;
  bytes.train.assign(text.begin(), text.end() - validBytes);
  bytes.valid.assign(text.end() - validBytes, text.end());
  return runtime::TokenCorpus::fromBytes(bytes);
}

/// A training run of `steps` steps of batch 2 (warmup 1), evaluating one
/// batch every `evalEvery` steps (0: at the end only).
inline runtime::TrainConfig smallTrainConfig(int steps, int evalEvery) {
  runtime::TrainConfig config;
  config.steps = steps;
  config.batch = 2;
  config.warmup = 1;
  config.evalEvery = evalEvery;
  config.evalBatches = 1;
  return config;
}

/// rt::train without progress callbacks.
inline llvm::Expected<runtime::TrainSummary>
trainQuietly(runtime::Program &program, const runtime::TokenCorpus &corpus,
             const runtime::TrainConfig &config) {
  return runtime::train(program, corpus, config,
                        [](const runtime::StepRecord &) {},
                        [](const runtime::EvalRecord &) {});
}

} // namespace switchyard::test

#endif // SWITCHYARD_TEST_UNIT_SMALLTRAINING_H
