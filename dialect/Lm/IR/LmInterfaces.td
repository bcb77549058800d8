//===- LmInterfaces.td - lm dialect interfaces -------------*- tablegen -*-===//
//
// The parameter-owner interface: layer ops report the parameters they own.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_LM_IR_LMINTERFACES_TD
#define SWITCHYARD_DIALECT_LM_IR_LMINTERFACES_TD

include "mlir/IR/OpBase.td"

def Lm_ParamOwnerOpInterface : OpInterface<"ParamOwnerOpInterface"> {
  let cppNamespace = "::mlir::lm";
  let description = [{
    A layer op that owns named parameters. Its layer name (a dotted path
    such as `layers.0.att`) prefixes every parameter it owns. The interface
    verifier checks the layer name's spelling and rejects attributes the op
    does not define (a misspelt `expert` for `experts` must not be ignored);
    attributes qualified by a dialect name (`foo.bar`) are allowed.
  }];
  let methods = [
    InterfaceMethod<"The layer name prefixing every owned parameter.",
      "::llvm::StringRef", "getLayerName">,
    InterfaceMethod<[{
        Appends the parameters this layer owns: full name, tensor type and
        initialiser. `numLayers` is the model depth L used by the scaled
        initialisations (s = √(2/L)).
      }],
      "void", "getParams",
      (ins "::llvm::SmallVectorImpl<::mlir::lm::ParamDecl> &":$params,
           "int64_t":$numLayers)>
  ];
  let verify = [{
    return ::mlir::lm::detail::verifyLayer($_op,
        ::mlir::cast<ConcreteOp>($_op).getLayerName());
  }];
}

#endif // SWITCHYARD_DIALECT_LM_IR_LMINTERFACES_TD
