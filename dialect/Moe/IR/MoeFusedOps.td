//===- MoeFusedOps.td - moe fused ops ----------------------*- tablegen -*-===//
//
// The ops that the fusion passes form (moe-fuse-router,
// moe-fuse-expert-projection, moe-fuse-attention): each computes exactly
// what the ops it replaces compute, as one kernel. Included by MoeOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEFUSEDOPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEFUSEDOPS_TD

include "dialect/Moe/IR/MoeDialect.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"

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

    With `convert-moe-to-linalg{fused-router-matmul}` (the CPU's lowering)
    the logits are one matmul first, as `moe.gate`'s, and the row kernel
    reads them.

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

    With `convert-moe-to-linalg{fused-expert-tile-rows=T}` (the CPU's
    lowering) the op takes the grouped formulation instead: the routes
    sorted by expert into segments of `T`-row tiles (`moe.sort_routes`) and
    its products as `moe.grouped_matmul`/`moe.grouped_weight_grad` with
    gathered operands, whose kernels read each route's row where it lies
    (docs/Fusions.md).

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

    With `convert-moe-to-linalg{fused-expert-tile-rows=T}` (the CPU's
    lowering) the op takes the grouped formulation instead: the routes
    sorted by expert into segments of `T`-row tiles (`moe.sort_routes`) and
    its products as `moe.grouped_matmul`/`moe.grouped_weight_grad` with
    gathered operands, whose kernels read each route's row where it lies
    (docs/Fusions.md).

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

    With `convert-moe-to-linalg{fused-expert-tile-rows=T}` (the CPU's
    lowering) the op takes the grouped formulation instead: the routes
    sorted by expert into segments of `T`-row tiles (`moe.sort_routes`) and
    its products as `moe.grouped_matmul`/`moe.grouped_weight_grad` with
    gathered operands, whose kernels read each route's row where it lies
    (docs/Fusions.md).

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

    With `convert-moe-to-linalg{fused-expert-tile-rows=T}` (the CPU's
    lowering) the op takes the grouped formulation instead: the routes
    sorted by expert into segments of `T`-row tiles (`moe.sort_routes`) and
    its products as `moe.grouped_matmul`/`moe.grouped_weight_grad` with
    gathered operands, whose kernels read each route's row where it lies
    (docs/Fusions.md).

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
// Flash attention (moe-fuse-attention)
//===----------------------------------------------------------------------===//

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

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEFUSEDOPS_TD
