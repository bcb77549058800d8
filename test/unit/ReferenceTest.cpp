//===- ReferenceTest.cpp - tests of the plain C++ reference ---------------===//
//
// Checks lib/Reference/ against values worked out by hand or by independent
// closed forms, and against the structural properties of docs/Semantics.md:
// causality, relative positions, memory as a visible prefix, and the
// reduction of one-expert SwitchHead to dense attention.
//
// Tolerances:
//  * EXPECT_EQ where the reference must be exact: top-k, embeddings, products
//    of small integers and binary fractions (exact in float), identities
//    (RoPE at position 0) and untouched outputs (causality).
//  * kClosedForm = 1e-6 absolute where a closed form is evaluated in double
//    and the reference rounds O(1) intermediates to float a few times (each
//    rounding costs at most 6e-8 relative).
//  * kTwoPaths = 1e-5 absolute where two reference paths with different
//    float roundings are compared (e.g. RoPE at shifted absolute positions).
//
//===----------------------------------------------------------------------===//

#include "lib/Reference/Reference.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

using namespace switchyard::reference;

namespace {

constexpr double kClosedForm = 1e-6;
constexpr double kTwoPaths = 1e-5;

/// A portable SplitMix64 stream (the C++ distributions are not portable).
class Random {
public:
  explicit Random(uint64_t seed) : state(seed) {}

  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1).
  double uniform() { return double(next() >> 11) * 0x1p-53 * 2.0 - 1.0; }
  /// Uniform integer in [lo, hi].
  int64_t integer(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % uint64_t(hi - lo + 1));
  }

private:
  uint64_t state;
};

Tensor randomTensor(std::vector<int64_t> shape, Random &rng,
                    double scale = 1.0) {
  Tensor t(std::move(shape));
  for (float &v : t.data)
    v = float(scale * rng.uniform());
  return t;
}

/// Small integers, so that sums of products are exact in float.
Tensor integerTensor(std::vector<int64_t> shape, Random &rng) {
  Tensor t(std::move(shape));
  for (float &v : t.data)
    v = float(rng.integer(-3, 3));
  return t;
}

Norm unitNorm(int64_t width) {
  return {Tensor({width}, 1.0f), Tensor({width}, 0.0f)};
}

Norm randomNorm(int64_t width, Random &rng) {
  Norm norm{Tensor({width}), Tensor({width})};
  for (int64_t d = 0; d < width; ++d) {
    norm.weight.data[d] = float(1.0 + 0.3 * rng.uniform());
    norm.bias.data[d] = float(0.2 * rng.uniform());
  }
  return norm;
}

void expectAllNear(const Tensor &actual, const Tensor &expected,
                   double tolerance) {
  ASSERT_EQ(actual.shape, expected.shape);
  for (size_t i = 0; i < actual.data.size(); ++i)
    EXPECT_NEAR(actual.data[i], expected.data[i], tolerance)
        << "at flat index " << i;
}

/// x[:, from:, :] of a [B, T, D] tensor.
Tensor sliceTime(const Tensor &x, int64_t from) {
  int64_t batch = x.shape[0], time = x.shape[1], width = x.shape[2];
  Tensor y({batch, time - from, width});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = from; t < time; ++t)
      for (int64_t d = 0; d < width; ++d)
        y.at({b, t - from, d}) = x.at({b, t, d});
  return y;
}

/// [a; b] along the time dimension of [B, T, D] tensors.
Tensor concatTime(const Tensor &a, const Tensor &b) {
  int64_t batch = a.shape[0], ta = a.shape[1], tb = b.shape[1];
  int64_t width = a.shape[2];
  Tensor y({batch, ta + tb, width});
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t t = 0; t < ta + tb; ++t)
      for (int64_t d = 0; d < width; ++d)
        y.at({n, t, d}) = t < ta ? a.at({n, t, d}) : b.at({n, t - ta, d});
  return y;
}

/// `row · wᵀ` for a row of width D and w [out, D], in double.
std::vector<double> timesTransposed(const std::vector<double> &row,
                                    const Tensor &w) {
  int64_t out = w.shape[0], in = w.shape[1];
  std::vector<double> y(static_cast<size_t>(out), 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      y[o] += row[i] * w.at({o, i});
  return y;
}

/// Row (b, t) of a [B, T, D] tensor, in double.
std::vector<double> rowOf(const Tensor &x, int64_t b, int64_t t) {
  std::vector<double> row;
  for (int64_t d = 0; d < x.shape[2]; ++d)
    row.push_back(x.at({b, t, d}));
  return row;
}

double sigmoidOf(double z) { return 1.0 / (1.0 + std::exp(-z)); }

const Pos kAllPos[] = {Pos::none, Pos::rope, Pos::xl};

/// No memory, then memory m.
std::vector<const Tensor *> withAndWithout(const Tensor &m) {
  return {nullptr, &m};
}

std::string nameOf(Pos pos) {
  return pos == Pos::none ? "none" : pos == Pos::rope ? "rope" : "xl";
}

MhaParams randomMha(int64_t width, int64_t heads, int64_t headDim,
                    Random &rng) {
  int64_t hf = heads * headDim;
  MhaParams p;
  p.norm = randomNorm(width, rng);
  p.q = randomTensor({hf, width}, rng, 0.6);
  p.k = randomTensor({hf, width}, rng, 0.6);
  p.v = randomTensor({hf, width}, rng, 0.5);
  p.o = randomTensor({width, hf}, rng, 0.5);
  p.pos = randomTensor({hf, width}, rng, 0.6);
  return p;
}

SwitchHeadParams randomSwitchHead(int64_t width, int64_t heads, int64_t experts,
                                  int64_t headDim, Random &rng) {
  int64_t hf = heads * headDim, he = heads * experts;
  SwitchHeadParams p;
  p.norm = randomNorm(width, rng);
  p.q = randomTensor({hf, width}, rng, 0.6);
  p.k = randomTensor({hf, width}, rng, 0.6);
  p.v = randomTensor({he, width, headDim}, rng, 0.5);
  p.o = randomTensor({he, headDim, width}, rng, 0.5);
  p.sel_v = randomTensor({he, width}, rng, 0.8);
  p.sel_o = randomTensor({he, width}, rng, 0.8);
  p.pos = randomTensor({hf, width}, rng, 0.6);
  return p;
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

TEST(ReferenceTest, TensorsAreRowMajor) {
  Tensor t({2, 3, 4}, 1.5f);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.data, std::vector<float>(24, 1.5f));
  t.at({1, 2, 3}) = 7.0f;
  t.at({0, 1, 2}) = 8.0f;
  EXPECT_EQ(t.data[23], 7.0f);
  EXPECT_EQ(t.data[6], 8.0f);
  Tensor r = reshape(t, {6, 4});
  EXPECT_EQ(r.at({5, 3}), 7.0f);
  Tensor f = Tensor::fromData({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(f.at({1, 0}), 3.0f);
  IndexTensor i{{2, 3}, {0, 1, 2, 3, 4, 5}};
  EXPECT_EQ(i.numel(), 6);
  EXPECT_EQ(i.at({1, 1}), 4);
  EXPECT_EQ(Tensor(std::vector<int64_t>{}).numel(), 1);
}

//===----------------------------------------------------------------------===//
// moe ops
//===----------------------------------------------------------------------===//

TEST(ReferenceTest, GateOfZeroWeightIsOneHalf) {
  Random rng(1);
  Tensor scores = gate(randomTensor({3, 4}, rng), Tensor({5, 4}));
  EXPECT_EQ(scores.shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(scores.data, std::vector<float>(15, 0.5f));
}

TEST(ReferenceTest, GateIsSigmoidOfProducts) {
  Tensor x = Tensor::fromData({2, 2}, {1, 2, -1, 0.5f});
  Tensor w = Tensor::fromData({3, 2}, {1, 0, 0.5f, -1, 2, 2});
  // z = x·wᵀ by hand.
  const double z[2][3] = {{1, -1.5, 6}, {-1, -1, -1}};
  Tensor s = gate(x, w);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t g = 0; g < 3; ++g)
      EXPECT_NEAR(s.at({n, g}), 1 / (1 + std::exp(-z[n][g])), kClosedForm);
  // Leading dimensions are kept.
  EXPECT_EQ(gate(reshape(x, {1, 2, 2}), w).shape,
            (std::vector<int64_t>{1, 2, 3}));
}

TEST(ReferenceTest, TopkOrdersDescending) {
  Tensor s = Tensor::fromData({1, 5}, {0.1f, 0.9f, 0.3f, 0.7f, 0.5f});
  Tensor values;
  IndexTensor indices;
  topk(s, 3, nullptr, values, indices);
  EXPECT_EQ(indices.shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(indices.data, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(values.data, (std::vector<float>{0.9f, 0.7f, 0.5f}));
}

TEST(ReferenceTest, TopkTiesGoToTheLowerIndex) {
  Tensor s = Tensor::fromData({1, 5}, {0.5f, 0.7f, 0.5f, 0.7f, 0.5f});
  Tensor values;
  IndexTensor indices;
  topk(s, 4, nullptr, values, indices);
  EXPECT_EQ(indices.data, (std::vector<int64_t>{1, 3, 0, 2}));
  EXPECT_EQ(values.data, (std::vector<float>{0.7f, 0.7f, 0.5f, 0.5f}));
}

TEST(ReferenceTest, TopkMaskExcludesButReportsUnmaskedScores) {
  Tensor s = Tensor::fromData({1, 4}, {0.9f, 0.8f, 0.7f, 0.6f});
  std::vector<bool> mask = {true, false, false, true};
  Tensor values;
  IndexTensor indices;
  topk(s, 2, &mask, values, indices);
  EXPECT_EQ(indices.data, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(values.data, (std::vector<float>{0.8f, 0.7f}));
  // With k = E the masked experts fill the last slots in index order and
  // still report their own scores.
  topk(s, 4, &mask, values, indices);
  EXPECT_EQ(indices.data, (std::vector<int64_t>{1, 2, 0, 3}));
  EXPECT_EQ(values.data, (std::vector<float>{0.8f, 0.7f, 0.9f, 0.6f}));
  // Everything masked: index order.
  std::vector<bool> all(4, true);
  topk(s, 3, &all, values, indices);
  EXPECT_EQ(indices.data, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(values.data, (std::vector<float>{0.9f, 0.8f, 0.7f}));
}

TEST(ReferenceTest, TopkWithKEqualToEIsAStableDescendingSort) {
  // Scores from a coarse grid so that ties are frequent.
  Random rng(2);
  Tensor s({2, 3, 6});
  for (float &v : s.data)
    v = float(rng.integer(0, 3)) / 4.0f;
  Tensor values;
  IndexTensor indices;
  topk(s, 6, nullptr, values, indices);
  EXPECT_EQ(indices.shape, (std::vector<int64_t>{2, 3, 6}));
  for (int64_t row = 0; row < 6; ++row) {
    std::vector<int64_t> order(6);
    std::iota(order.begin(), order.end(), 0);
    // Descending score, then ascending index: a stable descending sort.
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      float sa = s.data[row * 6 + a], sb = s.data[row * 6 + b];
      return sa > sb || (sa == sb && a < b);
    });
    for (int64_t j = 0; j < 6; ++j) {
      EXPECT_EQ(indices.data[row * 6 + j], order[j]);
      EXPECT_EQ(values.data[row * 6 + j], s.data[row * 6 + order[j]]);
    }
  }
  topk(s, 0, nullptr, values, indices);
  EXPECT_EQ(indices.shape, (std::vector<int64_t>{2, 3, 0}));
  EXPECT_TRUE(indices.data.empty());
}

TEST(ReferenceTest, ExpertProjWithOneHotGatesIsOneMatmul) {
  // N = 3, D = 4, H = 2, E = 3, F = 2, K = 1; integer data: exact.
  Random rng(3);
  Tensor x = integerTensor({3, 4}, rng);
  Tensor w = integerTensor({6, 4, 2}, rng);
  Tensor gates({3, 2, 1}, 1.0f);
  IndexTensor idx{{3, 2, 1}, {0, 2, 1, 1, 2, 0}};
  Tensor out = expertProj(x, w, gates, idx);
  ASSERT_EQ(out.shape, (std::vector<int64_t>{3, 2, 2}));
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t h = 0; h < 2; ++h) {
      // The matmul x[n] · W[h·E + i] as a single [D] x [D, F] product.
      int64_t expert = h * 3 + idx.at({n, h, 0});
      for (int64_t f = 0; f < 2; ++f) {
        float expected = 0;
        for (int64_t d = 0; d < 4; ++d)
          expected += x.at({n, d}) * w.at({expert, d, f});
        EXPECT_EQ(out.at({n, h, f}), expected);
      }
    }
}

TEST(ReferenceTest, ExpertProjIsLinearInTheGates) {
  // Gates 0.5 and 0.25 (binary fractions): exact. The result must be the
  // gated sum of two one-hot projections.
  Random rng(4);
  Tensor x = integerTensor({2, 3}, rng);
  Tensor w = integerTensor({4, 3, 5}, rng); // H = 2, E = 2
  Tensor gates = Tensor::fromData(
      {2, 2, 2}, {0.5f, 0.25f, 0.5f, 0.25f, 0.5f, 0.25f, 0.5f, 0.25f});
  IndexTensor idx{{2, 2, 2}, {1, 0, 0, 1, 0, 1, 1, 0}};
  Tensor both = expertProj(x, w, gates, idx);
  for (int64_t j = 0; j < 2; ++j) {
    // Slot j alone, with gate 1.
    Tensor one({2, 2, 1}, 1.0f);
    IndexTensor single{{2, 2, 1}, {}};
    for (int64_t r = 0; r < 4; ++r)
      single.data.push_back(idx.data[r * 2 + j]);
    Tensor part = expertProj(x, w, one, single);
    for (int64_t i = 0; i < both.numel(); ++i)
      both.data[i] -= (j == 0 ? 0.5f : 0.25f) * part.data[i];
  }
  EXPECT_EQ(both.data, std::vector<float>(both.data.size(), 0.0f));
}

TEST(ReferenceTest, ExpertMergeWithOneExpertIsAPlainMatmul) {
  Random rng(5);
  Tensor heads = integerTensor({3, 1, 4}, rng);
  Tensor w = integerTensor({1, 4, 5}, rng);
  Tensor y = expertMerge(heads, w, Tensor({3, 1, 1}, 1.0f),
                         IndexTensor{{3, 1, 1}, {0, 0, 0}});
  ASSERT_EQ(y.shape, (std::vector<int64_t>{3, 5}));
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t d = 0; d < 5; ++d) {
      float expected = 0;
      for (int64_t f = 0; f < 4; ++f)
        expected += heads.at({n, 0, f}) * w.at({0, f, d});
      EXPECT_EQ(y.at({n, d}), expected);
    }
}

TEST(ReferenceTest, ExpertMergeSumsOverHeadsLikeAConcatenation) {
  // H = 2, E = 1: merge equals concat_h(o) · [W[0]; W[1]].
  Random rng(6);
  Tensor heads = integerTensor({2, 2, 3}, rng);
  Tensor w = integerTensor({2, 3, 4}, rng);
  Tensor y = expertMerge(heads, w, Tensor({2, 2, 1}, 1.0f),
                         IndexTensor{{2, 2, 1}, {0, 0, 0, 0}});
  Tensor concat = reshape(heads, {2, 6});
  Tensor stacked = reshape(w, {6, 4});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t d = 0; d < 4; ++d) {
      float expected = 0;
      for (int64_t c = 0; c < 6; ++c)
        expected += concat.at({n, c}) * stacked.at({c, d});
      EXPECT_EQ(y.at({n, d}), expected);
    }
  // Gate 0.5 on head 1 only halves its contribution; a route of another
  // expert index reads row h·E + e.
  Tensor w2 = integerTensor({4, 3, 4}, rng); // H = 2, E = 2
  Tensor g = Tensor::fromData({1, 2, 1}, {1.0f, 0.5f});
  Tensor first({1, 2, 3}); // token 0 of heads
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t f = 0; f < 3; ++f)
      first.at({0, a, f}) = heads.at({0, a, f});
  Tensor y2 = expertMerge(first, w2, g, IndexTensor{{1, 2, 1}, {1, 0}});
  for (int64_t d = 0; d < 4; ++d) {
    float expected = 0;
    for (int64_t f = 0; f < 3; ++f)
      expected += heads.at({0, 0, f}) * w2.at({1, f, d}) +
                  0.5f * heads.at({0, 1, f}) * w2.at({2, f, d});
    EXPECT_EQ(y2.at({0, d}), expected);
  }
}

TEST(ReferenceTest, ExpertMlpByHand) {
  // D = 2, G = 2, E = 2, K = 2.
  Tensor x = Tensor::fromData({2, 2}, {1, -1, 2, 1});
  Tensor up = Tensor::fromData({2, 2, 2}, {1, 2, 3, 4, 1, 0, 0, -1});
  Tensor down = Tensor::fromData({2, 2, 2}, {1, 0, 0, 1, 1, 2, 3, 4});
  Tensor gates = Tensor::fromData({2, 2}, {0.5f, 0.25f, 1.0f, 0.5f});
  IndexTensor idx{{2, 2}, {1, 0, 0, 1}};
  // Token 0: x·up[1] = [1, 1] -> ·down[1] = [4, 6]; x·up[0] = [-2, -2] is
  // cut by the ReLU. 0.5·[4, 6] = [2, 3].
  // Token 1: x·up[0] = [5, 8] -> ·down[0] = [5, 8]; x·up[1] = [2, -1] ->
  // ReLU [2, 0] -> ·down[1] = [2, 4]. [5, 8] + 0.5·[2, 4] = [6, 10].
  Tensor y = expertMlp(x, up, down, gates, idx);
  EXPECT_EQ(y.data, (std::vector<float>{2, 3, 6, 10}));
}

//===----------------------------------------------------------------------===//
// Simple layers
//===----------------------------------------------------------------------===//

TEST(ReferenceTest, EmbedCopiesRows) {
  Tensor w = Tensor::fromData({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor y = embed(IndexTensor{{2, 2}, {2, 0, 1, 2}}, w);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(y.data, (std::vector<float>{5, 6, 1, 2, 3, 4, 5, 6}));
}

TEST(ReferenceTest, LayerNormByHand) {
  // [1, 2, 3]: mean 2, biased variance 2/3.
  Tensor x = Tensor::fromData({1, 3}, {1, 2, 3});
  Tensor y = layerNorm(x, Tensor({3}, 1.0f), Tensor({3}, 0.0f));
  double inv = 1 / std::sqrt(2.0 / 3.0 + 1e-5);
  EXPECT_NEAR(y.data[0], -inv, kClosedForm);
  EXPECT_NEAR(y.data[1], 0.0, kClosedForm);
  EXPECT_NEAR(y.data[2], inv, kClosedForm);
  // A constant row normalises to 0 (the eps keeps it finite); then bias.
  Tensor c =
      layerNorm(Tensor({1, 4}, 3.0f), Tensor({4}, 2.0f), Tensor({4}, 0.25f));
  EXPECT_EQ(c.data, std::vector<float>(4, 0.25f));
}

TEST(ReferenceTest, LayerNormHasZeroMeanAndUnitVarianceBeforeTheAffine) {
  Random rng(7);
  Tensor x = randomTensor({2, 3, 8}, rng, 3.0);
  Tensor y = layerNorm(x, Tensor({8}, 1.0f), Tensor({8}, 0.0f));
  Norm affine = randomNorm(8, rng);
  Tensor z = layerNorm(x, affine.weight, affine.bias);
  for (int64_t row = 0; row < 6; ++row) {
    double mean = 0, var = 0, outMean = 0, outVar = 0;
    for (int64_t d = 0; d < 8; ++d) {
      mean += x.data[row * 8 + d] / 8.0;
      outMean += y.data[row * 8 + d] / 8.0;
    }
    for (int64_t d = 0; d < 8; ++d) {
      var += std::pow(x.data[row * 8 + d] - mean, 2) / 8.0;
      outVar += std::pow(y.data[row * 8 + d] - outMean, 2) / 8.0;
    }
    EXPECT_NEAR(outMean, 0.0, kClosedForm);
    // Exactly var / (var + eps) in exact arithmetic.
    EXPECT_NEAR(outVar, var / (var + 1e-5), kClosedForm);
    for (int64_t d = 0; d < 8; ++d)
      EXPECT_NEAR(z.data[row * 8 + d],
                  y.data[row * 8 + d] * affine.weight.data[d] +
                      affine.bias.data[d],
                  kClosedForm);
  }
}

TEST(ReferenceTest, OutputIsAMatmulWithTheTransposedWeight) {
  Tensor x = Tensor::fromData({1, 2, 2}, {1, 2, -1, 3});
  Tensor w = Tensor::fromData({3, 2}, {1, 0, 0, 1, 2, -1});
  Tensor logits = output(x, w);
  EXPECT_EQ(logits.shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(logits.data, (std::vector<float>{1, 2, 0, -1, 3, -5}));
}

TEST(ReferenceTest, CrossEntropyByHand) {
  // Uniform logits: log V whatever the target.
  Tensor uniform({2, 3, 7}, 3.0f);
  IndexTensor targets{{2, 3}, {0, 1, 2, 3, 4, 6}};
  EXPECT_NEAR(crossEntropy(uniform, targets), std::log(7.0), 1e-12);
  // Rows [0, 2] with targets 1 and 0: log(1 + e^-2) and log(1 + e^2).
  Tensor logits = Tensor::fromData({1, 2, 2}, {0, 2, 0, 2});
  double expected =
      (std::log1p(std::exp(-2.0)) + std::log1p(std::exp(2.0))) / 2;
  EXPECT_NEAR(crossEntropy(logits, IndexTensor{{1, 2}, {1, 0}}), expected,
              1e-12);
}

TEST(ReferenceTest, FfnByHand) {
  // x = [3, 1]: mean 2, variance 1, so LN(x) = [s, -s], s = 1/sqrt(1 + eps).
  Tensor x = Tensor::fromData({1, 1, 2}, {3, 1});
  Tensor up = Tensor::fromData({3, 2}, {1, 0, 0, 1, 1, 1});
  Tensor down = Tensor::fromData({2, 3}, {2, 5, 7, -1, 3, 4});
  // h·upᵀ = [s, -s, 0] -> ReLU [s, 0, 0] -> ·downᵀ = [2s, -s].
  double s = 1 / std::sqrt(1 + 1e-5);
  Tensor y = ffnBlock(x, unitNorm(2), up, down);
  EXPECT_NEAR(y.data[0], 3 + 2 * s, kClosedForm);
  EXPECT_NEAR(y.data[1], 1 - s, kClosedForm);
  // A zero down-projection leaves the residual stream untouched.
  Random rng(8);
  Tensor r = randomTensor({2, 3, 2}, rng);
  EXPECT_EQ(ffnBlock(r, unitNorm(2), up, Tensor({2, 3})).data, r.data);
}

/// The branch of expert e of a σ-MoE as a dense FFN: ffn(x) − x with
/// up[e]ᵀ and down[e]ᵀ.
Tensor expertAsFfnBranch(const Tensor &x, const Norm &norm, const Tensor &up,
                         const Tensor &down, int64_t e) {
  int64_t width = up.shape[1], hidden = up.shape[2];
  Tensor upT({hidden, width}), downT({width, hidden});
  for (int64_t d = 0; d < width; ++d)
    for (int64_t g = 0; g < hidden; ++g) {
      upT.at({g, d}) = up.at({e, d, g});
      downT.at({d, g}) = down.at({e, g, d});
    }
  Tensor y = ffnBlock(x, norm, upT, downT);
  for (int64_t i = 0; i < y.numel(); ++i)
    y.data[i] -= x.data[i];
  return y;
}

TEST(ReferenceTest, SigmaMoeWithAZeroRouterTakesTheLowestExperts) {
  // All scores are 0.5, so the ties pick experts 0 .. k-1 with gate 0.5.
  Random rng(9);
  int64_t width = 4, experts = 3, hidden = 5;
  Tensor x = randomTensor({2, 3, width}, rng);
  Norm norm = randomNorm(width, rng);
  Tensor up = randomTensor({experts, width, hidden}, rng);
  Tensor down = randomTensor({experts, hidden, width}, rng);
  Tensor y = sigmaMoeBlock(x, norm, Tensor({experts, width}), up, down, 2);
  Tensor b0 = expertAsFfnBranch(x, norm, up, down, 0);
  Tensor b1 = expertAsFfnBranch(x, norm, up, down, 1);
  Tensor expected = x;
  for (int64_t i = 0; i < x.numel(); ++i)
    expected.data[i] += 0.5f * (b0.data[i] + b1.data[i]);
  expectAllNear(y, expected, kTwoPaths);
}

TEST(ReferenceTest, SigmaMoeWithKEqualToEIsTheScoreWeightedSum) {
  Random rng(10);
  int64_t width = 4, experts = 3, hidden = 5;
  Tensor x = randomTensor({1, 4, width}, rng);
  Norm norm = randomNorm(width, rng);
  Tensor sel = randomTensor({experts, width}, rng);
  Tensor up = randomTensor({experts, width, hidden}, rng);
  Tensor down = randomTensor({experts, hidden, width}, rng);
  Tensor y = sigmaMoeBlock(x, norm, sel, up, down, experts);
  Tensor h = layerNorm(x, norm.weight, norm.bias);
  Tensor expected = x;
  for (int64_t e = 0; e < experts; ++e) {
    Tensor branch = expertAsFfnBranch(x, norm, up, down, e);
    for (int64_t t = 0; t < 4; ++t) {
      double score = sigmoidOf(timesTransposed(rowOf(h, 0, t), sel)[e]);
      for (int64_t d = 0; d < width; ++d)
        expected.at({0, t, d}) += float(score * branch.at({0, t, d}));
    }
  }
  expectAllNear(y, expected, kTwoPaths);
}

//===----------------------------------------------------------------------===//
// Positional encodings
//===----------------------------------------------------------------------===//

TEST(ReferenceTest, RopeAtPositionZeroIsTheIdentity) {
  Random rng(11);
  std::vector<float> row = randomTensor({24}, rng).data;
  for (int64_t headDim : {1, 2, 3, 4, 6, 8, 12}) {
    std::vector<float> rotated = row;
    applyRope(rotated, headDim, 0);
    EXPECT_EQ(rotated, row) << "head_dim " << headDim;
  }
}

TEST(ReferenceTest, RopeRotatesTheFirstHalfOfEachHead) {
  // F = 8: r = 4, pairs (0, 2) with θ = p and (1, 3) with θ = p/100;
  // channels 4 … 7 unchanged. Two heads.
  Random rng(12);
  std::vector<float> row = randomTensor({16}, rng).data;
  std::vector<float> rotated = row;
  int64_t p = 5;
  applyRope(rotated, 8, p);
  for (int64_t a = 0; a < 2; ++a) {
    const float *in = row.data() + 8 * a;
    const float *out = rotated.data() + 8 * a;
    for (int64_t i = 0; i < 2; ++i) {
      double theta = i == 0 ? p : p / 100.0;
      EXPECT_NEAR(out[i], in[i] * std::cos(theta) - in[i + 2] * std::sin(theta),
                  kClosedForm);
      EXPECT_NEAR(out[i + 2],
                  in[i + 2] * std::cos(theta) + in[i] * std::sin(theta),
                  kClosedForm);
    }
    for (int64_t i = 4; i < 8; ++i)
      EXPECT_EQ(out[i], in[i]);
  }
  // F = 6: r = 2·floor(6/4) = 2, one pair (0, 1); F = 2 and 3: no pair.
  std::vector<float> six(row.begin(), row.begin() + 6), sixRotated = six;
  applyRope(sixRotated, 6, 1);
  EXPECT_NEAR(sixRotated[0], six[0] * std::cos(1.0) - six[1] * std::sin(1.0),
              kClosedForm);
  EXPECT_NEAR(sixRotated[1], six[1] * std::cos(1.0) + six[0] * std::sin(1.0),
              kClosedForm);
  EXPECT_EQ(std::vector<float>(sixRotated.begin() + 2, sixRotated.end()),
            std::vector<float>(six.begin() + 2, six.end()));
  for (int64_t headDim : {2, 3}) {
    std::vector<float> small(row.begin(), row.begin() + 6), same = small;
    applyRope(same, headDim, 7);
    EXPECT_EQ(same, small);
  }
}

TEST(ReferenceTest, RopeScoresDependOnlyOnRelativePosition) {
  Random rng(13);
  std::vector<float> q = randomTensor({16}, rng).data;
  std::vector<float> k = randomTensor({16}, rng).data;
  auto score = [&](int64_t pq, int64_t pk) {
    std::vector<float> a = q, b = k;
    applyRope(a, 16, pq);
    applyRope(b, 16, pk);
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i)
      s += double(a[i]) * b[i];
    return s;
  };
  EXPECT_NEAR(score(3, 1), score(10, 8), kTwoPaths);
  EXPECT_NEAR(score(0, -4), score(20, 16), kTwoPaths);
  EXPECT_GT(std::abs(score(3, 1) - score(3, 2)), 1e-3);
}

TEST(ReferenceTest, SinusoidByDefinition) {
  // The official SwitchHeadXL's table: sin at the even channels, cos at the
  // odd ones, of the relative position p = key − query. D = 6:
  // ω = 1, 10000^(-1/3), 10000^(-2/3).
  EXPECT_EQ(sinusoid(0, 6).data, (std::vector<float>{0, 1, 0, 1, 0, 1}));
  for (int64_t p : {-3, 2}) {
    Tensor pe = sinusoid(p, 6);
    for (int64_t i = 0; i < 3; ++i) {
      double omega = std::pow(10000.0, -i / 3.0);
      EXPECT_NEAR(pe.data[2 * i], std::sin(p * omega), kClosedForm);
      EXPECT_NEAR(pe.data[2 * i + 1], std::cos(p * omega), kClosedForm);
    }
  }
  // A key behind the query: sin is odd, cos even.
  EXPECT_NEAR(sinusoid(-3, 6).data[0], -std::sin(3.0), kClosedForm);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

TEST(ReferenceTest, AttentionOverOneTokenIsTheValuePath) {
  // A single key gets softmax weight 1 whatever the positional term:
  // y = x + (LN(x)·Wvᵀ)·Woᵀ.
  Random rng(14);
  int64_t width = 6, heads = 2, headDim = 3;
  Tensor x = randomTensor({2, 1, width}, rng);
  MhaParams p = randomMha(width, heads, headDim, rng);
  Tensor h = layerNorm(x, p.norm.weight, p.norm.bias);
  Tensor expected = x;
  for (int64_t b = 0; b < 2; ++b) {
    std::vector<double> branch =
        timesTransposed(timesTransposed(rowOf(h, b, 0), p.v), p.o);
    for (int64_t d = 0; d < width; ++d)
      expected.at({b, 0, d}) += float(branch[d]);
  }
  for (Pos pos : kAllPos) {
    SCOPED_TRACE(nameOf(pos));
    expectAllNear(mhaBlock(x, p, heads, headDim, pos, nullptr), expected,
                  kClosedForm);
  }
}

/// The k experts of head a with the largest router logits z[a·E + e]
/// (distinct logits assumed; sigmoid is monotonic).
std::vector<int64_t> topByHand(const std::vector<double> &z, int64_t a,
                               int64_t experts, int64_t k) {
  std::vector<int64_t> order(experts);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
    return z[a * experts + i] > z[a * experts + j];
  });
  order.resize(k);
  return order;
}

/// The value of head a for the normalised source row h:
/// Σ_{e ∈ top-k(sV)} sV[e]·h·W_v[a·E + e].
std::vector<double> valueByHand(const std::vector<double> &h,
                                const SwitchHeadParams &p, int64_t a,
                                int64_t experts, int64_t k) {
  int64_t width = p.v.shape[1], headDim = p.v.shape[2];
  std::vector<double> z = timesTransposed(h, p.sel_v);
  std::vector<double> v(headDim, 0.0);
  for (int64_t e : topByHand(z, a, experts, k))
    for (int64_t f = 0; f < headDim; ++f)
      for (int64_t d = 0; d < width; ++d)
        v[f] += sigmoidOf(z[a * experts + e]) * h[d] *
                p.v.at({a * experts + e, d, f});
  return v;
}

/// The SwitchHead branch for the normalised destination row h and the
/// attention outputs o[a] of each head:
/// Σ_a Σ_{e ∈ top-k(sO)} sO[e]·o[a]·W_o[a·E + e].
std::vector<double> mergeByHand(const std::vector<double> &h,
                                const std::vector<std::vector<double>> &o,
                                const SwitchHeadParams &p, int64_t experts,
                                int64_t k) {
  int64_t headDim = p.o.shape[1], width = p.o.shape[2];
  std::vector<double> z = timesTransposed(h, p.sel_o);
  std::vector<double> y(width, 0.0);
  for (int64_t a = 0; a < static_cast<int64_t>(o.size()); ++a)
    for (int64_t e : topByHand(z, a, experts, k))
      for (int64_t d = 0; d < width; ++d)
        for (int64_t f = 0; f < headDim; ++f)
          y[d] += sigmoidOf(z[a * experts + e]) * o[a][f] *
                  p.o.at({a * experts + e, f, d});
  return y;
}

TEST(ReferenceTest, SwitchHeadOverOneTokenRoutesByHand) {
  // T = 1: the single key has weight 1, so o[a] is the token's own value.
  Random rng(15);
  int64_t width = 4, heads = 2, experts = 3, k = 2, headDim = 2;
  Tensor x = randomTensor({1, 1, width}, rng);
  SwitchHeadParams p = randomSwitchHead(width, heads, experts, headDim, rng);
  std::vector<double> h = rowOf(layerNorm(x, p.norm.weight, p.norm.bias), 0, 0);
  std::vector<std::vector<double>> o;
  for (int64_t a = 0; a < heads; ++a)
    o.push_back(valueByHand(h, p, a, experts, k));
  std::vector<double> y = mergeByHand(h, o, p, experts, k);
  for (Pos pos : kAllPos) {
    SCOPED_TRACE(nameOf(pos));
    Tensor out =
        switchHeadBlock(x, p, heads, experts, k, headDim, pos, nullptr);
    for (int64_t d = 0; d < width; ++d)
      EXPECT_NEAR(out.at({0, 0, d}), x.at({0, 0, d}) + y[d], kClosedForm);
  }
}

TEST(ReferenceTest, SwitchHeadRoutesValuesPerSourceRowAndOutputsPerQuery) {
  // Wq = Wk = 0 and no positions: query t averages the values of its
  // M + t + 1 visible source rows, each routed by its own (memory or
  // current) source-side scores; the output experts follow the query row.
  Random rng(20);
  int64_t width = 6, heads = 2, experts = 4, k = 2, headDim = 3, time = 3;
  int64_t mem = 2;
  Tensor x = randomTensor({1, time, width}, rng);
  Tensor m = randomTensor({1, mem, width}, rng);
  SwitchHeadParams p = randomSwitchHead(width, heads, experts, headDim, rng);
  p.q = Tensor({heads * headDim, width});
  p.k = Tensor({heads * headDim, width});
  Tensor source = layerNorm(concatTime(m, x), p.norm.weight, p.norm.bias);
  Tensor y = switchHeadBlock(x, p, heads, experts, k, headDim, Pos::none, &m);
  for (int64_t t = 0; t < time; ++t) {
    int64_t visible = mem + t + 1;
    std::vector<std::vector<double>> o(heads,
                                       std::vector<double>(headDim, 0.0));
    for (int64_t u = 0; u < visible; ++u)
      for (int64_t a = 0; a < heads; ++a) {
        std::vector<double> v =
            valueByHand(rowOf(source, 0, u), p, a, experts, k);
        for (int64_t f = 0; f < headDim; ++f)
          o[a][f] += v[f] / double(visible);
      }
    std::vector<double> branch =
        mergeByHand(rowOf(source, 0, mem + t), o, p, experts, k);
    for (int64_t d = 0; d < width; ++d)
      EXPECT_NEAR(y.at({0, t, d}), x.at({0, t, d}) + branch[d], kClosedForm);
  }
}

TEST(ReferenceTest, AttentionWithZeroQueriesAveragesTheVisibleValues) {
  // Wq = Wk = 0 and no positions: query t weighs its M + t + 1 visible keys
  // equally, memory keys (normalised with the block norm) included.
  Random rng(16);
  int64_t width = 4, heads = 2, headDim = 2, time = 3, mem = 2;
  Tensor x = randomTensor({1, time, width}, rng);
  Tensor m = randomTensor({1, mem, width}, rng);
  MhaParams p = randomMha(width, heads, headDim, rng);
  p.q = Tensor({4, width});
  p.k = Tensor({4, width});
  for (const Tensor *memory : withAndWithout(m)) {
    int64_t visibleMem = memory ? mem : 0;
    Tensor source = memory ? concatTime(m, x) : x;
    Tensor hs = layerNorm(source, p.norm.weight, p.norm.bias);
    Tensor y = mhaBlock(x, p, heads, headDim, Pos::none, memory);
    for (int64_t t = 0; t < time; ++t) {
      std::vector<double> mean(4, 0.0);
      int64_t visible = visibleMem + t + 1;
      for (int64_t u = 0; u < visible; ++u) {
        std::vector<double> v = timesTransposed(rowOf(hs, 0, u), p.v);
        for (int64_t c = 0; c < 4; ++c)
          mean[c] += v[c] / double(visible);
      }
      std::vector<double> branch = timesTransposed(mean, p.o);
      for (int64_t d = 0; d < width; ++d)
        EXPECT_NEAR(y.at({0, t, d}), x.at({0, t, d}) + branch[d], kClosedForm);
    }
  }
}

TEST(ReferenceTest, RopeAttentionByHand) {
  // D = F = 4, H = 1, identity projections, c = 4^(-1/4), c² = 1/2.
  // x0 = [1, -1, 1, -1] and x1 = [1, 1, -1, -1] have mean 0 and variance 1,
  // so h_t = s·x_t with s = 1/sqrt(1 + eps). RoPE rotates the pair (0, 1) by
  // θ = position. Query 1 against key 0: c²s²·(−2 sin 1) (0 without RoPE);
  // against key 1: c²s²·4.
  Tensor x = Tensor::fromData({1, 2, 4}, {1, -1, 1, -1, 1, 1, -1, -1});
  Tensor eye({4, 4});
  for (int64_t i = 0; i < 4; ++i)
    eye.at({i, i}) = 1;
  MhaParams p{unitNorm(4), eye, eye, eye, eye, Tensor()};
  double s = 1 / std::sqrt(1 + 1e-5), s2 = s * s / 2;
  for (Pos pos : {Pos::none, Pos::rope}) {
    SCOPED_TRACE(nameOf(pos));
    double score10 = pos == Pos::rope ? s2 * -2 * std::sin(1.0) : 0.0;
    double score11 = s2 * 4;
    double a0 = std::exp(score10) / (std::exp(score10) + std::exp(score11));
    Tensor y = mhaBlock(x, p, 1, 4, pos, nullptr);
    for (int64_t d = 0; d < 4; ++d) {
      double x0 = x.at({0, 0, d}), x1 = x.at({0, 1, d});
      EXPECT_NEAR(y.at({0, 0, d}), x0 + s * x0, kClosedForm);
      EXPECT_NEAR(y.at({0, 1, d}), x1 + a0 * s * x0 + (1 - a0) * s * x1,
                  kClosedForm);
    }
  }
}

TEST(ReferenceTest, XlAttentionByHand) {
  // D = 2, H = 1, F = 1 or 16, c = F^(-1/4). x0 = [1, -1], x1 = [-1, 1] so
  // h0 = [s, -s] and h1 = [-s, s]. Only channel 0 of the head is used:
  // Wq[0] = [1, 0], Wk = 0, Wv[0] = [1, 0], Wo[0, 0] = 1, and W_pos[0] reads
  // one channel of the encoding of p = key − query: channel 0 is sin p,
  // channel 1 cos p (the official layout). So q1[0] = -c·s and
  // kp(p)[0] = c·sin p or c·cos p. Query 1 scores key 0 (p = −1) with
  // -c²·s·sin(−1) or -c²·s·cos 1, and key 1 (p = 0) with 0 or -c²·s; the
  // values are v0 = s and v1 = -s.
  Tensor x = Tensor::fromData({1, 2, 2}, {1, -1, -1, 1});
  double s = 1 / std::sqrt(1 + 1e-5);
  for (int64_t headDim : {1, 16})
    for (int64_t channel : {0, 1}) {
      SCOPED_TRACE("head_dim " + std::to_string(headDim) + ", channel " +
                   std::to_string(channel));
      MhaParams p{unitNorm(2),          Tensor({headDim, 2}),
                  Tensor({headDim, 2}), Tensor({headDim, 2}),
                  Tensor({2, headDim}), Tensor({headDim, 2})};
      p.q.at({0, 0}) = 1;
      p.v.at({0, 0}) = 1;
      p.o.at({0, 0}) = 1;
      p.pos.at({0, channel}) = 1;
      double c2 = 1 / std::sqrt(double(headDim));
      double score10 = channel == 0 ? -c2 * s * std::sin(-1.0)
                                    : -c2 * s * std::cos(1.0);
      double score11 = channel == 0 ? 0.0 : -c2 * s;
      double e0 = std::exp(score10), e1 = std::exp(score11);
      double o1 = (e0 * s + e1 * -s) / (e0 + e1);
      Tensor y = mhaBlock(x, p, 1, headDim, Pos::xl, nullptr);
      EXPECT_NEAR(y.at({0, 0, 0}), 1 + s, kClosedForm);
      EXPECT_NEAR(y.at({0, 0, 1}), -1, kClosedForm);
      EXPECT_NEAR(y.at({0, 1, 0}), -1 + o1, kClosedForm);
      EXPECT_NEAR(y.at({0, 1, 1}), 1, kClosedForm);
      // Without the positional term both keys score 0 and average to 0.
      Tensor plain = mhaBlock(x, p, 1, headDim, Pos::none, nullptr);
      EXPECT_NEAR(plain.at({0, 1, 0}), -1, kClosedForm);
    }
}

TEST(ReferenceTest, HeadsAreIndependent) {
  // The branch of an H-head block is the sum of the branches of H one-head
  // blocks that own the head's rows of q, k, v, pos and columns of o.
  Random rng(21);
  int64_t width = 6, heads = 3, headDim = 4;
  Tensor x = randomTensor({2, 4, width}, rng);
  Tensor m = randomTensor({2, 2, width}, rng);
  MhaParams p = randomMha(width, heads, headDim, rng);
  for (Pos pos : kAllPos)
    for (const Tensor *memory : withAndWithout(m)) {
      SCOPED_TRACE(nameOf(pos) + (memory ? " with memory" : ""));
      Tensor expected = x;
      for (int64_t a = 0; a < heads; ++a) {
        MhaParams one{p.norm,
                      Tensor({headDim, width}),
                      Tensor({headDim, width}),
                      Tensor({headDim, width}),
                      Tensor({width, headDim}),
                      Tensor({headDim, width})};
        for (int64_t f = 0; f < headDim; ++f)
          for (int64_t d = 0; d < width; ++d) {
            one.q.at({f, d}) = p.q.at({a * headDim + f, d});
            one.k.at({f, d}) = p.k.at({a * headDim + f, d});
            one.v.at({f, d}) = p.v.at({a * headDim + f, d});
            one.pos.at({f, d}) = p.pos.at({a * headDim + f, d});
            one.o.at({d, f}) = p.o.at({d, a * headDim + f});
          }
        Tensor y = mhaBlock(x, one, 1, headDim, pos, memory);
        for (int64_t i = 0; i < x.numel(); ++i)
          expected.data[i] += y.data[i] - x.data[i];
      }
      expectAllNear(mhaBlock(x, p, heads, headDim, pos, memory), expected,
                    kTwoPaths);
    }
}

TEST(ReferenceTest, OutputsDoNotDependOnFutureTokens) {
  Random rng(17);
  int64_t width = 8, heads = 2, experts = 3, k = 2, headDim = 4, time = 5;
  Tensor x = randomTensor({2, time, width}, rng);
  Tensor m = randomTensor({2, 3, width}, rng);
  Tensor perturbed = x;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 3; t < time; ++t)
      for (int64_t d = 0; d < width; ++d)
        perturbed.at({b, t, d}) += float(rng.uniform());
  MhaParams mha = randomMha(width, heads, headDim, rng);
  SwitchHeadParams sh = randomSwitchHead(width, heads, experts, headDim, rng);
  for (Pos pos : kAllPos)
    for (const Tensor *memory : withAndWithout(m)) {
      SCOPED_TRACE(nameOf(pos) + (memory ? " with memory" : ""));
      Tensor outputs[2][2] = {
          {mhaBlock(x, mha, heads, headDim, pos, memory),
           mhaBlock(perturbed, mha, heads, headDim, pos, memory)},
          {switchHeadBlock(x, sh, heads, experts, k, headDim, pos, memory),
           switchHeadBlock(perturbed, sh, heads, experts, k, headDim, pos,
                           memory)}};
      for (auto &pair : outputs) {
        Tensor before = pair[0], after = pair[1];
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t t = 0; t < time; ++t)
            for (int64_t d = 0; d < width; ++d) {
              if (t < 3)
                EXPECT_EQ(before.at({b, t, d}), after.at({b, t, d}));
              else
                EXPECT_NE(before.at({b, t, d}), after.at({b, t, d}));
            }
      }
    }
}

TEST(ReferenceTest, MemoryActsAsAVisiblePrefix) {
  // Positions are relative (RoPE, XL) or absent, memory keys sit at -M … -1
  // and every query sees all of them: the block over x with memory m equals
  // the last T rows of the block over [m; x] without memory.
  Random rng(18);
  int64_t width = 8, heads = 2, experts = 3, k = 2, headDim = 4;
  int64_t time = 4, mem = 3;
  Tensor x = randomTensor({2, time, width}, rng);
  Tensor m = randomTensor({2, mem, width}, rng);
  Tensor joined = concatTime(m, x);
  MhaParams mha = randomMha(width, heads, headDim, rng);
  SwitchHeadParams sh = randomSwitchHead(width, heads, experts, headDim, rng);
  for (Pos pos : kAllPos) {
    SCOPED_TRACE(nameOf(pos));
    expectAllNear(
        mhaBlock(x, mha, heads, headDim, pos, &m),
        sliceTime(mhaBlock(joined, mha, heads, headDim, pos, nullptr), mem),
        kTwoPaths);
    expectAllNear(switchHeadBlock(x, sh, heads, experts, k, headDim, pos, &m),
                  sliceTime(switchHeadBlock(joined, sh, heads, experts, k,
                                            headDim, pos, nullptr),
                            mem),
                  kTwoPaths);
  }
}

TEST(ReferenceTest, SwitchHeadWithOneExpertPerHeadIsDenseAttention) {
  // E = k = 1 and zero routers: every gate is 0.5, so SwitchHead is MHA with
  // Wv[a·F + f, d] = 0.5·W_v[a, d, f] and Wo[d, a·F + f] = 0.5·W_o[a, f, d].
  Random rng(19);
  int64_t width = 6, heads = 2, headDim = 4, time = 4;
  Tensor x = randomTensor({2, time, width}, rng);
  Tensor m = randomTensor({2, 2, width}, rng);
  SwitchHeadParams sh = randomSwitchHead(width, heads, 1, headDim, rng);
  sh.sel_v = Tensor({heads, width});
  sh.sel_o = Tensor({heads, width});
  MhaParams mha{sh.norm,
                sh.q,
                sh.k,
                Tensor({heads * headDim, width}),
                Tensor({width, heads * headDim}),
                sh.pos};
  for (int64_t a = 0; a < heads; ++a)
    for (int64_t f = 0; f < headDim; ++f)
      for (int64_t d = 0; d < width; ++d) {
        mha.v.at({a * headDim + f, d}) = 0.5f * sh.v.at({a, d, f});
        mha.o.at({d, a * headDim + f}) = 0.5f * sh.o.at({a, f, d});
      }
  for (Pos pos : kAllPos)
    for (const Tensor *memory : withAndWithout(m)) {
      SCOPED_TRACE(nameOf(pos) + (memory ? " with memory" : ""));
      expectAllNear(switchHeadBlock(x, sh, heads, 1, 1, headDim, pos, memory),
                    mhaBlock(x, mha, heads, headDim, pos, memory), kClosedForm);
    }
}

} // namespace
