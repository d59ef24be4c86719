//===- NormToGPUPass.cpp - The --convert-norm-to-gpu pass -----------------===//
//
// Part of norm-opt. Per norm.mixed_reduction: the kernel plan
// (KernelPlan.cpp), the kernels in `gpu.module @norm_kernels` (the main
// kernels: MainKernel.h; the final kernel: ColumnReduction.cpp), and the
// plan on the op for the launcher writer (lib/Compile/Launcher.cpp).
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
        KernelPlan plan = planKernel(op, options, target);
        std::string prefix = (fn.getSymName() + "_" + Twine(i)).str();
        if (failed(emitKernels(b, gpuModule, symbols, op, plan, prefix)) ||
            failed(checkResources(gpuModule, op, plan, prefix, target)))
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
    if (plan.singleLaunch && numCol > 0)
      mainSmem.push_back(workgroup(numCol * plan.finalThreads()));
    // The vector kernel (when N allows one) and the scalar fallback; the
    // same pair with more CTAs per row for few rows (looped).
    KernelPlan split = plan;
    split.minColumnGroups = plan.splitColumnGroups;
    split.dynamicSharedBytes = plan.splitSharedBytes;
    split.twoCTAsPerSM = false;
    // Measured no faster with the tail (perf-notes v6): two launches.
    split.singleLaunch = false;
    struct Variant {
      int64_t vector;
      std::string name;
      const KernelPlan *plan;
    };
    SmallVector<Variant> variants;
    if (plan.vector > 1)
      variants.push_back({plan.vector, (prefix + kMainKernelSuffix).str(), &plan});
    variants.push_back({1, (prefix + kMainScalarKernelSuffix).str(), &plan});
    if (plan.splitColumnGroups > 0) {
      if (plan.vector > 1)
        variants.push_back(
            {plan.vector, (prefix + kMainSplitKernelSuffix).str(), &split});
      variants.push_back({1, (prefix + kMainSplitScalarKernelSuffix).str(), &split});
    }
    // Before any kernel: gpu.dynamic_shared_memory must find it.
    if (plan.dynamicSharedBytes > 0 || plan.splitSharedBytes > 0)
      getDynamicSharedMemory(b, gpuModule);
    for (auto &[vector, name, variantPlan] : variants) {
      const KernelPlan &plan = *variantPlan;
      OpBuilder::InsertionGuard guard(b);
      std::unique_ptr<MainKernelBuilder> builder =
          makeMainKernelBuilder(b, op, plan, vector);
      gpu::GPUFuncOp fn =
          makeKernel(b, gpuModule, symbols, loc, name,
                     builder->parameterTypes(), plan.blockThreads(), mainSmem);
      // The scalar fallback (misaligned rows) would spill under the cap.
      if (plan.twoCTAsPerSM && vector > 1)
        fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(2));

      if (failed(builder->build(fn)))
        return failure();
    }
    OpBuilder::InsertionGuard guard(b);
    FinalKernelBuilder final(b, op, plan.finalThreads());
    gpu::GPUFuncOp fn = makeKernel(
        b, gpuModule, symbols, loc, (prefix + kFinalKernelSuffix).str(),
        final.parameterTypes(), plan.finalThreads(),
        {workgroup(numCol * plan.finalThreads())});
    return final.build(fn);
  }

  /// The plan on the op, for the launcher writer.
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
                               const GpuTarget &target) {
    for (auto kernel : gpuModule.getOps<gpu::GPUFuncOp>()) {
      StringRef name = kernel.getName();
      if (!name.consume_front(prefix) || !name.starts_with("_"))
        continue;
      int64_t dynamic = name == kFinalKernelSuffix ? 0
                        : name.starts_with(kMainSplitKernelSuffix)
                            ? plan.splitSharedBytes
                            : plan.dynamicSharedBytes;
      if (failed(checkKernelResources(op, kernel, dynamic, target)))
        return failure();
    }
    return success();
  }

  void annotate(OpBuilder &b, MixedReductionOp op, const KernelPlan &plan,
                StringRef prefix) {
    op->setAttr(kKernelPlanAttrName,
                KernelPlanAttr::get(
                    b.getContext(), prefix, plan.vector, plan.threadsPerRow,
                    plan.rowsPerCTA, plan.chunksPerThread, plan.programsPerSM,
                    plan.blockThreads(), b.getBoolAttr(plan.combineInCTA),
                    b.getBoolAttr(plan.singleLaunch), plan.asyncStages,
                    plan.resident() ? 0 : plan.minColumnGroups,
                    plan.splitColumnGroups, plan.splitSharedBytes,
                    plan.finalThreads(), plan.dynamicSharedBytes));
  }
};

} // namespace
