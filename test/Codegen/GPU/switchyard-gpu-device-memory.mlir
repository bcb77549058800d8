// RUN: switchyard-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(switchyard-gpu-device-memory))" --verify-diagnostics | FileCheck %s

// Host buffers become device allocations; copies become linalg.copy (they
// may copy strided views); buffers inside linalg bodies are left alone.
// CHECK-LABEL: func.func @host_buffers
// CHECK-SAME: (%[[ARG:.*]]: memref<?x4xf32>, %[[N:.*]]: index)
// CHECK: %[[A:.*]] = gpu.alloc (%[[N]]) : memref<?x4xf32>
// CHECK: linalg.copy ins(%[[ARG]] : memref<?x4xf32>) outs(%[[A]] : memref<?x4xf32>)
// CHECK: %[[S:.*]] = memref.subview %[[A]]
// CHECK: %[[B:.*]] = gpu.alloc () : memref<2x2xf32>
// CHECK: linalg.copy ins(%[[S]] : memref<2x2xf32, strided<[4, 1]>>) outs(%[[B]] : memref<2x2xf32>)
// CHECK: memref.alloca() : memref<3xf32>
// CHECK: gpu.dealloc %[[B]] : memref<2x2xf32>
// CHECK: return %[[A]]
// CHECK-NOT: memref.alloc(
// CHECK-NOT: memref.copy
func.func @host_buffers(%arg: memref<?x4xf32>, %n: index) -> memref<?x4xf32> {
  %a = memref.alloc(%n) {alignment = 64 : i64} : memref<?x4xf32>
  memref.copy %arg, %a : memref<?x4xf32> to memref<?x4xf32>
  %s = memref.subview %a[0, 0] [2, 2] [1, 1] : memref<?x4xf32> to memref<2x2xf32, strided<[4, 1]>>
  %b = memref.alloc() : memref<2x2xf32>
  memref.copy %s, %b : memref<2x2xf32, strided<[4, 1]>> to memref<2x2xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%b : memref<2x2xf32>) {
  ^bb0(%out: f32):
    %t = memref.alloca() : memref<3xf32>
    linalg.yield %out : f32
  }
  memref.dealloc %b : memref<2x2xf32>
  return %a : memref<?x4xf32>
}

// -----

memref.global "private" constant @table : memref<4xf32> = dense<1.0>

// Host globals have no device copy yet.
func.func @host_global() -> memref<4xf32> {
  // expected-error @below {{'memref.get_global' op has no device-memory equivalent in the GPU target: host code may only allocate buffers with memref.alloc}}
  %g = memref.get_global @table : memref<4xf32>
  return %g : memref<4xf32>
}
