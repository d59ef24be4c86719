//===- InitNorm.h - Register norm-opt with a host compiler ------*- C++ -*-===//
//
// Part of norm-opt. What a compiler that embeds norm-opt calls: no global
// state is touched until one of these runs.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_INITNORM_H
#define NORM_INITNORM_H

namespace mlir {
class DialectRegistry;
namespace norm {

/// Adds the norm dialect to `registry`.
void registerNormDialect(DialectRegistry &registry);

/// Registers every norm-opt pass (and, later, pipeline) with the global pass
/// registry so textual pipelines (`--pass-pipeline`, `parsePassPipeline`)
/// can name them.
void registerNormPassesAndPipelines();

} // namespace norm
} // namespace mlir

#endif // NORM_INITNORM_H
