//===- Launcher.cpp - The C launchers of a kernel library, as host IR -----===//
//
// Part of norm-opt.
//
// Each function with fused groups becomes its launcher: a func.func of LLVM
// pointers and i64 sizes that returns a status, built from the groups'
// launch plans by the same HostLaunchBuilder as --convert-norm-to-gpu-launch
// (upstream gpu.launch_func on gpu.binary @norm_kernels plus the runtime's
// normrt_ir_* calls). compileNormModule lowers it with upstream passes to
// LLVM and compiles it in process. Its C ABI (docs/compile.md and the
// generated header):
//
//   int NAME(const void *arg0, ..., void *res0, ..., int64_t rows,
//            int64_t cols, int64_t <argI|resJ>_row_stride ...,
//            void *stream);
//
// `argI` / `resJ` are device pointers for the function's arguments and
// results in order; rows is the product of the leading dims, cols the
// trailing dim (groups of several domains: rows0, cols0, rows1, ...); one
// row stride (in elements) per [rows, cols] tensor; stream is a CUstream
// (NULL: the legacy default stream). It returns 0 or a normrt_status, with
// the message in normrt_last_error().
//
//===----------------------------------------------------------------------===//

#include "FunctionOperands.h"

#include "norm/Compile/Compile.h"
#include "norm/Conversion/NormToGPU.h"
#include "norm/Conversion/NormToLaunch/HostLaunch.h"
#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::norm;

namespace {

using compile_detail::argumentOf;
using compile_detail::resultOf;
using compile_detail::typeString;

/// Where one launcher parameter comes from.
struct Param {
  enum Kind { Argument, Result } kind;
  unsigned index;
  int64_t elementBytes;
};

/// One group: its plan and the function's operands it reads and writes.
struct GroupParams {
  MixedReductionOp op;
  GroupLaunchPlan plan;
  SmallVector<Param> fullIn, rowIn, colIn, fullOut, scalars, initIn, colOut;
};

class LauncherBuilder {
public:
  LauncherBuilder(ModuleOp module, StringRef headerName)
      : module(module), headerName(headerName) {}
  LogicalResult build(std::string &header);

private:
  LogicalResult function(func::FuncOp fn, llvm::raw_ostream &hdr);
  LogicalResult describe(func::FuncOp fn, MixedReductionOp op,
                         GroupParams &group);
  LogicalResult checkBody(func::FuncOp fn, ArrayRef<GroupParams> groups);

  ModuleOp module;
  StringRef headerName;
};

LogicalResult LauncherBuilder::describe(func::FuncOp fn, MixedReductionOp op,
                                        GroupParams &group) {
  FailureOr<GroupLaunchPlan> plan = readLaunchPlan(op);
  if (failed(plan))
    return failure();
  group.op = op;
  group.plan = *plan;
  auto needArg = [&](Value v, StringRef what,
                     SmallVector<Param> &into) -> LogicalResult {
    std::optional<unsigned> a = argumentOf(v);
    if (!a)
      return op.emitError() << "compile: the " << what << " operand of the "
                            << "fused op is not an argument of @"
                            << fn.getSymName()
                            << "; compile mode needs every input to be one";
    into.push_back({Param::Argument, *a, elementBytes(v.getType())});
    return success();
  };
  for (Value v : op.getFull())
    if (failed(needArg(v, "full", group.fullIn)))
      return failure();
  for (Value v : op.getRow())
    if (failed(needArg(v, "row", group.rowIn)))
      return failure();
  for (Value v : op.getCol())
    if (failed(needArg(v, "column", group.colIn)))
      return failure();
  for (tensor::ExtractOp e : getCapturedScalars(op))
    if (failed(needArg(e.getTensor(), "scalar (0-d tensor)", group.scalars)))
      return failure();
  for (Value v : op.getColInit())
    if (!getConstantColumnInit(v) &&
        failed(needArg(compile_detail::columnInitSource(v),
                       "column initial value", group.initIn)))
      return failure();
  for (Value v : op.getFullResults()) {
    std::optional<unsigned> r = resultOf(v);
    if (!r)
      return op.emitError() << "compile: a full result of the fused op is "
                               "not returned by @"
                            << fn.getSymName() << " (exactly once)";
    group.fullOut.push_back({Param::Result, *r, elementBytes(v.getType())});
  }
  for (Value v : op.getColResults()) {
    Value out = v;
    if (linalg::GenericOp e = getColumnEpilogue(v))
      out = e->getResult(0);
    std::optional<unsigned> r = resultOf(out);
    if (!r)
      return op.emitError() << "compile: a column result of the fused op is "
                               "not returned by @"
                            << fn.getSymName() << " (exactly once)";
    group.colOut.push_back({Param::Result, *r, elementBytes(out.getType())});
  }
  return success();
}

/// Every other op must be side-effect-free glue (shapes, fills, reshapes,
/// sizes the kernels recompute), and every result must come out of a
/// kernel.
LogicalResult LauncherBuilder::checkBody(func::FuncOp fn,
                                         ArrayRef<GroupParams> groups) {
  llvm::SmallPtrSet<Operation *, 8> edges;
  llvm::SmallSet<unsigned, 8> produced;
  for (const GroupParams &g : groups) {
    MixedReductionOp op = g.op;
    for (Value r : op.getColResults())
      if (linalg::GenericOp e = getColumnEpilogue(r))
        edges.insert(e);
    for (Value init : op.getColInit())
      if (linalg::GenericOp p = getColumnInitPrologue(init))
        edges.insert(p);
    for (const Param &p : llvm::concat<const Param>(g.fullOut, g.colOut))
      produced.insert(p.index);
  }
  for (Operation &inner : fn.getBody().front()) {
    if (isa<MixedReductionOp, func::ReturnOp>(inner) || isPure(&inner) ||
        isa<tensor::EmptyOp, linalg::FillOp>(inner) || edges.contains(&inner))
      continue;
    return inner.emitError()
           << "compile: '" << inner.getName() << "' in @" << fn.getSymName()
           << " has side effects outside any fused norm group";
  }
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (produced.contains(i))
      continue;
    Operation *def = v.getDefiningOp();
    return (def ? def : ret.getOperation())->emitError()
           << "compile: result #" << i << " of @" << fn.getSymName()
           << " is not produced by a fused norm group"
           << (def ? (" ('" + def->getName().getStringRef() + "')").str()
                   : std::string(" (it is an argument)"))
           << "; compile mode needs every result to be one (run "
              "--norm-fuse-mixed-reductions=remarks=true to see what was "
              "not fused)";
  }
  return success();
}

LogicalResult LauncherBuilder::function(func::FuncOp fn,
                                        llvm::raw_ostream &hdr) {
  SmallVector<MixedReductionOp> ops;
  fn.walk([&](MixedReductionOp op) { ops.push_back(op); });
  if (ops.empty())
    return success(); // nothing to launch: no launcher
  std::vector<GroupParams> groups(ops.size());
  for (auto [op, group] : llvm::zip(ops, groups))
    if (failed(describe(fn, op, group)))
      return failure();
  if (failed(checkBody(fn, groups)))
    return failure();
  // Groups of one [rows, cols] domain share the rows and cols parameters;
  // groups of several domains take a pair each (rows0, cols0, ...).
  ArrayRef<int64_t> domain = ops.front().getDomainShape();
  bool perGroup = llvm::any_of(ops, [&](MixedReductionOp op) {
    return op.getDomainShape() != domain;
  });
  llvm::SmallSet<unsigned, 8> strided, stridedRes;
  for (const GroupParams &g : groups) {
    for (const Param &p : g.fullIn)
      strided.insert(p.index);
    for (const Param &p : g.fullOut)
      stridedRes.insert(p.index);
  }

  // The signature: pointers, domains, strides, the stream.
  MLIRContext *ctx = module.getContext();
  OpBuilder b(fn);
  Location loc = fn.getLoc();
  HostLaunchBuilder host(b, loc, module);
  FunctionType type = fn.getFunctionType();
  unsigned numIn = type.getNumInputs(), numOut = type.getNumResults();
  SmallVector<Type> params(numIn + numOut, host.ptrType());
  SmallVector<std::string> names;
  std::string docs;
  llvm::raw_string_ostream ds(docs);
  for (auto [i, t] : llvm::enumerate(type.getInputs())) {
    names.push_back("arg" + std::to_string(i));
    ds << " *   arg" << i << ": " << typeString(t) << "\n";
  }
  for (auto [i, t] : llvm::enumerate(type.getResults())) {
    names.push_back("res" + std::to_string(i));
    ds << " *   res" << i << ": " << typeString(t) << " (written)\n";
  }
  unsigned numDomains = perGroup ? ops.size() : 1;
  for (unsigned g = 0; g < numDomains; ++g) {
    std::string suffix = perGroup ? std::to_string(g) : "";
    names.push_back("rows" + suffix);
    names.push_back("cols" + suffix);
    params.append(2, host.i64Type());
  }
  DenseMap<unsigned, unsigned> strideParam, strideResParam; // index -> param
  for (unsigned i = 0; i < numIn; ++i)
    if (strided.contains(i)) {
      strideParam[i] = params.size();
      names.push_back("arg" + std::to_string(i) + "_row_stride");
      params.push_back(host.i64Type());
    }
  for (unsigned i = 0; i < numOut; ++i)
    if (stridedRes.contains(i)) {
      strideResParam[i] = params.size();
      names.push_back("res" + std::to_string(i) + "_row_stride");
      params.push_back(host.i64Type());
    }
  names.push_back("stream");
  params.push_back(host.ptrType());

  std::string name = fn.getSymName().str();
  hdr << "/* @" << name << ": device pointers\n"
      << docs
      << (perGroup ? " * rowsG, colsG: the domain of group G (in order).\n"
                   : "")
      << " * rows = product of the leading dims, cols = the last dim;"
      << " *_row_stride in elements (>= cols).\n"
      << " * Returns 0 or a normrt_status; normrt_last_error() says why. */\n"
      << "int " << name << "(";
  for (auto [i, n] : llvm::enumerate(names))
    hdr << (i ? ", " : "")
        << (i < numIn ? "const void *" : i < numIn + numOut ? "void *"
            : n == "stream"                                 ? "void *"
                                                            : "int64_t ")
        << n;
  hdr << ");\n\n";

  // The launcher, in place of the function.
  auto launcher = func::FuncOp::create(
      b, loc, name, FunctionType::get(ctx, params, IntegerType::get(ctx, 32)));
  launcher.setArgAttrsAttr(nullptr);
  Block *entry = launcher.addEntryBlock();
  b.setInsertionPointToStart(entry);
  auto arg = [&](unsigned i) { return entry->getArgument(i); };
  auto value = [&](const Param &p) -> LaunchValue {
    unsigned i = p.kind == Param::Argument ? p.index : numIn + p.index;
    return {arg(i), names[i], p.elementBytes};
  };
  auto values = [&](ArrayRef<Param> ps) {
    SmallVector<LaunchValue> out;
    for (const Param &p : ps)
      out.push_back(value(p));
    return out;
  };
  Value stream = entry->getArguments().back();
  std::vector<GroupLaunchOperands> operands(groups.size());
  for (auto [g, group] : llvm::enumerate(groups)) {
    GroupLaunchOperands &o = operands[g];
    o.fullIn = values(group.fullIn);
    o.rowIn = values(group.rowIn);
    o.colIn = values(group.colIn);
    o.fullOut = values(group.fullOut);
    o.scalars = values(group.scalars);
    o.initIn = values(group.initIn);
    o.colOut = values(group.colOut);
    for (const Param &p : group.fullIn)
      o.stridesIn.push_back(
          {arg(strideParam[p.index]), names[strideParam[p.index]], 8});
    for (const Param &p : group.fullOut)
      o.stridesOut.push_back(
          {arg(strideResParam[p.index]), names[strideResParam[p.index]], 8});
    unsigned d = perGroup ? g : 0;
    o.rows = arg(numIn + numOut + 2 * d);
    o.cols = arg(numIn + numOut + 2 * d + 1);
  }
  host.begin(stream);
  // Every domain is checked before the driver is touched.
  for (unsigned d = 0; d < numDomains; ++d) {
    SmallVector<LaunchValue> strides;
    for (unsigned g = 0; g < groups.size(); ++g)
      if (!perGroup || g == d) {
        llvm::append_range(strides, operands[g].stridesIn);
        llvm::append_range(strides, operands[g].stridesOut);
      }
    if (!perGroup) { // each stride once
      SmallVector<LaunchValue> unique;
      llvm::SmallSet<std::string, 8> seen;
      for (const LaunchValue &s : strides)
        if (seen.insert(s.name).second)
          unique.push_back(s);
      llvm::sort(unique, [&](const LaunchValue &x, const LaunchValue &y) {
        return cast<BlockArgument>(x.value).getArgNumber() <
               cast<BlockArgument>(y.value).getArgNumber();
      });
      strides = unique;
    }
    host.checkDomain(name, groups[d].op.getDomainShape(), operands[d].rows,
                     operands[d].cols, perGroup ? std::to_string(d) : "",
                     strides);
  }
  Value sms = host.smCount();
  for (auto [group, o] : llvm::zip(groups, operands))
    host.launchGroup(name, group.plan, o, sms, stream);
  func::ReturnOp::create(b, loc, host.end(stream, /*printFailure=*/false));
  fn.erase();
  return success();
}

LogicalResult LauncherBuilder::build(std::string &header) {
  llvm::raw_string_ostream hdr(header);
  std::string guard = "NORM_GENERATED_";
  for (char c : headerName)
    guard += std::isalnum(static_cast<unsigned char>(c))
                 ? static_cast<char>(std::toupper(c))
                 : '_';
  hdr << "/* Generated by norm-opt compile. Kernels for the functions "
         "below; each launches\n"
         " * on the caller's stream. Link: the shared library itself "
         "(it carries the runtime). */\n"
      << "#ifndef " << guard << "\n#define " << guard << "\n\n"
      << "#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
      << "/* The message of this thread's last failure (\"\" if none). */\n"
      << "const char *normrt_last_error(void);\n\n";
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(module.getContext()));
  for (func::FuncOp fn : llvm::make_early_inc_range(
           module.getOps<func::FuncOp>()))
    if (failed(function(fn, hdr)))
      return failure();
  hdr << "#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
  return success();
}

} // namespace

LogicalResult mlir::norm::buildLaunchers(ModuleOp module, StringRef headerName,
                                         std::string &header) {
  return LauncherBuilder(module, headerName).build(header);
}
