//===- Reference.cpp - plain C++ reference of the forward semantics -------===//
//
// Implements docs/Semantics.md one equation at a time. Every loop follows the
// index names of the specification; nothing is fused, tiled or vectorised.
// Sums run in double and each function rounds its result to float once.
//
//===----------------------------------------------------------------------===//

#include "lib/Reference/Reference.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>

using namespace switchyard::reference;

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

int64_t switchyard::reference::numElements(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t size : shape) {
    assert(size >= 0 && "negative dimension");
    count *= size;
  }
  return count;
}

/// The row-major offset of a full multi-index into a tensor of `shape`.
static size_t offsetOf(const std::vector<int64_t> &shape,
                       std::initializer_list<int64_t> index) {
  assert(index.size() == shape.size() && "index rank differs from shape");
  int64_t offset = 0;
  size_t dim = 0;
  for (int64_t i : index) {
    assert(i >= 0 && i < shape[dim] && "index out of bounds");
    offset = offset * shape[dim] + i;
    ++dim;
  }
  return static_cast<size_t>(offset);
}

Tensor::Tensor(std::vector<int64_t> shape, float fill)
    : shape(std::move(shape)) {
  data.assign(static_cast<size_t>(numElements(this->shape)), fill);
}

Tensor Tensor::fromData(std::vector<int64_t> shape, std::vector<float> data) {
  assert(static_cast<int64_t>(data.size()) == numElements(shape) &&
         "data size differs from the shape's element count");
  Tensor result;
  result.shape = std::move(shape);
  result.data = std::move(data);
  return result;
}

int64_t Tensor::numel() const { return numElements(shape); }

float &Tensor::at(std::initializer_list<int64_t> index) {
  return data[offsetOf(shape, index)];
}

float Tensor::at(std::initializer_list<int64_t> index) const {
  return data[offsetOf(shape, index)];
}

int64_t IndexTensor::numel() const { return numElements(shape); }

int64_t &IndexTensor::at(std::initializer_list<int64_t> index) {
  return data[offsetOf(shape, index)];
}

int64_t IndexTensor::at(std::initializer_list<int64_t> index) const {
  return data[offsetOf(shape, index)];
}

Tensor switchyard::reference::reshape(const Tensor &x,
                                      std::vector<int64_t> shape) {
  assert(numElements(shape) == x.numel() && "reshape changes element count");
  return Tensor::fromData(std::move(shape), x.data);
}

//===----------------------------------------------------------------------===//
// Local helpers
//===----------------------------------------------------------------------===//

namespace {

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

/// The size of the last dimension.
int64_t lastDim(const Tensor &x) {
  assert(!x.shape.empty() && "rank-0 tensor has no last dimension");
  return x.shape.back();
}

/// The number of rows when the last dimension is the row.
int64_t rowCount(const Tensor &x) {
  int64_t width = lastDim(x);
  return width == 0 ? 0 : x.numel() / width;
}

/// `y[..., o] = scale·Σ_i x[..., i]·w[o, i]` (PyTorch Linear layout w
/// `[out, in]`).
Tensor linear(const Tensor &x, const Tensor &w, double scale = 1.0) {
  assert(w.shape.size() == 2 && "weight must be [out, in]");
  int64_t in = lastDim(x), out = w.shape[0];
  assert(w.shape[1] == in && "weight input width differs from x");
  std::vector<int64_t> shape = x.shape;
  shape.back() = out;
  Tensor y(shape);
  int64_t rows = rowCount(x);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0.0;
      for (int64_t i = 0; i < in; ++i)
        sum += double(x.data[n * in + i]) * double(w.data[o * in + i]);
      y.data[n * out + o] = float(scale * sum);
    }
  return y;
}

/// `x + branch`, element by element, with equal shapes.
Tensor addResidual(const Tensor &x, const Tensor &branch) {
  assert(x.shape == branch.shape && "residual shapes differ");
  Tensor y(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    y.data[i] = float(double(x.data[i]) + double(branch.data[i]));
  return y;
}

/// The input rows of an attention block: `h = LN(x)` `[B, T, D]` and the
/// source rows `[LN(m); LN(x)]` `[B, M + T, D]`.
struct AttentionInputs {
  Tensor h;
  Tensor source;
  int64_t memoryLength = 0;
};

AttentionInputs normalizeInputs(const Tensor &x, const Norm &norm,
                                const Tensor *memory) {
  assert(x.shape.size() == 3 && "x must be [B, T, D]");
  int64_t batch = x.shape[0], time = x.shape[1], width = x.shape[2];
  AttentionInputs inputs;
  inputs.h = layerNorm(x, norm.weight, norm.bias);
  Tensor hm;
  if (memory) {
    assert(memory->shape.size() == 3 && memory->shape[0] == batch &&
           memory->shape[2] == width && "memory must be [B, M, D]");
    inputs.memoryLength = memory->shape[1];
    hm = layerNorm(*memory, norm.weight, norm.bias);
  }
  int64_t mem = inputs.memoryLength, src = mem + time;
  inputs.source = Tensor({batch, src, width});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t u = 0; u < src; ++u)
      for (int64_t d = 0; d < width; ++d)
        inputs.source.at({b, u, d}) =
            u < mem ? hm.at({b, u, d}) : inputs.h.at({b, u - mem, d});
  return inputs;
}

/// Steps 4–6 of the attention specification. q `[B, T, H·F]` (already
/// scaled by c), k `[B, S, H·F]` (scaled), v `[B, S, H, F]`, S = M + T.
/// Query t has position t, key u position u − M. Returns o `[B, T, H, F]`;
/// `weights`, where given, receives the softmax weights `[B, H, T, S]`.
Tensor attend(Tensor q, Tensor k, const Tensor &v, int64_t heads,
              int64_t headDim, Pos pos, const Tensor &posWeight, int64_t width,
              int64_t memoryLength, Tensor *weights = nullptr) {
  int64_t batch = q.shape[0], time = q.shape[1], src = k.shape[1];
  int64_t hf = heads * headDim, mem = memoryLength;
  assert(q.shape == (std::vector<int64_t>{batch, time, hf}) && "bad q shape");
  assert(k.shape == (std::vector<int64_t>{batch, mem + time, hf}) &&
         "bad k shape");
  assert(v.shape == (std::vector<int64_t>{batch, src, heads, headDim}) &&
         "bad v shape");
  double c = std::pow(double(headDim), -0.25);

  // RoPE: rotate every query and key row at its position.
  if (pos == Pos::rope) {
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < time; ++t) {
        std::vector<float> row(&q.at({b, t, 0}), &q.at({b, t, 0}) + hf);
        applyRope(row, headDim, t);
        std::copy(row.begin(), row.end(), &q.at({b, t, 0}));
      }
      for (int64_t u = 0; u < src; ++u) {
        std::vector<float> row(&k.at({b, u, 0}), &k.at({b, u, 0}) + hf);
        applyRope(row, headDim, u - mem);
        std::copy(row.begin(), row.end(), &k.at({b, u, 0}));
      }
    }
  }

  // XL: kp[p] = c·pe(p)·W_posᵀ for every relative position p = pos(u) − t
  // an unmasked key can have, −(M + T − 1) … 0; row j of kp holds p = −j.
  Tensor kp;
  if (pos == Pos::xl) {
    assert(posWeight.shape == (std::vector<int64_t>{hf, width}) &&
           "pos weight must be [H·F, D]");
    Tensor pe({src, width});
    for (int64_t j = 0; j < src; ++j) {
      Tensor row = sinusoid(-j, width);
      for (int64_t d = 0; d < width; ++d)
        pe.at({j, d}) = row.data[d];
    }
    kp = linear(pe, posWeight, c);
  }

  Tensor o({batch, time, heads, headDim});
  if (weights)
    *weights = Tensor({batch, heads, time, src});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t a = 0; a < heads; ++a)
      for (int64_t t = 0; t < time; ++t) {
        // Keys with pos(u) = u − M <= t, i.e. u <= t + M.
        int64_t visible = t + mem + 1;
        std::vector<double> score(static_cast<size_t>(visible));
        for (int64_t u = 0; u < visible; ++u) {
          double s = 0.0;
          for (int64_t f = 0; f < headDim; ++f)
            s += double(q.at({b, t, a * headDim + f})) *
                 double(k.at({b, u, a * headDim + f}));
          if (pos == Pos::xl) {
            int64_t relative = (u - mem) - t;
            for (int64_t f = 0; f < headDim; ++f)
              s += double(q.at({b, t, a * headDim + f})) *
                   double(kp.at({-relative, a * headDim + f}));
          }
          score[u] = s;
        }
        double maxScore = *std::max_element(score.begin(), score.end());
        double total = 0.0;
        for (double &s : score) {
          s = std::exp(s - maxScore);
          total += s;
        }
        if (weights)
          for (int64_t u = 0; u < visible; ++u)
            weights->at({b, a, t, u}) = float(score[u] / total);
        for (int64_t f = 0; f < headDim; ++f) {
          double sum = 0.0;
          for (int64_t u = 0; u < visible; ++u)
            sum += score[u] / total * double(v.at({b, u, a, f}));
          o.at({b, t, a, f}) = float(sum);
        }
      }
  return o;
}

} // namespace

//===----------------------------------------------------------------------===//
// moe ops
//===----------------------------------------------------------------------===//

Tensor switchyard::reference::gate(const Tensor &x, const Tensor &w) {
  assert(w.shape.size() == 2 && "router weight must be [G, D]");
  int64_t width = lastDim(x), experts = w.shape[0];
  assert(w.shape[1] == width && "router weight width differs from x");
  std::vector<int64_t> shape = x.shape;
  shape.back() = experts;
  Tensor scores(shape);
  int64_t rows = rowCount(x);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t g = 0; g < experts; ++g) {
      double z = 0.0;
      for (int64_t d = 0; d < width; ++d)
        z += double(x.data[n * width + d]) * double(w.data[g * width + d]);
      scores.data[n * experts + g] = float(sigmoid(z));
    }
  return scores;
}

void switchyard::reference::topk(const Tensor &scores, int64_t k,
                                 const std::vector<bool> *mask, Tensor &values,
                                 IndexTensor &indices) {
  int64_t experts = lastDim(scores);
  assert(k >= 0 && k <= experts && "k must lie in [0, E]");
  assert((!mask || static_cast<int64_t>(mask->size()) == scores.numel()) &&
         "mask must have one entry per score");
  std::vector<int64_t> shape = scores.shape;
  shape.back() = k;
  values = Tensor(shape);
  indices.shape = shape;
  indices.data.assign(static_cast<size_t>(numElements(shape)), -1);

  const float negInf = -std::numeric_limits<float>::infinity();
  int64_t rows = rowCount(scores);
  for (int64_t n = 0; n < rows; ++n) {
    auto key = [&](int64_t e) {
      int64_t flat = n * experts + e;
      return mask && (*mask)[flat] ? negInf : scores.data[flat];
    };
    for (int64_t e = 0; e < experts; ++e) {
      // rank(e) = #{e' : key[e'] > key[e] or (key[e'] == key[e], e' < e)}.
      int64_t rank = 0;
      for (int64_t other = 0; other < experts; ++other)
        if (key(other) > key(e) || (key(other) == key(e) && other < e))
          ++rank;
      if (rank >= k)
        continue;
      assert(indices.data[n * k + rank] == -1 &&
             "two experts share a rank (NaN score?)");
      indices.data[n * k + rank] = e;
      values.data[n * k + rank] = scores.data[n * experts + e];
    }
  }
  assert(std::find(indices.data.begin(), indices.data.end(), -1) ==
             indices.data.end() &&
         "a top-k slot is empty (NaN score?)");
}

Tensor switchyard::reference::expertProj(const Tensor &x, const Tensor &w,
                                         const Tensor &gates,
                                         const IndexTensor &idx) {
  assert(x.shape.size() == 2 && w.shape.size() == 3 &&
         gates.shape.size() == 3 && "expected x [N, D], w [H·E, D, F]");
  assert(idx.shape == gates.shape && "gates and indices differ in shape");
  int64_t tokens = x.shape[0], width = x.shape[1];
  int64_t heads = gates.shape[1], slots = gates.shape[2];
  int64_t headDim = w.shape[2];
  assert(gates.shape[0] == tokens && "gates must be [N, H, K]");
  assert(heads > 0 && w.shape[0] % heads == 0 && "w must be [H·E, D, F]");
  assert(w.shape[1] == width && "expert input width differs from x");
  int64_t experts = w.shape[0] / heads;

  Tensor out({tokens, heads, headDim});
  for (int64_t n = 0; n < tokens; ++n)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t f = 0; f < headDim; ++f) {
        double sum = 0.0;
        for (int64_t j = 0; j < slots; ++j) {
          int64_t e = idx.at({n, h, j});
          assert(e >= 0 && e < experts && "expert index out of range");
          double product = 0.0;
          for (int64_t d = 0; d < width; ++d)
            product +=
                double(x.at({n, d})) * double(w.at({h * experts + e, d, f}));
          sum += double(gates.at({n, h, j})) * product;
        }
        out.at({n, h, f}) = float(sum);
      }
  return out;
}

Tensor switchyard::reference::expertMerge(const Tensor &heads, const Tensor &w,
                                          const Tensor &gates,
                                          const IndexTensor &idx) {
  assert(heads.shape.size() == 3 && w.shape.size() == 3 &&
         gates.shape.size() == 3 && "expected heads [N, H, F], w [H·E, F, D]");
  assert(idx.shape == gates.shape && "gates and indices differ in shape");
  int64_t tokens = heads.shape[0], numHeads = heads.shape[1];
  int64_t headDim = heads.shape[2], slots = gates.shape[2];
  int64_t width = w.shape[2];
  assert(gates.shape[0] == tokens && gates.shape[1] == numHeads &&
         "gates must be [N, H, K]");
  assert(w.shape[0] % numHeads == 0 && w.shape[1] == headDim &&
         "w must be [H·E, F, D]");
  int64_t experts = w.shape[0] / numHeads;

  Tensor y({tokens, width});
  for (int64_t n = 0; n < tokens; ++n)
    for (int64_t d = 0; d < width; ++d) {
      double sum = 0.0;
      for (int64_t h = 0; h < numHeads; ++h)
        for (int64_t j = 0; j < slots; ++j) {
          int64_t e = idx.at({n, h, j});
          assert(e >= 0 && e < experts && "expert index out of range");
          double product = 0.0;
          for (int64_t f = 0; f < headDim; ++f)
            product += double(heads.at({n, h, f})) *
                       double(w.at({h * experts + e, f, d}));
          sum += double(gates.at({n, h, j})) * product;
        }
      y.at({n, d}) = float(sum);
    }
  return y;
}

Tensor switchyard::reference::expertMlp(const Tensor &x, const Tensor &up,
                                        const Tensor &down, const Tensor &gates,
                                        const IndexTensor &idx) {
  assert(x.shape.size() == 2 && up.shape.size() == 3 &&
         down.shape.size() == 3 && gates.shape.size() == 2 &&
         "expected x [N, D], up [E, D, G], down [E, G, D], gates [N, K]");
  assert(idx.shape == gates.shape && "gates and indices differ in shape");
  int64_t tokens = x.shape[0], width = x.shape[1];
  [[maybe_unused]] int64_t experts = up.shape[0];
  int64_t hidden = up.shape[2], slots = gates.shape[1];
  assert(up.shape[1] == width && "up must be [E, D, G]");
  assert(down.shape == (std::vector<int64_t>{experts, hidden, width}) &&
         "down must be [E, G, D]");
  assert(gates.shape[0] == tokens && "gates must be [N, K]");

  Tensor y({tokens, width});
  for (int64_t n = 0; n < tokens; ++n) {
    std::vector<double> sum(static_cast<size_t>(width), 0.0);
    for (int64_t j = 0; j < slots; ++j) {
      int64_t e = idx.at({n, j});
      assert(e >= 0 && e < experts && "expert index out of range");
      double g = gates.at({n, j});
      for (int64_t c = 0; c < hidden; ++c) {
        double pre = 0.0;
        for (int64_t d = 0; d < width; ++d)
          pre += double(x.at({n, d})) * double(up.at({e, d, c}));
        double act = std::max(pre, 0.0);
        for (int64_t d = 0; d < width; ++d)
          sum[d] += g * act * double(down.at({e, c, d}));
      }
    }
    for (int64_t d = 0; d < width; ++d)
      y.at({n, d}) = float(sum[d]);
  }
  return y;
}

//===----------------------------------------------------------------------===//
// Positional encodings
//===----------------------------------------------------------------------===//

void switchyard::reference::applyRope(std::vector<float> &row, int64_t headDim,
                                      int64_t position) {
  assert(headDim > 0 && static_cast<int64_t>(row.size()) % headDim == 0 &&
         "row must hold whole heads");
  int64_t rotated = 2 * (headDim / 4), half = rotated / 2;
  int64_t heads = static_cast<int64_t>(row.size()) / headDim;
  for (int64_t a = 0; a < heads; ++a) {
    float *head = row.data() + a * headDim;
    for (int64_t i = 0; i < half; ++i) {
      double theta =
          double(position) * std::pow(10000.0, -2.0 * double(i) / rotated);
      double x0 = head[i], x1 = head[i + half];
      head[i] = float(x0 * std::cos(theta) - x1 * std::sin(theta));
      head[i + half] = float(x1 * std::cos(theta) + x0 * std::sin(theta));
    }
  }
}

Tensor switchyard::reference::sinusoid(int64_t position, int64_t width) {
  assert(width > 0 && width % 2 == 0 && "XL needs an even model width");
  Tensor pe({width});
  for (int64_t i = 0; i < width / 2; ++i) {
    double omega = std::pow(10000.0, -2.0 * double(i) / double(width));
    pe.data[2 * i] = float(std::sin(double(position) * omega));
    pe.data[2 * i + 1] = float(std::cos(double(position) * omega));
  }
  return pe;
}

//===----------------------------------------------------------------------===//
// lm layers
//===----------------------------------------------------------------------===//

Tensor switchyard::reference::embed(const IndexTensor &tokens,
                                    const Tensor &w) {
  assert(w.shape.size() == 2 && "embedding must be [V, D]");
  assert(static_cast<int64_t>(tokens.data.size()) == tokens.numel() &&
         "token data size differs from shape");
  [[maybe_unused]] int64_t vocab = w.shape[0];
  int64_t width = w.shape[1];
  std::vector<int64_t> shape = tokens.shape;
  shape.push_back(width);
  Tensor out(shape);
  for (int64_t n = 0; n < tokens.numel(); ++n) {
    int64_t id = tokens.data[n];
    assert(id >= 0 && id < vocab && "token id out of range");
    for (int64_t d = 0; d < width; ++d)
      out.data[n * width + d] = w.data[id * width + d];
  }
  return out;
}

Tensor switchyard::reference::layerNorm(const Tensor &x, const Tensor &weight,
                                        const Tensor &bias, double eps) {
  int64_t width = lastDim(x);
  assert(weight.shape == std::vector<int64_t>{width} &&
         bias.shape == std::vector<int64_t>{width} &&
         "norm params must be [D]");
  Tensor y(x.shape);
  int64_t rows = rowCount(x);
  for (int64_t n = 0; n < rows; ++n) {
    const float *row = x.data.data() + n * width;
    double mean = 0.0;
    for (int64_t d = 0; d < width; ++d)
      mean += row[d];
    mean /= double(width);
    double var = 0.0;
    for (int64_t d = 0; d < width; ++d)
      var += (row[d] - mean) * (row[d] - mean);
    var /= double(width);
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t d = 0; d < width; ++d)
      y.data[n * width + d] =
          float((row[d] - mean) * inv * weight.data[d] + double(bias.data[d]));
  }
  return y;
}

Tensor switchyard::reference::mhaBlock(const Tensor &x, const MhaParams &p,
                                       int64_t heads, int64_t headDim, Pos pos,
                                       const Tensor *memory,
                                       AttentionProbes *probes) {
  AttentionInputs in = normalizeInputs(x, p.norm, memory);
  int64_t batch = x.shape[0], time = x.shape[1], width = x.shape[2];
  int64_t src = in.source.shape[1], hf = heads * headDim;
  assert(p.q.shape == (std::vector<int64_t>{hf, width}) &&
         p.k.shape == p.q.shape && p.v.shape == p.q.shape &&
         "q, k, v must be [H·F, D]");
  assert(p.o.shape == (std::vector<int64_t>{width, hf}) &&
         "o must be [D, H·F]");
  double c = std::pow(double(headDim), -0.25);

  Tensor q = linear(in.h, p.q, c);
  Tensor k = linear(in.source, p.k, c);
  Tensor v = reshape(linear(in.source, p.v), {batch, src, heads, headDim});
  Tensor o =
      attend(std::move(q), std::move(k), v, heads, headDim, pos, p.pos, width,
             in.memoryLength, probes ? &probes->weights : nullptr);
  Tensor branch = linear(reshape(o, {batch, time, hf}), p.o);
  return addResidual(x, branch);
}

Tensor switchyard::reference::switchHeadBlock(const Tensor &x,
                                              const SwitchHeadParams &p,
                                              int64_t heads, int64_t experts,
                                              int64_t k, int64_t headDim,
                                              Pos pos, const Tensor *memory,
                                              AttentionProbes *probes) {
  AttentionInputs in = normalizeInputs(x, p.norm, memory);
  int64_t batch = x.shape[0], time = x.shape[1], width = x.shape[2];
  int64_t src = in.source.shape[1];
  [[maybe_unused]] int64_t hf = heads * headDim, he = heads * experts;
  assert(p.q.shape == (std::vector<int64_t>{hf, width}) &&
         p.k.shape == p.q.shape && "q, k must be [H·F, D]");
  assert(p.v.shape == (std::vector<int64_t>{he, width, headDim}) &&
         "v must be [H·E, D, F]");
  assert(p.o.shape == (std::vector<int64_t>{he, headDim, width}) &&
         "o must be [H·E, F, D]");
  assert(p.sel_v.shape == (std::vector<int64_t>{he, width}) &&
         p.sel_o.shape == p.sel_v.shape && "sel_v, sel_o must be [H·E, D]");
  double c = std::pow(double(headDim), -0.25);

  Tensor q = linear(in.h, p.q, c);
  Tensor keys = linear(in.source, p.k, c);

  // Values: source-side selection over [LN(m); LN(x)].
  Tensor source = reshape(in.source, {batch * src, width});
  Tensor scoresV =
      reshape(gate(source, p.sel_v), {batch * src, heads, experts});
  Tensor gatesV;
  IndexTensor indicesV;
  topk(scoresV, k, nullptr, gatesV, indicesV);
  Tensor v = reshape(expertProj(source, p.v, gatesV, indicesV),
                     {batch, src, heads, headDim});

  Tensor o =
      attend(std::move(q), std::move(keys), v, heads, headDim, pos, p.pos,
             width, in.memoryLength, probes ? &probes->weights : nullptr);

  // Output: destination-side selection over the current tokens only.
  Tensor dest = reshape(in.h, {batch * time, width});
  Tensor scoresO = reshape(gate(dest, p.sel_o), {batch * time, heads, experts});
  Tensor gatesO;
  IndexTensor indicesO;
  topk(scoresO, k, nullptr, gatesO, indicesO);
  Tensor branch = expertMerge(reshape(o, {batch * time, heads, headDim}), p.o,
                              gatesO, indicesO);
  if (probes) {
    probes->gatesV = gatesV;
    probes->expertsV = indicesV;
    probes->gatesO = gatesO;
    probes->expertsO = indicesO;
  }
  return addResidual(x, reshape(branch, {batch, time, width}));
}

Tensor switchyard::reference::ffnBlock(const Tensor &x, const Norm &norm,
                                       const Tensor &up, const Tensor &down) {
  int64_t width = lastDim(x);
  assert(up.shape.size() == 2 && up.shape[1] == width &&
         "up must be [d_ff, D]");
  int64_t hidden = up.shape[0];
  assert(down.shape == (std::vector<int64_t>{width, hidden}) &&
         "down must be [D, d_ff]");
  Tensor h = layerNorm(x, norm.weight, norm.bias);
  Tensor branch(x.shape);
  int64_t rows = rowCount(x);
  for (int64_t n = 0; n < rows; ++n) {
    std::vector<double> act(static_cast<size_t>(hidden));
    for (int64_t j = 0; j < hidden; ++j) {
      double pre = 0.0;
      for (int64_t d = 0; d < width; ++d)
        pre += double(h.data[n * width + d]) * double(up.data[j * width + d]);
      act[j] = std::max(pre, 0.0);
    }
    for (int64_t d = 0; d < width; ++d) {
      double sum = 0.0;
      for (int64_t j = 0; j < hidden; ++j)
        sum += act[j] * double(down.data[d * hidden + j]);
      branch.data[n * width + d] = float(sum);
    }
  }
  return addResidual(x, branch);
}

Tensor switchyard::reference::sigmaMoeBlock(const Tensor &x, const Norm &norm,
                                            const Tensor &sel, const Tensor &up,
                                            const Tensor &down, int64_t k) {
  int64_t width = lastDim(x), rows = rowCount(x);
  Tensor h = reshape(layerNorm(x, norm.weight, norm.bias), {rows, width});
  Tensor scores = gate(h, sel);
  Tensor gates;
  IndexTensor indices;
  topk(scores, k, nullptr, gates, indices);
  Tensor branch = expertMlp(h, up, down, gates, indices);
  return addResidual(x, reshape(branch, x.shape));
}

Tensor switchyard::reference::output(const Tensor &x, const Tensor &w) {
  return linear(x, w);
}

double switchyard::reference::crossEntropy(const Tensor &logits,
                                           const IndexTensor &targets) {
  int64_t vocab = lastDim(logits), rows = rowCount(logits);
  assert(targets.numel() == rows &&
         static_cast<int64_t>(targets.data.size()) == rows &&
         "one target per logit row");
  assert(rows > 0 && "cross entropy of no tokens");
  double total = 0.0;
  for (int64_t n = 0; n < rows; ++n) {
    const float *row = logits.data.data() + n * vocab;
    double maxLogit = *std::max_element(row, row + vocab);
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(double(row[v]) - maxLogit);
    int64_t target = targets.data[n];
    assert(target >= 0 && target < vocab && "target id out of range");
    total += maxLogit + std::log(sum) - double(row[target]);
  }
  return total / double(rows);
}

namespace {
uint64_t splitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
} // namespace

std::vector<bool> switchyard::reference::dropoutMask(int64_t seed,
                                                     int64_t stream,
                                                     double rate,
                                                     int64_t count) {
  uint64_t key = splitMix64(uint64_t(seed) + uint64_t(stream));
  auto threshold = uint64_t(std::floor(rate * double(1 << 24)));
  std::vector<bool> mask;
  for (int64_t i = 0; i < count; ++i)
    mask.push_back((splitMix64(key + uint64_t(i)) >> 40) < threshold);
  return mask;
}
