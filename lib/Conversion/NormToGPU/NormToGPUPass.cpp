//===- NormToGPUPass.cpp - The --convert-norm-to-gpu pass -----------------===//
//
// Part of norm-opt. Per norm.mixed_reduction: the kernel plan
// (KernelPlan.cpp), written on the op as its `#norm.kernel_plan`
// (PlanAttr.cpp), then the kernels in `gpu.module @norm_kernels` built from
// the plan read back from it (the main kernels: MainKernel.h; the final
// kernel: ColumnReduction.cpp); the host lowering reads the same.
//
//===----------------------------------------------------------------------===//

#include "MainKernel.h"

#include "norm/Conversion/GpuOptions.h"
#include "norm/Conversion/NormToGPU/KernelNames.h"
#include "norm/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::norm {
#define GEN_PASS_DEF_CONVERTNORMTOGPU
#include "norm/Conversion/Passes.h.inc"
} // namespace mlir::norm

using namespace mlir;
using namespace mlir::norm;

namespace {

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
    // A valid chip is one of the target description's.
    GpuTarget target = *lookupGpuTarget(options.chip);

    OpBuilder b(module.getContext());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
    if (!gpuModule) {
      b.setInsertionPointToEnd(module.getBody());
      gpuModule =
          gpu::GPUModuleOp::create(b, module.getLoc(), kKernelModuleName);
    }
    SymbolTable symbols(gpuModule);

    for (auto &[fn, ops] : work) {
      for (auto [i, op] : llvm::enumerate(ops)) {
        if (failed(checkSupportedOnGpu(op)))
          return signalPassFailure();
        KernelPlan decided = planKernel(op, options, target);
        std::string prefix = (fn.getSymName() + "_" + Twine(i)).str();
        // The plan goes on the op first; the kernels are built from it.
        op->setAttr(kKernelPlanAttrName,
                    kernelPlanAttr(b.getContext(), prefix, decided));
        FailureOr<KernelPlan> plan = readKernelPlan(op);
        if (failed(plan) || failed(emitKernels(b, gpuModule, symbols, op,
                                               *plan, prefix, target)))
          return signalPassFailure();
        if (emitRemarks) {
          {
            InFlightDiagnostic remark = op.emitRemark()
                                        << "GPU kernels " << prefix << ": "
                                        << describe(decided);
            if (!decided.tiers.empty())
              remark << "; a run-time N up to "
                     << decided.tiers.back().cols << " takes the smallest of "
                     << decided.tiers.size()
                     << " resident tiers that holds it";
          }
          for (const KernelPlan &tier : decided.tiers)
            op.emitRemark() << "GPU kernels "
                            << residentTierPrefix(prefix, tier.cols)
                            << ": " << describe(tier);
        }
      }
    }
  }

  /// The remark's words for one plan (or tier).
  static std::string describe(const KernelPlan &plan) {
    std::string text;
    llvm::raw_string_ostream os(text);
    auto ctasPerSM = [&] {
      os << "CTAs per SM: ";
      if (plan.programsPerSm)
        os << plan.programsPerSm;
      else
        os << "occupancy";
      return text;
    };
    if (plan.slabRows) {
      os << "GroupNorm slabs: a CTA of " << plan.block()
         << " threads per slab, column sums per channel in the CTA";
      if (plan.splitColumnGroups > 1)
        os << ", split kernels of " << plan.splitColumnGroups
           << " CTAs (a cluster) per slab for few slabs";
      return text;
    }
    if (plan.stridedRows) {
      os << "channels-first rows: " << plan.vector
         << " rows per lane (1 in the scalar kernel), "
         << plan.threadsPerRow / 32 << " warps splitting N, "
         << plan.rowsPerCta << " tiles per CTA, ";
      if (plan.chunksPerThread > 0)
        os << plan.chunksPerThread << " columns per warp held, ";
      return ctasPerSM();
    }
    os << (plan.resident() ? "resident" : "looped");
    if (plan.cols)
      os << " tier, N <= " << plan.cols << " at run time";
    os << ", " << plan.threadsPerRow << " lanes per row, " << plan.rowsPerCta
       << " rows per CTA, vector " << plan.vector << ", chunks per lane "
       << plan.chunksPerThread << (plan.prefetch ? ", prefetch" : "")
       << (plan.peel ? ", peeled rows (scalar head and tail)" : "");
    if (plan.columnGroups > 1)
      os << ", " << plan.columnGroups << " CTAs per row (column groups)";
    if (plan.clusterCtas > 1)
      os << ", clusters of " << plan.clusterCtas << " CTAs per row";
    os << (plan.combineInCta         ? ", CTA-combined partials"
           : plan.sharedAccumulators ? ", shared-memory accumulators"
                                     : "");
    if (plan.asyncStages)
      os << ", cp.async ring of " << plan.asyncStages << " rows";
    if (plan.clusterSumsAhead)
      os << ", row sums a row ahead";
    if (plan.bulkStages)
      os << ", cp.async.bulk ring of " << plan.bulkStages << " rows";
    os << (plan.singleLaunch ? ", single launch" : "")
       << (plan.dependentLaunch ? ", dependent final launch" : "");
    if (plan.latencyCtas > 1)
      os << ", latency kernels of one " << plan.latencyCtas
         << "-CTA cluster for up to " << plan.latencyRows << " rows";
    os << ", ~" << plan.estimatedRegisters << " registers, ";
    return ctasPerSM();
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
    // LLVM takes a static array of more than 16 bytes as 16-byte aligned
    // (and vectorizes its accesses) but prints the element's alignment
    // unless one is given.
    for (unsigned i = 0; i < workgroup.size(); ++i)
      fn.setWorkgroupAttributionAttr(
          i, b.getStringAttr(LLVM::LLVMDialect::getAlignAttrName()),
          b.getI64IntegerAttr(kSharedAlignment));
    symbols.insert(fn);
    return fn;
  }

  /// The main kernels of the plan and of its resident tiers, and one final
  /// kernel per distinct block among them; each checked against the chip.
  LogicalResult emitKernels(OpBuilder &b, gpu::GPUModuleOp gpuModule,
                            SymbolTable &symbols, MixedReductionOp op,
                            const KernelPlan &plan, StringRef prefix,
                            const GpuTarget &target) {
    // Before any kernel: gpu.dynamic_shared_memory must find it.
    bool anyDynamicShared =
        plan.dynamicSharedBytes > 0 || plan.splitSharedBytes > 0 ||
        llvm::any_of(plan.tiers, [](const KernelPlan &tier) {
          return tier.dynamicSharedBytes > 0;
        });
    if (anyDynamicShared)
      getDynamicSharedMemory(b, gpuModule);
    if (failed(emitMainKernels(b, gpuModule, symbols, op, plan, prefix,
                               target)))
      return failure();
    for (const KernelPlan &tier : plan.tiers)
      if (failed(emitMainKernels(b, gpuModule, symbols, op, tier,
                                 residentTierPrefix(prefix, tier.cols),
                                 target)))
        return failure();
    // The final kernel of the two-launch path has the main kernel's block
    // (the single-launch tail's threads), so both paths sum alike.
    SmallVector<int64_t> finalThreads = {plan.finalThreads()};
    for (const KernelPlan &tier : plan.tiers)
      if (!llvm::is_contained(finalThreads, tier.finalThreads()))
        finalThreads.push_back(tier.finalThreads());
    int64_t numCol = op.getColResults().size();
    for (int64_t threads : finalThreads) {
      OpBuilder::InsertionGuard guard(b);
      FinalKernelBuilder final(b, op, threads, plan.dependentLaunch);
      gpu::GPUFuncOp fn = makeKernel(
          b, gpuModule, symbols, op.getLoc(),
          finalKernelName(prefix, threads, plan.finalThreads()),
          final.parameterTypes(), threads,
          {workgroupBuffer(b, numCol * threads)});
      if (failed(final.build(fn)) ||
          failed(checkKernelResources(op, fn, 0, target)))
        return failure();
    }
    return success();
  }

  /// A static shared array of `n` floats.
  static MemRefType workgroupBuffer(OpBuilder &b, int64_t n) {
    return MemRefType::get(
        {n}, b.getF32Type(), MemRefLayoutAttrInterface{},
        gpu::AddressSpaceAttr::get(b.getContext(),
                                   gpu::AddressSpace::Workgroup));
  }

  /// The vector kernel (when N allows one) and the scalar fallback of
  /// `plan`, named `<prefix><suffix>`; the same pair with more CTAs per row
  /// for few rows (looped plans with split column groups).
  LogicalResult emitMainKernels(OpBuilder &b, gpu::GPUModuleOp gpuModule,
                                SymbolTable &symbols, MixedReductionOp op,
                                const KernelPlan &plan, StringRef prefix,
                                const GpuTarget &target) {
    if (plan.stridedRows)
      return emitStridedKernel(b, gpuModule, symbols, op, plan, prefix, target);
    if (plan.slabRows)
      return emitSlabKernel(b, gpuModule, symbols, op, plan, prefix, target);
    SmallVector<Type> mainSmem = rowMajorSharedBuffers(b, op, plan);
    for (const MainKernel &kernel : mainKernels(plan, prefix)) {
      KernelPlan own = mainKernelPlan(op, plan, kernel);
      // A latency kernel's groups are its own.
      SmallVector<Type> latencySmem;
      if (kernel.latency)
        latencySmem = rowMajorSharedBuffers(b, op, own);
      if (failed(emitMainKernel(b, gpuModule, symbols, op, own, kernel,
                                kernel.latency ? latencySmem : mainSmem,
                                target)))
        return failure();
    }
    return success();
  }

  /// The workgroup buffers of a row-major main kernel of `plan`: the row
  /// sums' per-warp slots (rows of more than 32 lanes), then the
  /// single-launch tail's slices (the last attribution).
  static SmallVector<Type> rowMajorSharedBuffers(OpBuilder &b,
                                                 MixedReductionOp op,
                                                 const KernelPlan &plan) {
    SmallVector<Type> buffers;
    if (plan.threadsPerRow > 32) {
      size_t maxSums = 1;
      for (Region &stage : op.getRowStages())
        maxSums = std::max<size_t>(
            maxSums, stage.front().getTerminator()->getNumOperands());
      buffers.push_back(workgroupBuffer(
          b, maxSums * (plan.threadsPerRow / 32) * plan.rowsPerCta));
    }
    int64_t numCol = op.getColResults().size();
    if (plan.singleLaunch && numCol > 0)
      buffers.push_back(workgroupBuffer(b, numCol * plan.finalThreads()));
    return buffers;
  }

  /// One main kernel, from its own plan (mainKernelPlan).
  LogicalResult emitMainKernel(OpBuilder &b, gpu::GPUModuleOp gpuModule,
                               SymbolTable &symbols, MixedReductionOp op,
                               const KernelPlan &plan,
                               const MainKernel &kernel,
                               ArrayRef<Type> mainSmem,
                               const GpuTarget &target) {
    OpBuilder::InsertionGuard guard(b);
    gpu::GPUFuncOp fn =
        makeKernel(b, gpuModule, symbols, op.getLoc(), kernel.name,
                   mainKernelParameterTypes(op), plan.block(), mainSmem);
    if (plan.twoCtasPerSm)
      fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(2));
    // A latency kernel is the SM's one CTA: ptxas otherwise capped some at
    // 64 registers and spilled (LayerNorm bf16 4096's scalar one).
    if (plan.latencyKernel())
      fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
    // The cluster shape is the kernel's (.reqnctapercluster): a plain
    // launch then makes the clusters.
    if (plan.clusterCtas > 1)
      fn->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                  b.getDenseI32ArrayAttr({int32_t(plan.clusterCtas), 1, 1}));
    FailureOr<std::unique_ptr<MainKernelBuilder>> builder =
        makeMainKernelBuilder(b, op, plan, kernel.vector, fn);
    if (failed(builder))
      return failure();
    (*builder)->build();
    return checkKernelResources(op, fn, plan.dynamicSharedBytes, target);
  }

  /// The main kernels of a slab plan (GroupNorm; SlabKernel.cpp): the
  /// vector kernel (16-byte accesses where the slabs allow) and the scalar
  /// one, each with the slots of its reductions; with split column groups
  /// Q, also the split pair: a cluster of Q CTAs per slab.
  LogicalResult emitSlabKernel(OpBuilder &b, gpu::GPUModuleOp gpuModule,
                               SymbolTable &symbols, MixedReductionOp op,
                               const KernelPlan &plan, StringRef prefix,
                               const GpuTarget &target) {
    for (const MainKernel &kernel : mainKernels(plan, prefix)) {
      OpBuilder::InsertionGuard guard(b);
      gpu::GPUFuncOp fn = makeKernel(
          b, gpuModule, symbols, op.getLoc(), kernel.name,
          mainKernelParameterTypes(op), plan.block(),
          {workgroupBuffer(b, slabSharedFloats(op, plan, kernel.vector))});
      int64_t parts = kernel.split ? plan.splitColumnGroups : 1;
      if (parts > 1)
        fn->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                    b.getDenseI32ArrayAttr({int32_t(parts), 1, 1}));
      if (failed(buildSlabKernel(b, op, plan, kernel.vector, parts, fn)) ||
          failed(checkKernelResources(op, fn, 0, target)))
        return failure();
    }
    return success();
  }

  /// The one main kernel of a channels-first plan (StridedKernelBuilder).
  LogicalResult emitStridedKernel(OpBuilder &b, gpu::GPUModuleOp gpuModule,
                                  SymbolTable &symbols, MixedReductionOp op,
                                  const KernelPlan &plan, StringRef prefix,
                                  const GpuTarget &target) {
    size_t maxSums = 1;
    for (Region &stage : op.getRowStages())
      maxSums = std::max<size_t>(
          maxSums, stage.front().getTerminator()->getNumOperands());
    int64_t numCol = op.getColResults().size();
    // V rows per lane where I allows (`_main`), else one (`_main_scalar`).
    for (const MainKernel &kernel : mainKernels(plan, prefix)) {
      int64_t vector = kernel.vector;
      StringRef name = kernel.name;
      OpBuilder::InsertionGuard guard(b);
      // The row-sum slots (W > 1); the column accumulators are the dynamic
      // shared memory.
      int64_t slots = plan.threadsPerRow > 32
                          ? maxSums * plan.block() * vector
                          : 1;
      SmallVector<Type> buffers = {workgroupBuffer(b, slots)};
      // The single-launch tail's slices (the last attribution).
      if (plan.singleLaunch && numCol > 0)
        buffers.push_back(workgroupBuffer(b, numCol * plan.finalThreads()));
      gpu::GPUFuncOp fn =
          makeKernel(b, gpuModule, symbols, op.getLoc(), name,
                     mainKernelParameterTypes(op), plan.block(), buffers);
      if (failed(checkKernelResources(op, fn, plan.dynamicSharedBytes, target)))
        return failure();
      FailureOr<std::unique_ptr<MainKernelBuilder>> builder =
          makeMainKernelBuilder(b, op, plan, vector, fn);
      if (failed(builder))
        return failure();
      (*builder)->build();
    }
    return success();
  }

  /// The option values, as the struct the plan takes.
  NormGpuOptions getOptions() const {
    NormGpuOptions options;
#define NORM_GPU_OPTION(field, type, argument, initial, description)             \
  options.field = field;
#include "norm/Conversion/GpuOptions.h.inc"
    return options;
  }

};

} // namespace
