//===- ColumnReduction.cpp - Partial buffer -> column results -------------===//
//
// Part of norm-opt. The fixed-order reduction of the fp32 partial buffer
// [C, P, N] into the column results (dW, dB), written by the final kernel
// (two-launch path) and by the main kernel's single-launch tail, with the
// same threads so both paths sum in the same order.
//
//   shapeSlices         threads = W columns x S slices of the P programs
//   for each tile of W columns (CTA-strided):
//     sumSliceOfPrograms  slice s sums programs s, s + S, ... in order
//                         (every column result in the same loops)
//     (slot in shared memory, barrier)
//     finishColumn        slice 0 adds the slices in order, the initial
//                         value, the column epilogue; stores the result
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "MainKernel.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::norm;

/// S is the smallest power of two with at most kFinalProgramsPerSlice
/// programs per slice (and at most threads / 32, so W >= 32), from P at
/// run time: few partial rows (few rows) take wide tiles of one or two
/// slices instead of many 32-column tiles.
KernelBuilderBase::SliceShape
KernelBuilderBase::shapeSlices(int64_t threads, Value programs) {
  const int64_t maxSlices = threads / kFinalColumnsPerCTA;
  Value perSlice = arith::CeilDivUIOp::create(b, loc, programs,
                                              c64(kFinalProgramsPerSlice));
  SliceShape shape;
  shape.slices = c64(1);
  for (int64_t c = 2; c <= maxSlices; c *= 2)
    shape.slices = arith::SelectOp::create(b, loc, ult(c64(c / 2), perSlice),
                                           c64(c), shape.slices);
  shape.width = arith::DivUIOp::create(b, loc, c64(threads), shape.slices);
  Value tid = threadId();
  shape.column = arith::RemUIOp::create(b, loc, tid, shape.width);
  shape.slice = arith::DivUIOp::create(b, loc, tid, shape.width);
  return shape;
}

/// Programs sy, sy + S, ... of every column result, each in order. The
/// step is known only at run time, so the loop is unrolled by hand (8
/// loads per column result in flight, added in the same order), then the
/// rest one by one. The column results share the loops: their loads are
/// in flight together, so dW and dB cost one chain of memory latencies,
/// not two (perf-notes, "Final reduction").
SmallVector<Value> KernelBuilderBase::sumSliceOfPrograms(
    unsigned numCol, const SliceShape &shape, Value partial, Value programs,
    Value cols, Value colClamped) {
  Value S = shape.slices, sy = shape.slice;
  auto partAt = [&](unsigned c, Value q) {
    Value index = add(mul(add(mul(c64(c), programs), q), cols), colClamped);
    return load(partial, f32, index, 1)[0];
  };
  constexpr int64_t kUnroll = 8;
  Value count = arith::SelectOp::create(
      b, loc, ult(sy, programs),
      arith::CeilDivUIOp::create(
          b, loc, arith::SubIOp::create(b, loc, programs, sy), S),
      c64(0));
  Value full =
      mul(arith::DivUIOp::create(b, loc, count, c64(kUnroll)), c64(kUnroll));
  SmallVector<Value> zeros(numCol, zeroF32());
  auto unrolled = scf::ForOp::create(
      b, loc, c64(0), full, c64(kUnroll), zeros,
      [&](OpBuilder &, Location, Value i, ValueRange acc) {
        // Every load of the group first, then the additions in order.
        SmallVector<SmallVector<Value>> parts(numCol);
        for (int64_t u = 0; u < kUnroll; ++u)
          for (unsigned c = 0; c < numCol; ++c)
            parts[c].push_back(partAt(c, add(sy, mul(add(i, c64(u)), S))));
        SmallVector<Value> sums(acc.begin(), acc.end());
        for (unsigned c = 0; c < numCol; ++c)
          for (Value part : parts[c])
            sums[c] = arith::AddFOp::create(b, loc, sums[c], part);
        scf::YieldOp::create(b, loc, sums);
      });
  auto rest = scf::ForOp::create(
      b, loc, full, count, c64(1), unrolled.getResults(),
      [&](OpBuilder &, Location, Value i, ValueRange acc) {
        SmallVector<Value> parts;
        for (unsigned c = 0; c < numCol; ++c)
          parts.push_back(partAt(c, add(sy, mul(i, S))));
        SmallVector<Value> sums;
        for (unsigned c = 0; c < numCol; ++c)
          sums.push_back(arith::AddFOp::create(b, loc, acc[c], parts[c]));
        scf::YieldOp::create(b, loc, sums);
      });
  return SmallVector<Value>(rest.getResults());
}

/// Slice 0: the slices of column result `c` in order, finished and stored
/// (storeColumnResult).
void KernelBuilderBase::finishColumn(MixedReductionOp op, unsigned c,
                                     const SliceShape &shape, Value smem,
                                     Value col, ArrayRef<Value> inits,
                                     ArrayRef<Value> outs) {
  Value S = shape.slices, W = shape.width, tx = shape.column;
  auto slices = scf::ForOp::create(
      b, loc, c64(0), S, c64(1), ValueRange{zeroF32()},
      [&](OpBuilder &, Location, Value y, ValueRange acc) {
        Value slot = add(mul(add(mul(c64(c), S), y), W), tx);
        Value part =
            memref::LoadOp::create(b, loc, smem, ValueRange{toIndex(slot)});
        scf::YieldOp::create(
            b, loc, ValueRange{arith::AddFOp::create(b, loc, acc[0], part)});
      });
  storeColumnResult(op, c, col, slices.getResult(0), inits, outs);
}

void KernelBuilderBase::storeColumnResult(MixedReductionOp op, unsigned c,
                                          Value col, Value total,
                                          ArrayRef<Value> inits,
                                          ArrayRef<Value> outs) {
  Value init;
  Value initValue = op.getColInit()[c];
  if (auto constant = getConstantColumnInit(initValue)) {
    init = arith::ConstantOp::create(b, loc, cast<TypedAttr>(*constant));
  } else if (linalg::GenericOp prologue = getColumnInitPrologue(initValue)) {
    // The previous gradient as stored (e.g. bf16), then the prologue's body
    // (its extf) per column.
    Value raw = load(inits[c],
                     elementTypeOf(prologue.getDpsInputOperand(0)->get()), col,
                     1)[0];
    init = inlineRegion(prologue.getRegion(), {raw, raw})[0];
  } else {
    init = load(inits[c], elementTypeOf(initValue), col, 1)[0];
  }
  Type outType = elementTypeOf(op.getColResults()[c]);
  Value result =
      fromF32(arith::AddFOp::create(b, loc, toF32(init), total), outType);
  if (linalg::GenericOp e = getColumnEpilogue(op.getColResults()[c])) {
    result = inlineRegion(e.getRegion(), {result, result})[0];
    outType = result.getType();
  }
  store(outs[c], outType, col, result);
}

/// A CTA takes tiles firstTile, firstTile + tileStride, ...; `inits[c]` is
/// null where the initial value is a constant.
void KernelBuilderBase::emitColumnReduction(
    MixedReductionOp op, int64_t threads, Value partial, ArrayRef<Value> inits,
    ArrayRef<Value> outs, Value programs, Value cols, Value smem,
    Value firstTile, Value tileStride) {
  unsigned numCol = op.getColResults().size();
  SliceShape shape = shapeSlices(threads, programs);
  Value tiles = arith::CeilDivUIOp::create(b, loc, cols, shape.width);
  scf::ForOp::create(
      b, loc, firstTile, tiles, tileStride, ValueRange{},
      [&](OpBuilder &, Location, Value tile, ValueRange) {
        Value col = add(mul(tile, shape.width), shape.column);
        Value valid = ult(col, cols);
        Value colClamped =
            minU(col, arith::SubIOp::create(b, loc, cols, c64(1)));
        SmallVector<Value> sums = sumSliceOfPrograms(
            numCol, shape, partial, programs, cols, colClamped);
        for (unsigned c = 0; c < numCol; ++c) {
          Value sum = sums[c];
          Value slot = add(
              mul(add(mul(c64(c), shape.slices), shape.slice), shape.width),
              shape.column);
          memref::StoreOp::create(b, loc, sum, smem,
                                  ValueRange{toIndex(slot)});
        }
        gpu::BarrierOp::create(b, loc);
        Value writer = arith::AndIOp::create(
            b, loc, valid,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                  shape.slice, c64(0)));
        ifThen(writer, [&] {
          for (unsigned c = 0; c < numCol; ++c)
            finishColumn(op, c, shape, smem, col, inits, outs);
        });
        gpu::BarrierOp::create(b, loc); // smem is reused by the next tile
        scf::YieldOp::create(b, loc);
      });
}

//===----------------------------------------------------------------------===//
// The final kernel
//===----------------------------------------------------------------------===//

SmallVector<Type> FinalKernelBuilder::parameterTypes() {
  return kernelParameterTypes(b.getContext(), finalKernelParams(op));
}

LogicalResult FinalKernelBuilder::build(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value partial, programs, cols;
  SmallVector<Value> initIn, outs;
  for (auto [group, values] :
       groupArguments(finalKernelParams(op), entry.getArguments())) {
    switch (group.kind) {
    case KernelParam::Partial: partial = values[0]; break;
    case KernelParam::InitIn: initIn = values; break;
    case KernelParam::ColOut: outs = values; break;
    case KernelParam::Programs: programs = values[0]; break;
    case KernelParam::Cols: cols = values[0]; break;
    default: break;
    }
  }
  SmallVector<Value> inits = columnInits(op, initIn);
  CaptureSources sources;
  sources.domainRank = op.getDomainShape().size();
  // Batched rows: cols is batch x N (the partial rows' width), not a size
  // of the domain an epilogue may read.
  if (op.getBatchRank() == 0)
    sources.cols = cols;
  // Launched as a programmatic dependent, it may start while the main
  // kernel runs: nothing of it may be read or written before this.
  if (waitForMain)
    NVVM::GriddepcontrolOp::create(b, loc, NVVM::GridDepActionKind::wait);
  if (failed(cloneEpilogueCaptures(op, sources)))
    return failure();
  emitColumnReduction(op, threads, partial, inits, outs, programs, cols,
                      func.getWorkgroupAttributions().front(), blockId(),
                      gridDim());
  gpu::ReturnOp::create(b, loc);
  return success();
}
