//===- NormToGPU.cpp - norm.mixed_reduction to persistent GPU kernels -----===//
//
// Part of norm-opt.
//
// Writes, per norm.mixed_reduction, a main kernel (vector and scalar
// accesses) and a final-reduction kernel into `gpu.module @norm_kernels`.
// The main kernel is the persistent row loop of --norm-partial-accumulate
// mapped onto the GPU:
//
//   prog = block_id * R + lane / G;  P = grid_dim * R
//   for it in [0, ceil(M / P)):            // the same trip count for every
//     row = it * P + prog                  // lane, so shuffles and barriers
//     (loads of masked rows read row M-1;  // never diverge
//      their stores and contributions are dropped)
//     stage sums: per-lane f32 sums -> shuffle-xor butterfly -> smem across
//                 warps -> every lane holds the row result
//     elementwise: results stored with 16-byte stores; column contributions
//                  into per-lane fp32 accumulators (registers, or the
//                  program's row of the partial buffer when N is too long)
//   the accumulators -> row `prog` of the fp32 partial buffer [C, P, N]
//
// Payloads are the op's scalar regions, cloned once per owned column.
//
//===----------------------------------------------------------------------===//

#include "norm/Conversion/NormToGPU.h"
#include "norm/Conversion/GpuOptions.h"
#include "norm/Conversion/Passes.h"
#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::norm {
#define GEN_PASS_DEF_CONVERTNORMTOGPU
#include "norm/Conversion/Passes.h.inc"
} // namespace mlir::norm

using namespace mlir;
using namespace mlir::norm;

namespace {

/// Bytes of loads per lane the looped variant's loops over a row issue
/// before their first use (chunks per iteration = this / chunk bytes, at
/// least 2): enough in flight to stream a row instead of paying one memory
/// latency per chunk.
constexpr int64_t kLoopBytesInFlight = 16 * 4;
/// The scalar kernel (rows not 16-byte aligned, e.g. odd N) issues narrow
/// loads: up to 24 values (all full inputs) per loop iteration, so a
/// 17389-wide row of x and dy takes three iterations of 512 lanes instead
/// of five (each costs a memory latency); more spills at 128 registers.
constexpr int64_t kScalarLoopValuesInFlight = 24;

Type elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}


/// Shared helpers of both kernels: i64 index math, global loads and stores
/// through LLVM pointers, f32 conversions, payload cloning.
class KernelBuilderBase {
public:
  KernelBuilderBase(OpBuilder &b, Location loc)
      : b(b), loc(loc), i64(b.getI64Type()), i32(b.getI32Type()),
        f32(b.getF32Type()),
        ptr(LLVM::LLVMPointerType::get(b.getContext(), /*addressSpace=*/1)) {}

protected:
  Value c64(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  Value minU(Value x, Value y) { return arith::MinUIOp::create(b, loc, x, y); }
  Value threadId() {
    return arith::IndexCastUIOp::create(
        b, loc, i64, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  }
  Value blockId() {
    return arith::IndexCastUIOp::create(
        b, loc, i64, gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  }
  Value gridDim() {
    return arith::IndexCastUIOp::create(
        b, loc, i64, gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
  }
  Value zeroF32() {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  }
  Value toF32(Value v) {
    return v.getType() == f32 ? v : arith::ExtFOp::create(b, loc, f32, v);
  }
  Value fromF32(Value v, Type to) {
    return to == f32 ? v : arith::TruncFOp::create(b, loc, to, v);
  }

  /// `count` consecutive elements at base[index]; one access of
  /// count * sizeof(elem) bytes, which the callers keep aligned to its size.
  /// The access itself: a vector<count x elem> (or one elem) value.
  Value loadRaw(Value base, Type elem, Value index, int64_t count) {
    Value at = LLVM::GEPOp::create(b, loc, ptr, elem, base, ValueRange{index});
    unsigned align = elementBytes(elem) * count;
    if (count == 1)
      return LLVM::LoadOp::create(b, loc, elem, at, align);
    auto vecType = VectorType::get({count}, elem);
    return LLVM::LoadOp::create(b, loc, vecType, at, align);
  }
  SmallVector<Value> split(Value raw, int64_t count) {
    if (count == 1)
      return {raw};
    SmallVector<Value> elems;
    for (int64_t i = 0; i < count; ++i)
      elems.push_back(vector::ExtractOp::create(b, loc, raw, i));
    return elems;
  }
  SmallVector<Value> load(Value base, Type elem, Value index, int64_t count) {
    return split(loadRaw(base, elem, index, count), count);
  }
  void store(Value base, Type elem, Value index, ValueRange values) {
    Value at = LLVM::GEPOp::create(b, loc, ptr, elem, base, ValueRange{index});
    unsigned align = elementBytes(elem) * values.size();
    if (values.size() == 1) {
      LLVM::StoreOp::create(b, loc, values[0], at, align);
      return;
    }
    auto vecType = VectorType::get({int64_t(values.size())}, elem);
    Value vec = vector::FromElementsOp::create(b, loc, vecType, values);
    LLVM::StoreOp::create(b, loc, vec, at, align);
  }

  /// Clones `region`'s body with its arguments bound to `args`; values from
  /// above (constants) come from `above`.
  SmallVector<Value> inlineRegion(Region &region, ValueRange args) {
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

  /// Clones, at the kernel's entry, the values defined above `op` that its
  /// regions use: constants, and pure scalar arithmetic on constants and on
  /// the domain's sizes (`tensor.dim` of a [rows, N] tensor: a dynamic N
  /// divides the row sums). Fails (with an error) on anything else, e.g. a
  /// scalar function argument.
  LogicalResult cloneCapturedValues(Operation *op, int64_t domainRank) {
    auto visit = [&](Operation *inner) {
      for (Value operand : inner->getOperands()) {
        Region *home = operand.getParentRegion();
        if (op->isAncestor(home->getParentOp()))
          continue;
        if (failed(cloneCaptured(operand, domainRank))) {
          inner->emitError("convert-norm-to-gpu: a payload uses a value "
                           "defined outside the op that is neither a "
                           "constant nor computed from the domain's sizes");
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    };
    for (Region &region : op->getRegions())
      if (region.walk(visit).wasInterrupted())
        return failure();
    return success();
  }

  LogicalResult cloneCaptured(Value v, int64_t domainRank) {
    if (above.contains(v))
      return success();
    Operation *def = v.getDefiningOp();
    if (!def)
      return failure();
    if (matchPattern(v, m_Constant())) {
      above.map(v, b.clone(*def)->getResult(0));
      return success();
    }
    if (auto extract = dyn_cast<tensor::ExtractOp>(def)) {
      Value pointer = scalarPointers.lookup(v);
      if (!pointer)
        return failure();
      above.map(v, LLVM::LoadOp::create(b, loc, v.getType(), pointer,
                                        elementBytes(v.getType())));
      return success();
    }
    if (auto dim = dyn_cast<tensor::DimOp>(def)) {
      std::optional<int64_t> index = dim.getConstantIndex();
      auto type = dyn_cast<RankedTensorType>(dim.getSource().getType());
      if (!index || !type || type.getRank() != domainRank)
        return failure();
      Value size;
      if (*index == domainRank - 1)
        size = dimCols;
      else if (domainRank == 2 && *index == 0)
        size = dimRows;
      if (!size)
        return failure();
      above.map(v, arith::IndexCastUIOp::create(b, loc, b.getIndexType(),
                                                size));
      return success();
    }
    if (!isPure(def) || def->getNumRegions() != 0 ||
        !isa<arith::ArithDialect>(def->getDialect()))
      return failure();
    for (Value operand : def->getOperands())
      if (failed(cloneCaptured(operand, domainRank)))
        return failure();
    Operation *clone = b.clone(*def, above);
    above.map(def->getResults(), clone->getResults());
    return success();
  }


  void ifThen(Value cond, function_ref<void()> body) {
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    body();
  }
  Value toIndex(Value v) {
    return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), v);
  }

  /// A barrier across the whole grid (every CTA must be resident: the
  /// launcher uses a cooperative launch). The arrival counter is the one of
  /// cooperative groups: CTA 0 adds 2^31 - (grid - 1), the others 1, so the
  /// top bit flips once all have arrived and the low bits return to where
  /// they were; the word needs no reset between launches.
  void gridBarrier(Value counter) {
    gpu::BarrierOp::create(b, loc);
    Value isLeader = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                           threadId(), c64(0));
    ifThen(isLeader, [&] {
      auto gpuScope = NVVM::MemScopeKindAttr::get(b.getContext(),
                                                  NVVM::MemScopeKind::GPU);
      NVVM::MembarOp::create(b, loc, gpuScope);
      auto c32 = [&](int32_t v) -> Value {
        return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
      };
      Value grid = arith::TruncIOp::create(b, loc, i32, gridDim());
      Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            blockId(), c64(0));
      Value top = c32(int32_t(0x80000000u));
      Value firstInc = arith::SubIOp::create(
          b, loc, top, arith::SubIOp::create(b, loc, grid, c32(1)));
      Value inc = arith::SelectOp::create(b, loc, isFirst, firstInc, c32(1));
      Value old = LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add,
                                            counter, inc,
                                            LLVM::AtomicOrdering::monotonic);
      auto spin = scf::WhileOp::create(b, loc, TypeRange{}, ValueRange{});
      b.createBlock(&spin.getBefore());
      Value now = LLVM::LoadOp::create(b, loc, i32, counter, /*alignment=*/4,
                                       /*isVolatile=*/true);
      Value flipped = arith::AndIOp::create(
          b, loc, arith::XOrIOp::create(b, loc, old, now), top);
      Value waiting = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            flipped, c32(0));
      scf::ConditionOp::create(b, loc, waiting, ValueRange{});
      b.createBlock(&spin.getAfter());
      scf::YieldOp::create(b, loc);
      b.setInsertionPointAfter(spin);
      NVVM::MembarOp::create(b, loc, gpuScope);
    });
    gpu::BarrierOp::create(b, loc);
  }

  /// The fixed-order reduction of the fp32 partial buffer [C, P, N] into
  /// the column results. The final kernel and the single-launch tail of the
  /// main kernel both emit it with the same `threads`, so they sum in the
  /// same order. The threads are W columns x S slices: S is the smallest
  /// power of two with at most 16 programs per slice (at most threads / 32,
  /// so W >= 32), from P at run time: few partial rows (few rows) take wide
  /// tiles of one or two slices instead of many 32-column tiles. A CTA takes
  /// tiles first, first + stride, ...; slice s sums programs s, s + S, ...
  /// in order, then slice 0 adds the slices in order, the initial value,
  /// and the column epilogue (truncf of dW). `inits[c]` is null where the
  /// initial value is a constant.
  void emitColumnReduction(MixedReductionOp op, int64_t threads,
                           Value partial, ArrayRef<Value> inits,
                           ArrayRef<Value> outs, Value programs, Value cols,
                           Value smem, Value firstTile, Value tileStride) {
    const int64_t maxSlices = threads / kFinalColumnsPerCTA;
    unsigned numCol = op.getColResults().size();
    Value perSlice = arith::CeilDivUIOp::create(
        b, loc, programs, c64(kFinalProgramsPerSlice));
    Value S = c64(1);
    for (int64_t c = 2; c <= maxSlices; c *= 2)
      S = arith::SelectOp::create(b, loc, ult(c64(c / 2), perSlice), c64(c),
                                  S);
    Value W = arith::DivUIOp::create(b, loc, c64(threads), S);
    Value tid = threadId();
    Value tx = arith::RemUIOp::create(b, loc, tid, W);
    Value sy = arith::DivUIOp::create(b, loc, tid, W);
    Value tiles = arith::CeilDivUIOp::create(b, loc, cols, W);
    scf::ForOp::create(
        b, loc, firstTile, tiles, tileStride, ValueRange{},
        [&](OpBuilder &, Location, Value tile, ValueRange) {
          Value col = add(mul(tile, W), tx);
          Value valid = ult(col, cols);
          Value colClamped =
              minU(col, arith::SubIOp::create(b, loc, cols, c64(1)));
          for (unsigned c = 0; c < numCol; ++c) {
            // Programs sy, sy + S, ... in order. The step is known only at
            // run time, so the loop is unrolled by hand (8 loads in flight,
            // added in the same order), then the rest one by one.
            auto partAt = [&](Value q) {
              Value index = add(mul(add(mul(c64(c), programs), q), cols),
                                colClamped);
              return load(partial, f32, index, 1)[0];
            };
            constexpr int64_t kUnroll = 8;
            Value count = arith::SelectOp::create(
                b, loc, ult(sy, programs),
                arith::CeilDivUIOp::create(
                    b, loc, arith::SubIOp::create(b, loc, programs, sy), S),
                c64(0));
            Value full = mul(arith::DivUIOp::create(b, loc, count,
                                                    c64(kUnroll)),
                             c64(kUnroll));
            auto unrolled = scf::ForOp::create(
                b, loc, c64(0), full, c64(kUnroll), ValueRange{zeroF32()},
                [&](OpBuilder &, Location, Value i, ValueRange acc) {
                  SmallVector<Value> parts;
                  for (int64_t u = 0; u < kUnroll; ++u)
                    parts.push_back(partAt(add(sy, mul(add(i, c64(u)), S))));
                  Value sum = acc[0];
                  for (Value part : parts)
                    sum = arith::AddFOp::create(b, loc, sum, part);
                  scf::YieldOp::create(b, loc, ValueRange{sum});
                });
            auto rest = scf::ForOp::create(
                b, loc, full, count, c64(1),
                ValueRange{unrolled.getResult(0)},
                [&](OpBuilder &, Location, Value i, ValueRange acc) {
                  Value part = partAt(add(sy, mul(i, S)));
                  scf::YieldOp::create(
                      b, loc,
                      ValueRange{arith::AddFOp::create(b, loc, acc[0], part)});
                });
            Value slot = add(mul(add(mul(c64(c), S), sy), W), tx);
            memref::StoreOp::create(b, loc, rest.getResult(0), smem,
                                    ValueRange{toIndex(slot)});
          }
          gpu::BarrierOp::create(b, loc);
          Value writer = arith::AndIOp::create(
              b, loc, valid,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, sy,
                                    c64(0)));
          ifThen(writer, [&] {
            for (unsigned c = 0; c < numCol; ++c) {
              auto slices = scf::ForOp::create(
                  b, loc, c64(0), S, c64(1), ValueRange{zeroF32()},
                  [&](OpBuilder &, Location, Value y, ValueRange acc) {
                    Value slot = add(mul(add(mul(c64(c), S), y), W), tx);
                    Value part = memref::LoadOp::create(
                        b, loc, smem, ValueRange{toIndex(slot)});
                    scf::YieldOp::create(
                        b, loc,
                        ValueRange{
                            arith::AddFOp::create(b, loc, acc[0], part)});
                  });
              Value total = slices.getResult(0);
              Value init;
              Type initType = elementTypeOf(op.getColInit()[c]);
              if (auto constant = getConstantColumnInit(op.getColInit()[c]))
                init = arith::ConstantOp::create(b, loc,
                                                 cast<TypedAttr>(*constant));
              else
                init = load(inits[c], initType, col, 1)[0];
              Type outType = elementTypeOf(op.getColResults()[c]);
              Value result = fromF32(
                  arith::AddFOp::create(b, loc, toF32(init), total), outType);
              if (linalg::GenericOp e =
                      getColumnEpilogue(op.getColResults()[c])) {
                result = inlineRegion(e.getRegion(), {result, result})[0];
                outType = result.getType();
              }
              store(outs[c], outType, col, result);
            }
          });
          gpu::BarrierOp::create(b, loc); // smem is reused by the next tile
          scf::YieldOp::create(b, loc);
        });
  }

  /// The column results' parameters shared by the final kernel and the
  /// single-launch tail: a pointer per initial value that is not a
  /// constant, then one per column result.
  void appendColumnResultTypes(MixedReductionOp op, SmallVector<Type> &types) {
    for (Value init : op.getColInit())
      if (!getConstantColumnInit(init))
        types.push_back(ptr);
    types.append(op.getColResults().size(), ptr);
  }
  /// Takes those parameters off the front of `args`: `inits` (null where
  /// the initial value is a constant) and `outs`.
  void takeColumnResultArgs(MixedReductionOp op, ValueRange &args,
                            SmallVector<Value> &inits,
                            SmallVector<Value> &outs) {
    for (Value init : op.getColInit()) {
      if (getConstantColumnInit(init)) {
        inits.push_back(nullptr);
        continue;
      }
      inits.push_back(args.front());
      args = args.drop_front();
    }
    size_t numCol = op.getColResults().size();
    outs.append(args.begin(), args.begin() + numCol);
    args = args.drop_front(numCol);
  }

  /// Clones what the column epilogues capture (constants) to the entry.
  LogicalResult cloneEpilogueCaptures(MixedReductionOp op) {
    for (Value r : op.getColResults())
      if (linalg::GenericOp e = getColumnEpilogue(r))
        if (failed(cloneCapturedValues(e, op.getDomainShape().size())))
          return failure();
    return success();
  }

  Value dimRows, dimCols; // i64 sizes for captured tensor.dim, if known
  // Captured 0-d tensor reads and the kernel pointers that hold them.
  DenseMap<Value, Value> scalarPointers;
  OpBuilder &b;
  Location loc;
  Type i64, i32, f32, ptr;
  IRMapping above;
};

/// The main kernel: the persistent row loop.
class MainKernelBuilder : public KernelBuilderBase {
public:
  MainKernelBuilder(OpBuilder &b, MixedReductionOp op, const KernelPlan &plan,
                    int64_t vector)
      : KernelBuilderBase(b, op.getLoc()), op(op), plan(plan), V(vector),
        G(plan.threadsPerRow), R(plan.rowsPerCTA) {
    // The scalar kernel owns as many columns per lane as the vector one.
    K = plan.resident() ? plan.chunksPerThread * (plan.vector / V) : 0;
  }

  /// Parameters: full inputs, row inputs, col inputs, full results,
  /// partial, rows, cols, one row stride per full input then full result.
  SmallVector<Type> parameterTypes() {
    SmallVector<Type> types;
    unsigned pointers = op.getFull().size() + op.getRow().size() +
                        op.getCol().size() + op.getFullResults().size() + 1;
    types.append(pointers, ptr);
    types.append(2 + op.getFull().size() + op.getFullResults().size(), i64);
    types.append(getCapturedScalars(op).size(), ptr);
    // The single-launch tail: the grid-barrier word, the non-constant
    // column inits, the column outputs and the `finalize` flag (in every
    // kernel's signature; read where plan.singleLaunch).
    if (!op.getColResults().empty()) {
      types.push_back(ptr);
      appendColumnResultTypes(op, types);
      types.push_back(i64);
    }
    return types;
  }

  LogicalResult build(gpu::GPUFuncOp func);

private:
  struct Chunk {
    Value valid;  // the chunk lies inside the row
    Value column; // its first column (clamped into the row)
    SmallVector<SmallVector<Value>> col; // [col input][lane element]
  };

  /// Chunk k of the lane: of the whole row, or of the program's column
  /// part (looped variant with column groups).
  Chunk chunkAt(Value k, bool inPart = false);
  /// The cp.async ring: dynamic shared memory after the accumulators, as an
  /// LLVM shared-memory pointer (an extern .shared array aliases the
  /// dynamic shared memory's base).
  Value asyncRingBase(gpu::GPUFuncOp func) {
    auto module = func->getParentOfType<gpu::GPUModuleOp>();
    constexpr StringLiteral name = "norm_async_ring";
    auto array = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
    if (!module.lookupSymbol(name)) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      LLVM::GlobalOp::create(b, loc, array, /*isConstant=*/false,
                             LLVM::Linkage::Internal, name, Attribute(),
                             /*alignment=*/16, /*addrSpace=*/3);
    }
    Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
    Value base = LLVM::AddressOfOp::create(b, loc, ptr3, name);
    return LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), base,
                               ValueRange{c64(plan.asyncRingOffset)});
  }
  SmallVector<Value> regionArgs(ArrayRef<SmallVector<Value>> fullVals,
                                const Chunk &chunk, int64_t e,
                                ArrayRef<Value> rowResults);
  SmallVector<SmallVector<Value>> loadFull(const Chunk &chunk);
  SmallVector<Value> groupReduce(SmallVector<Value> sums);
  Value select(Value cond, Value v) {
    return arith::SelectOp::create(b, loc, cond, v, zeroF32());
  }
  SmallVector<Value> loadShared(Value index, int64_t count) {
    SmallVector<Value> vals;
    for (int64_t e = 0; e < count; ++e)
      vals.push_back(memref::LoadOp::create(b, loc, accSmem,
                                            ValueRange{toIndex(add(index, c64(e)))}));
    return vals;
  }
  void storeShared(Value index, ValueRange vals) {
    for (auto [e, v] : llvm::enumerate(vals))
      memref::StoreOp::create(b, loc, v, accSmem,
                              ValueRange{toIndex(add(index, c64(e)))});
  }

  MixedReductionOp op;
  const KernelPlan &plan;
  int64_t V, G, R, K;
  // Kernel values.
  SmallVector<Value> fullIn, rowIn, colIn, fullOut, strideIn, strideOut;
  Value partial, rows, cols, chunks, lane, group, prog, programs, rowClamped;
  // Column groups (looped): `colGroups` programs share a row, each owning
  // the chunks [partBegin, partEnd) for the elementwise pass and the column
  // sums; rows go to the rowPrograms = programs / colGroups groups.
  Value progRow, rowPrograms, partBegin, partEnd, partChunks;
  int64_t maxSums = 1; // row results per stage, at most
  SmallVector<Value> rowVals;
  Value smem;
  Value accSmem; // dynamic shared memory as f32 (plan.dynamicSharedBytes)
};

MainKernelBuilder::Chunk MainKernelBuilder::chunkAt(Value k, bool inPart) {
  Chunk chunk;
  Value c = add(mul(k, c64(G)), lane);
  Value end = chunks;
  if (inPart) {
    c = add(c, partBegin);
    end = partEnd;
  }
  chunk.valid = ult(c, end);
  Value last = arith::SubIOp::create(b, loc, end, c64(1));
  chunk.column = mul(minU(c, last), c64(V));
  for (Value in : colIn)
    chunk.col.push_back(load(in, elementTypeOf(op.getCol()[chunk.col.size()]),
                             chunk.column, V));
  return chunk;
}

SmallVector<SmallVector<Value>> MainKernelBuilder::loadFull(const Chunk &chunk) {
  SmallVector<SmallVector<Value>> vals;
  for (auto [i, in] : llvm::enumerate(fullIn)) {
    Value index = add(mul(rowClamped, strideIn[i]), chunk.column);
    vals.push_back(load(in, elementTypeOf(op.getFull()[i]), index, V));
  }
  return vals;
}

SmallVector<Value>
MainKernelBuilder::regionArgs(ArrayRef<SmallVector<Value>> fullVals,
                              const Chunk &chunk, int64_t e,
                              ArrayRef<Value> rowResults) {
  SmallVector<Value> args;
  for (const auto &vals : fullVals)
    args.push_back(vals[e]);
  llvm::append_range(args, rowVals);
  for (const auto &vals : chunk.col)
    args.push_back(vals[e]);
  llvm::append_range(args, rowResults);
  return args;
}

SmallVector<Value> MainKernelBuilder::groupReduce(SmallVector<Value> sums) {
  // Butterfly inside the warp: every lane ends with the same sum (a + b and
  // b + a round alike), in a fixed order.
  for (int64_t off = std::min<int64_t>(G, 32) / 2; off >= 1; off /= 2)
    for (Value &s : sums) {
      auto shuffled =
          gpu::ShuffleOp::create(b, loc, s, off, 32, gpu::ShuffleMode::XOR);
      s = arith::AddFOp::create(b, loc, s, shuffled.getShuffleResult());
    }
  if (G <= 32)
    return sums;
  // Across the warps of the row: lane 0 of each warp writes the program's
  // slots, every lane reads its program's slots in warp order.
  int64_t warps = G / 32;
  Value laneInWarp = arith::RemUIOp::create(b, loc, lane, c64(32));
  Value warp = arith::DivUIOp::create(b, loc, lane, c64(32));
  Value base = mul(group, c64(maxSums * warps));
  Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        laneInWarp, c64(0));
  ifThen(isFirst, [&] {
    for (auto [j, s] : llvm::enumerate(sums))
      memref::StoreOp::create(
          b, loc, s, smem,
          ValueRange{toIndex(add(base, add(c64(j * warps), warp)))});
  });
  gpu::BarrierOp::create(b, loc);
  SmallVector<Value> totals;
  for (unsigned j = 0; j < sums.size(); ++j) {
    Value total;
    for (int64_t w = 0; w < warps; ++w) {
      Value idx = toIndex(add(base, c64(j * warps + w)));
      Value part = memref::LoadOp::create(b, loc, smem, ValueRange{idx});
      total = total ? arith::AddFOp::create(b, loc, total, part).getResult()
                    : part;
    }
    totals.push_back(total);
  }
  gpu::BarrierOp::create(b, loc); // smem is reused by the next reduction
  return totals;
}

LogicalResult MainKernelBuilder::build(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);

  ValueRange args = entry.getArguments();
  auto take = [&](SmallVector<Value> &into, size_t n) {
    into.append(args.begin(), args.begin() + n);
    args = args.drop_front(n);
  };
  take(fullIn, op.getFull().size());
  take(rowIn, op.getRow().size());
  take(colIn, op.getCol().size());
  take(fullOut, op.getFullResults().size());
  partial = args[0];
  rows = args[1];
  cols = plan.staticCols ? c64(*plan.staticCols) : args[2];
  args = args.drop_front(3);
  take(strideIn, op.getFull().size());
  take(strideOut, op.getFullResults().size());
  SmallVector<tensor::ExtractOp> scalars = getCapturedScalars(op);
  for (auto [extract, pointer] : llvm::zip(scalars, args))
    scalarPointers[extract.getResult()] = pointer;
  args = args.drop_front(scalars.size());
  SmallVector<Value> finalInits, finalOuts;
  Value barrierWord, finalize;
  if (!op.getColResults().empty()) {
    barrierWord = args[0];
    args = args.drop_front();
    takeColumnResultArgs(op, args, finalInits, finalOuts);
    finalize = args[0];
  }
  // A compile-time constant: at run time it costs ~35 registers (and a CTA
  // per SM) in the looped kernels.
  Value colGroups = c64(plan.resident() ? 1 : plan.minColumnGroups);
  dimRows = rows;
  dimCols = cols;
  if (failed(cloneCapturedValues(op, op.getDomainShape().size())) ||
      failed(cloneEpilogueCaptures(op)))
    return failure();
  if (G > 32)
    smem = func.getWorkgroupAttributions().front();
  if (plan.dynamicSharedBytes > 0) {
    Attribute workgroup = gpu::AddressSpaceAttr::get(
        b.getContext(), gpu::AddressSpace::Workgroup);
    Value bytes = gpu::DynamicSharedMemoryOp::create(
        b, loc,
        MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                        MemRefLayoutAttrInterface{}, workgroup));
    Value zeroIdx = arith::ConstantIndexOp::create(b, loc, 0);
    Value count =
        arith::ConstantIndexOp::create(b, loc, plan.dynamicSharedBytes / 4);
    accSmem = memref::ViewOp::create(
        b, loc,
        MemRefType::get({ShapedType::kDynamic}, f32,
                        MemRefLayoutAttrInterface{}, workgroup),
        bytes, zeroIdx, ValueRange{count});
  }

  unsigned numStages = op.getRowStages().size();
  unsigned numCol = op.getColResults().size();

  Value tid = threadId();
  lane = arith::RemUIOp::create(b, loc, tid, c64(G));
  group = arith::DivUIOp::create(b, loc, tid, c64(G));
  for (Region &stage : op.getRowStages())
    maxSums = std::max<int64_t>(
        maxSums, stage.front().getTerminator()->getNumOperands());
  prog = add(mul(blockId(), c64(R)), group);
  programs = mul(gridDim(), c64(R));
  chunks = arith::DivUIOp::create(b, loc, cols, c64(V));
  if (plan.resident()) {
    progRow = prog;
    rowPrograms = programs;
    partBegin = c64(0);
    partEnd = partChunks = chunks;
  } else {
    progRow = arith::DivUIOp::create(b, loc, prog, colGroups);
    rowPrograms = arith::DivUIOp::create(b, loc, programs, colGroups);
    partChunks = arith::CeilDivUIOp::create(b, loc, chunks, colGroups);
    partBegin = mul(arith::RemUIOp::create(b, loc, prog, colGroups),
                    partChunks);
    partEnd = minU(add(partBegin, partChunks), chunks);
  }
  Value iters = arith::CeilDivUIOp::create(b, loc, rows, rowPrograms);
  Value lastRow = arith::SubIOp::create(b, loc, rows, c64(1));
  Value zero64 = c64(0), one64 = c64(1);
  auto partialIndex = [&](unsigned c, Value column) {
    return add(mul(add(mul(c64(c), rowPrograms), progRow), cols), column);
  };
  // The shared-memory accumulators hold the program's part of the row.
  Value partCols = mul(partChunks, c64(V));
  Value partFirstCol = mul(partBegin, c64(V));
  auto sharedIndex = [&](unsigned c, Value column) {
    return add(mul(c64(c), partCols),
               arith::SubIOp::create(b, loc, column, partFirstCol));
  };
  // Looped variant: chunks per lane at run time, `unroll` per iteration
  // (over the whole row for the row sums, over the part for the rest).
  Value loopedChunks = arith::CeilDivUIOp::create(b, loc, chunks, c64(G));
  Value partLoopedChunks =
      arith::CeilDivUIOp::create(b, loc, partChunks, c64(G));
  int64_t chunkBytes = 0;
  for (Value v : op.getFull())
    chunkBytes = std::max(chunkBytes, elementBytes(v.getType()) * V);
  const int64_t unroll =
      std::clamp<int64_t>(kLoopBytesInFlight / chunkBytes, 2,
                          V == 1 ? std::max<int64_t>(
                                       2, kScalarLoopValuesInFlight /
                                              int64_t(fullIn.size()))
                                 : 8);

  // Resident: column inputs loaded once; accumulators in registers.
  SmallVector<Chunk> owned;
  SmallVector<Value> accInit;
  if (plan.resident()) {
    for (int64_t k = 0; k < K; ++k)
      owned.push_back(chunkAt(c64(k)));
    accInit.assign(numCol * K * V, zeroF32());
  } else {
    // Looped: the program's part of its partial row starts at zero.
    scf::ForOp::create(
        b, loc, zero64, partLoopedChunks, one64, ValueRange{},
        [&](OpBuilder &, Location, Value k, ValueRange) {
          Value c = add(add(mul(k, c64(G)), lane), partBegin);
          ifThen(ult(c, partEnd), [&] {
            SmallVector<Value> zeros(V, zeroF32());
            for (unsigned ci = 0; ci < numCol; ++ci) {
              if (plan.sharedAccumulators)
                storeShared(sharedIndex(ci, mul(c, c64(V))), zeros);
              else
                store(partial, f32, partialIndex(ci, mul(c, c64(V))), zeros);
            }
          });
          scf::YieldOp::create(b, loc);
        });
  }

  // Asynchronous copies (cp.async, vector kernel): the full inputs of the
  // next stages - 1 rows stream into a per-thread ring in dynamic shared
  // memory while this row is reduced, without holding registers. Each
  // thread reads back only the slots it filled itself, so waiting for its
  // own copy groups is enough (no barrier). Slot (stage, k, input) of
  // thread t is 16 bytes at ((stage * K + k) * F + input) * T + t: a warp's
  // accesses to one slot index are contiguous (no bank conflicts).
  const int64_t stages = plan.resident() && V > 1 ? plan.asyncStages : 0;
  const int64_t F = fullIn.size(), T = plan.blockThreads();
  Value ring;
  if (stages > 0)
    ring = asyncRingBase(func);
  auto slot = [&](Value stage, int64_t k, int64_t i) {
    Value index = add(mul(add(mul(stage, c64(K * F)), c64(k * F + i)), c64(T)),
                      tid);
    Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
    return LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), ring,
                               ValueRange{mul(index, c64(16))})
        .getResult();
  };
  auto issueCopies = [&](Value rowIndex, Value stage) {
    for (auto [k, chunk] : llvm::enumerate(owned))
      for (auto [i, in] : llvm::enumerate(fullIn)) {
        Type elem = elementTypeOf(op.getFull()[i]);
        Value src = LLVM::GEPOp::create(
            b, loc, ptr, elem, in,
            ValueRange{add(mul(rowIndex, strideIn[i]), chunk.column)});
        int64_t bytes = elementBytes(elem) * V;
        auto modifier = NVVM::LoadCacheModifierKindAttr::get(
            b.getContext(), bytes == 16 ? NVVM::LoadCacheModifierKind::CG
                                        : NVVM::LoadCacheModifierKind::CA);
        NVVM::CpAsyncOp::create(b, loc, slot(stage, k, i), src,
                                b.getI32IntegerAttr(bytes), modifier,
                                Value());
      }
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
  };
  if (stages > 0)
    for (int64_t s = 0; s + 1 < stages; ++s)
      issueCopies(minU(add(prog, mul(c64(s), programs)), lastRow), c64(s));

  // Prefetch: the next row's full inputs are loaded (as raw accesses) while
  // this row is reduced; they ride in the loop's carried values.
  bool prefetch = plan.resident() && plan.prefetch && stages == 0;
  auto rawFull = [&](Value rowIndex) {
    SmallVector<Value> raws;
    for (const Chunk &chunk : owned)
      for (auto [i, in] : llvm::enumerate(fullIn))
        raws.push_back(loadRaw(in, elementTypeOf(op.getFull()[i]),
                               add(mul(rowIndex, strideIn[i]), chunk.column),
                               V));
    return raws;
  };
  SmallVector<Value> loopInit(accInit);
  if (prefetch)
    llvm::append_range(loopInit, rawFull(minU(prog, lastRow)));
  size_t numAcc = accInit.size();
  size_t numRaw = loopInit.size() - numAcc;
  // Resident: the row inputs (mean, rstd) are loaded one row ahead and
  // carried: each row's first use of them would otherwise wait a full
  // memory latency, which the full inputs' prefetch or ring does not cover
  // (perf-notes v6). Not in the looped variant, where the extra registers
  // cost a CTA per SM and a row's first pass waits on memory anyway.
  const bool carryRowInputs = plan.resident();
  auto loadRowInputs = [&](Value rowIndex) {
    SmallVector<Value> vals;
    for (auto [j, in] : llvm::enumerate(rowIn))
      vals.push_back(load(in, elementTypeOf(op.getRow()[j]), rowIndex, 1)[0]);
    return vals;
  };
  if (carryRowInputs)
    llvm::append_range(loopInit, loadRowInputs(minU(prog, lastRow)));

  auto rowLoop = scf::ForOp::create(
      b, loc, zero64, iters, one64, loopInit,
      [&](OpBuilder &, Location, Value it, ValueRange carried) {
        ValueRange acc = carried.take_front(numAcc);
        Value row = add(mul(it, rowPrograms), progRow);
        Value rowValid = ult(row, rows);
        rowClamped = minU(row, lastRow);
        SmallVector<Value> nextRaw;
        if (prefetch)
          nextRaw = rawFull(minU(add(row, programs), lastRow));
        if (stages > 0) {
          // Row it + stages - 1 into the stage row it - 1 used; then wait
          // until this row's group (stages - 1 groups ago) has landed.
          Value ahead = add(row, mul(c64(stages - 1), programs));
          issueCopies(minU(ahead, lastRow),
                      arith::RemUIOp::create(b, loc, add(it, c64(stages - 1)),
                                             c64(stages)));
          NVVM::CpAsyncWaitGroupOp::create(b, loc, stages - 1);
        }
        SmallVector<Value> nextRowVals;
        if (carryRowInputs) {
          rowVals.assign(carried.begin() + numAcc + numRaw, carried.end());
          nextRowVals = loadRowInputs(minU(add(row, programs), lastRow));
        } else {
          rowVals = loadRowInputs(rowClamped);
        }

        // Resident: the row's full inputs stay in registers for all passes.
        SmallVector<SmallVector<SmallVector<Value>>> fullVals;
        if (prefetch) {
          ValueRange current = carried.drop_front(numAcc);
          for (size_t k = 0; k < owned.size(); ++k) {
            SmallVector<SmallVector<Value>> vals;
            for (size_t i = 0; i < fullIn.size(); ++i)
              vals.push_back(split(current[k * fullIn.size() + i], V));
            fullVals.push_back(vals);
          }
        } else if (stages > 0) {
          Value stage = arith::RemUIOp::create(b, loc, it, c64(stages));
          for (int64_t k = 0; k < K; ++k) {
            SmallVector<SmallVector<Value>> vals;
            for (int64_t i = 0; i < F; ++i) {
              Type elem = elementTypeOf(op.getFull()[i]);
              Value raw = LLVM::LoadOp::create(
                  b, loc, VectorType::get({V}, elem), slot(stage, k, i),
                  elementBytes(elem) * V);
              vals.push_back(split(raw, V));
            }
            fullVals.push_back(vals);
          }
        } else if (plan.resident()) {
          for (const Chunk &chunk : owned)
            fullVals.push_back(loadFull(chunk));
        }

        SmallVector<Value> rowResults;
        for (unsigned s = 0; s < numStages; ++s) {
          Region &stage = op.getRowStages()[s];
          TypeRange yieldTypes =
              stage.front().getTerminator()->getOperandTypes();
          SmallVector<Value> sums(yieldTypes.size(), zeroF32());
          auto accumulate = [&](const Chunk &chunk,
                                ArrayRef<SmallVector<Value>> vals,
                                SmallVector<Value> &into) {
            for (int64_t e = 0; e < V; ++e) {
              SmallVector<Value> contrib = inlineRegion(
                  stage, regionArgs(vals, chunk, e, rowResults));
              for (auto [sum, c] : llvm::zip(into, contrib))
                sum = arith::AddFOp::create(b, loc, sum,
                                            select(chunk.valid, toF32(c)));
            }
          };
          if (plan.resident()) {
            for (auto [k, chunk] : llvm::enumerate(owned))
              accumulate(chunk, fullVals[k], sums);
          } else {
            // `unroll` chunks per iteration: their loads are all issued
            // before the first use, so the row streams instead of paying
            // one memory latency per chunk.
            auto loop = scf::ForOp::create(
                b, loc, zero64, loopedChunks, c64(unroll), sums,
                [&](OpBuilder &, Location, Value k, ValueRange carried) {
                  SmallVector<Chunk> group;
                  SmallVector<SmallVector<SmallVector<Value>>> vals;
                  for (int64_t u = 0; u < unroll; ++u) {
                    group.push_back(chunkAt(add(k, c64(u))));
                    vals.push_back(loadFull(group.back()));
                  }
                  SmallVector<Value> next(carried);
                  for (int64_t u = 0; u < unroll; ++u)
                    accumulate(group[u], vals[u], next);
                  scf::YieldOp::create(b, loc, next);
                });
            sums.assign(loop.getResults().begin(), loop.getResults().end());
          }
          for (auto [total, type] : llvm::zip(groupReduce(sums), yieldTypes))
            rowResults.push_back(fromF32(total, type));
        }

        // Elementwise results and column contributions of one chunk.
        auto finishChunk = [&](const Chunk &chunk,
                               ArrayRef<SmallVector<Value>> vals,
                               MutableArrayRef<Value> accs) {
          SmallVector<SmallVector<Value>> outs(fullOut.size());
          SmallVector<SmallVector<Value>> contribs(numCol);
          for (int64_t e = 0; e < V; ++e) {
            SmallVector<Value> a = regionArgs(vals, chunk, e, rowResults);
            for (auto [i, v] :
                 llvm::enumerate(inlineRegion(op.getElementwise(), a)))
              outs[i].push_back(v);
            for (auto [c, v] :
                 llvm::enumerate(inlineRegion(op.getColumns(), a)))
              contribs[c].push_back(toF32(v));
          }
          Value live = arith::AndIOp::create(b, loc, rowValid, chunk.valid);
          ifThen(live, [&] {
            for (auto [i, out] : llvm::enumerate(fullOut)) {
              Value index = add(mul(rowClamped, strideOut[i]), chunk.column);
              store(out, elementTypeOf(op.getFullResults()[i]), index,
                    outs[i]);
            }
            if (accs.empty()) // looped: accumulate into the partial row
              for (unsigned c = 0; c < numCol; ++c) {
                bool shared = plan.sharedAccumulators;
                Value index = shared ? sharedIndex(c, chunk.column)
                                     : partialIndex(c, chunk.column);
                SmallVector<Value> sums =
                    shared ? loadShared(index, V) : load(partial, f32, index, V);
                for (int64_t e = 0; e < V; ++e)
                  sums[e] =
                      arith::AddFOp::create(b, loc, sums[e], contribs[c][e]);
                if (shared)
                  storeShared(index, sums);
                else
                  store(partial, f32, index, sums);
              }
          });
          for (unsigned c = 0; c < accs.size() / V; ++c)
            for (int64_t e = 0; e < V; ++e)
              accs[c * V + e] = arith::AddFOp::create(
                  b, loc, accs[c * V + e], select(live, contribs[c][e]));
        };

        SmallVector<Value> next(acc.begin(), acc.end());
        if (plan.resident()) {
          for (auto [k, chunk] : llvm::enumerate(owned)) {
            // Accumulators of chunk k: [column result][element].
            SmallVector<Value> accs;
            for (unsigned c = 0; c < numCol; ++c)
              for (int64_t e = 0; e < V; ++e)
                accs.push_back(next[(c * K + k) * V + e]);
            finishChunk(chunk, fullVals[k], accs);
            for (unsigned c = 0; c < numCol; ++c)
              for (int64_t e = 0; e < V; ++e)
                next[(c * K + k) * V + e] = accs[c * V + e];
          }
          llvm::append_range(next, nextRaw);
        } else {
          scf::ForOp::create(
              b, loc, zero64, partLoopedChunks, c64(unroll), ValueRange{},
              [&](OpBuilder &, Location, Value k, ValueRange) {
                SmallVector<Chunk> group;
                SmallVector<SmallVector<SmallVector<Value>>> vals;
                for (int64_t u = 0; u < unroll; ++u) {
                  group.push_back(chunkAt(add(k, c64(u)), /*inPart=*/true));
                  vals.push_back(loadFull(group.back()));
                }
                for (int64_t u = 0; u < unroll; ++u)
                  finishChunk(group[u], vals[u], {});
                scf::YieldOp::create(b, loc);
              });
        }
        llvm::append_range(next, nextRowVals);
        scf::YieldOp::create(b, loc, next);
      });

  if (stages > 0) // no copy may still be writing the ring at exit
    NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);

  if (plan.resident() && plan.combineInCTA) {
    // The CTA's R programs add their accumulators in shared memory, in
    // program order; one partial row per CTA (P = grid_dim).
    for (auto [k, chunk] : llvm::enumerate(owned))
      ifThen(chunk.valid, [&] {
        for (unsigned c = 0; c < numCol; ++c) {
          SmallVector<Value> vals;
          for (int64_t e = 0; e < V; ++e)
            vals.push_back(rowLoop.getResult((c * K + k) * V + e));
          storeShared(add(mul(add(mul(group, c64(numCol)), c64(c)), cols),
                          chunk.column),
                      vals);
        }
      });
    gpu::BarrierOp::create(b, loc);
    Value total = mul(c64(numCol), cols);
    Value ctas = gridDim();
    scf::ForOp::create(
        b, loc, tid, total, c64(G * R), ValueRange{},
        [&](OpBuilder &, Location, Value j, ValueRange) {
          Value sum;
          for (int64_t g = 0; g < R; ++g) {
            Value part = memref::LoadOp::create(
                b, loc, accSmem, ValueRange{toIndex(add(mul(c64(g), total), j))});
            sum = sum ? arith::AddFOp::create(b, loc, sum, part).getResult()
                      : part;
          }
          // j = c * N + col -> partial[(c * CTAs + block) * N + col].
          Value c = arith::DivUIOp::create(b, loc, j, cols);
          Value col = arith::RemUIOp::create(b, loc, j, cols);
          Value index = add(mul(add(mul(c, ctas), blockId()), cols), col);
          store(partial, f32, index, sum);
          scf::YieldOp::create(b, loc);
        });
  } else if (plan.resident()) {
    // The accumulators become row `prog` of the partial buffer.
    Value progValid = ult(prog, programs);
    for (auto [k, chunk] : llvm::enumerate(owned)) {
      Value live = arith::AndIOp::create(b, loc, progValid, chunk.valid);
      ifThen(live, [&] {
        for (unsigned c = 0; c < numCol; ++c) {
          SmallVector<Value> vals;
          for (int64_t e = 0; e < V; ++e)
            vals.push_back(rowLoop.getResult((c * K + k) * V + e));
          store(partial, f32, partialIndex(c, chunk.column), vals);
        }
      });
    }
  } else if (plan.sharedAccumulators) {
    // Each lane copies the columns it owns (no barrier: nobody else wrote
    // them) to the program's partial row.
    scf::ForOp::create(
        b, loc, zero64, partLoopedChunks, one64, ValueRange{},
        [&](OpBuilder &, Location, Value k, ValueRange) {
          Value c = add(add(mul(k, c64(G)), lane), partBegin);
          ifThen(ult(c, partEnd), [&] {
            for (unsigned ci = 0; ci < numCol; ++ci) {
              Value column = mul(c, c64(V));
              store(partial, f32, partialIndex(ci, column),
                    loadShared(sharedIndex(ci, column), V));
            }
          });
          scf::YieldOp::create(b, loc);
        });
  }

  // Single launch: once every CTA's partial row is written (grid barrier),
  // the CTAs reduce the partial buffer in the final kernel's fixed order.
  if (plan.singleLaunch) {
    // Rows of the partial buffer: one per CTA (combined), else per row
    // program (the column groups of a row share one).
    Value partialRows = plan.combineInCTA ? gridDim() : rowPrograms;
    Value on = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                     finalize, c64(0));
    ifThen(on, [&] {
      gridBarrier(barrierWord);
      emitColumnReduction(op, plan.finalThreads(), partial, finalInits,
                          finalOuts, partialRows, cols,
                          func.getWorkgroupAttributions().back(), blockId(),
                          gridDim());
    });
  }
  gpu::ReturnOp::create(b, loc);
  return success();
}

/// The final kernel: partial [C, P, N] -> column results, in a fixed order
/// (the two-launch path, when a cooperative launch is not available).
class FinalKernelBuilder : public KernelBuilderBase {
public:
  FinalKernelBuilder(OpBuilder &b, MixedReductionOp op, int64_t threads)
      : KernelBuilderBase(b, op.getLoc()), op(op), threads(threads) {}

  /// Parameters: partial, the non-constant inits, the outputs, P, cols.
  SmallVector<Type> parameterTypes() {
    SmallVector<Type> types{ptr};
    appendColumnResultTypes(op, types);
    types.append(2, i64);
    return types;
  }

  LogicalResult build(gpu::GPUFuncOp func);

private:
  MixedReductionOp op;
  int64_t threads;
};

LogicalResult FinalKernelBuilder::build(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  ValueRange args = entry.getArguments();
  Value partial = args[0];
  args = args.drop_front();
  SmallVector<Value> inits, outs;
  takeColumnResultArgs(op, args, inits, outs);
  Value programs = args[0], cols = args[1];
  dimCols = cols;
  if (failed(cloneEpilogueCaptures(op)))
    return failure();
  emitColumnReduction(op, threads, partial, inits, outs, programs, cols,
                      func.getWorkgroupAttributions().front(), blockId(),
                      gridDim());
  gpu::ReturnOp::create(b, loc);
  return success();
}

struct ConvertNormToGPUPass
    : norm::impl::ConvertNormToGPUBase<ConvertNormToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::FuncOp, SmallVector<MixedReductionOp>>> work;
    module.walk([&](func::FuncOp fn) {
      SmallVector<MixedReductionOp> ops;
      fn.walk([&](MixedReductionOp op) { ops.push_back(op); });
      if (!ops.empty())
        work.push_back({fn, ops});
    });
    NormGpuOptions options = getOptions();
    if (failed(validateGpuOptions(options, module.getLoc())))
      return signalPassFailure();
    if (work.empty())
      return;
    GpuChipLimits limits = *lookupGpuChipLimits(options.chip);

    OpBuilder b(module.getContext());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>("norm_kernels");
    if (!gpuModule) {
      b.setInsertionPointToEnd(module.getBody());
      gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), "norm_kernels");
    }
    SymbolTable symbols(gpuModule);

    for (auto &[fn, ops] : work) {
      for (auto [i, op] : llvm::enumerate(ops)) {
        if (failed(checkSupportedOnGpu(op)))
          return signalPassFailure();
        KernelPlan plan = planKernel(op, options);
        std::string prefix = (fn.getSymName() + "_" + Twine(i)).str();
        if (failed(emitKernels(b, gpuModule, symbols, op, plan, prefix)) ||
            failed(checkResources(gpuModule, op, plan, prefix, limits)))
          return signalPassFailure();
        annotate(b, op, plan, prefix);
        if (emitRemarks)
          op.emitRemark() << "GPU kernels " << prefix << ": "
                          << (plan.resident() ? "resident" : "looped")
                          << ", " << plan.threadsPerRow
                          << " lanes per row, " << plan.rowsPerCTA
                          << " rows per CTA, vector " << plan.vector
                          << ", chunks per lane " << plan.chunksPerThread
                          << (plan.prefetch ? ", prefetch" : "")
                          << (plan.minColumnGroups > 1
                                  ? ", " +
                                        std::to_string(plan.minColumnGroups) +
                                        " CTAs per row (column groups)"
                                  : std::string())
                          << (plan.combineInCTA ? ", CTA-combined partials"
                              : plan.sharedAccumulators
                                  ? ", shared-memory accumulators"
                                  : "")
                          << (plan.asyncStages
                                  ? ", cp.async ring of " +
                                        std::to_string(plan.asyncStages) +
                                        " rows"
                                  : std::string())
                          << (plan.singleLaunch ? ", single launch" : "")
                          << ", ~" << plan.estimatedRegisters
                          << " registers, CTAs per SM: "
                          << (plan.programsPerSM
                                  ? std::to_string(plan.programsPerSM)
                                  : std::string("occupancy"));
      }
    }
  }

  /// The option values, as the struct the plan takes.
  NormGpuOptions getOptions() const {
    NormGpuOptions options;
#define NORM_GPU_OPTION(field, type, argument, initial, description)             \
  options.field = field;
#include "norm/Conversion/GpuOptions.h.inc"
    return options;
  }

  /// Every kernel written for `op` fits the chip (block size, shared memory).
  LogicalResult checkResources(gpu::GPUModuleOp gpuModule, MixedReductionOp op,
                               const KernelPlan &plan, StringRef prefix,
                               const GpuChipLimits &limits) {
    for (auto kernel : gpuModule.getOps<gpu::GPUFuncOp>()) {
      StringRef name = kernel.getName();
      if (!name.consume_front(prefix) || !name.starts_with("_"))
        continue;
      int64_t dynamic = name == "_final"            ? 0
                        : name.starts_with("_main_split") ? plan.splitSharedBytes
                                                          : plan.dynamicSharedBytes;
      if (failed(checkKernelResources(op, kernel, dynamic, limits)))
        return failure();
    }
    return success();
  }

  gpu::GPUFuncOp makeKernel(OpBuilder &b, gpu::GPUModuleOp gpuModule,
                            SymbolTable &symbols, Location loc,
                            StringRef name, ArrayRef<Type> params,
                            int64_t block, TypeRange workgroup) {
    b.setInsertionPointToEnd(gpuModule.getBody());
    auto fn = gpu::GPUFuncOp::create(
        b, loc, name, b.getFunctionType(params, {}), workgroup);
    fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    fn.setKnownBlockSizeAttr(
        b.getDenseI32ArrayAttr({int32_t(block), 1, 1}));
    symbols.insert(fn);
    return fn;
  }

  LogicalResult emitKernels(OpBuilder &b, gpu::GPUModuleOp gpuModule,
                            SymbolTable &symbols, MixedReductionOp op,
                            const KernelPlan &plan, StringRef prefix) {
    Location loc = op.getLoc();
    auto workgroup = [&](int64_t n) {
      return MemRefType::get(
          {n}, b.getF32Type(), MemRefLayoutAttrInterface{},
          gpu::AddressSpaceAttr::get(b.getContext(),
                                     gpu::AddressSpace::Workgroup));
    };
    SmallVector<Type> mainSmem;
    if (plan.threadsPerRow > 32) {
      size_t maxSums = 1;
      for (Region &stage : op.getRowStages())
        maxSums = std::max<size_t>(
            maxSums, stage.front().getTerminator()->getNumOperands());
      mainSmem.push_back(workgroup(maxSums * (plan.threadsPerRow / 32) *
                                   plan.rowsPerCTA));
    }
    // The single-launch tail's slices (the last attribution).
    int64_t numCol = op.getColResults().size();
    if ((plan.singleLaunch || plan.splitSingleLaunch) && numCol > 0)
      mainSmem.push_back(workgroup(numCol * plan.finalThreads()));
    // The vector kernel (when N allows one) and the scalar fallback; the
    // same pair with more CTAs per row for few rows (looped).
    KernelPlan split = plan;
    split.minColumnGroups = plan.splitColumnGroups;
    split.dynamicSharedBytes = plan.splitSharedBytes;
    split.twoCTAsPerSM = false;
    split.singleLaunch = plan.splitSingleLaunch;
    struct Variant {
      int64_t vector;
      std::string name;
      const KernelPlan *plan;
    };
    SmallVector<Variant> variants;
    if (plan.vector > 1)
      variants.push_back({plan.vector, (prefix + "_main").str(), &plan});
    variants.push_back({1, (prefix + "_main_scalar").str(), &plan});
    if (plan.splitColumnGroups > 0) {
      if (plan.vector > 1)
        variants.push_back(
            {plan.vector, (prefix + "_main_split").str(), &split});
      variants.push_back({1, (prefix + "_main_split_scalar").str(), &split});
    }
    for (auto &[vector, name, variantPlan] : variants) {
      const KernelPlan &plan = *variantPlan;
      OpBuilder::InsertionGuard guard(b);
      MainKernelBuilder builder(b, op, plan, vector);
      gpu::GPUFuncOp fn =
          makeKernel(b, gpuModule, symbols, loc, name,
                     builder.parameterTypes(), plan.blockThreads(), mainSmem);
      // The scalar fallback (misaligned rows) would spill under the cap.
      if (plan.twoCTAsPerSM && vector > 1)
        fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(2));

      if (failed(builder.build(fn)))
        return failure();
    }
    OpBuilder::InsertionGuard guard(b);
    FinalKernelBuilder final(b, op, plan.finalThreads());
    gpu::GPUFuncOp fn = makeKernel(
        b, gpuModule, symbols, loc, (prefix + "_final").str(),
        final.parameterTypes(), plan.finalThreads(),
        {workgroup(numCol * plan.finalThreads())});
    return final.build(fn);
  }

  void annotate(OpBuilder &b, MixedReductionOp op, const KernelPlan &plan,
                StringRef prefix) {
    SmallVector<NamedAttribute> attrs{
        b.getNamedAttr("kernel", b.getStringAttr(prefix)),
        b.getNamedAttr("vector", b.getI64IntegerAttr(plan.vector)),
        b.getNamedAttr("threads_per_row",
                       b.getI64IntegerAttr(plan.threadsPerRow)),
        b.getNamedAttr("rows_per_cta", b.getI64IntegerAttr(plan.rowsPerCTA)),
        b.getNamedAttr("chunks_per_thread",
                       b.getI64IntegerAttr(plan.chunksPerThread)),
        b.getNamedAttr("programs_per_sm",
                       b.getI64IntegerAttr(plan.programsPerSM)),
        b.getNamedAttr("block", b.getI64IntegerAttr(plan.blockThreads())),
        b.getNamedAttr("combine_in_cta", b.getBoolAttr(plan.combineInCTA)),
        b.getNamedAttr("single_launch", b.getBoolAttr(plan.singleLaunch)),
        b.getNamedAttr("async_stages", b.getI64IntegerAttr(plan.asyncStages)),
        b.getNamedAttr("column_groups",
                       b.getI64IntegerAttr(plan.resident()
                                               ? 0
                                               : plan.minColumnGroups)),
        b.getNamedAttr("split_column_groups",
                       b.getI64IntegerAttr(plan.splitColumnGroups)),
        b.getNamedAttr("split_shared_bytes",
                       b.getI64IntegerAttr(plan.splitSharedBytes)),
        b.getNamedAttr("split_single_launch",
                       b.getBoolAttr(plan.splitSingleLaunch)),
        b.getNamedAttr("final_threads",
                       b.getI64IntegerAttr(plan.finalThreads())),
        b.getNamedAttr("dynamic_shared_bytes",
                       b.getI64IntegerAttr(plan.dynamicSharedBytes))};
    op->setAttr("norm.gpu", b.getDictionaryAttr(attrs));
  }
};

} // namespace
