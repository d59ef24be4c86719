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

#include "norm/Conversion/NormToLaunch/HostLaunch.h"

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

namespace {
constexpr int32_t kOutOfRange = NORMRT_ERROR_OUT_OF_RANGE;
} // namespace

struct HostLaunchBuilder::Flags {
  Value vec, vecPeel; // i1
};

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

/// A call of the runtime's `name`, declared in the module on first use.
Value HostLaunchBuilder::call(StringRef name, TypeRange results,
                              ValueRange args) {
  if (!module.lookupSymbol<func::FuncOp>(name)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto decl = func::FuncOp::create(
        b, loc, name, b.getFunctionType(args.getTypes(), results));
    decl.setPrivate();
  }
  auto op = func::CallOp::create(b, loc, name, results, args);
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
  call("normrt_ir_fail", {}, {code, message(s)});
}

Value HostLaunchBuilder::handedStream() {
  return call("normrt_ir_stream", ptr, {});
}

void HostLaunchBuilder::begin(Value stream) {
  call("normrt_ir_begin", i32, stream);
}

Value HostLaunchBuilder::end(Value stream, bool printFailure) {
  Value print = arith::ConstantIntOp::create(b, loc, i32, printFailure);
  return call("normrt_ir_end", i32, {stream, print});
}

Value HostLaunchBuilder::smCount() { return call("normrt_ir_sm_count", i64, {}); }

void HostLaunchBuilder::synchronize() {
  // In a sequence mgpuStreamCreate hands out the sequence's stream: this
  // waits for it (and leaves it alone).
  Type token = gpu::AsyncTokenType::get(b.getContext());
  Value t = gpu::WaitOp::create(b, loc, token, ValueRange()).getAsyncToken();
  gpu::WaitOp::create(b, loc, Type(), ValueRange{t});
}

void HostLaunchBuilder::checkDomain(StringRef function,
                                    ArrayRef<int64_t> domain, Value rows,
                                    Value cols, StringRef suffix,
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
  int64_t staticRows = 1;
  for (int64_t d : domain.drop_back())
    staticRows = ShapedType::isDynamic(d) || staticRows < 0 ? -1
                                                            : staticRows * d;
  if (staticRows >= 0)
    failIf(cmp(P::ne, rows, constant(staticRows)), kOutOfRange,
           function + ": " + r + " must be " + Twine(staticRows) +
               " (static shape)");
  if (!ShapedType::isDynamic(domain.back()))
    failIf(cmp(P::ne, cols, constant(domain.back())), kOutOfRange,
           function + ": " + c + " must be " + Twine(domain.back()) +
               " (static shape)");
  for (const LaunchValue &s : strides)
    failIf(cmp(P::slt, s.value, cols), kOutOfRange,
           function + ": " + s.name + " must be >= " + c);
}

HostLaunchBuilder::Flags
HostLaunchBuilder::vectorFlags(StringRef function, const GroupLaunchPlan &plan,
                               const GroupLaunchOperands &ops) {
  // Natural alignment is required.
  for (ArrayRef<LaunchValue> group :
       {ArrayRef(ops.fullIn), ArrayRef(ops.fullOut), ArrayRef(ops.colIn),
        ArrayRef(ops.scalars)})
    for (const LaunchValue &v : group)
      call("normrt_ir_check_aligned", {},
           {v.value, constant(v.elementBytes),
            message((function + ": " + v.name).str())});
  Value no = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 0);
  if (plan.vector <= 1)
    return {no, no};
  // 16-byte alignment of every pointer, cols and strides picks the vector
  // kernel; strides that agree modulo V (any phase) the peeled one.
  int64_t V = plan.vector;
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
                                       constant(plan.tiers[t].tierCols));
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
  call("normrt_ir_next_launch", {},
       {arith::ConstantIntOp::create(b, loc, i32, kind), constant(cluster)});
  launch(kernels, which, grid, block, smem, {});
  return call("normrt_ir_query_result", i64, {});
}

/// `gpu.launch_func` of `kernels[which]` (one case per kernel) on the
/// sequence's stream.
void HostLaunchBuilder::launch(ArrayRef<std::string> kernels, Value which,
                               Value grid, int64_t block, Value smem,
                               ValueRange args) {
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
        b, loc, symbol, gpu::KernelDim3{index(grid), c1, c1},
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

/// The launches of one plan's kernels (`k`): the main kernel (vector,
/// peeled or scalar; the split kernels for few rows) on a persistent grid,
/// one cooperative launch where the kernel can finish the column results
/// itself and every CTA fits, else the final kernel after it.
void HostLaunchBuilder::launchPlan(const GroupLaunchPlan &plan,
                                   const KernelLaunch &k,
                                   const GroupLaunchOperands &ops,
                                   const Flags &flags, Value sms,
                                   Value stream) {
  using P = arith::CmpIPredicate;
  auto cmp = [&](P p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  };
  auto select = [&](Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  };
  auto add = [&](Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); };
  auto sub = [&](Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); };
  auto mul = [&](Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); };
  auto div = [&](Value x, Value y) { return arith::DivSIOp::create(b, loc, x, y); };
  auto rem = [&](Value x, Value y) { return arith::RemSIOp::create(b, loc, x, y); };
  auto min = [&](Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); };
  auto max = [&](Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); };
  Value rows = ops.rows, cols = ops.cols;
  const int64_t numCol = plan.numColumnResults, R = k.rowsPerCTA;
  const bool anyTail = numCol > 0 && k.singleLaunch;

  // The kernel: the split kernels (too few rows to fill the SMs share each
  // row among more CTAs), else the vector kernel of aligned rows, the
  // peeled one, else the scalar one.
  SmallVector<std::string> kernels{k.prefix + kMainScalarKernelSuffix.str()};
  Value which = constant(0);
  if (k.peel) {
    kernels.push_back(k.prefix + kMainPeelKernelSuffix.str());
    which = select(flags.vecPeel, constant(kernels.size() - 1), which);
  }
  if (k.alignedKernel) {
    kernels.push_back(k.prefix + kMainKernelSuffix.str());
    which = select(flags.vec, constant(kernels.size() - 1), which);
  }
  Value smem = constant(k.dynamicSharedBytes);
  Value cg = constant(k.columnGroups);
  Value single = arith::ConstantIntOp::create(b, loc, b.getI1Type(),
                                                k.singleLaunch);
  if (k.splitColumnGroups > 0) {
    Value split = arith::AndIOp::create(
        b, loc, cmp(P::sgt, rows, constant(0)),
        cmp(P::sle, mul(rows, constant(k.splitColumnGroups)), sms));
    kernels.push_back(k.prefix + kMainSplitScalarKernelSuffix.str());
    kernels.push_back(k.prefix + kMainSplitKernelSuffix.str());
    Value splitKernel =
        select(flags.vec, constant(kernels.size() - 1),
               constant(kernels.size() - 2));
    which = select(split, splitKernel, which);
    cg = select(split, constant(k.splitColumnGroups), cg);
    smem = select(split, constant(k.splitSharedBytes), smem);
    // The split kernels have no tail.
    single = arith::AndIOp::create(
        b, loc, single,
        arith::XOrIOp::create(
            b, loc, split,
            arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1)));
  }

  // A persistent grid: as many CTAs (clusters) as are resident at once,
  // unless the kernels were compiled with a fixed programs-per-SM.
  Value grid, programs;
  if (k.clusterCTAs > 1) {
    int64_t C = k.clusterCTAs;
    Value clusters =
        plan.programsPerSM > 0
            ? div(mul(sms, constant(plan.programsPerSM)), constant(C))
            : query(kernels, which, NORMRT_IR_QUERY_OCCUPANCY, C, constant(1),
                    k.block, smem);
    clusters = max(clusters, constant(1));
    programs = min(rows, clusters); // clusters: rows of the partial buffer
    grid = mul(programs, constant(C));
  } else {
    Value perSM =
        plan.programsPerSM > 0
            ? constant(plan.programsPerSM)
            : max(query(kernels, which, NORMRT_IR_QUERY_OCCUPANCY, 1,
                        constant(1), k.block, smem),
                  constant(1));
    Value limit = mul(sms, perSM);
    if (k.columnGroups > 0) {
      // Looped: cg CTAs share each row, each owning a part of the columns.
      limit = max(limit, cg);
      Value most = mul(div(limit, cg), cg);
      grid = min(mul(rows, cg), most);
      programs = div(grid, cg); // rows of the partial buffer
    } else {
      grid = min(div(add(rows, constant(R - 1)), constant(R)), limit);
      if (k.peel) {
        // Programs that take more than one row walk rows grid x R apart, at
        // one phase only if (grid x R x stride) % V == 0: fewer CTAs (at
        // most V - 1), or where fewer than one such grid fits, more.
        Value phase = rem(ops.stridesIn.front().value, constant(plan.vector));
        Value lowBit = arith::AndIOp::create(b, loc, phase,
                                             sub(constant(0), phase));
        Value isZero = cmp(P::eq, phase, constant(0));
        Value q = select(isZero, constant(1),
                         div(constant(plan.vector),
                             select(isZero, constant(1), lowBit)));
        Value m = select(cmp(P::sgt, q, constant(R)), div(q, constant(R)),
                         constant(1));
        Value peeled = select(cmp(P::sge, grid, m), sub(grid, rem(grid, m)), m);
        Value needed = arith::AndIOp::create(
            b, loc, flags.vecPeel, cmp(P::sgt, rows, mul(grid, constant(R))));
        grid = select(needed, peeled, grid);
      }
      programs = mul(grid, constant(k.combineInCTA ? 1 : R));
    }
  }

  // The workspace: the [C, P, N] fp32 partial rows.
  Value ws = null();
  if (numCol > 0) {
    auto ifOp = scf::IfOp::create(b, loc, ptr, cmp(P::sgt, programs, constant(0)),
                                  /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value bytes = mul(mul(constant(numCol * 4), programs), cols);
    scf::YieldOp::create(b, loc, call("normrt_ir_workspace", ptr, {stream, bytes}));
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, loc, null());
    ws = ifOp.getResult(0);
  }

  // The main kernel, cooperative (finalize = 1: it reduces the partial rows
  // itself after a grid barrier) where it can and every CTA fits.
  Value finalize = constant(0);
  auto mainIf = scf::IfOp::create(b, loc, anyTail ? TypeRange{i64} : TypeRange{},
                                  cmp(P::sgt, rows, constant(0)),
                                  /*withElse=*/anyTail);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&mainIf.getThenRegion().front());
    Value barrier = null(), coop = constant(0);
    if (anyTail) {
      auto fitsIf = scf::IfOp::create(b, loc, i64, single, /*withElse=*/true);
      b.setInsertionPointToStart(&fitsIf.getThenRegion().front());
      scf::YieldOp::create(b, loc,
                           query(kernels, which,
                                 NORMRT_IR_QUERY_COOPERATIVE_FITS, 1, grid,
                                 k.block, smem));
      b.setInsertionPointToStart(&fitsIf.getElseRegion().front());
      scf::YieldOp::create(b, loc, constant(0));
      b.setInsertionPointAfter(fitsIf);
      coop = fitsIf.getResult(0);
      Value isCoop = cmp(P::ne, coop, constant(0));
      auto barrierIf = scf::IfOp::create(b, loc, ptr, isCoop, /*withElse=*/true);
      b.setInsertionPointToStart(&barrierIf.getThenRegion().front());
      scf::YieldOp::create(b, loc, call("normrt_ir_grid_barrier", ptr, stream));
      b.setInsertionPointToStart(&barrierIf.getElseRegion().front());
      scf::YieldOp::create(b, loc, null());
      b.setInsertionPointAfter(barrierIf);
      barrier = barrierIf.getResult(0);
      Value kind = select(isCoop,
                          arith::ConstantIntOp::create(
                              b, loc, i32, NORMRT_IR_LAUNCH_COOPERATIVE),
                          arith::ConstantIntOp::create(b, loc, i32,
                                                       NORMRT_IR_LAUNCH));
      call("normrt_ir_next_launch", {}, {kind, constant(1)});
    }
    SmallVector<Value> args;
    auto append = [&](ArrayRef<LaunchValue> values) {
      for (const LaunchValue &v : values)
        args.push_back(v.value);
    };
    append(ops.fullIn);
    append(ops.rowIn);
    append(ops.colIn);
    append(ops.fullOut);
    args.append({ws, rows, cols});
    append(ops.stridesIn);
    append(ops.stridesOut);
    append(ops.scalars);
    if (numCol > 0) {
      args.push_back(barrier);
      append(ops.initIn);
      append(ops.colOut);
      args.push_back(coop);
    }
    launch(kernels, which, grid, k.block, smem, args);
    if (anyTail) {
      scf::YieldOp::create(b, loc, coop);
      b.setInsertionPointToStart(&mainIf.getElseRegion().front());
      scf::YieldOp::create(b, loc, constant(0));
    }
  }
  if (anyTail)
    finalize = mainIf.getResult(0);
  if (numCol == 0)
    return;

  // Else the final kernel: the fixed-order reduction of the partial rows.
  auto finalIf = scf::IfOp::create(b, loc, cmp(P::eq, finalize, constant(0)),
                                   /*withElse=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&finalIf.getThenRegion().front());
  SmallVector<Value> args{ws};
  for (const LaunchValue &v : ops.initIn)
    args.push_back(v.value);
  for (const LaunchValue &v : ops.colOut)
    args.push_back(v.value);
  args.append({programs, cols});
  call("normrt_ir_next_launch", {},
       {arith::ConstantIntOp::create(b, loc, i32,
                                     plan.dependentFinal
                                         ? NORMRT_IR_LAUNCH_DEPENDENT
                                         : NORMRT_IR_LAUNCH),
        constant(1)});
  Value finalGrid = div(add(cols, constant(kFinalColumnsPerCTA - 1)),
                        constant(kFinalColumnsPerCTA));
  launch({k.finalKernel}, Value(), finalGrid, k.finalThreads, constant(0),
         args);
}
