//===- Passes.td - Switchyard GPU code generation passes ---*- tablegen -*-===//
//
// The passes of the GPU target that upstream MLIR does not provide: device
// memory placement, the mapping of parallel loops to blocks and threads, the
// move of the host's leftover work into kernels, kernel naming and sharing,
// the kernel report, and the tensor-core kernels (TensorCore/).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_GPU_PASSES_TD
#define SWITCHYARD_LIB_CODEGEN_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def SwitchyardGpuDeviceMemoryPass
    : Pass<"switchyard-gpu-device-memory", "::mlir::func::FuncOp"> {
  let summary = "Place the host function's buffers in device memory";
  let description = [{
    Runs on bufferized host functions, before any kernel exists. Every
    buffer that host code allocates becomes device memory, and copies become
    `linalg.copy` so that they turn into kernels with the rest of linalg:

    - `memref.alloc` becomes `gpu.alloc`, `memref.dealloc` becomes
      `gpu.dealloc`;
    - `memref.copy` becomes `linalg.copy` (it may copy strided views, so a
      plain `gpu.memcpy` would not do).

    Buffers that live inside a linalg body, a `scf.parallel` or a
    `gpu.launch` are left alone. Host-side `memref.alloca`,
    `memref.get_global` and `memref.realloc` have no device equivalent here
    and are reported as errors.

    Before:

    ```mlir
    %a = memref.alloc(%n) {alignment = 64 : i64} : memref<?x128xf32>
    memref.copy %b, %a : memref<?x128xf32> to memref<?x128xf32>
    memref.dealloc %a : memref<?x128xf32>
    ```

    After:

    ```mlir
    %a = gpu.alloc (%n) : memref<?x128xf32>
    linalg.copy ins(%b : memref<?x128xf32>) outs(%a : memref<?x128xf32>)
    gpu.dealloc %a : memref<?x128xf32>
    ```
  }];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::linalg::LinalgDialect"
  ];
}

def SwitchyardGpuSplitReductionsPass
    : Pass<"switchyard-gpu-split-reductions", "::mlir::func::FuncOp"> {
  let summary = "Reductions with too few threads in two parallel steps";
  let description = [{
    The GPU pipeline gives a linalg op one thread per point of its parallel
    dimensions, each thread running the reductions in order. A reduction
    into a scalar (a loss, the squared norm of the gradients that clipping
    needs) has no parallel dimension at all: left alone, it runs as host
    code in a single-thread kernel (`switchyard-gpu-launch-host-compute`),
    which over a model's parameters takes most of a training step. A
    reduction into a vector over many rows (a bias or norm gradient:
    412 threads, each summing 4096 rows) keeps most of the GPU idle.

    This pass (on buffers in device memory, before kernels form) splits such
    an op in two. Its trailing reduction dimensions, the fewest with which
    the parallel extent reaches `min-threads` (a dynamic extent counts as
    reaching it), keeping at least one reduction, become parallel dimensions
    of a buffer of partial results (`gpu.alloc`, filled with the combiner's
    neutral element): each thread combines along the remaining leading
    reductions, consecutive threads reading consecutive elements. A second
    op combines the partial results into the op's output, and is split in
    turn if it qualifies.

    Split: linalg.generic ops on buffers with one output indexed by parallel
    dimensions only, at least two reduction dimensions, a parallel extent
    below `min-threads`, and a body that combines the output's value with
    one other value through one op with a neutral element (`arith.addf`,
    `arith.maximumf`, `arith.addi`, ...). Ops statically smaller than
    `min-elements` are left alone. The combination order changes:
    floating-point sums are reassociated.

    Before (a gradient's squared norm):

    ```mlir
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                     affine_map<(d0, d1) -> ()>],
                    iterator_types = ["reduction", "reduction"]}
        ins(%g : memref<412x1236xf32>) outs(%norm : memref<f32>) {
    ^bb0(%in: f32, %out: f32):
      %sq = arith.mulf %in, %in : f32
      %s = arith.addf %out, %sq : f32
      linalg.yield %s : f32
    }
    ```

    After:

    ```mlir
    %partial = gpu.alloc () : memref<1236xf32>
    linalg.fill ins(%zero : f32) outs(%partial : memref<1236xf32>)
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                     affine_map<(d0, d1) -> (d1)>],
                    iterator_types = ["reduction", "parallel"]}
        ins(%g : memref<412x1236xf32>) outs(%partial : memref<1236xf32>) {
      ... the same body ...
    }
    linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>,
                                     affine_map<(d0) -> ()>],
                    iterator_types = ["reduction"]}
        ins(%partial : memref<1236xf32>) outs(%norm : memref<f32>) {
    ^bb0(%in: f32, %out: f32):
      %s = arith.addf %out, %in : f32
      linalg.yield %s : f32
    }
    gpu.dealloc %partial : memref<1236xf32>
    ```

    A bias gradient `[?, 256, 412] -> [412]` becomes partial sums
    `[256, 412]` over the batch, then 412 sums of 256.
  }];
  let options = [
    Option<"minThreads", "min-threads", "int64_t", /*default=*/"1024",
           "Parallel extent to reach by making reductions parallel">,
    Option<"minElements", "min-elements", "int64_t", /*default=*/"8192",
           "Leave reductions over fewer elements (statically) alone">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::linalg::LinalgDialect"
  ];
}

def SwitchyardGpuSortRoutesPass
    : Pass<"switchyard-gpu-sort-routes", "::mlir::func::FuncOp"> {
  let summary = "The routes' counting sort as one thread block's kernel";
  let description = [{
    Makes each `moe.sort_routes` on buffers (the grouped expert kernels'
    order of the routes) one `gpu.launch` of a single block of
    `block-size` threads, instead of a chain of kernels for its counts,
    prefix sums and positions. Thread `t` takes the routes
    `[t·C, (t + 1)·C)` (`C = ceil(R / block-size)`) and counts them per
    expert row into column `t` of a scratch buffer `[H·E, block-size]`
    (`gpu.alloc`); after a barrier, one thread per expert row turns its
    row into exclusive prefix sums over the threads and writes the total;
    thread 0 pads the segments (`segments[e + 1] = segments[e] +
    roundup(count, T)`); all threads fill `order` with `R` and compute the
    tiles' experts; after a last barrier each thread places its routes,
    `slot = segments[e] + its rank`, writing `slots` and `order`. Chunks
    follow the threads and keep their routes' order: the sort is stable,
    the same as the sequential loops of `switchyard-lower-grouped-kernels`.

    Before:

    ```mlir
    moe.sort_routes ins(%i : memref<?x2x3xi32>) outs(%seg, %order, %slots, %tiles : memref<11xindex>, memref<?xindex>, memref<?x2x3xindex>, memref<?xindex>) experts_per_head(5) tile_size(64)
    ```

    After (abridged):

    ```mlir
    %scratch = gpu.alloc (%c10) : memref<?x256xindex>
    gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1)
               threads(%t, %ty, %tz) in (%tx = %c256, %yy = %c1, %zz = %c1) {
      scf.for %r = %lo to %hi step %c1 { ... %scratch[%e, %t] += 1 ... }
      gpu.barrier
      scf.for %e = %t to %c10 step %c256 { ... prefix sums of row %e ... }
      gpu.barrier
      scf.if %first { ... padded segments ... }
      gpu.barrier
      ... %order filled with R, %tiles ...
      gpu.barrier
      scf.for %r = %lo to %hi step %c1 { ... %slots, %order ... }
      gpu.terminator
    }
    gpu.dealloc %scratch : memref<?x256xindex>
    ```
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads of the kernel's one block">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def SwitchyardGpuRowKernelsPass
    : Pass<"switchyard-gpu-row-kernels", "::mlir::func::FuncOp"> {
  let summary = "Row loops as kernels with a thread block per row";
  let description = [{
    Turns each bufferized `scf.forall` mapped to `#gpu.block<linear_dim_i>`
    (the loops over rows that `switchyard-fuse-rows` forms) into one
    `gpu.launch` with a thread block per row. The linalg ops of a row run
    one after the other, a barrier between them, their iterations shared
    by the block's threads:

    - an op without reductions: thread `t` computes the elements `t`,
      `t + block-size`, ... of the row, in order of its loops;
    - a reduction to one value per row whose body combines the previous
      value with one new term by `arith.addf`, `arith.maximumf` or
      `arith.maxnumf` (f32): each thread combines its strided share of
      the terms, the partial results meet in shared memory and thread 0
      combines them with the initial value, in thread order;
    - any other op: thread `t` computes the parallel iterations `t`,
      `t + block-size`, ..., each with its reduction loops in order.

    Adjacent threads read adjacent elements of a row, where the one-
    thread-per-row kernels of a reduction read one row each. Reductions are
    summed in another order than the CPU's (a partial sum per thread).
    With a 16-bit `element-type`, the factors of a contraction in a row (a
    row's dot product with a norm's weight) are rounded to it, as
    `switchyard-gpu-tensor-core-matmul` rounds those of the contractions it
    leaves to SIMT code and `switchyard-round-contraction-operands` those of
    the CPU reference.

    Before:

    ```mlir
    scf.forall (%i) in (%n) {
      %x = memref.subview %in[%i, 0] [1, 512] [1, 1] : ... to memref<512xf32, ...>
      %s = memref.subview %sum[%i] [1] [1] : ... to memref<f32, ...>
      linalg.fill ins(%zero : f32) outs(%s : memref<f32, ...>)
      linalg.generic {... ["reduction"]} ins(%x : ...) outs(%s : ...) {...}
    } {mapping = [#gpu.block<linear_dim_0>]}
    ```

    After:

    ```mlir
    gpu.launch blocks(%b, %by, %bz) in (%gx = %n, ...)
               threads(%t, %ty, %tz) in (%bx = %c128, ...)
               dynamic_shared_memory_size %c512_i32 {
      %x = memref.subview %in[%b, 0] [1, 512] [1, 1] : ...
      ...
      scf.for %e = %t to %c1 step %c128 { ... store %zero ... }
      gpu.barrier
      %part = scf.for %k = %t to %c512 step %c128 iter_args(%a = %cst0) ...
      memref.store %part, %partials[%t]
      gpu.barrier
      scf.if %thread0 { ... combine %partials[0 .. 127] into %s ... }
      gpu.barrier
      gpu.terminator
    }
    ```
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"128",
           "Threads per row">,
    Option<"elementType", "element-type", "std::string", /*default=*/"\"f32\"",
           "Element type to which contractions' factors are rounded: f32 "
           "(none), bf16 or f16">,
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect"];
}

def SwitchyardGpuParallelDimsFirstPass
    : Pass<"switchyard-gpu-parallel-dims-first", "::mlir::func::FuncOp"> {
  let summary = "Interchange linalg loops so that parallel dimensions come first";
  let description = [{
    `switchyard-linalg-to-loops{parallel=1}` (as upstream's
    `convert-linalg-to-parallel-loops`) nests the loops in the order of the
    iteration dimensions: a reduction dimension before a parallel one (the
    batch and time sums of a norm's weight gradient,
    `["reduction", "reduction", "parallel"]`) would leave a host `scf.for`
    around a kernel, launched once per reduction step. This pass moves the
    parallel dimensions of every linalg op to the front, keeping the relative
    order of the parallel and of the reduction dimensions, so each op becomes
    one kernel whose threads run the reductions in the original order. Named
    ops that need it are generalized first.

    Before:

    ```mlir
    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                                     affine_map<(d0, d1, d2) -> (d2)>],
                    iterator_types = ["reduction", "reduction", "parallel"]} ...
    ```

    After:

    ```mlir
    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2, d0)>,
                                     affine_map<(d0, d1, d2) -> (d0)>],
                    iterator_types = ["parallel", "reduction", "reduction"]} ...
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def SwitchyardGpuMapParallelLoopsPass
    : Pass<"switchyard-gpu-map-parallel-loops", "::mlir::func::FuncOp"> {
  let summary = "Map each outermost scf.parallel to a 1-D grid of blocks";
  let description = [{
    The SIMT fallback's mapping. Each outermost `scf.parallel` (one per
    linalg op after `switchyard-linalg-to-loops{parallel=1}`) is collapsed into a
    single dimension, tiled by `block-size` with an in-bounds check instead
    of `affine.min` bounds, and annotated for `convert-parallel-loops-to-gpu`:
    the tile loop to `block_x`, the loop within a tile to `thread_x`. Nested
    parallel loops stay sequential in each thread. Every element of the
    iteration space thus gets one thread, whatever the rank, and the grid
    never exceeds its x limit for any realistic size.

    Before:

    ```mlir
    scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c6) step (%c1, %c1) {...}
    ```

    After (abridged):

    ```mlir
    scf.parallel (%b) = (%c0) to (%n6) step (%c256) {
      scf.parallel (%t) = (%c0) to (%c256) step (%c1) {
        scf.if %in_bounds {...}
      } {mapping = [#gpu.loop_dim_map<processor = thread_x, ...>]}
    } {mapping = [#gpu.loop_dim_map<processor = block_x, ...>]}
    ```
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block (1 to 1024)">
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect"
  ];
}

def SwitchyardGpuLaunchHostComputePass
    : Pass<"switchyard-gpu-launch-host-compute", "::mlir::func::FuncOp"> {
  let summary = "Move the host's remaining memory accesses into 1-thread kernels";
  let description = [{
    Runs after `convert-parallel-loops-to-gpu`. What is still on the host
    and reads or writes a buffer cannot run there, because buffers live in
    device memory: scalar reads (`tensor.extract` of a loss or of the
    optimizer's hyper-parameters), 0-d linalg ops, and the `scf.for` nests of
    linalg ops with no parallel dimension. Such ops, and every host op that
    uses their results, are gathered into runs of consecutive ops and each
    run becomes a `gpu.launch` with one block of one thread. A scalar that a
    run computes and later code uses is passed through a 0-d device buffer:
    stored at the end of the run, loaded at the start of each later kernel
    that uses it.

    First, a scalar read that only kernels use, with the arithmetic the
    host does on it (at most 32 ops: the dropout's key from its seed), is
    cloned into each of those kernels, every thread computing it again,
    where no op between the read and the kernel may write the buffer read
    (a launch, a call or a store that may touch it); a single-thread kernel
    and a 0-d buffer fewer.

    Host ops without memory effects (constants, `memref.dim`, index
    arithmetic) stay on the host, and so does a call of a function of the
    module, which only passes buffers on (this pass gives the callee's
    accesses kernels of their own); any other host op (a launch, a
    deallocation, a call) ends a run, so memory order is kept. A device value that
    only the host could use (a grid size, an allocation size) is an error.

    Before:

    ```mlir
    %l = memref.load %loss[] : memref<f32>
    %s = math.sqrt %l : f32
    gpu.launch blocks(...) threads(...) { ... %s ... }
    ```

    After (abridged):

    ```mlir
    %buf = gpu.alloc () : memref<f32>
    gpu.launch blocks(%bx, %by, %bz) in (%c1, %c1, %c1) threads(...) in (%c1, %c1, %c1) {
      %l = memref.load %loss[] : memref<f32>
      %s = math.sqrt %l : f32
      memref.store %s, %buf[] : memref<f32>
      gpu.terminator
    }
    gpu.launch blocks(...) threads(...) { %s2 = memref.load %buf[] ... %s2 ... }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def SwitchyardGpuRegisterAccumulatorsPass
    : Pass<"switchyard-gpu-register-accumulators", "::mlir::func::FuncOp"> {
  let summary = "Reduction loops in kernels carry their accumulator instead of storing it every iteration";
  let description = [{
    A linalg reduction becomes, in each thread of its kernel, a loop that
    loads its output element, combines, and stores it back every iteration:
    a chain of dependent global-memory round trips (the load reads what the
    previous iteration stored, from L2), which LLVM cannot shorten because
    it cannot prove that the kernel's pointer arguments do not alias. This
    pass (after kernels form, on the `scf.for` loops inside `gpu.launch`
    bodies, innermost first) finds in a loop's body a `memref.load` and a
    later `memref.store` of the same element: of a buffer allocated in the
    function (`gpu.alloc`, `memref.alloc`, so that only its views can alias
    it), in global memory, at indices defined outside the loop, with no
    other access to that buffer or a view of it anywhere in the loop, and no
    op in the loop with memory effects other than loads and stores. The loop
    then carries the element: one load before the loop, the stored value
    yielded, one store after it; where the bounds are not constants that
    make the loop run, both are under `scf.if` (lower < upper bound), so an
    element a loop that runs no iteration never touched stays untouched.
    The buffer must be defined outside the loop too (a view made inside it
    is another element every iteration). An outer reduction loop then sees
    the moved load and store and is promoted in turn.

    Before (one thread of a bias gradient):

    ```mlir
    scf.for %r = %c0 to %rows step %c1 {
      %x = memref.load %dy[%r, %col] : memref<?x412xf32>
      %acc = memref.load %db[%col] : memref<412xf32>
      %sum = arith.addf %acc, %x : f32
      memref.store %sum, %db[%col] : memref<412xf32>
    }
    ```

    After:

    ```mlir
    %init = memref.load %db[%col] : memref<412xf32>
    %final = scf.for %r = %c0 to %rows step %c1 iter_args(%acc = %init) -> (f32) {
      %x = memref.load %dy[%r, %col] : memref<?x412xf32>
      %sum = arith.addf %acc, %x : f32
      scf.yield %sum : f32
    }
    memref.store %final, %db[%col] : memref<412xf32>
    ```

    The results are the same, bit for bit (the same operations in the same
    order).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def SwitchyardGpuMergeLaunchesPass
    : Pass<"switchyard-gpu-merge-launches", "::mlir::func::FuncOp"> {
  let summary = "Launch independent kernels of a host function as one";
  let description = [{
    Runs on host functions once their kernels are `gpu.launch` ops (after
    `switchyard-gpu-register-accumulators`, before the kernels are named and
    outlined). Launches of a block with the same static block size, none of
    which writes a buffer another one reads or writes, become one launch at
    the place of the last of them: its grid is the launches' blocks end to
    end (one dimension), and each block runs the body of the launch its
    index falls in, with that launch's own block index and grid size. A
    layer's optimizer updates (one kernel per parameter) become one
    multi-tensor kernel, and so do the independent elementwise kernels and
    reductions of a backward pass.

    First the launches are brought together: in each run of launches,
    allocations, frees and ops without memory effects, a list schedule of
    the launches' dependences places, from the earliest launch not yet
    placed, that launch and every ready launch of the same block size among
    the next `window` (those whose predecessors are all placed before it);
    each other op of the run moves to right before the first launch that
    uses it, each free to right after the last group that touches its
    buffer. A chain of a 256-thread partial sum and a single-thread final
    sum per buffer, repeated over buffers, becomes all the partial sums,
    then all the final ones.

    Then the earlier launches of a group move down to the last one; what
    they move past must allow it: other launches that neither read what the
    group writes nor write what it touches, allocations, frees of buffers
    the group does not touch, and ops without memory effects (anything
    else ends the group there). Buffers are told apart through view-like
    ops to their roots: two distinct allocations of the host code never
    share memory, two function arguments may. A launch joins the first
    open group it can; groups of several block sizes grow side by side.
    Launches with barriers and dynamic shared memory (the tensor-core
    kernels) merge with those of the same block size and the same shared
    memory size, which the merged launch keeps, or, up to 4 KiB (the row
    kernels' partial results), any size, the merged launch taking the
    largest: every thread of a block
    takes the same branch, so a barrier under it is reached by all (the
    GPU emulation serializes the threads of such a branch on its own).
    Left as they are: launches with attributions, a cluster, a dynamic
    shared memory size not known when compiling, more than one block in
    their body, or an op whose memory effects are unknown (none declared,
    or on memory named by something other than a buffer: the wgmma
    kernels' TMA descriptors); such a launch also ends the run of ops the
    schedule may reorder. The merged launch is marked
    `switchyard.merged`, for `switchyard-gpu-kernel-report`. At most
    `max-launches` go into one, and no more than keep the merged kernel's
    parameters (the host values its bodies use: memref descriptors,
    indices) within `max-parameter-bytes`: PTX before ISA 8.1 allows a
    kernel 4096 bytes of parameters, 8.1 and later 32764 (the GPU pipeline
    sets three quarters of its PTX version's limit).

    Before (two kernels of 256 threads, independent):

    ```mlir
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %n0, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
      ... %bx ...   // reads %a, writes %p
      gpu.terminator
    }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %n1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
      ... %bx ...   // reads %b, writes %q
      gpu.terminator
    }
    ```

    After:

    ```mlir
    %total = arith.addi %n0, %n1 : index   // (with the y and z extents)
    gpu.launch blocks(%id, %y, %z) in (%gx = %total, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
      %first = arith.cmpi ult, %id, %n0 : index
      scf.if %first {
        ... %id ...                // the first body, its block index
      } else {
        %bx = arith.subi %id, %n0 : index
        ... %bx ...                // the second body
      }
      gpu.terminator
    }
    ```
  }];
  let options = [
    Option<"maxLaunches", "max-launches", "int64_t", /*default=*/"64",
           "At most this many launches go into one">,
    Option<"window", "window", "int64_t", /*default=*/"16",
           "How many launches ahead a group may take its launches from "
           "(0: none; the launches are not reordered)">,
    Option<"maxParameterBytes", "max-parameter-bytes", "int64_t",
           /*default=*/"3072",
           "At most this many bytes of kernel parameters (estimated before "
           "constants are sunk into the kernel) in a merged launch">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect"];
}

def SwitchyardGpuChainLaunchesPass
    : Pass<"switchyard-gpu-chain-launches", "::mlir::func::FuncOp"> {
  let summary = "Run a small launch in the last block of the one before it";
  let description = [{
    Runs on host functions once their kernels are `gpu.launch` ops (after
    `switchyard-gpu-merge-launches`, before the kernels are named). A launch
    of a few blocks that follows another launch of the same host block (the
    combination of a split reduction's partial results, a layer norm's
    parameter gradients, the routes' sort after the router) becomes the
    tail of that launch: at the end of the first launch's body every block
    counts itself done in a global counter, and the block that counts last
    runs the second launch's work (`LastBlock.h`: the fences of CUTLASS's
    split-K semaphore). The second launch's threads keep their indices where
    they cooperate (barriers, shared memory, shuffles: the same block shape
    is required; the block runs the launch's blocks one after another, a
    barrier between two); where each thread works on its own, the block's
    threads run all the launch's threads, any block shape. At most
    `max-tail-blocks` such steps in a tail (the branch's
    `switchyard.tail_steps` counts them); more launches chain onto the same
    tail, each after a barrier. The first launch has one-dimensional blocks;
    the second reads its block index and grid size through the launch's
    arguments only (no gpu.block_id, gpu.grid_dim or special-register op);
    the two together take at most `max-parameter-bytes` of parameters.

    The counter (one i32, a fresh buffer) is zeroed by the first thread of
    the nearest earlier launch of the same host block, or by a `gpu.memset`
    where there is none; the launch takes the larger of the two dynamic
    shared memory sizes, and 4 bytes at least (the flag that tells the
    block's threads it is last). The ops between the two launches must let
    the first move down past them (allocations, ops without memory effects,
    frees, which move after the result). The tail branch is marked
    `switchyard.last_block` (the kernel report counts its work once), its
    flag's load `switchyard.block_uniform` (the GPU emulation serialises
    the threads around the barriers inside the branch).

    Before (a partial sum over 4096 blocks, its combination in 4 blocks
    whose threads cooperate through shared memory):

    ```mlir
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4096, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
      ...                        // writes %partial
      gpu.terminator
    }
    %out = gpu.alloc() : memref<1024xf32>
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1)
               dynamic_shared_memory_size %c1024_i32 {
      ... %bx ...                // reads %partial into shared memory
      gpu.barrier
      ...                        // writes %out
      gpu.terminator
    }
    ```

    After (the counter zeroed by an earlier launch):

    ```mlir
    %out = gpu.alloc() : memref<1024xf32>
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4096, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1)
               dynamic_shared_memory_size %c1024_i32 {
      ...                        // writes %partial
      gpu.barrier
      scf.if %thread0 {          // count the block: fence, atomic, fence
        %n = memref.atomic_rmw addi %c1_i32, %counter[%c0] : ...
        ...                      // flag = (%n == blocks - 1)
      }
      gpu.barrier
      %flag = memref.load %shared[%c0] {switchyard.block_uniform} : ...
      gpu.barrier
      scf.if %last {
        nvvm.memory.barrier <gpu>
        scf.for %b = %c0 to %c4 step %c1 {
          ... %b ...             // the second body, block %b
          gpu.barrier
        }
      } {switchyard.last_block, switchyard.tail_steps = 4 : i64}
      gpu.terminator
    }
    gpu.dealloc %counter : memref<1xi32>
    ```
  }];
  let options = [
    Option<"maxTailBlocks", "max-tail-blocks", "int64_t", /*default=*/"8",
           "At most this many blocks' work (in the first launch's block "
           "size) runs in the last block, over all the launches of a tail">,
    Option<"maxParameterBytes", "max-parameter-bytes", "int64_t",
           /*default=*/"3072",
           "At most this many bytes of kernel parameters (estimated as "
           "switchyard-gpu-merge-launches does) in a launch with a tail">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect"];
}

def SwitchyardGpuNameKernelsPass
    : Pass<"switchyard-gpu-name-kernels", "::mlir::func::FuncOp"> {
  let summary = "Name each launch's kernel and give a function one gpu.module";
  let description = [{
    Sets the `module` and `function` attributes of every `gpu.launch` in a
    host function `@f` to `@f_kernels` and `@f_kernel_<i>` (in launch order)
    so that `gpu-kernel-outlining` puts all kernels of `@f` into one
    `gpu.module` with stable names, instead of one module per kernel: one
    binary to load per entry point, and the device libraries are linked once
    per function rather than once per kernel. Launches that already name
    their module or function keep those names.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def SwitchyardGpuKernelReportPass
    : Pass<"switchyard-gpu-kernel-report", "::mlir::ModuleOp"> {
  let summary = "Print a static table of the kernels launched: geometry and per-thread work";
  let description = [{
    For every `gpu.launch` in the module's functions (run it after kernels
    form and before outlining; the GPU pipeline's `kernel-report` option
    does): how many times host loops launch it, its grid and block sizes,
    its dynamic shared memory, and the work of one thread, as operations
    and memory accesses (loads, stores, nvgpu ops) with every loop counted
    by its trip count and the longer branch of every `scf.if` (but a launch
    that `switchyard-gpu-merge-launches` made of several, marked
    `switchyard.merged`, is taken body by body: each body's blocks do its
    work, the mean over the blocks is shown). Sizes are
    evaluated from the IR (constants, arith and affine index arithmetic,
    `memref.dim` of allocations); the arguments of a function that is not
    public are those of its first call, a call's results what its callee
    returns; every dynamic dimension of a public
    function's argument (the batch) is taken as `dynamic-size`. The
    launches of a function that is not public count once per call of it
    from one call of the public functions (a model's block functions: once
    per layer).

    The last column names the ops whose code the kernel runs: the name
    locations of its body's ops (`convert-moe-to-linalg` names what each
    moe op lowers to after it, `lm-differentiate` what each gradient rule
    builds, `linear_grad`, and the training step its `grad_norm` and
    `adamw`), `+`-joined for fused and merged kernels, `-` for none: the
    way from a kernel's name in a GPU profile to the model's ops.

    Rows are sorted by an estimate: launches x waves x work per thread,
    waves being how many times `sm-count` x `threads-per-sm` resident
    threads are filled (for a merged launch, the work of all its threads
    over the resident threads, and no less than its longest thread's). It finds kernels with too little parallelism for
    their work (a reduction in one thread, a few hundred threads summing
    thousands of rows) without a GPU; it models neither memory bandwidth
    nor latency nor tensor-core throughput, so it is not a time: measure
    with `SWITCHYARD_KERNEL_PROFILE` (docs/GPU.md) on the GPU.

    ```
    kernel report: 3 launches in the IR; dynamic sizes 16, 132 SMs x 2048 threads
    estimate = launches x waves x work per thread (operations + memory accesses, loops by trip count); static, not a time
      share launch   threads  grid            block         shared    ops/thr    mem/thr  kernel  computes
      99.9%      1         1  1x1x1           1x1x1              0   2.04e+06   1.02e+06  f_kernel_2  layer_norm
    ?: unknown; +: a loop of unknown trip count counted once
    launches per call: @f 3
    ```

    The last line counts the launches of one call of each public function,
    those of the functions it calls included (a training step calls its
    gradient function); `+` marks a lower bound (a launch or a call in a
    loop of unknown trip count). The table goes to `output` (`-`: standard
    output). The IR is unchanged.
  }];
  let options = [
    Option<"dynamicSize", "dynamic-size", "int64_t", /*default=*/"16",
           "Size taken for every dynamic dimension of a function argument">,
    Option<"smCount", "sm-count", "int64_t", /*default=*/"132",
           "Multiprocessors of the GPU the waves are counted for (H100 SXM and H200: 132)">,
    Option<"threadsPerSm", "threads-per-sm", "int64_t", /*default=*/"2048",
           "Resident threads per multiprocessor (sm_80 and sm_90: 2048)">,
    Option<"top", "top", "int64_t", /*default=*/"0",
           "Print only the first N rows (0: all)">,
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "File for the table (-: standard output)">,
  ];
}

def SwitchyardGpuSinkIndexComputationsPass
    : Pass<"switchyard-gpu-sink-index-computations", "::mlir::func::FuncOp"> {
  let summary = "Clone the constants and index computations that launches use into them, in linear time";
  let description = [{
    Upstream's `gpu-launch-sink-index-computations`, with the same rule and
    result, in time linear in the function's size. Before outlining, every
    value that a `gpu.launch` body uses from above becomes a kernel
    parameter; a constant (or a `memref.dim`, `arith.cmpi` or `arith.select`
    whose operands are constants, such values or already parameters) is
    cloned into the body instead, so that the kernel sees, folds and unrolls
    on known sizes. Each use inside the body is then redirected to the
    clone.

    Upstream redirects the uses through the value's whole use list
    (`replaceAllUsesInRegionWith`), once per launch: a host function of a
    training step uses a constant such as `arith.constant 0 : index` in
    thousands of places and has about a thousand launches, so that walk is
    quadratic in the function's size. Here each launch's body is walked
    once.

    Before:

    ```mlir
    %c64 = arith.constant 64 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, ...) ... {
      %i = arith.muli %bx, %c64 : index
      ...
    }
    ```

    After:

    ```mlir
    %c64 = arith.constant 64 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, ...) ... {
      %c64_0 = arith.constant 64 : index
      %i = arith.muli %bx, %c64_0 : index
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def SwitchyardGpuModuleToBinaryPass
    : Pass<"switchyard-gpu-module-to-binary", "::mlir::ModuleOp"> {
  let summary = "Compile the gpu.modules to gpu.binary ops, the modules in "
                "parallel";
  let description = [{
    Upstream's `gpu-module-to-binary`, with the gpu.modules serialized
    concurrently on MLIR's thread pool: each one's translation to LLVM IR,
    LLVM's NVPTX back end (one thread per module) and ptxas are independent
    of the others'. A training step has a module per host function
    (forward, gradient, optimizer), and the NVPTX back end is most of the
    serialization's time. The objects, and the `gpu.binary` ops that replace
    the modules in their order, are what upstream's pass makes.

    Before:

    ```mlir
    gpu.module @f_kernels [#nvvm.target<chip = "sm_90">] { gpu.func @k(...) kernel { ... } }
    gpu.module @g_kernels [#nvvm.target<chip = "sm_90">] { ... }
    ```

    After (`format=bin`):

    ```mlir
    gpu.binary @f_kernels [#gpu.object<#nvvm.target<chip = "sm_90">, bin = "...">]
    gpu.binary @g_kernels [#gpu.object<#nvvm.target<chip = "sm_90">, bin = "...">]
    ```
  }];
  let options = [
    Option<"toolkitPath", "toolkit", "std::string", /*default=*/"\"\"",
           "The CUDA toolkit's root (ptxas, libdevice)">,
    Option<"compilationTarget", "format", "std::string", /*default=*/"\"fatbin\"",
           "What each module becomes: llvm (offload), isa (PTX), bin (cubin) "
           "or fatbin">,
    Option<"cmdOptions", "opts", "std::string", /*default=*/"\"\"",
           "Options for the target's tools (ptxas)">
  ];
}

def SwitchyardGpuShareKernelsPass
    : Pass<"switchyard-gpu-share-kernels", "::mlir::ModuleOp"> {
  let summary = "Launch one kernel for all the identical kernels of the outlined gpu.modules";
  let description = [{
    Runs after `gpu-kernel-outlining`. A model repeats its layers, and a
    training step contains its forward pass again: most kernels are copies
    of others. A kernel identical to one seen before (same type, same
    attributes but its name, the same body up to locations), in the same
    gpu.module or another, is erased, and its `gpu.launch_func`s launch the
    first one; a gpu.module left empty is erased. Every kernel that remains
    is lowered, compiled to PTX and assembled by ptxas once. Kernels that
    use a symbol (call a device function, say) are left alone: two calls of
    `@f` compare equal even where the `@f`s of their modules differ. The
    gpu.modules' own attributes are not compared: the pass runs before
    their targets are attached.

    Before:

    ```mlir
    gpu.module @step_kernels {
      gpu.func @step_kernel_0(%a: memref<64xf32>) kernel { ... }
      gpu.func @step_kernel_1(%a: memref<64xf32>) kernel { ... the same ... }
    }
    gpu.launch_func @step_kernels::@step_kernel_0 ... args(%x : memref<64xf32>)
    gpu.launch_func @step_kernels::@step_kernel_1 ... args(%y : memref<64xf32>)
    ```

    After:

    ```mlir
    gpu.module @step_kernels {
      gpu.func @step_kernel_0(%a: memref<64xf32>) kernel { ... }
    }
    gpu.launch_func @step_kernels::@step_kernel_0 ... args(%x : memref<64xf32>)
    gpu.launch_func @step_kernels::@step_kernel_0 ... args(%y : memref<64xf32>)
    ```
  }];
  let statistics = [
    Statistic<"numShared", "shared-kernels",
              "Kernels erased for an identical one">
  ];
}

def SwitchyardGpuTensorCoreMatmulPass
    : Pass<"switchyard-gpu-tensor-core-matmul", "::mlir::func::FuncOp"> {
  let summary = "Run matmul-like linalg ops on tensor cores (mma.sync m16n8k16)";
  let description = [{
    Runs on bufferized host functions, before
    `switchyard-linalg-to-loops{parallel=1}`. It finds the matmul-like linalg ops:
    two inputs and one f32 output on buffers, indexing maps that
    `linalg::inferContractionDims` splits into batch, M, N and K dimensions,
    and a body that is exactly `out + x * y` in f32, where `x` and `y` are
    the two inputs (f32, bf16 or f16), possibly read through `arith.extf` /
    `arith.truncf`. Accumulation is always f32.

    With `tensor-cores`, the grouped expert kernels on buffers
    (`moe.grouped_matmul` with a `tile_size` that is a multiple of 64, and
    `moe.grouped_weight_grad`) get the same mma.sync kernel: for
    `grouped_matmul` each 64-row block reads its tile's expert from
    `tile_experts` and that expert's weight as B, and a padding tile's
    blocks run no K step and store nothing; for `grouped_weight_grad` the
    grid's third dimension is the expert and K runs over its segment of
    rows. The others stay for `switchyard-lower-grouped-kernels`.

    With `tensor-cores`, `moe.flash_attention_kernel` on buffers (made by
    `convert-moe-to-linalg` `flash-attention-kernel`; it has no other
    lowering, and without `tensor-cores` it is an error) becomes the
    FlashAttention-2 forward pass on mma.sync: a block of 4 warps per 64
    query rows of one (batch, head), each warp 16 rows; the queries staged
    once into A fragments; steps of 64 keys staging K and Vᵀ (head width
    padded to a multiple of 16, rows padded by 8 elements) between
    barriers; S = Q·Kᵀ on the tensor cores, the invisible keys (causal,
    with S - T keys of memory ahead) masked to -inf; the online softmax
    per row (maxima over a quad of lanes by `gpu.shuffle xor`); O += P·V
    with P's A fragments built in registers from S's accumulator tiles
    (rounded to the element type). O / l and the logsumexp m + log l are
    stored for the rows inside T. `moe.flash_attention_grad_kernel`
    becomes FlashAttention-2's backward pass in two kernels: one block per
    64 keys for dK and dV (its K and V rows in A fragments; steps over the
    64-query blocks that see them: Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ, then
    dV += Pᵀ·dO and dK += dSᵀ·Q with Pᵀ and dSᵀ built in registers and Q,
    dO read by `ldmatrix .trans`), and one block per 64 queries for dQ
    (S, dP, dQ += dS·K); the weights P recomputed from the forward pass's
    logsumexp, P and dS rounded to the element type. With relative keys
    (`rel`), each step also multiplies the warp's 16 rows by the 80 of the
    step's 127 distances they reach (a 128-row tile of `rel`) and skews the
    products into the scores through an f32 scratch in shared memory; the
    dQ kernel adds dS·rel the same way, the dK/dV kernel adds drel with f32
    atomic adds into `rel_grad_init`. The attention kernels stage their
    rows in runs of 4 along the head width: where the head width is a
    multiple of 4 and a source is 16-byte aligned (the same host check as
    the matmuls'), each run is one vector load rounded as a vector.

    With `element-type=f32` the pass does nothing. With `bf16` or `f16`:

    - every such op has its multiplicands rounded to the element type
      (`arith.truncf` then `arith.extf` before the multiplication), so the
      SIMT fallback computes what the tensor cores compute, up to the order
      of the f32 accumulation;
    - with `tensor-cores` (sm_80 and newer), each op with exactly one M, one
      N and one K dimension, at most one batch dimension and projected
      permutation maps becomes an explicit `gpu.launch` instead. A block of
      2 x 2 warps (128 threads) computes a 64 x 64 tile of the output, each
      warp 32 x 32 of it as 2 x 4 tiles of 16 x 8; the grid is (N/64, M/64,
      batch), rounded up, so every size may be dynamic (the token count
      is). K advances 32 at a time: the block stages the A tile (64 x 32,
      M-major) and the B tile (64 x 32, N-major: Bᵀ, whatever the operand's
      layout) in dynamic shared memory (16-byte aligned, as ldmatrix needs;
      workgroup attributions are only element-aligned), rows padded to 40
      elements so that ldmatrix's eight row reads fall in distinct banks.
      Each thread stages runs of 4 elements adjacent in memory (along K, or
      along M / N where the operand is laid out that way), consecutive
      threads on consecutive runs, so a warp's loads are coalesced. Where
      a step of the block's tile lies inside the operand (a condition the
      whole block shares) and the runs are 16-byte aligned (the operand's
      last dimension of unit stride, its first element's address and its
      other strides multiples of a run: checked by host code before the
      launch, from `memref.extract_strided_metadata`), a run is one
      `vector.load` and is rounded as a vector (`cvt.rn.bf16x2.f32` on
      sm_80+). Elsewhere the factors are loaded one by one without a branch
      per element (at the nearest element inside the operand, then zero
      where it was outside). Either way they are converted to the element
      type and kept in registers: the K loop
      stores the current step's to shared memory, issues the next step's
      loads, and runs the current step on the tensor cores
      (`nvgpu.ldmatrix` x4 for A and x2 for B, no transpose: the staging
      layout is already the one `mma.sync .row.col` wants; `mma.sync
      m16n8k16` in f32, eight per warp per 16 of K). C is read the same
      way and stored with guards, so both `C = A·B` after a fill and
      `C += A·B` are right.
    - an elementwise consumer marked `switchyard.epilogue` right after such
      an op (`switchyard-mark-epilogues`: a bias, an activation, a residual
      add with dropout) is computed where the kernel stores each element
      of C (with split-K, where the last block adds the parts): its other
      inputs loaded at that element's indices, its body cloned with C's
      f32 value for C, its outputs stored; its op goes. On the SIMT and
      wgmma routes it stays, a kernel of its own.

    The lane-to-fragment and lane-to-ldmatrix-row maps come from upstream's
    `nvgpu::getLaneIdAndValueIdToOperandCoord` and
    `nvgpu::getLaneIdToLdMatrixMatrixCoord` (MMAUtils), which upstream's
    sm80 integration tests exercise on hardware; the maps are computed for
    f16 and used for bf16 too (same 16-bit layout). f16 uses
    `nvgpu.mma.sync`; bf16 uses `nvvm.mma.sync` directly, because
    `convert-nvgpu-to-nvvm` (LLVM 22) rejects bf16 `nvgpu.mma.sync`
    operands.

    Split-K: a weight gradient reduces over the tokens (K = 4096 at batch
    16 of the 47M models) into a small output (412 x 64 is 7 tiles: 7
    blocks on a GPU of 132 multiprocessors, each running 128 K steps in a
    row). Where the grid's size is static and below half of
    `split-k-blocks` (`moe.grouped_weight_grad` included: its grid has a
    batch per expert and K is a segment of about rows / experts), K is cut
    into P = clamp(K / `split-k-min`, 1, ceil(`split-k-blocks` / tiles))
    parts of whole K steps (P is computed by host code: K is usually
    dynamic); the grid's third dimension runs over batches x parts, each
    block accumulates its part from zero into a buffer of partial results
    [P, batches, M, N] (`gpu.alloc`), and the last block of each tile to
    finish adds the parts to C in part order, so results do not depend on
    scheduling: after a barrier, thread 0 fences the block's stores
    (`nvvm.memory.barrier <gpu>`, membar.gl), counts the part with an
    atomic add on the tile's counter (a zero-filled i32 buffer [batches,
    tiles], whose fill depends on nothing and merges with an earlier
    kernel) and fences again; the block that counts the P-th part learns
    it through shared memory after a barrier, fences and sums every part,
    as CUTLASS's serial split-K does with its semaphore: one loop over the
    tile's elements, consecutive threads on consecutive columns, so that
    its body (an epilogue included) is built once. No kernel of its own
    adds the parts. The f32 sums are associated differently from the
    unsplit kernel's.

    With `wgmma` as well (sm_90a only; off by default), the ops that also
    have no batch dimension and static N and K take the warpgroup route
    instead, after upstream's sm90 GEMM
    (mlir/test/Integration/GPU/CUDA/sm90/gemm_f32_f16_f16_128x128x128.mlir)
    with a ring of stages: the factors are converted into device buffers of
    the element type (A as M x K, B as K x N, row-major, rows padded to 16
    bytes as TMA's strides must be, read through views of their true
    extents; `gpu.alloc` + a `linalg.generic`, freed after the launch),
    `nvgpu.tma.create.descriptor` makes one descriptor per view on the host
    (128-byte swizzle, zero fill out of bounds: past M, N and K), and two
    warpgroups (256 threads) per 128 x 128 tile of C loop over K in steps of
    64 through a ring of up to four stages of 32 KiB of dynamic shared
    memory, one mbarrier per stage. Thread 0 loads the first stages before
    the loop (per stage: the mbarrier armed with the byte count, then three
    `nvgpu.tma.async.load`s: A's 128 x 64 box, B's two 64 x 64 boxes); each
    step waits at a barrier until both warpgroups are done with the previous
    step, lets thread 0 load the step a ring ahead into the stage that step
    freed, waits on its own stage's barrier (parity: the stage's phase), and
    each warpgroup adds its 64 rows of A times B with `nvgpu.warpgroup.mma`
    (`transposeB`, waitGroup 0) to its f32 accumulators. The accumulators go
    through shared memory (`nvgpu.warpgroup.mma.store`) and are added to C
    (or written, where C's zero fill is folded), the marked epilogue
    computed on each element, rows past M and columns past N skipped. All
    tiles start at the first 1024-byte boundary of the shared window past
    128 bytes of dynamic shared memory (computed from its address when the
    kernel runs): its declaration promises 16-byte alignment only, and
    ptxas may lay the mbarriers' static symbol over its first bytes.
    Its PTX is checked by ptxas; its kernels run in the GPU emulation
    against the CPU (test/Integration/CUDA/wgmma.test, which also runs them
    on an sm_90 GPU), and on a GPU one linear layer is compared with the
    CPU (GpuProgramTest.WgmmaMatchesTheRoundedCpuReference).

    Before:

    ```mlir
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
    ```

    After, with `element-type=bf16 tensor-cores=true` (abridged):

    ```mlir
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %n32, %gy = %m16, %gz = %c1)
               threads(%lane, %ty, %tz) in (%c32, %c1, %c1)
               dynamic_shared_memory_size %c1536_i32 {
      %smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %sa = memref.view %smem[%c0][] : ... to memref<16x16xbf16, #gpu.address_space<workgroup>>
      %sb = memref.view %smem[%c512][] : ... to memref<32x16xbf16, #gpu.address_space<workgroup>>
      // guarded loads of the C fragments
      scf.for %k0 = %c0 to %c64 step %c16 iter_args(...) {
        gpu.barrier
        // guarded, zero-filling loads of A and B, truncf to bf16, into %sa, %sb
        gpu.barrier
        %a = nvgpu.ldmatrix %sa[...] {numTiles = 4 : i32, transpose = false} ...
        %b0 = nvgpu.ldmatrix %sb[...] {numTiles = 2 : i32, transpose = false} ...
        %d0 = nvvm.mma.sync A[...] B[...] C[...] {... shape = #nvvm.shape<m = 16, n = 8, k = 16>} ...
        ...
      }
      // guarded stores of the C fragments
      gpu.terminator
    }
    ```
  }];
  let options = [
    Option<"elementType", "element-type", "std::string", /*default=*/"\"f32\"",
           "Element type of the multiplicands: f32, bf16 or f16">,
    Option<"tensorCores", "tensor-cores", "bool", /*default=*/"false",
           "Use mma.sync (sm_80 and newer); otherwise only round the "
           "multiplicands">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "With tensor-cores, use wgmma + TMA (sm_90a only) for the "
           "contractions that fit it (no batch dimension, static N and K); "
           "mma.sync for the others">,
    Option<"splitKBlocks", "split-k-blocks", "int64_t", /*default=*/"512",
           "Split K of the mma.sync kernels whose grid has fewer than half "
           "this many blocks (static sizes), into parts of at least "
           "split-k-min, aiming at this many blocks; 0: never">,
    Option<"splitKMin", "split-k-min", "int64_t", /*default=*/"256",
           "The fewest elements of K per part of a split K">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"
  ];
}

#endif // SWITCHYARD_LIB_CODEGEN_GPU_PASSES_TD
