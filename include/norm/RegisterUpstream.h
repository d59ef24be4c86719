//===- RegisterUpstream.h - Upstream MLIR the driver accepts ----*- C++ -*-===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_REGISTERUPSTREAM_H
#define NORM_REGISTERUPSTREAM_H

namespace mlir {
class DialectRegistry;
namespace norm {

/// The upstream dialects a user's input (or a stage of our pipeline) may
/// contain, with the interface models passes need on them (bufferization,
/// to-LLVM conversion, NVVM target, LLVM IR translation).
void registerUpstreamDialects(DialectRegistry &registry);

/// The upstream passes and pipelines a user puts beside ours: TOSA to linalg,
/// linalg, bufferization, SCF/GPU/NVVM lowering, conversions to LLVM.
void registerUpstreamPasses();

} // namespace norm
} // namespace mlir

#endif // NORM_REGISTERUPSTREAM_H
