//===- Signature.h - The JSON signature of a compiled library ---*- C++ -*-===//
//
// Part of norm-opt. `norm-opt compile --emit=lib -o libX.so` writes
// libX.json beside libX.so and libX.h: per C function, its parameters in
// order and, per tensor, its role, MLIR type, element type, shape and
// layout, so a binding (python/norm_opt) checks arguments without parsing C.
// docs/compile.md describes the format.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_COMPILE_SIGNATURE_H
#define NORM_COMPILE_SIGNATURE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir::norm {

/// What the signature records about the build besides the functions.
struct SignatureInfo {
  std::string library; // file name of the shared library
  std::string header;  // file name of its C header
  std::string chip, features;
};

/// The signature (JSON text) of the launchers generateLauncher writes for
/// `module` (after --norm-lower-to-nvvm). Fails, with a diagnostic, where
/// generateLauncher would.
FailureOr<std::string> librarySignatureJSON(ModuleOp module,
                                            const SignatureInfo &info);

} // namespace mlir::norm

#endif // NORM_COMPILE_SIGNATURE_H
