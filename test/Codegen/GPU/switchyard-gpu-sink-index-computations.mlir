// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-sink-index-computations))" | FileCheck %s
// The same result as upstream's pass, op for op:
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-sink-index-computations))" > %t.ours
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(gpu-launch-sink-index-computations))" > %t.upstream
// RUN: diff %t.ours %t.upstream

// Constants, a memref.dim and a comparison and select on them are cloned
// into each launch that uses them, before their uses, and the launch's uses
// read the clones; the uses outside (the launch's sizes, the store after)
// keep the originals. A select whose operand is loaded on the host is not
// cloned (the load would become a kernel parameter either way, the select
// with it); nor is the load.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[X:.*]]: memref<?xf32>, %[[P:.*]]: memref<i1>)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : index
// CHECK: %[[FLAG:.*]] = memref.load %[[P]][]
// CHECK: %[[PICK:.*]] = arith.select %[[FLAG]]
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %[[C1]], {{.*}}) threads
// CHECK-DAG: %[[IC0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[D:.*]] = memref.dim %[[X]], %[[IC0]] : memref<?xf32>
// CHECK-DAG: %[[IC64:.*]] = arith.constant 64 : index
// CHECK-DAG: %[[CMP:.*]] = arith.cmpi ult, %[[D]], %[[IC64]] : index
// CHECK-DAG: %[[SEL:.*]] = arith.select %[[CMP]], %[[D]], %[[IC64]] : index
// CHECK-DAG: %[[F:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: memref.store %[[F]], %[[X]][%[[SEL]]]
// CHECK: memref.store %[[F]], %[[X]][%[[PICK]]]
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK-NEXT: %[[JC0:.*]] = arith.constant 0 : index
// CHECK: memref.load %[[X]][%[[JC0]]]
// CHECK: gpu.terminator
// CHECK: memref.store {{.*}}, %[[X]][%[[C0]]]
func.func @step(%x: memref<?xf32>, %p: memref<i1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  %d = memref.dim %x, %c0 : memref<?xf32>
  %small = arith.cmpi ult, %d, %c64 : index
  %last = arith.select %small, %d, %c64 : index
  %flag = memref.load %p[] : memref<i1>
  %pick = arith.select %flag, %c0, %c1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%last] : memref<?xf32>
    memref.store %one, %x[%pick] : memref<?xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%c0] : memref<?xf32>
    memref.store %v, %x[%c1] : memref<?xf32>
    gpu.terminator
  }
  memref.store %one, %x[%c0] : memref<?xf32>
  return
}
