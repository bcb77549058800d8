//===- MoeKernelOps.td - moe kernel-level ops --------------*- tablegen -*-===//
//
// Kernel-level ops that convert-moe-to-linalg leaves for the code
// generation passes: the grouped expert matmuls and the tensor-core flash
// attention kernels, on tensors and then on buffers. Included by MoeOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEKERNELOPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEKERNELOPS_TD

include "dialect/Moe/IR/MoeDialect.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"

//===----------------------------------------------------------------------===//
// Grouped expert kernels (tensors, then buffers)
//===----------------------------------------------------------------------===//

/// The padded rows of the grouped kernels and their f32 accumulators, as
/// tensors before bufferization and as buffers after it.
defvar Moe_GroupedTypes = [F32, F16, BF16];

def Moe_GroupedMatmulOp : Moe_Op<"grouped_matmul", [
    AttrSizedOperandSegments,
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

    With `gather`, the rows are not laid out in the sorted order: row `p`
    is read where its route lies, so that no sorted copy exists in memory.
    `order` `[P]` names the route at each padded position and `rows` is
    `[N', A]`, one row per `routes_per_row` consecutive routes; with the
    route `r = order[p]` and `R = N' · routes_per_row` routes,

    ```
    rows'[p, a] = rows[r floordiv routes_per_row, a] · gates[r]   if r < R
    rows'[p, a] = 0                                               otherwise
    ```

    takes the place of `rows[p, a]` (the gate factor is 1 without `gates`,
    `[R]`; the product is formed in f32 and then rounded as a factor). A
    padding position holds `R` or more.

    Like linalg's structured ops the op has value semantics on tensors and
    writes `init` in place on buffers (no result): it survives
    bufferization, so that the GPU target can give every block of rows its
    expert's weight in one tensor-core kernel
    (`switchyard-gpu-tensor-core-matmul`); elsewhere
    `switchyard-lower-grouped-kernels` lowers it to loops.

    ```mlir
    %p = moe.grouped_matmul ins(%rows, %w, %te : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?xindex>) outs(%init : tensor<?x32xf32>) tile_size(64) -> tensor<?x32xf32>
    %q = moe.grouped_matmul ins(%x, %w, %te : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?xindex>) gather(%order : tensor<?xindex>) routes_per_row(6) gates(%g : tensor<?xf32>) outs(%init : tensor<?x32xf32>) tile_size(64) -> tensor<?x32xf32>
    ```
  }];

  let arguments = (ins TensorOrMemRef<Moe_GroupedTypes>:$rows,
                       TensorOrMemRef<Moe_GroupedTypes>:$weight,
                       TensorOrMemRef<[Index]>:$tile_experts,
                       Optional<TensorOrMemRef<[Index]>>:$order,
                       Optional<TensorOrMemRef<Moe_GroupedTypes>>:$gates,
                       TensorOrMemRef<[F32]>:$init,
                       ConfinedAttr<I64Attr, [IntPositive]>:$tile_size,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$routes_per_row,
                       UnitAttr:$transpose_weight);
  let results = (outs Variadic<AnyRankedTensor>:$result);

  let assemblyFormat = [{
    `ins` `(` $rows `,` $weight `,` $tile_experts `:` type($rows) `,`
    type($weight) `,` type($tile_experts) `)`
    (`gather` `(` $order^ `:` type($order) `)`)?
    (`routes_per_row` `(` $routes_per_row^ `)`)?
    (`gates` `(` $gates^ `:` type($gates) `)`)?
    `outs` `(` $init `:`
    type($init) `)` `tile_size` `(` $tile_size `)` (`transpose_weight`
    $transpose_weight^)? attr-dict (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() { return getInitMutable(); }
    /// The padded row count P: dim 0 of `order` where the rows are
    /// gathered, else of `rows`.
    Value getPaddedRows() { return getOrder() ? getOrder() : getRows(); }
  }];
  let hasVerifier = 1;
}

def Moe_GroupedWeightGradOp : Moe_Op<"grouped_weight_grad", [
    AttrSizedOperandSegments,
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

    With `gather`, both operands are gathered as `moe.grouped_matmul`'s
    rows are: `order` `[P]` names the route at each padded position,
    `lhs` has one row per `lhs_routes_per_row` routes and `rhs` one per
    `rhs_routes_per_row`, each optionally scaled by its route's gate
    (`lhs_gates`, `rhs_gates`, `[R]`), and positions holding `R` or more
    are zero rows.

    ```mlir
    %dw = moe.grouped_weight_grad ins(%x, %dy, %seg : tensor<?x128xf32>, tensor<?x32xf32>, tensor<11xindex>) outs(%init : tensor<10x128x32xf32>) -> tensor<10x128x32xf32>
    %dv = moe.grouped_weight_grad ins(%x, %dh, %seg : tensor<?x128xf32>, tensor<?x32xf32>, tensor<11xindex>) gather(%order : tensor<?xindex>) routes_per_row([6, 3]) rhs_gates(%g : tensor<?xf32>) outs(%init : tensor<10x128x32xf32>) -> tensor<10x128x32xf32>
    ```
  }];

  let arguments = (ins TensorOrMemRef<Moe_GroupedTypes>:$lhs,
                       TensorOrMemRef<Moe_GroupedTypes>:$rhs,
                       TensorOrMemRef<[Index]>:$segments,
                       Optional<TensorOrMemRef<[Index]>>:$order,
                       Optional<TensorOrMemRef<Moe_GroupedTypes>>:$lhs_gates,
                       Optional<TensorOrMemRef<Moe_GroupedTypes>>:$rhs_gates,
                       TensorOrMemRef<[F32]>:$init,
                       OptionalAttr<DenseI64ArrayAttr>:$routes_per_row);
  let results = (outs Variadic<AnyRankedTensor>:$result);

  let assemblyFormat = [{
    `ins` `(` $lhs `,` $rhs `,` $segments `:` type($lhs) `,` type($rhs) `,`
    type($segments) `)`
    (`gather` `(` $order^ `:` type($order) `)`)?
    (`routes_per_row` `(` $routes_per_row^ `)`)?
    (`lhs_gates` `(` $lhs_gates^ `:` type($lhs_gates) `)`)?
    (`rhs_gates` `(` $rhs_gates^ `:` type($rhs_gates) `)`)?
    `outs` `(` $init `:` type($init) `)` attr-dict
    (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() { return getInitMutable(); }
    /// The padded row count P: dim 0 of `order` where the operands are
    /// gathered, else of `lhs`.
    Value getPaddedRows() { return getOrder() ? getOrder() : getLhs(); }
  }];
  let hasVerifier = 1;
}

def Moe_SortRoutesOp : Moe_Op<"sort_routes", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "the routes sorted by expert, each expert's segment padded";
  let description = [{
    The order in which the grouped expert kernels (`moe.grouped_matmul`,
    `moe.grouped_weight_grad`) take the routes, computed without host
    reads. A route `r = (n·H + h)·k + j` is token `n`'s `j`-th choice in
    head `h` (`indices` `[N, H, k]`, `R = N·H·k` routes); its expert is
    `h·E + indices[n, h, j]` (`E` = `experts_per_head`, `H·E` expert rows).
    Sorted stably by expert, with each expert's segment padded to a multiple
    of `tile_size` `T` rows:

    - `segments[e]` `[H·E + 1]`: where expert `e`'s segment starts, the
      sum of the padded counts of the experts before it;
    - `slots[n, h, j]`: the route's position, `segments[e]` plus the routes
      before it that pick the same expert;
    - `order[p]` `[P]`: the route at position `p`, `R` at a padding
      position;
    - `tile_experts[t]` `[P / T]`: the expert of the tile of rows
      `[t·T, (t + 1)·T)`, the number of experts whose segments end at or
      before its start (`H·E` for the tiles past the last segment).

    `P` must hold every padded segment: `(ceil(R / T) + H·E)·T` does. On
    tensors the op has value semantics, on buffers it writes its inits;
    `switchyard-gpu-sort-routes` makes it one thread block's kernel on the
    GPU, `switchyard-lower-grouped-kernels` loops elsewhere.

    ```mlir
    %seg, %order, %slots, %te = moe.sort_routes ins(%indices : tensor<?x2x3xi32>) outs(%s0, %o0, %sl0, %t0 : tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>) experts_per_head(5) tile_size(64) -> tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>
    ```
  }];

  let arguments = (ins TensorOrMemRef<[I32, I64]>:$indices,
                       TensorOrMemRef<[Index]>:$segments_init,
                       TensorOrMemRef<[Index]>:$order_init,
                       TensorOrMemRef<[Index]>:$slots_init,
                       TensorOrMemRef<[Index]>:$tile_experts_init,
                       ConfinedAttr<I64Attr, [IntPositive]>:$experts_per_head,
                       ConfinedAttr<I64Attr, [IntPositive]>:$tile_size);
  let results = (outs Variadic<AnyRankedTensor>:$results);

  let assemblyFormat = [{
    `ins` `(` $indices `:` type($indices) `)`
    `outs` `(` $segments_init `,` $order_init `,` $slots_init `,`
    $tile_experts_init `:` type($segments_init) `,` type($order_init) `,`
    type($slots_init) `,` type($tile_experts_init) `)`
    `experts_per_head` `(` $experts_per_head `)`
    `tile_size` `(` $tile_size `)` attr-dict (`->` type($results)^)?
  }];
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() {
      return MutableOperandRange(*this, /*start=*/1, /*length=*/4);
    }
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

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEKERNELOPS_TD
