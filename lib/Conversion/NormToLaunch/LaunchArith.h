//===- LaunchArith.h - What the host launch's steps share -------*- C++ -*-===//
//
// Part of norm-opt. Internal to the host lowering (HostLaunchBuilder.cpp,
// LaunchChecks.cpp): i64 arithmetic at one location and the vector flags.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_LIB_CONVERSION_NORMTOLAUNCH_LAUNCHARITH_H
#define NORM_LIB_CONVERSION_NORMTOLAUNCH_LAUNCHARITH_H

#include "norm/Conversion/NormToLaunch/HostLaunch.h"
#include "norm/Runtime/NormRuntime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace mlir::norm {

/// The launcher's status for a call whose sizes it cannot take.
constexpr int32_t kOutOfRange = NORMRT_ERROR_OUT_OF_RANGE;

struct HostLaunchBuilder::Flags {
  Value vec, vecPeel; // i1
};

/// i64 arithmetic and comparisons at one location.
struct LaunchArith {
  OpBuilder &b;
  Location loc;
  using P = arith::CmpIPredicate;
  Value cmp(P p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivSIOp::create(b, loc, x, y); }
  Value rem(Value x, Value y) { return arith::RemSIOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value both(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value i64(int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
  }
  Value i1(bool v) {
    return arith::ConstantIntOp::create(b, loc, b.getI1Type(), v);
  }
  Value i32(int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
  }
};

} // namespace mlir::norm

#endif // NORM_LIB_CONVERSION_NORMTOLAUNCH_LAUNCHARITH_H
