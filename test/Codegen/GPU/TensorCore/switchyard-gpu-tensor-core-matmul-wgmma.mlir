// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=f16 tensor-cores=true wgmma=true}))' | FileCheck %s
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=bf16 tensor-cores=true wgmma=true}))' | FileCheck %s --check-prefix=BF16
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=f16 tensor-cores=true}))' | FileCheck %s --check-prefix=NOWG

// x·wᵀ with a dynamic token count, N = 128 and K = 128: the wgmma route.
// The factors go to f16 device buffers (A as M x K, B transposed to K x N),
// TMA descriptors with the 128-byte swizzle are made on the host (A's box
// 128 x 64, B's 64 x 64), and two warpgroups per 128 x 128 tile of y run
// K / 64 = 2 steps over a ring of two stages: thread 0 initialises a
// barrier per stage and loads the first stage before the loop; each step
// waits until every warpgroup is done with the previous one, loads the step
// a stage ahead (while there is one) into the stage it frees, waits on its
// own stage's barrier (parity: the stage's phase) and multiplies the
// warpgroup's 64 rows of A's box by B. The accumulators are added to y
// through shared memory, rows past M and columns past N skipped.
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[X:[^:]*]]: memref<?x128xf32>, %[[W:[^:]*]]: memref<128x128xf32>, %[[Y:[^:]*]]: memref<?x128xf32>)
// CHECK: %[[M:.*]] = memref.dim %[[X]], %{{.*}} : memref<?x128xf32>
// CHECK: %[[A:.*]] = gpu.alloc (%[[M]]) : memref<?x128xf16>
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel"]} ins(%[[X]] : memref<?x128xf32>) outs(%[[A]] : memref<?x128xf16>)
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: %[[BT:.*]] = gpu.alloc () : memref<128x128xf16>
// CHECK: linalg.generic {{.*}} ins(%[[W]] : memref<128x128xf32>) outs(%[[BT]] : memref<128x128xf16>)
// CHECK: %[[CA:.*]] = memref.cast %[[A]] : memref<?x128xf16> to memref<*xf16>
// CHECK: %[[DA:.*]] = nvgpu.tma.create.descriptor %[[CA]] box[%{{.*}}, %{{.*}}] : memref<*xf16> -> <tensor = memref<128x64xf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK: %[[CB:.*]] = memref.cast %[[BT]] : memref<128x128xf16> to memref<*xf16>
// CHECK: %[[DB:.*]] = nvgpu.tma.create.descriptor %[[CB]] box[%{{.*}}, %{{.*}}] : memref<*xf16> -> <tensor = memref<64x64xf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK: %[[GY:.*]] = arith.ceildivui %[[M]], %c128
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}} = %[[GY]], {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c256{{.*}}, {{.*}}, {{.*}}) dynamic_shared_memory_size %c66688_i32
// CHECK: gpu.dynamic_shared_memory
// CHECK: %[[BARS:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
// CHECK: scf.if
// CHECK-COUNT-2: nvgpu.mbarrier.init %[[BARS]]
// CHECK: nvgpu.tma.prefetch.descriptor %[[DA]]
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%{{.*}}], %c32768
// CHECK-COUNT-3: nvgpu.tma.async.load
// CHECK: nvgpu.warpgroup.mma.init.accumulator -> <fragmented = vector<64x128xf32>>
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c2{{.*}} step %c1{{.*}} iter_args
// CHECK:   gpu.barrier
// CHECK:   scf.if
// CHECK:     nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%{{.*}}], %c32768
// CHECK-COUNT-3: nvgpu.tma.async.load
// CHECK:   nvgpu.mbarrier.try_wait.parity %[[BARS]]
// CHECK:   nvgpu.warpgroup.generate.descriptor {{.*}} -> <tensor = memref<64x64xf16, #gpu.address_space<workgroup>>>
// CHECK:   nvgpu.warpgroup.generate.descriptor {{.*}} -> <tensor = memref<64x128xf16, #gpu.address_space<workgroup>>>
// CHECK:   nvgpu.warpgroup.mma {{.*}} {transposeB, waitGroup = 0 : i64}
// CHECK: gpu.barrier
// CHECK: nvgpu.warpgroup.mma.store
// CHECK: gpu.barrier
// CHECK: arith.cmpi ult, %{{.*}}, %c128
// CHECK: arith.cmpi ult, %{{.*}}, %[[M]]
// CHECK: memref.load %[[Y]]
// CHECK: arith.addf
// CHECK: memref.store {{.*}}, %[[Y]]
// CHECK: gpu.terminator
// CHECK: gpu.dealloc %[[A]]
// CHECK: gpu.dealloc %[[BT]]
// CHECK-NOT: linalg.generic {{.*}} ins(%[[X]], %[[W]]

// BF16-LABEL: func.func @linear(
// BF16: gpu.alloc ({{.*}}) : memref<?x128xbf16>
// BF16: nvgpu.tma.create.descriptor {{.*}} : memref<*xbf16>
// BF16: nvgpu.warpgroup.mma

// Without wgmma=true: mma.sync as before.
// NOWG-LABEL: func.func @linear(
// NOWG-NOT: nvgpu.tma
// NOWG-NOT: nvgpu.warpgroup
// NOWG: nvgpu.mma.sync
// NOWG-NOT: nvgpu.tma
func.func @linear(%x: memref<?x128xf32>, %w: memref<128x128xf32>, %y: memref<?x128xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (n, k)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x128xf32>, memref<128x128xf32>)
      outs(%y : memref<?x128xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// N = 48 and K = 36, neither a multiple of the tile: the wgmma route, A's
// rows padded to 40 elements (TMA needs 16-byte strides) and read through
// a view of 36 columns, one stage, columns past 48 skipped.
// CHECK-LABEL: func.func @narrow(
// CHECK: %[[PADDED:.*]] = gpu.alloc (%{{.*}}) : memref<?x40xf16>
// CHECK: %[[VIEW:.*]] = memref.subview %[[PADDED]][0, 0] [%{{.*}}, 36] [1, 1] : memref<?x40xf16> to memref<?x36xf16, strided<[40, 1]>>
// CHECK: gpu.alloc () : memref<36x48xf16>
// CHECK: memref.cast %[[VIEW]] : memref<?x36xf16, strided<[40, 1]>> to memref<*xf16>
// CHECK: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>>{{$}}
// CHECK: nvgpu.warpgroup.mma
// CHECK: arith.cmpi ult, %{{.*}}, %c48
// CHECK: gpu.dealloc %[[PADDED]]
func.func @narrow(%x: memref<?x36xf32>, %w: memref<48x36xf32>, %y: memref<?x48xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (n, k)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x36xf32>, memref<48x36xf32>)
      outs(%y : memref<?x48xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A dynamic K: mma.sync.
// CHECK-LABEL: func.func @dynamic_k(
// CHECK-NOT: nvgpu.warpgroup
// CHECK: nvgpu.ldmatrix
func.func @dynamic_k(%x: memref<?x?xf32>, %w: memref<128x?xf32>, %y: memref<?x128xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (n, k)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x?xf32>, memref<128x?xf32>)
      outs(%y : memref<?x128xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A batch dimension: mma.sync.
// CHECK-LABEL: func.func @batched(
// CHECK-NOT: nvgpu.warpgroup
// CHECK: nvgpu.ldmatrix
func.func @batched(%x: memref<4x?x64xf32>, %w: memref<4x128x64xf32>, %y: memref<4x?x128xf32>) {
  linalg.generic {indexing_maps = [affine_map<(e, m, n, k) -> (e, m, k)>,
                                   affine_map<(e, m, n, k) -> (e, n, k)>,
                                   affine_map<(e, m, n, k) -> (e, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<4x?x64xf32>, memref<4x128x64xf32>)
      outs(%y : memref<4x?x128xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}
