//===- FuseAttentionTest.cpp - fused vs unfused attention -----------------===//
//
// moe-fuse-attention must not change what a program computes: each test
// compiles the same source twice, with CompileOptions::fusion.attention on
// (flash-attention row kernels) and off (the reference lowering that
// materialises the [B, H, T, S] weights), and compares every result of the
// forward function and of its loss-and-gradient function `<name>_grad`:
// causal attention, XL memory (more keys than queries) with relative keys,
// and a dense and a SwitchHead model's loss and all parameter gradients.
//
// Tolerance: |fused - unfused| <= 1e-5 + 1e-4·|unfused| per element (both
// accumulate in f32, in different orders: online vs two-pass softmax).
// Shapes are small and not multiples of anything (T = 3 or 5, S = 5 or 8,
// F = 3, 4 or 6, B = 2).
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
using switchyard::test::callOrFail;
using switchyard::test::indices;
using switchyard::test::randomTensor;

namespace {

constexpr double kAbsolute = 1e-5, kRelative = 1e-4;

std::unique_ptr<rt::CpuProgram> compile(const std::string &source,
                                        bool fuseAttention) {
  rt::CompileOptions options;
  options.gradients = true;
  mlir::switchyard::FusionOptions fusion =
      mlir::switchyard::FusionOptions::all(/*groupedExperts=*/false);
  fusion.attention = fuseAttention;
  options.fusion = fusion;
  llvm::Expected<std::unique_ptr<rt::CpuProgram>> compiled =
      rt::CpuProgram::compile(source, "fuse-attention-test.mlir", options);
  if (!compiled) {
    ADD_FAILURE() << llvm::toString(compiled.takeError());
    return nullptr;
  }
  return std::move(*compiled);
}

/// The arguments of `function`: parameters from their declared initialisers
/// (or uniform in [-scale, scale] for plain `lm.param` arguments), then
/// `data` in order for the others.
std::vector<rt::HostTensor>
bindArguments(rt::CpuProgram &program, const rt::FunctionSpec &function,
              const std::vector<rt::HostTensor> &data, unsigned seed,
              float scale) {
  std::vector<rt::HostTensor> arguments;
  size_t next = 0;
  for (auto [index, spec] : llvm::enumerate(function.arguments)) {
    if (spec.param.empty()) {
      EXPECT_LT(next, data.size()) << "missing data argument #" << index;
      if (next < data.size())
        arguments.push_back(data[next++]);
      continue;
    }
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
  EXPECT_EQ(next, data.size()) << "unused data arguments";
  return arguments;
}

/// A function to call and its data arguments.
struct Call {
  std::string function;
  std::vector<rt::HostTensor> data;
};

/// Compiles `source` fused and unfused and compares every f32 result of
/// each call.
void expectFusedMatchesUnfused(const std::string &source,
                               const std::vector<Call> &calls, unsigned seed,
                               float scale = 1.0f) {
  std::unique_ptr<rt::CpuProgram> fused = compile(source, true);
  std::unique_ptr<rt::CpuProgram> unfused = compile(source, false);
  ASSERT_TRUE(fused && unfused);
  for (const auto &[function, data] : calls) {
    const rt::FunctionSpec *spec = unfused->lookup(function);
    ASSERT_TRUE(spec) << "no @" << function;
    std::vector<rt::HostTensor> arguments =
        bindArguments(*unfused, *spec, data, seed, scale);
    std::vector<rt::HostTensor> expected =
        callOrFail(*unfused, function, arguments);
    std::vector<rt::HostTensor> actual =
        callOrFail(*fused, function, arguments);
    ASSERT_EQ(actual.size(), expected.size()) << function;
    ASSERT_FALSE(expected.empty()) << function;
    for (size_t r = 0; r < expected.size(); ++r) {
      if (expected[r].type != rt::ElementType::f32)
        continue;
      std::span<const float> want = expected[r].values<float>();
      std::span<const float> got = actual[r].values<float>();
      ASSERT_EQ(got.size(), want.size()) << function << " result #" << r;
      double largest = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        largest = std::max(largest, double(std::abs(want[i])));
        EXPECT_NEAR(got[i], want[i], kAbsolute + kRelative * std::abs(want[i]))
            << function << " result #" << r << " element " << i;
      }
      EXPECT_GT(largest, 0.0)
          << function << " result #" << r << " is identically zero";
    }
  }
}

/// `@attention` (the op alone, on data arguments) and `@f` (the op's output
/// as logits scored against `%t`, with q, k, v and rel as parameters, so
/// that lm-differentiate builds `@f_grad`).
std::string attentionFunctions(const std::string &dataArgs,
                               const std::string &paramArgs,
                               const std::string &attention,
                               const std::string &outType,
                               const std::string &logitsType,
                               const std::string &targetsType) {
  return llvm::formatv(R"mlir(
    func.func @attention({0}) -> {3} {{
      {2}
      return %o : {3}
    }
    func.func @f({1}, %t: {5}) -> tensor<f32> {{
      {2}
      %logits = tensor.collapse_shape %o [[0], [1], [2, 3]] : {3} into {4}
      %loss = moe.cross_entropy %logits, %t : {4}, {5} -> tensor<f32>
      return %loss : tensor<f32>
    })mlir",
                       dataArgs, paramArgs, attention, outType, logitsType,
                       targetsType)
      .str();
}

//===----------------------------------------------------------------------===//
// The op, fused and unfused
//===----------------------------------------------------------------------===//

TEST(FuseAttentionTest, Causal) {
  std::string source = attentionFunctions(
      "%q: tensor<2x5x2x3xf32>, %k: tensor<2x5x2x3xf32>, %v: "
      "tensor<2x5x2x3xf32>",
      R"(%q: tensor<2x5x2x3xf32> {lm.param = "q"}, %k: tensor<2x5x2x3xf32> {lm.param = "k"}, %v: tensor<2x5x2x3xf32> {lm.param = "v"})",
      "%o = moe.attention %q, %k, %v : tensor<2x5x2x3xf32>, "
      "tensor<2x5x2x3xf32>, tensor<2x5x2x3xf32> -> tensor<2x5x2x3xf32>",
      "tensor<2x5x2x3xf32>", "tensor<2x5x6xf32>", "tensor<2x5xi32>");
  expectFusedMatchesUnfused(source,
                            {{"attention",
                              {randomTensor({2, 5, 2, 3}, 1, 2.0f),
                               randomTensor({2, 5, 2, 3}, 2, 2.0f),
                               randomTensor({2, 5, 2, 3}, 3, 2.0f)}},
                             {"f", {indices({2, 5}, 6, 4)}},
                             {"f_grad", {indices({2, 5}, 6, 5)}}},
                            10, 1.5f);
}

TEST(FuseAttentionTest, XlMemoryWithRelativeKeys) {
  // T = 3 queries, S = 8 keys (5 of memory), relative keys per distance.
  std::string source = attentionFunctions(
      "%q: tensor<2x3x2x6xf32>, %k: tensor<2x8x2x6xf32>, %v: "
      "tensor<2x8x2x6xf32>, %r: tensor<8x2x6xf32>",
      R"(%q: tensor<2x3x2x6xf32> {lm.param = "q"}, %k: tensor<2x8x2x6xf32> {lm.param = "k"}, %v: tensor<2x8x2x6xf32> {lm.param = "v"}, %r: tensor<8x2x6xf32> {lm.param = "rel"})",
      "%o = moe.attention %q, %k, %v rel(%r : tensor<8x2x6xf32>) : "
      "tensor<2x3x2x6xf32>, tensor<2x8x2x6xf32>, tensor<2x8x2x6xf32> -> "
      "tensor<2x3x2x6xf32>",
      "tensor<2x3x2x6xf32>", "tensor<2x3x12xf32>", "tensor<2x3xi32>");
  expectFusedMatchesUnfused(source,
                            {{"attention",
                              {randomTensor({2, 3, 2, 6}, 6, 1.5f),
                               randomTensor({2, 8, 2, 6}, 7, 1.5f),
                               randomTensor({2, 8, 2, 6}, 8, 1.5f),
                               randomTensor({8, 2, 6}, 9, 1.5f)}},
                             {"f_grad", {indices({2, 3}, 12, 11)}}},
                            20, 1.5f);
}

TEST(FuseAttentionTest, GradientWithoutItsForward) {
  // No forward op of the gradient's operands in the function: the fused
  // gradient recomputes the output and logsumexp. XL memory (S = 6 > T = 4)
  // and one head of width 5.
  const char *source = R"mlir(
    func.func @g(%q: tensor<2x4x1x5xf32>, %k: tensor<2x6x1x5xf32>, %v: tensor<2x6x1x5xf32>, %r: tensor<6x1x5xf32>, %do: tensor<2x4x1x5xf32>) -> (tensor<2x4x1x5xf32>, tensor<2x6x1x5xf32>, tensor<2x6x1x5xf32>, tensor<6x1x5xf32>) {
      %dq, %dk, %dv, %dr = moe.attention_grad %q, %k, %v, %do rel(%r : tensor<6x1x5xf32>) : tensor<2x4x1x5xf32>, tensor<2x6x1x5xf32>, tensor<2x6x1x5xf32>, tensor<2x4x1x5xf32> -> tensor<2x4x1x5xf32>, tensor<2x6x1x5xf32>, tensor<2x6x1x5xf32>, tensor<6x1x5xf32>
      return %dq, %dk, %dv, %dr : tensor<2x4x1x5xf32>, tensor<2x6x1x5xf32>, tensor<2x6x1x5xf32>, tensor<6x1x5xf32>
    })mlir";
  expectFusedMatchesUnfused(source,
                            {{"g",
                              {randomTensor({2, 4, 1, 5}, 30, 1.5f),
                               randomTensor({2, 6, 1, 5}, 31, 1.5f),
                               randomTensor({2, 6, 1, 5}, 32, 1.5f),
                               randomTensor({6, 1, 5}, 33, 1.5f),
                               randomTensor({2, 4, 1, 5}, 34, 1.0f)}}},
                            35);
}

//===----------------------------------------------------------------------===//
// Models: loss and every parameter gradient
//===----------------------------------------------------------------------===//

TEST(FuseAttentionTest, DenseModelWithXlMemory) {
  const char *model = R"mlir(
    lm.model @m(%t: tensor<?x5xi32>, %m0: tensor<?x4x12xf32>) -> tensor<?x5x11xf32> {
      %x0 = lm.embed "embed" %t {vocab = 11} : tensor<?x5xi32> -> tensor<?x5x12xf32>
      %a0 = lm.mha "layers.0.att" %x0 memory(%m0 : tensor<?x4x12xf32>) {heads = 3, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x5x12xf32>
      %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 7} : tensor<?x5x12xf32>
      %a1 = lm.mha "layers.1.att" %x1 {heads = 2, head_dim = 6, pos = #lm.pos<rope>} : tensor<?x5x12xf32>
      %h = lm.layer_norm "norm" %a1 : tensor<?x5x12xf32>
      %l = lm.output "out" %h {vocab = 11} : tensor<?x5x12xf32> -> tensor<?x5x11xf32>
      lm.return %l : tensor<?x5x11xf32>
    })mlir";
  rt::HostTensor tokens = indices({2, 5}, 11, 40);
  rt::HostTensor memory = randomTensor({2, 4, 12}, 41, 1.0f);
  expectFusedMatchesUnfused(
      model,
      {{"m", {tokens, memory}},
       {"m_grad", {tokens, memory, indices({2, 5}, 11, 42)}}},
      43);
}

TEST(FuseAttentionTest, SwitchHeadModel) {
  const char *model = R"mlir(
    lm.model @m(%t: tensor<?x5xi32>, %m0: tensor<?x3x8xf32>) -> tensor<?x5x9xf32> {
      %x0 = lm.embed "embed" %t {vocab = 9} : tensor<?x5xi32> -> tensor<?x5x8xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : tensor<?x3x8xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x5x8xf32>
      %a1 = lm.switchhead "layers.1.att" %a0 {heads = 2, experts = 2, k = 1, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x5x8xf32>
      %l = lm.output "out" %a1 {vocab = 9} : tensor<?x5x8xf32> -> tensor<?x5x9xf32>
      lm.return %l : tensor<?x5x9xf32>
    })mlir";
  rt::HostTensor tokens = indices({2, 5}, 9, 50);
  rt::HostTensor memory = randomTensor({2, 3, 8}, 51, 1.0f);
  expectFusedMatchesUnfused(
      model,
      {{"m", {tokens, memory}},
       {"m_grad", {tokens, memory, indices({2, 5}, 9, 52)}}},
      53);
}

} // namespace
