// RUN: switchyard-opt %s -split-input-file -lm-build-train-step -verify-diagnostics | FileCheck %s

// Only lm-differentiate's gradient functions (lm.generated) get a train
// step: a function of the user's whose name ends in _grad is left alone
// (fuzzing found it taken for one, its missing results read out of bounds).
// CHECK-LABEL: func.func @weight_grad
// CHECK-NOT: weight_train_step
func.func @weight_grad(%x: tensor<4xf32>) {
  return
}

// -----

// A generated gradient function must return the loss, then one gradient
// per parameter.
// expected-error @+1 {{'func.func' op expected the results of a gradient function: the loss (tensor<f32>), then one gradient per lm.param argument, of its type}}
func.func @m_grad(%x: tensor<4xf32> {lm.param = "x"}) -> tensor<f32> attributes {lm.generated} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}
