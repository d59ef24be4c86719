//===- HostLaunch.h - One fused group's launch as host IR -------*- C++ -*-===//
//
// Part of norm-opt. The host side of a fused group: the launch plan read
// from its `#norm.kernel_plan` (which kernels exist and how each launches),
// and the builder that writes the launch as upstream host ops:
// `gpu.launch_func` on `gpu.binary @norm_kernels`, arith/scf for the grid,
// and calls of the runtime's normrt_ir_* entry points for what
// gpu.launch_func cannot say (include/norm/Runtime/NormRuntime.h). Both
// `--convert-norm-to-gpu-launch` (in place, on tensors) and `norm-opt
// compile` (the C launchers of a kernel library) build their launches here.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_CONVERSION_NORMTOLAUNCH_HOSTLAUNCH_H
#define NORM_CONVERSION_NORMTOLAUNCH_HOSTLAUNCH_H

#include "norm/Conversion/NormToGPU.h"
#include "norm/Conversion/NormToLaunch/RuntimeABI.h"
#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace mlir::norm {

/// The kernels of one plan (the op's own or a resident tier's) and how to
/// launch them: the plan as its attribute says (no tiers), and the kernel
/// names that follow from it.
struct KernelLaunch : KernelPlan {
  std::string prefix;      // main kernels: prefix + the suffixes
  std::string finalKernel; // the two-launch path's final kernel
  // A `_main` kernel: the vector kernel of 16-byte aligned rows (not for a
  // static N that is not a multiple of the vector).
  bool alignedKernel = false;
  // A `_main_peel` kernel: the vector kernel of rows at any phase; its
  // programs' row stride keeps every row of a program at one phase.
  bool peelKernel = false;
  // A `_latency` kernel of `vector` columns per access (beside the
  // `_latency_scalar` one of every plan with latency_ctas).
  bool latencyVectorKernel = false;
};

/// How one fused group launches: its plan and its resident tiers (which
/// share the plan's vector, programs per SM and dependent final launch).
struct GroupLaunchPlan {
  int64_t numColumnResults = 0;
  KernelLaunch kernels;             // the plan's own
  std::vector<KernelLaunch> tiers; // run-time N: the resident tiers
  bool anyPeel() const;
};

/// Reads `op`'s `#norm.kernel_plan` (made by --convert-norm-to-gpu).
FailureOr<GroupLaunchPlan> readLaunchPlan(MixedReductionOp op);

/// A value a launch passes or checks, with the name its messages use.
struct LaunchValue {
  Value value;          // !llvm.ptr (device pointer) or i64
  std::string name;     // "arg0", "res1", "arg0_row_stride", ...
  int64_t elementBytes = 0;
};

/// One group's kernel operands, in the kernels' parameter order, and its
/// domain (i64 rows = product of the leading dims, i64 cols = N; batched
/// rows: rows of one sample, and the samples; slabs: rows = the slabs,
/// cols = a slab's elements).
struct GroupLaunchOperands {
  SmallVector<LaunchValue> fullIn, rowIn, colIn, fullOut, scalars, initIn,
      colOut;
  SmallVector<LaunchValue> stridesIn, stridesOut; // i64, in elements
  Value rows, cols;
  Value batch; // batched rows (op.getBatchRank() > 0): i64 samples
  MixedReductionOp op; // the group (its kernels' parameter lists)
};

/// Writes launches at the builder's insertion point, declaring the
/// runtime's entry points and the messages' strings in `module`.
class HostLaunchBuilder {
public:
  HostLaunchBuilder(OpBuilder &builder, Location loc, ModuleOp module);

  /// The stream normrt_use_stream handed over (NULL: the legacy stream).
  Value handedStream();
  /// normrt_ir_begin(stream): the group's calls form one launch sequence.
  void begin(Value stream);
  /// normrt_ir_end(stream, print): i32 status of the sequence's first
  /// failure.
  Value end(Value stream, bool printFailure);
  /// The checks of one domain (N at dim `nDim`) against its static shape
  /// and of its strides; messages start with `function`, rows/cols names
  /// end in `suffix` ("" or the group's number). Row strides (N last) must
  /// be >= cols; the column strides of a channels-first domain must all be
  /// one I >= 1 that divides rows (contiguous tensors: I is the product of
  /// the dims after N).
  void checkDomain(StringRef function, ArrayRef<int64_t> domain,
                   unsigned nDim, Value rows, Value cols, StringRef suffix,
                   ArrayRef<LaunchValue> strides);
  /// Batched rows: `batch` (the product of `batchDims`, static where
  /// they are) is >= 0 and divides `rows` (all rows; 0 with no sample).
  void checkBatch(StringRef function, ArrayRef<int64_t> batchDims,
                  Value rows, Value batch, StringRef suffix);
  /// rows / batch, 0 for no sample.
  Value rowsPerSample(Value rows, Value batch);
  /// A slab domain's (slabs, elements per slab) from a launcher's rows
  /// (the leading dims), cols (the last) and batch (the R dims): batch x A
  /// and rows x cols / (batch x A) (0 and 0 for no sample).
  std::pair<Value, Value> slabsOf(Value rows, Value cols, Value batch,
                                  const SlabDomain &slab);
  /// A slab domain's launcher sizes: rows >= 0, cols >= 1, rows x cols
  /// batch x the elements of a sample where they are static, else a
  /// multiple of batch x A x C (batch itself: checkBatch).
  void checkSlabs(StringRef function, ArrayRef<int64_t> domain,
                  const SlabDomain &slab, Value rows, Value cols,
                  Value batch, StringRef suffix);
  /// Every stride is `cols` (contiguous tensors: a slab domain's).
  void checkContiguous(StringRef function, Value cols,
                       ArrayRef<LaunchValue> strides);
  /// The current context's SM count (i64).
  Value smCount();
  /// The alignment checks and the launches of one group.
  void launchGroup(StringRef function, const GroupLaunchPlan &plan,
                   const GroupLaunchOperands &operands, Value sms,
                   Value stream);
  /// Waits for the stream (gpu.wait): its results are ready on the host.
  void synchronize();

  Type ptrType() const { return ptr; }
  Type i64Type() const { return i64; }

private:
  struct Flags; // the group's vector / peel choice
  /// The main kernel's candidates (one launch_func each), which one runs,
  /// its dynamic shared memory, column groups and whether it may finish
  /// the columns itself (i64 / i1 values).
  struct KernelChoice {
    SmallVector<std::string> kernels;
    Value which, smem, cg, single;
  };
  /// The persistent grid and its programs (rows of the partial buffer).
  struct Grid {
    Value grid, programs;
  };
  Value constant(int64_t v);
  Value null();
  Value call(RuntimeFn fn, ValueRange args);
  Value message(StringRef text);
  void failIf(Value condition, int32_t status, const Twine &text);
  Flags vectorFlags(StringRef function, const GroupLaunchPlan &plan,
                    const GroupLaunchOperands &operands);
  /// The launches of one plan's kernels: the latency kernel for small
  /// calls where the plan has one, else launchPersistent (or the slabs').
  void launchPlan(const GroupLaunchPlan &plan, const KernelLaunch &k,
                  const GroupLaunchOperands &operands, const Flags &flags,
                  Value sms, Value stream);
  void launchLatency(const KernelLaunch &k, const GroupLaunchOperands &operands,
                     const Flags &flags);
  /// The persistent grid's kernel, its workspace, the main launch and the
  /// final one.
  void launchPersistent(const GroupLaunchPlan &plan, const KernelLaunch &k,
                        const GroupLaunchOperands &operands,
                        const Flags &flags, Value sms, Value stream);
  /// A choice of only `k`'s scalar main kernel; offerKernel adds the
  /// kernel `k.prefix + suffix`, taken where `when` holds (later offers
  /// win).
  KernelChoice scalarKernelChoice(const KernelLaunch &k);
  void offerKernel(KernelChoice &c, const KernelLaunch &k, StringRef suffix,
                   Value when);
  KernelChoice chooseKernel(const KernelLaunch &k, const Flags &flags,
                            Value rows, Value sms);
  Grid persistentGrid(const GroupLaunchPlan &plan, const KernelLaunch &k,
                      const KernelChoice &choice,
                      const GroupLaunchOperands &operands, const Flags &flags,
                      Value sms);
  Value workspace(int64_t numCol, Value programs, Value cols, Value stream);
  /// What a launch passes besides the group's operands.
  struct LaunchScalars {
    Value workspace, barrier, finalize, programs;
  };
  SmallVector<Value> kernelArguments(ArrayRef<KernelParamGroup> groups,
                                     const GroupLaunchOperands &ops,
                                     const LaunchScalars &own);
  Value launchMain(const KernelLaunch &k, const KernelChoice &choice,
                   const Grid &grid, const GroupLaunchOperands &operands,
                   int64_t numCol, Value ws, Value stream);
  void launchFinal(const GroupLaunchPlan &plan, const KernelLaunch &k,
                   const GroupLaunchOperands &operands, Value ws,
                   Value programs, Value finalize);
  /// A slab plan's launches (GroupNorm): a CTA per K slabs (at most
  /// `sms` / 2 such units: the split kernels, a cluster of Q CTAs per
  /// unit), then the final kernel over the A x C column slots of N (N x Q)
  /// partial rows.
  void launchSlabs(const GroupLaunchPlan &plan, const KernelLaunch &k,
                   const GroupLaunchOperands &operands, const Flags &flags,
                   Value sms, Value stream);
  Value query(ArrayRef<std::string> kernels, Value which, int32_t kind,
              int64_t cluster, Value grid, int64_t block, Value smem);
  /// `samples`: the grid's y extent (batched rows), else 1.
  void launch(ArrayRef<std::string> kernels, Value which, Value grid,
              int64_t block, Value smem, ValueRange args,
              Value samples = {});

  OpBuilder &b;
  Location loc;
  ModuleOp module;
  Type ptr, i64, i32;
  llvm::DenseMap<StringAttr, StringAttr> messages; // text -> global
};

} // namespace mlir::norm

#endif // NORM_CONVERSION_NORMTOLAUNCH_HOSTLAUNCH_H
