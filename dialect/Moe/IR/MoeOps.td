//===- MoeOps.td - moe dialect operations ------------------*- tablegen -*-===//
//
// Operations of the `moe` dialect. This file holds the semantic ops, those
// that models and their gradients are written in; MoeFusedOps.td holds the
// fusion passes' ops and MoeKernelOps.td the kernel-level ops that outlive
// the lowering to linalg. Shape contracts are stated twice: the element
// types and ranks as ODS constraints, the agreement between operands
// (widths, head counts, k <= E) in the C++ verifiers in
// lib/Dialect/Moe/IR/MoeOps.cpp.
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

def Moe_AttentionOp : Moe_Op<"attention", [Pure, AttrSizedOperandSegments,
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

    With `at %p` (an index), the queries start at key `p` instead: query
    `t` has the position of key `p + t` and sees keys `0 .. p + t`, whatever
    follows them (the unwritten rows of a key/value cache) is ignored, and
    `δ = p + t - u`. Without it, `p = S - T`.

    ```mlir
    %o = moe.attention %q, %k, %v : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>
    %x = moe.attention %q, %km, %vm rel(%r : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x16x2x8xf32>
    %c = moe.attention %q1, %kc, %vc at %p : tensor<1x1x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32> -> tensor<1x1x2x8xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[4]>:$query,
                       Moe_ValueTensorOfRank<[4]>:$key,
                       Moe_ValueTensorOfRank<[4]>:$value,
                       Optional<Moe_ValueTensorOfRank<[3]>>:$rel,
                       Optional<Index>:$position);
  let results = (outs Moe_ValueTensorOfRank<[4]>:$result);

  let assemblyFormat = [{
    $query `,` $key `,` $value (`rel` `(` $rel^ `:` type($rel) `)`)?
    (`at` $position^)? attr-dict
    `:` type($query) `,` type($key) `,` type($value) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Moe_AttentionWeightsOp : Moe_Op<"attention_weights", [Pure,
    AllElementTypesMatch<["query", "key"]>]> {
  let summary = "the softmax weights of moe.attention, for analysis";
  let description = [{
    The weights `A` that `moe.attention` on the same queries, keys and
    relative keys averages its values with, per head, as an f32
    `[batch, heads, time, keys]` tensor: `result[b, a, t, u] = A[b, t, u, a]`,
    0 for the keys query `t` does not see. What `switchyard analyze` draws:
    `lm-expose-probes` adds one beside each probed `moe.attention`. No
    gradient.

    ```mlir
    %a = moe.attention_weights %q, %k : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x2x16x16xf32>
    ```
  }];

  let arguments = (ins Moe_ValueTensorOfRank<[4]>:$query,
                       Moe_ValueTensorOfRank<[4]>:$key,
                       Optional<Moe_ValueTensorOfRank<[3]>>:$rel);
  let results = (outs Moe_ScoreTensorOfRank<[4]>:$result);

  let assemblyFormat = [{
    $query `,` $key (`rel` `(` $rel^ `:` type($rel) `)`)? attr-dict
    `:` type($query) `,` type($key) `->` type($result)
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
    (so memory keys before the current tokens have negative positions), or
    `p = l - offset + s` with `at %s` (an index: the tokens of a key/value
    cache's decoding step start at position `s`), the
    first `r = 2·⌊F/4⌋` channels of every head in rotate-half pairs:
    `θ_i = p · 10000^(-2i/r)`, `(y_i, y_{i+r/2}) = (x_i cos θ_i - x_{i+r/2}
    sin θ_i, x_{i+r/2} cos θ_i + x_i sin θ_i)` for `i < r/2`; the other
    channels pass through.

    ```mlir
    %y = moe.rope %q {offset = 0 : i64} : tensor<?x16x2x8xf32>
    %z = moe.rope %q1 at %s : tensor<1x1x2x8xf32>
    ```
  }];
  let arguments = (ins Moe_ValueTensorOfRank<[4]>:$input,
                       Optional<Index>:$start,
                       DefaultValuedAttr<I64Attr, "0">:$offset);
  let results = (outs Moe_ValueTensorOfRank<[4]>:$result);
  let assemblyFormat = "$input (`at` $start^)? attr-dict `:` type($input)";
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

def Moe_EmbedGradOp : Moe_Op<"embed_grad", [Pure]> {
  let summary = "embedding table gradient: dtable[v, :] = Σ_{n: tokens[n] = v} dy[n, :]";
  let description = [{
    The adjoint of `moe.embed` (its gradient rule builds it), over the
    flattened tokens `[N]` and their adjoints `dy` `[N, D]`: the rows of
    `dy` summed per token id into `[V, D]` (`V` the result's first
    dimension), zero for an id no token has. Ids outside `[0, V)` are
    undefined behaviour, as for `moe.embed`.

    convert-moe-to-linalg lowers it as the one-hot matrix of the tokens
    contracted with `dy` (`V·N·D` multiply-adds at matmul speed, what the
    GPU's tensor-core kernels take, with no atomics), or, with
    `scatter-embedding-gradient` (the CPU's), as each row of `dy` added
    into its id's row (`N·D` additions), column block by column block in
    parallel, tokens in order. Both sum each row's terms in token order.

    ```mlir
    %dt = moe.embed_grad %tokens, %dy : tensor<?xi32>, tensor<?x16xf32> -> tensor<256x16xf32>
    ```
  }];
  let arguments = (ins Moe_IndexTensorOfRank<[1]>:$tokens,
                       Moe_ValueTensorOfRank<[2]>:$dy);
  let results = (outs Moe_ValueTensorOfRank<[2]>:$result);
  let assemblyFormat = [{
    $tokens `,` $dy attr-dict `:` type($tokens) `,` type($dy) `->`
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
    identity once lowered (`lm-differentiate` seeds the masks of training
    functions first); a rate of 0 makes it the identity, and it folds to its
    input. The gradient applies the same mask and scale.

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
  let hasFolder = 1;
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
    cross-entropy. With `weight` 0 the op folds to its input.

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
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// AttentionGradOp
//===----------------------------------------------------------------------===//

def Moe_AttentionGradOp : Moe_Op<"attention_grad", [Pure,
    AttrSizedOperandSegments, AllTypesMatch<["query", "query_grad"]>,
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

    per head `a`, in f32, converted to the operands' element types (`S - T`
    is the position `at %p` where the forward op has one). This is
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
                       Optional<Moe_ValueTensorOfRank<[3]>>:$rel,
                       Optional<Index>:$position);
  let results = (outs Moe_ValueTensorOfRank<[4]>:$query_grad,
                      Moe_ValueTensorOfRank<[4]>:$key_grad,
                      Moe_ValueTensorOfRank<[4]>:$value_grad,
                      Optional<Moe_ValueTensorOfRank<[3]>>:$rel_grad);

  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $result_grad
    (`rel` `(` $rel^ `:` type($rel) `)`)? (`at` $position^)? attr-dict
    `:` type($query) `,`
    type($key) `,` type($value) `,` type($result_grad) `->` type($query_grad)
    `,` type($key_grad) `,` type($value_grad) (`,` type($rel_grad)^)?
  }];
  let hasVerifier = 1;
}

include "dialect/Moe/IR/MoeFusedOps.td"
include "dialect/Moe/IR/MoeKernelOps.td"

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEOPS_TD
