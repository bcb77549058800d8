//===- GenerationTest.cpp - sampling and the generation loop --------------===//
//
// runtime/Generation.h: the sampling rules on hand-made logits (greedy is
// the argmax with ties to the lowest id; top-k and top-p keep what they
// say; a seed fixes the draw; the draw follows the softmax, checked by
// frequency over 20,000 draws to ±0.015, about 4.5 standard deviations),
// and greedy generation with a compiled model against the argmax of the
// model's own forward function called on each prefix, padded differently
// (a token that the generation loop never pads with), so that neither the
// window's placement nor its padding can hide an error. The model's
// context is 8 tokens and 12 are generated after a prompt of 3: the last
// steps slide the window. With the model's decoding step, each position's
// logits are the forward function's, and generation with the key/value
// caches the same as without them. A Transformer-XL model's generation is
// checked against its full segments run one after another, each with the memory
// the one before returned.
//
//===----------------------------------------------------------------------===//

#include "runtime/Generation.h"
#include "runtime/Engine/CpuProgram.h"
#include "runtime/ParamFiles.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>

using namespace switchyard::runtime;

namespace {

int32_t draw(const std::vector<float> &logits, const SamplingOptions &options,
             SamplingGenerator &generator) {
  return sampleToken(logits, options, generator);
}

TEST(GenerationTest, GreedyIsTheArgmaxWithTiesToTheLowestId) {
  SamplingGenerator generator(1);
  SamplingOptions greedy;
  greedy.temperature = 0;
  EXPECT_EQ(draw({0.5f, 2.0f, -1.0f, 2.0f}, greedy, generator), 1);
  EXPECT_EQ(draw({3.0f}, greedy, generator), 0);
  SamplingOptions topOne;
  topOne.topK = 1;
  EXPECT_EQ(draw({0.5f, 2.0f, 7.0f, 2.0f}, topOne, generator), 2);
}

TEST(GenerationTest, TopKAndTopPKeepOnlyTheMostProbable) {
  SamplingGenerator generator(2);
  SamplingOptions topTwo;
  topTwo.topK = 2;
  std::vector<float> logits = {1.0f, 0.0f, 1.2f, -3.0f, 0.9f};
  for (int i = 0; i < 2000; ++i) {
    int32_t token = draw(logits, topTwo, generator);
    EXPECT_TRUE(token == 0 || token == 2) << token;
  }
  // The softmax over {1.0, 0.0, 1.2} is {0.386, 0.142, 0.472}: a nucleus
  // of 0.45 holds token 2 alone, one of 0.5 tokens 2 and 0.
  SamplingOptions nucleus;
  nucleus.topP = 0.45;
  std::vector<float> three = {1.0f, 0.0f, 1.2f};
  for (int i = 0; i < 2000; ++i)
    EXPECT_EQ(draw(three, nucleus, generator), 2);
  nucleus.topP = 0.5;
  int zeros = 0;
  for (int i = 0; i < 2000; ++i) {
    int32_t token = draw(three, nucleus, generator);
    EXPECT_NE(token, 1);
    zeros += token == 0;
  }
  EXPECT_GT(zeros, 0);
}

TEST(GenerationTest, DrawsFollowTheSoftmaxOfTheScaledLogits) {
  const int draws = 20000;
  // p(1) = 3/4 at temperature 1; at temperature 2, √3 / (1 + √3).
  for (auto [temperature, expected] :
       {std::pair{1.0, 0.75}, {2.0, std::sqrt(3.0) / (1 + std::sqrt(3.0))}}) {
    SamplingOptions options;
    options.temperature = temperature;
    SamplingGenerator generator(3);
    int ones = 0;
    for (int i = 0; i < draws; ++i)
      ones += draw({0.0f, float(std::log(3.0))}, options, generator);
    EXPECT_NEAR(double(ones) / draws, expected, 0.015)
        << "temperature " << temperature;
  }
}

TEST(GenerationTest, ASeedFixesTheSample) {
  std::vector<float> logits = {0.1f, 0.3f, 0.2f, 0.25f, 0.0f, 0.15f};
  SamplingOptions options;
  auto sequence = [&](uint64_t seed) {
    SamplingGenerator generator(seed);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 64; ++i)
      tokens.push_back(draw(logits, options, generator));
    return tokens;
  };
  EXPECT_EQ(sequence(7), sequence(7));
  EXPECT_NE(sequence(7), sequence(8));
}

TEST(GenerationTest, BadOptionsAreNamed) {
  SamplingOptions options;
  options.temperature = -1;
  EXPECT_NE(llvm::toString(options.check()).find("--temperature"),
            std::string::npos);
  options = {};
  options.topK = -2;
  EXPECT_NE(llvm::toString(options.check()).find("--top-k"), std::string::npos);
  options = {};
  options.topP = 0;
  EXPECT_NE(llvm::toString(options.check()).find("--top-p"), std::string::npos);
}

constexpr const char *kModel = R"mlir(
  lm.model @m(%t: tensor<?x8xi32>) -> tensor<?x8x16xf32> {
    %x0 = lm.embed "embed" %t {vocab = 16} : tensor<?x8xi32> -> tensor<?x8x12xf32>
    %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x8x12xf32>
    %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 24} : tensor<?x8x12xf32>
    %h = lm.layer_norm "norm" %x1 : tensor<?x8x12xf32>
    %l = lm.output "out" %h {vocab = 16} : tensor<?x8x12xf32> -> tensor<?x8x16xf32>
    lm.return %l : tensor<?x8x16xf32>
  })mlir";

struct Compiled {
  std::unique_ptr<CpuProgram> program;
  std::vector<HostTensor> params;
};

Compiled compileModel(const char *source, bool decoder = false) {
  Compiled compiled;
  CompileOptions options;
  options.decoder = decoder;
  llvm::Expected<std::unique_ptr<CpuProgram>> program =
      CpuProgram::compile(source, "generation-test.mlir", options);
  if (!program) {
    ADD_FAILURE() << llvm::toString(program.takeError());
    return compiled;
  }
  compiled.program = std::move(*program);
  ParamFileOptions init;
  init.initMissing = true;
  init.seed = 5;
  llvm::Expected<std::vector<HostTensor>> params =
      readParamFiles(compiled.program->params(), {}, init);
  if (!params) {
    ADD_FAILURE() << llvm::toString(params.takeError());
    return compiled;
  }
  compiled.params = std::move(*params);
  return compiled;
}

/// Calls the model's forward function with `data` for its data arguments,
/// in order, and its parameters by name.
llvm::Expected<std::vector<HostTensor>>
callForward(Compiled &compiled, std::vector<const HostTensor *> data) {
  const FunctionSpec &function = compiled.program->functions().front();
  std::vector<const HostTensor *> arguments;
  size_t next = 0;
  for (const TensorSpec &spec : function.arguments) {
    if (spec.param.empty()) {
      arguments.push_back(data.at(next++));
      continue;
    }
    for (const HostTensor &param : compiled.params)
      if (param.name == spec.param)
        arguments.push_back(&param);
  }
  return compiled.program->call(function.name, arguments);
}

/// The forward function's logits [8, 16] of `tokens` (at most 8), the
/// window padded with `pad`.
std::vector<float> forwardLogits(Compiled &compiled,
                                 const std::vector<int32_t> &tokens,
                                 int32_t pad) {
  std::vector<int32_t> window(8, pad);
  std::copy(tokens.begin(), tokens.end(), window.begin());
  HostTensor input =
      HostTensor::fromValues<int32_t>("t", ElementType::i32, {1, 8}, window);
  llvm::Expected<std::vector<HostTensor>> results =
      callForward(compiled, {&input});
  if (!results) {
    ADD_FAILURE() << llvm::toString(results.takeError());
    return {};
  }
  std::span<const float> logits = (*results)[0].values<float>();
  return std::vector<float>(logits.begin(), logits.end());
}

/// The argmax of the forward function's logits after the last of `tokens`
/// (at most 8), the window padded with `pad`.
int32_t forwardArgmax(Compiled &compiled, const std::vector<int32_t> &tokens,
                      int32_t pad) {
  std::vector<float> logits = forwardLogits(compiled, tokens, pad);
  if (logits.empty())
    return -1;
  auto row =
      std::span<const float>(logits).subspan((tokens.size() - 1) * 16, 16);
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) -
                              row.begin());
}

/// Sampling through `model` twice with one seed gives the same tokens.
void expectASeedFixesTheSample(LanguageModel &model,
                               const std::vector<int32_t> &prompt) {
  SamplingOptions sampled;
  sampled.seed = 11;
  llvm::Expected<std::vector<int32_t>> first =
      generate(model, prompt, 10, sampled);
  llvm::Expected<std::vector<int32_t>> second =
      generate(model, prompt, 10, sampled);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*first, *second);
}

TEST(GenerationTest, GreedyGenerationIsTheForwardArgmaxStepByStep) {
  Compiled compiled = compileModel(kModel);
  ASSERT_TRUE(compiled.program);
  llvm::Expected<LanguageModel> model = LanguageModel::bind(
      *compiled.program, compiled.program->functions().front(),
      compiled.params);
  ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
  EXPECT_EQ(model->context, 8);
  EXPECT_EQ(model->vocab, 16);
  SamplingOptions greedy;
  greedy.temperature = 0;
  std::vector<int32_t> prompt = {3, 9, 1};
  std::vector<int32_t> emitted;
  llvm::Expected<std::vector<int32_t>> generated = generate(
      *model, prompt, 12, greedy, [&](int32_t t) { emitted.push_back(t); });
  ASSERT_TRUE(static_cast<bool>(generated))
      << llvm::toString(generated.takeError());
  EXPECT_EQ(*generated, emitted);
  ASSERT_EQ(generated->size(), 12u);
  std::vector<int32_t> text = prompt;
  for (int32_t token : *generated) {
    std::vector<int32_t> window(text.end() - std::min<size_t>(text.size(), 8),
                                text.end());
    EXPECT_EQ(token, forwardArgmax(compiled, window, /*pad=*/15))
        << "after " << text.size() << " tokens";
    text.push_back(token);
  }
  expectASeedFixesTheSample(*model, prompt);
}

TEST(GenerationTest, BadPromptsGiveClearErrors) {
  Compiled compiled = compileModel(kModel);
  ASSERT_TRUE(compiled.program);
  llvm::Expected<LanguageModel> model = LanguageModel::bind(
      *compiled.program, compiled.program->functions().front(),
      compiled.params);
  ASSERT_TRUE(static_cast<bool>(model));
  auto message = [&](std::vector<int32_t> prompt) {
    llvm::Expected<std::vector<int32_t>> result =
        generate(*model, prompt, 1, SamplingOptions());
    return result ? std::string() : llvm::toString(result.takeError());
  };
  EXPECT_NE(message(std::vector<int32_t>(9, 1)).find("context is 8"),
            std::string::npos);
  EXPECT_NE(message({1, 16}).find("outside the vocabulary [0, 16)"),
            std::string::npos);
  EXPECT_NE(message({}).find("empty"), std::string::npos);
}

/// Every kind of block a decoding step has: dense attention without
/// positions, SwitchHead with rotary positions, the dense and σ-MoE
/// feed-forward blocks.
constexpr const char *kDecodedModel = R"mlir(
  lm.model @d(%t: tensor<?x8xi32>) -> tensor<?x8x16xf32> {
    %x0 = lm.embed "embed" %t {vocab = 16} : tensor<?x8xi32> -> tensor<?x8x12xf32>
    %a0 = lm.mha "layers.0.att" %x0 {heads = 3, head_dim = 4, pos = #lm.pos<none>} : tensor<?x8x12xf32>
    %x1 = lm.sigma_moe "layers.0.ffn" %a0 {experts = 4, k = 2, expert_dim = 6} : tensor<?x8x12xf32>
    %a1 = lm.switchhead "layers.1.att" %x1 {heads = 2, experts = 3, k = 2, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x8x12xf32>
    %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 24} : tensor<?x8x12xf32>
    %h = lm.layer_norm "norm" %x2 : tensor<?x8x12xf32>
    %l = lm.output "out" %h {vocab = 16} : tensor<?x8x12xf32> -> tensor<?x8x16xf32>
    lm.return %l : tensor<?x8x16xf32>
  })mlir";

TEST(GenerationTest, TheKeyValueCacheGivesTheForwardLogitsAtEveryPosition) {
  // Decoding 8 tokens one by one into the caches gives, at every position,
  // the logits of the forward function on the whole window (an independent
  // computation: all positions at once, no cache) to 1e-5, f32 sums in
  // another order.
  for (const char *source : {kModel, kDecodedModel}) {
    Compiled compiled = compileModel(source, /*decoder=*/true);
    ASSERT_TRUE(compiled.program);
    const FunctionSpec &function = compiled.program->functions().front();
    const FunctionSpec *decoder =
        compiled.program->lookup(function.name + "_decode");
    ASSERT_TRUE(decoder);
    EXPECT_EQ(decoder->decoderOf, function.name);
    llvm::Expected<LanguageModel> model =
        LanguageModel::bind(*compiled.program, function, compiled.params);
    ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
    ASSERT_TRUE(model->hasDecoder());
    std::vector<int32_t> tokens = {3, 9, 1, 14, 7, 2, 11, 5};
    std::vector<float> expected = forwardLogits(compiled, tokens, 0);
    ASSERT_EQ(expected.size(), 8u * 16u);
    for (size_t t = 0; t < tokens.size(); ++t) {
      llvm::Expected<std::vector<float>> logits = model->decode(tokens[t]);
      ASSERT_TRUE(static_cast<bool>(logits))
          << llvm::toString(logits.takeError());
      ASSERT_EQ(logits->size(), 16u);
      for (size_t v = 0; v < 16; ++v)
        EXPECT_NEAR((*logits)[v], expected[t * 16 + v], 1e-5)
            << function.name << ": position " << t << ", token " << v;
    }
    // The caches are full: a ninth token is refused.
    llvm::Expected<std::vector<float>> ninth = model->decode(1);
    ASSERT_FALSE(static_cast<bool>(ninth));
    EXPECT_NE(llvm::toString(ninth.takeError()).find("full"),
              std::string::npos);
  }
}

TEST(GenerationTest, CachedGenerationEqualsRecomputingTheWindow) {
  // Greedy generation within the context gives the same tokens with the
  // caches as with the forward function on the whole prefix each step;
  // past it, each token is the argmax of the window the caches were
  // rebuilt from: the last 4 tokens when 8 fill them, and those after.
  Compiled compiled = compileModel(kDecodedModel, /*decoder=*/true);
  ASSERT_TRUE(compiled.program);
  const FunctionSpec &function = compiled.program->functions().front();
  llvm::Expected<LanguageModel> cached =
      LanguageModel::bind(*compiled.program, function, compiled.params);
  llvm::Expected<LanguageModel> recomputed = LanguageModel::bind(
      *compiled.program, function, compiled.params, /*useDecoder=*/false);
  ASSERT_TRUE(cached && recomputed);
  ASSERT_TRUE(cached->hasDecoder());
  ASSERT_FALSE(recomputed->hasDecoder());
  SamplingOptions greedy;
  greedy.temperature = 0;
  std::vector<int32_t> prompt = {3, 9, 1};
  llvm::Expected<std::vector<int32_t>> withCache =
      generate(*cached, prompt, 5, greedy);
  llvm::Expected<std::vector<int32_t>> without =
      generate(*recomputed, prompt, 5, greedy);
  ASSERT_TRUE(withCache && without);
  EXPECT_EQ(*withCache, *without);

  llvm::Expected<std::vector<int32_t>> longer =
      generate(*cached, prompt, 14, greedy);
  ASSERT_TRUE(static_cast<bool>(longer)) << llvm::toString(longer.takeError());
  std::vector<int32_t> text = prompt;
  size_t start = 0;
  for (int32_t token : *longer) {
    if (text.size() - start > 8)
      start = text.size() - 4;
    std::vector<int32_t> window(text.begin() + start, text.end());
    EXPECT_EQ(token, forwardArgmax(compiled, window, /*pad=*/15))
        << "after " << text.size() << " tokens";
    text.push_back(token);
  }
  expectASeedFixesTheSample(*cached, prompt);
}

/// A Transformer-XL model: context 4, one memory of the block input.
constexpr const char *kXlModel = R"mlir(
  lm.model @xl(%t: tensor<?x4xi32>, %m0: tensor<?x4x8xf32>) -> (tensor<?x4x16xf32>, tensor<?x4x8xf32>) {
    %x0 = lm.embed "embed" %t {vocab = 16} : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : tensor<?x4x8xf32>) {heads = 2, experts = 2, k = 1, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x8xf32>
    %l = lm.output "out" %a0 {vocab = 16} : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
    lm.return %l, %x0 : tensor<?x4x16xf32>, tensor<?x4x8xf32>
  })mlir";

TEST(GenerationTest, AnXlModelCarriesItsMemoryFromSegmentToSegment) {
  // Greedy generation runs partial segments padded with zeros; the check
  // runs the finished text's segments one after another (the last padded
  // with another token), each with the block inputs of the one before as
  // its memory (zeros first), and every generated token must be the argmax
  // at the position before it.
  // A prompt of 6 tokens (one full segment of 4 and 2 more) and 9
  // generated tokens cross three segment boundaries.
  Compiled compiled = compileModel(kXlModel);
  ASSERT_TRUE(compiled.program);
  const FunctionSpec &function = compiled.program->functions().front();
  llvm::Expected<LanguageModel> model =
      LanguageModel::bind(*compiled.program, function, compiled.params);
  ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
  ASSERT_TRUE(model->hasMemories());
  SamplingOptions greedy;
  greedy.temperature = 0;
  std::vector<int32_t> prompt = {3, 9, 1, 14, 7, 2};
  llvm::Expected<std::vector<int32_t>> generated =
      generate(*model, prompt, 9, greedy);
  ASSERT_TRUE(static_cast<bool>(generated))
      << llvm::toString(generated.takeError());
  std::vector<int32_t> text = prompt;
  text.insert(text.end(), generated->begin(), generated->end());
  HostTensor memory = HostTensor::fromValues<float>(
      "m", ElementType::f32, {1, 4, 8}, std::vector<float>(32, 0.0f));
  for (size_t start = 0; start < text.size(); start += 4) {
    // The last segment is partial: padded with 15, where generation pads
    // with 0.
    std::vector<int32_t> window(4, 15);
    std::copy(text.begin() + start,
              text.begin() + std::min(start + 4, text.size()), window.begin());
    HostTensor input =
        HostTensor::fromValues<int32_t>("t", ElementType::i32, {1, 4}, window);
    llvm::Expected<std::vector<HostTensor>> results =
        callForward(compiled, {&input, &memory});
    ASSERT_TRUE(static_cast<bool>(results))
        << llvm::toString(results.takeError());
    std::span<const float> logits = (*results)[0].values<float>();
    for (size_t position = 0; position < 4; ++position) {
      size_t next = start + position + 1;
      if (next < prompt.size() || next >= text.size())
        continue;
      std::span<const float> row = logits.subspan(position * 16, 16);
      int32_t argmax = static_cast<int32_t>(
          std::max_element(row.begin(), row.end()) - row.begin());
      EXPECT_EQ(text[next], argmax) << "token " << next;
    }
    memory = std::move((*results)[1]);
  }
}

} // namespace
