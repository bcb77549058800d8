//===- Passes.td - Switchyard CPU code generation passes ---*- tablegen -*-===//
//
// The passes of the CPU target: register-tiled contraction kernels, loop
// order, outlined loops, math approximations and assertions in LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_CPU_PASSES_TD
#define SWITCHYARD_LIB_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def SwitchyardCpuGroupedKernelsPass
    : Pass<"switchyard-cpu-grouped-kernels", "::mlir::func::FuncOp"> {
  let summary = "Register-blocked CPU kernels for the grouped expert ops, "
                "gathering rows while packing";
  let description = [{
    Rewrites `moe.grouped_matmul` and `moe.grouped_weight_grad` on buffers
    (f32 accumulation, factors in f32: the ops of the grouped formulation
    without host reads, which the CPU's fused expert ops take) into
    register-blocked vector kernels, the CPU counterpart of the tensor-core
    kernels that gather while staging
    (`switchyard-gpu-tensor-core-matmul`). A gathered operand's rows are
    read where their routes lie, scaled by their gates and zero at a
    padding position (GroupedOperand, the ops' one definition) while they
    are copied into a panel on the stack: no sorted or gathered copy of the
    rows exists in memory, and the kernel's inner loop reads only the panel
    and the expert's weight, both with unit stride.

    `moe.grouped_matmul`: one iteration per tile of `tile_size` rows, all
    of one expert (the parallel loop, `switchyard.parallel`; padding tiles
    skip). The tile's rows are packed (`[T, A]`), then for each block of
    `columns` output columns the tile's rows, `rows` at a time, are
    accumulated in vector registers over the whole reduction: per step one
    row of the expert's weight and one scalar per row, `rows` vector FMAs.
    A transposed weight (`transpose_weight`, the input gradients) is copied
    once per op into `[E, A, C]` order (`linalg.transpose`), so that its
    rows are unit-stride too. Columns past the end are masked; a static
    width whose last block is at most half full ends in a block half as
    wide.

    `moe.grouped_weight_grad`: one iteration per expert (parallel); its
    segment is taken in chunks of routes that fit `panel-kib` KiB, each
    chunk's rows of both operands packed (`[chunk, A]`, `[chunk, C]`),
    then each `rows` × `columns` tile of the expert's `[A, C]` gradient
    accumulates over the chunk in registers. The summation order over
    routes is the segment's, whatever the number of threads.

    Before (the value projection's products, T = 8, 412 → 76):

    ```mlir
    moe.grouped_matmul ins(%x, %w, %te : memref<1024x412xf32>,
        memref<10x412x76xf32>, memref<?xindex>) gather(%order : memref<?xindex>)
        routes_per_row(6) outs(%p : memref<?x76xf32>) tile_size(8)
    ```

    After (with `rows=8 columns=32`):

    ```mlir
    scf.for %t = %c0 to %tiles step %c1 {
      %e = memref.load %te[%t]
      scf.if %e < %c10 {
        %panel = memref.alloca() : memref<8x412xf32>
        scf.for %r = %c0 to %c8 step %c1 {      // gather while packing
          %route = memref.load %order[%t * 8 + %r]
          scf.for %a = %c0 to %c412 step %c1 {
            %v = memref.load %x[%route / 6, %a]
            memref.store (%route < R ? %v : 0), %panel[%r, %a]
          }
        }
        scf.for %c0 = %c0 to %c64 step %c32 {   // then 64 to 76, 16 wide
          %acc0 = vector.transfer_read %p[%t * 8, %c0] : vector<32xf32>
          ...
          %r:8 = scf.for %a = %c0 to %c412 step %c1 iter_args(...) {
            %w = vector.transfer_read %w[%e, %a, %c0] : vector<32xf32>
            %s0 = memref.load %panel[%c0, %a]
            %n0 = vector.fma (broadcast %s0), %w, %acc0 : vector<32xf32>
            ...
          }
          vector.transfer_write %r#0, %p[%t * 8, %c0]
          ...
        }
      }
    } {switchyard.parallel}
    ```

    Ops whose factors are rounded (the CPU reference of the GPU's bf16/f16
    route) are left to `switchyard-lower-grouped-kernels`, which rounds
    them as the tensor cores do.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
  let options = [
    Option<"rows", "rows", "int64_t", /*default=*/"8",
           "Output rows per register tile">,
    Option<"columns", "columns", "int64_t", /*default=*/"32",
           "Output columns per register tile (the vector width of a row)">,
    Option<"panelKiB", "panel-kib", "int64_t", /*default=*/"256",
           "Size of the weight gradient's packed chunk of both operands, "
           "in KiB">,
  ];
}

def SwitchyardCpuContractionKernelsPass
    : Pass<"switchyard-cpu-contraction-kernels", "::mlir::func::FuncOp"> {
  let summary = "Register-blocked vector kernels for matmul-like linalg ops on the CPU";
  let description = [{
    Rewrites each matmul-like linalg op on buffers (`out += a * b` over one
    or more reduction dimensions, f32 accumulation; the ops that
    `switchyard-gpu-tensor-core-matmul` also takes) into an explicit
    register-blocked kernel: the output's last (unit-stride) dimension `n`
    is the vector dimension and a tile of `rows` × `columns` outputs (one
    row per index of an `m` dimension, the last of `a`'s output dimensions)
    is accumulated in vector registers over the whole reduction. Each step
    of the reduction loads one `columns`-wide row of `b` and `rows` scalars
    of `a`, and issues `rows` vector FMAs, so that every element loaded
    feeds several multiply-adds; the output tile is read and written once.
    The tile is the target's (`cpuKernelTile`, lib/Pipelines/Pipelines.h:
    two vectors of columns per row and as many rows as leave four vector
    registers free; the runtime asks LLVM's cost model of the host, the
    CPU pipeline takes `vector-bits` and `vector-registers`): 8 × 32 f32 on
    AVX-512, 6 × 16 on AVX2, whose 16 registers would spill the former's
    accumulators.
    Rows past the last multiple of `rows` are done one at a time, columns
    past the end of `n` are masked. Where a static `n` leaves its last tile
    at most half full, that tile is half as wide (`n` = 76 with 32 columns:
    tiles of 32, 32 and 16, not a third of 32 with 20 lanes masked), so
    that fewer multiply-adds go to the padding; each output element's sum
    is the same either way.

    With one reduction dimension (every matmul, batched or not), or several
    where `a` is packed too (below; they are then taken as one, in their
    linear order), `b` is packed, as BLIS and OpenBLAS do: the columns are taken in blocks, the
    reduction in chunks, and each block's chunk of `b` is first copied into
    a panel on the stack, tile after tile, each tile's rows contiguous, so
    that the kernel reads one stream with no stride, whatever `b`'s layout
    (`Y = X·Wᵀ`, `QKᵀ`: W's rows are read along the reduction and stored
    across). Past the end of `n` the panel holds zeros. Where the tile's
    scalars of `a` are not consecutive along the reduction (`dW = dYᵀ·X`:
    a row of dY per step, the tile's rows side by side in it), each row tile
    also copies its `rows` columns of `a`, step by step, into a small panel
    first. The chunk keeps a panel of four tiles within `panel-kib` KiB
    (512 steps at 256 KiB and 32 f32 columns; the output tile is read and
    written once per chunk); the block is as many tiles as the chunk's
    panel allows in `panel-kib` KiB, so that it stays in the core's L2
    cache while every row tile runs over it, and no more than leave eight
    blocks where the blocks' loop is the parallel one. Where `a` is copied
    too and all of `n` fits a panel of 32 steps, the loops turn around:
    groups of 8 row tiles outermost, each over all of `n` with chunks as
    long as the panel allows, so that each part of `a` is copied once
    rather than once per block. The panels are freed at the end of each
    block or group (a stack save and restore). With several reduction
    dimensions and `a` read along the last of them, `b` is read where it
    is, after a transposed copy (`linalg.transpose` into a new buffer)
    where its last index is not `n`.

    A `linalg.fill` of +0.0 into the op's output right before it (only ops
    without memory effects between; `switchyard-outline-ops
    {fills-with-users}` keeps the two in one function) is folded: each tile
    starts from zero vectors in the first chunk of the reduction instead of
    reading back the zeros, which saves the fill's pass over the output and
    the first read of each tile. Where the reduction's length is dynamic
    the fill stays, run only when that length is 0 (no tile is written).

    The outermost loop (a batch dimension of the output, else the blocks of
    columns or the groups of rows) writes its own part of the output in
    each iteration and is
    marked `switchyard.parallel`, to run on all cores
    (`switchyard-cpu-outline-loops`); each iteration packs its own panels.
    Ops whose output row is shorter than `min-columns` (statically), or
    whose output's last dimension is not unit-stride, are left to
    `switchyard-cpu-loop-order`. The summation order differs from the
    loops': each product is a fused multiply-add, and every f32 order is a
    valid one (docs/Semantics.md fixes none).

    Before (`Y[t, o] = Σ_i X[t, i] · W[o, i]`):

    ```mlir
    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                     affine_map<(d0, d1, d2) -> (d1, d2)>,
                                     affine_map<(d0, d1, d2) -> (d0, d1)>],
                    iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : memref<512x412xf32>, memref<2080x412xf32>)
        outs(%y : memref<512x2080xf32>) {...}
    ```

    After (with `rows=8 columns=32`: chunks of 412 steps, blocks of 4 tiles):

    ```mlir
    scf.for %nb = %c0 to %c2080 step %c128 {
      %stack = llvm.intr.stacksave : !llvm.ptr
      %panel = memref.alloca() : memref<4x412x32xf32>   // 206 KiB
      scf.for %k0 = %c0 to %c412 step %c412 {
        scf.for %o = %nb to %nb_end step %c1 {          // the packing
          scf.for %kk = %c0 to %len step %c1 {
            %w = memref.load %w[%o, %k0 + %kk]
            memref.store %w, %panel[(%o - %nb) / 32, %kk, (%o - %nb) % 32]
          }
        }
        scf.for %t0 = %c0 to %c512 step %c8 {
          scf.for %o0 = %nb to %nb_end step %c32 {
            %acc0 = vector.transfer_read %y[%t0, %o0] ... : vector<32xf32>
            ...  // 8 rows
            %r:8 = scf.for %kk = %c0 to %len step %c1 iter_args(...) {
              %b = vector.transfer_read %panel[%j, %kk, %c0] : vector<32xf32>
              %a0 = memref.load %x[%t0, %k0 + %kk]
              %s0 = vector.broadcast %a0 : f32 to vector<32xf32>
              %n0 = vector.fma %s0, %b, %acc0 : vector<32xf32>
              ...
            }
            vector.transfer_write %r#0, %y[%t0, %o0] ...
          }
        }
      }
      llvm.intr.stackrestore %stack : !llvm.ptr
    } {switchyard.parallel}
    ```
  }];
  let options = [
    Option<"rows", "rows", "int64_t", /*default=*/"8",
           "Output rows per register tile (values of the m dimension)">,
    Option<"columns", "columns", "int64_t", /*default=*/"32",
           "Output columns per register tile (the vector width of a row)">,
    Option<"minColumns", "min-columns", "int64_t", /*default=*/"16",
           "Leave ops whose static output row is shorter than this to "
           "switchyard-cpu-loop-order">,
    Option<"panelKiB", "panel-kib", "int64_t", /*default=*/"256",
           "Size of b's panel (a chunk of the reduction × a block of "
           "columns) that the row tiles share, in KiB: about a quarter of a "
           "core's L2 cache">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def SwitchyardConvertAssertToLLVMPass
    : Pass<"switchyard-convert-assert-to-llvm", "::mlir::ModuleOp"> {
  let summary = "Lower cf.assert as upstream does, in linear time";
  let description = [{
    Replaces each `cf.assert` with what upstream's lowering emits: a
    conditional branch to a block that prints the message with `puts` and
    calls `abort`. The message is a private constant global, one per
    distinct message. Upstream's lowering (`convert-cf-to-llvm`) checks
    each new global's name by walking the module, which takes time
    quadratic in the number of assertions; the GPU emulation's bounds
    checks (`generate-runtime-verification`) make thousands. Runs before
    `convert-cf-to-llvm` (which lowers the branches) in the CPU target's
    last stages; an assertion in a single-block region is an error.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def SwitchyardCpuOutlineLoopsPass
    : Pass<"switchyard-cpu-outline-loops", "::mlir::ModuleOp"> {
  let summary = "Outline every top-level loop nest of a CPU function into a function of its own";
  let description = [{
    Moves each `scf.for` nest directly in a function's body (a kernel of
    `switchyard-cpu-contraction-kernels`, the loops of a linalg op) into a
    new private function marked `noinline`, called in its place, with the
    constants it uses cloned in and everything else it uses passed as
    arguments. A training step is one function of thousands of loop nests;
    LLVM's optimisations and register allocation grow faster than linearly
    with a function's size, so compiling many small functions is far faster
    (docs/Performance.md, "Compile times") at the cost of one call per loop
    nest.

    A loop nest identical to one outlined before (the same operations,
    attributes and types, up to locations), in the same function or
    another, calls that function instead of getting a copy of it. A model
    repeats its layers, and a training step contains its forward pass
    again: the tiny SwitchHead model's training step's 2,854 loop nests
    become 236 functions.
    Runtime checks (`cf.assert`: the GPU emulation's bounds checks) name
    their op and its location in their message, so the copies of a nest
    (each layer's) differ in those alone: they are compared without the
    messages, and each check of the shared function gives the distinct
    messages of all the copies it stands for. In the GPU emulation, the
    tiny SwitchHead model's bf16 gradient's 598 nests become 85 functions.

    A function that nothing in the module calls, or that only such
    straight-line functions call (an entry point; a training step calls its
    gradient function, which calls each block's forward and backward
    functions), left without loops, straight-line code
    that runs once per call (allocations, calls to its loop nests, frees),
    and its C interface wrapper are then marked `noinline` and `optnone`,
    so that LLVM handles them as at -O0: its instruction selection and
    schedulers take longer on one block of thousands of instructions than
    on all the loop nests together, and optimising them buys nothing (the
    runtime's IR pipeline skips optnone functions, as clang's does). They
    are also marked `noimplicitfloat`, which turns off the SLP vectorizer:
    on the kernel argument stores of a GPU model's host code, one block, it
    takes most of the compile time.
    Functions that keep a loop, and functions called from one that does,
    keep their optimisations.

    The static stack allocations in a nest (an iteration's temporaries,
    from `switchyard-cpu-forall-to-loops`) move to the entry of its
    function: one per call (each chunk of a parallel loop has its own),
    reused by the iterations, which write them before they read them, and
    where LLVM promotes them to registers; in the loop they would grow the
    stack with every iteration.

    A nest whose outermost loop is marked `switchyard.parallel` (its
    iterations are independent: `switchyard-linalg-to-loops` with
    `mark-parallel`, `switchyard-cpu-contraction-kernels`) and has a
    constant step takes that loop's bounds as its first two arguments, and
    its `passthrough` names the step (`["switchyard-parallel-for", "<step>"]`):
    the runtime's JIT then runs chunks of the iterations on all cores
    (`dispatchParallelLoops`, lib/Target/LLVMIR/JitPreparation.h); called
    directly, the function runs them all.

    Before:

    ```mlir
    func.func @step(%a: memref<64xf32>) {
      %c0 = arith.constant 0 : index
      %c64 = arith.constant 64 : index
      %c1 = arith.constant 1 : index
      scf.for %i = %c0 to %c64 step %c1 { ... %a ... }
      return
    }
    ```

    After:

    ```mlir
    func.func private @step_loop0(%a: memref<64xf32>) attributes {passthrough = ["noinline"]} {
      %c0 = arith.constant 0 : index
      ...
      scf.for %i = %c0 to %c64 step %c1 { ... %a ... }
      return
    }
    func.func @step(%a: memref<64xf32>) attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]} {
      call @step_loop0(%a) : (memref<64xf32>) -> ()
      return
    }
    ```

    With the loop marked `{switchyard.parallel}`:

    ```mlir
    func.func private @step_loop0(%lo: index, %hi: index, %a: memref<64xf32>)
        attributes {passthrough = ["noinline", ["switchyard-parallel-for", "1"]]} {
      %c1 = arith.constant 1 : index
      scf.for %i = %lo to %hi step %c1 { ... %a ... }
      return
    }
    func.func @step(%a: memref<64xf32>) attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]} {
      %c0 = arith.constant 0 : index
      %c64 = arith.constant 64 : index
      call @step_loop0(%c0, %c64, %a) : (index, index, memref<64xf32>) -> ()
      return
    }
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect"];
}

def SwitchyardCpuBarePointerCallsPass
    : Pass<"switchyard-cpu-bare-pointer-calls", "::mlir::ModuleOp"> {
  let summary = "Pass static buffers between the compiled functions as bare pointers";
  let description = [{
    Marks `llvm.bareptr` (upstream's bare-pointer calling convention, which
    `convert-func-to-llvm` applies per function and at each call of it) on
    every private function with a body whose memref arguments and results
    all have a static shape and the identity layout, and whose uses are all
    `func.call`s. Such a memref then crosses the call as its aligned
    pointer (one value) instead of a descriptor of 3 + 2·rank values, and
    the callee and caller rebuild the rest from the type.

    The optimizer functions of a training step (`<layer>_adamw`,
    `<layer>_sum_squares`, from `lm-build-train-step`) take and return a
    layer's parameters, gradients and moments, all static: per layer about
    a hundred descriptors, whose fields the step moved one by one through
    registers and frames (docs/Performance.md, "Compile times"). Functions
    that take a batch of activations (`?` in their shapes) keep
    descriptors.

    Before:

    ```mlir
    func.func private @m__ffn_adamw(%hyper: memref<8xf32>, %p: memref<32x16xf32>, ...)
        -> (memref<32x16xf32>, ...)
    func.func private @m__ffn(%x: memref<?x4x16xf32>, ...) -> memref<?x4x16xf32>
    ```

    After:

    ```mlir
    func.func private @m__ffn_adamw(%hyper: memref<8xf32>, %p: memref<32x16xf32>, ...)
        -> (memref<32x16xf32>, ...) attributes {llvm.bareptr}
    func.func private @m__ffn(%x: memref<?x4x16xf32>, ...) -> memref<?x4x16xf32>
    ```

    A returned memref is rebuilt with its allocated pointer equal to its
    aligned one, so the buffers that functions return must begin where they
    were allocated: the pipeline lowers `memref.alloc` to `aligned_alloc`
    (`finalize-memref-to-llvm{use-aligned-alloc}`), and the
    ownership-based deallocation returns only buffers the function
    allocated (views and arguments are copied first).
  }];
}

def SwitchyardCpuMathApproximationPass
    : Pass<"switchyard-cpu-math-approximation", "::mlir::func::FuncOp"> {
  let summary = "Replace f32 exp and log with MLIR's polynomial approximations on the CPU";
  let description = [{
    `math.exp` and `math.log` on f32 (scalars and vectors) become upstream
    MLIR's polynomial approximations (`populateMathPolynomialApproximation
    Patterns`: Cephes' range reduction and polynomials, a few ulp), plain
    arithmetic that LLVM vectorizes, instead of calls to libm's `expf` and
    `logf`, which the loop vectorizer cannot vectorize without a vector
    math library, and which sit on the critical path of every softmax,
    sigmoid and cross-entropy. exp(-inf) stays 0 (inputs are clamped to
    where 2^n is 0), log(0) is -inf, log of a negative number NaN.
    CPU pipeline only; the GPU target keeps libdevice's functions.

    Before:

    ```mlir
    %e = math.exp %x : f32
    ```

    After: an `arith` and `math.fma` polynomial with no call.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def SwitchyardCpuForallToLoopsPass
    : Pass<"switchyard-cpu-forall-to-loops", "::mlir::func::FuncOp"> {
  let summary = "Bufferized scf.forall as nested scf.for, the outermost parallel";
  let description = [{
    Rewrites each `scf.forall` on buffers into nested `scf.for` loops, one
    per dimension (upstream's `scf::forallToForLoop`), and marks the
    outermost `switchyard.parallel`, to run on all cores
    (`switchyard-cpu-outline-loops`, where it is a function's top-level
    loop): a forall's iterations are independent by definition, each
    writing its own part of the shared outputs. On the CPU the foralls are
    the grouped expert formulation's loop over the experts (each expert's
    block of sorted rows, or its own weight gradient) and the fused row
    kernels (one iteration per row or per query block) and the loops over
    rows of `switchyard-fuse-rows`. A forall nested in another runs inline
    in its parent's iterations. An iteration's temporaries (static
    allocations in the body, up to 16 KiB each: a row's statistics) go on
    the stack instead of the heap (an allocation per row cost more than
    the row's work); `switchyard-cpu-outline-loops` moves them to the entry
    of the loop's function.

    Before:

    ```mlir
    scf.forall (%e) in (10) {
      ...  // expert %e's rows of %out
    }
    ```

    After:

    ```mlir
    scf.for %e = %c0 to %c10 step %c1 {
      ...
    } {switchyard.parallel}
    ```

    A forall that still has results (not bufferized) is an error.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

def SwitchyardCpuLoopOrderPass
    : Pass<"switchyard-cpu-loop-order", "::mlir::func::FuncOp"> {
  let summary = "Nest linalg loops for unit-stride vector code on the CPU";
  let description = [{
    `switchyard-linalg-to-loops` (as upstream's `convert-linalg-to-loops`)
    nests the loops in the order of the iteration dimensions, and a
    matmul's `(m, n, k)` puts its reduction innermost, where `A·B` reads B
    down a column. This pass moves innermost the dimension whose accesses
    (operands, and loads in the body whose last subscript is a loop's
    `linalg.index`: gathers) cost least when it moves fastest: 8 for an
    access it strides through (a gather per vector lane), 1 for one it
    walks along its last (unit-stride) index, 0 for one it leaves in place
    (hoisted), and 8 more for a loop of fewer than 8 static iterations,
    which is no vector loop (a route's k choices); a parallel one on a tie, keeping the others in their order,
    so that LLVM's loop vectorizer sees contiguous rows: `dX = dY·W` and
    `dW = dYᵀ·X` become row updates (axpy), `Y = X·Wᵀ` a dot product of
    two rows, a softmax's `Σ_v exp(x[t, v] − m[t])` a sum along each row.
    The additions of every reduction (a single-loop one too: a row's sum
    in the loops over rows of `switchyard-fuse-rows`) are marked
    `reassoc`, so that a dot product is vectorized (any f32 summation order
    is valid; docs/Semantics.md fixes none). CPU pipeline only; named ops that need it are generalized first.

    Before (`dX[n, i] = Σ_o dY[n, o] · W[o, i]`):

    ```mlir
    linalg.matmul ins(%dy, %w : memref<512x152xf32>, memref<152x412xf32>)
                  outs(%dx : memref<512x412xf32>)
    ```

    After (loops n, o, i):

    ```mlir
    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>,
                                     affine_map<(d0, d1, d2) -> (d1, d2)>,
                                     affine_map<(d0, d1, d2) -> (d0, d2)>],
                    iterator_types = ["parallel", "reduction", "parallel"]} ...
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect"];
}

#endif // SWITCHYARD_LIB_CODEGEN_CPU_PASSES_TD
