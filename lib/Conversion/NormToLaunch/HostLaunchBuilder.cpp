//===- HostLaunchBuilder.cpp - A fused group's launch as host IR ----------===//
//
// Part of norm-opt. The steps of one group's launch, in the order the
// runtime sees them (docs/pipeline.md, stage 5):
//   1. checkDomain: rows, cols and row strides against the static shape;
//   2. smCount: the context and its SMs;
//   3. vectorFlags: natural alignment checks, then whether the vector
//      kernel (16-byte aligned rows) or the peeled one (rows at one phase)
//      may run;
//   4. launchGroup: the resident tier that holds N (run-time N), then
//      launchPlan: the kernel, its grid from occupancy, the workspace, one
//      cooperative launch where it fits, else the main kernel and the final
//      one.
// Every call into the runtime is part of the group's launch sequence
// (normrt_ir_begin .. normrt_ir_end): after the first failure nothing else
// runs, so the IR is straight-line apart from the kernel choices.
//
//===----------------------------------------------------------------------===//

#include "LaunchArith.h"

#include "norm/Conversion/NormToGPU.h"
#include "norm/Conversion/NormToGPU/KernelNames.h"
#include "norm/Runtime/NormRuntime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::norm;

HostLaunchBuilder::HostLaunchBuilder(OpBuilder &builder, Location loc,
                                     ModuleOp module)
    : b(builder), loc(loc), module(module) {
  MLIRContext *ctx = module.getContext();
  ptr = LLVM::LLVMPointerType::get(ctx);
  i64 = IntegerType::get(ctx, 64);
  i32 = IntegerType::get(ctx, 32);
}

Value HostLaunchBuilder::constant(int64_t v) {
  return arith::ConstantIntOp::create(b, loc, i64, v);
}

Value HostLaunchBuilder::null() { return LLVM::ZeroOp::create(b, loc, ptr); }

/// A call of runtime function `fn`, declared in the module on first use
/// from the ABI table (RuntimeABI.h), its arguments checked against it.
Value HostLaunchBuilder::call(RuntimeFn fn, ValueRange args) {
  const RuntimeFunction &abi = runtimeFunction(fn);
  auto typeOf = [&](AbiType t) -> Type {
    switch (t) {
    case AbiType::I32:
      return i32;
    case AbiType::I64:
      return i64;
    case AbiType::Ptr:
      return ptr;
    case AbiType::Void:
      break;
    }
    return Type();
  };
  SmallVector<Type> params;
  for (AbiType t : abi.parameters())
    params.push_back(typeOf(t));
  SmallVector<Type> results;
  if (abi.result != AbiType::Void)
    results.push_back(typeOf(abi.result));
  assert(TypeRange(args) == TypeRange(params) &&
         "a runtime call whose arguments differ from RuntimeABI.h");
  if (!module.lookupSymbol<func::FuncOp>(abi.name)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto decl = func::FuncOp::create(b, loc, abi.name,
                                     b.getFunctionType(params, results));
    decl.setPrivate();
  }
  auto op = func::CallOp::create(b, loc, abi.name, results, args);
  return results.empty() ? Value() : op.getResult(0);
}

/// The address of a NUL-terminated global holding `text`.
Value HostLaunchBuilder::message(StringRef text) {
  StringAttr key = b.getStringAttr(text);
  StringAttr &symbol = messages[key];
  if (!symbol) {
    std::string name = "norm_message_" + llvm::utohexstr(llvm::hash_value(text));
    while (module.lookupSymbol(name))
      name += "_";
    symbol = b.getStringAttr(name);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    std::string bytes = text.str();
    bytes.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(IntegerType::get(b.getContext(), 8),
                                         bytes.size());
    LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true,
                           LLVM::Linkage::Internal, name,
                           b.getStringAttr(bytes));
  }
  return LLVM::AddressOfOp::create(b, loc, ptr, symbol.getValue());
}

void HostLaunchBuilder::failIf(Value condition, int32_t status,
                               const Twine &text) {
  std::string s = text.str();
  auto ifOp = scf::IfOp::create(b, loc, condition, /*withElse=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value code = arith::ConstantIntOp::create(b, loc, i32, status);
  call(RuntimeFn::Fail, {code, message(s)});
}

Value HostLaunchBuilder::handedStream() {
  return call(RuntimeFn::Stream, {});
}

void HostLaunchBuilder::begin(Value stream) {
  call(RuntimeFn::Begin, stream);
}

Value HostLaunchBuilder::end(Value stream, bool printFailure) {
  Value print = arith::ConstantIntOp::create(b, loc, i32, printFailure);
  return call(RuntimeFn::End, {stream, print});
}

Value HostLaunchBuilder::smCount() { return call(RuntimeFn::SmCount, {}); }

void HostLaunchBuilder::synchronize() {
  // In a sequence mgpuStreamCreate hands out the sequence's stream: this
  // waits for it (and leaves it alone).
  Type token = gpu::AsyncTokenType::get(b.getContext());
  Value t = gpu::WaitOp::create(b, loc, token, ValueRange()).getAsyncToken();
  gpu::WaitOp::create(b, loc, Type(), ValueRange{t});
}

void HostLaunchBuilder::launchGroup(StringRef function,
                                    const GroupLaunchPlan &plan,
                                    const GroupLaunchOperands &ops, Value sms,
                                    Value stream) {
  Flags flags = vectorFlags(function, plan, ops);
  // A run-time N: the smallest resident tier that holds it, else the plan's
  // own (looped) kernels.
  std::function<void(size_t)> tier = [&](size_t t) {
    if (t == plan.tiers.size())
      return launchPlan(plan, plan.kernels, ops, flags, sms, stream);
    Value fits = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                       ops.cols,
                                       constant(plan.tiers[t].cols));
    auto ifOp = scf::IfOp::create(b, loc, fits, /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    launchPlan(plan, plan.tiers[t], ops, flags, sms, stream);
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    tier(t + 1);
  };
  tier(0);
}

/// A query launch (normrt_ir_next_launch(kind)) of the chosen kernel: its
/// answer as i64.
Value HostLaunchBuilder::query(ArrayRef<std::string> kernels, Value which,
                               int32_t kind, int64_t cluster, Value grid,
                               int64_t block, Value smem) {
  call(RuntimeFn::NextLaunch,
       {arith::ConstantIntOp::create(b, loc, i32, kind), constant(cluster)});
  launch(kernels, which, grid, block, smem, {});
  return call(RuntimeFn::QueryResult, {});
}

/// `gpu.launch_func` of `kernels[which]` (one case per kernel) on the
/// sequence's stream.
void HostLaunchBuilder::launch(ArrayRef<std::string> kernels, Value which,
                               Value grid, int64_t block, Value smem,
                               ValueRange args, Value samples) {
  auto one = [&](StringRef kernel) {
    Type token = gpu::AsyncTokenType::get(b.getContext());
    Value t = gpu::WaitOp::create(b, loc, token, ValueRange()).getAsyncToken();
    auto index = [&](Value v) {
      return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
    };
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    auto symbol = SymbolRefAttr::get(
        b.getStringAttr(kKernelModuleName),
        {FlatSymbolRefAttr::get(b.getStringAttr(kernel))});
    gpu::LaunchFuncOp::create(
        b, loc, symbol,
        gpu::KernelDim3{index(grid), samples ? index(samples) : c1, c1},
        gpu::KernelDim3{arith::ConstantIndexOp::create(b, loc, block), c1, c1},
        arith::TruncIOp::create(b, loc, i32, smem), args, token,
        ValueRange{t});
  };
  if (kernels.size() == 1)
    return one(kernels.front());
  SmallVector<int64_t> cases;
  for (int64_t i = 0; i + 1 < int64_t(kernels.size()); ++i)
    cases.push_back(i);
  Value selector = arith::IndexCastOp::create(b, loc, b.getIndexType(), which);
  auto sw = scf::IndexSwitchOp::create(b, loc, TypeRange(), selector, cases,
                                       cases.size());
  OpBuilder::InsertionGuard guard(b);
  for (auto [i, kernel] : llvm::enumerate(kernels)) {
    Region &region = i < cases.size() ? sw.getCaseRegions()[i]
                                      : sw.getDefaultRegion();
    Block *block = b.createBlock(&region);
    b.setInsertionPointToStart(block);
    one(kernel);
    scf::YieldOp::create(b, loc);
  }
}


HostLaunchBuilder::KernelChoice
HostLaunchBuilder::scalarKernelChoice(const KernelLaunch &k) {
  KernelChoice c;
  c.kernels.push_back(k.prefix + kMainScalarKernelSuffix.str());
  c.which = constant(0);
  return c;
}

void HostLaunchBuilder::offerKernel(KernelChoice &c, const KernelLaunch &k,
                                    StringRef suffix, Value when) {
  LaunchArith m{b, loc};
  c.kernels.push_back(k.prefix + suffix.str());
  c.which = m.select(when, m.i64(c.kernels.size() - 1), c.which);
}

/// The main kernel: the split kernels (too few rows to fill the SMs share
/// each row among more CTAs), else the vector kernel of aligned rows, the
/// peeled one, else the scalar one; with its shared memory, column groups
/// and whether it may finish the columns itself.
HostLaunchBuilder::KernelChoice
HostLaunchBuilder::chooseKernel(const KernelLaunch &k, const Flags &flags,
                                Value rows, Value sms) {
  LaunchArith m{b, loc};
  KernelChoice c = scalarKernelChoice(k);
  if (k.peelKernel)
    offerKernel(c, k, kMainPeelKernelSuffix, flags.vecPeel);
  if (k.alignedKernel)
    offerKernel(c, k, kMainKernelSuffix, flags.vec);
  c.smem = m.i64(k.dynamicSharedBytes);
  c.cg = m.i64(k.columnGroups);
  c.single = m.i1(k.singleLaunch);
  if (k.splitColumnGroups <= 0)
    return c;
  Value split = m.both(
      m.cmp(LaunchArith::P::sgt, rows, m.i64(0)),
      m.cmp(LaunchArith::P::sle, m.mul(rows, m.i64(k.splitColumnGroups)), sms));
  c.kernels.push_back(k.prefix + kMainSplitScalarKernelSuffix.str());
  c.kernels.push_back(k.prefix + kMainSplitKernelSuffix.str());
  Value splitKernel = m.select(flags.vec, m.i64(c.kernels.size() - 1),
                               m.i64(c.kernels.size() - 2));
  c.which = m.select(split, splitKernel, c.which);
  c.cg = m.select(split, m.i64(k.splitColumnGroups), c.cg);
  c.smem = m.select(split, m.i64(k.splitSharedBytes), c.smem);
  // The split kernels have no tail.
  c.single = m.both(c.single, arith::XOrIOp::create(b, loc, split, m.i1(true)));
  return c;
}

/// A persistent grid: as many CTAs (clusters) as are resident at once,
/// unless the kernels were compiled with a fixed programs-per-SM; and the
/// programs, the rows of the partial buffer.
HostLaunchBuilder::Grid HostLaunchBuilder::persistentGrid(
    const GroupLaunchPlan &plan, const KernelLaunch &k,
    const KernelChoice &c, const GroupLaunchOperands &ops, const Flags &flags,
    Value sms) {
  LaunchArith m{b, loc};
  using P = LaunchArith::P;
  Value rows = ops.rows;
  const int64_t R = k.rowsPerCta;
  auto occupancy = [&](int64_t cluster) {
    return query(c.kernels, c.which, NORMRT_IR_QUERY_OCCUPANCY, cluster,
                 m.i64(1), k.block(), c.smem);
  };
  if (k.clusterCtas > 1) {
    int64_t C = k.clusterCtas;
    Value clusters = plan.kernels.programsPerSm > 0
                         ? m.div(m.mul(sms, m.i64(plan.kernels.programsPerSm)),
                                 m.i64(C))
                         : occupancy(C);
    Value programs = m.min(rows, m.max(clusters, m.i64(1)));
    return {m.mul(programs, m.i64(C)), programs};
  }
  Value perSM = plan.kernels.programsPerSm > 0 ? m.i64(plan.kernels.programsPerSm)
                                       : m.max(occupancy(1), m.i64(1));
  Value limit = m.mul(sms, perSM);
  // Batched rows: the samples share the resident CTAs (blockIdx.y).
  if (ops.batch)
    limit = m.max(m.div(limit, m.max(ops.batch, m.i64(1))), m.i64(1));
  if (k.columnGroups > 0) {
    // Looped: cg CTAs share each row, each owning a part of the columns.
    limit = m.max(limit, c.cg);
    Value grid = m.min(m.mul(rows, c.cg), m.mul(m.div(limit, c.cg), c.cg));
    return {grid, m.div(grid, c.cg)};
  }
  Value grid = m.min(m.div(m.add(rows, m.i64(R - 1)), m.i64(R)), limit);
  if (k.peelKernel) {
    // Programs that take more than one row walk rows grid x R apart, at one
    // phase only if (grid x R x stride) % V == 0: fewer CTAs (at most
    // V - 1), or where fewer than one such grid fits, more.
    Value phase = m.rem(ops.stridesIn.front().value, m.i64(plan.kernels.vector));
    Value lowBit =
        arith::AndIOp::create(b, loc, phase, m.sub(m.i64(0), phase));
    Value isZero = m.cmp(P::eq, phase, m.i64(0));
    Value q = m.select(isZero, m.i64(1),
                       m.div(m.i64(plan.kernels.vector),
                             m.select(isZero, m.i64(1), lowBit)));
    Value every = m.select(m.cmp(P::sgt, q, m.i64(R)), m.div(q, m.i64(R)),
                           m.i64(1));
    Value peeled = m.select(m.cmp(P::sge, grid, every),
                            m.sub(grid, m.rem(grid, every)), every);
    Value needed = m.both(flags.vecPeel,
                          m.cmp(P::sgt, rows, m.mul(grid, m.i64(R))));
    grid = m.select(needed, peeled, grid);
  }
  return {grid, m.mul(grid, m.i64(k.combineInCta ? 1 : R))};
}

/// The [C, P, N] fp32 partial rows from the runtime (NULL for no programs).
Value HostLaunchBuilder::workspace(int64_t numCol, Value programs, Value cols,
                                   Value stream) {
  LaunchArith m{b, loc};
  auto ifOp = scf::IfOp::create(b, loc, ptr,
                                m.cmp(LaunchArith::P::sgt, programs, m.i64(0)),
                                /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value bytes = m.mul(m.mul(m.i64(numCol * 4), programs), cols);
  scf::YieldOp::create(b, loc,
                       call(RuntimeFn::Workspace, {stream, bytes}));
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, loc, null());
  return ifOp.getResult(0);
}

/// A kernel's arguments in the order of `groups` (mainKernelParams,
/// finalKernelParams: the builders read them in that order).
SmallVector<Value>
HostLaunchBuilder::kernelArguments(ArrayRef<KernelParamGroup> groups,
                                   const GroupLaunchOperands &ops,
                                   const LaunchScalars &own) {
  SmallVector<Value> args;
  auto append = [&](ArrayRef<LaunchValue> values) {
    for (const LaunchValue &v : values)
      args.push_back(v.value);
  };
  for (const KernelParamGroup &g : groups) {
    switch (g.kind) {
    case KernelParam::FullIn: append(ops.fullIn); break;
    case KernelParam::RowIn: append(ops.rowIn); break;
    case KernelParam::ColIn: append(ops.colIn); break;
    case KernelParam::FullOut: append(ops.fullOut); break;
    case KernelParam::Partial: args.push_back(own.workspace); break;
    case KernelParam::Rows: args.push_back(ops.rows); break;
    case KernelParam::Cols: args.push_back(ops.cols); break;
    case KernelParam::StrideIn: append(ops.stridesIn); break;
    case KernelParam::StrideOut: append(ops.stridesOut); break;
    case KernelParam::Scalar: append(ops.scalars); break;
    case KernelParam::Barrier: args.push_back(own.barrier); break;
    case KernelParam::InitIn: append(ops.initIn); break;
    case KernelParam::ColOut: append(ops.colOut); break;
    case KernelParam::Finalize: args.push_back(own.finalize); break;
    case KernelParam::Programs: args.push_back(own.programs); break;
    }
  }
  return args;
}

/// The main kernel's launch (rows > 0), cooperative where the kernel can
/// finish the column results itself and every CTA fits (a fits query, then
/// the grid-barrier word). Returns `finalize` (i64 1: it did).
Value HostLaunchBuilder::launchMain(const KernelLaunch &k,
                                    const KernelChoice &c, const Grid &g,
                                    const GroupLaunchOperands &ops,
                                    int64_t numCol, Value ws, Value stream) {
  LaunchArith m{b, loc};
  const bool anyTail = numCol > 0 && k.singleLaunch;
  Value never = m.i64(0); // finalize without the tail
  Value any = m.cmp(LaunchArith::P::sgt, ops.rows, m.i64(0));
  if (ops.batch)
    any = m.both(any, m.cmp(LaunchArith::P::sgt, ops.batch, m.i64(0)));
  auto mainIf = scf::IfOp::create(
      b, loc, anyTail ? TypeRange{i64} : TypeRange{}, any,
      /*withElse=*/anyTail);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&mainIf.getThenRegion().front());
  Value barrier = null(), coop = m.i64(0);
  if (anyTail) {
    auto fitsIf = scf::IfOp::create(b, loc, i64, c.single, /*withElse=*/true);
    b.setInsertionPointToStart(&fitsIf.getThenRegion().front());
    scf::YieldOp::create(b, loc,
                         query(c.kernels, c.which,
                               NORMRT_IR_QUERY_COOPERATIVE_FITS, 1, g.grid,
                               k.block(), c.smem));
    b.setInsertionPointToStart(&fitsIf.getElseRegion().front());
    scf::YieldOp::create(b, loc, m.i64(0));
    b.setInsertionPointAfter(fitsIf);
    coop = fitsIf.getResult(0);
    Value isCoop = m.cmp(LaunchArith::P::ne, coop, m.i64(0));
    auto barrierIf = scf::IfOp::create(b, loc, ptr, isCoop, /*withElse=*/true);
    b.setInsertionPointToStart(&barrierIf.getThenRegion().front());
    scf::YieldOp::create(b, loc, call(RuntimeFn::GridBarrier, stream));
    b.setInsertionPointToStart(&barrierIf.getElseRegion().front());
    scf::YieldOp::create(b, loc, null());
    b.setInsertionPointAfter(barrierIf);
    barrier = barrierIf.getResult(0);
    Value kind = m.select(isCoop, m.i32(NORMRT_IR_LAUNCH_COOPERATIVE),
                          m.i32(NORMRT_IR_LAUNCH));
    call(RuntimeFn::NextLaunch, {kind, m.i64(1)});
  }
  // The kernels' parameters, in their order (mainKernelParams).
  SmallVector<Value> args = kernelArguments(
      mainKernelParams(ops.op), ops, {ws, barrier, coop, Value()});
  launch(c.kernels, c.which, g.grid, k.block(), c.smem, args, ops.batch);
  if (!anyTail)
    return never;
  scf::YieldOp::create(b, loc, coop);
  b.setInsertionPointToStart(&mainIf.getElseRegion().front());
  scf::YieldOp::create(b, loc, m.i64(0));
  return mainIf.getResult(0);
}

/// The final kernel, unless the main kernel finished the columns: the
/// fixed-order reduction of the partial rows, a programmatic dependent of
/// the main kernel where the plan says so. Batched rows: the partial rows
/// hold every sample's N columns side by side ([C, P, batch x N]), reduced
/// as batch x N columns.
void HostLaunchBuilder::launchFinal(const GroupLaunchPlan &plan,
                                    const KernelLaunch &k,
                                    const GroupLaunchOperands &sampleOps,
                                    Value ws, Value programs, Value finalize) {
  LaunchArith m{b, loc};
  GroupLaunchOperands ops = sampleOps;
  if (ops.batch)
    ops.cols = m.mul(ops.cols, ops.batch);
  auto finalIf = scf::IfOp::create(
      b, loc,
      m.both(m.cmp(LaunchArith::P::eq, finalize, m.i64(0)),
             m.cmp(LaunchArith::P::sgt, ops.cols, m.i64(0))),
      /*withElse=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&finalIf.getThenRegion().front());
  SmallVector<Value> args = kernelArguments(
      finalKernelParams(ops.op), ops, {ws, Value(), Value(), programs});
  call(RuntimeFn::NextLaunch,
       {m.i32(plan.kernels.dependentLaunch ? NORMRT_IR_LAUNCH_DEPENDENT
                                  : NORMRT_IR_LAUNCH),
        m.i64(1)});
  Value grid = m.div(m.add(ops.cols, m.i64(kFinalColumnsPerCTA - 1)),
                     m.i64(kFinalColumnsPerCTA));
  launch({k.finalKernel}, Value(), grid, k.finalThreads(), m.i64(0), args);
}

/// The launches of one plan's kernels (`k`): the slabs', the latency
/// kernel's for calls of at most latency_rows rows, else the persistent
/// grid's.
void HostLaunchBuilder::launchPlan(const GroupLaunchPlan &plan,
                                   const KernelLaunch &k,
                                   const GroupLaunchOperands &ops,
                                   const Flags &flags, Value sms,
                                   Value stream) {
  if (k.slabRows)
    return launchSlabs(plan, k, ops, flags, sms, stream);
  if (k.latencyCtas < 2 || ops.batch)
    return launchPersistent(plan, k, ops, flags, sms, stream);
  // Calls of 1 to latency_rows rows: the latency kernel's one cluster.
  LaunchArith m{b, loc};
  Value small = m.both(m.cmp(LaunchArith::P::sgt, ops.rows, m.i64(0)),
                       m.cmp(LaunchArith::P::sle, ops.rows, m.i64(k.latencyRows)));
  auto ifOp = scf::IfOp::create(b, loc, small, /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  launchLatency(k, ops, flags);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  launchPersistent(plan, k, ops, flags, sms, stream);
}

/// The latency kernel (vector where aligned, else scalar) on one cluster:
/// it finishes the column results itself (no workspace, no final kernel).
void HostLaunchBuilder::launchLatency(const KernelLaunch &k,
                                      const GroupLaunchOperands &ops,
                                      const Flags &flags) {
  LaunchArith m{b, loc};
  MixedReductionOp op = ops.op;
  KernelPlan scalar = latencyKernelPlan(op, k, 1);
  KernelChoice c;
  c.kernels.push_back(k.prefix + kLatencyScalarKernelSuffix.str());
  c.which = m.i64(0);
  c.smem = m.i64(scalar.dynamicSharedBytes);
  if (k.latencyVectorKernel) {
    KernelPlan vector = latencyKernelPlan(op, k, k.vector);
    offerKernel(c, k, kLatencyKernelSuffix, flags.vec);
    c.smem = m.select(flags.vec, m.i64(vector.dynamicSharedBytes), c.smem);
  }
  SmallVector<Value> args = kernelArguments(
      mainKernelParams(op), ops, {null(), null(), m.i64(1), Value()});
  launch(c.kernels, c.which, m.i64(k.latencyCtas), scalar.block(), c.smem,
         args);
}

/// The persistent grid's launches: the kernel, its grid, the workspace, the
/// main launch, the final one.
void HostLaunchBuilder::launchPersistent(const GroupLaunchPlan &plan,
                                         const KernelLaunch &k,
                                         const GroupLaunchOperands &ops,
                                         const Flags &flags, Value sms,
                                         Value stream) {
  const int64_t numCol = plan.numColumnResults;
  KernelChoice choice = chooseKernel(k, flags, ops.rows, sms);
  Grid grid = persistentGrid(plan, k, choice, ops, flags, sms);
  LaunchArith m{b, loc};
  // No sample: no programs (no workspace, no launch).
  if (ops.batch)
    grid.programs = m.select(m.cmp(LaunchArith::P::sgt, ops.batch, m.i64(0)),
                             grid.programs, m.i64(0));
  Value partialCols = ops.batch ? m.mul(ops.cols, ops.batch) : ops.cols;
  Value ws = numCol > 0
                 ? workspace(numCol, grid.programs, partialCols, stream)
                 : null();
  Value finalize = launchMain(k, choice, grid, ops, numCol, ws, stream);
  if (numCol > 0)
    launchFinal(plan, k, ops, ws, grid.programs, finalize);
}

void HostLaunchBuilder::launchSlabs(const GroupLaunchPlan &plan,
                                    const KernelLaunch &k,
                                    const GroupLaunchOperands &ops,
                                    const Flags &flags, Value sms,
                                    Value stream) {
  LaunchArith m{b, loc};
  const int64_t numCol = plan.numColumnResults;
  MixedReductionOp op = ops.op;
  std::optional<SlabDomain> slab = op.getSlabDomain();
  // A CTA per K slabs (channels last: K adjacent groups); at most half as
  // many such units as SMs, each of whose Q parts still walks the plan's
  // split_min_bytes of every full input: the split kernels, a cluster of Q
  // CTAs per unit (perf-notes, "GroupNorm slabs": 128 units of 8 CTAs each
  // were slower than 128 CTAs, and so were 64 units of 8 x 20 KiB).
  const int64_t Q = std::max<int64_t>(1, k.splitColumnGroups);
  Value units = m.div(ops.rows, m.i64(k.slabGroups));
  Value split = m.i1(false);
  if (Q > 1) {
    int64_t widest = widestElementBytes(op.getFull());
    // A unit's bytes of one input: K slabs of `cols` elements. (One
    // statement per op: the order of a call's arguments is the compiler's,
    // and the IR should not depend on it.)
    Value unitBytes = m.mul(ops.cols, m.i64(k.slabGroups * widest));
    Value few = m.cmp(LaunchArith::P::sle, m.mul(units, m.i64(2)), sms);
    Value big = m.cmp(LaunchArith::P::sge, unitBytes, m.i64(k.splitMinBytes * Q));
    split = m.both(few, big);
  }
  // N x Q partial rows (a sample's part each; N with one CTA per slab) of
  // A x C column slots; the workspace holds the most.
  Value samples = m.div(ops.rows, m.i64(slab->aSize));
  Value programs = m.select(split, m.mul(samples, m.i64(Q)), samples);
  GroupLaunchOperands columns = ops;
  columns.cols = m.i64(slab->aSize * slab->cSize);
  Value ws = numCol > 0 ? workspace(numCol, m.mul(samples, m.i64(Q)),
                                    columns.cols, stream)
                        : null();
  auto mainIf = scf::IfOp::create(
      b, loc,
      m.both(m.cmp(LaunchArith::P::sgt, ops.rows, m.i64(0)),
             m.cmp(LaunchArith::P::sgt, ops.cols, m.i64(0))),
      /*withElse=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&mainIf.getThenRegion().front());
    SmallVector<Value> args = kernelArguments(
        mainKernelParams(ops.op), ops, {ws, null(), m.i64(0), Value()});
    // The vector kernel where every pointer is 16-byte aligned and, with
    // slabs contiguous, a channel's D elements are whole vectors.
    Value vec = m.i1(false);
    if (k.alignedKernel) {
      vec = flags.vec;
      if (!slab->channelsLast) {
        Value spatial = m.div(ops.cols, m.i64(slab->cSize));
        vec = m.both(vec, m.cmp(LaunchArith::P::eq,
                                m.rem(spatial, m.i64(k.vector)), m.i64(0)));
      }
    }
    // The split kernels where slabs are few, the vector ones where aligned.
    KernelChoice c = scalarKernelChoice(k);
    if (k.alignedKernel)
      offerKernel(c, k, kMainKernelSuffix, vec);
    if (Q > 1) {
      offerKernel(c, k, kMainSplitScalarKernelSuffix, split);
      if (k.alignedKernel)
        offerKernel(c, k, kMainSplitKernelSuffix, m.both(split, vec));
    }
    launch(c.kernels, c.which,
           m.select(split, m.mul(units, m.i64(Q)), units), k.block(),
           m.i64(0), args);
  }
  if (numCol > 0)
    launchFinal(plan, k, columns, ws, programs, m.i64(0));
}
