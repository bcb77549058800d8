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
// steps slide the window.
//
//===----------------------------------------------------------------------===//

#include "runtime/Generation.h"
#include "runtime/Engine/CpuProgram.h"
#include "runtime/ParamFiles.h"

#include "gtest/gtest.h"

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
  EXPECT_NE(llvm::toString(options.check()).find("--top-k"),
            std::string::npos);
  options = {};
  options.topP = 0;
  EXPECT_NE(llvm::toString(options.check()).find("--top-p"),
            std::string::npos);
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

Compiled compileModel(const char *source) {
  Compiled compiled;
  llvm::Expected<std::unique_ptr<CpuProgram>> program =
      CpuProgram::compile(source, "generation-test.mlir", CompileOptions());
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

/// The argmax of the forward function's logits after the last of `tokens`
/// (at most 8), the window padded with `pad`.
int32_t forwardArgmax(Compiled &compiled, const std::vector<int32_t> &tokens,
                      int32_t pad) {
  std::vector<int32_t> window(8, pad);
  std::copy(tokens.begin(), tokens.end(), window.begin());
  HostTensor input =
      HostTensor::fromValues<int32_t>("t", ElementType::i32, {1, 8}, window);
  const FunctionSpec &function = compiled.program->functions().front();
  std::vector<const HostTensor *> arguments;
  for (const TensorSpec &spec : function.arguments) {
    if (spec.param.empty()) {
      arguments.push_back(&input);
      continue;
    }
    for (const HostTensor &param : compiled.params)
      if (param.name == spec.param)
        arguments.push_back(&param);
  }
  llvm::Expected<std::vector<HostTensor>> results =
      compiled.program->call(function.name, arguments);
  if (!results) {
    ADD_FAILURE() << llvm::toString(results.takeError());
    return -1;
  }
  std::span<const float> logits = (*results)[0].values<float>();
  std::span<const float> row = logits.subspan((tokens.size() - 1) * 16, 16);
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) -
                              row.begin());
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
    std::vector<int32_t> window(
        text.end() - std::min<size_t>(text.size(), 8), text.end());
    EXPECT_EQ(token, forwardArgmax(compiled, window, /*pad=*/15))
        << "after " << text.size() << " tokens";
    text.push_back(token);
  }
  // A seed fixes sampling through the model too.
  SamplingOptions sampled;
  sampled.seed = 11;
  llvm::Expected<std::vector<int32_t>> first =
      generate(*model, prompt, 10, sampled);
  llvm::Expected<std::vector<int32_t>> second =
      generate(*model, prompt, 10, sampled);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*first, *second);
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

TEST(GenerationTest, AModelWithMemoriesIsRefusedByName) {
  Compiled compiled = compileModel(R"mlir(
    lm.model @xl(%t: tensor<?x4xi32>, %m0: tensor<?x4x8xf32>) -> (tensor<?x4x16xf32>, tensor<?x4x8xf32>) {
      %x0 = lm.embed "embed" %t {vocab = 16} : tensor<?x4xi32> -> tensor<?x4x8xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : tensor<?x4x8xf32>) {heads = 2, experts = 2, k = 1, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x8xf32>
      %l = lm.output "out" %a0 {vocab = 16} : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
      lm.return %l, %x0 : tensor<?x4x16xf32>, tensor<?x4x8xf32>
    })mlir");
  ASSERT_TRUE(compiled.program);
  llvm::Expected<LanguageModel> model = LanguageModel::bind(
      *compiled.program, compiled.program->functions().front(),
      compiled.params);
  ASSERT_FALSE(static_cast<bool>(model));
  EXPECT_NE(llvm::toString(model.takeError()).find("XL model's memories"),
            std::string::npos);
}

} // namespace
