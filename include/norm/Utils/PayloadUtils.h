//===- PayloadUtils.h - Cloning norm.mixed_reduction payloads ---*- C++ -*-===//
//
// Part of norm-opt. Helpers shared by the passes that expand the scalar
// regions of norm.mixed_reduction (--norm-partial-accumulate on the CPU,
// --convert-norm-to-gpu): region inlining and the f32 compute type.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_UTILS_PAYLOADUTILS_H
#define NORM_UTILS_PAYLOADUTILS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::norm {

/// Clones the body of `region` (one block) at `b`'s insertion point, with
/// its block arguments bound to the leading `args` and the values defined
/// above it looked up in `above`; returns the yielded values.
SmallVector<Value> inlineRegion(OpBuilder &b, Region &region, ValueRange args,
                                const IRMapping &above = IRMapping());

/// `v` widened to f32 (the accumulation type); `v` itself if it is f32.
Value toF32(OpBuilder &b, Location loc, Value v);

/// `v` (f32) narrowed to `to`; `v` itself if `to` is f32.
Value fromF32(OpBuilder &b, Location loc, Value v, Type to);

} // namespace mlir::norm

#endif // NORM_UTILS_PAYLOADUTILS_H
