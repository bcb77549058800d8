//===- Reference.h - plain C++ reference of the semantics -------*- C++ -*-===//
//
// An independent implementation of every op and layer of docs/Semantics.md,
// written directly from its equations with simple loops. It is the oracle the
// compiled code is tested against, so it shares no code with the compiler and
// uses nothing but the C++20 standard library: no MLIR, no LLVM.
//
// Tensors are row-major and store float. Inside a function, sums, exponentials
// and softmaxes are evaluated in double and the result is rounded to float
// once; intermediate tensors that the specification names between two steps
// (LN(x), q, k, v, router scores, the attention output o) are stored as float,
// as the compiled code stores them. Shapes and indices are checked with
// assert.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_REFERENCE_REFERENCE_H
#define SWITCHYARD_LIB_REFERENCE_REFERENCE_H

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace switchyard::reference {

/// The number of elements of a tensor of the given shape (1 for rank 0).
int64_t numElements(const std::vector<int64_t> &shape);

/// A row-major float tensor.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  Tensor() = default;
  /// A tensor of the given shape with every element equal to `fill`.
  explicit Tensor(std::vector<int64_t> shape, float fill = 0.0f);
  /// A tensor of the given shape holding `data` (numElements(shape) values).
  static Tensor fromData(std::vector<int64_t> shape, std::vector<float> data);

  int64_t numel() const;
  /// The element at a full multi-index; rank and bounds are asserted.
  float &at(std::initializer_list<int64_t> index);
  float at(std::initializer_list<int64_t> index) const;
};

/// A row-major tensor of integers (token ids, expert indices).
struct IndexTensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> data;

  int64_t numel() const;
  /// The element at a full multi-index; rank and bounds are asserted.
  int64_t &at(std::initializer_list<int64_t> index);
  int64_t at(std::initializer_list<int64_t> index) const;
};

/// The same elements under another shape of the same element count.
Tensor reshape(const Tensor &x, std::vector<int64_t> shape);

//===----------------------------------------------------------------------===//
// moe ops
//===----------------------------------------------------------------------===//

/// moe.gate: `scores[n, g] = sigmoid(Σ_d x[n, d]·w[g, d])` for x `[N, D]` and
/// w `[G, D]`; the result is `[N, G]` (reshape it to `[N, H, E]` for a
/// multi-head router: row `h·E + e`). Leading dimensions of x beyond one are
/// kept: x `[..., D]` gives `[..., G]`.
Tensor gate(const Tensor &x, const Tensor &w);

/// moe.topk over the last dimension `E` of `scores` `[..., E]`: slot j of
/// each row holds the expert of rank j, ranks ordering the keys descending
/// with ties to the lower index. The key is the score, or -inf where `*mask`
/// (same element count as scores, optional) is true; `values` report the
/// unmasked score of the chosen expert. Requires 0 <= k <= E. Fills `values`
/// `[..., k]` and `indices` `[..., k]`.
void topk(const Tensor &scores, int64_t k, const std::vector<bool> *mask,
          Tensor &values, IndexTensor &indices);

/// moe.expert_proj: `out[n, h, :] = Σ_j g[n, h, j]·x[n, :]·w[h·E + i[n, h, j]]`
/// for x `[N, D]`, w `[H·E, D, F]`, gates and idx `[N, H, K]`; result
/// `[N, H, F]`. H is taken from the gates, E = w.shape[0] / H.
Tensor expertProj(const Tensor &x, const Tensor &w, const Tensor &gates,
                  const IndexTensor &idx);

/// moe.expert_merge:
/// `y[n, :] = Σ_h Σ_j g[n, h, j]·heads[n, h, :]·w[h·E + i[n, h, j]]` for heads
/// `[N, H, F]`, w `[H·E, F, D]`, gates and idx `[N, H, K]`; result `[N, D]`.
Tensor expertMerge(const Tensor &heads, const Tensor &w, const Tensor &gates,
                   const IndexTensor &idx);

/// moe.expert_mlp:
/// `y[n, :] = Σ_j g[n, j]·ReLU(x[n, :]·up[i[n, j]])·down[i[n, j]]` for x
/// `[N, D]`, up `[E, D, G]`, down `[E, G, D]`, gates and idx `[N, K]`; result
/// `[N, D]`.
Tensor expertMlp(const Tensor &x, const Tensor &up, const Tensor &down,
                 const Tensor &gates, const IndexTensor &idx);

//===----------------------------------------------------------------------===//
// Positional encodings (exposed for testing)
//===----------------------------------------------------------------------===//

/// Positional encoding of an attention block.
enum class Pos { none, rope, xl };

/// Applies RoPE in place to the `headDim`-wide head slices of `row` (a
/// multiple of headDim long) for position `position`: the first
/// `r = 2·floor(headDim/4)` channels of each head rotate half against half
/// with `θ_i = position·10000^(−2i/r)`, the rest are unchanged.
void applyRope(std::vector<float> &row, int64_t headDim, int64_t position);

/// The Transformer-XL encoding of the relative position `position` (key
/// position − query position, ≤ 0 for the keys a causal query sees) for
/// model width `width` (even), as the official SwitchHeadXL builds it: sin
/// at the even channels, cos at the odd ones,
/// `[sin(p·ω_0), cos(p·ω_0), sin(p·ω_1), cos(p·ω_1), …]` with
/// `ω_i = 10000^(−2i/D)`, as a `[width]` tensor.
Tensor sinusoid(int64_t position, int64_t width);

//===----------------------------------------------------------------------===//
// lm layers; activations x are [B, T, D]
//===----------------------------------------------------------------------===//

/// lm.embed: `out[..., :] = w[tokens[...], :]` for w `[V, D]`; ids must lie in
/// `[0, V)`. tokens `[B, T]` give `[B, T, D]`.
Tensor embed(const IndexTensor &tokens, const Tensor &w);

/// LayerNorm over the last dimension with biased variance:
/// `(x − mean) / sqrt(var + eps)·weight + bias`.
Tensor layerNorm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                 double eps = 1e-5);

/// The affine parameters of a LayerNorm, `[D]` each.
struct Norm {
  Tensor weight, bias;
};

/// Parameters of lm.mha: q, k, v `[H·F, D]`, o `[D, H·F]`, pos `[H·F, D]`
/// (used with Pos::xl only).
struct MhaParams {
  Norm norm;
  Tensor q, k, v, o, pos;
};

/// Parameters of lm.switchhead: q, k `[H·F, D]`, v `[H·E, D, F]`, o
/// `[H·E, F, D]`, sel_v and sel_o `[H·E, D]`, pos `[H·F, D]` (Pos::xl only).
struct SwitchHeadParams {
  Norm norm;
  Tensor q, k, v, o, sel_v, sel_o, pos;
};

/// What an attention block computes on the way (the probes of
/// `switchyard analyze`): the softmax weights `[B, H, T, S]` (0 for the
/// keys a query does not see) and, for SwitchHead, the top-k gates and
/// experts of the value side `[B·S, H, k]` and of the output side
/// `[B·T, H, k]`.
struct AttentionProbes {
  Tensor weights;
  Tensor gatesV, gatesO;
  IndexTensor expertsV, expertsO;
};

/// lm.mha: `x + Attn(LN(x))` with `heads` heads of width `headDim`, causal,
/// with the given positional encoding and optional memory `[B, M, D]`
/// (normalised with the block's norm; keys and values cover memory then
/// current tokens, at positions −M … T−1). `probes`, where given, receives
/// the attention weights.
Tensor mhaBlock(const Tensor &x, const MhaParams &p, int64_t heads,
                int64_t headDim, Pos pos, const Tensor *memory,
                AttentionProbes *probes = nullptr);

/// lm.switchhead: as mhaBlock, but values come from the top-k of `experts`
/// value experts per head chosen by source-side scores (over memory and
/// current tokens) and the output projection from the top-k output experts
/// chosen by destination-side scores of the current tokens. `probes`,
/// where given, receives the attention weights and both selections.
Tensor switchHeadBlock(const Tensor &x, const SwitchHeadParams &p,
                       int64_t heads, int64_t experts, int64_t k,
                       int64_t headDim, Pos pos, const Tensor *memory,
                       AttentionProbes *probes = nullptr);

/// lm.ffn: `x + ReLU(LN(x)·upᵀ)·downᵀ` with up `[dff, D]`, down `[D, dff]`.
Tensor ffnBlock(const Tensor &x, const Norm &norm, const Tensor &up,
                const Tensor &down);

/// lm.sigma_moe: `x + expert_mlp(h, up, down, topk(sigmoid(h·selᵀ), k))` with
/// `h = LN(x)`, sel `[E, D]`, up `[E, D, G]`, down `[E, G, D]`.
Tensor sigmaMoeBlock(const Tensor &x, const Norm &norm, const Tensor &sel,
                     const Tensor &up, const Tensor &down, int64_t k);

/// lm.output: `logits = x·wᵀ` for w `[V, D]`; x `[B, T, D]` gives
/// `[B, T, V]`.
Tensor output(const Tensor &x, const Tensor &w);

/// lm.cross_entropy: the mean over (b, t) of
/// `logsumexp(logits[b, t]) − logits[b, t, targets[b, t]]`.
double crossEntropy(const Tensor &logits, const IndexTensor &targets);

/// moe.dropout_mask: whether each of `count` elements (row-major) is
/// dropped: splitmix64(splitmix64(seed + stream) + i) >> 40 below
/// floor(rate · 2^24).
std::vector<bool> dropoutMask(int64_t seed, int64_t stream, double rate,
                              int64_t count);

} // namespace switchyard::reference

#endif // SWITCHYARD_LIB_REFERENCE_REFERENCE_H
