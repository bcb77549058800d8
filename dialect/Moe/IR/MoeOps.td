//===- MoeOps.td - moe dialect operations ------------------*- tablegen -*-===//
//
// Operations of the `moe` dialect. Shape contracts are stated twice: the
// element types and ranks as ODS constraints, the agreement between operands
// (widths, head counts, k <= E) in the C++ verifiers in lib/Dialect/Moe/IR/MoeOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEOPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEOPS_TD

include "dialect/Moe/IR/MoeDialect.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

defvar Moe_ActivationTypes = [F32, F16, BF16];

/// Activations and weights: f32, f16 or bf16, of a fixed rank.
class Moe_ValueTensorOfRank<list<int> ranks>
    : TensorRankOf<Moe_ActivationTypes, ranks>;
/// Router scores and gate values: always f32 (router logits are fp32).
class Moe_ScoreTensorOfRank<list<int> ranks> : TensorRankOf<[F32], ranks>;
/// Expert indices: per-head expert numbers in [0, E).
class Moe_IndexTensorOfRank<list<int> ranks> : TensorRankOf<[I32, I64], ranks>;

//===----------------------------------------------------------------------===//
// GateOp
//===----------------------------------------------------------------------===//

def Moe_GateOp : Moe_Op<"gate", [Pure,
    AllElementTypesMatch<["input", "weight"]>]> {
  let summary = "sigmoid router scores sigmoid(x · W_selᵀ), computed in f32";
  let description = [{
    Computes the expert-selection scores of a sigma-MoE router:

    ```
    scores[n, g] = sigmoid(Σ_d input[n, d] · weight[g, d])
    ```

    with the products accumulated in f32 whatever the input element type.
    `weight` has one row per expert (of all heads together): `[G, D]`. The
    result is either `[N, G]` or, for a multi-head router, `[N, H, E]` with
    `H · E = G`; expert `e` of head `h` reads row `h·E + e`.

    Example: the value-side router of a SwitchHead layer with 2 heads of
    5 experts each over a 128-wide residual stream.

    ```mlir
    %s = moe.gate %x, %w_sel : tensor<?x128xf32>, tensor<10x128xf32> -> tensor<?x2x5xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[2]>:$input,
                       Moe_ValueTensorOfRank<[2]>:$weight);
  let results = (outs Moe_ScoreTensorOfRank<[2, 3]>:$result);

  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// TopKOp
//===----------------------------------------------------------------------===//

def Moe_TopKOp : Moe_Op<"topk", [Pure,
    AllShapesMatch<["values", "indices"]>]> {
  let summary = "the k largest scores along the last dimension, with indices";
  let description = [{
    Selects, along the last dimension `E` of `scores`, the `k` largest
    entries. `values` holds the selected scores themselves (the gates: they
    are not renormalised), `indices` their positions in `[0, E)`, both in
    descending order of score; ties go to the lower index. The selection
    carries no gradient, the values do.

    The optional `mask` implements expert dropout: where it is `true` the
    score is treated as `-inf` for the selection, but a selected entry still
    reports its unmasked score. If fewer than `k` experts are unmasked, the
    remaining slots take masked experts in index order.

    Example: top-3 of 5 experts for each of 2 heads, with and without a mask.

    ```mlir
    %v, %i = moe.topk %s k(3) : tensor<?x2x5xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>
    %mv, %mi = moe.topk %s k(3) mask(%drop) : tensor<?x2x5xf32>, tensor<?x2x5xi1> -> tensor<?x2x3xf32>, tensor<?x2x3xi64>
    ```
  }];

  let arguments = (ins Moe_ScoreTensorOfRank<[1, 2, 3, 4]>:$scores,
                       ConfinedAttr<I64Attr, [IntPositive]>:$k,
                       Optional<TensorRankOf<[I1], [1, 2, 3, 4]>>:$mask);
  let results = (outs Moe_ScoreTensorOfRank<[1, 2, 3, 4]>:$values,
                      Moe_IndexTensorOfRank<[1, 2, 3, 4]>:$indices);

  let assemblyFormat = [{
    $scores `k` `(` $k `)` (`mask` `(` $mask^ `)`)? attr-dict `:`
    type($scores) (`,` type($mask)^)? `->` type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ExpertProjOp
//===----------------------------------------------------------------------===//

def Moe_ExpertProjOp : Moe_Op<"expert_proj", [Pure,
    AllElementTypesMatch<["input", "weight", "result"]>,
    AllShapesMatch<["gates", "indices"]>]> {
  let summary = "SwitchHead value projection: per head, a gated sum over "
                "the selected experts";
  let description = [{
    The value-side expert projection of SwitchHead. For every token `n` and
    head `h`, with `E = dim(weight, 0) / H` experts per head:

    ```
    result[n, h, :] = Σ_j gates[n, h, j] · input[n, :] · weight[h·E + indices[n, h, j]]
    ```

    `input` is `[N, D]`, `weight` `[H·E, D, F]`, `gates` and `indices`
    `[N, H, K]` (from `moe.topk` on the source-side scores) and the result
    `[N, H, F]`. Products accumulate in f32.

    ```mlir
    %v = moe.expert_proj %x, %w_v, %g, %i : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x32xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[2]>:$input,
                       Moe_ValueTensorOfRank<[3]>:$weight,
                       Moe_ScoreTensorOfRank<[3]>:$gates,
                       Moe_IndexTensorOfRank<[3]>:$indices);
  let results = (outs Moe_ValueTensorOfRank<[3]>:$result);

  let assemblyFormat = [{
    $input `,` $weight `,` $gates `,` $indices attr-dict `:` type($input) `,`
    type($weight) `,` type($gates) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ExpertMergeOp
//===----------------------------------------------------------------------===//

def Moe_ExpertMergeOp : Moe_Op<"expert_merge", [Pure,
    AllElementTypesMatch<["heads", "weight", "result"]>,
    AllShapesMatch<["gates", "indices"]>]> {
  let summary = "SwitchHead output projection: one gated reduction over "
                "heads × k routes";
  let description = [{
    The output-side expert projection of SwitchHead. For every token `n`,
    with `E = dim(weight, 0) / H` experts per head:

    ```
    result[n, :] = Σ_h Σ_j gates[n, h, j] · heads[n, h, :] · weight[h·E + indices[n, h, j]]
    ```

    `heads` is the attention output per head `[N, H, F]`, `weight`
    `[H·E, F, D]`, `gates` and `indices` `[N, H, K]` (from `moe.topk` on the
    destination-side scores) and the result `[N, D]`. The sum over heads and
    experts is a single reduction over `H·K` routes, accumulated in f32.

    ```mlir
    %y = moe.expert_merge %o, %w_o, %g, %i : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x128xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[3]>:$heads,
                       Moe_ValueTensorOfRank<[3]>:$weight,
                       Moe_ScoreTensorOfRank<[3]>:$gates,
                       Moe_IndexTensorOfRank<[3]>:$indices);
  let results = (outs Moe_ValueTensorOfRank<[2]>:$result);

  let assemblyFormat = [{
    $heads `,` $weight `,` $gates `,` $indices attr-dict `:` type($heads) `,`
    type($weight) `,` type($gates) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradients of the expert projections
//===----------------------------------------------------------------------===//

def Moe_ExpertProjGradOp : Moe_Op<"expert_proj_grad", [Pure,
    AllTypesMatch<["input", "input_grad"]>,
    AllTypesMatch<["weight", "weight_grad"]>,
    AllTypesMatch<["gates", "gates_grad"]>,
    AllElementTypesMatch<["input", "weight", "result_grad"]>,
    AllShapesMatch<["gates", "indices"]>]> {
  let summary = "the vector-Jacobian product of moe.expert_proj";
  let description = [{
    Given the operands of a `moe.expert_proj` and the adjoint `result_grad`
    (`dout`, `[N, H, F]`) of its result, computes the adjoints of the input,
    the stacked expert weight and the gates. With `r = h·E + indices[n, h, j]`
    and `g = gates[n, h, j]`:

    ```
    input_grad[n, d]     = Σ_{h, j} g · Σ_f dout[n, h, f] · weight[r, d, f]
    gates_grad[n, h, j]  = Σ_f dout[n, h, f] · Σ_d input[n, d] · weight[r, d, f]
    weight_grad[r, d, f] = Σ_n Σ_j [route (n, h, j) picks row r] · g · input[n, d] · dout[n, h, f]
    ```

    in f32, converted to the operands' element types. No gradient flows into
    the indices. This is what `lm-differentiate` emits for
    `moe.expert_proj`; `convert-moe-to-linalg` lowers it as linalg on
    tensors, in the dense all-experts formulation (contractions over every
    expert, `[N, H, E, F]`), and `moe-fuse-expert-projection` turns it into
    `moe.fused_expert_proj_grad`.

    ```mlir
    %dx, %dw, %dg = moe.expert_proj_grad %x, %w_v, %g, %i, %dv : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x32xf32> -> tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[2]>:$input,
                       Moe_ValueTensorOfRank<[3]>:$weight,
                       Moe_ScoreTensorOfRank<[3]>:$gates,
                       Moe_IndexTensorOfRank<[3]>:$indices,
                       Moe_ValueTensorOfRank<[3]>:$result_grad);
  let results = (outs Moe_ValueTensorOfRank<[2]>:$input_grad,
                      Moe_ValueTensorOfRank<[3]>:$weight_grad,
                      Moe_ScoreTensorOfRank<[3]>:$gates_grad);

  let assemblyFormat = [{
    $input `,` $weight `,` $gates `,` $indices `,` $result_grad attr-dict `:`
    type($input) `,` type($weight) `,` type($gates) `,` type($indices) `,`
    type($result_grad) `->` type($input_grad) `,` type($weight_grad) `,`
    type($gates_grad)
  }];
  let hasVerifier = 1;
}

def Moe_ExpertMergeGradOp : Moe_Op<"expert_merge_grad", [Pure,
    AllTypesMatch<["heads", "heads_grad"]>,
    AllTypesMatch<["weight", "weight_grad"]>,
    AllTypesMatch<["gates", "gates_grad"]>,
    AllElementTypesMatch<["heads", "weight", "result_grad"]>,
    AllShapesMatch<["gates", "indices"]>]> {
  let summary = "the vector-Jacobian product of moe.expert_merge";
  let description = [{
    Given the operands of a `moe.expert_merge` and the adjoint `result_grad`
    (`dy`, `[N, D]`) of its result, computes the adjoints of the heads, the
    stacked expert weight and the gates. With `r = h·E + indices[n, h, j]`
    and `g = gates[n, h, j]`:

    ```
    heads_grad[n, h, f]  = Σ_j g · Σ_o dy[n, o] · weight[r, f, o]
    gates_grad[n, h, j]  = Σ_o dy[n, o] · Σ_f heads[n, h, f] · weight[r, f, o]
    weight_grad[r, f, o] = Σ_n Σ_j [route (n, h, j) picks row r] · g · heads[n, h, f] · dy[n, o]
    ```

    in f32, converted to the operands' element types. This is what
    `lm-differentiate` emits for `moe.expert_merge`; `convert-moe-to-linalg`
    lowers it as linalg on tensors, in the dense all-experts formulation
    (contractions over every expert, `[N, H, E, F]`), and
    `moe-fuse-expert-projection` turns it into `moe.fused_expert_merge_grad`.

    ```mlir
    %do, %dw, %dg = moe.expert_merge_grad %o, %w_o, %g, %i, %dy : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x128xf32> -> tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[3]>:$heads,
                       Moe_ValueTensorOfRank<[3]>:$weight,
                       Moe_ScoreTensorOfRank<[3]>:$gates,
                       Moe_IndexTensorOfRank<[3]>:$indices,
                       Moe_ValueTensorOfRank<[2]>:$result_grad);
  let results = (outs Moe_ValueTensorOfRank<[3]>:$heads_grad,
                      Moe_ValueTensorOfRank<[3]>:$weight_grad,
                      Moe_ScoreTensorOfRank<[3]>:$gates_grad);

  let assemblyFormat = [{
    $heads `,` $weight `,` $gates `,` $indices `,` $result_grad attr-dict `:`
    type($heads) `,` type($weight) `,` type($gates) `,` type($indices) `,`
    type($result_grad) `->` type($heads_grad) `,` type($weight_grad) `,`
    type($gates_grad)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ExpertMlpOp
//===----------------------------------------------------------------------===//

def Moe_ExpertMlpOp : Moe_Op<"expert_mlp", [Pure,
    AllElementTypesMatch<["input", "up", "down", "result"]>,
    AllShapesMatch<["gates", "indices"]>,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "sigma-MoE feed-forward: gated sum of ReLU expert MLPs";
  let description = [{
    The expert computation of a sigma-MoE feed-forward layer. For every
    token `n`:

    ```
    result[n, :] = Σ_j gates[n, j] · ReLU(input[n, :] · up[e]) · down[e],  e = indices[n, j]
    ```

    `input` and the result are `[N, D]`, `up` `[E, D, G]`, `down` `[E, G, D]`,
    `gates` and `indices` `[N, K]` (from `moe.topk` on the router scores).
    There are no biases. Products accumulate in f32.

    ```mlir
    %y = moe.expert_mlp %x, %w1, %w2, %g, %i : tensor<?x128xf32>, tensor<8x128x64xf32>, tensor<8x64x128xf32>, tensor<?x2xf32>, tensor<?x2xi32> -> tensor<?x128xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[2]>:$input,
                       Moe_ValueTensorOfRank<[3]>:$up,
                       Moe_ValueTensorOfRank<[3]>:$down,
                       Moe_ScoreTensorOfRank<[2]>:$gates,
                       Moe_IndexTensorOfRank<[2]>:$indices);
  let results = (outs Moe_ValueTensorOfRank<[2]>:$result);

  let assemblyFormat = [{
    $input `,` $up `,` $down `,` $gates `,` $indices attr-dict `:`
    type($input) `,` type($up) `,` type($down) `,` type($gates) `,`
    type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

def Moe_AttentionOp : Moe_Op<"attention", [Pure,
    AllElementTypesMatch<["query", "key", "value", "result"]>,
    AllTypesMatch<["query", "result"]>]> {
  let summary = "causal multi-head attention core, optionally with relative "
                "position keys";
  let description = [{
    The attention core shared by dense and SwitchHead attention, on
    `[batch, time, heads, width]` tensors, after the projections (queries
    and keys already scaled). Query `t` has position `t`; the `S` keys end
    where the queries end, so key `u` has position `u - (S - T)` (the first
    `S - T` keys are Transformer-XL memory). Query `t` attends to the keys
    with position at most `t`:

    ```
    score[b, t, u, a] = Σ_f query[b, t, a, f] · (key[b, u, a, f] + rel[δ, a, f]),
                        δ = t - position(u)      (the rel term only with rel)
    A[b, t, :, a]     = softmax over the allowed u of score[b, t, :, a]
    result[b, t, a, :] = Σ_u A[b, t, u, a] · value[b, u, a, :]
    ```

    `rel` `[S, H, F]` holds one key per distance `δ` in `[0, S)`: for
    Transformer-XL, the projected sinusoidal encoding of the relative
    position `-δ` (key − query). Scores and softmax are computed in f32.

    ```mlir
    %o = moe.attention %q, %k, %v : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>
    %x = moe.attention %q, %km, %vm rel(%r : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x16x2x8xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[4]>:$query,
                       Moe_ValueTensorOfRank<[4]>:$key,
                       Moe_ValueTensorOfRank<[4]>:$value,
                       Optional<Moe_ValueTensorOfRank<[3]>>:$rel);
  let results = (outs Moe_ValueTensorOfRank<[4]>:$result);

  let assemblyFormat = [{
    $query `,` $key `,` $value (`rel` `(` $rel^ `:` type($rel) `)`)? attr-dict
    `:` type($query) `,` type($key) `,` type($value) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Dense building blocks
//===----------------------------------------------------------------------===//

def Moe_LinearOp : Moe_Op<"linear", [Pure,
    AllElementTypesMatch<["input", "weight", "result"]>]> {
  let summary = "scaled projection: result = scale · input · weightᵀ";
  let description = [{
    `result[n, m] = scale · Σ_k input[n, k] · weight[m, k]`, accumulated in
    f32, with `weight` in the PyTorch `Linear` layout `[out, in]`. The
    projections of attention (with `scale = d_h^(-1/4)` for queries and
    keys), of the feed-forward layers and of the output head.

    ```mlir
    %y = moe.linear %x, %w {scale = 5.000000e-01 : f64} : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
    ```
  }];
  let arguments = (ins Moe_ValueTensorOfRank<[2]>:$input,
                       Moe_ValueTensorOfRank<[2]>:$weight,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Moe_ValueTensorOfRank<[2]>:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Moe_LayerNormOp : Moe_Op<"layer_norm", [Pure,
    AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["weight", "bias"]>,
    AllElementTypesMatch<["input", "weight"]>]> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + eps) · weight + bias` over the last dimension
    `D`, with the biased variance, computed in f32. `weight` and `bias` are
    `[D]`.

    ```mlir
    %y = moe.layer_norm %x, %w, %b {eps = 1.000000e-05 : f64} : tensor<?x4x16xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<Moe_ActivationTypes, [2, 3]>:$input,
                       Moe_ValueTensorOfRank<[1]>:$weight,
                       Moe_ValueTensorOfRank<[1]>:$bias,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs TensorRankOf<Moe_ActivationTypes, [2, 3]>:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Moe_RopeOp : Moe_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding of the first half of each head";
  let description = [{
    Rotates, for each position `p = l - offset` of the `[B, L, H, F]` input
    (so memory keys before the current tokens have negative positions), the
    first `r = 2·⌊F/4⌋` channels of every head in rotate-half pairs:
    `θ_i = p · 10000^(-2i/r)`, `(y_i, y_{i+r/2}) = (x_i cos θ_i - x_{i+r/2}
    sin θ_i, x_{i+r/2} cos θ_i + x_i sin θ_i)` for `i < r/2`; the other
    channels pass through.

    ```mlir
    %y = moe.rope %q {offset = 0 : i64} : tensor<?x16x2x8xf32>
    ```
  }];
  let arguments = (ins Moe_ValueTensorOfRank<[4]>:$input,
                       DefaultValuedAttr<I64Attr, "0">:$offset);
  let results = (outs Moe_ValueTensorOfRank<[4]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Moe_ReluOp : Moe_Op<"relu", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "element-wise max(x, 0)";
  let description = [{
    The activation of the dense feed-forward block.

    ```mlir
    %y = moe.relu %x : tensor<?x64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<Moe_ActivationTypes>:$input);
  let results = (outs RankedTensorOf<Moe_ActivationTypes>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Moe_EmbedOp : Moe_Op<"embed", [Pure,
    AllElementTypesMatch<["table", "result"]>]> {
  let summary = "row gather: result[b, t, :] = table[tokens[b, t], :]";
  let description = [{
    Looks up one row of `table` `[V, D]` per token id of `tokens` `[B, T]`.
    Ids outside `[0, V)` are undefined behaviour; the runtime rejects them
    before execution.

    ```mlir
    %x = moe.embed %table, %tokens : tensor<256x16xf32>, tensor<?x8xi32> -> tensor<?x8x16xf32>
    ```
  }];
  let arguments = (ins Moe_ValueTensorOfRank<[2]>:$table,
                       Moe_IndexTensorOfRank<[2]>:$tokens);
  let results = (outs Moe_ValueTensorOfRank<[3]>:$result);
  let assemblyFormat = [{
    $table `,` $tokens attr-dict `:` type($table) `,` type($tokens) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Moe_ConcatOp : Moe_Op<"concat", [Pure,
    AllElementTypesMatch<["first", "second", "result"]>]> {
  let summary = "[B, M, D] and [B, T, D] joined along time into [B, M+T, D]";
  let description = [{
    Places `first` before `second` along dimension 1: how Transformer-XL
    attention prepends the memory block to the current tokens.

    ```mlir
    %kv = moe.concat %memory, %x : tensor<?x8x16xf32>, tensor<?x4x16xf32> -> tensor<?x12x16xf32>
    ```
  }];
  let arguments = (ins Moe_ValueTensorOfRank<[3]>:$first,
                       Moe_ValueTensorOfRank<[3]>:$second);
  let results = (outs Moe_ValueTensorOfRank<[3]>:$result);
  let assemblyFormat = [{
    $first `,` $second attr-dict `:` type($first) `,` type($second) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Moe_CrossEntropyOp : Moe_Op<"cross_entropy", [Pure]> {
  let summary = "mean next-token cross-entropy of logits, in nats, in f32";
  let description = [{
    `mean over (b, t) of logsumexp(logits[b, t]) - logits[b, t, targets[b, t]]`.

    ```mlir
    %loss = moe.cross_entropy %logits, %targets : tensor<?x8x256xf32>, tensor<?x8xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Moe_ValueTensorOfRank<[3]>:$logits,
                       Moe_IndexTensorOfRank<[2]>:$targets);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` type($logits) `,` type($targets) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Training-only ops: dropout and auxiliary losses
//===----------------------------------------------------------------------===//

def Moe_DropoutMaskOp : Moe_Op<"dropout_mask", [Pure]> {
  let summary = "a seeded Bernoulli(rate) mask shaped like a tensor";
  let description = [{
    `true` marks a dropped element. Without a `seed` the op is in inference
    mode and the mask is all `false`; `lm-differentiate` seeds every
    unseeded mask of a training function with the step's seed argument and
    a distinct `stream`.

    Counter-based, so the mask depends on `(seed, stream, element)` only and
    recomputing it (in the backward pass, after a resume, on another target)
    gives the same bits: element `i` (row-major) is dropped when
    `splitmix64(splitmix64(seed + stream) + i) >> 40` is less than
    `floor(rate · 2^24)` (docs/Semantics.md).

    ```mlir
    %m = moe.dropout_mask %x {rate = 0.1 : f64} : tensor<?x64xf32> -> tensor<?x64xi1>
    %n = moe.dropout_mask %x seed(%s) {rate = 0.1 : f64, stream = 3 : i64} : tensor<?x64xf32>, tensor<i64> -> tensor<?x64xi1>
    ```
  }];
  let arguments = (ins RankedTensorOf<Moe_ActivationTypes>:$like,
                       Optional<0DTensorOf<[I64]>>:$seed,
                       F64Attr:$rate,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs RankedTensorOf<[I1]>:$mask);
  let assemblyFormat = [{
    $like (`seed` `(` $seed^ `)`)? attr-dict `:` type($like)
    (`,` type($seed)^)? `->` type($mask)
  }];
  let hasVerifier = 1;
}

def Moe_DropoutOp : Moe_Op<"dropout", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "inverted dropout: zero where masked, scale the rest";
  let description = [{
    `result = mask ? 0 : input / (1 - rate)`, with the mask of a
    `moe.dropout_mask` of the same `rate`. An unseeded mask makes the op the
    identity. The gradient applies the same mask and scale.

    ```mlir
    %y = moe.dropout %x, %m {rate = 0.1 : f64} : tensor<?x64xf32>, tensor<?x64xi1>
    ```
  }];
  let arguments = (ins RankedTensorOf<Moe_ActivationTypes>:$input,
                       RankedTensorOf<[I1]>:$mask, F64Attr:$rate);
  let results = (outs RankedTensorOf<Moe_ActivationTypes>:$result);
  let assemblyFormat = [{
    $input `,` $mask attr-dict `:` type($input) `,` type($mask)
  }];
  let hasVerifier = 1;
}

def Moe_RoutingEntropyOp : Moe_Op<"routing_entropy", [Pure]> {
  let summary = "entropy of the token-averaged softmax of router logits";
  let description = [{
    `H(P) = -Σ_e P_e log P_e` with `P = mean over tokens n of
    softmax(logits[n, :])`: the σ-MoE balancing term (large when the
    tokens of the batch spread over the experts). In f32.

    ```mlir
    %h = moe.routing_entropy %z : tensor<?x16xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Moe_ValueTensorOfRank<[2]>:$logits);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($result)";
}

def Moe_AddLossOp : Moe_Op<"add_loss", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "passes a tensor through and adds a weighted auxiliary loss";
  let description = [{
    The identity on `input`; differentiation adds `weight · aux` to the
    training objective (the adjoint of `aux` is `weight`), as Megatron's
    auxiliary-loss scaler does. Outside a gradient function it lowers to
    its input and `aux` is dead code. The reported loss stays the
    cross-entropy.

    ```mlir
    %y = moe.add_loss %x, %h {weight = -1.0e-04 : f64} : tensor<?x64xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins RankedTensorOf<Moe_ActivationTypes>:$input,
                       0DTensorOf<[F32]>:$aux, F64Attr:$weight);
  let results = (outs RankedTensorOf<Moe_ActivationTypes>:$result);
  let assemblyFormat = [{
    $input `,` $aux attr-dict `:` type($input) `,` type($aux)
  }];
}

//===----------------------------------------------------------------------===//
// Fused kernels
//
// Kernel-level ops produced by the fusion passes (moe-fuse-router,
// moe-fuse-expert-projection) after differentiation. Each computes exactly
// what the ops it replaces compute and lowers, in convert-moe-to-linalg, to
// ONE row kernel: an `scf.forall` on tensors whose iterations (one per
// token, head or output chunk) keep their state in scalars and vectors and
// write disjoint slices of the results. The unfused ops lower to linalg
// with intermediate tensors instead; see docs/Semantics.md.
//===----------------------------------------------------------------------===//

def Moe_FusedRouterOp : Moe_Op<"fused_router", [Pure,
    AllElementTypesMatch<["input", "weight"]>,
    AllShapesMatch<["values", "indices"]>]> {
  let summary = "router matmul, sigmoid and top-k in one kernel";
  let description = [{
    `moe.gate` followed by `moe.topk` on its scores, in one kernel:

    ```
    scores[n, (h,) e]      = sigmoid(Σ_d input[n, d] · weight[h·E + e, d])
    values, indices[n, (h)] = top-k of scores[n, (h,) :] (moe.topk semantics)
    ```

    One row kernel iteration per token (and head) computes the `E` dot
    products in f32 in the order `moe.gate` does (so the scores are the
    same bits), applies the sigmoid and keeps a running top-k in `k` scalar
    slots: descending order, ties to the lower index. The optional `mask`
    is expert dropout exactly as in `moe.topk`: a masked expert has key
    `-inf` for the selection but reports its unmasked score, and if fewer
    than `k` experts are unmasked the remaining slots take masked experts
    in index order.

    `scores` is the full score tensor `moe.gate` produced, for users other
    than the top-k (the gate's gradient); the kernel writes it only when it
    has uses.

    ```mlir
    %v, %i, %s = moe.fused_router %x, %w k(3) : tensor<?x128xf32>, tensor<10x128xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>
    %mv, %mi, %ms = moe.fused_router %x, %w k(2) mask(%drop) : tensor<?x128xf32>, tensor<8x128xf32>, tensor<?x8xi1> -> tensor<?x2xf32>, tensor<?x2xi64>, tensor<?x8xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[2]>:$input,
                       Moe_ValueTensorOfRank<[2]>:$weight,
                       ConfinedAttr<I64Attr, [IntPositive]>:$k,
                       Optional<TensorRankOf<[I1], [2, 3]>>:$mask);
  let results = (outs Moe_ScoreTensorOfRank<[2, 3]>:$values,
                      Moe_IndexTensorOfRank<[2, 3]>:$indices,
                      Moe_ScoreTensorOfRank<[2, 3]>:$scores);

  let assemblyFormat = [{
    $input `,` $weight `k` `(` $k `)` (`mask` `(` $mask^ `)`)? attr-dict `:`
    type($input) `,` type($weight) (`,` type($mask)^)? `->` type($values)
    `,` type($indices) `,` type($scores)
  }];
  let hasVerifier = 1;
}

def Moe_FusedExpertProjOp : Moe_Op<"fused_expert_proj", [Pure,
    AllElementTypesMatch<["input", "weight", "result"]>,
    AllShapesMatch<["gates", "indices"]>]> {
  let summary = "moe.expert_proj as one kernel: gather, matmul, gate "
                "scaling and the sum over routes";
  let description = [{
    Computes exactly `moe.expert_proj` (same operands, same result):

    ```
    result[n, h, :] = Σ_j gates[n, h, j] · input[n, :] · weight[h·E + indices[n, h, j]]
    ```

    One row kernel iteration per token, head and chunk of `C` output
    columns (`C` the largest divisor of the head width `F` that is at most
    64) gathers the selected expert matrices, accumulates each route's
    projection in a `vector<C x f32>` register and adds it, scaled by its
    gate, to the result: no `[N, H, K, F]` per-route tensor exists. The
    head width must be static.

    ```mlir
    %v = moe.fused_expert_proj %x, %w_v, %g, %i : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x32xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[2]>:$input,
                       Moe_ValueTensorOfRank<[3]>:$weight,
                       Moe_ScoreTensorOfRank<[3]>:$gates,
                       Moe_IndexTensorOfRank<[3]>:$indices);
  let results = (outs Moe_ValueTensorOfRank<[3]>:$result);

  let assemblyFormat = [{
    $input `,` $weight `,` $gates `,` $indices attr-dict `:` type($input) `,`
    type($weight) `,` type($gates) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Moe_FusedExpertMergeOp : Moe_Op<"fused_expert_merge", [Pure,
    AllElementTypesMatch<["heads", "weight", "result"]>,
    AllShapesMatch<["gates", "indices"]>]> {
  let summary = "moe.expert_merge as one kernel: gather, matmul, gate "
                "scaling and the sum over heads × k routes";
  let description = [{
    Computes exactly `moe.expert_merge` (same operands, same result):

    ```
    result[n, :] = Σ_h Σ_j gates[n, h, j] · heads[n, h, :] · weight[h·E + indices[n, h, j]]
    ```

    One row kernel iteration per token and chunk of `C` output columns
    (`C` the largest divisor of the model width `D` that is at most 64)
    walks the `H·K` routes, accumulating each route's projection in a
    `vector<C x f32>` register and adding it, scaled by its gate: no
    `[N, H, K, D]` per-route tensor exists. The model width must be static.

    ```mlir
    %y = moe.fused_expert_merge %o, %w_o, %g, %i : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x128xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[3]>:$heads,
                       Moe_ValueTensorOfRank<[3]>:$weight,
                       Moe_ScoreTensorOfRank<[3]>:$gates,
                       Moe_IndexTensorOfRank<[3]>:$indices);
  let results = (outs Moe_ValueTensorOfRank<[2]>:$result);

  let assemblyFormat = [{
    $heads `,` $weight `,` $gates `,` $indices attr-dict `:` type($heads) `,`
    type($weight) `,` type($gates) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Moe_FusedExpertProjGradOp : Moe_Op<"fused_expert_proj_grad", [Pure,
    AllTypesMatch<["input", "input_grad"]>,
    AllTypesMatch<["weight", "weight_grad"]>,
    AllTypesMatch<["gates", "gates_grad"]>,
    AllElementTypesMatch<["input", "weight", "result_grad"]>,
    AllShapesMatch<["gates", "indices"]>]> {
  let summary = "moe.expert_proj_grad as three row kernels, without route "
                "tensors";
  let description = [{
    Computes exactly `moe.expert_proj_grad` (same operands, same results),
    one row kernel per gradient, each gathering the selected expert matrices
    itself:

    - `input_grad`: one iteration per token `n` and chunk of `C` model
      columns `d` accumulates `Σ_{h, j} g · Σ_f dout[n, h, f] · weight[r, d, f]`
      in a `vector<C x f32>`.
    - `gates_grad`: one iteration per route `(n, h, j)` projects the token
      through the selected expert chunk by chunk of the head width and dots
      it with `dout[n, h, :]`.
    - `weight_grad`: one iteration per expert row `r`, model column `d` and
      chunk of `C` head columns scans all tokens, adding
      `(Σ_j [indices[n, h, j] == e] · g) · input[n, d] · dout[n, h, chunk]`.
      This is the dense formulation masked per route: it costs
      `O(N · H·E · D · F)` whatever `k` is (the unfused dense lowering has
      the same cost); a scan over routes sorted by expert, as CVMM does, is
      not implemented.

    No `[N, H, E, F]` all-experts tensor and no `[N, H, K, F]` per-route
    tensor exist. The weight's dims 1 and 2 (model and head width) must be static.

    ```mlir
    %dx, %dw, %dg = moe.fused_expert_proj_grad %x, %w_v, %g, %i, %dv : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x32xf32> -> tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[2]>:$input,
                       Moe_ValueTensorOfRank<[3]>:$weight,
                       Moe_ScoreTensorOfRank<[3]>:$gates,
                       Moe_IndexTensorOfRank<[3]>:$indices,
                       Moe_ValueTensorOfRank<[3]>:$result_grad);
  let results = (outs Moe_ValueTensorOfRank<[2]>:$input_grad,
                      Moe_ValueTensorOfRank<[3]>:$weight_grad,
                      Moe_ScoreTensorOfRank<[3]>:$gates_grad);

  let assemblyFormat = [{
    $input `,` $weight `,` $gates `,` $indices `,` $result_grad attr-dict `:`
    type($input) `,` type($weight) `,` type($gates) `,` type($indices) `,`
    type($result_grad) `->` type($input_grad) `,` type($weight_grad) `,`
    type($gates_grad)
  }];
  let hasVerifier = 1;
}

def Moe_FusedExpertMergeGradOp : Moe_Op<"fused_expert_merge_grad", [Pure,
    AllTypesMatch<["heads", "heads_grad"]>,
    AllTypesMatch<["weight", "weight_grad"]>,
    AllTypesMatch<["gates", "gates_grad"]>,
    AllElementTypesMatch<["heads", "weight", "result_grad"]>,
    AllShapesMatch<["gates", "indices"]>]> {
  let summary = "moe.expert_merge_grad as three row kernels, without route "
                "tensors";
  let description = [{
    Computes exactly `moe.expert_merge_grad` (same operands, same results),
    one row kernel per gradient:

    - `heads_grad`: one iteration per token, head and chunk of `C` head
      columns `f` accumulates `Σ_j g · Σ_o dy[n, o] · weight[r, f, o]` in a
      `vector<C x f32>`.
    - `gates_grad`: one iteration per route `(n, h, j)` projects the head
      through the selected expert chunk by chunk of the model width and
      dots it with `dy[n, :]`.
    - `weight_grad`: one iteration per expert row `r`, head column `f` and
      chunk of `C` model columns scans all tokens, adding
      `(Σ_j [indices[n, h, j] == e] · g) · heads[n, h, f] · dy[n, chunk]`:
      the dense formulation masked per route, `O(N · H·E · F · D)` whatever
      `k` is; sorting the routes by expert (CVMM) is not implemented.

    No `[N, H, E, F]` all-experts tensor and no `[N, H, K, D]` per-route
    tensor exist. The weight's dims 1 and 2 (head and model width) must be static.

    ```mlir
    %do, %dw, %dg = moe.fused_expert_merge_grad %o, %w_o, %g, %i, %dy : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x128xf32> -> tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[3]>:$heads,
                       Moe_ValueTensorOfRank<[3]>:$weight,
                       Moe_ScoreTensorOfRank<[3]>:$gates,
                       Moe_IndexTensorOfRank<[3]>:$indices,
                       Moe_ValueTensorOfRank<[2]>:$result_grad);
  let results = (outs Moe_ValueTensorOfRank<[3]>:$heads_grad,
                      Moe_ValueTensorOfRank<[3]>:$weight_grad,
                      Moe_ScoreTensorOfRank<[3]>:$gates_grad);

  let assemblyFormat = [{
    $heads `,` $weight `,` $gates `,` $indices `,` $result_grad attr-dict `:`
    type($heads) `,` type($weight) `,` type($gates) `,` type($indices) `,`
    type($result_grad) `->` type($heads_grad) `,` type($weight_grad) `,`
    type($gates_grad)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention gradient and the flash-attention ops of moe-fuse-attention
//===----------------------------------------------------------------------===//

def Moe_AttentionGradOp : Moe_Op<"attention_grad", [Pure,
    AllTypesMatch<["query", "query_grad"]>,
    AllTypesMatch<["key", "key_grad"]>,
    AllTypesMatch<["value", "value_grad"]>,
    AllTypesMatch<["query", "result_grad"]>,
    AllElementTypesMatch<["query", "key", "value"]>]> {
  let summary = "the vector-Jacobian product of moe.attention";
  let description = [{
    Given the operands of a `moe.attention` and the adjoint `result_grad` of
    its result, computes the adjoints of the query, key, value and (with
    `rel`) relative-key operands. With `P` the causal softmax weights of the
    forward op and `ds = P · (dP - Σ_u P · dP)`:

    ```
    dP[b, t, u, a]   = Σ_f result_grad[b, t, a, f] · value[b, u, a, f]
    value_grad[b, u] = Σ_t P[b, t, u] · result_grad[b, t]
    query_grad[b, t] = Σ_u ds[b, t, u] · (key[b, u] + rel[δ])
    key_grad[b, u]   = Σ_t ds[b, t, u] · query[b, t]
    rel_grad[δ]      = Σ_{b, t} ds[b, t, t + (S - T) - δ] · query[b, t]
    ```

    per head `a`, in f32, converted to the operands' element types. This is
    what `lm-differentiate` emits for `moe.attention`; `convert-moe-to-linalg`
    lowers it with the weights `P` materialised (`[B, H, T, S]`), and
    `moe-fuse-attention` turns it into `moe.flash_attention_grad`, which does
    not materialise them.

    ```mlir
    %dq, %dk, %dv = moe.attention_grad %q, %k, %v, %do : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>
    %gq, %gk, %gv, %gr = moe.attention_grad %q, %km, %vm, %do rel(%r : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<32x2x8xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[4]>:$query,
                       Moe_ValueTensorOfRank<[4]>:$key,
                       Moe_ValueTensorOfRank<[4]>:$value,
                       Moe_ValueTensorOfRank<[4]>:$result_grad,
                       Optional<Moe_ValueTensorOfRank<[3]>>:$rel);
  let results = (outs Moe_ValueTensorOfRank<[4]>:$query_grad,
                      Moe_ValueTensorOfRank<[4]>:$key_grad,
                      Moe_ValueTensorOfRank<[4]>:$value_grad,
                      Optional<Moe_ValueTensorOfRank<[3]>>:$rel_grad);

  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $result_grad
    (`rel` `(` $rel^ `:` type($rel) `)`)? attr-dict `:` type($query) `,`
    type($key) `,` type($value) `,` type($result_grad) `->` type($query_grad)
    `,` type($key_grad) `,` type($value_grad) (`,` type($rel_grad)^)?
  }];
  let hasVerifier = 1;
}

def Moe_FlashAttentionOp : Moe_Op<"flash_attention", [Pure,
    AllElementTypesMatch<["query", "key", "value", "result"]>,
    AllTypesMatch<["query", "result"]>]> {
  let summary = "moe.attention with an online softmax, and its row "
                "logsumexp";
  let description = [{
    Computes the same `result` as `moe.attention` (same operands, same
    causal visibility, XL memory and relative keys) without materialising
    the `[B, H, T, S]` scores: one row `(b, t, a)` at a time, the visible
    keys are visited in order with a running maximum `m`, a running sum `l`
    of `exp(score - m)` and an accumulator of the weighted values, rescaled
    by `exp(m_old - m_new)` whenever the maximum grows (the online softmax of
    FlashAttention). `logsumexp[b, t, a] = m + log(l)` (f32) is the row's
    softmax normaliser, from which `moe.flash_attention_grad` recomputes the
    weights.

    The head width `F` must be static (a row is a `vector<F>`).

    ```mlir
    %o, %lse = moe.flash_attention %q, %k, %v : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2xf32>
    %x, %xl = moe.flash_attention %q, %km, %vm rel(%r : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[4]>:$query,
                       Moe_ValueTensorOfRank<[4]>:$key,
                       Moe_ValueTensorOfRank<[4]>:$value,
                       Optional<Moe_ValueTensorOfRank<[3]>>:$rel);
  let results = (outs Moe_ValueTensorOfRank<[4]>:$result,
                      Moe_ScoreTensorOfRank<[3]>:$logsumexp);

  let assemblyFormat = [{
    $query `,` $key `,` $value (`rel` `(` $rel^ `:` type($rel) `)`)? attr-dict
    `:` type($query) `,` type($key) `,` type($value) `->` type($result) `,`
    type($logsumexp)
  }];
  let hasVerifier = 1;
}

def Moe_FlashAttentionGradOp : Moe_Op<"flash_attention_grad", [Pure,
    AllTypesMatch<["query", "result", "result_grad", "query_grad"]>,
    AllTypesMatch<["key", "key_grad"]>,
    AllTypesMatch<["value", "value_grad"]>,
    AllElementTypesMatch<["query", "key", "value"]>]> {
  let summary = "the gradient of moe.flash_attention, recomputing the "
                "weights row by row";
  let description = [{
    Computes the same adjoints as `moe.attention_grad` in the manner of
    FlashAttention-2, from the forward `result` and its `logsumexp`: the
    weights are recomputed where they are needed as
    `P = exp(score - logsumexp)` and never stored. With
    `Δ[b, t, a] = Σ_f result_grad · result` and `ds = P · (dP - Δ)`:
    one kernel over the query rows `(b, t, a)` sums `ds · (key + rel[δ])`
    over the visible keys (the query gradient, and Δ); one over the key rows
    `(b, u, a)` sums `P · result_grad` and `ds · query` over the queries
    that see key `u` (the value and key gradients); with `rel`, one over
    `(δ, a)` sums `ds · query` over `(b, t)` with `u = t + (S - T) - δ`.

    The head width `F` must be static.

    ```mlir
    %dq, %dk, %dv = moe.flash_attention_grad %q, %k, %v, %o, %lse, %do : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[4]>:$query,
                       Moe_ValueTensorOfRank<[4]>:$key,
                       Moe_ValueTensorOfRank<[4]>:$value,
                       Moe_ValueTensorOfRank<[4]>:$result,
                       Moe_ScoreTensorOfRank<[3]>:$logsumexp,
                       Moe_ValueTensorOfRank<[4]>:$result_grad,
                       Optional<Moe_ValueTensorOfRank<[3]>>:$rel);
  let results = (outs Moe_ValueTensorOfRank<[4]>:$query_grad,
                      Moe_ValueTensorOfRank<[4]>:$key_grad,
                      Moe_ValueTensorOfRank<[4]>:$value_grad,
                      Optional<Moe_ValueTensorOfRank<[3]>>:$rel_grad);

  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $result `,` $logsumexp `,` $result_grad
    (`rel` `(` $rel^ `:` type($rel) `)`)? attr-dict `:` type($query) `,`
    type($key) `,` type($value) `,` type($result) `,` type($logsumexp) `,`
    type($result_grad) `->` type($query_grad) `,` type($key_grad) `,`
    type($value_grad) (`,` type($rel_grad)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Grouped expert kernels (tensors, then buffers)
//===----------------------------------------------------------------------===//

/// The padded rows of the grouped kernels and their f32 accumulators, as
/// tensors before bufferization and as buffers after it.
defvar Moe_GroupedTypes = [F32, F16, BF16];

def Moe_GroupedMatmulOp : Moe_Op<"grouped_matmul", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "one matmul per expert over its segment of padded rows";
  let description = [{
    The product of the grouped (CVMM-like) expert formulation without host
    reads: the routes' rows lie sorted by expert in `rows` `[P, A]`, each
    expert's segment padded to a multiple of `tile_size` rows, and
    `tile_experts` `[P / tile_size]` names the expert of each tile of rows.
    With `e = tile_experts[p floordiv tile_size]`:

    ```
    result[p, c] = init[p, c] + Σ_a rows[p, a] · weight[e, a, c]   if e < E
    result[p, c] = init[p, c]                                       otherwise
    ```

    (`weight[e, c, a]` with `transpose_weight`; `E` is weight dim 0). A
    tile whose expert is `E` or more is padding: its rows are left as they
    are. Products accumulate in f32 (`init` is f32).

    Like linalg's structured ops the op has value semantics on tensors and
    writes `init` in place on buffers (no result): it survives
    bufferization, so that the GPU target can give every block of rows its
    expert's weight in one tensor-core kernel
    (`switchyard-gpu-tensor-core-matmul`); elsewhere
    `switchyard-lower-grouped-kernels` lowers it to loops.

    ```mlir
    %p = moe.grouped_matmul ins(%rows, %w, %te : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?xindex>) outs(%init : tensor<?x32xf32>) tile_size(64) -> tensor<?x32xf32>
    ```
  }];

  let arguments = (ins TensorOrMemRef<Moe_GroupedTypes>:$rows,
                       TensorOrMemRef<Moe_GroupedTypes>:$weight,
                       TensorOrMemRef<[Index]>:$tile_experts,
                       TensorOrMemRef<[F32]>:$init,
                       ConfinedAttr<I64Attr, [IntPositive]>:$tile_size,
                       UnitAttr:$transpose_weight);
  let results = (outs Variadic<AnyRankedTensor>:$result);

  let assemblyFormat = [{
    `ins` `(` $rows `,` $weight `,` $tile_experts `:` type($rows) `,`
    type($weight) `,` type($tile_experts) `)` `outs` `(` $init `:`
    type($init) `)` `tile_size` `(` $tile_size `)` (`transpose_weight`
    $transpose_weight^)? attr-dict (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() { return getInitMutable(); }
  }];
  let hasVerifier = 1;
}

def Moe_GroupedWeightGradOp : Moe_Op<"grouped_weight_grad", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "per expert, the sum of outer products over its segment";
  let description = [{
    The weight gradient of the grouped expert formulation: with expert
    `e`'s rows `[segments[e], segments[e + 1])` of `lhs` `[P, A]` and
    `rhs` `[P, C]` (`segments` `[E + 1]`, non-decreasing),

    ```
    result[e, a, c] = init[e, a, c] + Σ_{segments[e] <= p < segments[e+1]} lhs[p, a] · rhs[p, c]
    ```

    in f32. Tensors or buffers, as `moe.grouped_matmul`.

    ```mlir
    %dw = moe.grouped_weight_grad ins(%x, %dy, %seg : tensor<?x128xf32>, tensor<?x32xf32>, tensor<11xindex>) outs(%init : tensor<10x128x32xf32>) -> tensor<10x128x32xf32>
    ```
  }];

  let arguments = (ins TensorOrMemRef<Moe_GroupedTypes>:$lhs,
                       TensorOrMemRef<Moe_GroupedTypes>:$rhs,
                       TensorOrMemRef<[Index]>:$segments,
                       TensorOrMemRef<[F32]>:$init);
  let results = (outs Variadic<AnyRankedTensor>:$result);

  let assemblyFormat = [{
    `ins` `(` $lhs `,` $rhs `,` $segments `:` type($lhs) `,` type($rhs) `,`
    type($segments) `)` `outs` `(` $init `:` type($init) `)` attr-dict
    (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() { return getInitMutable(); }
  }];
  let hasVerifier = 1;
}

def Moe_FlashAttentionKernelOp : Moe_Op<"flash_attention_kernel", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "moe.flash_attention, destination style, kept for a "
                "tensor-core kernel";
  let description = [{
    Computes what `moe.flash_attention` computes (the same causal visibility
    over `S >= T` keys, key `u` visible to query `t` iff `u <= t + S - T`;
    with `rel` `[S, H, F]`, the relative key `rel[t + S - T - u]` added to
    key `u` for query `t`), writing the attention into `result_init`
    `[B, T, H, F]` and the rows' logsumexp into `logsumexp_init` `[B, T, H]`
    (f32); their previous contents are not read.

    Like `moe.grouped_matmul`, it has value semantics on tensors (results
    of the inits' types) and writes its inits in place on buffers (no
    results), so that it survives bufferization: `convert-moe-to-linalg`
    makes it (`flash-attention-kernel`, set by the GPU pipelines where
    matmuls run on tensor cores) and `switchyard-gpu-tensor-core-matmul`
    builds its kernel (blocks of 4 warps over 64 query rows, QKᵀ and PV
    with mma.sync, an online softmax over steps of 64 keys; with `rel`, the
    products of the queries with the step's 127 relative keys, skewed
    through shared memory). The head width `F` must be static, at most 128.

    ```mlir
    %o, %lse = moe.flash_attention_kernel ins(%q, %k, %v : tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>) outs(%oi, %li : tensor<?x16x2x32xf32>, tensor<?x16x2xf32>) -> tensor<?x16x2x32xf32>, tensor<?x16x2xf32>
    %x, %xl = moe.flash_attention_kernel ins(%q, %km, %vm : tensor<?x16x2x32xf32>, tensor<?x32x2x32xf32>, tensor<?x32x2x32xf32>) rel(%r : tensor<32x2x32xf32>) outs(%oi, %li : tensor<?x16x2x32xf32>, tensor<?x16x2xf32>) -> tensor<?x16x2x32xf32>, tensor<?x16x2xf32>
    ```
  }];

  let arguments = (ins TensorOrMemRef<Moe_GroupedTypes>:$query,
                       TensorOrMemRef<Moe_GroupedTypes>:$key,
                       TensorOrMemRef<Moe_GroupedTypes>:$value,
                       Optional<TensorOrMemRef<Moe_GroupedTypes>>:$rel,
                       TensorOrMemRef<Moe_GroupedTypes>:$result_init,
                       TensorOrMemRef<[F32]>:$logsumexp_init);
  let results = (outs Variadic<AnyRankedTensor>:$results);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,`
    type($value) `)` (`rel` `(` $rel^ `:` type($rel) `)`)?
    `outs` `(` $result_init `,` $logsumexp_init `:`
    type($result_init) `,` type($logsumexp_init) `)` attr-dict
    (`->` type($results)^)?
  }];
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() {
      return MutableOperandRange(*this, /*start=*/getNumOperands() - 2,
                                 /*length=*/2);
    }
    /// The largest head width the tensor-core kernel takes.
    static constexpr int64_t kMaxHeadWidth = 128;
  }];
  let hasVerifier = 1;
}

def Moe_FlashAttentionGradKernelOp : Moe_Op<"flash_attention_grad_kernel", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "moe.flash_attention_grad, destination style, kept for "
                "tensor-core kernels";
  let description = [{
    Computes the gradients of `moe.flash_attention_grad` (key `u` visible to
    query `t` iff `u <= t + S - T`; with `rel` `[S, H, F]`, key `u` of query
    `t` is `key[u] + rel[δ]`, `δ = t + S - T - u`) from the forward pass's
    row `logsumexp` `[B, T, H]` (f32), the rows'
    `delta[b, t, a] = Σ_f result_grad · result` `[B, T, H]` (f32) and
    `result_grad`. With `P = exp(score - logsumexp)` and
    `dS = P ∘ (dO·Vᵀ - delta)`: `dQ = Σ_u dS·(K + rel[δ])`, `dK = dSᵀ·Q`,
    `dV = Pᵀ·dO`, written into `query_grad_init`, `key_grad_init` and
    `value_grad_init` (their previous contents are not read), and with
    `rel`, `drel[δ] = Σ_{b, t} dS[t, t + S - T - δ]·Q[t]` added to
    `rel_grad_init` (f32, `[S, H, F]`: it accumulates).

    Value semantics on tensors, in place on buffers, like
    `moe.flash_attention_kernel`: `convert-moe-to-linalg` makes it
    (`flash-attention-kernel`, with `delta` a linalg reduction) and
    `switchyard-gpu-tensor-core-matmul` builds its two kernels in the manner
    of FlashAttention-2's backward pass (one over blocks of 64 keys for dK,
    dV and drel, the latter by f32 atomic adds; one over blocks of 64
    queries for dQ, both with mma.sync). The head width `F` must be static,
    at most 128.

    ```mlir
    %dq, %dk, %dv = moe.flash_attention_grad_kernel ins(%q, %k, %v, %lse, %delta, %do : tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2xf32>, tensor<?x16x2xf32>, tensor<?x16x2x32xf32>) outs(%dqi, %dki, %dvi : tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>) -> tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>
    ```
  }];

  let arguments = (ins TensorOrMemRef<Moe_GroupedTypes>:$query,
                       TensorOrMemRef<Moe_GroupedTypes>:$key,
                       TensorOrMemRef<Moe_GroupedTypes>:$value,
                       TensorOrMemRef<[F32]>:$logsumexp,
                       TensorOrMemRef<[F32]>:$delta,
                       TensorOrMemRef<Moe_GroupedTypes>:$result_grad,
                       Optional<TensorOrMemRef<Moe_GroupedTypes>>:$rel,
                       TensorOrMemRef<Moe_GroupedTypes>:$query_grad_init,
                       TensorOrMemRef<Moe_GroupedTypes>:$key_grad_init,
                       TensorOrMemRef<Moe_GroupedTypes>:$value_grad_init,
                       Optional<TensorOrMemRef<[F32]>>:$rel_grad_init);
  let results = (outs Variadic<AnyRankedTensor>:$results);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `,` $logsumexp `,` $delta `,`
    $result_grad `:` type($query) `,` type($key) `,` type($value) `,`
    type($logsumexp) `,` type($delta) `,` type($result_grad) `)`
    (`rel` `(` $rel^ `:` type($rel) `)`)?
    `outs` `(` $query_grad_init `,` $key_grad_init `,` $value_grad_init `:`
    type($query_grad_init) `,` type($key_grad_init) `,`
    type($value_grad_init) `)`
    (`rel_grad` `(` $rel_grad_init^ `:` type($rel_grad_init) `)`)?
    attr-dict (`->` type($results)^)?
  }];
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() {
      return MutableOperandRange(
          *this, getQueryGradInitMutable().getOperandNumber(),
          getRelGradInit() ? 4 : 3);
    }
  }];
  let hasVerifier = 1;
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEOPS_TD
