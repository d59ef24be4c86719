//===- LaunchChecks.cpp - The launcher's checks of its arguments ----------===//
//
// Part of norm-opt. The steps of a group's launch (HostLaunchBuilder.cpp's
// header) that check the call before any kernel runs: the domain's sizes
// and strides against the static shape (checkDomain), adaLN's samples
// (checkBatch), GroupNorm's slabs (checkSlabs), contiguous rows
// (checkContiguous), and the alignment that picks the vector or peeled
// kernel (vectorFlags). A call that fails one returns its status without
// launching.
//
//===----------------------------------------------------------------------===//

#include "LaunchArith.h"

#include "norm/Conversion/NormToGPU.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::norm;

void HostLaunchBuilder::checkDomain(StringRef function,
                                    ArrayRef<int64_t> domain, unsigned nDim,
                                    Value rows, Value cols, StringRef suffix,
                                    ArrayRef<LaunchValue> strides) {
  std::string r = ("rows" + suffix).str(), c = ("cols" + suffix).str();
  auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  };
  using P = arith::CmpIPredicate;
  Value bad = arith::OrIOp::create(b, loc, cmp(P::slt, rows, constant(0)),
                                   cmp(P::slt, cols, constant(1)));
  failIf(bad, kOutOfRange,
         function + ": " + r + " must be >= 0 and " + c + " >= 1");
  int64_t staticRows = 1, staticCols = domain[nDim];
  for (auto [i, d] : llvm::enumerate(domain))
    if (i != nDim)
      staticRows = ShapedType::isDynamic(d) || staticRows < 0 ? -1
                                                              : staticRows * d;
  if (staticRows >= 0)
    failIf(cmp(P::ne, rows, constant(staticRows)), kOutOfRange,
           function + ": " + r + " must be " + Twine(staticRows) +
               " (static shape)");
  if (!ShapedType::isDynamic(staticCols))
    failIf(cmp(P::ne, cols, constant(staticCols)), kOutOfRange,
           function + ": " + c + " must be " + Twine(staticCols) +
               " (static shape)");
  if (nDim + 1 == domain.size()) {
    for (const LaunchValue &s : strides)
      failIf(cmp(P::slt, s.value, cols), kOutOfRange,
             function + ": " + s.name + " must be >= " + c);
    return;
  }
  // Channels-first: one column stride I for every tensor, rows = outer x I.
  for (const LaunchValue &s : strides) {
    Value bad = arith::OrIOp::create(
        b, loc, cmp(P::slt, s.value, constant(1)),
        cmp(P::ne, s.value, strides.front().value));
    failIf(bad, kOutOfRange,
           function + ": " + s.name + " must be >= 1 and equal " +
               strides.front().name + " (contiguous tensors)");
  }
  if (!strides.empty()) {
    Value safe = arith::MaxSIOp::create(b, loc, strides.front().value,
                                        constant(1));
    failIf(cmp(P::ne, arith::RemSIOp::create(b, loc, rows, safe), constant(0)),
           kOutOfRange,
           function + ": " + r + " must be a multiple of " +
               strides.front().name);
  }
}

void HostLaunchBuilder::checkBatch(StringRef function,
                                   ArrayRef<int64_t> batchDims, Value rows,
                                   Value batch, StringRef suffix) {
  std::string r = ("rows" + suffix).str(), n = ("batch" + suffix).str();
  LaunchArith m{b, loc};
  using P = LaunchArith::P;
  failIf(m.cmp(P::slt, batch, m.i64(0)), kOutOfRange,
         function + ": " + n + " must be >= 0");
  int64_t staticBatch = 1;
  for (int64_t d : batchDims)
    staticBatch = ShapedType::isDynamic(d) || staticBatch < 0 ? -1
                                                              : staticBatch * d;
  if (staticBatch >= 0)
    failIf(m.cmp(P::ne, batch, m.i64(staticBatch)), kOutOfRange,
           function + ": " + n + " must be " + Twine(staticBatch) +
               " (static shape)");
  Value rest = m.rem(rows, m.max(batch, m.i64(1)));
  Value none = m.both(m.cmp(P::eq, batch, m.i64(0)),
                      m.cmp(P::ne, rows, m.i64(0)));
  failIf(arith::OrIOp::create(b, loc, m.cmp(P::ne, rest, m.i64(0)), none),
         kOutOfRange,
         function + ": " + r + " must be a multiple of " + n +
             " (the samples of batched rows)");
}

Value HostLaunchBuilder::rowsPerSample(Value rows, Value batch) {
  Value safe = arith::MaxSIOp::create(b, loc, batch, constant(1));
  return arith::DivSIOp::create(b, loc, rows, safe);
}

std::pair<Value, Value> HostLaunchBuilder::slabsOf(Value rows, Value cols,
                                                   Value batch,
                                                   const SlabDomain &slab) {
  Value slabs = arith::MulIOp::create(b, loc, batch, constant(slab.aSize));
  // rows / batch x cols / A: every factor divides exactly (A's dims lead
  // cols or are among the rows' after batch's).
  Value perSample = arith::MulIOp::create(b, loc, rowsPerSample(rows, batch),
                                          cols);
  Value elems = arith::DivSIOp::create(b, loc, perSample, constant(slab.aSize));
  return {slabs, elems};
}

void HostLaunchBuilder::checkSlabs(StringRef function,
                                   ArrayRef<int64_t> domain,
                                   const SlabDomain &slab, Value rows,
                                   Value cols, Value batch,
                                   StringRef suffix) {
  std::string r = ("rows" + suffix).str(), c = ("cols" + suffix).str();
  LaunchArith m{b, loc};
  using P = LaunchArith::P;
  failIf(arith::OrIOp::create(b, loc, m.cmp(P::slt, rows, m.i64(0)),
                              m.cmp(P::slt, cols, m.i64(1))),
         kOutOfRange,
         function + ": " + r + " must be >= 0 and " + c + " >= 1");
  // The elements of one sample (the dims after R), where static; the A x C
  // of them always.
  int64_t perSample = 1;
  for (int64_t d : domain.drop_front(slab.rRank))
    perSample = ShapedType::isDynamic(d) || perSample < 0 ? -1 : perSample * d;
  Value all = m.mul(rows, cols);
  std::string n = ("batch" + suffix).str();
  if (perSample >= 0) {
    failIf(m.cmp(P::ne, all, m.mul(batch, m.i64(perSample))), kOutOfRange,
           function + ": " + r + " x " + c + " must be " + n + " x " +
               Twine(perSample) + " (the elements of a sample)");
    return;
  }
  Value group = m.mul(m.max(batch, m.i64(1)),
                      m.i64(slab.aSize * slab.cSize));
  failIf(m.cmp(P::ne, m.rem(all, group), m.i64(0)),
         kOutOfRange,
         function + ": " + r + " x " + c + " must be a multiple of " + n +
             " x " + Twine(slab.aSize * slab.cSize) +
             " (the samples' G x C/G channels)");
}

void HostLaunchBuilder::checkContiguous(StringRef function, Value cols,
                                        ArrayRef<LaunchValue> strides) {
  for (const LaunchValue &s : strides)
    failIf(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, s.value,
                                 cols),
           kOutOfRange,
           function + ": " + s.name +
               " must be cols (contiguous tensors: a GroupNorm group)");
}

HostLaunchBuilder::Flags
HostLaunchBuilder::vectorFlags(StringRef function, const GroupLaunchPlan &plan,
                               const GroupLaunchOperands &ops) {
  // Natural alignment is required.
  for (ArrayRef<LaunchValue> group :
       {ArrayRef(ops.fullIn), ArrayRef(ops.fullOut), ArrayRef(ops.colIn),
        ArrayRef(ops.scalars)})
    for (const LaunchValue &v : group)
      call(RuntimeFn::CheckAligned,
           {v.value, constant(v.elementBytes),
            message((function + ": " + v.name).str())});
  Value no = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 0);
  if (plan.kernels.vector <= 1)
    return {no, no};
  // 16-byte alignment of every pointer, cols and strides picks the vector
  // kernel; strides that agree modulo V (any phase) the peeled one.
  int64_t V = plan.kernels.vector;
  auto isZero = [&](Value x) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x,
                                 constant(0));
  };
  auto both = [&](Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); };
  Value vec = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
  for (ArrayRef<LaunchValue> group :
       {ArrayRef(ops.fullIn), ArrayRef(ops.fullOut), ArrayRef(ops.colIn)})
    for (const LaunchValue &v : group) {
      Value address = LLVM::PtrToIntOp::create(b, loc, i64, v.value);
      vec = both(vec, isZero(arith::RemUIOp::create(
                          b, loc, address, constant(v.elementBytes * V))));
    }
  Value vecAny = vec;
  SmallVector<LaunchValue> strides(ops.stridesIn);
  llvm::append_range(strides, ops.stridesOut);
  if (plan.anyPeel())
    for (const LaunchValue &s : ArrayRef(strides).drop_front()) {
      Value diff = arith::SubIOp::create(b, loc, s.value, strides[0].value);
      vecAny = both(vecAny,
                    isZero(arith::RemSIOp::create(b, loc, diff, constant(V))));
    }
  vec = both(vec, isZero(arith::RemSIOp::create(b, loc, ops.cols, constant(V))));
  for (const LaunchValue &s : strides)
    vec = both(vec, isZero(arith::RemSIOp::create(b, loc, s.value, constant(V))));
  if (!plan.anyPeel())
    return {vec, no};
  Value notVec = arith::XOrIOp::create(
      b, loc, vec, arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1));
  return {vec, both(notVec, vecAny)};
}
