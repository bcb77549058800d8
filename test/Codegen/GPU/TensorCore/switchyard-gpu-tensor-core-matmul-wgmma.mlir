// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=f16 tensor-cores=true wgmma=true}))' | FileCheck %s
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=bf16 tensor-cores=true wgmma=true}))' | FileCheck %s --check-prefix=BF16
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=f16 tensor-cores=true}))' | FileCheck %s --check-prefix=NOWG

// x·wᵀ with a dynamic token count, N = 128 and K = 128: the wgmma route.
// The factors go to f16 device buffers (A as M x K, B transposed to K x N),
// TMA descriptors with the 128-byte swizzle are made on the host, and one
// warpgroup per 64 x 128 tile of y runs K / 64 = 2 steps of TMA loads,
// mbarrier wait and wgmma; the accumulators are added to y through shared
// memory, rows past M skipped.
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[X:[^:]*]]: memref<?x128xf32>, %[[W:[^:]*]]: memref<128x128xf32>, %[[Y:[^:]*]]: memref<?x128xf32>)
// CHECK: %[[M:.*]] = memref.dim %[[X]], %{{.*}} : memref<?x128xf32>
// CHECK: %[[A:.*]] = gpu.alloc (%[[M]]) : memref<?x128xf16>
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel"]} ins(%[[X]] : memref<?x128xf32>) outs(%[[A]] : memref<?x128xf16>)
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: %[[BT:.*]] = gpu.alloc () : memref<128x128xf16>
// CHECK: linalg.generic {{.*}} ins(%[[W]] : memref<128x128xf32>) outs(%[[BT]] : memref<128x128xf16>)
// CHECK: %[[CA:.*]] = memref.cast %[[A]] : memref<?x128xf16> to memref<*xf16>
// CHECK: %[[DA:.*]] = nvgpu.tma.create.descriptor %[[CA]] box[%{{.*}}, %{{.*}}] : memref<*xf16> -> <tensor = memref<64x64xf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK: %[[CB:.*]] = memref.cast %[[BT]] : memref<128x128xf16> to memref<*xf16>
// CHECK: %[[DB:.*]] = nvgpu.tma.create.descriptor %[[CB]] box[%{{.*}}, %{{.*}}] : memref<*xf16> -> <tensor = memref<64x64xf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK: %[[GY:.*]] = arith.ceildivui %[[M]], %c64
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}} = %[[GY]], {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c128{{.*}}, {{.*}}, {{.*}}) dynamic_shared_memory_size %c32768_i32
// CHECK: gpu.dynamic_shared_memory
// CHECK: nvgpu.mbarrier.create
// CHECK: nvgpu.mbarrier.init
// CHECK: nvgpu.tma.prefetch.descriptor %[[DA]]
// CHECK: gpu.barrier
// CHECK: nvgpu.warpgroup.mma.init.accumulator -> <fragmented = vector<64x128xf32>>
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c2{{.*}} step %c1{{.*}} iter_args
// CHECK: gpu.barrier
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%{{.*}}], %c24576
// CHECK-COUNT-3: nvgpu.tma.async.load
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.warpgroup.generate.descriptor {{.*}} -> <tensor = memref<64x64xf16, #gpu.address_space<workgroup>>>
// CHECK: nvgpu.warpgroup.generate.descriptor {{.*}} -> <tensor = memref<64x128xf16, #gpu.address_space<workgroup>>>
// CHECK: nvgpu.warpgroup.mma {{.*}} {transposeB, waitGroup = 0 : i64}
// CHECK: nvgpu.warpgroup.mma.store
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

// N = 48 is not a multiple of 128: mma.sync.
// CHECK-LABEL: func.func @narrow(
// CHECK-NOT: nvgpu.tma
// CHECK-NOT: nvgpu.warpgroup
// CHECK: nvgpu.ldmatrix
// CHECK-NOT: nvgpu.warpgroup
func.func @narrow(%x: memref<?x64xf32>, %w: memref<48x64xf32>, %y: memref<?x48xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (n, k)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x64xf32>, memref<48x64xf32>)
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
