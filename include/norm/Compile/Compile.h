//===- Compile.h - From an input module to PTX, cubin or a library -*- C++ -*-===//
//
// Part of norm-opt. What `norm-opt compile` does, as a library call a host
// compiler can make: run the NVVM pipeline, then write PTX, a cubin (ptxas)
// or a shared library with a C-ABI launcher per input function (built as
// host IR, lowered by upstream passes and compiled in process).
//
//===----------------------------------------------------------------------===//

#ifndef NORM_COMPILE_COMPILE_H
#define NORM_COMPILE_COMPILE_H

#include "norm/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <functional>
#include <string>

namespace mlir {
class PassManager;
} // namespace mlir

namespace mlir::norm {

enum class EmitKind { PTX, Cubin, Library };

struct CompileOptions {
  /// The GPU options (chip, features, opt-level, kernel shape), as declared
  /// in Passes.td; checked by validateGpuOptions before anything runs.
  NormGpuOptions gpu;
  EmitKind emit = EmitKind::PTX;
  /// OUT: the PTX file, the cubin, or the shared library (the C header is
  /// written beside it, OUT with its extension replaced by `.h`).
  std::string output;
  /// Tools; empty means the defaults found at build time / on PATH.
  std::string ptxas, cc, runtimeLibrary;
  /// Where to write the host module (empty: not written): the input after
  /// fusion, with the groups of every function that cannot be launched
  /// whole outlined and called (--norm-outline-groups), and every function
  /// the library launches (outlined or whole) left as a declaration.
  std::string hostModule;
  /// Keep the launchers' host IR (OUT with `.launchers.mlir`, upstream ops
  /// before their lowering to LLVM) and their object file (OUT with
  /// `.launchers.o`).
  bool keepLauncher = false;
  /// Pass `-v` to ptxas and print its register / spill report.
  bool ptxasVerbose = false;
  /// Called on the pass manager before it runs (a tool applies its
  /// --mlir-print-ir-*, --mlir-timing, ... options here).
  std::function<LogicalResult(PassManager &)> configurePassManager;
};

/// Compiles `module` (linalg, TOSA-lowered linalg or norm ops) in place and
/// writes the output. A function whose fused groups are not all it does
/// (matmuls around them, inputs computed inside, several groups chained)
/// has each group outlined into `<function>_group<i>`, which gets the
/// launcher; one that is only its groups keeps a launcher of its own. Errors are reported as diagnostics on the module; a
/// bad option value is reported (naming the option) before anything runs.
LogicalResult compileNormModule(ModuleOp module, const CompileOptions &options);

/// Turns every function of an already lowered module (after
/// --norm-lower-to-nvvm) that has fused groups into its C-ABI launcher: a
/// func.func of LLVM pointers and i64 sizes returning an i32 status, whose
/// body launches the groups in upstream host ops (HostLaunch.h), and writes
/// their C declarations into `header`. compileNormModule lowers the
/// launchers with upstream passes and compiles them in process.
LogicalResult buildLaunchers(ModuleOp module, StringRef headerName,
                             std::string &header);

/// The PTX of the `gpu.binary` the NVVM pipeline produced.
FailureOr<std::string> extractPTX(ModuleOp module);

} // namespace mlir::norm

#endif // NORM_COMPILE_COMPILE_H
