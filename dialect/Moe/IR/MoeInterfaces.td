//===- MoeInterfaces.td - moe dialect interfaces -----------*- tablegen -*-===//
//
// The gradient-rule interface of reverse-mode differentiation.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEINTERFACES_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEINTERFACES_TD

include "mlir/IR/OpBase.td"

def Moe_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::moe";
  let description = [{
    An op that knows its vector-Jacobian product: given the adjoint (the
    gradient of the loss) of each of its results, it builds the adjoint of
    each of its operands. Reverse-mode differentiation (`lm-differentiate`)
    calls it on every op between a parameter and the loss, in reverse
    order, and sums the adjoints of values used more than once.

    Rules may read the op's operands and results (the forward values stay
    live in the gradient function) and emit any ops; they are not
    themselves differentiated again. The moe ops, `arith.addf` on tensors
    and the `tensor` reshapes implement it (lib/Autodiff/Gradients.cpp).
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the adjoints of the operands, one per operand (null where the
        operand is not differentiable, such as expert indices or token ids),
        from `resultAdjoints`, one per result (null where a result has
        none). Adjoints have the type of the value they belong to.
      }],
      "::llvm::SmallVector<::mlir::Value>", "buildAdjoints",
      (ins "::mlir::ImplicitLocOpBuilder &":$builder,
           "::mlir::ValueRange":$resultAdjoints)>
  ];
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEINTERFACES_TD
