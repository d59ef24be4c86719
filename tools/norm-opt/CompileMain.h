//===- CompileMain.h - `norm-opt compile` -----------------------*- C++ -*-===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_TOOLS_NORM_OPT_COMPILEMAIN_H
#define NORM_TOOLS_NORM_OPT_COMPILEMAIN_H

namespace mlir {
class DialectRegistry;
namespace norm {
/// `norm-opt compile IN.mlir --chip=... --emit=ptx|cubin|lib -o OUT`;
/// argv[0] is the program, argv[1] "compile". Returns the exit code.
int compileMain(int argc, char **argv, DialectRegistry &registry);
} // namespace norm
} // namespace mlir

#endif // NORM_TOOLS_NORM_OPT_COMPILEMAIN_H
