//===- NormToLaunchPass.cpp - Fused groups to upstream GPU host ops -------===//
//
// Part of norm-opt. --convert-norm-to-gpu-launch: each norm.mixed_reduction
// becomes, in place, its buffers, its launch (HostLaunchBuilder) and its
// results as tensors. See the pass's description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "norm/Conversion/NormToLaunch/HostLaunch.h"
#include "norm/Conversion/Passes.h"

#include "norm/Conversion/NormToGPU.h"
#include "norm/Conversion/NormToGPU/KernelNames.h"

#include "norm/Dialect/Norm/IR/GroupBoundary.h"
#include "norm/Utils/DeadOps.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::norm {
#define GEN_PASS_DEF_CONVERTNORMTOGPULAUNCH
#include "norm/Conversion/Passes.h.inc"
} // namespace mlir::norm

using namespace mlir;
using namespace mlir::norm;

namespace {

/// One group's buffers, launch and results.
class GroupLowering {
public:
  GroupLowering(MixedReductionOp op, ModuleOp module, bool hostShared)
      : op(op), b(op), loc(op.getLoc()), host(b, loc, module),
        hostShared(hostShared) {}

  LogicalResult lower(bool synchronize);

private:
  Value pointerOf(Value memref);
  LaunchValue input(Value tensor, const Twine &name);
  Value allocate(Type tensorType);
  void collectDomain();

  MixedReductionOp op;
  OpBuilder b;
  Location loc;
  HostLaunchBuilder host;
  bool hostShared;
  SmallVector<Value> dims; // the domain's sizes (index)
};

Value GroupLowering::pointerOf(Value memref) {
  Value index =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value address =
      arith::IndexCastOp::create(b, loc, host.i64Type(), index);
  return LLVM::IntToPtrOp::create(b, loc, host.ptrType(), address);
}

LaunchValue GroupLowering::input(Value tensor, const Twine &name) {
  auto type = cast<RankedTensorType>(tensor.getType());
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
  Value buffer = bufferization::ToBufferOp::create(b, loc, memrefType, tensor,
                                                   /*read_only=*/true);
  return {pointerOf(buffer), name.str(), elementBytes(type)};
}

/// A result buffer: rank-N results have the domain's shape, 1-D ones N.
Value GroupLowering::allocate(Type tensorType) {
  auto type = cast<RankedTensorType>(tensorType);
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
  SmallVector<Value> sizes;
  ArrayRef<Value> extents = ArrayRef(dims).take_back(type.getRank());
  for (auto [d, extent] : llvm::zip(type.getShape(), extents))
    if (ShapedType::isDynamic(d))
      sizes.push_back(extent);
  if (hostShared) // managed memory; upstream lowers it synchronously only
    return gpu::AllocOp::create(b, loc, memrefType, /*asyncToken=*/Type(),
                                ValueRange(), sizes, ValueRange(), true)
        .getMemref();
  // On the sequence's stream (mgpuStreamCreate hands it out).
  Type token = gpu::AsyncTokenType::get(b.getContext());
  Value t = gpu::WaitOp::create(b, loc, token, ValueRange()).getAsyncToken();
  return gpu::AllocOp::create(b, loc, memrefType, token, ValueRange{t}, sizes,
                              ValueRange(), false)
      .getMemref();
}

void GroupLowering::collectDomain() {
  Value first = op.getFull().front();
  int64_t rank = cast<RankedTensorType>(first.getType()).getRank();
  for (int64_t i = 0; i < rank; ++i)
    dims.push_back(tensor::DimOp::create(b, loc, first, i));
}

LogicalResult GroupLowering::lower(bool synchronize) {
  FailureOr<GroupLaunchPlan> plan = readLaunchPlan(op);
  if (failed(plan))
    return failure();
  auto fn = op->getParentOfType<FunctionOpInterface>();
  std::string name = fn ? ("@" + fn.getName()).str() : "norm group";
  Value stream = host.handedStream();
  host.begin(stream);
  collectDomain();
  GroupLaunchOperands ops;
  ops.op = op;
  auto asI64 = [&](Value index) {
    return arith::IndexCastOp::create(b, loc, host.i64Type(), index);
  };
  // rows: the product of the dims but N; a channels-first domain's
  // tensors are I = (the dims after N) apart from one column to the next.
  // Batched rows: the leading batchRank dims are the samples, rows those
  // of one sample.
  unsigned nDim = op.getNDimIndex();
  const unsigned batchRank = op.getBatchRank();
  Value rows = arith::ConstantIndexOp::create(b, loc, 1);
  Value inner = rows, batch = rows;
  // Slabs (GroupNorm): rows = the slabs (the row dims), cols = a slab's
  // elements (the summed dims).
  const bool slabs = op.getSlabDomain().has_value();
  SmallVector<int64_t> summed = op.getRowSumDimList();
  Value slabElems = rows;
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (slabs) {
      Value &into = llvm::is_contained(summed, int64_t(i)) ? slabElems : rows;
      into = arith::MulIOp::create(b, loc, into, d);
      continue;
    }
    if (i < batchRank)
      batch = arith::MulIOp::create(b, loc, batch, d);
    else if (i != nDim)
      rows = arith::MulIOp::create(b, loc, rows, d);
    if (i > nDim)
      inner = arith::MulIOp::create(b, loc, inner, d);
  }
  ops.rows = asI64(rows);
  if (batchRank > 0)
    ops.batch = asI64(batch);
  ops.cols = asI64(slabs ? slabElems : dims[nDim]);
  Value stride = op.isRowMajor() ? ops.cols : asI64(inner);
  for (auto [i, v] : llvm::enumerate(op.getFull()))
    ops.fullIn.push_back(input(v, "full input " + Twine(i)));
  for (auto [i, v] : llvm::enumerate(op.getRow()))
    ops.rowIn.push_back(input(v, "row input " + Twine(i)));
  for (auto [i, v] : llvm::enumerate(op.getCol()))
    ops.colIn.push_back(input(v, "column input " + Twine(i)));
  for (auto [i, e] : llvm::enumerate(getCapturedScalars(op)))
    ops.scalars.push_back(input(e.getTensor(), "scalar " + Twine(i)));
  for (auto [i, init] : llvm::enumerate(op.getColInit()))
    if (!getConstantColumnInit(init)) {
      linalg::GenericOp prologue = getColumnInitPrologue(init);
      Value source = prologue ? prologue.getDpsInputOperand(0)->get() : init;
      ops.initIn.push_back(input(source, "column init " + Twine(i)));
    }
  // Identity layouts: every row stride is N (the column stride I).
  for (const LaunchValue &v : ops.fullIn)
    ops.stridesIn.push_back({stride, v.name + " row stride", 8});
  SmallVector<std::pair<Value, Value>> replaced; // (tensor, buffer)
  SmallVector<Operation *> epilogues;
  for (auto [i, r] : llvm::enumerate(op.getFullResults())) {
    Value buffer = allocate(r.getType());
    ops.fullOut.push_back({pointerOf(buffer), "full result " + Twine(i).str(),
                           elementBytes(r.getType())});
    ops.stridesOut.push_back({stride, "full result row stride", 8});
    replaced.push_back({r, buffer});
  }
  for (auto [i, r] : llvm::enumerate(op.getColResults())) {
    Value out = r;
    if (linalg::GenericOp e = getColumnEpilogue(r)) {
      out = e->getResult(0);
      epilogues.push_back(e);
    }
    Value buffer = allocate(out.getType());
    ops.colOut.push_back({pointerOf(buffer), "column result " + Twine(i).str(),
                          elementBytes(out.getType())});
    replaced.push_back({out, buffer});
  }

  // (A slab domain's rows and cols are the tensors' own.)
  if (!slabs)
    host.checkDomain(name, op.getDomainShape().drop_front(batchRank),
                     nDim - batchRank, ops.rows, ops.cols, "", {});
  Value sms = host.smCount();
  host.launchGroup(name, *plan, ops, sms, stream);
  if (synchronize)
    host.synchronize();
  Value status = host.end(stream, /*printFailure=*/true);
  Value ok = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq, status,
      arith::ConstantIntOp::create(b, loc, status.getType(), 0));
  cf::AssertOp::create(b, loc, ok,
                       "norm-opt: a fused group's launch failed (the "
                       "normrt: line above says why)");

  for (auto [tensor, buffer] : replaced) {
    Value result = bufferization::ToTensorOp::create(
        b, loc, tensor.getType(), buffer, /*restrict=*/true,
        /*writable=*/true);
    tensor.replaceAllUsesWith(result);
  }
  for (Operation *e : epilogues)
    e->erase();
  SmallVector<Operation *> roots;
  for (Value init : op.getColInit())
    if (Operation *def = init.getDefiningOp())
      roots.push_back(def);
  op->erase();
  eraseDeadOps(roots);
  return success();
}

struct ConvertNormToGPULaunchPass
    : public norm::impl::ConvertNormToGPULaunchBase<ConvertNormToGPULaunchPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<MixedReductionOp> groups;
    module.walk([&](MixedReductionOp op) { groups.push_back(op); });
    if (groups.empty())
      return;
    // The launches pass host pointers where the gpu.module's kernels take
    // global ones: they are checked against the kernels' signatures only
    // while the kernels are a gpu.module.
    if (auto kernels = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName)) {
      kernels.emitError() << "convert-norm-to-gpu-launch: run "
                             "gpu-module-to-binary first (the groups' kernels "
                             "are still a gpu.module)";
      return signalPassFailure();
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(module.getContext()));
    for (MixedReductionOp op : groups)
      if (failed(GroupLowering(op, module, hostShared).lower(synchronize)))
        return signalPassFailure();
  }
};

} // namespace
