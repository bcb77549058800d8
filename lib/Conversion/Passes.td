//===- Passes.td - Switchyard conversion passes ------------*- tablegen -*-===//
//
// Conversions out of the Switchyard dialects: lm layers into moe and linalg,
// lm models into functions, moe ops into linalg.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CONVERSION_PASSES_TD
#define SWITCHYARD_LIB_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LmBuildDecoderPass : Pass<"lm-build-decoder", "ModuleOp"> {
  let summary = "Add each model's decoding step over key/value caches";
  let description = [{
    For generation with a key/value cache: next to each `lm.model @m` that
    takes token ids `[?, T]` (static `T`) and returns logits, a model
    `@m_decode`, marked `lm.decoder = "m"`, that runs one token. It takes
    the token `[1, 1]`, its position `p` (an i32 scalar, `0 <= p < T`) and,
    per attention block in order, its keys and values caches
    `[1, T, heads, head_dim]`; it returns the token's logits `[1, 1, V]`
    and each cache with the token's rotated key and value written at row
    `p`. Its attention blocks carry the caches (`lm.mha` / `lm.switchhead`
    `cache(...)`), every other layer works on the one token. Decoding a
    sequence token by token from empty caches gives the logits of the
    model's forward function at each position.

    Models with memories or XL positions (their relative keys are per
    segment; they carry their memory instead), models that return more than
    their logits and models that read hidden states get no decoder. The
    pass runs on lm models whose parameters are declared, before
    decomposition; `convert-lm-to-func` keeps the mark on the function.

    ```mlir
    // Before
    lm.model @m(%t: tensor<?x16xi32>) -> tensor<?x16x64xf32> {
      %x = lm.embed "embed" %t {vocab = 64} : tensor<?x16xi32> -> tensor<?x16x32xf32>
      %a = lm.mha "att" %x {heads = 4, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
      %l = lm.output "out" %a {vocab = 64} : tensor<?x16x32xf32> -> tensor<?x16x64xf32>
      lm.return %l : tensor<?x16x64xf32>
    }
    // After: @m, and
    lm.model @m_decode(%t: tensor<1x1xi32>, %p: tensor<i32>,
                       %k: tensor<1x16x4x8xf32>, %v: tensor<1x16x4x8xf32>)
        -> (tensor<1x1x64xf32>, tensor<1x16x4x8xf32>, tensor<1x16x4x8xf32>)
        attributes {lm.decoder = "m"} {
      %x = lm.embed "embed" %t {vocab = 64} : tensor<1x1xi32> -> tensor<1x1x32xf32>
      %a, %k1, %v1 = lm.mha "att" %x cache(%k, %v at %p : ...) {heads = 4, head_dim = 8, pos = #lm.pos<rope>} : tensor<1x1x32xf32>
      %l = lm.output "out" %a {vocab = 64} : tensor<1x1x32xf32> -> tensor<1x1x64xf32>
      lm.return %l, %k1, %v1 : tensor<1x1x64xf32>, tensor<1x16x4x8xf32>, tensor<1x16x4x8xf32>
    }
    ```
  }];
}

def LmOutlineLayersPass : Pass<"lm-outline-layers", "ModuleOp"> {
  let summary = "Move each distinct block of a model into a function of its own";
  let description = [{
    A model's blocks are mostly copies: the 47M SwitchHead model is 16
    attention blocks and 16 feed-forward blocks of two kinds. This pass gives
    each distinct block (same op, attributes and types; the layer name does
    not count) one private `func.func` holding that block, and replaces every
    block of the model by a `func.call` of it with the block's operands and
    its own parameters (`lm.get_param`). Everything after, decomposition,
    differentiation and code generation, then handles each kind once instead
    of once per layer, and the host code is a short sequence of calls.

    The function is named `<model>__<op>` (`<model>__<op>_<n>` for further
    distinct blocks of one op), marked `lm.layer`; its arguments are the
    block's operands, then its parameters in declaration order, each marked
    `lm.layer_param = "<suffix>"` (the parameter's name without the layer
    name). `lm-decompose-layers` decomposes the block inside the function,
    reading parameters from these arguments; `lm-differentiate`
    differentiates each function once. Embeddings, final norms and output
    heads occur once per model and stay in place.

    ```mlir
    // Before
    lm.model @m(%t: tensor<?x8xi32>) -> tensor<?x8x64xf32> {
      ...
      %x1 = lm.ffn "layers.0.ffn" %x0 {d_ff = 64} : tensor<?x8x16xf32>
      %x2 = lm.ffn "layers.1.ffn" %x1 {d_ff = 64} : tensor<?x8x16xf32>
      ...
    }
    // After
    func.func private @m__ffn(%x: tensor<?x8x16xf32>,
        %norm_w: tensor<16xf32> {lm.layer_param = "norm.weight"}, ...)
        -> tensor<?x8x16xf32> attributes {lm.layer} {
      %y = lm.ffn "layers.0.ffn" %x {d_ff = 64} : tensor<?x8x16xf32>
      return %y : tensor<?x8x16xf32>
    }
    lm.model @m(%t: tensor<?x8xi32>) -> tensor<?x8x64xf32> {
      ...
      %w0 = lm.get_param @layers.0.ffn.norm.weight : tensor<16xf32>
      ...
      %x1 = func.call @m__ffn(%x0, %w0, ...) : (...) -> tensor<?x8x16xf32>
      %w1 = lm.get_param @layers.1.ffn.norm.weight : tensor<16xf32>
      ...
      %x2 = func.call @m__ffn(%x1, %w1, ...) : (...) -> tensor<?x8x16xf32>
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def LmHoistBlockInvariantsPass : Pass<"lm-hoist-block-invariants", "ModuleOp"> {
  let summary = "Pass what every call of a block function computes alike as an argument";
  let description = [{
    A block function (`lm-outline-layers`, marked `lm.layer`) may compute
    tensors from constants alone: the Transformer-XL sinusoids of the
    relative positions, the same for every layer. Inline, CSE kept one copy
    per model; in a function called per layer, each call would compute them
    again. This pass makes each such tensor that the rest of the block reads
    an argument (marked `lm.invariant`, after the others) and computes it
    before each call instead, where CSE merges the copies of all the calls
    of one caller. Constants, empty tensors and reshapes stay in the block.

    ```mlir
    // Before
    func.func private @m__switchhead(%x: tensor<?x4x16xf32>, ...) attributes {lm.layer} {
      %pe = linalg.generic ... outs(%init : tensor<8x16xf32>) { sin, cos }
      ...
    }
    // After
    func.func private @m__switchhead(%x: tensor<?x4x16xf32>, ...,
        %pe: tensor<8x16xf32> {lm.invariant}) attributes {lm.layer} { ... }
    // and before each call: the generic computing %pe, passed last
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def LmDecomposeLayersPass : Pass<"lm-decompose-layers", "ModuleOp"> {
  let summary = "Decompose lm layers into moe routing ops and linalg";
  let description = [{
    Rewrites every layer op into the computation docs/Semantics.md
    specifies: layer norms, linear projections and element-wise maps as
    linalg on tensors; routers, top-k, gathered expert projections and the
    attention core as `moe` ops; parameters read with `lm.get_param`. The
    parameters must be declared (run `lm-materialize-params` first); a layer
    whose parameter is missing is reported.

    Training options become inference-mode ops that `lm-differentiate`
    activates: residual and expert dropout as unseeded `moe.dropout_mask`
    (with `moe.dropout`, or as the `moe.topk` mask), the σ-MoE entropy
    regulariser as `moe.routing_entropy` attached by `moe.add_loss`.

    Before:

    ```mlir
    %y = lm.sigma_moe "ffn" %x {experts = 8, k = 2, expert_dim = 16} : tensor<?x16x32xf32>
    ```

    After (abridged): the block norm, then

    ```mlir
    %h = tensor.collapse_shape %norm [[0, 1], [2]] : tensor<?x16x32xf32> into tensor<?x32xf32>
    %sel = lm.get_param @ffn.sel : tensor<8x32xf32>
    %s = moe.gate %h, %sel : tensor<?x32xf32>, tensor<8x32xf32> -> tensor<?x8xf32>
    %g, %i = moe.topk %s k(2) : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
    %b = moe.expert_mlp %h, %up, %down, %g, %i : ... -> tensor<?x32xf32>
    ```

    and the residual addition `x + branch`.

    With `probes`, the ops that `switchyard analyze` reads are marked
    `lm.probe = "<layer>.<what>"` for `lm-expose-probes`: each attention
    core (`attention`), each SwitchHead top-k (`v`: the value side, over
    the source tokens; `o`: the output side) and each σ-MoE top-k (`sel`).
  }];
  let options = [
    Option<"probes", "probes", "bool", /*default=*/"false",
           "Mark the attention cores and the routers' top-k with lm.probe "
           "(for lm-expose-probes)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::moe::MoeDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def LmExposeProbesPass : Pass<"lm-expose-probes", "ModuleOp"> {
  let summary = "Return what a model computes on the way: attention weights "
                "and expert selections";
  let description = [{
    For `switchyard analyze`: in each public function, every op that
    `lm-decompose-layers{probes}` marked `lm.probe = "<name>"` adds results
    to the function, in the order of the ops, each result marked
    `lm.probe = "<name>.<part>"`:

    - `moe.attention`: `<name>.weights`, the softmax weights
      `[batch, heads, time, keys]` (`moe.attention_weights` of its queries,
      keys and relative keys);
    - `moe.topk`: `<name>.gates` and `<name>.experts`, its values and
      indices.

    The marks are removed. The model's own results come first, unchanged.

    ```mlir
    // Before
    func.func @m(%t: tensor<?x8xi32>, ...) -> tensor<?x8x64xf32> {
      ...
      %o = moe.attention %q, %k, %v {lm.probe = "layers.0.att.attention"} : ...
      ...
      return %logits : tensor<?x8x64xf32>
    }
    // After
    func.func @m(%t: tensor<?x8xi32>, ...)
        -> (tensor<?x8x64xf32>,
            tensor<?x2x8x8xf32> {lm.probe = "layers.0.att.attention.weights"}) {
      ...
      %o = moe.attention %q, %k, %v : ...
      %a = moe.attention_weights %q, %k : ... -> tensor<?x2x8x8xf32>
      ...
      return %logits, %a : tensor<?x8x64xf32>, tensor<?x2x8x8xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

def ConvertLmToFuncPass : Pass<"convert-lm-to-func", "ModuleOp"> {
  let summary = "Turn decomposed lm.models into functions taking parameters";
  let description = [{
    Converts each `lm.model` whose layers have been decomposed into a
    `func.func` of the same name. Its arguments are the model's own
    arguments followed by one argument per declared `lm.param`, in
    declaration order, each marked `{lm.param = "<name>"}`; `lm.get_param`
    becomes a use of that argument and `lm.return` a `func.return`. The
    function is marked `llvm.emit_c_interface` for the runtime, token-id
    arguments carry their vocabulary (`{lm.vocab = V}`) for the runtime's
    range check, and the `lm.param` declarations are removed.

    ```mlir
    // Before
    lm.param @w : tensor<4x4xf32> init <zeros>
    lm.model @m(%t: tensor<1x4xi32>) -> tensor<1x4x4xf32> { ... lm.get_param @w ... }
    // After
    func.func @m(%t: tensor<1x4xi32>, %w: tensor<4x4xf32> {lm.param = "w"})
        -> tensor<1x4x4xf32> attributes {llvm.emit_c_interface} { ... }
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def ConvertMoeToLinalgPass : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower moe ops to reference linalg.generic on tensors";
  let description = [{
    Rewrites every `moe` op into `linalg.generic` ops on tensors (plus
    `tensor`, `arith`, `math` and, for top-k, `scf`): the reference
    lowering, one generic per contraction, used by the CPU target and as the
    unfused baseline. The expert projections take the dense all-experts
    formulation: every token through every expert of its head in one
    matmul-like contraction over the weight viewed as `[H, E, A, B]`, then a
    sum weighted by the dense gates `[N, H, E]` (0 for experts no route
    picks); all products accumulate in f32. With `grouped-experts` they
    take the grouped one instead (GroupedExperts.cpp): the routes sorted by
    expert, then one `[count_e, A] x [A, B]` matmul per expert on its
    contiguous block of gathered rows. Attention
    (`moe.attention`, `moe.attention_grad`) materialises the `[B, H, T, S]`
    score tensor, keys in the unit-stride dimension, with every product a
    contraction (Transformer-XL's relative keys: `q · relᵀ` over every
    distance, then a skew that reads each pair's distance); the flash-attention ops of `moe-fuse-attention` become
    row kernels instead (`scf.forall` over query or key rows, on `vector<F>`
    rows, with an online softmax), which never build it. Each moe op's
    location is first wrapped in a name location of its kind
    (`loc("gate"(...))`; an op that lm-differentiate built keeps its own,
    `linear_grad`), which what it lowers to inherits: the GPU kernel report
    names the ops of each kernel by it.

    Before:

    ```mlir
    %s = moe.gate %x, %w : tensor<?x16xf32>, tensor<6x16xf32> -> tensor<?x2x3xf32>
    ```

    After (abridged):

    ```mlir
    %logits = linalg.generic {iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : tensor<?x16xf32>, tensor<6x16xf32>) outs(%zero : tensor<?x6xf32>) {...}
    %sig = linalg.generic {iterator_types = ["parallel", "parallel"]} ins(%logits ...) {...}
    %s = tensor.expand_shape %sig [[0], [1, 2]] ... : tensor<?x6xf32> into tensor<?x2x3xf32>
    ```
  }];
  let options = [
    Option<"groupedExperts", "grouped-experts", "bool", /*default=*/"false",
           "Group the routes of moe.expert_proj, moe.expert_merge and their "
           "gradients by expert (the paper's CVMM): a counting sort of the "
           "routes, the rows gathered in that order, one matmul per expert "
           "on its block, the products summed back over the routes. Costs "
           "the routes' MACs (k/E of the dense formulation's); the sort and "
           "the blocks' sizes are read by host code, so a CPU formulation "
           "unless grouped-tile-rows is set">,
    Option<"groupedTileRows", "grouped-tile-rows", "int64_t", /*default=*/"0",
           "With grouped-experts, T > 0 takes the formulation without host "
           "reads (the GPU's): the sort computed in parallel, each expert's "
           "segment of rows padded to a multiple of T, the products as "
           "moe.grouped_matmul and moe.grouped_weight_grad reading their "
           "rows by route; 0 reads the sort on the host">,
    Option<"fusedExpertTileRows", "fused-expert-tile-rows", "int64_t",
           /*default=*/"0",
           "T > 0: the fused expert ops (moe.fused_expert_proj, "
           "moe.fused_expert_merge and their gradients) in the grouped "
           "formulation without host reads, segments padded to multiples of "
           "T, the kernels gathering their rows by route (the CPU's, whose "
           "grouped kernels gather while packing); 0: one row kernel per op "
           "and gradient (FusedKernels.cpp)">,
    Option<"fusedRouterMatmul", "fused-router-matmul", "bool",
           /*default=*/"false",
           "moe.fused_router's logits as one matmul (the CPU's: its matmul "
           "kernels; the same products in the same order as moe.gate's), "
           "the row kernel reading each row's logits for the sigmoid and "
           "top-k; false: the row kernel computes the dot products itself, "
           "all experts' in one pass over the features">,
    Option<"scatterEmbeddingGradient", "scatter-embedding-gradient", "bool",
           /*default=*/"false",
           "Lower moe.embed_grad as a scatter-add, each row of dy added into "
           "its token's row (N·D additions, column blocks in parallel: the "
           "CPU's), instead of the one-hot matmul (V·N·D multiply-adds on the "
           "matmul kernels, no atomics: the GPU's)">,
    Option<"flashAttentionKernel", "flash-attention-kernel", "bool",
           /*default=*/"false",
           "Rewrite moe.flash_attention and moe.flash_attention_grad "
           "(head width at most 128; with or without relative keys) to "
           "moe.flash_attention_kernel and moe.flash_attention_grad_kernel "
           "(the gradient's Δ = Σ dO·O a linalg reduction; the relative "
           "keys' gradient accumulated in f32), which survive "
           "bufferization for switchyard-gpu-tensor-core-matmul's mma.sync "
           "kernels, instead of row kernels; set by the GPU pipelines where "
           "matmuls run on tensor cores">,
    Option<"flashAttentionRounding", "flash-attention-rounding",
           "std::string", /*default=*/"\"f32\"",
           "bf16 or f16: the row kernels of the attention that the "
           "tensor-core kernels take (head width at most 128) round the "
           "factors those kernels round (Q, K, V, the relative keys, dO, the "
           "backward pass's weights P and dS), for the CPU reference of the "
           "GPU's bf16/f16 route; f32 (the default) rounds nothing">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::vector::VectorDialect"
  ];
}

#endif // SWITCHYARD_LIB_CONVERSION_PASSES_TD
