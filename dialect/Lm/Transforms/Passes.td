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

#endif // SWITCHYARD_DIALECT_LM_TRANSFORMS_PASSES_TD
