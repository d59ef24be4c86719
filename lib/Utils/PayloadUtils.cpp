//===- PayloadUtils.cpp - Cloning norm.mixed_reduction payloads -----------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/Utils/PayloadUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

SmallVector<Value> mlir::norm::inlineRegion(OpBuilder &b, Region &region,
                                            ValueRange args,
                                            const IRMapping &above) {
  Block &block = region.front();
  IRMapping mapping = above;
  mapping.map(block.getArguments(), args.take_front(block.getNumArguments()));
  for (Operation &inner : block.without_terminator())
    b.clone(inner, mapping);
  SmallVector<Value> yielded;
  for (Value v : block.getTerminator()->getOperands())
    yielded.push_back(mapping.lookupOrDefault(v));
  return yielded;
}

Value mlir::norm::toF32(OpBuilder &b, Location loc, Value v) {
  Type f32 = b.getF32Type();
  return v.getType() == f32 ? v : arith::ExtFOp::create(b, loc, f32, v);
}

Value mlir::norm::fromF32(OpBuilder &b, Location loc, Value v, Type to) {
  return to == b.getF32Type() ? v : arith::TruncFOp::create(b, loc, to, v);
}
