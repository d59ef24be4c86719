//===- NormAttrs.td - Attributes of the norm dialect -------*- tablegen -*-===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_DIALECT_NORM_IR_NORMATTRS_TD
#define NORM_DIALECT_NORM_IR_NORMATTRS_TD

include "norm/Dialect/Norm/IR/NormDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Norm_KernelPlanAttr : AttrDef<Norm_Dialect, "KernelPlan"> {
  let mnemonic = "kernel_plan";
  let summary = "How one norm.mixed_reduction maps onto its GPU kernels";
  let description = [{
    Written by `--convert-norm-to-gpu` on each `norm.mixed_reduction` (as
    the `norm.gpu` attribute); `norm-opt compile` reads it to write the host
    launcher. `kernel` is the kernels' name prefix (the suffixes are in
    `include/norm/Conversion/NormToGPU/KernelNames.h`). A program is a
    group of `threads_per_row` lanes, a CTA holds `rows_per_cta` of them
    (`block` threads); `chunks_per_thread` is 0 for the looped variant.
    Shared-memory sizes are bytes of dynamic shared memory; see
    docs/gpu.md for every field.

    ```mlir
    norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, ...>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"kernel name prefix">:$kernel,
    "int64_t":$vector,
    "int64_t":$threads_per_row,
    "int64_t":$rows_per_cta,
    "int64_t":$chunks_per_thread,
    "int64_t":$programs_per_sm,
    "int64_t":$block,
    "::mlir::BoolAttr":$combine_in_cta,
    "::mlir::BoolAttr":$single_launch,
    "int64_t":$async_stages,
    "int64_t":$column_groups,
    "int64_t":$split_column_groups,
    "int64_t":$split_shared_bytes,
    "int64_t":$final_threads,
    "int64_t":$dynamic_shared_bytes
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // NORM_DIALECT_NORM_IR_NORMATTRS_TD
