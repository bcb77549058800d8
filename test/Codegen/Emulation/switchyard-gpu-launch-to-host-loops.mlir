// RUN: switchyard-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(switchyard-gpu-launch-to-host-loops))" --verify-diagnostics | FileCheck %s

// A kernel with a 2-D grid: six loops (z, y, x blocks, then z, y, x
// threads) around its body, whose ids and sizes become the loops' induction
// variables and bounds; gpu.block_dim inside the body reads the block size.
// Device allocations, copies and frees become host ones.
// CHECK-LABEL: func.func @grid
// CHECK-SAME: (%[[N:.*]]: index, %[[SRC:.*]]: memref<?xf32>)
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[BUF:.*]] = memref.alloc(%[[N]]) {alignment = 64 : i64} : memref<?xf32>
// CHECK: memref.copy %[[SRC]], %[[BUF]]
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: scf.for %[[BZ:.*]] = %[[C0]] to %[[C1]] step
// CHECK:   scf.for %[[BY:.*]] = %[[C0]] to %[[C2]] step
// CHECK:     scf.for %[[BX:.*]] = %[[C0]] to %[[N]] step
// CHECK:       scf.for %[[TZ:.*]] = %[[C0]] to %[[C1]] step
// CHECK:         scf.for %[[TY:.*]] = %[[C0]] to %[[C1]] step
// CHECK:           scf.for %[[TX:.*]] = %[[C0]] to %[[C4]] step
// CHECK:             %[[ROW:.*]] = arith.muli %[[BY]], %[[N]]
// CHECK:             %[[I:.*]] = arith.addi %[[ROW]], %[[BX]]
// CHECK:             %[[J:.*]] = arith.muli %[[I]], %[[C4]]
// CHECK:             %[[K:.*]] = arith.addi %[[J]], %[[TX]]
// CHECK:             memref.store %{{.*}}, %[[BUF]][%[[K]]]
// CHECK-NOT: gpu.
// CHECK: memref.dealloc %[[BUF]]
func.func @grid(%n: index, %src: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %cst = arith.constant 1.0 : f32
  %buf = gpu.alloc (%n) : memref<?xf32>
  gpu.memcpy %buf, %src : memref<?xf32>, memref<?xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c2, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %row = arith.muli %by, %gx : index
    %i = arith.addi %row, %bx : index
    %width = gpu.block_dim x
    %j = arith.muli %i, %width : index
    %k = arith.addi %j, %tx : index
    memref.store %cst, %buf[%k] : memref<?xf32>
    gpu.terminator
  }
  gpu.dealloc %buf : memref<?xf32>
  return
}

// -----

// Threads that wait for each other: each stretch between barriers becomes
// a loop over the threads, dynamic shared memory a host buffer, and what a
// thread keeps across a barrier (%mirror, the loop's sum) a buffer with one
// element per thread. The loop around the barriers runs once per block, its
// iteration value stored at its end (after the last barrier) and loaded
// where it is used. The block loops' thread loops run once. The per-thread
// buffers are views of one pool, at offsets aligned to 64 bytes, made at
// the top of the body.
// CHECK-LABEL: func.func @reverse
// CHECK-SAME: (%[[BUF:.*]]: memref<4xf32>, %[[STEPS:.*]]: index)
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.0{{.*}} : f32
// Shared memory: a host allocation with room to put the buffer 16 bytes
// past a 1024-byte boundary (the weakest alignment the GPU target's
// declaration promises), viewed from there.
// CHECK: %[[BYTES:.*]] = arith.index_castui
// CHECK: %[[ROOM:.*]] = arith.addi %[[BYTES]], %{{.*}} : index
// CHECK: %[[ALLOCATION:.*]] = memref.alloc(%[[ROOM]]) {alignment = 16 : i64} : memref<?xi8>
// CHECK: %[[ADDRESS:.*]] = memref.extract_aligned_pointer_as_index %[[ALLOCATION]]
// CHECK: %[[SHARED:.*]] = memref.view %[[ALLOCATION]][%{{.*}}][%[[BYTES]]] : memref<?xi8> to memref<?xi8>
// CHECK: %[[POOL_BYTES:.*]] = arith.constant 192 : index
// CHECK: %[[POOL:.*]] = memref.alloc(%[[POOL_BYTES]]) {alignment = 64 : i64} : memref<?xi8>
// CHECK-NOT: memref.alloc
// CHECK-COUNT-6: scf.for
// CHECK: %[[AT0:.*]] = arith.constant 0 : index
// CHECK: %[[SUM:.*]] = memref.view %[[POOL]][%[[AT0]]][] : memref<?xi8> to memref<4xf32>
// CHECK: %[[AT64:.*]] = arith.constant 64 : index
// CHECK: %[[MIRROR:.*]] = memref.view %[[POOL]][%[[AT64]]][] : memref<?xi8> to memref<4xindex>
// CHECK: %[[AT128:.*]] = arith.constant 128 : index
// CHECK: %[[NEXT:.*]] = memref.view %[[POOL]][%[[AT128]]][] : memref<?xi8> to memref<4xf32>
// CHECK: %[[TILE:.*]] = memref.view %[[SHARED]][%{{.*}}][] : memref<?xi8> to memref<4xf32>
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %[[C4]]
// CHECK:   %[[M:.*]] = arith.subi %[[C3]], %[[T]]
// CHECK:   memref.store %[[M]], %[[MIRROR]][%[[T]]]
// CHECK:   memref.store %[[ZERO]], %[[SUM]][%[[T]]]
// CHECK: }
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[STEPS]]
// CHECK:   scf.for %[[T:.*]] = %{{.*}} to %[[C4]]
// CHECK:     %[[V:.*]] = memref.load %[[BUF]][%[[T]]]
// CHECK:     memref.store %[[V]], %[[TILE]][%[[T]]]
// CHECK:   }
// CHECK:   scf.for %[[T:.*]] = %{{.*}} to %[[C4]]
// CHECK:     %[[M:.*]] = memref.load %[[MIRROR]][%[[T]]]
// CHECK:     %[[W:.*]] = memref.load %[[TILE]][%[[M]]]
// CHECK:     %[[ACC:.*]] = memref.load %[[SUM]][%[[T]]]
// CHECK:     %[[ADD:.*]] = arith.addf %[[ACC]], %[[W]]
// CHECK:     memref.store %[[ADD]], %[[NEXT]][%[[T]]]
// CHECK:   }
// CHECK:   scf.for %[[T:.*]] = %{{.*}} to %[[C4]]
// CHECK:     %[[ADD:.*]] = memref.load %[[NEXT]][%[[T]]]
// CHECK:     memref.store %[[ADD]], %[[SUM]][%[[T]]]
// CHECK:   }
// CHECK: }
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %[[C4]]
// CHECK:   %[[S:.*]] = memref.load %[[SUM]][%[[T]]]
// CHECK:   memref.store %[[S]], %[[BUF]][%[[T]]]
// CHECK-NOT: gpu.
// CHECK: memref.dealloc %[[ALLOCATION]]
// CHECK: memref.dealloc %[[POOL]]
func.func @reverse(%buf: memref<4xf32>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %bytes = arith.constant 16 : i32
  %zero = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1)
             dynamic_shared_memory_size %bytes {
    %shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %tile = memref.view %shared[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4xf32, #gpu.address_space<workgroup>>
    %mirror = arith.subi %c3, %tx : index
    %sum = scf.for %i = %c0 to %steps step %c1 iter_args(%acc = %zero) -> (f32) {
      %v = memref.load %buf[%tx] : memref<4xf32>
      memref.store %v, %tile[%tx] : memref<4xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %w = memref.load %tile[%mirror] : memref<4xf32, #gpu.address_space<workgroup>>
      %next = arith.addf %acc, %w : f32
      gpu.barrier
      scf.yield %next : f32
    }
    memref.store %sum, %buf[%tx] : memref<4xf32>
    gpu.terminator
  }
  return
}

// -----

// Iteration values yielded swapped: both are read before either buffer is
// written.
// CHECK-LABEL: func.func @swap
// CHECK-SAME: (%{{.*}}: memref<4xf32>, %[[STEPS:.*]]: index)
// CHECK: %[[POOL:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xi8>
// CHECK: %[[A:.*]] = memref.view %[[POOL]][%{{.*}}][] : memref<?xi8> to memref<4xf32>
// CHECK: %[[B:.*]] = memref.view %[[POOL]][%{{.*}}][] : memref<?xi8> to memref<4xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[STEPS]]
// CHECK:   scf.for %[[T:.*]] =
// CHECK:     %[[NB:.*]] = memref.load %[[B]][%[[T]]]
// CHECK:     %[[NA:.*]] = memref.load %[[A]][%[[T]]]
// CHECK:     memref.store %[[NB]], %[[A]][%[[T]]]
// CHECK:     memref.store %[[NA]], %[[B]][%[[T]]]
func.func @swap(%buf: memref<4xf32>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %r:2 = scf.for %i = %c0 to %steps step %c1 iter_args(%a = %one, %b = %two) -> (f32, f32) {
      gpu.barrier
      scf.yield %b, %a : f32, f32
    }
    memref.store %r#0, %buf[%tx] : memref<4xf32>
    gpu.terminator
  }
  return
}

// -----

// A barrier that only some threads may reach cannot be serialised.
func.func @barrier_in_if(%buf: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %first = arith.cmpi eq, %tx, %c1 : index
    // expected-error @below {{'scf.if' op contains a barrier under a condition that differs between threads or with results; the GPU emulation cannot serialise its threads}}
    scf.if %first {
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// A barrier under a branch that all the threads of a block take alike (a
// merged launch's choice of body by the block index): the branch's
// stretches between barriers become loops over the threads, inside it.
// Each thread stores its id, then reads its mirror's (3 - id): the reads
// come after every store.
// CHECK-LABEL: func.func @barrier_in_uniform_if
// CHECK: scf.if
// CHECK:   scf.for %[[T:.*]] = %{{.*}} to %c4
// CHECK:     memref.store %{{.*}}, %{{.*}}[%[[T]]] : memref<4xf32>
// CHECK:   }
// CHECK:   scf.for %[[U:.*]] = %{{.*}} to %c4
// CHECK:     %[[M:.*]] = arith.subi %c3, %[[U]]
// CHECK:     memref.load %{{.*}}[%[[M]]] : memref<4xf32>
func.func @barrier_in_uniform_if(%buf: memref<4xf32>, %out: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %first = arith.cmpi ult, %bx, %c1 : index
    scf.if %first {
      %i = arith.index_cast %tx : index to i32
      %v = arith.sitofp %i : i32 to f32
      memref.store %v, %buf[%tx] : memref<4xf32>
      gpu.barrier
      %m = arith.subi %c3, %tx : index
      %r = memref.load %buf[%m] : memref<4xf32>
      memref.store %r, %out[%tx] : memref<4xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// Nor one in a loop whose trip count differs between threads.
func.func @barrier_in_divergent_loop(%buf: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    // expected-error @below {{'scf.for' op contains a barrier but its bounds differ between threads}}
    scf.for %i = %c0 to %tx step %c1 {
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// Serialised threads are numbered in x only.
func.func @barrier_2d(%buf: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  // expected-error @below {{'gpu.launch' op synchronises its threads in blocks of more than one dimension, which the GPU emulation does not serialise}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c2, %sy = %c2, %sz = %c1) {
    gpu.barrier
    gpu.terminator
  }
  return
}

// -----

// Other ops of the GPU's hardware are refused.
func.func @lane_id(%out: memref<32xindex>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    // expected-error @below {{'gpu.lane_id' op in a kernel: this op depends on the GPU; the GPU emulation runs the SIMT route and the tensor-core routes}}
    %l = gpu.lane_id
    memref.store %l, %out[%tx] : memref<32xindex>
    gpu.terminator
  }
  return
}

// -----

// Shuffles are emulated as butterflies over the whole warp only (the
// tensor-core attention's quad reductions), by a constant offset.
func.func @shuffle_down(%x: f32, %out: memref<32xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %o = arith.constant 1 : i32
  %w = arith.constant 32 : i32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    // expected-error @below {{'gpu.shuffle' op is emulated only as a butterfly (xor) over the whole warp by a constant offset}}
    %s, %valid = gpu.shuffle down %x, %o, %w : f32
    memref.store %s, %out[%tx] : memref<32xf32>
    gpu.terminator
  }
  return
}

// -----

// gpu.shuffle xor: each lane's value through a per-thread buffer, read back
// at lane ^ offset of the same warp, between barriers (thread loops).
// CHECK-LABEL: func.func @shuffle_xor(
// CHECK: %[[POOL:.*]] = memref.alloc(%c512) {alignment = 64 : i64} : memref<?xi8>
// CHECK: %[[VALUES:.*]] = memref.view %[[POOL]][%{{.*}}][] : memref<?xi8> to memref<64xf32>
// CHECK: scf.for %[[T1:.*]] = %{{.*}} to %c64 step
// CHECK-NEXT: memref.load
// CHECK-NEXT: memref.store %{{.*}}, %[[VALUES]][%[[T1]]]
// CHECK: scf.for %[[T2:.*]] = %{{.*}} to %c64 step
// CHECK-NEXT: %[[LANE:.*]] = arith.remui %[[T2]], %c32
// CHECK: %[[WARP0:.*]] = arith.subi %[[T2]], %[[LANE]]
// CHECK: %[[X:.*]] = arith.xori %[[LANE]], %{{.*}} : index
// CHECK: %[[SRC:.*]] = arith.addi %[[WARP0]], %[[X]]
// CHECK: memref.load %[[VALUES]][%[[SRC]]]
// CHECK: memref.dealloc %[[POOL]]
func.func @shuffle_xor(%in: memref<64xf32>, %out: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %o = arith.constant 2 : i32
  %w = arith.constant 32 : i32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %x = memref.load %in[%tx] : memref<64xf32>
    %s, %valid = gpu.shuffle xor %x, %o, %w : f32
    memref.store %s, %out[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

// Host code holds device pointers on the GPU target: reading one there is
// the bug that switchyard-gpu-launch-host-compute exists to prevent.
func.func @host_load(%loss: memref<f32>) -> f32 {
  // expected-error @below {{'memref.load' op reads or writes a buffer in host code, which holds device pointers on the GPU target}}
  %l = memref.load %loss[] : memref<f32>
  return %l : f32
}

// -----

// Blocks whose size is known only at the launch: what crosses a barrier has
// a buffer of its own, one element per thread.
// CHECK-LABEL: func.func @dynamic_block(
// CHECK-SAME: %[[N:[a-z0-9]*]]: index)
// CHECK: %[[VALUES:.*]] = memref.alloc(%[[N]]) : memref<?xf32>
// CHECK: scf.for %[[T1:.*]] = %{{.*}} to %[[N]]
// CHECK: memref.store %{{.*}}, %[[VALUES]][%[[T1]]]
// CHECK: scf.for %[[T2:.*]] = %{{.*}} to %[[N]]
// CHECK: memref.load %[[VALUES]][%[[T2]]]
// CHECK: memref.dealloc %[[VALUES]]
func.func @dynamic_block(%in: memref<?xf32>, %out: memref<?xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) {
    %x = memref.load %in[%tx] : memref<?xf32>
    %y = arith.addf %x, %x : f32
    gpu.barrier
    memref.store %y, %out[%tx] : memref<?xf32>
    gpu.terminator
  }
  return
}

// -----

// A memory fence (split-K's count of finished parts) is dropped: blocks
// and threads run one after another. The atomic add stays, on host memory.
// CHECK-LABEL: func.func @fence_and_count(
// CHECK-NOT: nvvm.memory.barrier
// CHECK: memref.atomic_rmw addi
// CHECK-NOT: nvvm.memory.barrier
// CHECK: return
func.func @fence_and_count(%parts: memref<4xf32>, %count: memref<1xi32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i32
  %x = arith.constant 2.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %x, %parts[%bx] : memref<4xf32>
    nvvm.memory.barrier <gpu>
    %old = memref.atomic_rmw addi %one, %count[%c0] : (i32, memref<1xi32>) -> i32
    gpu.terminator
  }
  return
}
