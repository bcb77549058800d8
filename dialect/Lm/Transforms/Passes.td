//===- Passes.td - lm dialect passes -----------------------*- tablegen -*-===//
//
// Passes over `lm` model definitions that keep them in the lm dialect: the
// parameters' declaration and the cost analysis.
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
    (docs/Cost.md): the IR projects keys and values of the XL memory too,
    counts the positional scores q·relᵀ, one positional key per distance,
    and a router of H·E outputs per selection side.

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
