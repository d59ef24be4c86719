//===- Passes.td - norm-opt transformation passes ----------*- tablegen -*-===//
//
// Part of norm-opt. Pass names are a stable interface: other compilers
// script against them. Rename only with a deprecation alias.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_TRANSFORMS_PASSES_TD
#define NORM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def NormDecompose : Pass<"norm-decompose"> {
  let summary = "Lower norm.*_grad ops to linalg on tensors, as a front end "
                "would emit them";
  let description = [{
    Rewrites every `norm.layer_norm_grad`, `norm.rms_norm_grad` and
    `norm.group_norm_grad` into the
    linalg-on-tensors chain an ML front end (torch-mlir, IREE's importers)
    emits for the same math: one `linalg.generic` per step, `arith.extf` of
    bf16/f16 inputs to f32, row reductions over the trailing dim whose
    results are broadcast back through indexing maps, column reductions over
    all leading dims, and `arith.truncf` back to the storage types.
    `norm.group_norm_grad` becomes the same chain over `x` with its channels
    expanded into `[groups, C / groups]` (`tensor.expand_shape`, as
    torch-mlir spells GroupNorm): the row reductions over a slab (the group's
    channels and the spatial dims), the column reductions over N and the
    spatial dims, and `tensor.collapse_shape` back. It is the
    canonical input of the recognition pass, so the whole pipeline has one
    entry form. The pass works on any op holding norm ops (anchor with
    `--pass-pipeline` or run it on the module).

    Before:

    ```mlir
    %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<8xf32>)
        : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>, tensor<8xf32>
    ```

    After (abridged; maps: `#id = (r, n) -> (r, n)`, `#row = (r, n) -> (r)`,
    `#col = (r, n) -> (n)`):

    ```mlir
    %xhat = linalg.generic {indexing_maps = [#id, #row, #id],
        iterator_types = ["parallel", "parallel"]}
        ins(%x, %rstd : ...) outs(%e0 : tensor<4x8xf32>) { mulf }
    %wdy  = linalg.generic {[#id, #col, #id], parallel x2}
        ins(%dy, %w) ... { mulf }
    %s    = linalg.generic {[#id, #id, #row], ["parallel", "reduction"]}
        ins(%xhat, %wdy) outs(%zeros_rows) { mulf, addf }
    %dx   = linalg.generic {[#id, #id, #row, #row, #id], parallel x2}
        ins(%xhat, %wdy, %s, %rstd) ... { divf by N, mulf, subf, mulf }
    %dw   = linalg.generic {[#id, #id, #col], ["reduction", "parallel"]}
        ins(%dy, %xhat) outs(%zeros_cols) { mulf, addf }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def NormPropagateReshapes : Pass<"norm-propagate-reshapes"> {
  let summary = "Rewrite the generics next to tensor.expand_shape / "
                "tensor.collapse_shape over the reshapes' finer dims";
  let description = [{
    Front ends spell GroupNorm's backward with reshapes between its steps:
    torch's decomposition (Inductor's, torch-mlir's) views x
    `[N, C, H, W]` as `[N, G, C/G, H*W]` and its per-channel sums `[N, C]`
    as `[N, G, C/G]`. This pass rewrites every `linalg.generic` (maps
    projected permutations, no `linalg.index`) that reads a
    `tensor.collapse_shape` or whose result a `tensor.expand_shape` reads
    over the finer loops: a loop of extent C becomes loops G and C/G, a
    reduction over H*W one over H and W. Its other operands go through
    `tensor.expand_shape`; results the coarse users still read are
    collapsed back. Upstream's reshape folds (expand of collapse, fill and
    empty through reshapes) run with it, to a fixpoint; then reshapes that
    are alike are merged (one tensor reshaped alike twice is one value).
    A function without reshapes is left exactly as it is. Afterwards the
    steps of one norm share one domain (`[N, G, C/G, H, W]`), the form
    `--norm-fuse-mixed-reductions` takes. Upstream's fusion by expansion
    (`--linalg-fuse-elementwise-ops`) does the same for all-parallel
    generics only and fuses them besides.

    Before: `%v = tensor.collapse_shape %x [[0], [1], [2, 3]]` (`[N, 32,
    8, 8]` to `[N, 32, 64]`) read by a sum over dim 2. After: the sum reads
    `%x` over loops `(n, c, h, w)` with `h` and `w` reductions.
  }];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def NormMergeNestedSums : Pass<"norm-merge-nested-sums"> {
  let summary = "Rewrite a sum (or elementwise op) that is linear in other "
                "sums as one sum over both sets of dims";
  let description = [{
    torch's GroupNorm backward sums `x * dy` and `dy` over H*W per channel
    (`[N, C]`), then reduces those sums again: over each group's channels
    for dx's two statistics (`[N, G]`), over N for dweight and dbias. Each
    second-level value is linear in the first-level sums, so
    `sum_D2 L(sum_D1 f) = sum_(D1 u D2) L(f)`. A `linalg.generic` C reading
    first-level sums T_i (generics that yield `out + f` into a zero
    `linalg.fill`, their result indexed by all their parallel loops; C
    reads each over all its loops) whose payload is homogeneous linear in
    the T_i (`addf`, `subf`, `negf`, and `mulf` / `divf` by values that do
    not read them), yielded (C all parallel) or added into C's output (C a
    sum), becomes one generic over the first sum's loops, C's reduction
    loops added: it reads the sums' inputs and C's other inputs and
    computes each f, then C's payload on them. Sums of several T_i need the
    same reduction extents, static. Its location fuses C's and the sums'.
    The float sums are reassociated, as any fused or tiled reduction
    reassociates them. Run `--norm-propagate-reshapes` first where reshapes
    separate the levels; together they give the form
    `--norm-fuse-mixed-reductions` takes (`norm-opt compile` and the
    torch.compile route run both).

    Before (abridged): `%t = sum_(h, w) dy * x` `[N, C]`, then
    `%s = sum_c %t * w[c]` `[N]`. After: `%s = sum_(c, h, w) dy * x * w[c]`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect"
  ];
}

def NormFuseMixedReductions
    : Pass<"norm-fuse-mixed-reductions", "::mlir::func::FuncOp"> {
  let summary = "Find the row and column reductions of a norm backward and "
                "fuse them into one norm.mixed_reduction";
  let description = [{
    A structural match over linalg on tensors (`linalg.generic` and the
    named `linalg.reduce` / `linalg.map` / `linalg.broadcast`, seen through
    their generic form without rewriting them). Over one iteration domain
    `[rows..., N]` it finds a *mixed-order reduction group*: row reductions
    (iterators `[parallel..., reduction]`), the elementwise ops that consume
    their results broadcast back over `N` (dx and its epilogues), and column
    reductions (`[reduction..., parallel]`) of values computed from the
    same inputs. Reductions join a group when they read the same
    full-domain tensor (`x`, `dy`), share an intermediate, or chain through
    row results (statistics recomputed inside the backward become successive
    row stages). Unit dims read with a constant-0 map (keepdim statistics,
    TOSA's `tensor.expand_shape` after `linalg.reduce`) are looked through.
    A domain dim of static extent 1 is index 0 whether or not an input's
    map names it: an input that leaves it out (a ConvNeXt head's `[B, C]`
    gradient beside `[B, 1, 1, C]` activations) is read with the unit dims
    inserted (`tensor.expand_shape`).

    Multi-axis groups (GroupNorm, adaLN). Reductions may sum over several
    dims and keep several. A domain is tried in *pairings*: the dims the row
    reductions sum over and the dims the column reductions keep. The 2-D
    pairings (one dim N, both) come first, N last first; then the
    multi-axis ones, whose two sets share a dim: adaLN over x `[B, S, N]`
    sums rows over N and keeps (B, N) in its columns (d(scale) and d(shift)
    per sample); GroupNorm over `[N, G, C/G, HW]` sums rows over (C/G, HW)
    and keeps (G, C/G) (dγ, dβ per channel). The fused op then records
    `row_sum_dims` / `col_dims`, and its row and col inputs are indexed by
    the dims the rows keep and by the columns' dims. A reduction fuses in
    the first pairing that takes it; one that none takes gets the last
    pairing's reason. BatchNorm's backward (per-channel sums only, no
    mixed order) pairs with nothing and stays unfused.

    N need not be the last dim. A channels-first norm (ConvNeXt's
    LayerNorm2d: x `[B, C, S]` normalised over C) has row reductions with
    one `reduction` iterator in the middle and column reductions with one
    `parallel` iterator there; the group's op records N's dim as `n_dim`,
    and its row inputs are the other dims in order (`[B, S]`). Per domain
    the groups over each N are formed separately (the last dim first); at
    rank 2 N is the last dim (one reduced loop of two reads either way).

    The pass is a driver over the C++ API of
    `norm/Transforms/MixedReductions.h` (`findMixedReductionGroups`: the
    groups and why each would not fuse, without changing the IR;
    `fuseMixedReductions`: fuse those a control callback accepts), which
    the C API also reaches.

    Each group becomes one `norm.mixed_reduction` whose regions hold the
    cloned scalar payloads; the group's ops and the helpers only they used
    are erased. The fused op's location is a `FusedLoc` of its members'
    locations (as upstream's fusions do), so a host compiler can read which
    of its ops a group took (the torch.compile route does). Everything else
    stays exactly as it was. A group is left
    alone (and a remark says why) when one pass over the rows would be
    wrong or impossible: a column-reduction result that feeds the row
    computation, reductions over different domains, a non-additive
    combiner, a row reduction that starts from something other than zero.

    Before (abridged, one generic per step):

    ```mlir
    %s  = linalg.generic {iterator_types = ["parallel", "reduction"]}
            ins(%xhat, %wdy) outs(%zero_rows)   // sum_n(xhat * wdy)
    %dx = linalg.generic {iterator_types = ["parallel", "parallel"]}
            ins(%xhat, %wdy, %s, %rstd) ...     // %s broadcast over n
    %dw = linalg.generic {iterator_types = ["reduction", "parallel"]}
            ins(%dy, %xhat) outs(%zero_cols)    // sum_rows(dy * xhat)
    ```

    After:

    ```mlir
    %dx, %dw = norm.mixed_reduction full(%x, %dy : ...) row(%rstd : ...)
        col(%w : ...) col_init(%zero_cols : ...)
        row_stages { xhat * wdy } elementwise { dx } columns { dy * xhat }
        -> full(tensor<...>) col(tensor<...>)
    ```
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark per candidate reduction: fused (with the group's "
           "size) or why not">,
    Option<"rowOnly", "row-only", "bool", /*default=*/"false",
           "Also fuse a group that has row reductions but no column "
           "reduction (a norm backward without affine parameters, OLMo's "
           "LayerNorm): one pass over the rows, with no partials. Off by "
           "default, since a forward norm or a softmax backward is such a "
           "group too; the torch.compile route turns it on for the "
           "backward graphs it hands over">,
    Option<"multiAxis", "multi-axis", "std::string", /*default=*/"\"true\"",
           "Which multi-axis groups fuse (GroupNorm, adaLN: row and column "
           "sums over several dims): true (all), false (none), batched "
           "(batched rows only: adaLN's [B, S, N], a 2-D problem per "
           "sample) or gpu (the ones convert-norm-to-gpu takes: batched "
           "rows and GroupNorm's slabs, NCHW or channels last). The others "
           "are left unfused with a remark; norm-opt's GPU pipeline and the "
           "torch.compile route ask for gpu">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::norm::NormDialect"
  ];
}

def NormPartialAccumulate : Pass<"norm-partial-accumulate"> {
  let summary = "Rewrite norm.mixed_reduction into a persistent row loop "
                "with fp32 partial accumulation of the column sums";
  let description = [{
    Turns each `norm.mixed_reduction` into a target-independent loop nest on
    tensors that reads every input once:

    ```mlir
    %P = arith.constant 8 : index                     // `programs`
    %r:3 = scf.forall (%p) in (%P) shared_outs(%dx = %e, %part = %ws) {
      // rows [lo, hi) = a contiguous block of ceil(M / P) rows
      %t:2 = scf.for %row = %lo to %hi iter_args(%tile, %acc) {
        scf.for %n ... { row stage: f32 sums over n }
        scf.for %n ... { dx[row, n] = elementwise(...);
                         %acc[n] += column contribution (f32) }
      }
      scf.forall.in_parallel {
        tensor.parallel_insert_slice %t#0 into %dx[%lo, 0] [%count, N] [1, 1]
        tensor.parallel_insert_slice %t#1 into %part[%p, 0] [1, N] [1, 1]
      }
    }
    // dW[n] = init[n] + (part[0, n] + part[1, n] + ... + part[P-1, n])
    scf.for %n ... { scf.for %q = 0 to %P ... }
    ```

    Rows go to programs in contiguous blocks (program p owns rows
    [p * B, min((p + 1) * B, M)), B = ceil(M / P)) so that each program
    writes one contiguous slice of every full result. The column sums of a
    program accumulate in fp32 across all its rows; each program writes them
    once, as row p of an fp32 partial buffer [P, N] per column result. That
    workspace is a `tensor.empty` in the IR (bufferization turns it into an
    allocation the embedding compiler sees and can place). The final
    reduction adds the P rows in a fixed order, then the initial value
    (zeros, or an existing gradient), and converts to the result type: for a
    given P the results are bitwise reproducible.

    P is an SSA value (`arith.constant`, set by the `programs` option here;
    the GPU lowering sets it from the SM count at run time).

    A domain that is statically empty (N = 0, or a leading dim of size 0)
    has nothing to loop over: the full results become `tensor.empty` and
    the column results are their initial values.

    A channels-first op (`n_dim`) is transposed to `[rows..., N]` first
    (`linalg.transpose` of its full inputs) and its full results back: the
    portable reference path; the GPU kernels read such a domain in place.

    A multi-axis op (`row_sum_dims`, `col_dims`: GroupNorm, adaLN) is taken
    the same way with the summed dims in N's place: full inputs as `[M, L]`
    (the row dims, then the summed dims, transposed where needed and
    collapsed). Its column accumulators are indexed by each point's
    `col_dims`, linearised: `[|C|]` per program and `[P, |C|]` partials, so
    a program's rows may cross samples or groups; the final reduction runs
    over the `|C|` slots and expands them back to the `col_dims` shape.
  }];
  let options = [
    Option<"programs", "programs", "int64_t", /*default=*/"8",
           "Number of programs P (parallel iterations of the row loop), "
           "1 to 65536 (the partial buffer is [P, N] fp32)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def NormOutlineGroups : Pass<"norm-outline-groups", "::mlir::ModuleOp"> {
  let summary = "Outline each fused norm group into a function whose "
                "arguments and results are exactly the group's";
  let description = [{
    For hosts with their own runtime (IREE-style external dispatches, XLA
    custom calls, a torch custom op): every `norm.mixed_reduction` of a
    function becomes a function of its own, `@<function>_group<i>` (renamed
    on a clash), inserted after it and marked `norm.outlined_from =
    "<function>"`, and the group is replaced by a `func.call`. Everything
    else of the host (matmuls, other reductions, calls, loops) is left as it
    was.

    - Arguments, in order: the group's full, row and column tensors, the
      input of a widened column initial value (or the initial value), the
      0-d tensors its payloads read (a loss scale).
    - Results: the full results, then the column results; a column result's
      narrowing epilogue (the `truncf` of dW to bf16) goes with the group.
    - Rebuilt inside: constant column initial values (zero fills), the
      epilogue and prologue maps, the constants, scalar reads and dims of
      inputs the payloads use (and arithmetic on them, such as a run-time N
      as f32). A dynamic N comes from the first full argument.

    A function already marked `norm.outlined_from` is left alone, so the
    pass can run twice. It fails, with an error on the group, only when a
    payload reads a value from above that is none of those (an f32
    function argument, say: nothing a launcher could pass).

    Before:

    ```mlir
    func.func @block(%h: tensor<?x1024xf32>, %w1: tensor<1024x1024xf32>, ...) {
      %dy = linalg.matmul ins(%h, %w1 ...) ...
      %dx, %dw = norm.mixed_reduction full(%x, %dy ...) row(%rstd ...) ...
      %g = linalg.matmul ins(%dx, %w0 ...) ...
    ```

    After:

    ```mlir
    func.func @block(...) {
      %dy = linalg.matmul ins(%h, %w1 ...) ...
      %dx, %dw = call @block_group0(%x, %dy, %rstd, %w) : ...
      %g = linalg.matmul ins(%dx, %w0 ...) ...
    }
    func.func @block_group0(%x: ..., %dy: ..., %rstd: ..., %w: ...)
        attributes {norm.outlined_from = "block"} {
      %dx, %dw = norm.mixed_reduction full(%x, %dy ...) ...
      return %dx, %dw : ...
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::norm::NormDialect"
  ];
}

#endif // NORM_TRANSFORMS_PASSES_TD
