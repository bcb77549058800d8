// RUN: switchyard-opt %s --pass-pipeline='builtin.module(func.func(switchyard-gpu-row-kernels{block-size=64}))' --split-input-file --verify-diagnostics | FileCheck %s

#id = affine_map<(d0) -> (d0)>
#all = affine_map<(d0) -> ()>

// A row's sum (a block reduction: strided partial sums, shared memory,
// thread 0 adds them to the initial value) and the division that reads
// it (strided elements), a barrier after each op; the row's temporary
// sum in shared memory after the 64 partial sums.
// CHECK-LABEL: func.func @rows
// CHECK: gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c64, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) dynamic_shared_memory_size %c260_i32
// CHECK: %[[SHARED:.*]] = gpu.dynamic_shared_memory
// CHECK: %[[PARTIALS:.*]] = memref.view %[[SHARED]][%{{.*}}][] {{.*}} to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: memref.subview %{{.*}}[%[[B]], 0] [1, 100]
// CHECK: %[[SUM:.*]] = memref.view %[[SHARED]][%c256{{.*}}][] {{.*}} to memref<f32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{.*}} = %[[T]] to %c1{{.*}} step %c64
// CHECK: memref.store %{{.*}}, %[[SUM]][]
// CHECK: gpu.barrier
// CHECK: %[[PART:.*]] = scf.for %{{.*}} = %[[T]] to %{{.*}} step %c64{{.*}} iter_args
// CHECK: arith.addf
// CHECK: memref.store %[[PART]], %[[PARTIALS]][%[[T]]]
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: memref.load %[[SUM]][]
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c64
// CHECK: memref.store %{{.*}}, %[[SUM]][]
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %[[T]] to %{{.*}} step %c64
// CHECK: arith.divf
// CHECK: gpu.barrier
// CHECK-NEXT: gpu.terminator
// CHECK-NOT: scf.forall
func.func @rows(%x: memref<?x100xf32>, %y: memref<?x100xf32>, %n: index) {
  %zero = arith.constant 0.0 : f32
  scf.forall (%i) in (%n) {
    %xi = memref.subview %x[%i, 0] [1, 100] [1, 1] : memref<?x100xf32> to memref<100xf32, strided<[1], offset: ?>>
    %yi = memref.subview %y[%i, 0] [1, 100] [1, 1] : memref<?x100xf32> to memref<100xf32, strided<[1], offset: ?>>
    %s = memref.alloc() : memref<f32>
    linalg.fill ins(%zero : f32) outs(%s : memref<f32>)
    linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
        ins(%xi : memref<100xf32, strided<[1], offset: ?>>) outs(%s : memref<f32>) {
    ^bb0(%a: f32, %o: f32):
      %t = arith.addf %o, %a : f32
      linalg.yield %t : f32
    }
    linalg.generic {indexing_maps = [#id, #all, #id], iterator_types = ["parallel"]}
        ins(%xi, %s : memref<100xf32, strided<[1], offset: ?>>, memref<f32>) outs(%yi : memref<100xf32, strided<[1], offset: ?>>) {
    ^bb0(%a: f32, %t: f32, %o: f32):
      %d = arith.divf %a, %t : f32
      linalg.yield %d : f32
    }
    memref.dealloc %s : memref<f32>
  } {mapping = [#gpu.block<linear_dim_0>]}
  return
}

// -----

#id = affine_map<(d0) -> (d0)>
#all = affine_map<(d0) -> ()>

// A reduction whose body is not one combining op (a product): thread 0
// runs the whole loop.
// CHECK-LABEL: func.func @product
// CHECK: gpu.launch
// CHECK: scf.for %{{.*}} = %{{.*}} to %c1{{.*}} step %c64
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c1
// CHECK: arith.mulf
// CHECK-NOT: memref.view %{{.*}}[%c256
func.func @product(%x: memref<?x100xf32>, %p: memref<?xf32>, %n: index) {
  scf.forall (%i) in (%n) {
    %xi = memref.subview %x[%i, 0] [1, 100] [1, 1] : memref<?x100xf32> to memref<100xf32, strided<[1], offset: ?>>
    %pi = memref.subview %p[%i] [1] [1] : memref<?xf32> to memref<f32, strided<[], offset: ?>>
    linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
        ins(%xi : memref<100xf32, strided<[1], offset: ?>>) outs(%pi : memref<f32, strided<[], offset: ?>>) {
    ^bb0(%a: f32, %o: f32):
      %t = arith.mulf %o, %a : f32
      linalg.yield %t : f32
    }
  } {mapping = [#gpu.block<linear_dim_0>]}
  return
}

// -----

// A temporary of dynamic size has no place in shared memory.
func.func @dynamic(%n: index, %m: index) {
  scf.forall (%i) in (%n) {
    // expected-error @below {{'memref.alloc' op in a row kernel needs a static shape}}
    %t = memref.alloc(%m) : memref<?xf32>
    memref.dealloc %t : memref<?xf32>
  } {mapping = [#gpu.block<linear_dim_0>]}
  return
}
