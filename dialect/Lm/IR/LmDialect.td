//===- LmDialect.td - language-model definition dialect ----*- tablegen -*-===//
//
// The `lm` dialect: model definitions written by people. One `lm.model` is a
// whole language model; its layer ops own named parameters.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_LM_IR_LMDIALECT_TD
#define SWITCHYARD_DIALECT_LM_IR_LMDIALECT_TD

include "dialect/Support/ShapeLimits.td"
include "mlir/IR/OpBase.td"

def Lm_Dialect : Dialect {
  let name = "lm";
  let cppNamespace = "::mlir::lm";
  let summary = "Language-model definitions: layers that own named parameters";
  let description = [{
    The `lm` dialect is the input language of Switchyard: a model definition
    is one `.mlir` file holding an `lm.model`, a function from token ids to
    logits whose body is a chain of layer ops.

    Layer ops (`lm.embed`, `lm.mha`, `lm.switchhead`, `lm.ffn`,
    `lm.sigma_moe`, `lm.layer_norm`, `lm.output`) carry a *layer name* such as
    `"layers.0.att"` and own the parameters their attributes imply, named
    like a PyTorch state dict (`layers.0.att.v`) so that checkpoints exchange
    by name. Attention and feed-forward layers are whole pre-LayerNorm
    residual blocks, `x + Sublayer(LN(x))`; the block's norm parameters are
    `<layer>.norm.weight` and `<layer>.norm.bias`.

    Parameters become explicit `lm.param` declarations (name, shape,
    initialiser) with the `lm-materialize-params` pass; the runtime
    enumerates, initialises and checkpoints those. Computations written by
    hand read a declared parameter with `lm.get_param`.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Lm_Op<string mnemonic, list<Trait> traits = []>
    : Op<Lm_Dialect, mnemonic,
         !listconcat([Switchyard_BoundedShapes], traits)>;

#endif // SWITCHYARD_DIALECT_LM_IR_LMDIALECT_TD
