//===- Passes.td - lm dialect passes -----------------------*- tablegen -*-===//
//
// Passes over `lm` model definitions.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_LM_TRANSFORMS_PASSES_TD
#define SWITCHYARD_DIALECT_LM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LmMaterializeParamsPass : Pass<"lm-materialize-params", "ModuleOp"> {
  let summary = "Declare every parameter a layer owns as an lm.param";
  let description = [{
    Walks every `lm.model` in the module, asks each layer (through
    `ParamOwnerOpInterface`) for the parameters it owns, and declares each
    one as an `lm.param` symbol in the module, before the model, in the
    order the layers appear. The runtime enumerates, initialises and
    checkpoints exactly these declarations.

    The scaled initialisers use the model depth L (the number of attention
    blocks, or the `num-layers` option when it is set): `s = √(2/L)`, with
    deviations `s/√D` for the Q, K, V and router weights and
    `s/√(heads·head_dim)` for the output projection, as in SwitchHead.

    A declaration that already exists with the same name and type is kept,
    so a model can override an initialiser by declaring the parameter
    itself. One with the same name and another type is an error.

    Before:

    ```mlir
    lm.model @m(%tokens: tensor<?x16xi32>) -> tensor<?x16x256xf32> {
      %x = lm.embed "embed" %tokens {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x32xf32>
      %l = lm.output "out" %x {vocab = 256} : tensor<?x16x32xf32> -> tensor<?x16x256xf32>
      lm.return %l : tensor<?x16x256xf32>
    }
    ```

    After (the model itself is unchanged):

    ```mlir
    lm.param @embed.weight : tensor<256x32xf32> init <normal, std = 0.17677669529663687>
    lm.param @out.weight : tensor<256x32xf32> init <normal, std = 0.17677669529663687>
    lm.model @m(%tokens: tensor<?x16xi32>) -> tensor<?x16x256xf32> {
      ...
    }
    ```
  }];
  let options = [
    Option<"numLayers", "num-layers", "int64_t", /*default=*/"0",
           "Model depth L for the scaled initialisers; 0 counts the "
           "attention blocks of each model">
  ];
  let dependentDialects = ["::mlir::lm::LmDialect"];
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
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::moe::MoeDialect",
    "::mlir::tensor::TensorDialect"
  ];
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

def LmDifferentiatePass : Pass<"lm-differentiate", "ModuleOp"> {
  let summary = "Build the loss-and-gradient function of each model";
  let description = [{
    Reverse-mode differentiation. For every function taking parameters
    (arguments marked `lm.param`, as `convert-lm-to-func` makes them), adds
    `<name>_grad`, which runs the forward computation, the loss, and the
    backward pass, and returns the loss, the gradient of every parameter in
    argument order, then the function's results after the first (XL
    memories for the next segment).

    If the function's first result is a scalar `tensor<f32>`, it is the
    loss. If it is logits `[B, T, V]`, the loss is their mean cross-entropy
    (`moe.cross_entropy`) against a new last argument, the targets
    `[B, T]` (marked `lm.vocab = V` and `lm.targets`); further results (XL
    memories) are not differentiated: memories are detached, as in
    Transformer-XL.

    `<name>_grad` is the model in training mode: if it contains unseeded
    `moe.dropout_mask` ops (residual and expert dropout), it takes one more
    argument, the step's seed `tensor<i64>` (marked `lm.seed`), and each
    mask draws from it with its own `stream` number.

    The backward pass visits the ops between the parameters and the loss in
    reverse order and asks each for its gradient rule
    (`DifferentiableOpInterface`); adjoints of values used several times are
    summed. Gradients do not flow through the top-k choice, into expert
    indices, token ids or memories. An op on the path without a gradient
    rule is an error. Parameters the loss does not depend on get zero
    gradients. Generated functions (marked `lm.generated`) and functions
    that already have a `_grad` are skipped, so the pass is idempotent.

    ```mlir
    // Before: the converted model
    func.func @m(%t: tensor<?x4xi32>, %w: tensor<64x8xf32> {lm.param = "embed.weight"}, ...)
        -> tensor<?x4x64xf32>
    // After: also
    func.func @m_grad(%t: tensor<?x4xi32>, %w: tensor<64x8xf32> {lm.param = "embed.weight"},
                      ..., %targets: tensor<?x4xi32> {lm.vocab = 64 : i64})
        -> (tensor<f32>, tensor<64x8xf32>, ...)
    ```
  }];
  // The gradient rules build linalg generics with scf loops and math ops.
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::moe::MoeDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def LmBuildTrainStepPass : Pass<"lm-build-train-step", "ModuleOp"> {
  let summary = "Add the optimizer: one AdamW train step per model";
  let description = [{
    For every `<name>_grad` function (from `lm-differentiate`), adds
    `<name>_train_step`: the same arguments, then the AdamW first and second
    moments of every parameter (`m...`, then `v...`, each of its
    parameter's type), then `hyper: tensor<8xf32>` holding
    `[lr, beta1, beta2, eps, weight_decay, clip, 1 - beta1^t, 1 - beta2^t]`
    (the runtime computes the schedule and the bias corrections per step).
    It returns the loss, the global gradient norm before clipping, then the
    new parameters, moments `m` and moments `v`, then `_grad`'s results
    after the gradients (XL memories).

    The step: `g ← g · min(1, clip / ‖g‖)` over all parameters together
    when `clip > 0`; `m ← β1·m + (1-β1)·g`; `v ← β2·v + (1-β2)·g²`;
    `p ← p - lr·((m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + eps) + wd·p)`, with
    decoupled weight decay on matrices only (parameters of rank 2 or more;
    not on norms and biases), as in AdamW.

    ```mlir
    func.func @m_train_step(%t: tensor<?x4xi32>, %w: tensor<16x8xf32> {lm.param = "w"},
                            %targets: tensor<?x4xi32>, %m_w: tensor<16x8xf32>,
                            %v_w: tensor<16x8xf32>, %hyper: tensor<8xf32>)
        -> (tensor<f32>, tensor<f32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def LmCostAnalysisPass : Pass<"lm-cost-analysis", "ModuleOp"> {
  let summary = "Report the MACs and attention memory of decomposed models";
  let description = [{
    For every `lm.model` after `lm-decompose-layers` (before
    `convert-lm-to-func` and the moe fusions), counts for one sequence
    (the batch dimension bound to 1) the multiply-accumulates of each layer
    from the shapes of its ops, split by role, and the floats an attention
    layer keeps for the backward pass, and evaluates the SwitchHead paper's
    closed-form attention formulas (arXiv 2312.07987; dense and SwitchHead
    Transformer-XL, the RoPE variants with c = 0) on the same dimensions.
    Ops are attributed to the layer that owns their weight
    (`lm.get_param @layers.3.att.q` belongs to `layers.3.att`).

    | op | MACs (N tokens) | memory |
    |---|---|---|
    | `moe.linear` q, k, v, o, pos | N · in · out | q, k, v, rel: N · out |
    | `moe.gate` (router) | N · d · H·E | scores N · H·E |
    | `moe.expert_proj` (V) | N · H·k · d · F, gates N · H·k · F | N · H · F |
    | `moe.expert_merge` (O) | N · H·k · F · d, gates N · H·k · F | |
    | `moe.attention` | QKᵀ, A·V and q·relᵀ: T · S · H · F each | 2 · H · T · S, heads T · H · F |
    | `moe.linear` up, down / `moe.expert_mlp` | N · d · d_ff each / N · k · 2dG | hidden |

    The counts differ from the paper's formulas in small, documented terms
    (README, "Cost accounting"): the IR projects keys and values of the XL
    memory too, counts the positional scores q·relᵀ, one positional key per
    distance, and a router of H·E outputs per selection side.

    Each layer's numbers are reported as a remark at its first op, the
    model's totals as a remark on the model; `json-file` also writes them as
    JSON (`switchyard cost --json` prints the same). The IR is unchanged.

    ```mlir
    // switchyard-opt m.mlir --switchyard-frontend-pipeline \
    //   --lm-decompose-layers --lm-cost-analysis
    %a0 = lm.mha "layers.0.att" %x0 {heads = 2, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
    // remark: layers.0.att: dense-attention, 10240 MACs, ...
    ```
  }];
  let options = [
    Option<"jsonFile", "json-file", "std::string", /*default=*/"\"\"",
           "Also write the report of every model as a JSON array to this "
           "file">
  ];
}

#endif // SWITCHYARD_DIALECT_LM_TRANSFORMS_PASSES_TD
