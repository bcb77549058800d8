// RUN: switchyard-opt %s --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=bf16 tensor-cores=true}))' | FileCheck %s
// RUN: switchyard-opt %s --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=f16 tensor-cores=true}))' | FileCheck %s --check-prefix=F16

// moe.flash_attention_kernel: one block of 4 warps (128 threads) per 64
// query rows of one (batch, head): a grid of ceil(T / 64) x H x B. Head
// width 24 is padded to 32: the key tile [64][32 + 8] (5120 bytes) and the
// Vᵀ tile [32][64 + 8] (4608 bytes) in dynamic shared memory. The queries
// are staged once into A fragments (2 ldmatrix .x4, one per 16 of the
// width); each step of 64 keys stages K and Vᵀ between barriers, then
// S = Q·Kᵀ (2 x 8 mma), the rows' maxima over their quads (two xor
// shuffles per row), exp, and O += P·V (4 x 3 mma: three 8-column tiles
// cover the width 24). After the loop the
// rows' sums over their quads and the guarded stores of O / l and of the
// logsumexp.
// CHECK-LABEL: func.func @flash_attention(
// CHECK-SAME: %[[Q:[^:]*]]: memref<?x100x2x24xf32>, %[[K:[^:]*]]: memref<?x120x2x24xf32>, %[[V:[^:]*]]: memref<?x120x2x24xf32>, %[[O:[^:]*]]: memref<?x100x2x24xf32>, %[[L:[^:]*]]: memref<?x100x2xf32>)
// CHECK-NOT: moe.flash_attention_kernel
// CHECK: %[[B:.*]] = memref.dim %[[Q]], %c0
// CHECK: %[[GX:.*]] = arith.ceildivui %{{.*}}, %c64
// CHECK: gpu.launch blocks(%[[BX:[^,]*]], %[[BY:[^,]*]], %[[BZ:[^)]*]]) in (%{{.*}} = %[[GX]], %{{.*}} = %{{.*}}, %{{.*}} = %[[B]])
// CHECK-SAME: threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}})
// CHECK-SAME: dynamic_shared_memory_size %c9728_i32
// CHECK: memref.view {{.*}} to memref<64x40xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}}[%c5120][] {{.*}} to memref<32x72xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.load %[[Q]][%[[BZ]], %{{.*}}, %[[BY]], %{{.*}}]
// CHECK: gpu.barrier
// CHECK-COUNT-2: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x40xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c64{{.*}} iter_args(
// CHECK: gpu.barrier
// CHECK: memref.load %[[K]]
// CHECK: memref.load %[[V]]
// CHECK: gpu.barrier
// CHECK-COUNT-16: nvvm.mma.sync
// CHECK-COUNT-2: gpu.shuffle  xor
// CHECK: math.exp
// CHECK-COUNT-2: gpu.shuffle  xor
// CHECK-COUNT-12: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK: memref.store %{{.*}}, %[[O]][%[[BZ]], %{{.*}}, %[[BY]], %{{.*}}]
// CHECK: math.log
// CHECK: memref.store %{{.*}}, %[[L]][%[[BZ]], %{{.*}}, %[[BY]]]
// f16: the same kernel with f16 tiles and nvgpu.mma.sync.
// F16: memref<64x40xf16, #gpu.address_space<workgroup>>
// F16-COUNT-28: nvgpu.mma.sync
func.func @flash_attention(%q: memref<?x100x2x24xf32>, %k: memref<?x120x2x24xf32>, %v: memref<?x120x2x24xf32>, %o: memref<?x100x2x24xf32>, %l: memref<?x100x2xf32>) {
  moe.flash_attention_kernel ins(%q, %k, %v : memref<?x100x2x24xf32>, memref<?x120x2x24xf32>, memref<?x120x2x24xf32>) outs(%o, %l : memref<?x100x2x24xf32>, memref<?x100x2xf32>)
  return
}
