//===- LmAttrs.td - lm dialect attributes ------------------*- tablegen -*-===//
//
// Positional-encoding enum and parameter initialisers of the `lm` dialect.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_LM_IR_LMATTRS_TD
#define SWITCHYARD_DIALECT_LM_IR_LMATTRS_TD

include "dialect/Lm/IR/LmDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Lm_PosEncoding : I32EnumAttr<"PosEncoding",
    "positional encoding of an attention layer", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"rope", 1>,
      I32EnumAttrCase<"xl", 2>
    ]> {
  let cppNamespace = "::mlir::lm";
  let genSpecializedAttr = 0;
}

def Lm_PosEncodingAttr : EnumAttr<Lm_Dialect, Lm_PosEncoding, "pos"> {
  let summary = "positional encoding: none, rope or xl";
  let description = [{
    * `none`: no positional information besides the causal mask;
    * `rope`: rotary embeddings on the first half of each head's channels
      (rounded down to an even count), base 10000, rotate-half convention;
    * `xl`: Transformer-XL relative positions as the official SwitchHeadXL
      computes them: sinusoidal encodings of the relative position key −
      query (sin at the even channels, cos at the odd ones) projected by
      `<layer>.pos` (the official `pos_to_pk`), with an optional memory
      block.

    ```mlir
    #lm.pos<rope>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Lm_InitKind : I32EnumAttr<"InitKind", "parameter initialiser kind", [
      I32EnumAttrCase<"zeros", 0>,
      I32EnumAttrCase<"ones", 1>,
      I32EnumAttrCase<"normal", 2>,
      I32EnumAttrCase<"row_normal", 3>
    ]> {
  let cppNamespace = "::mlir::lm";
  let genSpecializedAttr = 0;
}

def Lm_InitAttr : AttrDef<Lm_Dialect, "Init"> {
  let mnemonic = "init";
  let summary = "how a parameter is initialised";
  let description = [{
    * `zeros`, `ones`: constant fill;
    * `normal, std = s`: i.i.d. normal samples with mean 0 and deviation `s`;
    * `row_normal, std = s`: normal samples, then each row (the last
      dimension) rescaled to L2 norm `s·√cols`, so that the overall deviation
      stays `s`; the router initialisation of SwitchHead and sigma-MoE.

    ```mlir
    #lm.init<normal, std = 0.0625>
    ```
  }];
  let parameters = (ins EnumParameter<Lm_InitKind>:$kind,
                        APFloatParameter<"standard deviation">:$std);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::mlir::lm::InitKind":$kind, CArg<"double", "0.0">:$std), [{
      return $_get($_ctxt, kind, ::llvm::APFloat(std));
    }]>
  ];
}

#endif // SWITCHYARD_DIALECT_LM_IR_LMATTRS_TD
