//===- NormAttrs.h - Attributes of the norm dialect -------------*- C++ -*-===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_DIALECT_NORM_IR_NORMATTRS_H
#define NORM_DIALECT_NORM_IR_NORMATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#define GET_ATTRDEF_CLASSES
#include "norm/Dialect/Norm/IR/NormAttrs.h.inc"

#endif // NORM_DIALECT_NORM_IR_NORMATTRS_H
