//===- GradientTest.cpp - finite-difference checks of the gradients -------===//
//
// Compiles functions and models with their loss-and-gradient functions
// (lm-differentiate, through runtime::CpuProgram with `gradients`) and
// compares every parameter's gradient with central finite differences of
// the compiled loss: for each op with a gradient rule and for every layer
// kind (embedding, layer norm, routers, top-k, the V and O expert
// projections, sigma-MoE, dense FFN, attention with RoPE and with
// Transformer-XL memory, cross-entropy).
//
// Tolerance: central differences with step h = 3e-3 on an f32 loss; a
// sample passes when |fd - analytic| <= 3e-4 + 2e-2·max(|fd|, |analytic|).
// Inputs are random but seeded, with the top-k scores and ReLU inputs far
// enough from their kinks for the step not to cross them.
//
//===----------------------------------------------------------------------===//

#include "runtime/Engine/CpuProgram.h"
#include "test/unit/TestSupport.h"

#include "llvm/Support/FormatVariadic.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace switchyard;
namespace rt = switchyard::runtime;
using llvm::formatv;
using switchyard::test::callOrFail;
using switchyard::test::indices;
using switchyard::test::randomTensor;

namespace {

constexpr double kStep = 3e-3, kAbsolute = 3e-4, kRelative = 2e-2;

/// Compiles `source` with gradients and checks every parameter gradient of
/// `<name>_grad` at up to `samples` elements per parameter. Parameters are
/// `params` by name when given (model parameters from their initialisers),
/// else uniform in [-scale, scale]; `data` binds the other arguments in
/// order (targets last for models).
void checkGradients(const std::string &source, const std::string &name,
                    std::vector<rt::HostTensor> data, unsigned seed,
                    float scale = 0.5f, int samples = 8) {
  rt::CompileOptions options;
  options.gradients = true;
  llvm::Expected<std::unique_ptr<rt::CpuProgram>> compiled =
      rt::CpuProgram::compile(source, "gradient-test.mlir", options);
  ASSERT_TRUE(static_cast<bool>(compiled))
      << llvm::toString(compiled.takeError());
  rt::CpuProgram &program = **compiled;
  const rt::FunctionSpec *grad = program.lookup(name + "_grad");
  ASSERT_TRUE(grad) << "no @" << name << "_grad";

  std::vector<rt::HostTensor> arguments;
  std::vector<size_t> paramArgs;
  size_t next = 0;
  for (auto [index, spec] : llvm::enumerate(grad->arguments)) {
    if (spec.param.empty()) {
      ASSERT_LT(next, data.size()) << "missing data argument #" << index;
      arguments.push_back(data[next++]);
      continue;
    }
    paramArgs.push_back(index);
    if (const rt::ParamSpec *declared = program.params().find(spec.param)) {
      std::vector<float> values(size_t(declared->numElements()));
      rt::initialize(*declared, seed, values);
      arguments.push_back(rt::HostTensor::fromValues<float>(
          spec.param, rt::ElementType::f32, spec.shape, values));
    } else {
      arguments.push_back(
          randomTensor(spec.shape, seed + unsigned(index), scale));
    }
  }
  ASSERT_EQ(next, data.size()) << "unused data arguments";

  auto evaluate = [&]() { return callOrFail(program, grad->name, arguments); };
  std::vector<rt::HostTensor> analytic = evaluate();
  // The loss, the gradients, then the forward function's other results.
  const rt::FunctionSpec *forward = program.lookup(name);
  ASSERT_TRUE(forward);
  ASSERT_EQ(analytic.size(), paramArgs.size() + forward->results.size());

  std::mt19937 generator(seed);
  for (auto [p, argIndex] : llvm::enumerate(paramArgs)) {
    const std::string &paramName = grad->arguments[argIndex].param;
    std::span<float> values = arguments[argIndex].values<float>();
    std::span<const float> gradient = analytic[p + 1].values<float>();
    ASSERT_EQ(values.size(), gradient.size()) << paramName;
    std::vector<size_t> chosen;
    if (values.size() <= size_t(samples)) {
      for (size_t i = 0; i < values.size(); ++i)
        chosen.push_back(i);
    } else {
      std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
      for (int s = 0; s < samples; ++s)
        chosen.push_back(pick(generator));
    }
    double largest = 0;
    for (float g : gradient)
      largest = std::max(largest, double(std::abs(g)));
    EXPECT_GT(largest, 0.0)
        << "the gradient of " << paramName << " is identically zero";
    for (size_t i : chosen) {
      float original = values[i];
      values[i] = original + float(kStep);
      double up = evaluate().at(0).values<float>()[0];
      values[i] = original - float(kStep);
      double down = evaluate().at(0).values<float>()[0];
      values[i] = original;
      double fd = (up - down) / (2 * kStep);
      double an = gradient[i];
      EXPECT_LE(std::abs(fd - an),
                kAbsolute + kRelative * std::max(std::abs(fd), std::abs(an)))
          << paramName << "[" << i << "]: finite difference " << fd
          << ", analytic " << an;
    }
  }
}

/// A function of `params` computing `body`, whose result `%out` of type
/// `outType` ([B, T, V]) is scored by cross-entropy against `%t`.
std::string lossFunction(const std::string &args, const std::string &body,
                         const std::string &logitsType,
                         const std::string &targetsType) {
  return formatv(R"mlir(
    func.func @f({0}, %t: {3}) -> tensor<f32> {{
      {1}
      %loss = moe.cross_entropy %logits, %t : {2}, {3} -> tensor<f32>
      return %loss : tensor<f32>
    })mlir",
                 args, body, logitsType, targetsType)
      .str();
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

TEST(GradientTest, Linear) {
  checkGradients(
      lossFunction(
          R"(%x: tensor<4x6xf32> {lm.param = "x"}, %w: tensor<5x6xf32> {lm.param = "w"})",
          R"(%y = moe.linear %x, %w {scale = 0.7} : tensor<4x6xf32>, tensor<5x6xf32> -> tensor<4x5xf32>
      %logits = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 4, 5] : tensor<4x5xf32> into tensor<1x4x5xf32>)",
          "tensor<1x4x5xf32>", "tensor<1x4xi32>"),
      "f", {indices({1, 4}, 5, 1)}, 10);
}

TEST(GradientTest, Relu) {
  checkGradients(lossFunction(R"(%x: tensor<4x5xf32> {lm.param = "x"})",
                              R"(%y = moe.relu %x : tensor<4x5xf32>
      %logits = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 4, 5] : tensor<4x5xf32> into tensor<1x4x5xf32>)",
                              "tensor<1x4x5xf32>", "tensor<1x4xi32>"),
                 "f", {indices({1, 4}, 5, 2)}, 20, 2.0f, 20);
}

TEST(GradientTest, LayerNorm) {
  checkGradients(
      lossFunction(
          R"(%x: tensor<2x3x6xf32> {lm.param = "x"}, %w: tensor<6xf32> {lm.param = "w"}, %b: tensor<6xf32> {lm.param = "b"})",
          R"(%logits = moe.layer_norm %x, %w, %b : tensor<2x3x6xf32>, tensor<6xf32>)",
          "tensor<2x3x6xf32>", "tensor<2x3xi32>"),
      "f", {indices({2, 3}, 6, 3)}, 30, 1.0f, 12);
}

TEST(GradientTest, Rope) {
  checkGradients(
      lossFunction(R"(%x: tensor<1x4x2x8xf32> {lm.param = "x"})",
                   R"(%y = moe.rope %x {offset = 2} : tensor<1x4x2x8xf32>
      %logits = tensor.collapse_shape %y [[0], [1], [2, 3]] : tensor<1x4x2x8xf32> into tensor<1x4x16xf32>)",
                   "tensor<1x4x16xf32>", "tensor<1x4xi32>"),
      "f", {indices({1, 4}, 16, 4)}, 40, 1.0f, 16);
}

TEST(GradientTest, EmbedAndConcat) {
  checkGradients(
      lossFunction(
          R"(%table: tensor<7x5xf32> {lm.param = "table"}, %tokens: tensor<1x3xi32>, %a: tensor<1x2x5xf32> {lm.param = "a"})",
          R"(%e = moe.embed %table, %tokens : tensor<7x5xf32>, tensor<1x3xi32> -> tensor<1x3x5xf32>
      %logits = moe.concat %a, %e : tensor<1x2x5xf32>, tensor<1x3x5xf32> -> tensor<1x5x5xf32>)",
          "tensor<1x5x5xf32>", "tensor<1x5xi32>"),
      "f", {indices({1, 3}, 7, 5), indices({1, 5}, 5, 6)}, 50, 1.0f, 35);
}

TEST(GradientTest, GateAndTopK) {
  // Router scores through top-3 of 6 experts, scored by the loss.
  checkGradients(
      lossFunction(
          R"(%x: tensor<6x5xf32> {lm.param = "x"}, %w: tensor<12x5xf32> {lm.param = "w"})",
          R"(%s = moe.gate %x, %w : tensor<6x5xf32>, tensor<12x5xf32> -> tensor<6x2x6xf32>
      %v, %i = moe.topk %s k(3) : tensor<6x2x6xf32> -> tensor<6x2x3xf32>, tensor<6x2x3xi32>
      %logits = tensor.expand_shape %v [[0], [1], [2]] output_shape [6, 2, 3] : tensor<6x2x3xf32> into tensor<6x2x3xf32>)",
          "tensor<6x2x3xf32>", "tensor<6x2xi32>"),
      "f", {indices({6, 2}, 3, 7)}, 60, 1.0f, 12);
}

TEST(GradientTest, ExpertProjections) {
  // V: x through 2 heads × 3 experts (k = 2); O: back to width 6.
  checkGradients(
      lossFunction(
          R"(%x: tensor<5x6xf32> {lm.param = "x"}, %wv: tensor<6x6x4xf32> {lm.param = "wv"}, %gv: tensor<5x2x2xf32> {lm.param = "gv"}, %iv: tensor<5x2x2xi32>, %wo: tensor<6x4x6xf32> {lm.param = "wo"}, %go: tensor<5x2x2xf32> {lm.param = "go"}, %io: tensor<5x2x2xi32>)",
          R"(%h = moe.expert_proj %x, %wv, %gv, %iv : tensor<5x6xf32>, tensor<6x6x4xf32>, tensor<5x2x2xf32>, tensor<5x2x2xi32> -> tensor<5x2x4xf32>
      %y = moe.expert_merge %h, %wo, %go, %io : tensor<5x2x4xf32>, tensor<6x4x6xf32>, tensor<5x2x2xf32>, tensor<5x2x2xi32> -> tensor<5x6xf32>
      %logits = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 5, 6] : tensor<5x6xf32> into tensor<1x5x6xf32>)",
          "tensor<1x5x6xf32>", "tensor<1x5xi32>"),
      "f",
      {indices({5, 2, 2}, 3, 8), indices({5, 2, 2}, 3, 9),
       indices({1, 5}, 6, 10)},
      70);
}

TEST(GradientTest, ExpertMlp) {
  checkGradients(
      lossFunction(
          R"(%x: tensor<5x6xf32> {lm.param = "x"}, %up: tensor<4x6x3xf32> {lm.param = "up"}, %down: tensor<4x3x6xf32> {lm.param = "down"}, %g: tensor<5x2xf32> {lm.param = "g"}, %i: tensor<5x2xi32>)",
          R"(%y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<5x6xf32>, tensor<4x6x3xf32>, tensor<4x3x6xf32>, tensor<5x2xf32>, tensor<5x2xi32> -> tensor<5x6xf32>
      %logits = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 5, 6] : tensor<5x6xf32> into tensor<1x5x6xf32>)",
          "tensor<1x5x6xf32>", "tensor<1x5xi32>"),
      "f", {indices({5, 2}, 4, 11), indices({1, 5}, 6, 12)}, 80, 1.0f);
}

TEST(GradientTest, AttentionWithRelativeKeys) {
  checkGradients(
      lossFunction(
          R"(%q: tensor<1x3x2x4xf32> {lm.param = "q"}, %k: tensor<1x5x2x4xf32> {lm.param = "k"}, %v: tensor<1x5x2x4xf32> {lm.param = "v"}, %r: tensor<5x2x4xf32> {lm.param = "rel"})",
          R"(%o = moe.attention %q, %k, %v rel(%r : tensor<5x2x4xf32>) : tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32> -> tensor<1x3x2x4xf32>
      %logits = tensor.collapse_shape %o [[0], [1], [2, 3]] : tensor<1x3x2x4xf32> into tensor<1x3x8xf32>)",
          "tensor<1x3x8xf32>", "tensor<1x3xi32>"),
      "f", {indices({1, 3}, 8, 13)}, 90, 1.0f, 12);
}

TEST(GradientTest, AttentionCausal) {
  checkGradients(
      lossFunction(
          R"(%q: tensor<2x4x2x3xf32> {lm.param = "q"}, %k: tensor<2x4x2x3xf32> {lm.param = "k"}, %v: tensor<2x4x2x3xf32> {lm.param = "v"})",
          R"(%o = moe.attention %q, %k, %v : tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32> -> tensor<2x4x2x3xf32>
      %logits = tensor.collapse_shape %o [[0], [1], [2, 3]] : tensor<2x4x2x3xf32> into tensor<2x4x6xf32>)",
          "tensor<2x4x6xf32>", "tensor<2x4xi32>"),
      "f", {indices({2, 4}, 6, 14)}, 100, 1.0f, 12);
}

TEST(GradientTest, RopeAtAPosition) {
  checkGradients(lossFunction(R"(%x: tensor<1x3x2x8xf32> {lm.param = "x"})",
                              R"(%s = arith.constant 5 : index
      %y = moe.rope %x at %s {offset = 1} : tensor<1x3x2x8xf32>
      %logits = tensor.collapse_shape %y [[0], [1], [2, 3]] : tensor<1x3x2x8xf32> into tensor<1x3x16xf32>)",
                              "tensor<1x3x16xf32>", "tensor<1x3xi32>"),
                 "f", {indices({1, 3}, 16, 16)}, 120, 1.0f, 16);
}

TEST(GradientTest, AttentionAtAPositionOfACache) {
  // Queries at keys 2 and 3 of 6 (a decoding step of two tokens): the keys
  // and values after them get no gradient.
  checkGradients(
      lossFunction(
          R"(%q: tensor<1x2x2x4xf32> {lm.param = "q"}, %k: tensor<1x6x2x4xf32> {lm.param = "k"}, %v: tensor<1x6x2x4xf32> {lm.param = "v"}, %r: tensor<6x2x4xf32> {lm.param = "rel"})",
          R"(%p = arith.constant 2 : index
      %o = moe.attention %q, %k, %v rel(%r : tensor<6x2x4xf32>) at %p : tensor<1x2x2x4xf32>, tensor<1x6x2x4xf32>, tensor<1x6x2x4xf32> -> tensor<1x2x2x4xf32>
      %logits = tensor.collapse_shape %o [[0], [1], [2, 3]] : tensor<1x2x2x4xf32> into tensor<1x2x8xf32>)",
          "tensor<1x2x8xf32>", "tensor<1x2xi32>"),
      "f", {indices({1, 2}, 8, 17)}, 130, 1.0f, 12);
}

TEST(GradientTest, CrossEntropy) {
  checkGradients(
      lossFunction(R"(%logits: tensor<2x3x5xf32> {lm.param = "logits"})", "",
                   "tensor<2x3x5xf32>", "tensor<2x3xi32>"),
      "f", {indices({2, 3}, 5, 15)}, 110, 2.0f, 30);
}

TEST(GradientTest, RoutingEntropy) {
  // The entropy itself is the loss; logits spread enough that P is not flat.
  checkGradients(R"mlir(
    func.func @f(%z: tensor<6x5xf32> {lm.param = "z"}) -> tensor<f32> {
      %h = moe.routing_entropy %z : tensor<6x5xf32> -> tensor<f32>
      return %h : tensor<f32>
    })mlir",
                 "f", {}, 60, 2.0f, 30);
}

TEST(GradientTest, DropoutWithAFixedSeed) {
  // With its seed fixed the mask is a constant, so the function is smooth:
  // dropout's rule must apply the same mask and 1/(1 - rate).
  checkGradients(
      R"mlir(
    func.func @f(%x: tensor<4x5xf32> {lm.param = "x"}, %t: tensor<1x4xi32>, %s: tensor<i64>) -> tensor<f32> {
      %m = moe.dropout_mask %x seed(%s) {rate = 0.4 : f64, stream = 2 : i64} : tensor<4x5xf32>, tensor<i64> -> tensor<4x5xi1>
      %y = moe.dropout %x, %m {rate = 0.4 : f64} : tensor<4x5xf32>, tensor<4x5xi1>
      %logits = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 4, 5] : tensor<4x5xf32> into tensor<1x4x5xf32>
      %loss = moe.cross_entropy %logits, %t : tensor<1x4x5xf32>, tensor<1x4xi32> -> tensor<f32>
      return %loss : tensor<f32>
    })mlir",
      "f",
      {indices({1, 4}, 5, 61),
       rt::HostTensor::fromValues<int64_t>("seed", rt::ElementType::i64, {},
                                           {12345})},
      62, 2.0f, 20);
}

TEST(GradientTest, AddLossAddsTheWeightedAuxiliaryGradient) {
  // d(loss with add_loss)/dp = d(loss)/dp + weight · d(aux)/dp, where the
  // three functions share their parameters.
  const char *source = R"mlir(
    func.func @plain(%x: tensor<4x6xf32> {lm.param = "x"}, %w: tensor<5x6xf32> {lm.param = "w"}, %s: tensor<3x6xf32> {lm.param = "s"}, %t: tensor<1x4xi32>) -> tensor<f32> {
      %y = moe.linear %x, %w : tensor<4x6xf32>, tensor<5x6xf32> -> tensor<4x5xf32>
      %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 4, 5] : tensor<4x5xf32> into tensor<1x4x5xf32>
      %loss = moe.cross_entropy %l, %t : tensor<1x4x5xf32>, tensor<1x4xi32> -> tensor<f32>
      return %loss : tensor<f32>
    }
    func.func @aux(%x: tensor<4x6xf32> {lm.param = "x"}, %w: tensor<5x6xf32> {lm.param = "w"}, %s: tensor<3x6xf32> {lm.param = "s"}, %t: tensor<1x4xi32>) -> tensor<f32> {
      %z = moe.linear %x, %s : tensor<4x6xf32>, tensor<3x6xf32> -> tensor<4x3xf32>
      %h = moe.routing_entropy %z : tensor<4x3xf32> -> tensor<f32>
      return %h : tensor<f32>
    }
    func.func @both(%x: tensor<4x6xf32> {lm.param = "x"}, %w: tensor<5x6xf32> {lm.param = "w"}, %s: tensor<3x6xf32> {lm.param = "s"}, %t: tensor<1x4xi32>) -> tensor<f32> {
      %z = moe.linear %x, %s : tensor<4x6xf32>, tensor<3x6xf32> -> tensor<4x3xf32>
      %h = moe.routing_entropy %z : tensor<4x3xf32> -> tensor<f32>
      %y0 = moe.linear %x, %w : tensor<4x6xf32>, tensor<5x6xf32> -> tensor<4x5xf32>
      %y = moe.add_loss %y0, %h {weight = -0.3 : f64} : tensor<4x5xf32>, tensor<f32>
      %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 4, 5] : tensor<4x5xf32> into tensor<1x4x5xf32>
      %loss = moe.cross_entropy %l, %t : tensor<1x4x5xf32>, tensor<1x4xi32> -> tensor<f32>
      return %loss : tensor<f32>
    })mlir";
  rt::CompileOptions options;
  options.gradients = true;
  llvm::Expected<std::unique_ptr<rt::CpuProgram>> compiled =
      rt::CpuProgram::compile(source, "add-loss.mlir", options);
  ASSERT_TRUE(static_cast<bool>(compiled))
      << llvm::toString(compiled.takeError());
  std::vector<rt::HostTensor> args = {
      randomTensor({4, 6}, 70, 1.0f), randomTensor({5, 6}, 71, 1.0f),
      randomTensor({3, 6}, 72, 1.0f), indices({1, 4}, 5, 73)};
  std::vector<rt::HostTensor> plain = callOrFail(**compiled, "plain_grad", args);
  std::vector<rt::HostTensor> aux = callOrFail(**compiled, "aux_grad", args);
  std::vector<rt::HostTensor> both = callOrFail(**compiled, "both_grad", args);
  ASSERT_EQ(both.size(), 4u);
  // The reported loss is the cross-entropy alone.
  EXPECT_FLOAT_EQ(both[0].values<float>()[0], plain[0].values<float>()[0]);
  double largestAux = 0;
  for (size_t p = 1; p < 4; ++p) {
    std::span<const float> b = both[p].values<float>();
    std::span<const float> expectPlain = plain[p].values<float>();
    std::span<const float> expectAux = aux[p].values<float>();
    for (size_t i = 0; i < b.size(); ++i) {
      double expected = expectPlain[i] - 0.3 * expectAux[i];
      largestAux = std::max(largestAux, std::abs(double(expectAux[i])));
      EXPECT_NEAR(b[i], expected, 1e-5 + 1e-4 * std::abs(expected))
          << "parameter #" << p << " element " << i;
    }
  }
  EXPECT_GT(largestAux, 1e-4) << "the auxiliary gradient vanished";
}

//===----------------------------------------------------------------------===//
// Layers, through models (loss against targets added by lm-differentiate)
//===----------------------------------------------------------------------===//

TEST(GradientTest, SwitchAllLayersWithXlMemory) {
  // Embedding, SwitchHead (XL, memory), sigma-MoE, dense attention (XL,
  // memory), dense FFN, final norm, output head. The data seeds give top-k
  // margins wider than the step (about one seed in four does not: a routing
  // choice flips within ±h and the difference quotient jumps).
  const char *model = R"mlir(
    lm.model @m(%t: tensor<?x4xi32>, %m0: tensor<?x4x12xf32>, %m1: tensor<?x4x12xf32>) -> (tensor<?x4x11xf32>, tensor<?x4x12xf32>) {
      %x0 = lm.embed "embed" %t {vocab = 11} : tensor<?x4xi32> -> tensor<?x4x12xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : tensor<?x4x12xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x12xf32>
      %x1 = lm.sigma_moe "layers.0.ffn" %a0 {experts = 4, k = 2, expert_dim = 5} : tensor<?x4x12xf32>
      %a1 = lm.mha "layers.1.att" %x1 memory(%m1 : tensor<?x4x12xf32>) {heads = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x12xf32>
      %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 7} : tensor<?x4x12xf32>
      %h = lm.layer_norm "norm" %x2 : tensor<?x4x12xf32>
      %l = lm.output "out" %h {vocab = 11} : tensor<?x4x12xf32> -> tensor<?x4x11xf32>
      lm.return %l, %x1 : tensor<?x4x11xf32>, tensor<?x4x12xf32>
    })mlir";
  checkGradients(model, "m",
                 {indices({2, 4}, 11, 216), randomTensor({2, 4, 12}, 217, 1.0f),
                  randomTensor({2, 4, 12}, 218, 1.0f), indices({2, 4}, 11, 219)},
                 120);
}

TEST(GradientTest, TrainingModeLayersWithDropout) {
  // Residual dropout on every block, expert dropout on SwitchHead's two
  // selections and the sigma-MoE's: for a fixed step seed, exact gradients.
  const char *model = R"mlir(
    lm.model @m(%t: tensor<?x4xi32>) -> tensor<?x4x11xf32> {
      %x0 = lm.embed "embed" %t {vocab = 11} : tensor<?x4xi32> -> tensor<?x4x12xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>, expert_dropout = 0.3, dropout = 0.2} : tensor<?x4x12xf32>
      %x1 = lm.sigma_moe "layers.0.ffn" %a0 {experts = 4, k = 2, expert_dim = 5, expert_dropout = 0.3, dropout = 0.2} : tensor<?x4x12xf32>
      %a1 = lm.mha "layers.1.att" %x1 {heads = 2, head_dim = 4, dropout = 0.2} : tensor<?x4x12xf32>
      %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 7, dropout = 0.2} : tensor<?x4x12xf32>
      %l = lm.output "out" %x2 {vocab = 11} : tensor<?x4x12xf32> -> tensor<?x4x11xf32>
      lm.return %l : tensor<?x4x11xf32>
    })mlir";
  checkGradients(
      model, "m",
      {indices({2, 4}, 11, 80), indices({2, 4}, 11, 81),
       rt::HostTensor::fromValues<int64_t>("seed", rt::ElementType::i64, {},
                                           {987654321})},
      140);
}

TEST(GradientTest, RopeLayers) {
  // SwitchHead with k = E and dense attention, both with RoPE.
  const char *model = R"mlir(
    lm.model @m(%t: tensor<?x5xi32>) -> tensor<?x5x9xf32> {
      %x0 = lm.embed "embed" %t {vocab = 9} : tensor<?x5xi32> -> tensor<?x5x8xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 2, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x5x8xf32>
      %a1 = lm.mha "layers.1.att" %a0 {heads = 1, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x5x8xf32>
      %l = lm.output "out" %a1 {vocab = 9} : tensor<?x5x8xf32> -> tensor<?x5x9xf32>
      lm.return %l : tensor<?x5x9xf32>
    })mlir";
  checkGradients(model, "m", {indices({2, 5}, 9, 20), indices({2, 5}, 9, 21)},
                 130);
}

} // namespace

//===----------------------------------------------------------------------===//
// The AdamW train step
//===----------------------------------------------------------------------===//

namespace {

const char *kTrainModel = R"mlir(
  lm.model @m(%t: tensor<?x4xi32>) -> tensor<?x4x11xf32> {
    %x0 = lm.embed "embed" %t {vocab = 11} : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %a0 = lm.switchhead "att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x4x8xf32>
    %x1 = lm.ffn "ffn" %a0 {d_ff = 6} : tensor<?x4x8xf32>
    %h = lm.layer_norm "norm" %x1 : tensor<?x4x8xf32>
    %l = lm.output "out" %h {vocab = 11} : tensor<?x4x8xf32> -> tensor<?x4x11xf32>
    lm.return %l : tensor<?x4x11xf32>
  })mlir";

} // namespace

TEST(GradientTest, TrainStepIsClippedAdamW) {
  rt::CompileOptions options;
  options.trainStep = true;
  llvm::Expected<std::unique_ptr<rt::CpuProgram>> compiled =
      rt::CpuProgram::compile(kTrainModel, "train.mlir", options);
  ASSERT_TRUE(static_cast<bool>(compiled))
      << llvm::toString(compiled.takeError());
  rt::CpuProgram &program = **compiled;
  const rt::ParamTable &table = program.params();
  size_t count = table.params.size();

  std::vector<rt::HostTensor> params, m, v;
  for (const rt::ParamSpec &spec : table.params) {
    std::vector<float> values(size_t(spec.numElements()));
    rt::initialize(spec, 5, values);
    params.push_back(rt::HostTensor::fromValues<float>(
        spec.name, rt::ElementType::f32, spec.shape, values));
    m.push_back(randomTensor(spec.shape, 6, 0.01f));
    std::vector<float> second(values.size());
    for (float &s : second)
      s = 1e-4f;
    v.push_back(rt::HostTensor::fromValues<float>("", rt::ElementType::f32,
                                                  spec.shape, second));
  }
  rt::HostTensor tokens = indices({2, 4}, 11, 7),
                 targets = indices({2, 4}, 11, 8);
  // lr, beta1, beta2, eps, weight decay, clip, 1 - beta1^t, 1 - beta2^t
  // (step t = 3); the clip is small enough to engage.
  const float beta1 = 0.9f, beta2 = 0.99f, t = 3;
  std::vector<float> hyperValues = {1e-2f,
                                    beta1,
                                    beta2,
                                    1e-8f,
                                    0.1f,
                                    0.5f,
                                    1 - std::pow(beta1, t),
                                    1 - std::pow(beta2, t)};
  rt::HostTensor hyper = rt::HostTensor::fromValues<float>(
      "", rt::ElementType::f32, {8}, hyperValues);

  std::vector<rt::HostTensor> gradArgs = {tokens};
  gradArgs.insert(gradArgs.end(), params.begin(), params.end());
  gradArgs.push_back(targets);
  std::vector<rt::HostTensor> grads = callOrFail(program, "m_grad", gradArgs);
  ASSERT_EQ(grads.size(), count + 1);

  std::vector<rt::HostTensor> stepArgs = gradArgs;
  stepArgs.insert(stepArgs.end(), m.begin(), m.end());
  stepArgs.insert(stepArgs.end(), v.begin(), v.end());
  stepArgs.push_back(hyper);
  std::vector<rt::HostTensor> out =
      callOrFail(program, "m_train_step", stepArgs);
  ASSERT_EQ(out.size(), 2 + 3 * count);
  EXPECT_EQ(out[0].values<float>()[0], grads[0].values<float>()[0]);

  // The reference AdamW step, in double, from the gradients of m_grad.
  double sumSquares = 0;
  for (size_t p = 0; p < count; ++p)
    for (float g : grads[p + 1].values<float>())
      sumSquares += double(g) * g;
  double norm = std::sqrt(sumSquares);
  EXPECT_NEAR(out[1].values<float>()[0], norm, 1e-5 * norm);
  double factor = std::min(1.0, 0.5 / norm);
  ASSERT_LT(factor, 1.0) << "the test expects clipping to engage";
  double worst = 0;
  for (size_t p = 0; p < count; ++p) {
    bool decays = table.params[p].shape.size() >= 2;
    std::span<const float> g = grads[p + 1].values<float>();
    std::span<const float> p0 = params[p].values<float>();
    std::span<const float> m0 = m[p].values<float>(), v0 = v[p].values<float>();
    std::span<const float> p1 = out[2 + p].values<float>();
    std::span<const float> m1 = out[2 + count + p].values<float>();
    std::span<const float> v1 = out[2 + 2 * count + p].values<float>();
    for (size_t i = 0; i < g.size(); ++i) {
      double gc = g[i] * factor;
      double mn = beta1 * double(m0[i]) + (1 - beta1) * gc;
      double vn = beta2 * double(v0[i]) + (1 - beta2) * gc * gc;
      double direction = (mn / hyperValues[6]) /
                         (std::sqrt(vn / hyperValues[7]) + hyperValues[3]);
      if (decays)
        direction += hyperValues[4] * p0[i];
      double pn = p0[i] - hyperValues[0] * direction;
      worst = std::max({worst, std::abs(m1[i] - mn) / (std::abs(mn) + 1e-6),
                        std::abs(v1[i] - vn) / (std::abs(vn) + 1e-9),
                        std::abs(p1[i] - pn) / (std::abs(pn) + 1e-6)});
    }
  }
  // f32 arithmetic against the double reference.
  EXPECT_LT(worst, 1e-4);
}

TEST(GradientTest, TrainStepsReduceTheLoss) {
  rt::CompileOptions options;
  options.trainStep = true;
  llvm::Expected<std::unique_ptr<rt::CpuProgram>> compiled =
      rt::CpuProgram::compile(kTrainModel, "train.mlir", options);
  ASSERT_TRUE(static_cast<bool>(compiled))
      << llvm::toString(compiled.takeError());
  rt::CpuProgram &program = **compiled;
  std::vector<rt::HostTensor> params, moments;
  for (const rt::ParamSpec &spec : program.params().params) {
    std::vector<float> values(size_t(spec.numElements()));
    rt::initialize(spec, 9, values);
    params.push_back(rt::HostTensor::fromValues<float>(
        spec.name, rt::ElementType::f32, spec.shape, values));
    moments.push_back(rt::HostTensor::fromValues<float>(
        "", rt::ElementType::f32, spec.shape,
        std::vector<float>(values.size(), 0.0f)));
  }
  std::vector<rt::HostTensor> m = moments, v = moments;
  rt::HostTensor tokens = indices({2, 4}, 11, 10),
                 targets = indices({2, 4}, 11, 11);
  float first = 0, last = 0;
  for (int step = 1; step <= 30; ++step) {
    std::vector<float> hyper = {3e-2f,
                                0.9f,
                                0.99f,
                                1e-8f,
                                0.0f,
                                1.0f,
                                1 - std::pow(0.9f, float(step)),
                                1 - std::pow(0.99f, float(step))};
    std::vector<rt::HostTensor> args = {tokens};
    args.insert(args.end(), params.begin(), params.end());
    args.push_back(targets);
    args.insert(args.end(), m.begin(), m.end());
    args.insert(args.end(), v.begin(), v.end());
    args.push_back(rt::HostTensor::fromValues<float>("", rt::ElementType::f32,
                                                     {8}, hyper));
    std::vector<rt::HostTensor> out = callOrFail(program, "m_train_step", args);
    ASSERT_EQ(out.size(), 2 + 3 * params.size());
    float loss = out[0].values<float>()[0];
    if (step == 1)
      first = loss;
    last = loss;
    size_t n = params.size();
    for (size_t p = 0; p < n; ++p) {
      params[p] = out[2 + p];
      m[p] = out[2 + n + p];
      v[p] = out[2 + 2 * n + p];
    }
  }
  // Memorising one batch of 8 tokens over 11 classes: from about ln 11.
  EXPECT_GT(first, 2.0f);
  EXPECT_LT(last, 0.5f * first) << "first " << first << ", last " << last;
}
