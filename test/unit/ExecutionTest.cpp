//===- ExecutionTest.cpp - compiled CPU path against the reference --------===//
//
// Every moe op and every lm layer kind is compiled through the CPU target
// (runtime::CpuProgram: the same pipeline builders as switchyard-opt) and
// run on random data, then compared with the independent plain-C++
// reference of docs/Semantics.md (lib/Reference). Shapes are awkward on
// purpose: a single token, sizes that are multiples of nothing, k = 1 and
// k = E, every token routed to one expert, masked experts.
//
// Tolerance: the compiled code accumulates in f32, the reference in double.
// A comparison passes when max|compiled - reference| is at most 1e-5 times
// max|reference| (1e-5 relative to the tensor's scale); top-k values and
// indices must match exactly.
//
//===----------------------------------------------------------------------===//

#include "lib/Reference/Reference.h"
#include "runtime/Engine/CpuProgram.h"
#include "runtime/Engine/NativeCode.h"
#include "test/unit/TestSupport.h"

#include "llvm/Support/FormatVariadic.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <map>
#include <random>

using namespace switchyard;
namespace ref = switchyard::reference;
namespace rt = switchyard::runtime;
using llvm::formatv;

namespace {

constexpr double kTolerance = 1e-5;

rt::HostTensor toHost(const ref::Tensor &tensor) {
  return rt::HostTensor::fromValues<float>("", rt::ElementType::f32,
                                           tensor.shape, tensor.data);
}

rt::HostTensor toHost(const ref::IndexTensor &tensor, rt::ElementType type) {
  if (type == rt::ElementType::i64)
    return rt::HostTensor::fromValues<int64_t>("", type, tensor.shape,
                                               tensor.data);
  std::vector<int32_t> narrow(tensor.data.begin(), tensor.data.end());
  return rt::HostTensor::fromValues<int32_t>("", type, tensor.shape, narrow);
}

rt::HostTensor toHostMask(const std::vector<int64_t> &shape,
                          const std::vector<bool> &mask) {
  std::vector<uint8_t> bytes(mask.begin(), mask.end());
  return rt::HostTensor::fromValues<uint8_t>("", rt::ElementType::bool_, shape,
                                             bytes);
}

ref::Tensor toRef(const rt::HostTensor &tensor) {
  std::span<const float> values = tensor.values<float>();
  return ref::Tensor::fromData(tensor.shape, {values.begin(), values.end()});
}

ref::IndexTensor toRefIndex(const rt::HostTensor &tensor) {
  ref::IndexTensor result{tensor.shape, {}};
  if (tensor.type == rt::ElementType::i64)
    for (int64_t v : tensor.values<int64_t>())
      result.data.push_back(v);
  else
    for (int32_t v : tensor.values<int32_t>())
      result.data.push_back(v);
  return result;
}

ref::Tensor random(std::vector<int64_t> shape, unsigned seed,
                   float scale = 1.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  ref::Tensor tensor(shape);
  for (float &v : tensor.data)
    v = uniform(generator);
  return tensor;
}

ref::IndexTensor randomIndices(std::vector<int64_t> shape, int64_t bound,
                               unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int64_t> uniform(0, bound - 1);
  ref::IndexTensor tensor{shape, std::vector<int64_t>(ref::numElements(shape))};
  for (int64_t &v : tensor.data)
    v = uniform(generator);
  return tensor;
}

/// max|actual - expected| / max|expected|; shapes must agree.
double relativeError(const ref::Tensor &actual, const ref::Tensor &expected) {
  EXPECT_EQ(actual.shape, expected.shape);
  if (actual.shape != expected.shape)
    return INFINITY;
  double error = 0, scale = 1e-30;
  for (size_t i = 0; i < expected.data.size(); ++i) {
    error =
        std::max(error, std::abs(double(actual.data[i]) - expected.data[i]));
    scale = std::max(scale, std::abs(double(expected.data[i])));
  }
  return error / scale;
}

std::unique_ptr<rt::CpuProgram>
compile(const std::string &source,
        const rt::CompileOptions &options = rt::CompileOptions()) {
  llvm::Expected<std::unique_ptr<rt::CpuProgram>> program =
      rt::CpuProgram::compile(source, "test.mlir", options);
  if (!program) {
    ADD_FAILURE() << llvm::toString(program.takeError());
    return nullptr;
  }
  return std::move(*program);
}

using test::callOrFail;

//===----------------------------------------------------------------------===//
// moe ops
//===----------------------------------------------------------------------===//

TEST(ExecutionTest, GateMultiHeadAndFlat) {
  for (int64_t tokens : {1, 7}) {
    auto program = compile(formatv(R"mlir(
      func.func @heads(%x: tensor<{0}x13xf32>, %w: tensor<15x13xf32>) -> tensor<{0}x3x5xf32> {{
        %s = moe.gate %x, %w : tensor<{0}x13xf32>, tensor<15x13xf32> -> tensor<{0}x3x5xf32>
        return %s : tensor<{0}x3x5xf32>
      }
      func.func @flat(%x: tensor<?x13xf32>, %w: tensor<15x13xf32>) -> tensor<?x15xf32> {{
        %s = moe.gate %x, %w : tensor<?x13xf32>, tensor<15x13xf32> -> tensor<?x15xf32>
        return %s : tensor<?x15xf32>
      })mlir",
                                   tokens)
                               .str());
    ASSERT_TRUE(program);
    ref::Tensor x = random({tokens, 13}, 1), w = random({15, 13}, 2);
    ref::Tensor expected = ref::gate(x, w);
    auto heads = callOrFail(*program, "heads", {toHost(x), toHost(w)});
    ASSERT_EQ(heads.size(), 1u);
    EXPECT_LE(
        relativeError(toRef(heads[0]), ref::reshape(expected, {tokens, 3, 5})),
        kTolerance);
    auto flat = callOrFail(*program, "flat", {toHost(x), toHost(w)});
    ASSERT_EQ(flat.size(), 1u);
    EXPECT_LE(relativeError(toRef(flat[0]), expected), kTolerance);
  }
}

/// Compiled top-k against the reference, values and indices exactly.
void checkTopK(const ref::Tensor &scores, int64_t k,
               const std::vector<bool> *mask) {
  int64_t experts = scores.shape.back();
  std::string shape =
      formatv("{0}x{1}x{2}", scores.shape[0], scores.shape[1], experts);
  std::string outShape =
      formatv("{0}x{1}x{2}", scores.shape[0], scores.shape[1], k);
  std::string source = mask ? formatv(R"mlir(
        func.func @topk(%s: tensor<{0}xf32>, %m: tensor<{0}xi1>) -> (tensor<{1}xf32>, tensor<{1}xi64>) {{
          %v, %i = moe.topk %s k({2}) mask(%m) : tensor<{0}xf32>, tensor<{0}xi1> -> tensor<{1}xf32>, tensor<{1}xi64>
          return %v, %i : tensor<{1}xf32>, tensor<{1}xi64>
        })mlir",
                                      shape, outShape, k)
                                  .str()
                            : formatv(R"mlir(
        func.func @topk(%s: tensor<{0}xf32>) -> (tensor<{1}xf32>, tensor<{1}xi64>) {{
          %v, %i = moe.topk %s k({2}) : tensor<{0}xf32> -> tensor<{1}xf32>, tensor<{1}xi64>
          return %v, %i : tensor<{1}xf32>, tensor<{1}xi64>
        })mlir",
                                      shape, outShape, k)
                                  .str();
  auto program = compile(source);
  ASSERT_TRUE(program);
  std::vector<rt::HostTensor> args = {toHost(scores)};
  if (mask)
    args.push_back(toHostMask(scores.shape, *mask));
  auto results = callOrFail(*program, "topk", std::move(args));
  ASSERT_EQ(results.size(), 2u);
  ref::Tensor values;
  ref::IndexTensor indices;
  ref::topk(scores, k, mask, values, indices);
  EXPECT_EQ(toRef(results[0]).data, values.data) << "k = " << k;
  EXPECT_EQ(toRefIndex(results[1]).data, indices.data) << "k = " << k;
}

TEST(ExecutionTest, TopKEdgeCases) {
  ref::Tensor scores = random({3, 2, 7}, 3);
  for (int64_t k : {1, 3, 7})
    checkTopK(scores, k, nullptr);
  // Ties go to the lower index.
  ref::Tensor ties({2, 1, 5}, 0.5f);
  ties.at({1, 0, 3}) = 0.9f;
  checkTopK(ties, 3, nullptr);
  // Expert dropout, including a row with every expert masked.
  std::vector<bool> mask(3 * 2 * 7);
  std::mt19937 generator(4);
  for (size_t i = 0; i < mask.size(); ++i)
    mask[i] = generator() % 3 == 0;
  for (int e = 0; e < 7; ++e)
    mask[7 + e] = true;
  checkTopK(scores, 3, &mask);
  checkTopK(scores, 7, &mask);
}

/// The expert projections' formulations: fused row kernels, and unfused, dense over all experts or grouped by expert (the
/// sort read on the host, or padded segments with no host reads: tiles of
/// 4 rows, so that segments span several tiles, and of 64, the GPU's).
std::vector<std::pair<const char *, rt::CompileOptions>> expertFormulations() {
  using mlir::switchyard::FusionOptions;
  rt::CompileOptions fused, dense, grouped, padded4, padded64;
  fused.fusion = FusionOptions::all(/*groupedExperts=*/false);
  dense.fusion = FusionOptions::none(/*groupedExperts=*/false);
  grouped.fusion = padded4.fusion = padded64.fusion =
      FusionOptions::none(/*groupedExperts=*/true);
  padded4.groupedTileRows = 4;
  padded64.groupedTileRows = 64;
  return {{"fused", fused},
          {"dense", dense},
          {"grouped", grouped},
          {"grouped, padded to 4 rows", padded4},
          {"grouped, padded to 64 rows", padded64}};
}

/// The SwitchHead V and O projections for given routes, in every
/// formulation; with `dynamicTokens` the token dimension is `?`.
void checkProjections(int64_t tokens, int64_t k, const ref::IndexTensor &idx,
                      unsigned seed, bool dynamicTokens = false) {
  const int64_t heads = 2, experts = 3, width = 11, headWidth = 5;
  std::string n = dynamicTokens ? "?" : std::to_string(tokens);
  std::string source = formatv(R"mlir(
    func.func @proj(%x: tensor<{0}x{1}xf32>, %w: tensor<{2}x{1}x{3}xf32>, %g: tensor<{0}x{4}x{5}xf32>, %i: tensor<{0}x{4}x{5}xi32>) -> tensor<{0}x{4}x{3}xf32> {{
      %p = moe.expert_proj %x, %w, %g, %i : tensor<{0}x{1}xf32>, tensor<{2}x{1}x{3}xf32>, tensor<{0}x{4}x{5}xf32>, tensor<{0}x{4}x{5}xi32> -> tensor<{0}x{4}x{3}xf32>
      return %p : tensor<{0}x{4}x{3}xf32>
    }
    func.func @merge(%o: tensor<{0}x{4}x{3}xf32>, %w: tensor<{2}x{3}x{1}xf32>, %g: tensor<{0}x{4}x{5}xf32>, %i: tensor<{0}x{4}x{5}xi32>) -> tensor<{0}x{1}xf32> {{
      %y = moe.expert_merge %o, %w, %g, %i : tensor<{0}x{4}x{3}xf32>, tensor<{2}x{3}x{1}xf32>, tensor<{0}x{4}x{5}xf32>, tensor<{0}x{4}x{5}xi32> -> tensor<{0}x{1}xf32>
      return %y : tensor<{0}x{1}xf32>
    })mlir",
                               n, width, heads * experts, headWidth, heads, k)
                           .str();
  ref::Tensor x = random({tokens, width}, seed);
  ref::Tensor wv = random({heads * experts, width, headWidth}, seed + 1);
  ref::Tensor wo = random({heads * experts, headWidth, width}, seed + 2);
  ref::Tensor gates = random({tokens, heads, k}, seed + 3);
  ref::Tensor o = random({tokens, heads, headWidth}, seed + 4);
  ref::Tensor expectedProj = ref::expertProj(x, wv, gates, idx);
  ref::Tensor expectedMerge = ref::expertMerge(o, wo, gates, idx);
  auto i32 = rt::ElementType::i32;

  for (const auto &[formulation, options] : expertFormulations()) {
    SCOPED_TRACE(formulation);
    auto program = compile(source, options);
    ASSERT_TRUE(program);
    auto proj =
        callOrFail(*program, "proj",
                   {toHost(x), toHost(wv), toHost(gates), toHost(idx, i32)});
    ASSERT_EQ(proj.size(), 1u);
    EXPECT_LE(relativeError(toRef(proj[0]), expectedProj), kTolerance);
    auto merge =
        callOrFail(*program, "merge",
                   {toHost(o), toHost(wo), toHost(gates), toHost(idx, i32)});
    ASSERT_EQ(merge.size(), 1u);
    EXPECT_LE(relativeError(toRef(merge[0]), expectedMerge), kTolerance);
  }
}

TEST(ExecutionTest, DropoutMaskAndDropout) {
  // The counter-based mask bit for bit against the reference, its rate,
  // distinct streams, and inverted dropout applied with it.
  std::unique_ptr<rt::CpuProgram> program = compile(R"mlir(
    func.func @f(%x: tensor<?x40xf32>, %s: tensor<i64>) -> (tensor<?x40xi1>, tensor<?x40xi1>, tensor<?x40xf32>) {
      %m = moe.dropout_mask %x seed(%s) {rate = 0.3 : f64, stream = 5 : i64} : tensor<?x40xf32>, tensor<i64> -> tensor<?x40xi1>
      %n = moe.dropout_mask %x seed(%s) {rate = 0.3 : f64, stream = 6 : i64} : tensor<?x40xf32>, tensor<i64> -> tensor<?x40xi1>
      %y = moe.dropout %x, %m {rate = 0.3 : f64} : tensor<?x40xf32>, tensor<?x40xi1>
      return %m, %n, %y : tensor<?x40xi1>, tensor<?x40xi1>, tensor<?x40xf32>
    })mlir");
  ref::Tensor x = random({50, 40}, 90);
  rt::HostTensor xHost = toHost(x);
  int64_t seed = -77; // any i64, negative included
  rt::HostTensor seedHost =
      rt::HostTensor::fromValues<int64_t>("seed", rt::ElementType::i64, {},
                                          {seed});
  std::vector<rt::HostTensor> out =
      callOrFail(*program, "f", {xHost, seedHost});
  std::vector<bool> expected = ref::dropoutMask(seed, 5, 0.3, 2000);
  std::vector<bool> other = ref::dropoutMask(seed, 6, 0.3, 2000);
  std::span<const bool> mask = out[0].values<bool>();
  std::span<const bool> mask6 = out[1].values<bool>();
  std::span<const float> y = out[2].values<float>();
  ASSERT_EQ(mask.size(), expected.size());
  int64_t dropped = 0, differ = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    EXPECT_EQ(mask[i], bool(expected[i])) << "element " << i;
    EXPECT_EQ(mask6[i], bool(other[i])) << "element " << i;
    dropped += mask[i];
    differ += mask[i] != mask6[i];
    float want = mask[i] ? 0.0f : x.data[i] / 0.7f;
    EXPECT_NEAR(y[i], want, 1e-6 * std::abs(want) + 1e-7) << "element " << i;
  }
  // 2000 Bernoulli(0.3) draws: 600 ± 20.5 (sd); 5 sd either side.
  EXPECT_NEAR(double(dropped), 600.0, 103.0);
  // Two streams agree on about 0.58 of the elements (0.3² + 0.7²).
  EXPECT_GT(differ, 600);
}

TEST(ExecutionTest, ExpertProjectionsAwkwardShapes) {
  // One token; k = 1; k = E; random routes; fused, dense and grouped.
  checkProjections(1, 1, randomIndices({1, 2, 1}, 3, 5), 10);
  checkProjections(9, 3, randomIndices({9, 2, 3}, 3, 6), 20,
                   /*dynamicTokens=*/true);
  checkProjections(9, 2, randomIndices({9, 2, 2}, 3, 7), 30);
  // Every token chooses expert 2 of every head: the other experts' blocks
  // are empty in the grouped formulation.
  ref::IndexTensor same{{6, 2, 1}, std::vector<int64_t>(12, 2)};
  checkProjections(6, 1, same, 40, /*dynamicTokens=*/true);
}

TEST(ExecutionTest, ExpertMlp) {
  const int64_t width = 10, experts = 4, hidden = 7;
  for (int64_t k : {1, 2, 4}) {
    const int64_t tokens = 6;
    auto program = compile(formatv(R"mlir(
      func.func @mlp(%x: tensor<{0}x{1}xf32>, %up: tensor<{2}x{1}x{3}xf32>, %down: tensor<{2}x{3}x{1}xf32>, %g: tensor<{0}x{4}xf32>, %i: tensor<{0}x{4}xi64>) -> tensor<{0}x{1}xf32> {{
        %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<{0}x{1}xf32>, tensor<{2}x{1}x{3}xf32>, tensor<{2}x{3}x{1}xf32>, tensor<{0}x{4}xf32>, tensor<{0}x{4}xi64> -> tensor<{0}x{1}xf32>
        return %y : tensor<{0}x{1}xf32>
      })mlir",
                                   tokens, width, experts, hidden, k)
                               .str());
    ASSERT_TRUE(program);
    ref::Tensor x = random({tokens, width}, 50);
    ref::Tensor up = random({experts, width, hidden}, 51);
    ref::Tensor down = random({experts, hidden, width}, 52);
    ref::Tensor gates = random({tokens, k}, 53);
    ref::IndexTensor idx = randomIndices({tokens, k}, experts, 54);
    auto results =
        callOrFail(*program, "mlp",
                   {toHost(x), toHost(up), toHost(down), toHost(gates),
                    toHost(idx, rt::ElementType::i64)});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_LE(relativeError(toRef(results[0]),
                            ref::expertMlp(x, up, down, gates, idx)),
              kTolerance)
        << "k = " << k;
  }
}

//===----------------------------------------------------------------------===//
// lm layers, through models
//===----------------------------------------------------------------------===//

/// A compiled model with its parameters initialised (seed 11).
struct CompiledModel {
  std::unique_ptr<rt::CpuProgram> program;
  std::map<std::string, ref::Tensor> params;

  const ref::Tensor &p(const std::string &name) const {
    auto it = params.find(name);
    EXPECT_NE(it, params.end()) << "no parameter " << name;
    static ref::Tensor empty;
    return it == params.end() ? empty : it->second;
  }

  /// Runs function `name`: `inputs` bind the non-parameter arguments in
  /// order, parameters bind by name.
  std::vector<ref::Tensor> operator()(llvm::StringRef name,
                                      std::vector<rt::HostTensor> inputs) {
    const rt::FunctionSpec *function = program->lookup(name);
    EXPECT_TRUE(function);
    if (!function)
      return {};
    std::vector<rt::HostTensor> arguments;
    size_t next = 0;
    for (const rt::TensorSpec &spec : function->arguments) {
      if (!spec.param.empty())
        arguments.push_back(toHost(p(spec.param)));
      else
        arguments.push_back(std::move(inputs.at(next++)));
    }
    std::vector<ref::Tensor> outputs;
    for (const rt::HostTensor &result : callOrFail(*program, name, arguments))
      outputs.push_back(toRef(result));
    return outputs;
  }
};

CompiledModel compileModel(const std::string &source,
                           const rt::CompileOptions &options = {}) {
  CompiledModel model{compile(source, options), {}};
  if (!model.program)
    return model;
  for (const rt::ParamSpec &spec : model.program->params().params) {
    ref::Tensor tensor(spec.shape);
    rt::initialize(spec, /*seed=*/11, tensor.data);
    model.params[spec.name] = std::move(tensor);
  }
  return model;
}

ref::Norm norm(const CompiledModel &model, const std::string &prefix) {
  return {model.p(prefix + ".weight"), model.p(prefix + ".bias")};
}

const int64_t kBatch = 2, kVocab = 23, kWidth = 12;

ref::IndexTensor tokens(int64_t time, unsigned seed) {
  return randomIndices({kBatch, time}, kVocab, seed);
}

/// A model: embed, one layer op written by `layer`, returning its output.
std::string layerModel(int64_t time, const std::string &layer,
                       bool memory = false) {
  std::string hidden = formatv("tensor<?x{0}x{1}xf32>", time, kWidth);
  return formatv(R"mlir(
    lm.model @m(%t: tensor<?x{0}xi32>{3}) -> {1} {{
      %x = lm.embed "embed" %t {{vocab = {2}} : tensor<?x{0}xi32> -> {1}
      %y = {4} : {1}
      lm.return %y : {1}
    })mlir",
                 time, hidden, kVocab,
                 memory ? ", %mem: " + hidden : std::string(), layer)
      .str();
}

struct AttentionCase {
  const char *pos;
  ref::Pos refPos;
  int64_t time;
  bool memory;
};

const AttentionCase kAttentionCases[] = {
    {"none", ref::Pos::none, 5, false}, {"rope", ref::Pos::rope, 5, false},
    {"rope", ref::Pos::rope, 1, false}, {"xl", ref::Pos::xl, 5, false},
    {"xl", ref::Pos::xl, 4, true},
};

TEST(ExecutionTest, MhaBlock) {
  for (const AttentionCase &c : kAttentionCases) {
    std::string memory = c.memory ? " memory(%mem : tensor<?x" +
                                        std::to_string(c.time) + "x12xf32>)"
                                  : "";
    CompiledModel model = compileModel(layerModel(
        c.time,
        formatv(
            R"(lm.mha "att" %x{0} {{heads = 3, head_dim = 5, pos = #lm.pos<{1}>})",
            memory, c.pos),
        c.memory));
    ASSERT_TRUE(model.program);
    ref::IndexTensor ids = tokens(c.time, 60);
    ref::Tensor mem = random({kBatch, c.time, kWidth}, 61);
    std::vector<rt::HostTensor> inputs = {toHost(ids, rt::ElementType::i32)};
    if (c.memory)
      inputs.push_back(toHost(mem));
    auto outputs = model("m", std::move(inputs));
    ASSERT_EQ(outputs.size(), 1u);

    ref::Tensor x = ref::embed(ids, model.p("embed.weight"));
    ref::MhaParams params{norm(model, "att.norm"),
                          model.p("att.q"),
                          model.p("att.k"),
                          model.p("att.v"),
                          model.p("att.o"),
                          c.refPos == ref::Pos::xl ? model.p("att.pos")
                                                   : ref::Tensor()};
    ref::Tensor expected =
        ref::mhaBlock(x, params, 3, 5, c.refPos, c.memory ? &mem : nullptr);
    EXPECT_LE(relativeError(outputs[0], expected), kTolerance)
        << "pos " << c.pos << ", T " << c.time << ", memory " << c.memory;
  }
}

/// The parameters of the SwitchHead block "att" of `model`.
ref::SwitchHeadParams switchHeadParams(const CompiledModel &model,
                                       ref::Pos pos) {
  return {norm(model, "att.norm"),
          model.p("att.q"),
          model.p("att.k"),
          model.p("att.v"),
          model.p("att.o"),
          model.p("att.sel_v"),
          model.p("att.sel_o"),
          pos == ref::Pos::xl ? model.p("att.pos") : ref::Tensor()};
}

TEST(ExecutionTest, SwitchHeadBlock) {
  for (const AttentionCase &c : kAttentionCases) {
    for (int64_t k : {1, 3}) {
      std::string memory = c.memory ? " memory(%mem : tensor<?x" +
                                          std::to_string(c.time) + "x12xf32>)"
                                    : "";
      CompiledModel model = compileModel(layerModel(
          c.time,
          formatv(
              R"(lm.switchhead "att" %x{0} {{heads = 2, experts = 3, k = {1}, head_dim = 5, pos = #lm.pos<{2}>})",
              memory, k, c.pos),
          c.memory));
      ASSERT_TRUE(model.program);
      ref::IndexTensor ids = tokens(c.time, 70);
      ref::Tensor mem = random({kBatch, c.time, kWidth}, 71);
      std::vector<rt::HostTensor> inputs = {toHost(ids, rt::ElementType::i32)};
      if (c.memory)
        inputs.push_back(toHost(mem));
      auto outputs = model("m", std::move(inputs));
      ASSERT_EQ(outputs.size(), 1u);

      ref::Tensor x = ref::embed(ids, model.p("embed.weight"));
      ref::Tensor expected =
          ref::switchHeadBlock(x, switchHeadParams(model, c.refPos), 2, 3, k, 5,
                               c.refPos, c.memory ? &mem : nullptr);
      EXPECT_LE(relativeError(outputs[0], expected), kTolerance)
          << "pos " << c.pos << ", T " << c.time << ", memory " << c.memory
          << ", k " << k;
    }
  }
}

// The probes of `switchyard analyze` (CompileOptions::probes): the
// attention weights equal the reference's within 1e-5 (each is a float
// from a softmax the reference evaluates in double), the selections equal
// the reference's top-k (gates within the blocks' tolerance), for every
// positional encoding, with and without memory.
TEST(ExecutionTest, ProbesAreTheReferenceAttentionWeightsAndSelections) {
  rt::CompileOptions options;
  options.probes = true;
  for (const AttentionCase &c : kAttentionCases) {
    std::string memory = c.memory ? " memory(%mem : tensor<?x" +
                                        std::to_string(c.time) + "x12xf32>)"
                                  : "";
    CompiledModel model = compileModel(
        layerModel(
            c.time,
            formatv(
                R"(lm.switchhead "att" %x{0} {{heads = 2, experts = 3, k = 2, head_dim = 5, pos = #lm.pos<{1}>})",
                memory, c.pos),
            c.memory),
        options);
    ASSERT_TRUE(model.program);
    const rt::FunctionSpec *function = model.program->lookup("m");
    ASSERT_TRUE(function);
    std::vector<std::string> names;
    for (const rt::TensorSpec &result : function->results)
      names.push_back(result.probe);
    EXPECT_EQ(names,
              (std::vector<std::string>{"", "att.v.gates", "att.v.experts",
                                        "att.attention.weights", "att.o.gates",
                                        "att.o.experts"}));
    ref::IndexTensor ids = tokens(c.time, 90);
    ref::Tensor mem = random({kBatch, c.time, kWidth}, 91);
    std::vector<rt::HostTensor> inputs = {toHost(ids, rt::ElementType::i32)};
    if (c.memory)
      inputs.push_back(toHost(mem));
    std::vector<rt::HostTensor> arguments;
    size_t next = 0;
    for (const rt::TensorSpec &spec : function->arguments)
      arguments.push_back(spec.param.empty() ? std::move(inputs.at(next++))
                                             : toHost(model.p(spec.param)));
    std::vector<rt::HostTensor> results =
        callOrFail(*model.program, "m", arguments);
    ASSERT_EQ(results.size(), 6u);

    ref::Tensor x = ref::embed(ids, model.p("embed.weight"));
    ref::AttentionProbes expected;
    ref::switchHeadBlock(x, switchHeadParams(model, c.refPos), 2, 3, 2, 5,
                         c.refPos, c.memory ? &mem : nullptr, &expected);
    ref::Tensor weights = toRef(results[3]);
    ASSERT_EQ(weights.shape, expected.weights.shape);
    for (size_t i = 0; i < weights.data.size(); ++i)
      ASSERT_NEAR(weights.data[i], expected.weights.data[i], 1e-5)
          << "weight " << i << ", pos " << c.pos << ", T " << c.time
          << ", memory " << c.memory;
    EXPECT_EQ(toRefIndex(results[2]).data, expected.expertsV.data);
    EXPECT_EQ(toRefIndex(results[5]).data, expected.expertsO.data);
    EXPECT_LE(relativeError(toRef(results[1]), expected.gatesV), kTolerance);
    EXPECT_LE(relativeError(toRef(results[4]), expected.gatesO), kTolerance);
  }
}

TEST(ExecutionTest, FeedForwardBlocks) {
  for (int64_t time : {1, 5}) {
    CompiledModel ffn =
        compileModel(layerModel(time, R"(lm.ffn "ffn" %x {d_ff = 17})"));
    ASSERT_TRUE(ffn.program);
    ref::IndexTensor ids = tokens(time, 80);
    auto outputs = ffn("m", {toHost(ids, rt::ElementType::i32)});
    ASSERT_EQ(outputs.size(), 1u);
    ref::Tensor x = ref::embed(ids, ffn.p("embed.weight"));
    EXPECT_LE(relativeError(outputs[0],
                            ref::ffnBlock(x, norm(ffn, "ffn.norm"),
                                          ffn.p("ffn.up"), ffn.p("ffn.down"))),
              kTolerance);

    for (int64_t k : {1, 5}) {
      CompiledModel moe = compileModel(layerModel(
          time,
          formatv(
              R"(lm.sigma_moe "ffn" %x {{experts = 5, k = {0}, expert_dim = 6})",
              k)));
      ASSERT_TRUE(moe.program);
      auto moeOutputs = moe("m", {toHost(ids, rt::ElementType::i32)});
      ASSERT_EQ(moeOutputs.size(), 1u);
      ref::Tensor moeX = ref::embed(ids, moe.p("embed.weight"));
      EXPECT_LE(relativeError(moeOutputs[0],
                              ref::sigmaMoeBlock(
                                  moeX, norm(moe, "ffn.norm"), moe.p("ffn.sel"),
                                  moe.p("ffn.up"), moe.p("ffn.down"), k)),
                kTolerance)
          << "T " << time << ", k " << k;
    }
  }
}

TEST(ExecutionTest, NormOutputAndLoss) {
  const int64_t time = 3;
  std::string hidden = formatv("tensor<?x{0}x{1}xf32>", time, kWidth);
  std::string logits = formatv("tensor<?x{0}x{1}xf32>", time, kVocab);
  CompiledModel model = compileModel(formatv(R"mlir(
    lm.model @m(%t: tensor<?x{0}xi32>) -> {2} {{
      %x = lm.embed "embed" %t {{vocab = {3}} : tensor<?x{0}xi32> -> {1}
      %n = lm.layer_norm "norm" %x {{eps = 1.0e-3} : {1}
      %l = lm.output "out" %n {{vocab = {3}} : {1} -> {2}
      lm.return %l : {2}
    }
    func.func @loss(%l: tensor<2x{0}x{3}xf32>, %t: tensor<2x{0}xi64>) -> tensor<f32> {{
      %loss = lm.cross_entropy %l, %t : tensor<2x{0}x{3}xf32>, tensor<2x{0}xi64> -> tensor<f32>
      return %loss : tensor<f32>
    })mlir",
                                             time, hidden, logits, kVocab)
                                         .str());
  ASSERT_TRUE(model.program);
  ref::IndexTensor ids = tokens(time, 90);
  auto outputs = model("m", {toHost(ids, rt::ElementType::i32)});
  ASSERT_EQ(outputs.size(), 1u);
  ref::Tensor x = ref::embed(ids, model.p("embed.weight"));
  ref::Tensor expected = ref::output(
      ref::layerNorm(x, model.p("norm.weight"), model.p("norm.bias"), 1e-3),
      model.p("out.weight"));
  EXPECT_LE(relativeError(outputs[0], expected), kTolerance);

  ref::Tensor randomLogits = random({2, time, kVocab}, 91, 4.0f);
  ref::IndexTensor targets = tokens(time, 92);
  auto loss = model(
      "loss", {toHost(randomLogits), toHost(targets, rt::ElementType::i64)});
  ASSERT_EQ(loss.size(), 1u);
  ASSERT_EQ(loss[0].data.size(), 1u);
  double reference = ref::crossEntropy(randomLogits, targets);
  EXPECT_NEAR(loss[0].data[0], reference, kTolerance * reference);
}

//===----------------------------------------------------------------------===//
// Whole models
//===----------------------------------------------------------------------===//

TEST(ExecutionTest, SwitchAllModelWithXlMemory) {
  // Two layers: SwitchHead (XL, memory) + sigma-MoE, then dense attention
  // (XL, memory) + dense FFN; final norm and output.
  const int64_t time = 4;
  std::string hidden = formatv("tensor<?x{0}x{1}xf32>", time, kWidth);
  std::string logits = formatv("tensor<?x{0}x{1}xf32>", time, kVocab);
  CompiledModel model = compileModel(formatv(R"mlir(
    lm.model @m(%t: tensor<?x{0}xi32>, %m0: {1}, %m1: {1}) -> ({2}, {1}, {1}) {{
      %x0 = lm.embed "embed" %t {{vocab = {3}} : tensor<?x{0}xi32> -> {1}
      %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : {1}) {{heads = 2, experts = 4, k = 2, head_dim = 6, pos = #lm.pos<xl>} : {1}
      %x1 = lm.sigma_moe "layers.0.ffn" %a0 {{experts = 5, k = 2, expert_dim = 4} : {1}
      %a1 = lm.mha "layers.1.att" %x1 memory(%m1 : {1}) {{heads = 2, head_dim = 6, pos = #lm.pos<xl>} : {1}
      %x2 = lm.ffn "layers.1.ffn" %a1 {{d_ff = 9} : {1}
      %h = lm.layer_norm "norm" %x2 : {1}
      %l = lm.output "out" %h {{vocab = {3}} : {1} -> {2}
      lm.return %l, %x0, %x1 : {2}, {1}, {1}
    })mlir",
                                             time, hidden, logits, kVocab)
                                         .str());
  ASSERT_TRUE(model.program);
  ref::IndexTensor ids = tokens(time, 100);
  ref::Tensor m0 = random({kBatch, time, kWidth}, 101);
  ref::Tensor m1 = random({kBatch, time, kWidth}, 102);
  auto outputs =
      model("m", {toHost(ids, rt::ElementType::i32), toHost(m0), toHost(m1)});
  ASSERT_EQ(outputs.size(), 3u);

  ref::Tensor x0 = ref::embed(ids, model.p("embed.weight"));
  ref::SwitchHeadParams sh{
      norm(model, "layers.0.att.norm"), model.p("layers.0.att.q"),
      model.p("layers.0.att.k"),        model.p("layers.0.att.v"),
      model.p("layers.0.att.o"),        model.p("layers.0.att.sel_v"),
      model.p("layers.0.att.sel_o"),    model.p("layers.0.att.pos")};
  ref::Tensor a0 = ref::switchHeadBlock(x0, sh, 2, 4, 2, 6, ref::Pos::xl, &m0);
  ref::Tensor x1 = ref::sigmaMoeBlock(
      a0, norm(model, "layers.0.ffn.norm"), model.p("layers.0.ffn.sel"),
      model.p("layers.0.ffn.up"), model.p("layers.0.ffn.down"), 2);
  ref::MhaParams mha{
      norm(model, "layers.1.att.norm"), model.p("layers.1.att.q"),
      model.p("layers.1.att.k"),        model.p("layers.1.att.v"),
      model.p("layers.1.att.o"),        model.p("layers.1.att.pos")};
  ref::Tensor a1 = ref::mhaBlock(x1, mha, 2, 6, ref::Pos::xl, &m1);
  ref::Tensor x2 =
      ref::ffnBlock(a1, norm(model, "layers.1.ffn.norm"),
                    model.p("layers.1.ffn.up"), model.p("layers.1.ffn.down"));
  ref::Tensor expected = ref::output(
      ref::layerNorm(x2, model.p("norm.weight"), model.p("norm.bias")),
      model.p("out.weight"));
  EXPECT_LE(relativeError(outputs[0], expected), kTolerance);
  // The new memories are the block inputs.
  EXPECT_LE(relativeError(outputs[1], x0), kTolerance);
  EXPECT_LE(relativeError(outputs[2], x1), kTolerance);
}

//===----------------------------------------------------------------------===//
// Bad calls
//===----------------------------------------------------------------------===//

TEST(ExecutionTest, BadArgumentsAreNamed) {
  CompiledModel model =
      compileModel(layerModel(3, R"(lm.ffn "ffn" %x {d_ff = 4})"));
  ASSERT_TRUE(model.program);
  const rt::FunctionSpec *function = model.program->lookup("m");
  ASSERT_TRUE(function);
  ASSERT_EQ(function->arguments[0].vocab, std::optional<int64_t>(kVocab));

  auto callWith = [&](rt::HostTensor ids) {
    std::vector<rt::HostTensor> arguments = {std::move(ids)};
    for (size_t i = 1; i < function->arguments.size(); ++i)
      arguments.push_back(toHost(model.p(function->arguments[i].param)));
    std::vector<const rt::HostTensor *> pointers;
    for (const rt::HostTensor &a : arguments)
      pointers.push_back(&a);
    llvm::Expected<std::vector<rt::HostTensor>> result =
        model.program->call("m", pointers);
    return result ? std::string() : llvm::toString(result.takeError());
  };
  ref::IndexTensor ids = tokens(3, 110);
  EXPECT_EQ(callWith(toHost(ids, rt::ElementType::i32)), "");
  ids.data[4] = kVocab;
  EXPECT_EQ(callWith(toHost(ids, rt::ElementType::i32)),
            "@m argument #0: token id 23 at position 4 is outside the "
            "vocabulary [0, 23)");
  EXPECT_EQ(callWith(toHost(tokens(4, 111), rt::ElementType::i32)),
            "@m argument #0: expected shape [?, 3], found [2, 4]");
  EXPECT_EQ(callWith(toHost(tokens(3, 112), rt::ElementType::i64)),
            "@m argument #0: expected element type i32, found i64");
}

} // namespace

namespace {
/// `x` rounded to bf16 (to nearest, ties to even) and back, or to f16.
float roundTo(float x, bool bf16) {
  if (!bf16)
    return float(_Float16(x));
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7FFF + ((bits >> 16) & 1);
  bits &= 0xFFFF0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}
} // namespace

// CompileOptions::roundContractionOperands (switchyard-round-contraction-
// operands on the CPU): x·wᵀ with both factors rounded to bf16 / f16 and
// f32 accumulation, against a plain C++ loop doing the same, on shapes that
// are not tile multiples; the rounding must change the result.
TEST(ExecutionTest, RoundedContractionFactors) {
  const char *source = R"mlir(
    func.func @linear(%x: tensor<17x24xf32>, %w: tensor<33x24xf32>) -> tensor<17x33xf32> {
      %y = moe.linear %x, %w : tensor<17x24xf32>, tensor<33x24xf32> -> tensor<17x33xf32>
      return %y : tensor<17x33xf32>
    })mlir";
  std::mt19937 generator(3);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> x(17 * 24), w(33 * 24);
  for (float &v : x)
    v = uniform(generator);
  for (float &v : w)
    v = uniform(generator);
  rt::HostTensor xt = rt::HostTensor::fromValues<float>(
      "x", rt::ElementType::f32, {17, 24}, std::span<const float>(x));
  rt::HostTensor wt = rt::HostTensor::fromValues<float>(
      "w", rt::ElementType::f32, {33, 24}, std::span<const float>(w));
  rt::CompileOptions exact;
  auto plain = rt::CpuProgram::compile(source, "linear.mlir", exact);
  ASSERT_TRUE(static_cast<bool>(plain)) << llvm::toString(plain.takeError());
  auto unrounded = (*plain)->call("linear", {&xt, &wt});
  ASSERT_TRUE(static_cast<bool>(unrounded));
  for (bool bf16 : {true, false}) {
    rt::CompileOptions options;
    options.roundContractionOperands = bf16 ? "bf16" : "f16";
    auto program = rt::CpuProgram::compile(source, "linear.mlir", options);
    ASSERT_TRUE(static_cast<bool>(program))
        << llvm::toString(program.takeError());
    auto result = (*program)->call("linear", {&xt, &wt});
    ASSERT_TRUE(static_cast<bool>(result))
        << llvm::toString(result.takeError());
    std::span<const float> y = (*result)[0].values<float>();
    std::span<const float> exactY = (*unrounded)[0].values<float>();
    double largestChange = 0;
    for (int m = 0; m < 17; ++m)
      for (int n = 0; n < 33; ++n) {
        float sum = 0;
        for (int k = 0; k < 24; ++k)
          sum += roundTo(x[m * 24 + k], bf16) * roundTo(w[n * 24 + k], bf16);
        EXPECT_NEAR(y[m * 33 + n], sum, 1e-6 * (1 + std::abs(sum)))
            << (bf16 ? "bf16" : "f16") << " at " << m << ", " << n;
        largestChange = std::max(
            largestChange, double(std::abs(y[m * 33 + n] - exactY[m * 33 + n])));
      }
    EXPECT_GT(largestChange, bf16 ? 1e-3 : 1e-5) << "nothing was rounded";
  }
  rt::CompileOptions bad;
  bad.roundContractionOperands = "f8";
  auto refused = rt::CpuProgram::compile(source, "linear.mlir", bad);
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_NE(llvm::toString(refused.takeError())
                .find("unsupported element-type 'f8'"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// switchyard-cpu-contraction-kernels
//===----------------------------------------------------------------------===//

/// One matmul-like linalg.generic, C[b, m, n] = Σ_k A · B with the layouts
/// below, compiled for the CPU (so through the register-blocked kernels,
/// with row and column tails, a transposed copy of B, a dynamic batch) and
/// compared with a double-precision loop.
struct ContractionCase {
  const char *name;
  int64_t batch, m, n, k;
  bool aTransposed; // A[b, k, m] instead of A[b, m, k]
  bool bTransposed; // B[b, n, k] instead of B[b, k, n]
};

void checkContraction(const ContractionCase &c,
                      const rt::CompileOptions &options = {}) {
  SCOPED_TRACE(c.name);
  std::string aType = c.aTransposed ? formatv("?x{0}x{1}", c.k, c.m).str()
                                    : formatv("?x{0}x{1}", c.m, c.k).str();
  std::string bType = c.bTransposed ? formatv("?x{0}x{1}", c.n, c.k).str()
                                    : formatv("?x{0}x{1}", c.k, c.n).str();
  std::string source = formatv(R"mlir(
    func.func @contract(%a: tensor<{0}xf32>, %b: tensor<{1}xf32>) -> tensor<?x{2}x{3}xf32> {{
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %batch = tensor.dim %a, %c0 : tensor<{0}xf32>
      %empty = tensor.empty(%batch) : tensor<?x{2}x{3}xf32>
      %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<?x{2}x{3}xf32>) -> tensor<?x{2}x{3}xf32>
      %c = linalg.generic {{indexing_maps = [
          affine_map<(b, m, n, k) -> {4}>, affine_map<(b, m, n, k) -> {5}>,
          affine_map<(b, m, n, k) -> (b, m, n)>],
          iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
          ins(%a, %b : tensor<{0}xf32>, tensor<{1}xf32>) outs(%init : tensor<?x{2}x{3}xf32>) {{
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      } -> tensor<?x{2}x{3}xf32>
      return %c : tensor<?x{2}x{3}xf32>
    })mlir",
                               aType, bType, c.m, c.n,
                               c.aTransposed ? "(b, k, m)" : "(b, m, k)",
                               c.bTransposed ? "(b, n, k)" : "(b, k, n)")
                           .str();
  std::unique_ptr<rt::CpuProgram> program = compile(source, options);
  ASSERT_TRUE(program);
  rt::HostTensor a = test::randomTensor(
      c.aTransposed ? std::vector<int64_t>{c.batch, c.k, c.m}
                    : std::vector<int64_t>{c.batch, c.m, c.k},
      11, 1.0f);
  rt::HostTensor b = test::randomTensor(
      c.bTransposed ? std::vector<int64_t>{c.batch, c.n, c.k}
                    : std::vector<int64_t>{c.batch, c.k, c.n},
      12, 1.0f);
  auto results = callOrFail(*program, "contract", {a, b});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_EQ(results[0].shape, (std::vector<int64_t>{c.batch, c.m, c.n}));
  std::span<const float> av = a.values<float>(), bv = b.values<float>(),
                         cv = results[0].values<float>();
  for (int64_t i = 0; i < c.batch; ++i)
    for (int64_t m = 0; m < c.m; ++m)
      for (int64_t n = 0; n < c.n; ++n) {
        double sum = 0;
        for (int64_t k = 0; k < c.k; ++k) {
          double x = c.aTransposed ? av[(i * c.k + k) * c.m + m]
                                   : av[(i * c.m + m) * c.k + k];
          double y = c.bTransposed ? bv[(i * c.n + n) * c.k + k]
                                   : bv[(i * c.k + k) * c.n + n];
          sum += x * y;
        }
        // f32 accumulation over k terms of size <= 1.
        ASSERT_NEAR(cv[(i * c.m + m) * c.n + n], sum, 1e-5 * c.k)
            << "at " << i << ", " << m << ", " << n;
      }
}

/// Row tails (m not a multiple of 8), column tails (n not a multiple of
/// 32), a single row, exact tiles, every layout of A and B, and blocks of
/// columns, compiled with `options`.
void checkContractionShapes(const rt::CompileOptions &options = {}) {
  checkContraction({"A·B", 2, 37, 45, 29, false, false}, options);
  checkContraction({"A·Bᵀ (B copied transposed)", 3, 9, 70, 50, false, true},
                   options);
  checkContraction({"Aᵀ·B", 1, 16, 64, 33, true, false}, options);
  checkContraction({"Aᵀ·Bᵀ, one row", 2, 1, 33, 7, true, true}, options);
  checkContraction({"short rows", 1, 5, 17, 3, false, false}, options);
  // Several blocks of columns (b's panel is 256 KiB: two tiles of 32 a
  // block at these reductions), the last one partial and masked.
  checkContraction({"column blocks", 1, 13, 200, 700, false, false}, options);
  checkContraction(
      {"column blocks, B copied transposed", 2, 9, 100, 900, false, true},
      options);
  // With 32 columns (AVX-512's tile), a last tile at most half full is
  // half as wide: full (n = 48 = 32 + 16) or masked (n = 76 = 32 + 32 + 12,
  // the expert projections' width). The n above end in such tiles too
  // (45, 70, 33, 200, 100); with AVX2's 16 columns, 48 and 76 do not.
  checkContraction({"a narrow last tile, full", 1, 11, 48, 20, false, false},
                   options);
  checkContraction({"a narrow last tile, masked", 2, 19, 76, 41, false, true},
                   options);
}

TEST(ExecutionTest, ContractionKernelsOddShapes) { checkContractionShapes(); }

#if defined(__x86_64__)
TEST(ExecutionTest, ContractionKernelsForOtherCpus) {
  // The kernels of other x86 CPUs (their register tiles: 6 × 8 for SSE2's
  // 16 registers of 128 bits, 6 × 16 for AVX2's, 8 × 16 or 8 × 32 with
  // AVX-512's 32), on this machine where it can run them.
  int checked = 0;
  for (const char *cpu : {"x86-64", "x86-64-v3", "skylake-avx512", "znver4"}) {
    SCOPED_TRACE(cpu);
    if (llvm::Error error = rt::detail::checkCpuTarget({cpu, ""})) {
      std::string message = llvm::toString(std::move(error));
      EXPECT_TRUE(llvm::StringRef(message).contains("which this machine"))
          << message;
      continue;
    }
    rt::CompileOptions options;
    options.cpu = cpu;
    checkContractionShapes(options);
    ++checked;
  }
  // x86-64 (SSE2) runs on every x86-64 machine.
  EXPECT_GE(checked, 1);
}
#endif