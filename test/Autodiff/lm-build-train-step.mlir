// RUN: switchyard-opt %s -lm-differentiate -lm-build-train-step | FileCheck %s
// RUN: switchyard-opt %s -lm-differentiate -lm-build-train-step=optimizer-step=true | FileCheck %s --check-prefix=OPT

// The train step takes the _grad arguments, the AdamW moments m then v of
// every parameter, and the hyperparameters; it returns the loss, the
// gradient norm, and the new parameters, m and v. Its numerics are checked
// against a C++ AdamW in test/unit/GradientTest.cpp.

// The maps of the AdamW updates' hyperparameter inputs (below).
// CHECK-DAG: #[[LR:.*]] = affine_map<(d0, d1) -> (0)>
// CHECK-DAG: #[[C2:.*]] = affine_map<(d0, d1) -> (7)>
// CHECK-DAG: #[[SCALAR:.*]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @f_train_step(
// CHECK-SAME: %{{.*}}: tensor<4x6xf32> {lm.param = "x"}, %{{.*}}: tensor<6xf32> {lm.param = "b"}, %{{.*}}: tensor<1x4xi32>,
// CHECK-SAME: %{{.*}}: tensor<4x6xf32> {lm.adam_m = "x"}, %{{.*}}: tensor<6xf32> {lm.adam_m = "b"},
// CHECK-SAME: %{{.*}}: tensor<4x6xf32> {lm.adam_v = "x"}, %{{.*}}: tensor<6xf32> {lm.adam_v = "b"},
// CHECK-SAME: %[[HYPER:.*]]: tensor<8xf32> {lm.hyper})
// CHECK-SAME: -> (tensor<f32>, tensor<f32>, tensor<4x6xf32>, tensor<6xf32>, tensor<4x6xf32>, tensor<6xf32>, tensor<4x6xf32>, tensor<6xf32>)
// The loss and gradients from a call of _grad (its code exists once), the
// global norm, then one fused update per parameter; the loss is returned in
// a tensor of its own.
// CHECK: %[[G:.*]]:3 = call @f_grad(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<4x6xf32>, tensor<6xf32>, tensor<1x4xi32>) -> (tensor<f32>, tensor<4x6xf32>, tensor<6xf32>)
// CHECK: math.sqrt
// CHECK: arith.minimumf
// Each update reads the hyperparameters (learning rate, betas, epsilon,
// decay, the bias corrections: 0-4, 6, 7) and the clipping factor as inputs
// that every element reads at one place, not as scalars extracted before
// it (on the GPU each would be a single-thread kernel and a buffer).
// CHECK-NOT: tensor.extract %[[HYPER]][%c0
// CHECK: %[[FACTOR:.*]] = tensor.from_elements %{{.*}} : tensor<f32>
// CHECK: %[[X:.*]]:3 = linalg.generic {indexing_maps = [{{.*}}, #[[LR]], {{.*}}, #[[C2]], #[[SCALAR]], {{.*}}]{{.*}} ins({{.*}}, %[[HYPER]], %[[HYPER]], %[[HYPER]], %[[HYPER]], %[[HYPER]], %[[HYPER]], %[[HYPER]], %[[FACTOR]] : {{.*}}) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>)
// CHECK: %[[B:.*]]:3 = linalg.generic {{.*}} outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>)
// CHECK: return %{{.*}}, %{{.*}}, %[[X]]#0, %[[B]]#0, %[[X]]#1, %[[B]]#1, %[[X]]#2, %[[B]]#2
func.func @f(%x: tensor<4x6xf32> {lm.param = "x"}, %b: tensor<6xf32> {lm.param = "b"}, %t: tensor<1x4xi32>) -> tensor<f32> {
  %n = moe.layer_norm %x, %b, %b : tensor<4x6xf32>, tensor<6xf32>
  %l = tensor.expand_shape %n [[0, 1], [2]] output_shape [1, 4, 6] : tensor<4x6xf32> into tensor<1x4x6xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x4x6xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// With optimizer-step, the step's update from given gradients follows it
// (for data-parallel training): parameters, gradients, m, v, hyper in; the
// norm, new parameters, m and v out; the same clipping and updates, no
// call of _grad. Its numerics: test/unit/TrainingTest.cpp
// (DataParallelTest).
// OPT-LABEL: func.func @f_train_step(
// OPT-LABEL: func.func @f_optimizer_step(
// OPT-SAME: %{{.*}}: tensor<4x6xf32> {lm.param = "x"}, %{{.*}}: tensor<6xf32> {lm.param = "b"},
// OPT-SAME: %[[GX:.*]]: tensor<4x6xf32> {lm.grad = "x"}, %[[GB:.*]]: tensor<6xf32> {lm.grad = "b"},
// OPT-SAME: %{{.*}}: tensor<4x6xf32> {lm.adam_m = "x"}, %{{.*}}: tensor<6xf32> {lm.adam_m = "b"},
// OPT-SAME: %{{.*}}: tensor<4x6xf32> {lm.adam_v = "x"}, %{{.*}}: tensor<6xf32> {lm.adam_v = "b"},
// OPT-SAME: %{{.*}}: tensor<8xf32> {lm.hyper})
// OPT-SAME: -> (tensor<f32>, tensor<4x6xf32>, tensor<6xf32>, tensor<4x6xf32>, tensor<6xf32>, tensor<4x6xf32>, tensor<6xf32>)
// OPT-SAME: attributes {lm.generated}
// OPT-NOT: call @f_grad
// OPT: math.sqrt
// OPT: %[[X:.*]]:3 = linalg.generic {{.*}} ins(%{{.*}}, %[[GX]], {{.*}}) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>)
// OPT: %[[B:.*]]:3 = linalg.generic {{.*}} ins(%{{.*}}, %[[GB]], {{.*}}) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>)
// OPT: return %{{.*}}, %[[X]]#0, %[[B]]#0, %[[X]]#1, %[[B]]#1, %[[X]]#2, %[[B]]#2
