//===- LmOps.td - lm dialect operations --------------------*- tablegen -*-===//
//
// Operations of the `lm` dialect: the model container, parameter
// declarations, and the layers a language model is written with.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_LM_IR_LMOPS_TD
#define SWITCHYARD_DIALECT_LM_IR_LMOPS_TD

include "dialect/Lm/IR/LmAttrs.td"
include "dialect/Lm/IR/LmInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/CallInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/FunctionInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Constraints shared by the layers
//===----------------------------------------------------------------------===//

defvar Lm_FloatTypes = [F32, F16, BF16];
/// Hidden states [batch, time, width].
def Lm_Hidden : TensorRankOf<Lm_FloatTypes, [3]>;
/// Token ids [batch, time].
def Lm_Tokens : TensorRankOf<[I32, I64], [2]>;
// A key/value cache of an attention block, [batch, capacity, heads, width].
def Lm_Cache : TensorRankOf<Lm_FloatTypes, [4]>;
// The position of a decoding step's first token.
def Lm_Position : TensorRankOf<[I32], [0]>;

def Lm_PositiveI64 : ConfinedAttr<I64Attr, [IntPositive]>;
/// A count from 1 to `max`: the layers' size limits (docs/BadInputs.md),
/// which keep every count the compiler forms within 64 bits.
class Lm_Count<int max> : ConfinedAttr<I64Attr, [IntPositive, IntMaxValue<max>]>;
def Lm_Vocab : Lm_Count<16777216>;
def Lm_Heads : Lm_Count<1024>;
def Lm_HeadDim : Lm_Count<1024>;
def Lm_Experts : Lm_Count<4096>;
def Lm_FeedForwardWidth : Lm_Count<1048576>;
def Lm_FloatPositive : AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() > 0.0">,
    "whose value is positive">;
/// A probability in [0, 1).
def Lm_Probability : ConfinedAttr<DefaultValuedAttr<F64Attr, "0.0">,
    [AttrConstraint<CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0 && "
                          "::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() < 1.0">,
                    "whose value is a probability in [0, 1)">]>;

def Lm_NonNegativeF64 : ConfinedAttr<DefaultValuedAttr<F64Attr, "0.0">,
    [AttrConstraint<CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0">,
                    "whose value is non-negative">]>;

class Lm_LayerOp<string mnemonic, list<Trait> traits = []>
    : Lm_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<Lm_ParamOwnerOpInterface, ["getParams"]>])>;

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

def Lm_ModelOp : Lm_Op<"model", [FunctionOpInterface, IsolatedFromAbove,
    AutomaticAllocationScope]> {
  let summary = "a language model: token ids in, logits (and state) out";
  let description = [{
    A whole language model as a function. The first argument is the token
    ids `[batch, time]`, the first result the logits `[batch, time, vocab]`.
    Transformer-XL models take, after the tokens, one memory tensor per XL
    attention layer (the previous segment's block inputs) and return, after
    the logits, the new memories in the same order.

    A model may also take hidden states `[batch, time, width]` in place of
    the token ids and return hidden states: a stack of blocks without
    embedding or output head, which `switchyard run` runs (for example, to
    compare one block with another implementation of it) but which cannot
    be trained.

    The body is a single block ending in `lm.return`. Layer names must be
    unique within a model: they prefix the parameter names.

    ```mlir
    lm.model @bigram(%tokens: tensor<?x16xi32>) -> tensor<?x16x256xf32> {
      %x = lm.embed "embed" %tokens {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x32xf32>
      %logits = lm.output "out" %x {vocab = 256} : tensor<?x16x32xf32> -> tensor<?x16x256xf32>
      lm.return %logits : tensor<?x16x256xf32>
    }
    ```
  }];

  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FunctionType>:$function_type,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs);
  let regions = (region SizedRegion<1>:$body);

  let extraClassDeclaration = [{
    //===------------------------------------------------------------------===//
    // FunctionOpInterface
    //===------------------------------------------------------------------===//

    ::llvm::ArrayRef<::mlir::Type> getArgumentTypes() {
      return getFunctionType().getInputs();
    }
    ::llvm::ArrayRef<::mlir::Type> getResultTypes() {
      return getFunctionType().getResults();
    }
    ::mlir::Region *getCallableRegion() { return &getBody(); }

    /// The number of transformer layers (attention blocks) in the model, the
    /// L of the scaled initialisations; at least 1.
    int64_t getNumLayers();
  }];

  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name,
                                 "::mlir::FunctionType":$type)>];
}

//===----------------------------------------------------------------------===//
// ReturnOp
//===----------------------------------------------------------------------===//

def Lm_ReturnOp : Lm_Op<"return", [Pure, HasParent<"ModelOp">, ReturnLike,
    Terminator]> {
  let summary = "returns the logits (and XL memories) of a model";
  let description = [{
    Terminates an `lm.model`; the operand types must equal the model's
    result types.

    ```mlir
    lm.return %logits : tensor<?x16x256xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$operands);
  let assemblyFormat = "$operands attr-dict `:` type($operands)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

def Lm_ParamOp : Lm_Op<"param", [Symbol]> {
  let summary = "declares a named, trainable parameter";
  let description = [{
    Declares a parameter: its name (the key in checkpoints), its statically
    shaped tensor type, and its initialiser. `lm-materialize-params` writes
    one for every parameter a layer owns; a declaration written by hand with
    the same name and type takes precedence, which is how a model overrides
    an initialiser.

    `alias`, when present, is the name the official implementation gives the
    same tensor (its state-dict key under the layer's prefix, e.g.
    `layers.0.att.pos_to_pk` for `layers.0.att.pos`): parameter files may
    use either name. The layers set it where the official module has a
    tensor of the same shape and meaning (docs/Parameters.md).

    ```mlir
    lm.param @layers.0.att.v : tensor<10x128x32xf32> init <normal, std = 6.250000e-02> alias "layers.0.att.v"
    lm.param @layers.0.att.q : tensor<64x128xf32> init <normal, std = 6.250000e-02> alias "layers.0.att.q.weight"
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyStaticShapeTensor>:$type,
                       Lm_InitAttr:$init,
                       OptionalAttr<StrAttr>:$alias);
  let assemblyFormat =
      "$sym_name `:` $type `init` $init (`alias` $alias^)? attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// GetParamOp
//===----------------------------------------------------------------------===//

def Lm_GetParamOp : Lm_Op<"get_param", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads the value of a declared parameter";
  let description = [{
    Yields the current value of the parameter `name`, which must be declared
    by an `lm.param` of the same type in the nearest symbol table.

    ```mlir
    %w = lm.get_param @out.weight : tensor<256x32xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// EmbedOp
//===----------------------------------------------------------------------===//

def Lm_EmbedOp : Lm_LayerOp<"embed"> {
  let summary = "token embedding lookup";
  let description = [{
    `result[b, t, :] = weight[tokens[b, t], :]`. Owns `<layer>.weight` of
    shape `[vocab, width]`, initialised normal with deviation `1/√width`.
    Token ids outside `[0, vocab)` are a run-time error.

    ```mlir
    %x = lm.embed "embed" %tokens {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x32xf32>
    ```
  }];
  let arguments = (ins StrAttr:$layer_name, Lm_Tokens:$tokens,
                       Lm_Vocab:$vocab);
  let results = (outs Lm_Hidden:$result);
  let assemblyFormat = [{
    $layer_name $tokens attr-dict `:` type($tokens) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// LayerNormOp
//===----------------------------------------------------------------------===//

def Lm_LayerNormOp : Lm_LayerOp<"layer_norm", [AllTypesMatch<["input", "result"]>]> {
  let summary = "layer normalisation over the model width";
  let description = [{
    `(x - mean) / sqrt(var + eps) · weight + bias` over the last dimension,
    with the biased variance. Owns `<layer>.weight` (ones) and
    `<layer>.bias` (zeros), both `[width]`. Used for the final norm; the
    blocks' own pre-norms are part of the block ops.

    ```mlir
    %y = lm.layer_norm "norm" %x : tensor<?x16x32xf32>
    %z = lm.layer_norm "norm2" %x {eps = 1.0e-06 : f64} : tensor<?x16x32xf32>
    ```
  }];
  let arguments = (ins StrAttr:$layer_name, Lm_Hidden:$input,
                       ConfinedAttr<DefaultValuedAttr<F64Attr, "1.0e-5">,
                                    [Lm_FloatPositive]>:$eps);
  let results = (outs Lm_Hidden:$result);
  let assemblyFormat = "$layer_name $input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention blocks
//===----------------------------------------------------------------------===//

def Lm_MhaOp : Lm_LayerOp<"mha", [AllTypesMatch<["input", "result"]>,
    AttrSizedOperandSegments, AttrSizedResultSegments]> {
  let summary = "dense multi-head causal self-attention block (the baseline)";
  let description = [{
    A pre-LN residual block `x + Attn(LN(x))` with `heads` heads of width
    `head_dim`. With `h = LN(x)`: `Q_h = h·W_q,hᵀ·d_h^(-1/4)`,
    `K_h = h·W_k,hᵀ·d_h^(-1/4)`, `V_h = h·W_v,hᵀ`,
    `A_h = softmax(Q_h K_hᵀ + positional term + causal mask)`, and
    `y = x + concat_h(A_h V_h)·W_oᵀ`.

    Owns `<layer>.norm.weight`, `<layer>.norm.bias` `[D]`, `<layer>.q`,
    `<layer>.k`, `<layer>.v` `[heads·head_dim, D]`, `<layer>.o`
    `[D, heads·head_dim]` and, with `pos = #lm.pos<xl>`, `<layer>.pos`
    `[heads·head_dim, D]`. With XL positions the optional `memory` operand
    holds the previous segment's block inputs `[batch, time_mem, D]`; keys and
    values then cover memory and current tokens.

    With `cache(%keys, %values at %p : ...)` (positions rope or none, no
    memory), the block is one decoding step over a key/value cache: the
    input holds the tokens at positions `p .. p + T - 1` (`%p` an i32
    scalar), `%keys` and `%values` `[batch, capacity, heads, head_dim]` the
    rotated keys and the values of the positions before `p` (rows `p` and
    after are not read). The step writes its own keys and values into rows
    `p .. p + T - 1` and returns the caches so written after the result;
    its queries attend to rows `0 .. p + t`, so its result equals that of
    the whole sequence's block at those positions.

    Residual dropout `dropout` (default 0) applies to the branch before the
    addition, in training only.

    ```mlir
    %y = lm.mha "layers.0.att" %x {heads = 4, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
    %z = lm.mha "layers.1.att" %y memory(%m : tensor<?x16x32xf32>) {heads = 4, head_dim = 8, pos = #lm.pos<xl>} : tensor<?x16x32xf32>
    %s, %k1, %v1 = lm.mha "layers.0.att" %x1 cache(%k, %v at %p : tensor<1x16x4x8xf32>, tensor<1x16x4x8xf32>, tensor<i32> -> tensor<1x16x4x8xf32>, tensor<1x16x4x8xf32>) {heads = 4, head_dim = 8, pos = #lm.pos<rope>} : tensor<1x1x32xf32>
    ```
  }];
  let arguments = (ins StrAttr:$layer_name, Lm_Hidden:$input,
                       Optional<Lm_Hidden>:$memory,
                       Optional<Lm_Cache>:$keys, Optional<Lm_Cache>:$values,
                       Optional<Lm_Position>:$position,
                       Lm_Heads:$heads, Lm_HeadDim:$head_dim,
                       DefaultValuedAttr<Lm_PosEncodingAttr,
                                         "PosEncoding::none">:$pos,
                       Lm_Probability:$dropout);
  let results = (outs Lm_Hidden:$result, Optional<Lm_Cache>:$next_keys,
                      Optional<Lm_Cache>:$next_values);
  let assemblyFormat = [{
    $layer_name $input (`memory` `(` $memory^ `:` type($memory) `)`)?
    (`cache` `(` $keys^ `,` $values `at` $position `:` type($keys) `,`
     type($values) `,` type($position) `->` type($next_keys) `,`
     type($next_values) `)`)?
    attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Lm_SwitchHeadOp : Lm_LayerOp<"switchhead", [
    AllTypesMatch<["input", "result"]>, AttrSizedOperandSegments,
    AttrSizedResultSegments]> {
  let summary = "SwitchHead attention block: MoE value and output projections";
  let description = [{
    A pre-LN residual block `x + Attn(LN(x))` whose value and output
    projections are mixtures of experts (arXiv 2312.07987). Each of the
    `heads` heads has `experts` value experts and `experts` output experts
    and activates `k` of each per token: source-side sigmoid scores
    `s_V = sigmoid(h·W_svᵀ)` choose the value experts, destination-side
    scores `s_O = sigmoid(h·W_soᵀ)` the output experts (top-k, gates not
    renormalised). Queries and keys are dense and scaled by `d_h^(-1/4)`.
    With expert dropout `p`, each expert is masked with probability `p`
    before the top-k during training.

    Owns `<layer>.norm.weight`, `<layer>.norm.bias` `[D]`, `<layer>.q`,
    `<layer>.k` `[heads·head_dim, D]`, `<layer>.v`
    `[heads·experts, D, head_dim]`, `<layer>.o` `[heads·experts, head_dim, D]`,
    `<layer>.sel_v`, `<layer>.sel_o` `[heads·experts, D]` and, with XL
    positions, `<layer>.pos` `[heads·head_dim, D]`. `memory` and `cache` are
    as for `lm.mha` (the cache holds the values after their experts).

    Residual dropout `dropout` (default 0) applies to the branch before the
    addition, in training only.

    ```mlir
    %y = lm.switchhead "layers.0.att" %x {heads = 2, experts = 5, k = 3, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
    %z = lm.switchhead "layers.1.att" %y {heads = 2, experts = 4, k = 2, head_dim = 8, expert_dropout = 1.000000e-01 : f64} : tensor<?x16x32xf32>
    ```
  }];
  let arguments = (ins StrAttr:$layer_name, Lm_Hidden:$input,
                       Optional<Lm_Hidden>:$memory,
                       Optional<Lm_Cache>:$keys, Optional<Lm_Cache>:$values,
                       Optional<Lm_Position>:$position,
                       Lm_Heads:$heads, Lm_Experts:$experts,
                       Lm_Experts:$k, Lm_HeadDim:$head_dim,
                       DefaultValuedAttr<Lm_PosEncodingAttr,
                                         "PosEncoding::none">:$pos,
                       Lm_Probability:$expert_dropout,
                       Lm_Probability:$dropout);
  let results = (outs Lm_Hidden:$result, Optional<Lm_Cache>:$next_keys,
                      Optional<Lm_Cache>:$next_values);
  let assemblyFormat = [{
    $layer_name $input (`memory` `(` $memory^ `:` type($memory) `)`)?
    (`cache` `(` $keys^ `,` $values `at` $position `:` type($keys) `,`
     type($values) `,` type($position) `->` type($next_keys) `,`
     type($next_values) `)`)?
    attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Feed-forward blocks
//===----------------------------------------------------------------------===//

def Lm_FfnOp : Lm_LayerOp<"ffn", [AllTypesMatch<["input", "result"]>]> {
  let summary = "dense feed-forward block: x + ReLU(LN(x)·W_upᵀ)·W_downᵀ";
  let description = [{
    A pre-LN residual block with one hidden layer of width `d_ff` and ReLU,
    no biases. Owns `<layer>.norm.weight`, `<layer>.norm.bias` `[D]`,
    `<layer>.up` `[d_ff, D]` and `<layer>.down` `[D, d_ff]`.

    Residual dropout `dropout` (default 0) applies to the branch before the
    addition, in training only.

    ```mlir
    %y = lm.ffn "layers.0.ffn" %x {d_ff = 128} : tensor<?x16x32xf32>
    ```
  }];
  let arguments = (ins StrAttr:$layer_name, Lm_Hidden:$input,
                       Lm_FeedForwardWidth:$d_ff, Lm_Probability:$dropout);
  let results = (outs Lm_Hidden:$result);
  let assemblyFormat = "$layer_name $input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Lm_SigmaMoeOp : Lm_LayerOp<"sigma_moe", [AllTypesMatch<["input", "result"]>]> {
  let summary = "sigma-MoE feed-forward block (SwitchAll's FFN)";
  let description = [{
    A pre-LN residual block whose feed-forward is a mixture of `experts`
    ReLU MLPs of width `expert_dim`: with `h = LN(x)`,
    `s = sigmoid(h·W_selᵀ)` and the top-`k` experts of `s`,
    `y = x + Σ_e s_e·ReLU(h·W_up[e])·W_down[e]`. With expert dropout `p`,
    experts are masked with probability `p` before the top-k in training.
    With `entropy_reg` λ > 0, training adds `-λ·H(P)` to the objective, `P`
    the batch mean of `softmax(h·W_selᵀ)` (the σ-MoE balancing term).

    Owns `<layer>.norm.weight`, `<layer>.norm.bias` `[D]`, `<layer>.sel`
    `[experts, D]`, `<layer>.up` `[experts, D, expert_dim]` and
    `<layer>.down` `[experts, expert_dim, D]`.

    Residual dropout `dropout` (default 0) applies to the branch before the
    addition, in training only.

    ```mlir
    %y = lm.sigma_moe "layers.0.ffn" %x {experts = 8, k = 2, expert_dim = 16} : tensor<?x16x32xf32>
    %z = lm.sigma_moe "layers.1.ffn" %y {experts = 8, k = 2, expert_dim = 16, expert_dropout = 0.1, entropy_reg = 0.001, dropout = 0.1} : tensor<?x16x32xf32>
    ```
  }];
  let arguments = (ins StrAttr:$layer_name, Lm_Hidden:$input,
                       Lm_Experts:$experts, Lm_Experts:$k,
                       Lm_FeedForwardWidth:$expert_dim,
                       Lm_Probability:$expert_dropout,
                       Lm_NonNegativeF64:$entropy_reg,
                       Lm_Probability:$dropout);
  let results = (outs Lm_Hidden:$result);
  let assemblyFormat = "$layer_name $input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// OutputOp
//===----------------------------------------------------------------------===//

def Lm_OutputOp : Lm_LayerOp<"output", [AllElementTypesMatch<["input", "result"]>]> {
  let summary = "output head: logits = x · W_outᵀ";
  let description = [{
    Projects hidden states to vocabulary logits. Owns `<layer>.weight`
    `[vocab, D]`, initialised normal with deviation `1/√D`. Apply the final
    `lm.layer_norm` before it.

    ```mlir
    %logits = lm.output "out" %x {vocab = 256} : tensor<?x16x32xf32> -> tensor<?x16x256xf32>
    ```
  }];
  let arguments = (ins StrAttr:$layer_name, Lm_Hidden:$input,
                       Lm_Vocab:$vocab);
  let results = (outs Lm_Hidden:$result);
  let assemblyFormat = [{
    $layer_name $input attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

def Lm_CrossEntropyOp : Lm_Op<"cross_entropy", [Pure]> {
  let summary = "mean next-token cross-entropy in nats";
  let description = [{
    `-mean_{b,t} log softmax(logits[b, t])[targets[b, t]]`, computed in f32.
    The targets are usually the tokens shifted by one position.

    ```mlir
    %loss = lm.cross_entropy %logits, %targets : tensor<?x16x256xf32>, tensor<?x16xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Lm_Hidden:$logits, Lm_Tokens:$targets);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` type($logits) `,` type($targets) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

#endif // SWITCHYARD_DIALECT_LM_IR_LMOPS_TD
