// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=bf16 tensor-cores=true}))' | FileCheck %s
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=f16 tensor-cores=true}))' | FileCheck %s --check-prefix=F16
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=bf16}))' | FileCheck %s --check-prefix=SIMT
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=f32 tensor-cores=true}))' | FileCheck %s --check-prefix=F32
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=bf16 tensor-cores=true split-k-blocks=0}))' | FileCheck %s --check-prefix=NOSPLIT

// x·wᵀ with a dynamic token count (moe.linear): one block of 2 x 2 warps
// (128 threads) per 64 x 64 tile of y, a grid of ceil(48 / 64) x
// ceil(M / 64) blocks, two 64 x 32 bf16 tiles with rows padded to 40
// elements in 10240 bytes of dynamic shared memory.
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[X:[^:]*]]: memref<?x64xf32>, %[[W:[^:]*]]: memref<48x64xf32>, %[[Y:[^:]*]]: memref<?x48xf32>)
// CHECK-NOT: linalg.generic
// CHECK: %[[M:.*]] = memref.dim %[[X]], %{{.*}} : memref<?x64xf32>
// CHECK: %[[GX:.*]] = arith.ceildivui %c48, %c64{{.*}} : index
// CHECK: %[[GY:.*]] = arith.ceildivui %[[M]], %c64{{.*}} : index
// Whether x's runs of four can be vector loads, on the host: its first
// element at a multiple of 16 bytes, its row stride a multiple of 4
// elements (likewise w).
// CHECK: %{{.*}}, %[[XOFF:.*]], %{{.*}}:2, %[[XSTR:.*]]:2 = memref.extract_strided_metadata %[[X]]
// CHECK: %[[XPTR:.*]] = memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: %[[XBYTES:.*]] = arith.muli %[[XOFF]], %c4
// CHECK: %[[XSTART:.*]] = arith.addi %[[XPTR]], %[[XBYTES]]
// CHECK: arith.remui %[[XSTART]], %c16
// CHECK: arith.remui %[[XSTR]]#0, %c4
// CHECK: %[[XALIGNED:.*]] = arith.andi
// CHECK: memref.extract_strided_metadata %[[W]]
// CHECK: %[[WALIGNED:.*]] = arith.andi
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[GX]], %{{.*}} = %[[GY]], %{{.*}} = %c1)
// CHECK-SAME: threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}})
// CHECK-SAME: dynamic_shared_memory_size %c10240_i32
// CHECK: %[[SMEM:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[SA:.*]] = memref.view %[[SMEM]][%c0{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64x40xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[SB:.*]] = memref.view %[[SMEM]][%c5120][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64x40xbf16, #gpu.address_space<workgroup>>
// The accumulators start from y (C += A·B), read without a branch at the
// nearest element of y and zero outside it: 4 values x 8 tiles per lane.
// CHECK: %[[IN_C:.*]] = arith.andi
// CHECK: %[[ROW_C:.*]] = arith.minui
// CHECK: %[[COL_C:.*]] = arith.minui
// CHECK-NEXT: %[[OLD:.*]] = memref.load %[[Y]][%[[ROW_C]], %[[COL_C]]]
// CHECK: arith.select %[[IN_C]], %[[OLD]], %{{.*}} : f32
// CHECK-COUNT-31: memref.load %[[Y]]
// The first K step's factors (zeros if the block's K range is empty), 16
// of x and 16 of w per thread, each loaded at the nearest element inside
// x, rounded to bf16, zero outside.
// CHECK: %[[FIRST:.*]]:32 = scf.if %{{.*}} -> (bf16, bf16,
// CHECK-NOT: vector.load
// CHECK: %[[IN_A:.*]] = arith.andi
// CHECK: %[[RA:.*]] = arith.minui
// CHECK: %[[KA:.*]] = arith.minui
// CHECK-NEXT: %[[RAW_A:.*]] = memref.load %[[X]][%[[RA]], %[[KA]]]
// CHECK-NEXT: %[[TA:.*]] = arith.truncf %[[RAW_A]] : f32 to bf16
// CHECK: arith.select %[[IN_A]], %[[TA]], %{{.*}} : bf16
// CHECK-COUNT-15: memref.load %[[X]]
// CHECK-COUNT-16: memref.load %[[W]]
// CHECK: } else {
// K steps of 32 carrying the 32 accumulators and the 32 staged factors:
// the factors go to the tiles between barriers, the next step's are
// loaded, then per 16 of K two ldmatrix.x4 (A), four ldmatrix.x2 (B) and
// eight mma.sync per warp.
// CHECK: %[[ACC:.*]]:64 = scf.for %[[K0:.*]] = %c0{{.*}} to %c64 step %c32{{.*}} iter_args(
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-16: memref.store %{{.*}}, %[[SA]]
// CHECK-COUNT-16: memref.store %{{.*}}, %[[SB]]
// CHECK-NEXT: gpu.barrier
// The next step's factors (the current ones where it is past the end):
// where the block's 64 rows and 32 of K lie inside x and x is aligned,
// four runs of four by vector loads, rounded as vectors; else element by
// element as above.
// CHECK: %[[NEXT:.*]]:32 = scf.if %{{.*}} -> (bf16, bf16,
// CHECK: %[[ROWS_IN:.*]] = arith.cmpi ult, %{{.*}}, %[[M]] : index
// CHECK: %[[K_IN:.*]] = arith.cmpi ult, %{{.*}}, %c64 : index
// CHECK: %[[BOTH_IN:.*]] = arith.andi %[[ROWS_IN]], %[[K_IN]] : i1
// CHECK: %[[INSIDE:.*]] = arith.andi %[[XALIGNED]], %[[BOTH_IN]] : i1
// CHECK: %[[FAST:.*]] = arith.andi %[[INSIDE]], %{{.*}} : i1
// CHECK: scf.if %[[FAST]] -> (bf16, bf16,
// CHECK: %[[LOADED:.*]] = vector.load %[[X]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
// CHECK-NEXT: %[[ROUNDED:.*]] = arith.truncf %[[LOADED]] : vector<4xf32> to vector<4xbf16>
// CHECK-NEXT: vector.extract %[[ROUNDED]][0] : bf16 from vector<4xbf16>
// CHECK-COUNT-3: vector.load %[[X]]
// CHECK: } else {
// CHECK-COUNT-16: memref.load %[[X]]
// CHECK: arith.andi %[[WALIGNED]]
// CHECK-COUNT-4: vector.load %[[W]]
// CHECK: } else {
// CHECK-COUNT-16: memref.load %[[W]]
// CHECK: } else {
// CHECK-NEXT: scf.yield %arg{{[0-9]+}}, %arg{{[0-9]+}},
// CHECK: %[[FA:.*]] = nvgpu.ldmatrix %[[SA]][%{{.*}}, %{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<64x40xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: nvgpu.ldmatrix %[[SA]]
// CHECK-COUNT-4: nvgpu.ldmatrix %[[SB]][%{{.*}}, %{{.*}}] {numTiles = 2 : i32, transpose = false} : memref<64x40xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// CHECK: vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-COUNT-7: nvvm.mma.sync
// CHECK-COUNT-2: nvgpu.ldmatrix %[[SA]]
// CHECK-COUNT-4: nvgpu.ldmatrix %[[SB]]
// CHECK-COUNT-8: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
// Guarded stores of the 32 accumulators.
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: memref.store %[[ACC]]#0, %[[Y]]
// CHECK-COUNT-31: memref.store %[[ACC]]#{{[0-9]+}}, %[[Y]]
// CHECK: gpu.terminator

// f16 goes through nvgpu.mma.sync (upstream lowers it).
// F16-LABEL: func.func @linear(
// F16: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x40xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// F16: nvgpu.ldmatrix %{{.*}} {numTiles = 2 : i32, transpose = false} : memref<64x40xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
// F16: nvgpu.mma.sync(%{{.*}}, %{{.*}}, %{{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// F16-NOT: nvvm.mma.sync

// Without tensor cores (sm_75) the factors are rounded in the body.
// SIMT-LABEL: func.func @linear(
// SIMT: linalg.generic
// SIMT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32):
// SIMT-NEXT: %[[TA:.*]] = arith.truncf %[[A]] : f32 to bf16
// SIMT-NEXT: %[[EA:.*]] = arith.extf %[[TA]] : bf16 to f32
// SIMT-NEXT: %[[TB:.*]] = arith.truncf %[[B]] : f32 to bf16
// SIMT-NEXT: %[[EB:.*]] = arith.extf %[[TB]] : bf16 to f32
// SIMT-NEXT: %[[P:.*]] = arith.mulf %[[EA]], %[[EB]] : f32
// SIMT-NEXT: %[[S:.*]] = arith.addf %[[C]], %[[P]] : f32
// SIMT-NEXT: linalg.yield %[[S]] : f32
// SIMT-NOT: gpu.launch

// f32 changes nothing.
// F32-LABEL: func.func @linear(
// F32: linalg.generic
// F32-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32):
// F32-NEXT: arith.mulf %[[A]], %[[B]] : f32
// F32-NOT: gpu.launch
func.func @linear(%x: memref<?x64xf32>, %w: memref<48x64xf32>, %y: memref<?x48xf32>) {
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

// A plain A·B (B is K x N) with bf16 operands read through arith.extf, the
// product first in the addition, and a batch dimension mapped to blocks z.
// The B tile is still staged N-major (B is read at (k, n)), consecutive
// threads on consecutive n, B's contiguous dimension.
// CHECK-LABEL: func.func @batched(
// CHECK-SAME: %[[A:[^:]*]]: memref<?x?x40xbf16>, %[[B:[^:]*]]: memref<?x40x24xbf16>, %[[C:[^:]*]]: memref<?x?x24xf32>)
// CHECK-DAG: %[[BATCH:.*]] = memref.dim %[[A]], %c0
// CHECK-DAG: %[[M:.*]] = memref.dim %[[A]], %c1
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %[[BZ:.*]]) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %[[BATCH]])
// CHECK: scf.if %{{.*}} -> (bf16,
// CHECK: %[[RAW:.*]] = memref.load %[[A]][%[[BZ]], %{{.*}}, %{{.*}}] : memref<?x?x40xbf16>
// CHECK-NEXT: %[[E:.*]] = arith.extf %[[RAW]] : bf16 to f32
// CHECK-NEXT: arith.truncf %[[E]] : f32 to bf16
// CHECK: memref.load %[[B]][%[[BZ]], %[[KB:.*]], %[[NB:.*]]] : memref<?x40x24xbf16>
// Inside the loop, B's runs of four go along N, its last dimension: a
// vector load there, the body's extf replayed on the vector (no k0 % 4
// term: the runs start at the block's first column plus a multiple of 4).
// CHECK: scf.for %[[K0:.*]] = %c0{{.*}} to %c40 step %c32
// CHECK: %[[BLOADED:.*]] = vector.load %[[B]][%[[BZ]], %{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<?x40x24xbf16>, vector<4xbf16>
// CHECK-NEXT: %[[BF32:.*]] = arith.extf %[[BLOADED]] : vector<4xbf16> to vector<4xf32>
// CHECK-NEXT: arith.truncf %[[BF32]] : vector<4xf32> to vector<4xbf16>
// CHECK: nvvm.mma.sync
// CHECK: memref.store %{{.*}}, %[[C]][%[[BZ]], %{{.*}}, %{{.*}}] : memref<?x?x24xf32>
func.func @batched(%a: memref<?x?x40xbf16>, %b: memref<?x40x24xbf16>, %c: memref<?x?x24xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                                   affine_map<(b, m, n, k) -> (b, k, n)>,
                                   affine_map<(b, m, n, k) -> (b, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x?x40xbf16>, memref<?x40x24xbf16>)
      outs(%c : memref<?x?x24xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Two N dimensions (a gate's per-head scores): not a tensor-core shape, so
// it stays a linalg op, its factors rounded like the tensor cores would.
// CHECK-LABEL: func.func @two_n_dims(
// CHECK-NOT: gpu.launch
// CHECK: linalg.generic
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: arith.mulf
func.func @two_n_dims(%x: memref<?x16xf32>, %w: memref<2x3x16xf32>, %y: memref<?x2x3xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, h, e, k) -> (m, k)>,
                                   affine_map<(m, h, e, k) -> (h, e, k)>,
                                   affine_map<(m, h, e, k) -> (m, h, e)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x16xf32>, memref<2x3x16xf32>)
      outs(%y : memref<?x2x3xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not a plain contraction (a scaled product, an elementwise product): left
// alone, not rounded.
// CHECK-LABEL: func.func @not_matmul(
// CHECK-NOT: gpu.launch
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @not_matmul(%x: memref<?x16xf32>, %w: memref<8x16xf32>, %y: memref<?x8xf32>, %z: memref<?x16xf32>) {
  %scale = arith.constant 0.5 : f32
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (n, k)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x16xf32>, memref<8x16xf32>)
      outs(%y : memref<?x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %q = arith.mulf %p, %scale : f32
    %s = arith.addf %c, %q : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, k) -> (m, k)>,
                                   affine_map<(m, k) -> (m, k)>,
                                   affine_map<(m, k) -> (m, k)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %x : memref<?x16xf32>, memref<?x16xf32>)
      outs(%z : memref<?x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The grouped expert kernels: moe.grouped_matmul as one launch over the
// padded rows, each 64-row block reading its tile's expert (tile_size 64, a
// multiple of the block's rows) and running no K step in a padding tile
// (expert >= 3); moe.grouped_weight_grad with one batch per expert and K
// over its segment, split: its 3 tiles are far below split-k-blocks, so
// each segment is cut into clamp(rows / 3 / 256, 1, ceil(512 / 3)) parts,
// the grid's z runs over experts x parts, and the last block of each tile
// to count its part (a zero-filled counter per tile) adds the parts to dw
// in part order. A tile_size that is not a multiple of 64 stays for
// switchyard-lower-grouped-kernels.
// CHECK-LABEL: func.func @grouped(
// CHECK-SAME: %[[ROWS:[^:]*]]: memref<?x32xf32>, %[[W:[^:]*]]: memref<3x32x16xbf16>, %[[TE:[^:]*]]: memref<?xindex>, %[[OUT:[^:]*]]: memref<?x16xf32>, %[[SEG:[^:]*]]: memref<4xindex>, %[[DW:[^:]*]]: memref<3x32x16xf32>, %[[DY:[^:]*]]: memref<?x16xf32>)
// CHECK: gpu.launch blocks(%[[BX:[^,]*]], %[[BY:[^,]*]], %[[BZ:[^)]*]]) in
// CHECK: %[[M0:.*]] = arith.muli %[[BY]], %c64
// CHECK: %[[TILE:.*]] = arith.divui %[[M0]], %c64
// CHECK: %[[E:.*]] = memref.load %[[TE]][%[[TILE]]]
// CHECK: %[[ACTIVE:.*]] = arith.cmpi ult, %[[E]], %{{.*}}
// CHECK: %[[KEND:.*]] = arith.select %[[ACTIVE]], %{{.*}}, %[[K0:.*]] : index
// CHECK: memref.load %[[W]][%[[E]], %{{.*}}, %{{.*}}] : memref<3x32x16xbf16>
// CHECK: scf.for %{{.*}} = %[[K0]] to %[[KEND]] step %c32
// CHECK: nvvm.mma.sync
// CHECK: %[[ROWS_N:.*]] = memref.dim %[[ROWS]], %c0
// CHECK: %[[PER_E:.*]] = arith.divui %[[ROWS_N]], %c3
// CHECK: %[[P0:.*]] = arith.divui %[[PER_E]], %c256
// CHECK: %[[P1:.*]] = arith.minui %[[P0]], %c171
// CHECK: %[[PARTS:.*]] = arith.maxui %[[P1]], %c1
// CHECK: %[[PARTIAL:.*]] = gpu.alloc  (%[[PARTS]], %{{.*}}, %{{.*}}, %{{.*}}) : memref<?x?x?x?xf32>
// CHECK: %[[COUNTERS:.*]] = gpu.alloc  (%{{.*}}, %{{.*}}, %{{.*}}) : memref<?x?x?xi32>
// CHECK: linalg.fill ins(%{{.*}} : i32) outs(%[[COUNTERS]] : memref<?x?x?xi32>)
// CHECK: %[[GZ:.*]] = arith.muli %{{.*}}, %[[PARTS]]
// CHECK: gpu.launch blocks(%[[BX2:[^,]*]], %[[BY2:[^,]*]], %[[BZ2:[^)]*]]) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %[[GZ]])
// CHECK: %[[PART:.*]] = arith.remui %[[BZ2]], %[[PARTS]]
// CHECK: %[[E2:.*]] = arith.divui %[[BZ2]], %[[PARTS]]
// CHECK: %[[LO:.*]] = memref.load %[[SEG]][%[[E2]]]
// CHECK: %[[HI:.*]] = memref.load %[[SEG]][%{{.*}}]
// The part's K steps: [lo + part * chunk, + chunk) within [lo, hi), the
// chunk a multiple of 32.
// CHECK: %[[LEN:.*]] = arith.subi %[[HI]], %[[LO]]
// CHECK: %[[C0:.*]] = arith.ceildivui %[[LEN]], %[[PARTS]]
// CHECK: %[[C1:.*]] = arith.ceildivui %[[C0]], %c32
// CHECK: %[[CHUNK:.*]] = arith.muli %[[C1]], %c32
// CHECK: %[[OFF:.*]] = arith.muli %[[PART]], %[[CHUNK]]
// CHECK: %[[B0:.*]] = arith.addi %[[LO]], %[[OFF]]
// CHECK: %[[BEGIN:.*]] = arith.minui %[[B0]], %[[HI]]
// CHECK: %[[E0:.*]] = arith.addi %[[BEGIN]], %[[CHUNK]]
// CHECK: %[[END:.*]] = arith.minui %[[E0]], %[[HI]]
// CHECK: scf.for %{{.*}} = %[[BEGIN]] to %[[END]] step %c32{{.*}} iter_args(%{{.*}} = %cst{{.*}}, 
// CHECK: nvvm.mma.sync
// CHECK: memref.store %{{.*}}, %[[PARTIAL]][%[[PART]], %[[E2]], %{{.*}}, %{{.*}}] : memref<?x?x?x?xf32>
// CHECK-NOT: memref.store %{{.*}}, %[[DW]]
// After a barrier, thread 0 fences the block's stores, counts the part,
// fences again and tells the block whether it was the last; the last block
// fences and adds the parts in order to dw, element by element of the
// tile.
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0
// CHECK: %[[LASTPART:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK: gpu.barrier
// CHECK: scf.if %[[FIRST]] {
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: %[[COUNTED:.*]] = memref.atomic_rmw addi %{{.*}}, %[[COUNTERS]][%[[E2]], %[[BY2]], %[[BX2]]] : (i32, memref<?x?x?xi32>) -> i32
// CHECK-NEXT: nvvm.memory.barrier <gpu>
// CHECK: %[[ISLAST:.*]] = arith.cmpi eq, %[[COUNTED]], %[[LASTPART]] : i32
// CHECK: %[[FLAG:.*]] = arith.extui %[[ISLAST]] : i1 to i32
// CHECK: memref.store %[[FLAG]], %[[FLAGS:.*]][%c0{{.*}}] : memref<1xi32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: %[[READ:.*]] = memref.load %[[FLAGS]]
// CHECK: %[[LAST:.*]] = arith.cmpi ne, %[[READ]], %{{.*}} : i32
// CHECK: scf.if %[[LAST]] {
// CHECK: nvvm.memory.barrier <gpu>
// The tile's 64 x 64 elements, 128 threads at a time, consecutive threads
// on consecutive columns.
// CHECK: scf.for %[[EL:.*]] = %[[TID:.*]] to %c4096 step %c128
// CHECK: arith.divui %[[EL]], %c64
// CHECK: arith.remui %[[EL]], %c64
// CHECK: scf.if
// CHECK: %[[OLD_DW:.*]] = memref.load %[[DW]][%[[E2]], %[[PA:.*]], %[[PC:.*]]]
// CHECK: %[[SUM:.*]] = scf.for %[[P:.*]] = %{{.*}} to %[[PARTS]] step %{{.*}} iter_args(%[[ACC:.*]] = %[[OLD_DW]]) -> (f32) {
// CHECK: %[[X:.*]] = memref.load %[[PARTIAL]][%[[P]], %[[E2]], %[[PA]], %[[PC]]]
// CHECK: arith.addf %[[ACC]], %[[X]]
// CHECK: memref.store %[[SUM]], %[[DW]][%[[E2]], %[[PA]], %[[PC]]]
// CHECK: gpu.terminator
// CHECK: gpu.dealloc %[[PARTIAL]]
// CHECK: gpu.dealloc %[[COUNTERS]]
// CHECK: moe.grouped_matmul {{.*}} tile_size(16)
func.func @grouped(%rows: memref<?x32xf32>, %w: memref<3x32x16xbf16>, %te: memref<?xindex>, %out: memref<?x16xf32>, %seg: memref<4xindex>, %dw: memref<3x32x16xf32>, %dy: memref<?x16xf32>) {
  moe.grouped_matmul ins(%rows, %w, %te : memref<?x32xf32>, memref<3x32x16xbf16>, memref<?xindex>) outs(%out : memref<?x16xf32>) tile_size(64)
  moe.grouped_weight_grad ins(%rows, %dy, %seg : memref<?x32xf32>, memref<?x16xf32>, memref<4xindex>) outs(%dw : memref<3x32x16xf32>)
  moe.grouped_matmul ins(%rows, %w, %te : memref<?x32xf32>, memref<3x32x16xbf16>, memref<?xindex>) outs(%out : memref<?x16xf32>) tile_size(16)
  return
}

// -----

// Gathered grouped operands: the grid runs over the padded positions
// (order's length), and the staging reads each position's route from
// order, the route's row of x (6 routes per row; route 0's row at a
// padding position, whose factor is zero) and its gate, multiplied in f32
// before the rounding: element by element, and by runs of 4 along the row.
// The weight gradient's parts come from the padded positions as well.
// CHECK-LABEL: func.func @gathered(
// CHECK-SAME: %[[X:[^:]*]]: memref<?x32xf32>, %{{[^:]*}}: memref<3x32x16xbf16>, %{{[^:]*}}: memref<?xindex>, %[[ORDER:[^:]*]]: memref<?xindex>, %[[G:[^:]*]]: memref<?xf32>
// CHECK: %[[P:.*]] = memref.dim %[[ORDER]], %c0
// CHECK: %[[GRIDY:.*]] = arith.ceildivui %[[P]], %c64
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %[[GRIDY]],
// CHECK: %[[TOKENS:.*]] = memref.dim %[[X]], %c0
// CHECK: %[[ROUTES:.*]] = arith.muli %[[TOKENS]], %c6
// CHECK: %[[R:.*]] = memref.load %[[ORDER]][%{{.*}}] : memref<?xindex>
// CHECK: %[[VALID:.*]] = arith.cmpi ult, %[[R]], %[[ROUTES]]
// CHECK: %[[SAFE:.*]] = arith.select %[[VALID]], %[[R]], %c0
// CHECK: %[[ROW:.*]] = arith.divui %[[SAFE]], %c6
// CHECK: %[[V:.*]] = memref.load %[[X]][%[[ROW]], %{{.*}}] : memref<?x32xf32>
// CHECK: %[[GATE:.*]] = memref.load %[[G]][%{{.*}}] : memref<?xf32>
// CHECK: %[[GATED:.*]] = arith.mulf %[[V]], %[[GATE]] : f32
// CHECK: %[[F:.*]] = arith.select %{{.*}}, %[[GATED]], %{{.*}} : f32
// CHECK: arith.truncf %[[F]] : f32 to bf16
// CHECK: %[[FOUR:.*]] = vector.load %[[X]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x32xf32>, vector<4xf32>
// CHECK: %[[RGATE:.*]] = memref.load %[[G]][%{{.*}}] : memref<?xf32>
// CHECK: %[[RGATES:.*]] = vector.broadcast %[[RGATE]] : f32 to vector<4xf32>
// CHECK: arith.mulf %[[FOUR]], %[[RGATES]] : vector<4xf32>
// CHECK: nvvm.mma.sync
// CHECK: %[[P2:.*]] = memref.dim %[[ORDER]], %c0
// CHECK: arith.divui %[[P2]], %c3
// CHECK: gpu.launch
// CHECK: memref.load %[[ORDER]]
// CHECK: arith.divui %{{.*}}, %c6
// CHECK: memref.load %[[ORDER]]
// CHECK: arith.divui %{{.*}}, %c3
// CHECK: nvvm.mma.sync
func.func @gathered(%x: memref<?x32xf32>, %w: memref<3x32x16xbf16>, %te: memref<?xindex>, %order: memref<?xindex>, %g: memref<?xf32>, %out: memref<?x16xf32>, %seg: memref<4xindex>, %dw: memref<3x32x16xf32>, %dh: memref<?x16xf32>) {
  moe.grouped_matmul ins(%x, %w, %te : memref<?x32xf32>, memref<3x32x16xbf16>, memref<?xindex>) gather(%order : memref<?xindex>) routes_per_row(6) gates(%g : memref<?xf32>) outs(%out : memref<?x16xf32>) tile_size(64)
  moe.grouped_weight_grad ins(%x, %dh, %seg : memref<?x32xf32>, memref<?x16xf32>, memref<4xindex>) gather(%order : memref<?xindex>) routes_per_row([6, 3]) rhs_gates(%g : memref<?xf32>) outs(%dw : memref<3x32x16xf32>)
  return
}


// -----

// Split-K of a weight gradient: one tile of dw (40 x 33), K the dynamic
// token count: clamp(K / 256, 1, 512) parts (the parts' arithmetic is as
// in @grouped). With split-k-blocks=0 it is one kernel over the whole K.
// CHECK-LABEL: func.func @weight_grad(
// CHECK-SAME: %[[X:[^:]*]]: memref<?x40xf32>, %{{.*}}: memref<?x33xf32>, %[[DW:[^:]*]]: memref<40x33xf32>)
// CHECK: %[[K:.*]] = memref.dim %[[X]], %c0
// CHECK: %[[P0:.*]] = arith.divui %[[K]], %c256
// CHECK: %[[P1:.*]] = arith.minui %[[P0]], %c512
// CHECK: %[[PARTS:.*]] = arith.maxui %[[P1]], %c1
// CHECK: %[[PARTIAL:.*]] = gpu.alloc  (%[[PARTS]], %c1, %c40, %c33) : memref<?x?x?x?xf32>
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[PARTIAL]]
// CHECK: memref.atomic_rmw addi
// CHECK: memref.store %{{.*}}, %[[DW]]
// CHECK: gpu.terminator
// CHECK-NOT: scf.parallel
// CHECK: gpu.dealloc %[[PARTIAL]]
// NOSPLIT-LABEL: func.func @weight_grad(
// NOSPLIT-NOT: gpu.alloc
// NOSPLIT: gpu.launch blocks({{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %c1)
// NOSPLIT-NOT: scf.parallel
// NOSPLIT: return
func.func @weight_grad(%x: memref<?x40xf32>, %dy: memref<?x33xf32>, %dw: memref<40x33xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, o, t) -> (t, i)>,
                                   affine_map<(i, o, t) -> (t, o)>,
                                   affine_map<(i, o, t) -> (i, o)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<?x40xf32>, memref<?x33xf32>) outs(%dw : memref<40x33xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}
