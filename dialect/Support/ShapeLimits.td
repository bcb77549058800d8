//===- ShapeLimits.td - the dialects' size limits as an op trait -*- tablegen -*-===//
//
// Every op of the `lm` and `moe` dialects carries BoundedShapes: its ranked
// tensor operands and results keep to the sizes of
// dialect/Support/ShapeChecks.h (dimensions up to 2^24, 2^36 elements),
// verified before the op's own verifier runs.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_SUPPORT_SHAPELIMITS_TD
#define SWITCHYARD_DIALECT_SUPPORT_SHAPELIMITS_TD

include "mlir/IR/OpBase.td"

def Switchyard_BoundedShapes : NativeOpTrait<"BoundedShapes"> {
  let cppNamespace = "::mlir::OpTrait::switchyard";
}

#endif // SWITCHYARD_DIALECT_SUPPORT_SHAPELIMITS_TD
