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
// Whether K's and V's runs of four can be vector loads in the key loop:
// their first element at a multiple of 16 bytes, their three outer strides
// multiples of 4 (Q is staged once, element by element).
// CHECK-NOT: memref.extract_strided_metadata %[[Q]]
// CHECK: memref.extract_strided_metadata %[[K]]
// CHECK-COUNT-2: arith.andi
// CHECK: %[[KALIGNED:.*]] = arith.andi
// CHECK: memref.extract_strided_metadata %[[V]]
// CHECK-COUNT-2: arith.andi
// CHECK: %[[VALIGNED:.*]] = arith.andi
// CHECK: %[[GX:.*]] = arith.ceildivui %{{.*}}, %c64
// CHECK: gpu.launch blocks(%[[BX:[^,]*]], %[[BY:[^,]*]], %[[BZ:[^)]*]]) in (%{{.*}} = %[[GX]], %{{.*}} = %{{.*}}, %{{.*}} = %[[B]])
// CHECK-SAME: threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}})
// CHECK-SAME: dynamic_shared_memory_size %c9728_i32
// CHECK: memref.view {{.*}} to memref<64x40xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}}[%c5120][] {{.*}} to memref<32x72xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: vector.load %[[Q]]
// CHECK: memref.load %[[Q]][%[[BZ]], %{{.*}}, %[[BY]], %{{.*}}]
// CHECK: gpu.barrier
// CHECK-COUNT-2: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x40xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c64{{.*}} iter_args(
// CHECK: gpu.barrier
// CHECK: scf.if %[[KALIGNED]] {
// CHECK: vector.load %[[K]][%[[BZ]], %{{.*}}, %[[BY]], %{{.*}}] {alignment = 16 : i64}
// CHECK: } else {
// CHECK: memref.load %[[K]]
// CHECK: scf.if %[[VALIGNED]] {
// CHECK: vector.load %[[V]][%[[BZ]], %{{.*}}, %[[BY]], %{{.*}}] {alignment = 16 : i64}
// CHECK: } else {
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

// moe.flash_attention_grad_kernel: two kernels. dK and dV: a block of 4 warps
// per 64 keys (ceil(S / 64) x H x B), two [64][32 + 8] tiles (5120 bytes
// each) and the step's logsumexp and Δ ([2][64] f32, 512 bytes); the
// block's K and V staged once into A fragments (2 + 2 ldmatrix .x4); steps
// of 64 queries from max(u0 - (S - T), 0) staging Q, dO and the statistics
// between barriers, then Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (2 x 8 mma each, B by
// plain ldmatrix), dV += Pᵀ·dO and dK += dSᵀ·Q (4 x 3 mma each, B by
// ldmatrix .trans from the dO and Q tiles). dQ: a block per 64 queries,
// the K and V tiles; Q and dO staged once into A fragments; steps of 64
// keys: S = Q·Kᵀ and dP = dO·Vᵀ (16 mma each), dQ += dS·K (12, K by
// ldmatrix .trans). Guarded stores of dK, dV and dQ.
// CHECK-LABEL: func.func @flash_attention_grad(
// CHECK-SAME: %[[Q:[^:]*]]: memref<?x100x2x24xf32>, %[[K:[^:]*]]: memref<?x120x2x24xf32>, %[[V:[^:]*]]: memref<?x120x2x24xf32>, %[[L:[^:]*]]: memref<?x100x2xf32>, %[[D:[^:]*]]: memref<?x100x2xf32>, %[[DO:[^:]*]]: memref<?x100x2x24xf32>, %[[DQ:[^:]*]]: memref<?x100x2x24xf32>, %[[DK:[^:]*]]: memref<?x120x2x24xf32>, %[[DV:[^:]*]]: memref<?x120x2x24xf32>)
// CHECK-NOT: moe.flash_attention_grad_kernel
// CHECK: %[[B:.*]] = memref.dim %[[Q]], %c0
// CHECK: %[[T:.*]] = memref.dim %[[Q]], %c1
// CHECK: %[[S:.*]] = memref.dim %[[K]], %c1
// CHECK: %[[KX:.*]] = arith.ceildivui %[[S]], %c64
// CHECK: gpu.launch blocks(%[[BX:[^,]*]], %[[BY:[^,]*]], %[[BZ:[^)]*]]) in (%{{.*}} = %[[KX]], %{{.*}} = %{{.*}}, %{{.*}} = %[[B]])
// CHECK-SAME: threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}})
// CHECK-SAME: dynamic_shared_memory_size %c10752_i32
// CHECK: %[[TQ:.*]] = memref.view {{.*}} to memref<64x40xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[TDO:.*]] = memref.view {{.*}}[%c5120][] {{.*}} to memref<64x40xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[TS:.*]] = memref.view {{.*}}[%c10240][] {{.*}} to memref<2x64xf32, #gpu.address_space<workgroup>>
// CHECK: memref.load %[[K]][%[[BZ]], %{{.*}}, %[[BY]], %{{.*}}]
// CHECK: memref.load %[[V]][%[[BZ]], %{{.*}}, %[[BY]], %{{.*}}]
// CHECK: gpu.barrier
// CHECK-COUNT-4: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: %[[START:.*]] = arith.maxsi
// CHECK: scf.for %{{.*}} = %[[START]] to %[[T]] step %c64{{.*}} iter_args(
// CHECK: gpu.barrier
// CHECK: memref.load %[[Q]]
// CHECK: memref.load %[[DO]]
// CHECK: memref.load %[[L]]
// CHECK: memref.load %[[D]]
// CHECK: memref.store %{{.*}}, %[[TS]]
// CHECK: gpu.barrier
// CHECK-COUNT-32: nvvm.mma.sync
// CHECK: math.exp
// CHECK-COUNT-12: nvgpu.ldmatrix %[[TDO]]{{.*}} {numTiles = 2 : i32, transpose = true}
// CHECK-COUNT-12: nvgpu.ldmatrix %[[TQ]]{{.*}} {numTiles = 2 : i32, transpose = true}
// CHECK: scf.yield
// CHECK: memref.store %{{.*}}, %[[DK]][%[[BZ]], %{{.*}}, %[[BY]], %{{.*}}]
// CHECK: memref.store %{{.*}}, %[[DV]][%[[BZ]], %{{.*}}, %[[BY]], %{{.*}}]
// CHECK: gpu.terminator
// CHECK: %[[QX:.*]] = arith.ceildivui %[[T]], %c64
// CHECK: gpu.launch blocks(%[[BX2:[^,]*]], %[[BY2:[^,]*]], %[[BZ2:[^)]*]]) in (%{{.*}} = %[[QX]], %{{.*}} = %{{.*}}, %{{.*}} = %[[B]])
// CHECK-SAME: dynamic_shared_memory_size %c10240_i32
// CHECK: %[[TK:.*]] = memref.view {{.*}} to memref<64x40xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.load %[[Q]]
// CHECK: memref.load %[[DO]]
// CHECK: gpu.barrier
// CHECK-COUNT-4: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: memref.load %[[L]]
// CHECK: memref.load %[[D]]
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c64{{.*}} iter_args(
// CHECK: gpu.barrier
// CHECK: memref.load %[[K]]
// CHECK: memref.load %[[V]]
// CHECK: gpu.barrier
// CHECK-COUNT-32: nvvm.mma.sync
// CHECK-COUNT-12: nvgpu.ldmatrix %[[TK]]{{.*}} {numTiles = 2 : i32, transpose = true}
// CHECK: scf.yield
// CHECK: memref.store %{{.*}}, %[[DQ]][%[[BZ2]], %{{.*}}, %[[BY2]], %{{.*}}]
// F16-LABEL: func.func @flash_attention_grad(
// F16-COUNT-100: nvgpu.mma.sync
// F16-NOT: nvgpu.mma.sync
func.func @flash_attention_grad(%q: memref<?x100x2x24xf32>, %k: memref<?x120x2x24xf32>, %v: memref<?x120x2x24xf32>, %l: memref<?x100x2xf32>, %d: memref<?x100x2xf32>, %do: memref<?x100x2x24xf32>, %dq: memref<?x100x2x24xf32>, %dk: memref<?x120x2x24xf32>, %dv: memref<?x120x2x24xf32>) {
  moe.flash_attention_grad_kernel ins(%q, %k, %v, %l, %d, %do : memref<?x100x2x24xf32>, memref<?x120x2x24xf32>, memref<?x120x2x24xf32>, memref<?x100x2xf32>, memref<?x100x2xf32>, memref<?x100x2x24xf32>) outs(%dq, %dk, %dv : memref<?x100x2x24xf32>, memref<?x120x2x24xf32>, memref<?x120x2x24xf32>)
  return
}

// With relative keys: a step's 127 distances staged as a [128][32 + 8]
// tile (10240 bytes) after the key and Vᵀ tiles, the f32 skew scratch
// [64][16 + 64 + 16 + 4] (25600 bytes: margins for the keys -16 .. -1 and
// 64 .. 79) after it. Each step: the loads of K, V and rel, S = Q·Kᵀ
// (16 mma) and the warp's 16 rows by its 80 distances (2 x 10 mma), stored
// skewed (40 stores, none guarded), a barrier, each score's relative part
// read back (32 loads), then the online softmax and O += P·V (12 mma) as
// without.
// CHECK-LABEL: func.func @flash_attention_rel(
// CHECK-SAME: %[[R:[^:]*]]: memref<120x2x24xf32>
// CHECK: dynamic_shared_memory_size %c45568_i32
// CHECK: memref.view {{.*}}[%c9728][] {{.*}} to memref<128x40xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[SKEW:.*]] = memref.view {{.*}}[%c19968][] {{.*}} to memref<64x100xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: memref.load %[[R]][%{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: gpu.barrier
// CHECK-COUNT-16: nvvm.mma.sync
// CHECK-COUNT-40: memref.store %{{.*}}, %[[SKEW]]
// CHECK: gpu.barrier
// CHECK-COUNT-32: memref.load %[[SKEW]]
// CHECK: math.exp
// CHECK-COUNT-12: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
// F16-LABEL: func.func @flash_attention_rel(
// F16-COUNT-48: nvgpu.mma.sync
// F16-NOT: nvgpu.mma.sync
func.func @flash_attention_rel(%q: memref<?x100x2x24xf32>, %k: memref<?x120x2x24xf32>, %v: memref<?x120x2x24xf32>, %r: memref<120x2x24xf32>, %o: memref<?x100x2x24xf32>, %l: memref<?x100x2xf32>) {
  moe.flash_attention_kernel ins(%q, %k, %v : memref<?x100x2x24xf32>, memref<?x120x2x24xf32>, memref<?x120x2x24xf32>) rel(%r : memref<120x2x24xf32>) outs(%o, %l : memref<?x100x2x24xf32>, memref<?x100x2xf32>)
  return
}

// The backward kernels with relative keys. dK, dV (and drel): the rel tile
// and the scratch after the statistics; each step recomputes the skewed
// scores (16 + 16 + 20 mma, the relative part from the step's queries as A
// fragments), reads them back transposed (32 loads), dV and dK (24 mma),
// stores dSᵀ into the scratch (32 stores, and 16 zeros per lane for the
// margins), and after a barrier each warp takes its 16 queries by their 80
// distances: 5 x (3 mma of dSᵀ unskewed by Q, then 12 guarded f32 atomic
// adds into rel_grad_init). dQ: the skewed
// scores likewise, dQ += dS·K (12 mma), dS through the scratch (32 stores,
// and 16 zeros per lane for the margins) and dQ += dS·rel over the warp's
// 80 distances (5 x 3 mma).
// CHECK-LABEL: func.func @flash_attention_grad_rel(
// CHECK-SAME: %[[R:[^:]*]]: memref<120x2x24xf32>, %{{[^:]*}}: memref<?x100x2x24xf32>, %{{[^:]*}}: memref<?x120x2x24xf32>, %{{[^:]*}}: memref<?x120x2x24xf32>, %[[DR:[^:]*]]: memref<120x2x24xf32>)
// CHECK: dynamic_shared_memory_size %c46592_i32
// CHECK: memref.view {{.*}}[%c10752][] {{.*}} to memref<128x40xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[SKEW:.*]] = memref.view {{.*}}[%c20992][] {{.*}} to memref<64x100xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for
// CHECK: memref.load %[[R]]
// CHECK: gpu.barrier
// CHECK-COUNT-52: nvvm.mma.sync
// CHECK: gpu.barrier
// CHECK-COUNT-32: memref.load %[[SKEW]]
// CHECK: math.exp
// CHECK-COUNT-24: nvvm.mma.sync
// CHECK-COUNT-48: memref.store %{{.*}}, %[[SKEW]]
// CHECK: gpu.barrier
// CHECK-COUNT-3: nvvm.mma.sync
// CHECK-COUNT-12: memref.atomic_rmw addf %{{.*}}, %[[DR]][
// CHECK-COUNT-3: nvvm.mma.sync
// CHECK-COUNT-12: memref.atomic_rmw addf %{{.*}}, %[[DR]][
// CHECK-COUNT-3: nvvm.mma.sync
// CHECK-COUNT-12: memref.atomic_rmw addf %{{.*}}, %[[DR]][
// CHECK-COUNT-3: nvvm.mma.sync
// CHECK-COUNT-12: memref.atomic_rmw addf %{{.*}}, %[[DR]][
// CHECK-COUNT-3: nvvm.mma.sync
// CHECK-COUNT-12: memref.atomic_rmw addf %{{.*}}, %[[DR]][
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
// CHECK: dynamic_shared_memory_size %c46080_i32
// CHECK: %[[SKEWQ:.*]] = memref.view {{.*}}[%c20480][] {{.*}} to memref<64x100xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for
// CHECK-COUNT-52: nvvm.mma.sync
// CHECK: gpu.barrier
// CHECK: math.exp
// CHECK-COUNT-12: nvvm.mma.sync
// CHECK-COUNT-48: memref.store %{{.*}}, %[[SKEWQ]]
// CHECK: gpu.barrier
// CHECK-COUNT-15: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
// F16-LABEL: func.func @flash_attention_grad_rel(
// F16-COUNT-170: nvgpu.mma.sync
// F16-NOT: nvgpu.mma.sync
func.func @flash_attention_grad_rel(%q: memref<?x100x2x24xf32>, %k: memref<?x120x2x24xf32>, %v: memref<?x120x2x24xf32>, %l: memref<?x100x2xf32>, %d: memref<?x100x2xf32>, %do: memref<?x100x2x24xf32>, %r: memref<120x2x24xf32>, %dq: memref<?x100x2x24xf32>, %dk: memref<?x120x2x24xf32>, %dv: memref<?x120x2x24xf32>, %dr: memref<120x2x24xf32>) {
  moe.flash_attention_grad_kernel ins(%q, %k, %v, %l, %d, %do : memref<?x100x2x24xf32>, memref<?x120x2x24xf32>, memref<?x120x2x24xf32>, memref<?x100x2xf32>, memref<?x100x2xf32>, memref<?x100x2x24xf32>) rel(%r : memref<120x2x24xf32>) outs(%dq, %dk, %dv : memref<?x100x2x24xf32>, memref<?x120x2x24xf32>, memref<?x120x2x24xf32>) rel_grad(%dr : memref<120x2x24xf32>)
  return
}
