//===- KernelBuilder.cpp - Shared helpers of the GPU kernel builders ------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "norm/Conversion/NormToGPU/KernelNames.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::norm;

/// `.extern .shared .align 16 .b8 norm_dynamic_smem[]` in the PTX. It must
/// be an external declaration: a zero-sized *internal* global (what the
/// upstream lowering of gpu.dynamic_shared_memory makes when it finds none)
/// is printed as a 1-byte static `.shared` variable, which ptxas may place
/// before the kernel's static arrays; the "dynamic" region then overlaps
/// them and shifts them off their 16-byte alignment (issue 11: a 16-byte
/// read of the warp slots at 0x404). The upstream lowering reuses this
/// global for gpu.dynamic_shared_memory (a zero-sized shared array of the
/// same alignment), so the accumulators and the cp.async ring share it.
LLVM::GlobalOp mlir::norm::getDynamicSharedMemory(OpBuilder &b,
                                                  gpu::GPUModuleOp module) {
  if (auto global =
          module.lookupSymbol<LLVM::GlobalOp>(kDynamicSharedMemoryName))
    return global;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  return LLVM::GlobalOp::create(
      b, module.getLoc(), LLVM::LLVMArrayType::get(b.getI8Type(), 0),
      /*isConstant=*/false, LLVM::Linkage::External, kDynamicSharedMemoryName,
      Attribute(), kSharedAlignment, /*addrSpace=*/3);
}

//===----------------------------------------------------------------------===//
// Global memory
//===----------------------------------------------------------------------===//

Value KernelBuilderBase::loadRaw(Value base, Type elem, Value index,
                                 int64_t count) {
  Value at = LLVM::GEPOp::create(b, loc, ptr, elem, base, ValueRange{index});
  return loadElements(elem, count, at, accessAlignment(elem, count));
}

Value KernelBuilderBase::loadElements(Type elem, int64_t count, Value at,
                                      unsigned align) {
  // A boolean tensor holds a byte per element (torch.bool, memref<i1>),
  // but LLVM packs a vector of i1 into bits: load bytes, compare with 0.
  Type stored = elem.isInteger(1) ? b.getI8Type() : elem;
  Type type = count == 1 ? stored : VectorType::get({count}, stored);
  Value raw = LLVM::LoadOp::create(b, loc, type, at, align);
  if (!elem.isInteger(1))
    return raw;
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(type));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, raw, zero);
}

SmallVector<Value> KernelBuilderBase::split(Value raw, int64_t count) {
  if (count == 1)
    return {raw};
  SmallVector<Value> elems;
  for (int64_t i = 0; i < count; ++i)
    elems.push_back(vector::ExtractOp::create(b, loc, raw, i));
  return elems;
}

void KernelBuilderBase::store(Value base, Type elem, Value index,
                              ValueRange values) {
  Value at = LLVM::GEPOp::create(b, loc, ptr, elem, base, ValueRange{index});
  unsigned align = accessAlignment(elem, values.size());
  if (values.size() == 1) {
    LLVM::StoreOp::create(b, loc, values[0], at, align);
    return;
  }
  auto vecType = VectorType::get({int64_t(values.size())}, elem);
  Value vec = vector::FromElementsOp::create(b, loc, vecType, values);
  LLVM::StoreOp::create(b, loc, vec, at, align);
}

//===----------------------------------------------------------------------===//
// Captured values
//===----------------------------------------------------------------------===//

LogicalResult
KernelBuilderBase::cloneCapturedValues(Operation *op,
                                       const CaptureSources &sources) {
  auto visit = [&](Operation *inner) {
    for (Value operand : inner->getOperands()) {
      Region *home = operand.getParentRegion();
      if (op->isAncestor(home->getParentOp()))
        continue;
      if (failed(cloneCaptured(operand, sources))) {
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

LogicalResult KernelBuilderBase::cloneCaptured(Value v,
                                               const CaptureSources &sources) {
  int64_t domainRank = sources.domainRank;
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
    Value pointer = sources.scalarPointers.lookup(v);
    if (!pointer)
      return failure();
    above.map(v, LLVM::LoadOp::create(b, loc, v.getType(), pointer,
                                      elementBytes(v.getType())));
    return success();
  }
  if (isa<arith::MulIOp>(def) && succeeded(cloneDimProduct(v, sources)))
    return success();
  if (auto dim = dyn_cast<tensor::DimOp>(def)) {
    std::optional<int64_t> index = dim.getConstantIndex();
    auto type = dyn_cast<RankedTensorType>(dim.getSource().getType());
    if (type && type.getRank() != domainRank)
      return cloneDimProduct(v, sources);
    if (!index || !type)
      return failure();
    Value size = sources.dimSizes.lookup(*index);
    int64_t colsDim = sources.colsDim >= 0 ? sources.colsDim : domainRank - 1;
    if (!size && *index == colsDim)
      size = sources.cols;
    else if (!size && domainRank == 2)
      size = sources.rows;
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
    if (failed(cloneCaptured(operand, sources)))
      return failure();
  Operation *clone = b.clone(*def, above);
  above.map(def->getResults(), clone->getResults());
  return success();
}

LogicalResult KernelBuilderBase::cloneDimProduct(Value v,
                                                 const CaptureSources &sources) {
  // The leaves: a constant factor and the domain dims multiplied.
  int64_t factor = 1;
  SmallVector<int64_t> dims;
  std::function<bool(Value)> collect = [&](Value x) {
    APInt value;
    if (matchPattern(x, m_ConstantInt(&value))) {
      factor *= value.getSExtValue();
      return true;
    }
    if (auto mul = x.getDefiningOp<arith::MulIOp>())
      return collect(mul.getLhs()) && collect(mul.getRhs());
    auto dim = x.getDefiningOp<tensor::DimOp>();
    std::optional<int64_t> index = dim ? dim.getConstantIndex() : std::nullopt;
    if (!index)
      return false;
    auto type = cast<RankedTensorType>(dim.getSource().getType());
    if (type.getRank() == sources.domainRank) {
      dims.push_back(*index);
      return true;
    }
    auto it = sources.expandedSources.find(dim.getSource());
    if (it == sources.expandedSources.end() ||
        *index >= static_cast<int64_t>(it->second.size()))
      return false;
    llvm::append_range(dims, it->second[*index]);
    return true;
  };
  if (!collect(v))
    return failure();
  // Each dim's size where the kernel knows it; the rest must make up one
  // of the products it knows.
  Value product = c64(factor);
  SmallVector<int64_t> unknown;
  for (int64_t d : dims) {
    if (Value size = sources.dimSizes.lookup(d))
      product = arith::MulIOp::create(b, loc, product, size);
    else
      unknown.push_back(d);
  }
  if (!unknown.empty()) {
    llvm::sort(unknown);
    auto known = llvm::find_if(sources.dimProducts, [&](const auto &entry) {
      return ArrayRef<int64_t>(entry.first) == ArrayRef<int64_t>(unknown);
    });
    if (known == sources.dimProducts.end())
      return failure();
    product = arith::MulIOp::create(b, loc, product, known->second);
  }
  above.map(v, arith::IndexCastUIOp::create(b, loc, v.getType(), product));
  return success();
}

LogicalResult
KernelBuilderBase::cloneEpilogueCaptures(MixedReductionOp op,
                                         const CaptureSources &sources) {
  for (Value r : op.getColResults())
    if (linalg::GenericOp e = getColumnEpilogue(r))
      if (failed(cloneCapturedValues(e, sources)))
        return failure();
  for (Value init : op.getColInit())
    if (linalg::GenericOp p = getColumnInitPrologue(init))
      if (failed(cloneCapturedValues(p, sources)))
        return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Column results' parameters and the grid barrier
//===----------------------------------------------------------------------===//

SmallVector<Type>
mlir::norm::kernelParameterTypes(MLIRContext *context,
                                 ArrayRef<KernelParamGroup> groups) {
  Type ptr = LLVM::LLVMPointerType::get(context, /*addressSpace=*/1);
  Type i64 = IntegerType::get(context, 64);
  SmallVector<Type> types;
  for (const KernelParamGroup &g : groups)
    types.append(g.count, g.pointer ? ptr : i64);
  return types;
}

SmallVector<std::pair<KernelParamGroup, SmallVector<Value>>>
KernelBuilderBase::groupArguments(ArrayRef<KernelParamGroup> groups,
                                  ValueRange args) {
  SmallVector<std::pair<KernelParamGroup, SmallVector<Value>>> split;
  for (const KernelParamGroup &g : groups) {
    split.push_back({g, SmallVector<Value>(args.take_front(g.count))});
    args = args.drop_front(g.count);
  }
  return split;
}

SmallVector<Value> KernelBuilderBase::columnInits(MixedReductionOp op,
                                                  ArrayRef<Value> initIn) {
  SmallVector<Value> inits;
  for (Value init : op.getColInit()) {
    if (getConstantColumnInit(init)) {
      inits.push_back(nullptr);
      continue;
    }
    inits.push_back(initIn.front());
    initIn = initIn.drop_front();
  }
  return inits;
}

/// Every CTA must be resident (the launcher uses a cooperative launch). The
/// arrival counter is the one of cooperative groups: CTA 0 adds
/// 2^31 - (grid - 1), the others 1, so the top bit flips once all have
/// arrived and the low bits return to where they were; the word needs no
/// reset between launches.
void KernelBuilderBase::groupBarrier(Value group, int64_t groups,
                                     int64_t threads) {
  if (groups == 1 || groups >= 16 || threads % 32 != 0) {
    gpu::BarrierOp::create(b, loc);
    return;
  }
  Type i32 = b.getI32Type();
  Value one = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1));
  Value id = arith::TruncIOp::create(
      b, loc, i32, arith::AddIOp::create(b, loc, group, one));
  Value count =
      arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(threads));
  NVVM::BarrierOp::create(b, loc, Type(), id, count,
                          NVVM::BarrierReductionAttr(), Value());
}

void KernelBuilderBase::gridBarrier(Value counter) {
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

Value KernelBuilderBase::staticSharedF32Array(gpu::GPUFuncOp func,
                                              StringRef suffix,
                                              int64_t count) {
  auto module = func->getParentOfType<gpu::GPUModuleOp>();
  std::string name = (func.getName() + suffix).str();
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(f32, count),
                           /*isConstant=*/false, LLVM::Linkage::Internal, name,
                           Attribute(), kSharedAlignment, /*addrSpace=*/3);
  }
  Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  return LLVM::AddressOfOp::create(b, loc, ptr3, name);
}
