//===- Passes.td - Switchyard common code generation passes -*- tablegen -*-===//
//
// The passes shared by the CPU and GPU targets: the input checks, the fusion
// of elementwise ops, the lowering of linalg to loops, the rounding of
// contraction factors and the grouped expert kernels.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_PASSES_TD
#define SWITCHYARD_LIB_CODEGEN_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

def SwitchyardCheckInputPass
    : Pass<"switchyard-check-input", "::mlir::ModuleOp"> {
  let summary = "Refuse input that the pipelines' upstream patterns assume "
                "away";
  let description = [{
    The first pass of every Switchyard pipeline: finds what the upstream
    verifiers accept but upstream rewrites take for impossible, and reports
    each with an error instead of letting a later canonicalization crash:

    - `tensor.dim` and `memref.dim` with a constant index outside
      `[0, rank)` (upstream folds the dimension of a value it knows by
      indexing its shape with it).
    - `tensor.expand_shape` whose static `output_shape` disagrees with its
      result type (the tensor verifier accepts it; the `memref.expand_shape`
      bufferization makes of it is invalid).

    ```mlir
    %c = arith.constant -2 : index
    // error: 'tensor.dim' op index -2 is outside the dimensions of its
    // tensor<?x4xf32> operand (0 to 1)
    %d = tensor.dim %t, %c : tensor<?x4xf32>
    ```

    Valid input passes through unchanged.
  }];
}

def SwitchyardFuseElementwisePass
    : Pass<"switchyard-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "Fuse elementwise linalg ops on tensors into the ops that "
                "read them";
  let description = [{
    Fuses `linalg.generic` ops on tensors whose loops are all parallel into
    the generic ops that read their results, with upstream's elementwise
    fusion (`linalg::fuseElementwiseOps`): one loop nest (on the GPU, one
    kernel) instead of one per op, and no trip through memory between them.
    Runs after the lowering to linalg (the layers' forward, gradient and
    optimizer functions are all there), before bufferization; both targets
    (`--fuse` names it `elementwise`).

    A producer goes into a consumer that reads it at the same points (a
    permutation of the consumer's loops) when the consumer replaces it
    entirely: every other user of the producer comes after the consumer and
    reads the producer's elements as another result of the fused op (so the
    consumer's loops must all be parallel). A producer that a consumer reads
    in a larger iteration space (a row's mean read by every element of the
    row) is computed again per element, by a copy for each such consumer,
    if it is cheap: at most four operations (arithmetic or math functions),
    no loops, no reads of other tensors.
    Left alone:

    - matmul-like consumers (`linalg::isaContractionOpInterface`): the
      CPU's register-blocked kernels and the GPU's tensor-core kernels take
      plain factors;
    - producers that gather (`tensor.extract` in their body): the consumer's
      loops vectorize on the CPU, a gather's indexed reads do not;
    - a producer that an op before the consumer also reads: fusing it would
      compute it twice.

    Before:

    ```mlir
    %a = linalg.generic {indexing_maps = [#id, #id, #id],
                         iterator_types = ["parallel", "parallel"]}
        ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>)
        outs(%e : tensor<4x8xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %s = arith.addf %p, %q : f32
      linalg.yield %s : f32
    } -> tensor<4x8xf32>
    %b = linalg.generic {indexing_maps = [#id, #id],
                         iterator_types = ["parallel", "parallel"]}
        ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%p: f32, %o: f32):
      %s = math.exp %p : f32
      linalg.yield %s : f32
    } -> tensor<4x8xf32>
    return %b, %a : tensor<4x8xf32>, tensor<4x8xf32>
    ```

    After:

    ```mlir
    %f:2 = linalg.generic {indexing_maps = [#id, #id, #id, #id],
                           iterator_types = ["parallel", "parallel"]}
        ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>)
        outs(%e, %e : tensor<4x8xf32>, tensor<4x8xf32>) {
    ^bb0(%p: f32, %q: f32, %o: f32, %o2: f32):
      %s = arith.addf %p, %q : f32
      %t = math.exp %s : f32
      linalg.yield %s, %t : f32, f32
    } -> (tensor<4x8xf32>, tensor<4x8xf32>)
    return %f#1, %f#0 : tensor<4x8xf32>, tensor<4x8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def SwitchyardFuseRowsPass
    : Pass<"switchyard-fuse-rows", "::mlir::ModuleOp"> {
  let summary = "Fuse row reductions and the ops around them into one loop "
                "over rows";
  let description = [{
    Gathers a row reduction (a `linalg.generic` whose leading loops are
    parallel, its trailing loops reductions, its result indexed by the
    leading loops) and the ops after it that read its rows (or the rows of
    another op of the group) into one `scf.forall` over the rows: layer
    norm's mean, variance and normalisation, its gradient's two row sums
    and the update that reads them, softmax's maximum, sum and division.
    Each op of the group becomes the same op on one row (its row dimensions
    sliced away), the rows' results are inserted into full-sized results,
    and the fills an op starts from are made per row inside the loop; an
    op with only parallel loops that does not read its init starts from a
    fresh tensor (so that bufferization does not copy the init into the
    loop's result first: the residual gradient a layer norm's backward
    pass adds to).
    Runs on tensors, after the lowering to linalg and the elementwise
    fusion (`--fuse` names it `rows`).

    The forall carries a `#gpu.block<linear_dim_i>` mapping:
    `switchyard-gpu-row-kernels` gives each row a thread block, whose
    threads share the row's elements and reduce through shared memory
    (one kernel instead of one per op). On the CPU
    `switchyard-cpu-forall-to-loops` makes it a loop over rows on all
    cores, each op's pass over a row following the last while the row is
    in cache. Its results are those of the ops it replaces.

    A small reduction to one value (a static tensor of at most 8192
    elements: a norm weight's sum of squares for the gradient norm) is a
    group without rows, a loop of one iteration: on the GPU one thread block
    instead of one thread; reductions of that kind and scalar ops after it
    join it. Larger ones are split first
    (`switchyard-split-whole-reductions`) into rows and a small one.

    An op joins the group when its leading loops are parallel and as many
    as the group's rows, of the same sizes; it reads a result of the group
    through a map that starts with those loops; every other operand's map
    uses a row loop only as a whole index; and its body reads no indices
    and no other tensors. An op outside the group that reads a result of
    the group ends it (the group's loop comes before that op). Matmuls
    stay out (the targets' matmul kernels take them); a product with a
    vector, such as a row's dot product with a norm's weight, joins.

    Before:

    ```mlir
    %sum = linalg.generic {indexing_maps = [#id, #rows],
                           iterator_types = ["parallel", "reduction"]}
        ins(%x : tensor<4x8xf32>) outs(%zero : tensor<4xf32>) {...}
    %y = linalg.generic {indexing_maps = [#id, #rows, #id],
                         iterator_types = ["parallel", "parallel"]}
        ins(%x, %sum : tensor<4x8xf32>, tensor<4xf32>)
        outs(%e : tensor<4x8xf32>) {...}
    ```

    After:

    ```mlir
    %r:2 = scf.forall (%i) in (4) shared_outs(%s = %e0, %o = %e)
        -> (tensor<4xf32>, tensor<4x8xf32>) {
      %xi = tensor.extract_slice %x[%i, 0] [1, 8] [1, 1]
          : tensor<4x8xf32> to tensor<8xf32>
      %si = tensor.extract_slice %s[%i] [1] [1] : tensor<4xf32> to tensor<f32>
      %zi = linalg.fill ins(%c0 : f32) outs(%si : tensor<f32>) -> tensor<f32>
      %sum = linalg.generic {...} ins(%xi : tensor<8xf32>)
          outs(%zi : tensor<f32>) {...}
      %oi = tensor.extract_slice %o[%i, 0] [1, 8] [1, 1]
          : tensor<4x8xf32> to tensor<8xf32>
      %y = linalg.generic {...} ins(%xi, %sum : tensor<8xf32>, tensor<f32>)
          outs(%oi : tensor<8xf32>) {...}
      scf.forall.in_parallel {
        tensor.parallel_insert_slice %sum into %s[%i] [1] [1] ...
        tensor.parallel_insert_slice %y into %o[%i, 0] [1, 8] [1, 1] ...
      }
    } {mapping = [#gpu.block<linear_dim_0>]}
    ```
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def SwitchyardSplitWholeReductionsPass
    : Pass<"switchyard-split-whole-reductions", "::mlir::ModuleOp"> {
  let summary = "Split reductions of large tensors to one value by rows";
  let description = [{
    A reduction of a whole static tensor to one value (a gradient's sum of
    squares for the global norm) with more than `max-unsplit` elements
    becomes two: the same reduction over rows of consecutive elements, each
    row to one partial result, then the combination of the partial results
    into the op's output. The rows are the input's elements in order,
    reshaped to `[rows, columns]` (a view once in buffers); `rows` is the
    divisor of the element count nearest to elements / `row-elements`
    with rows of at least 1024 elements (a count with no such divisor is
    left alone). `switchyard-fuse-rows` then gives each row a thread block
    and the combination of at most 8192 results one block: two kernels
    with every thread busy, where the reduction was a chain of partial sums
    over the leading dimension and a final sum by one thread.

    Split: `linalg.generic` on tensors whose loops are all reductions over
    static sizes, every input read whole in loop order, a body without
    indices or regions whose result combines the accumulator (read once)
    with one other value through a single op with a neutral element
    (`arith.addf`, `arith.maximumf`, ...). The combination order changes:
    floating-point sums are reassociated. Runs before `switchyard-fuse-rows`
    (`--fuse rows`).

    Before:

    ```mlir
    %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                          affine_map<(d0, d1) -> ()>],
                         iterator_types = ["reduction", "reduction"]}
        ins(%g : tensor<152x412xf32>) outs(%zero : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %sq = arith.mulf %in, %in : f32
      %r = arith.addf %out, %sq : f32
      linalg.yield %r : f32
    } -> tensor<f32>
    ```

    After:

    ```mlir
    %flat = tensor.collapse_shape %g [[0, 1]]
        : tensor<152x412xf32> into tensor<62624xf32>
    %rows = tensor.expand_shape %flat [[0, 1]] output_shape [16, 3914]
        : tensor<62624xf32> into tensor<16x3914xf32>
    %init = linalg.fill ins(%c0 : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
    %p = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                          affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
        ins(%rows : tensor<16x3914xf32>) outs(%init : tensor<16xf32>) {
      ... the same body ...
    } -> tensor<16xf32>
    %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>,
                                          affine_map<(d0) -> ()>],
                         iterator_types = ["reduction"]}
        ins(%p : tensor<16xf32>) outs(%zero : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.addf %out, %in : f32
      linalg.yield %r : f32
    } -> tensor<f32>
    ```
  }];
  let options = [
    Option<"maxUnsplit", "max-unsplit", "int64_t",
           /*default=*/"::mlir::switchyard::kMaxBlockReduction",
           "Leave reductions of at most this many elements whole "
           "(switchyard-fuse-rows gives them one thread block)">,
    Option<"rowElements", "row-elements", "int64_t", /*default=*/"4096",
           "The number of elements per row to aim for">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def SwitchyardRematerializeFillsPass
    : Pass<"switchyard-rematerialize-fills", "::mlir::ModuleOp"> {
  let summary = "One linalg.fill (one tensor.empty) per op that takes it as "
                "its initial value";
  let description = [{
    Runs on tensors, right before bufferization (the GPU pipeline's; on
    the CPU the copies are cheap). CSE merges identical
    fills, so the zeros that several reductions start from are one
    `linalg.fill` whose result several ops take as their init operand;
    one-shot bufferization then fills one buffer and, for each op but the
    last, allocates another and copies the filled one into it (a kernel per
    copy on the GPU). This pass gives every such op but the first a fill of
    its own, with a `tensor.empty` of its own, right before it: each op's
    buffer is filled where it is written, and `switchyard-outline-ops`
    (`fills-with-users`) can hand the fill to the op's kernel.

    Likewise a `tensor.empty` that several `scf.forall` loops take as
    shared outputs (CSE merges the row loops' equal empty outputs) is
    cloned before each loop but the first. One-shot bufferization would
    write them all into one buffer, one loop after the other, and the
    kernels of independent loops (the partial sums of two gradients'
    squares) could not be launched together
    (`switchyard-gpu-merge-launches`).

    Before:

    ```mlir
    %e = tensor.empty() : tensor<f32>
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
    %a = linalg.generic {...} ins(%x : tensor<8xf32>) outs(%z : tensor<f32>) {...}
    %b = linalg.generic {...} ins(%y : tensor<8xf32>) outs(%z : tensor<f32>) {...}
    ```

    After:

    ```mlir
    %e = tensor.empty() : tensor<f32>
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
    %a = linalg.generic {...} ins(%x : tensor<8xf32>) outs(%z : tensor<f32>) {...}
    %e1 = tensor.empty() : tensor<f32>
    %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<f32>) -> tensor<f32>
    %b = linalg.generic {...} ins(%y : tensor<8xf32>) outs(%z1 : tensor<f32>) {...}
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def SwitchyardMarkEpiloguesPass
    : Pass<"switchyard-mark-epilogues", "::mlir::func::FuncOp"> {
  let summary = "Mark the elementwise consumers of contractions that their "
                "kernels can compute as they store";
  let description = [{
    Runs on buffers, before `switchyard-outline-ops`. A matmul's result is
    usually read once, element by element, by the elementwise op after it:
    a bias, an activation, a residual add with dropout. As separate kernels
    the second reads back what the first just wrote. This pass marks such a
    consumer with `switchyard.epilogue`, and
    `switchyard-gpu-tensor-core-matmul` computes it in the matmul kernel's
    stores (or, with split-K, where the last block adds the parts), one kernel
    and one trip through memory fewer.

    Marked, for a contraction directly in a function's body (one nested in
    a loop, a row group's dot product, becomes part of another kernel): a
    `linalg.generic` whose loops are all parallel, one per dimension of the
    contraction's output `C`, that reads `C` at its loop
    indices and writes its outputs through permutations, its body without
    memory effects or regions (`switchyard::isElementwiseEpilogue`), and
    the first op after the contraction that reads `C`, with only
    allocations, ops without memory effects, loads of buffers that nothing
    between writes (a dropout seed), and linalg ops that neither touch `C`
    nor write what the consumer reads or read what it writes between them (a feed-forward layer's backward computes a weight
    gradient between its two matmuls). Where it reads an
    `memref.expand_shape` of `C` (a `[tokens, features]` product read as
    `[batch, sequence, features]`), its loops are first collapsed to `C`'s
    (`linalg::collapseOpIterationDims`; `linalg.index` becomes a
    delinearization). The allocations, ops without memory effects and
    loads between the two move before the contraction (and its zero fill),
    and the consumer moves right after it.

    The fused kernel writes an element of an output while other blocks still
    compute theirs, so the pass proves that no access changes meaning: `C`
    is an allocation of the function (nothing else names it) that the
    consumer reads only at the loop indices, and every output is `C` itself
    or another allocation of the function, not a factor of the contraction,
    read by the consumer (if at all) only where it writes it. Every buffer
    involved (the two ops' and the commuted ops') must be a view of an
    allocation or of an argument: a buffer that another op picks
    (`arith.select`, `scf.if`, a call) may be `C`, and the commuted ops'
    bodies must not access memory of their own.

    Before:

    ```mlir
    linalg.fill ins(%zero : f32) outs(%c : memref<?x2080xf32>)
    linalg.matmul_transpose_b ins(%x, %w : memref<?x412xf32>, memref<2080x412xf32>)
                              outs(%c : memref<?x2080xf32>)
    %h = memref.alloc(%n) : memref<?x2080xf32>
    linalg.generic {indexing_maps = [#id, #id],
                    iterator_types = ["parallel", "parallel"]}
        ins(%c : memref<?x2080xf32>) outs(%h : memref<?x2080xf32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.maximumf %in, %zero : f32
      linalg.yield %r : f32
    }
    ```

    After:

    ```mlir
    %h = memref.alloc(%n) : memref<?x2080xf32>
    linalg.fill ins(%zero : f32) outs(%c : memref<?x2080xf32>)
    linalg.matmul_transpose_b ins(%x, %w : memref<?x412xf32>, memref<2080x412xf32>)
                              outs(%c : memref<?x2080xf32>)
    linalg.generic {indexing_maps = [#id, #id],
                    iterator_types = ["parallel", "parallel"]}
        ins(%c : memref<?x2080xf32>) outs(%h : memref<?x2080xf32>)
        attrs = {switchyard.epilogue} {
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect"];
}

def SwitchyardOutlineOpsPass
    : Pass<"switchyard-outline-ops", "::mlir::ModuleOp"> {
  let summary = "Compile each distinct kernel-forming op once: one function "
                "per kind, called where each op was";
  let description = [{
    Runs on buffers, right after bufferization. A model repeats its layers
    and a training step contains its forward pass again: most of its ops are
    copies of others, and the function passes of code generation (matmul
    kernels, loops, kernel formation) would lower every copy again, each
    time in one very large function. This pass moves every kernel-forming
    op directly in a function's body (a linalg op, an `scf.forall`,
    `scf.parallel` or `scf.for` loop nest, a moe kernel op; without
    results) into a private function `@<function>_op<N>` marked
    `switchyard.outlined_op`, called in its place: the constants it uses
    are cloned in, and the buffers and indices it uses are passed as
    arguments, in the order of first use. An op identical to one outlined
    before (the same operations, attributes and types, up to locations), in
    the same function or another, calls that function instead. The function
    passes that follow then run once per distinct op, in parallel over the
    functions; `switchyard-inline-outlined-ops` puts the code back.

    An op that uses another scalar from above (a float, or an index read
    from a buffer) stays where it is: on the GPU such values are host
    code's, which `switchyard-gpu-launch-host-compute` moves into kernels
    together with their users.

    With `fills-with-users`, a `linalg.fill` goes into the function of the
    op that writes the buffer it filled (a linalg op, or a grouped expert
    kernel: any op in destination style with one output), when only allocations and
    ops without memory effects (that do not use the buffer) stand between
    them; the fill first moves down to that op. The op's kernel then
    stores the fill's value itself: the CPU's matmul kernels and the GPU's
    tensor-core kernels start their accumulators from zero
    (`switchyard-cpu-contraction-kernels`, `switchyard-cpu-grouped-kernels`,
    `switchyard-gpu-tensor-core-matmul`), and a reduction's loop nest
    stores the initial value per output element
    (`switchyard-linalg-to-loops` with `fold-fills`).

    An elementwise consumer marked `switchyard.epilogue` right after a
    contraction (`switchyard-mark-epilogues`) goes into the contraction's
    function; where it cannot be outlined (it uses a scalar from above),
    the contraction and its fill stay in place with it, so that
    `switchyard-gpu-tensor-core-matmul` finds the pair either way.

    Before:

    ```mlir
    func.func @step(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
      linalg.exp ins(%a : memref<4x8xf32>) outs(%a : memref<4x8xf32>)
      linalg.exp ins(%b : memref<4x8xf32>) outs(%b : memref<4x8xf32>)
      return
    }
    ```

    After:

    ```mlir
    func.func @step(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
      call @step_op0(%a) : (memref<4x8xf32>) -> ()
      call @step_op0(%b) : (memref<4x8xf32>) -> ()
      return
    }
    func.func private @step_op0(%x: memref<4x8xf32>)
        attributes {switchyard.outlined_op} {
      linalg.exp ins(%x : memref<4x8xf32>) outs(%x : memref<4x8xf32>)
      return
    }
    ```
  }];
  let options = [
    Option<"fillsWithUsers", "fills-with-users", "bool", /*default=*/"false",
           "Outline a linalg.fill together with the linalg op after it "
           "that writes the filled buffer (only allocations and ops "
           "without memory effects between them)">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect"];
}

def SwitchyardSplitDeallocsPass
    : Pass<"switchyard-split-deallocs", "::mlir::ModuleOp"> {
  let summary = "Split bufferization.dealloc ops by the buffers that fresh "
                "allocations prove distinct";
  let description = [{
    Runs between `ownership-based-buffer-deallocation` and upstream's
    `buffer-deallocation-simplification`, with a rule that upstream's alias
    analysis lacks: a *fresh* buffer, one that `memref.alloc` returns or
    that a call returns from a function whose every result is a distinct
    `memref.alloc` of its own (through views), is a new allocation, so it
    is not the same allocation as any buffer that exists at that point,
    nor as another result of the same call. The operands of one dealloc
    are all alive until it (freed there if owned, or retained), so two of
    them are distinct when one is fresh after the other's root (through
    views and `memref.extract_strided_metadata`) is defined.

    Each freed buffer distinct from all the others gets a dealloc of its
    own; each dealloc then retains only the buffers it may alias, the
    others' results being false; a retained buffer's result is the
    disjunction of its results in the new deallocs, as
    `bufferization.dealloc` defines it.

    A function that frees a call's results while returning fresh buffers
    (a training step calling its gradient function) otherwise keeps one
    dealloc whose lowering compares base pointers at run time through lists
    in memory: code the GPU target's host code cannot run, since its
    buffers live in device memory.

    Before:

    ```mlir
    %g:2 = call @grad(%x) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
    %new = memref.alloc() : memref<4xf32>
    ...
    %r = bufferization.dealloc (%g#0, %g#1 : memref<4xf32>, memref<4xf32>)
        if (%true, %true) retain (%new : memref<4xf32>)
    return %new : memref<4xf32>
    ```

    After (`@grad` returning two distinct allocations):

    ```mlir
    bufferization.dealloc (%g#0 : memref<4xf32>) if (%true)
    bufferization.dealloc (%g#1 : memref<4xf32>) if (%true)
    return %new : memref<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def SwitchyardInlineOutlinedOpsPass
    : Pass<"switchyard-inline-outlined-ops", "::mlir::ModuleOp"> {
  let summary = "Put the code of switchyard-outline-ops' functions back at "
                "their calls";
  let description = [{
    The inverse of `switchyard-outline-ops`, once the function passes have
    lowered each distinct op: every call of a `switchyard.outlined_op`
    function is replaced by a copy of its body, and those functions are
    erased. The constants of the copies are hoisted to the start of the
    caller and shared, as the greedy rewriter's folding would leave them.
    What follows (host code, kernel outlining and sharing, the CPU's loop
    outlining) then sees each function whole, as it would without the
    outlining.

    Before:

    ```mlir
    func.func @step(%a: memref<4x8xf32>) {
      call @step_op0(%a) : (memref<4x8xf32>) -> ()
      return
    }
    func.func private @step_op0(%x: memref<4x8xf32>)
        attributes {switchyard.outlined_op} {
      %c4 = arith.constant 4 : index
      scf.for %i = %c0 to %c4 step %c1 { ... %x ... }
      return
    }
    ```

    After:

    ```mlir
    func.func @step(%a: memref<4x8xf32>) {
      %c4 = arith.constant 4 : index
      scf.for %i = %c0 to %c4 step %c1 { ... %a ... }
      return
    }
    ```
  }];
}

def SwitchyardLinalgToLoopsPass
    : Pass<"switchyard-linalg-to-loops", "::mlir::func::FuncOp"> {
  let summary = "Linalg ops on buffers to loops, as upstream's passes, faster";
  let description = [{
    Every linalg op with buffer semantics becomes a loop nest with a scalar
    body, as upstream's `convert-linalg-to-loops` (`scf.for`) and, with
    `parallel`, `convert-linalg-to-parallel-loops` (`scf.parallel` for the
    parallel dimensions) make it: the same rewrite
    (`linalg::linalgOpTo{Parallel}Loops`), then the same clean-up of the
    whole function (`memref.dim` and `affine.apply` canonicalization,
    trivial `affine.apply` folded, every op folded, constants deduplicated
    and hoisted, dead ops erased), which the pipelines after it rely on.

    The difference is the cost. Upstream's passes lower the ops as patterns
    of the greedy driver, and the driver simplifies every region of the
    function after each of its iterations; for the host function of a
    training step (the ops of thousands of kernels) that is a large share of
    a GPU compile (docs/Performance.md, "Compile times"). This pass lowers
    each op once, up front, and runs the clean-up without region
    simplification. The result is upstream's op for op (the tiny model's
    GPU pipeline gives the same output byte for byte), except that
    constants the folding hoists to the top of a function may come in
    another order.
  }];
  let options = [
    Option<"parallel", "parallel", "bool", /*default=*/"false",
           "scf.parallel for the parallel dimensions (else scf.for)">,
    Option<"markParallel", "mark-parallel", "bool", /*default=*/"false",
           "Mark an outermost scf.for `switchyard.parallel` where its "
           "iterations are independent (a parallel dimension, a body that "
           "writes no memory): switchyard-cpu-outline-loops runs such a "
           "loop on all cores">,
    Option<"foldFills", "fold-fills", "bool", /*default=*/"false",
           "A linalg.fill directly before the op that reduces into its "
           "buffer becomes a store in that op's nest, per output element "
           "before the reduction loops, where the op's parallel dimensions "
           "come first: one nest (on the GPU, one kernel) instead of two">,
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"
  ];
}

def SwitchyardRoundContractionOperandsPass
    : Pass<"switchyard-round-contraction-operands", "::mlir::func::FuncOp"> {
  let summary = "Round the factors of matmul-like linalg ops to bf16 or f16";
  let description = [{
    Runs on bufferized functions of any target. It finds the matmul-like
    linalg ops that `switchyard-gpu-tensor-core-matmul` handles (two inputs,
    one f32 output, a body that is exactly `out + x * y` in f32 with `x`
    and `y` the inputs, possibly through `arith.extf` / `arith.truncf`, at
    least one contraction dimension) and rounds both factors to
    `element-type` and back to f32 (`arith.truncf` then `arith.extf` before
    the multiplication). Accumulation stays f32.

    This is the same code as the tensor-core pass's SIMT fallback, run on
    the same ops (both run right after bufferization): on the CPU target
    (`switchyard-cpu-pipeline{round-contraction-operands=bf16}`, the
    runtime's `CompileOptions::roundContractionOperands`) it computes what
    the GPU's bf16/f16 tensor cores compute, up to the order of the f32
    accumulation, so the GPU's 16-bit matmuls can be checked against it.
    Matmuls inside the fused row kernels (`scf.forall`) are not linalg ops
    and stay f32 on both targets. With `element-type=f32` the pass does
    nothing.

    Before:

    ```mlir
    linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x3xf32>)
                  outs(%c : memref<4x3xf32>)
    ```

    After (`element-type=bf16`, the op generalised by the builder it was
    matched with; abridged):

    ```mlir
    linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x3xf32>)
                  outs(%c : memref<4x3xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %xr = arith.truncf %x : f32 to bf16
      %xe = arith.extf %xr : bf16 to f32
      %yr = arith.truncf %y : f32 to bf16
      %ye = arith.extf %yr : bf16 to f32
      %p = arith.mulf %xe, %ye : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    }
    ```
  }];
  let options = [
    Option<"elementType", "element-type", "std::string", /*default=*/"\"f32\"",
           "Round the factors to this type: f32 (no rounding), bf16 or f16">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def SwitchyardLowerGroupedKernelsPass
    : Pass<"switchyard-lower-grouped-kernels", "::mlir::func::FuncOp"> {
  let summary = "Lower the grouped expert kernels on buffers to loops";
  let description = [{
    Runs on bufferized functions of any target, after
    `switchyard-gpu-tensor-core-matmul` (which builds tensor-core kernels
    for the grouped ops it can). Every remaining `moe.grouped_matmul` becomes
    an `scf.parallel` over its output `(p, c)` in which the rows of a tile
    whose expert is valid accumulate `Σ_a rows[p, a] · weight[e, a, c]`
    sequentially into `init`; every `moe.grouped_weight_grad` an
    `scf.parallel` over `(e, a, c)` summing its expert's segment of rows. On
    the GPU target each iteration becomes one thread (the SIMT route); on
    the CPU, loops.

    The factors are rounded to `element-type` and back to f32 (as
    `switchyard-round-contraction-operands` rounds the factors of matmuls),
    so that the CPU reference, the SIMT route of sm_75 and the tensor cores
    multiply the same values. Accumulation is f32. A gathered operand (the
    ops' `gather`) is read at its route's row: `order[p]` names the route,
    the row is the route over `routes_per_row`, the element is multiplied
    by the route's gate in f32 before the rounding, and a padding position
    (`order[p]` past the routes) reads zero. Every remaining
    `moe.sort_routes` becomes its counting sort as sequential loops (the
    GPU target makes it one thread block's kernel first,
    `switchyard-gpu-sort-routes`).

    ```mlir
    moe.grouped_weight_grad ins(%x, %dy, %seg : memref<?x4xf32>, memref<?x3xf32>, memref<3xindex>) outs(%dw : memref<2x4x3xf32>)
    ```

    becomes (abridged)

    ```mlir
    scf.parallel (%e, %a, %c) = (%c0, %c0, %c0) to (%c2, %c4, %c3) step (%c1, %c1, %c1) {
      %lo = memref.load %seg[%e] : memref<3xindex>
      %hi = memref.load %seg[%e + 1] : memref<3xindex>
      %init = memref.load %dw[%e, %a, %c] : memref<2x4x3xf32>
      %sum = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %init) -> (f32) {
        ... %acc + %x[%p, %a] * %dy[%p, %c]
      }
      memref.store %sum, %dw[%e, %a, %c] : memref<2x4x3xf32>
    }
    ```
  }];
  let options = [
    Option<"elementType", "element-type", "std::string", /*default=*/"\"f32\"",
           "Round the factors to this type: f32 (no rounding), bf16 or f16">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_PASSES_TD
