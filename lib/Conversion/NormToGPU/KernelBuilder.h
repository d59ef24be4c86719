//===- KernelBuilder.h - Shared helpers of the GPU kernel builders -*- C++ -*-//
//
// Part of norm-opt. KernelBuilderBase: what every kernel of
// --convert-norm-to-gpu builds with (i64 index math, global loads and
// stores through LLVM pointers, the f32 compute type, payload cloning,
// captured values, the grid barrier, the column results' parameters and
// the fixed-order column reduction).
//
//===----------------------------------------------------------------------===//

#ifndef NORM_LIB_CONVERSION_NORMTOGPU_KERNELBUILDER_H
#define NORM_LIB_CONVERSION_NORMTOGPU_KERNELBUILDER_H

#include "norm/Conversion/NormToGPU.h"
#include "norm/Utils/PayloadUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::norm {

/// Vector accesses to shared memory are at most this wide; every region of
/// shared memory that is accessed with vectors starts at a multiple of it.
constexpr int64_t kSharedAlignment = 16;

inline Type elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

/// The dynamic shared memory of the module's kernels (see
/// KernelBuilder.cpp for why it is an external declaration).
LLVM::GlobalOp getDynamicSharedMemory(OpBuilder &b, gpu::GPUModuleOp module);

/// The kernel parameter types of `groups` (mainKernelParams, ...).
SmallVector<Type> kernelParameterTypes(MLIRContext *context,
                                       ArrayRef<KernelParamGroup> groups);

/// What a kernel reads the values its payloads capture from above the op
/// from (KernelBuilderBase::cloneCapturedValues).
struct CaptureSources {
  int64_t domainRank = 2;
  int64_t colsDim = -1; // the domain dim that is N (-1: the last)
  Value rows, cols;     // i64 sizes for a captured tensor.dim, if known
  /// Sizes of other domain dims, where the kernel knows them (i64).
  DenseMap<int64_t, Value> dimSizes;
  /// Products the kernel knows of run-time domain dims it does not know one
  /// by one (a slab's spatial dims: only their product), by sorted dims.
  SmallVector<std::pair<SmallVector<int64_t>, Value>> dimProducts;
  /// Tensors the op reads through a tensor.expand_shape to the domain (x
  /// as stored): each dim's domain dims, so that a tensor.dim of one is the
  /// product of their sizes.
  DenseMap<Value, SmallVector<ReassociationIndices>> expandedSources;
  /// Captured 0-d tensor reads -> the kernel pointers that hold them.
  DenseMap<Value, Value> scalarPointers;
};

class KernelBuilderBase {
public:
  /// `above`: values from above the op already cloned at the kernel's
  /// entry.
  KernelBuilderBase(OpBuilder &b, Location loc, IRMapping above = {})
      : b(b), loc(loc), i64(b.getI64Type()), i32(b.getI32Type()),
        f32(b.getF32Type()),
        ptr(LLVM::LLVMPointerType::get(b.getContext(), /*addressSpace=*/1)),
        above(std::move(above)) {}

protected:
  //===--------------------------------------------------------------===//
  // Index math (i64) and thread ids
  //===--------------------------------------------------------------===//
  Value c64(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  Value minU(Value x, Value y) { return arith::MinUIOp::create(b, loc, x, y); }
  Value toIndex(Value v) {
    return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), v);
  }
  Value threadId() { return dim(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x)); }
  Value blockId() { return dim(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x)); }
  Value gridDim() { return dim(gpu::GridDimOp::create(b, loc, gpu::Dimension::x)); }
  Value dim(Value index) {
    return arith::IndexCastUIOp::create(b, loc, i64, index);
  }
  void ifThen(Value cond, function_ref<void()> body) {
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    body();
  }

  //===--------------------------------------------------------------===//
  // f32 compute type and payloads
  //===--------------------------------------------------------------===//
  Value zeroF32() {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  }
  Value toF32(Value v) { return norm::toF32(b, loc, v); }
  Value fromF32(Value v, Type to) { return norm::fromF32(b, loc, v, to); }
  /// Clones `region`'s body with its arguments bound to `args`; values from
  /// above (constants, captured scalars) come from `above`.
  SmallVector<Value> inlineRegion(Region &region, ValueRange args) {
    return norm::inlineRegion(b, region, args, above);
  }

  //===--------------------------------------------------------------===//
  // Global memory
  //===--------------------------------------------------------------===//
  /// The alignment an access of `count` elements may claim: its size, up
  /// to 16 bytes. The launcher checks pointers to that (and N and the
  /// strides to the vector width), and a workspace set by the caller need
  /// only be 16-byte aligned, so a 32-byte access (8 f32 of the partial
  /// buffer) must not claim more.
  unsigned accessAlignment(Type elem, int64_t count) {
    return std::min<int64_t>(elementBytes(elem) * count, kSharedAlignment);
  }
  /// `count` consecutive elements at base[index] as one access (a
  /// vector<count x elem>, or one elem), which the callers keep aligned.
  Value loadRaw(Value base, Type elem, Value index, int64_t count);
  /// `count` elements at `at` (global or shared memory) in one access; i1
  /// (a byte per element in memory) is loaded as bytes and compared with 0.
  Value loadElements(Type elem, int64_t count, Value at, unsigned align);
  /// The elements of a raw access.
  SmallVector<Value> split(Value raw, int64_t count);
  SmallVector<Value> load(Value base, Type elem, Value index, int64_t count) {
    return split(loadRaw(base, elem, index, count), count);
  }
  void store(Value base, Type elem, Value index, ValueRange values);
  /// A static shared f32 array of `count` floats, kSharedAlignment-aligned,
  /// named `func`'s name + `suffix` (an LLVM global in the kernel's module):
  /// its address (addrspace 3), which `nvvm.mapa` can map to a cluster
  /// peer's copy.
  Value staticSharedF32Array(gpu::GPUFuncOp func, StringRef suffix,
                             int64_t count);
  /// The i32 mask of a whole warp (bar.warp.sync, shfl.sync).
  Value allLanes() {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(-1));
  }

  //===--------------------------------------------------------------===//
  // Values the payloads capture from above the op
  //===--------------------------------------------------------------===//
  /// Clones, at the kernel's entry, the values defined above `op` that its
  /// regions use into `above`: constants, captured 0-d tensor reads
  /// (sources.scalarPointers), and pure scalar arithmetic on them and on
  /// the domain's sizes. Fails (with an error) on anything else, e.g. a
  /// scalar function argument.
  LogicalResult cloneCapturedValues(Operation *op,
                                    const CaptureSources &sources);
  /// Clones what the column epilogues and init prologues capture
  /// (constants) to the entry.
  LogicalResult cloneEpilogueCaptures(MixedReductionOp op,
                                      const CaptureSources &sources);

  //===--------------------------------------------------------------===//
  // Column results: parameters, grid barrier, fixed-order reduction
  //===--------------------------------------------------------------===//
  /// A kernel's arguments, split by `groups`.
  static SmallVector<std::pair<KernelParamGroup, SmallVector<Value>>>
  groupArguments(ArrayRef<KernelParamGroup> groups, ValueRange args);
  /// The column inits: the InitIn arguments in order, null where the
  /// initial value is a constant.
  static SmallVector<Value> columnInits(MixedReductionOp op,
                                        ArrayRef<Value> initIn);
  /// A barrier across the whole grid (cooperative launch).
  void gridBarrier(Value counter);
  /// Synchronises the `threads` threads (whole warps) of CTA group `group`
  /// of `groups`: a named barrier per group (ids 1..groups; 0 is the
  /// CTA's), so the groups' phases need not line up; the CTA barrier for a
  /// single group or where the ids run out.
  void groupBarrier(Value group, int64_t groups, int64_t threads);
  /// Column result `c` at column `col` from its f32 sum `total`: plus the
  /// initial value (a constant, or read from `inits[c]`), narrowed to the
  /// result type, through the column epilogue (truncf of dW), stored to
  /// `outs[c]` (ColumnReduction.cpp).
  void storeColumnResult(MixedReductionOp op, unsigned c, Value col,
                         Value total, ArrayRef<Value> inits,
                         ArrayRef<Value> outs);
  /// The fixed-order reduction of the fp32 partial buffer [C, P, N] into
  /// the column results (ColumnReduction.cpp).
  void emitColumnReduction(MixedReductionOp op, int64_t threads, Value partial,
                           ArrayRef<Value> inits, ArrayRef<Value> outs,
                           Value programs, Value cols, Value smem,
                           Value firstTile, Value tileStride);

  // The builder's context: where it writes, its types, and the values from
  // above the op as cloned at the kernel's entry (cloneCapturedValues).
  OpBuilder &b;
  Location loc;
  Type i64, i32, f32, ptr;
  IRMapping above;

private:
  LogicalResult cloneCaptured(Value v, const CaptureSources &sources);
  /// A captured index built of tensor.dim and constants by arith.muli (a
  /// GroupNorm's element count H * C/G * W from x as stored): the product
  /// of the domain sizes it names, from dimSizes and dimProducts.
  LogicalResult cloneDimProduct(Value v, const CaptureSources &sources);
  /// The column reduction's steps (ColumnReduction.cpp).
  struct SliceShape {
    Value slices;   // S: programs per column are split into S slices
    Value width;    // W = threads / S columns per tile
    Value column;   // tx = tid % W
    Value slice;    // sy = tid / W
  };
  SliceShape shapeSlices(int64_t threads, Value programs);
  SmallVector<Value> sumSliceOfPrograms(unsigned numCol,
                                        const SliceShape &shape, Value partial,
                                        Value programs, Value cols,
                                        Value colClamped);
  void finishColumn(MixedReductionOp op, unsigned c, const SliceShape &shape,
                    Value smem, Value col, ArrayRef<Value> inits,
                    ArrayRef<Value> outs);
};

/// The slab kernel of a GroupNorm-like op (plan.slabRows; SlabKernel.cpp)
/// of `vector` elements per access and `parts` CTAs (a cluster of `func`'s
/// cluster shape) per slab: its body, in `func` (mainKernelParams'
/// parameters, a workgroup buffer of slabSharedFloats floats).
LogicalResult buildSlabKernel(OpBuilder &b, MixedReductionOp op,
                              const KernelPlan &plan, int64_t vector,
                              int64_t parts, gpu::GPUFuncOp func);
/// The f32 slots of a slab kernel's reductions.
int64_t slabSharedFloats(MixedReductionOp op, const KernelPlan &plan,
                         int64_t vector);

} // namespace mlir::norm

#endif // NORM_LIB_CONVERSION_NORMTOGPU_KERNELBUILDER_H
