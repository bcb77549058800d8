//===- FusionTest.cpp - fused and unfused routes compute the same ---------===//
//
// Each fusion (runtime::CompileOptions::fusion, the pipelines' `fuse`
// option) can be switched off; this test
// compiles the same models with the fusions on and off and compares the
// forward outputs, the loss and every parameter gradient of SwitchHead and
// SwitchAll models, with expert dropout (masks) in training mode. The fused
// router is also compared with the independent C++ reference
// (lib/Reference): values and indices exactly, with and without masks,
// k = 1 and k = E.
//
// Tolerance: |fused - unfused| <= 1e-5 + 1e-5 · |unfused| per element, for
// every float result; integer results (none in these functions) and top-k
// selections must match exactly. The kernels accumulate in the same order
// as the unfused lowering, so in practice the two agree to a few ulps.
//
//===----------------------------------------------------------------------===//

#include "runtime/Engine/CpuProgram.h"
#include "lib/Reference/Reference.h"
#include "test/unit/TestSupport.h"

#include "llvm/Support/FormatVariadic.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace switchyard;
namespace ref = switchyard::reference;
namespace rt = switchyard::runtime;
using llvm::formatv;
using switchyard::test::callOrFail;
using switchyard::test::indices;
using switchyard::test::randomTensor;

namespace {

constexpr double kAbsolute = 1e-5, kRelative = 1e-5;

rt::HostTensor seedTensor(int64_t seed) {
  return rt::HostTensor::fromValues<int64_t>("seed", rt::ElementType::i64, {},
                                             {seed});
}

std::unique_ptr<rt::CpuProgram> compile(const std::string &source, bool fused,
                                        bool onlyExpertProjection = false) {
  rt::CompileOptions options;
  options.gradients = true;
  mlir::switchyard::FusionOptions fusion =
      mlir::switchyard::FusionOptions::all(/*groupedExperts=*/false);
  fusion.router = fused && !onlyExpertProjection;
  fusion.expertProjection = fused;
  if (onlyExpertProjection)
    fusion.attention = false;
  options.fusion = fusion;
  llvm::Expected<std::unique_ptr<rt::CpuProgram>> program =
      rt::CpuProgram::compile(source, "fusion-test.mlir", options);
  if (!program) {
    ADD_FAILURE() << llvm::toString(program.takeError());
    return nullptr;
  }
  return std::move(*program);
}

/// Calls `name` of `program`: parameters bind by name (initialised with
/// seed 5), the other arguments from `data` in order.
std::vector<rt::HostTensor> run(rt::CpuProgram &program,
                                const std::string &name,
                                const std::vector<rt::HostTensor> &data) {
  const rt::FunctionSpec *function = program.lookup(name);
  EXPECT_TRUE(function) << "no @" << name;
  if (!function)
    return {};
  std::vector<rt::HostTensor> arguments;
  size_t next = 0;
  for (const rt::TensorSpec &spec : function->arguments) {
    if (spec.param.empty()) {
      EXPECT_LT(next, data.size());
      if (next >= data.size())
        return {};
      arguments.push_back(data[next++]);
      continue;
    }
    const rt::ParamSpec *declared = program.params().find(spec.param);
    EXPECT_TRUE(declared) << spec.param;
    if (!declared)
      return {};
    std::vector<float> values(size_t(declared->numElements()));
    rt::initialize(*declared, /*seed=*/5, values);
    arguments.push_back(rt::HostTensor::fromValues<float>(
        spec.param, rt::ElementType::f32, spec.shape, values));
  }
  return callOrFail(program, name, arguments);
}

/// Element-wise comparison of every result of `name` between the fused and
/// the unfused program; returns the number of float elements compared.
size_t expectSameResults(rt::CpuProgram &fused, rt::CpuProgram &unfused,
                         const std::string &name,
                         const std::vector<rt::HostTensor> &data) {
  std::vector<rt::HostTensor> a = run(fused, name, data);
  std::vector<rt::HostTensor> b = run(unfused, name, data);
  EXPECT_EQ(a.size(), b.size()) << name;
  const rt::FunctionSpec *spec = fused.lookup(name);
  size_t compared = 0;
  for (size_t r = 0; r < std::min(a.size(), b.size()); ++r) {
    std::string what =
        formatv("@{0} result #{1} ({2})", name, r,
                spec && r < spec->results.size() ? spec->results[r].param
                                                 : std::string())
            .str();
    EXPECT_EQ(a[r].shape, b[r].shape) << what;
    EXPECT_EQ(a[r].type, b[r].type) << what;
    if (a[r].shape != b[r].shape || a[r].type != b[r].type)
      continue;
    if (a[r].type != rt::ElementType::f32) {
      EXPECT_EQ(a[r].bytes, b[r].bytes) << what;
      continue;
    }
    std::span<const float> x = a[r].values<float>(), y = b[r].values<float>();
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_TRUE(std::isfinite(x[i])) << what << " element " << i;
      EXPECT_NEAR(x[i], y[i], kAbsolute + kRelative * std::abs(y[i]))
          << what << " element " << i;
    }
    compared += x.size();
  }
  return compared;
}

/// Compiles `model` both ways and compares `@m` and `@m_grad`; with
/// `onlyExpertProjection`, the fused program has moe-fuse-expert-projection
/// as its only fusion and the unfused one none.
void checkModel(const std::string &model,
                const std::vector<rt::HostTensor> &forwardData,
                const std::vector<rt::HostTensor> &gradData,
                bool onlyExpertProjection = false) {
  std::unique_ptr<rt::CpuProgram> fused =
      compile(model, true, onlyExpertProjection);
  std::unique_ptr<rt::CpuProgram> unfused =
      compile(model, false, onlyExpertProjection);
  ASSERT_TRUE(fused && unfused);
  EXPECT_GT(expectSameResults(*fused, *unfused, "m", forwardData), 0u);
  // The loss, every parameter gradient, then the forward outputs.
  const rt::FunctionSpec *grad = fused->lookup("m_grad");
  ASSERT_TRUE(grad);
  size_t params = 0;
  for (const rt::TensorSpec &spec : grad->arguments)
    params += !spec.param.empty();
  EXPECT_GE(grad->results.size(), params + 1);
  EXPECT_GT(expectSameResults(*fused, *unfused, "m_grad", gradData), 0u);
}

TEST(FusionTest, SwitchHeadModelFusedAndUnfused) {
  // Two heads of three experts with k = 2 (RoPE), and one of k = E (XL with
  // memory): every route shape of the V and O projections.
  const char *model = R"mlir(
    lm.model @m(%t: tensor<?x5xi32>, %mem: tensor<?x5x12xf32>) -> tensor<?x5x11xf32> {
      %x0 = lm.embed "embed" %t {vocab = 11} : tensor<?x5xi32> -> tensor<?x5x12xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x5x12xf32>
      %a1 = lm.switchhead "layers.1.att" %a0 memory(%mem : tensor<?x5x12xf32>) {heads = 2, experts = 2, k = 2, head_dim = 6, pos = #lm.pos<xl>} : tensor<?x5x12xf32>
      %l = lm.output "out" %a1 {vocab = 11} : tensor<?x5x12xf32> -> tensor<?x5x11xf32>
      lm.return %l : tensor<?x5x11xf32>
    })mlir";
  std::mt19937 generator(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> memory(3 * 5 * 12);
  for (float &v : memory)
    v = uniform(generator);
  rt::HostTensor mem = rt::HostTensor::fromValues<float>(
      "", rt::ElementType::f32, {3, 5, 12}, memory);
  rt::HostTensor tokens = indices({3, 5}, 11, 1);
  checkModel(model, {tokens, mem}, {tokens, mem, indices({3, 5}, 11, 2)});
}

TEST(FusionTest, SwitchAllModelWithExpertDropoutFusedAndUnfused) {
  // Expert dropout on SwitchHead's two selections and on the sigma-MoE
  // router (masks drawn from the step seed), residual dropout, the routing
  // entropy regulariser (which reads the router logits separately).
  const char *model = R"mlir(
    lm.model @m(%t: tensor<?x4xi32>) -> tensor<?x4x11xf32> {
      %x0 = lm.embed "embed" %t {vocab = 11} : tensor<?x4xi32> -> tensor<?x4x12xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 4, k = 3, head_dim = 5, pos = #lm.pos<rope>, expert_dropout = 0.4, dropout = 0.1} : tensor<?x4x12xf32>
      %x1 = lm.sigma_moe "layers.0.ffn" %a0 {experts = 5, k = 2, expert_dim = 3, expert_dropout = 0.4, entropy_reg = 0.01} : tensor<?x4x12xf32>
      %l = lm.output "out" %x1 {vocab = 11} : tensor<?x4x12xf32> -> tensor<?x4x11xf32>
      lm.return %l : tensor<?x4x11xf32>
    })mlir";
  rt::HostTensor tokens = indices({3, 4}, 11, 7);
  for (int64_t seed : {int64_t(12345), int64_t(-9)})
    checkModel(model, {tokens},
               {tokens, indices({3, 4}, 11, 8), seedTensor(seed)});
}

TEST(FusionTest, ExpertProjectionFusionAloneFusedAndUnfused) {
  // Only moe-fuse-expert-projection differs between the two programs (router
  // and attention unfused in both), so every difference in the parameter
  // gradients of V and O (and, through them, of everything below) comes from
  // the fused projections and their fused gradient kernels
  // (moe.fused_expert_proj_grad, moe.fused_expert_merge_grad). Head width 5
  // and model width 12 are not multiples of the kernels' chunks of 64; k = 1
  // in one layer, k = E in the other.
  const char *model = R"mlir(
    lm.model @m(%t: tensor<?x5xi32>) -> tensor<?x5x11xf32> {
      %x0 = lm.embed "embed" %t {vocab = 11} : tensor<?x5xi32> -> tensor<?x5x12xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 3, k = 1, head_dim = 5, pos = #lm.pos<rope>} : tensor<?x5x12xf32>
      %a1 = lm.switchhead "layers.1.att" %a0 {heads = 3, experts = 2, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x5x12xf32>
      %l = lm.output "out" %a1 {vocab = 11} : tensor<?x5x12xf32> -> tensor<?x5x11xf32>
      lm.return %l : tensor<?x5x11xf32>
    })mlir";
  rt::HostTensor tokens = indices({3, 5}, 11, 4);
  checkModel(model, {tokens}, {tokens, indices({3, 5}, 11, 5)},
             /*onlyExpertProjection=*/true);
}

/// The fused router (gate and top-k compiled together, fusions on) against
/// the reference gate and top-k: values and indices exactly.
void checkFusedRouter(int64_t tokens, int64_t heads, int64_t experts,
                      int64_t k, const std::vector<bool> *mask,
                      unsigned seed) {
  std::string scores = formatv("{0}x{1}x{2}", tokens, heads, experts);
  std::string slots = formatv("{0}x{1}x{2}", tokens, heads, k);
  std::string source =
      formatv(R"mlir(
    func.func @route(%x: tensor<{0}x9xf32>, %w: tensor<{1}x9xf32>{5}) -> (tensor<{3}xf32>, tensor<{3}xi64>) {{
      %s = moe.gate %x, %w : tensor<{0}x9xf32>, tensor<{1}x9xf32> -> tensor<{2}xf32>
      %v, %i = moe.topk %s k({4}){6} : tensor<{2}xf32>{7} -> tensor<{3}xf32>, tensor<{3}xi64>
      return %v, %i : tensor<{3}xf32>, tensor<{3}xi64>
    })mlir",
              tokens, heads * experts, scores, slots, k,
              mask ? formatv(", %m: tensor<{0}xi1>", scores).str() : "",
              mask ? " mask(%m)" : "",
              mask ? formatv(", tensor<{0}xi1>", scores).str() : "")
          .str();
  // The router fused whatever the target's default (the CPU's leaves it
  // unfused): its logits one matmul, then sigmoid and top-k in a row kernel.
  rt::CompileOptions options;
  options.fusion = mlir::switchyard::FusionOptions::all();
  llvm::Expected<std::unique_ptr<rt::CpuProgram>> program =
      rt::CpuProgram::compile(source, "router.mlir", options);
  ASSERT_TRUE(static_cast<bool>(program)) << llvm::toString(program.takeError());
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  ref::Tensor x({tokens, 9}), w({heads * experts, 9});
  for (float &v : x.data)
    v = uniform(generator);
  for (float &v : w.data)
    v = uniform(generator);
  std::vector<rt::HostTensor> args = {
      rt::HostTensor::fromValues<float>("", rt::ElementType::f32, x.shape,
                                        x.data),
      rt::HostTensor::fromValues<float>("", rt::ElementType::f32, w.shape,
                                        w.data)};
  if (mask) {
    std::vector<uint8_t> bytes(mask->begin(), mask->end());
    args.push_back(rt::HostTensor::fromValues<uint8_t>(
        "", rt::ElementType::bool_, {tokens, heads, experts}, bytes));
  }
  std::vector<rt::HostTensor> results = callOrFail(**program, "route", args);
  ASSERT_EQ(results.size(), 2u);
  ref::Tensor values;
  ref::IndexTensor chosen;
  ref::topk(ref::reshape(ref::gate(x, w), {tokens, heads, experts}), k, mask,
            values, chosen);
  std::span<const float> gotValues = results[0].values<float>();
  std::span<const int64_t> gotIndices = results[1].values<int64_t>();
  ASSERT_EQ(gotValues.size(), values.data.size());
  for (size_t i = 0; i < values.data.size(); ++i) {
    // The reference accumulates in double: the same expert, the same
    // score to f32 rounding.
    EXPECT_EQ(gotIndices[i], chosen.data[i]) << "slot " << i << ", k = " << k;
    EXPECT_NEAR(gotValues[i], values.data[i], 1e-6) << "slot " << i;
  }
}

TEST(FusionTest, GroupedExpertsAgainstDense) {
  // The unfused expert projections in their two formulations
  // (convert-moe-to-linalg grouped-experts, FusionOptions::groupedExperts):
  // routes sorted by expert, one matmul per expert, against dense over all
  // experts. SwitchHead with k < E and k = E, SwitchAll with expert dropout
  // (masked experts have no routes: empty blocks), the forward, the loss and
  // every gradient. Same tolerance as the fusions: the two sum the routes
  // in different orders.
  const char *model = R"mlir(
    lm.model @m(%t: tensor<?x5xi32>) -> tensor<?x5x11xf32> {
      %x0 = lm.embed "embed" %t {vocab = 11} : tensor<?x5xi32> -> tensor<?x5x12xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>, expert_dropout = 0.4} : tensor<?x5x12xf32>
      %a1 = lm.switchhead "layers.1.att" %a0 {heads = 3, experts = 2, k = 2, head_dim = 5, pos = #lm.pos<rope>} : tensor<?x5x12xf32>
      %x1 = lm.sigma_moe "layers.1.ffn" %a1 {experts = 5, k = 2, expert_dim = 3} : tensor<?x5x12xf32>
      %l = lm.output "out" %x1 {vocab = 11} : tensor<?x5x12xf32> -> tensor<?x5x11xf32>
      lm.return %l : tensor<?x5x11xf32>
    })mlir";
  rt::CompileOptions options;
  options.gradients = true;
  options.fusion =
      mlir::switchyard::FusionOptions::none(/*groupedExperts=*/false);
  auto dense = rt::CpuProgram::compile(model, "grouped-test.mlir", options);
  options.fusion->groupedExperts = true;
  auto grouped = rt::CpuProgram::compile(model, "grouped-test.mlir", options);
  ASSERT_TRUE(static_cast<bool>(dense)) << llvm::toString(dense.takeError());
  ASSERT_TRUE(static_cast<bool>(grouped))
      << llvm::toString(grouped.takeError());
  // The padded formulation (no host reads; the GPU's): tiles of 4 rows.
  options.groupedTileRows = 4;
  auto padded = rt::CpuProgram::compile(model, "grouped-test.mlir", options);
  ASSERT_TRUE(static_cast<bool>(padded)) << llvm::toString(padded.takeError());
  rt::HostTensor tokens = indices({4, 5}, 11, 21);
  for (rt::CpuProgram *program : {grouped->get(), padded->get()}) {
    EXPECT_GT(expectSameResults(*program, **dense, "m", {tokens}), 0u);
    for (int64_t seed : {int64_t(7), int64_t(-3)})
      EXPECT_GT(expectSameResults(
                    *program, **dense, "m_grad",
                    {tokens, indices({4, 5}, 11, 22), seedTensor(seed)}),
                0u);
  }
}

TEST(FusionTest, FusedRouterAgainstReference) {
  for (int64_t k : {1, 2, 5})
    checkFusedRouter(7, 2, 5, k, nullptr, 30 + unsigned(k));
  // Expert dropout, with one (token, head) where every expert is masked and
  // one where only one is unmasked (the rest fill in index order).
  std::vector<bool> mask(7 * 2 * 5);
  std::mt19937 generator(4);
  for (size_t i = 0; i < mask.size(); ++i)
    mask[i] = generator() % 3 == 0;
  for (int e = 0; e < 5; ++e) {
    mask[5 + e] = true;
    mask[10 + e] = e != 3;
  }
  for (int64_t k : {1, 3, 5})
    checkFusedRouter(7, 2, 5, k, &mask, 40 + unsigned(k));
}

} // namespace
