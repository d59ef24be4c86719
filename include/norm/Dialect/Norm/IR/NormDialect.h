//===- NormDialect.h - The norm dialect -------------------------*- C++ -*-===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_DIALECT_NORM_IR_NORMDIALECT_H
#define NORM_DIALECT_NORM_IR_NORMDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "norm/Dialect/Norm/IR/NormOpsDialect.h.inc"

#endif // NORM_DIALECT_NORM_IR_NORMDIALECT_H
