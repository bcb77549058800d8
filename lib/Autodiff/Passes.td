//===- Passes.td - Switchyard autodiff passes --------------*- tablegen -*-===//
//
// Reverse-mode differentiation of the functions a model becomes (func, moe and
// linalg on tensors) and the optimizer step built on it.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_AUTODIFF_PASSES_TD
#define SWITCHYARD_LIB_AUTODIFF_PASSES_TD

include "mlir/Pass/PassBase.td"

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
    mask draws from it with its own `stream` number. A block function's
    training form takes the seed and an `i64` offset, the first stream of
    its call, and its masks draw from `seed + offset`: the layers share one
    function, each call with its own streams.

    The backward pass visits the ops between the parameters and the loss in
    reverse order and asks each for its gradient rule
    (`DifferentiableOpInterface`); adjoints of values used several times are
    summed. Gradients do not flow through the top-k choice, into expert
    indices, token ids or memories. An op on the path without a gradient
    rule is an error. Parameters the loss does not depend on get zero
    gradients. Generated functions (marked `lm.generated`) and functions
    that already have a `_grad` are skipped, so the pass is idempotent.
    What a moe op's rule builds is located at a name location after it
    (`loc("linear_grad"(...))`), which the GPU kernel report shows.

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

def LmSplitBlockGradientsPass : Pass<"lm-split-block-gradients", "ModuleOp"> {
  let summary = "Make each block's backward pass read its forward pass's values";
  let description = [{
    `lm-differentiate` differentiates each block function once: a training
    forward function `<block>_train`, called in the forward sweep, and a
    vector-Jacobian product `<block>_vjp` (marked `lm.vjp`), called in the
    reverse sweep, which recomputes the block's forward pass before its
    backward sweep. That is correct at every stage, and lets the fusions see
    each forward op next to the gradient that reads it (moe-fuse-attention
    hands the flash attention's logsumexp to its gradient).

    This pass, run after the fusions, splits every `_vjp` in two. Its
    forward part (the ops its results need) replaces the body of
    `<block>_train`, which now also returns the residuals: the values the
    backward part reads, except constants, shapes, empty tensors and
    reshapes, which the backward part recomputes. The backward part becomes
    `<block>_bwd`, taking the block's inputs, the forward call's results
    and residuals, then the adjoints of its results. Every call of the
    `_vjp` passes what the call of `_train` with the same inputs returned. A
    `_vjp` with a call that has no such forward call is left as it is.

    ```mlir
    // Before
    %y = call @m__ffn_train(%x, %w, %seed, %c3) : (...) -> tensor<?x8x16xf32>
    ...
    %y2, %dx, %dw = call @m__ffn_vjp(%x, %w, %seed, %c3, %dy) : (...) -> (...)
    // After
    %y, %r0, %r1 = call @m__ffn_train(%x, %w, %seed, %c3) : (...) -> (...)
    ...
    %dx, %dw = call @m__ffn_bwd(%x, %w, %seed, %c3, %y, %r0, %r1, %dy) : (...) -> (...)
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
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
    after the gradients (XL memories). The loss and the gradients come from
    a call of `<name>_grad`, so that its code exists once in the module.

    The parameters that one call of a block's training forward function
    reads (`lm.block_forward`, from `lm-differentiate`) are updated by
    optimizer functions built once per kind of layer and called once per
    layer: where the block calls repeat a pattern of two to four blocks (an
    attention block, then a feed-forward block), each repetition is a layer
    and its functions take all its blocks' parameters
    (`m__switchhead_ffn_adamw`); otherwise each block call is one.
    `<layer>_sum_squares` returns each gradient's Σ g², `<layer>_adamw`
    takes `hyper`, the clipping factor as a `tensor<f32>`, then the
    parameters, gradients, m and v, and returns the new parameters, m and
    v. One function for a whole layer gives the GPU's launch merging the
    independent updates and sums of both blocks at once. The other
    parameters (embedding, final norm, output) are updated in the step
    itself. The norm adds every parameter's Σ g² in parameter order either
    way, so the results do not depend on the grouping.

    The step: `g ← g · min(1, clip / ‖g‖)` over all parameters together
    when `clip > 0`; `m ← β1·m + (1-β1)·g`; `v ← β2·v + (1-β2)·g²`;
    `p ← p - lr·((m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + eps) + wd·p)`, with
    decoupled weight decay on matrices only (parameters of rank 2 or more;
    not on norms and biases), as in AdamW. Each parameter's update is one
    linalg.generic that takes the hyperparameters (`hyper` at constant
    indices) and the clipping factor (a `tensor<f32>`) as inputs every
    element reads at one place: no scalar is extracted for it (on the GPU,
    an extracted scalar is a single-thread kernel and a buffer of its own).

    With `optimizer-step`, also `<name>_optimizer_step`: the step's update
    alone, for data-parallel training (each process's `_grad` on its part
    of the batch, the gradients averaged across processes, then this). It
    takes the parameters (`lm.param`), their gradients (`lm.grad = "<the
    parameter's name>"`), `m`, `v` and `hyper`, and returns the gradient
    norm, then the new parameters, `m` and `v`: `_train_step`'s results
    without the loss and the memories.

    ```mlir
    func.func @m_train_step(%t: tensor<?x4xi32>, %w: tensor<16x8xf32> {lm.param = "w"},
                            %targets: tensor<?x4xi32>, %m_w: tensor<16x8xf32>,
                            %v_w: tensor<16x8xf32>, %hyper: tensor<8xf32>)
        -> (tensor<f32>, tensor<f32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) {
      %loss, %g = call @m_grad(%t, %w, %targets)
          : (tensor<?x4xi32>, tensor<16x8xf32>, tensor<?x4xi32>) -> (tensor<f32>, tensor<16x8xf32>)
      // ‖g‖, the clipping factor, then one linalg.generic per parameter
      // computing its new value and moments.
      ...
    }
    ```
  }];
  let options = [
    Option<"optimizerStep", "optimizer-step", "bool", /*default=*/"false",
           "Also add <name>_optimizer_step: the update from given gradients">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // SWITCHYARD_LIB_AUTODIFF_PASSES_TD
