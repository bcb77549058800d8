// RUN: switchyard-opt %s --switchyard-cpu-bare-pointer-calls | FileCheck %s
// RUN: switchyard-opt %s --switchyard-cpu-bare-pointer-calls | mlir-opt --finalize-memref-to-llvm="use-aligned-alloc=1" --convert-func-to-llvm --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM

// Static shapes with the identity layout, arguments and results: a bare
// pointer each (an optimizer function's parameters, gradients, moments).
// CHECK-LABEL: func.func private @adamw(
// CHECK-SAME: attributes {llvm.bareptr}
// LLVM-LABEL: llvm.func @adamw(
// LLVM-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: f32) -> !llvm.ptr
func.func private @adamw(%p: memref<32x16xf32>, %g: memref<32x16xf32>,
                         %lr: f32) -> memref<32x16xf32> {
  %new = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
  memref.copy %p, %new : memref<32x16xf32> to memref<32x16xf32>
  return %new : memref<32x16xf32>
}

// A batch of activations (a dynamic size) keeps its descriptor.
// CHECK-LABEL: func.func private @block(
// CHECK-NOT: llvm.bareptr
// CHECK-SAME: {
// LLVM-LABEL: llvm.func @block(
// LLVM-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64)
func.func private @block(%x: memref<?x16xf32>) {
  return
}

// A strided layout (a view) keeps its descriptor: its offset and strides
// are not the type's defaults.
// CHECK-LABEL: func.func private @view(
// CHECK-NOT: llvm.bareptr
// CHECK-SAME: {
func.func private @view(%x: memref<4x4xf32, strided<[8, 1], offset: 2>>) {
  return
}

// Referred to other than by a call: left alone.
// CHECK-LABEL: func.func private @taken(
// CHECK-NOT: llvm.bareptr
// CHECK-SAME: {
func.func private @taken(%x: memref<4xf32>) {
  return
}

// A public function (an entry point the runtime calls through its C
// interface) and a declaration: left alone.
// CHECK-LABEL: func.func @entry(
// CHECK-NOT: llvm.bareptr
// CHECK-SAME: {
// CHECK: func.func private @external(memref<4xf32>){{$}}
func.func @entry(%p: memref<32x16xf32>, %g: memref<32x16xf32>, %x: memref<?x16xf32>,
                 %lr: f32) -> memref<32x16xf32> {
  %r = call @adamw(%p, %g, %lr) : (memref<32x16xf32>, memref<32x16xf32>, f32) -> memref<32x16xf32>
  call @block(%x) : (memref<?x16xf32>) -> ()
  %f = func.constant @taken : (memref<4xf32>) -> ()
  return %r : memref<32x16xf32>
}
func.func private @external(memref<4xf32>)

// The call passes the aligned pointer and rebuilds the result's descriptor
// from its static shape, the allocated pointer being the aligned one.
// LLVM-LABEL: llvm.func @entry(
// LLVM: %[[P:.*]] = llvm.extractvalue %{{.*}}[1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// LLVM: %[[G:.*]] = llvm.extractvalue %{{.*}}[1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// LLVM: %[[R:.*]] = llvm.call @adamw(%[[P]], %[[G]], %{{.*}}) : (!llvm.ptr, !llvm.ptr, f32) -> !llvm.ptr
// LLVM: llvm.insertvalue %[[R]], %{{.*}}[0]
// LLVM: llvm.insertvalue %[[R]], %{{.*}}[1]

// In the CPU pipeline: a layer's optimizer functions (static parameters,
// gradients and moments of its attention and feed-forward blocks) take bare
// pointers; its forward function (a batch
// of activations) takes descriptors.
// RUN: switchyard-opt %examples/models/dense-tiny.mlir --switchyard-cpu-pipeline="train-step=1" | FileCheck %s --check-prefix=PIPELINE
// PIPELINE-DAG: llvm.func @dense_tiny__ffn(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64,
// PIPELINE-DAG: llvm.func @dense_tiny__mha_ffn_sum_squares(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: !llvm.ptr, %arg4: !llvm.ptr, %arg5: !llvm.ptr, %arg6: !llvm.ptr, %arg7: !llvm.ptr, %arg8: !llvm.ptr, %arg9: !llvm.ptr) -> !llvm.struct<(ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr)>
// PIPELINE-DAG: llvm.func @dense_tiny__mha_ffn_adamw(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: !llvm.ptr, %arg4: !llvm.ptr,
