//===- NormOps.h - norm dialect ops -----------------------------*- C++ -*-===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_DIALECT_NORM_IR_NORMOPS_H
#define NORM_DIALECT_NORM_IR_NORMOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "norm/Dialect/Norm/IR/NormAttrs.h"
#include "norm/Dialect/Norm/IR/NormDialect.h"

#define GET_OP_CLASSES
#include "norm/Dialect/Norm/IR/NormOps.h.inc"

#endif // NORM_DIALECT_NORM_IR_NORMOPS_H
