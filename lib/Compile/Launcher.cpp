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
//            int64_t cols, [int64_t batch,] int64_t <argI|resJ>_row_stride
//            ..., void *stream);
//
// `argI` / `resJ` are device pointers for the function's arguments and
// results in order; rows is the product of the leading dims, cols the
// trailing dim (groups of several domains: rows0, cols0, rows1, ...);
// batched rows (adaLN's [B, S, N]) add batch, the product of the batch
// dims (B), which their column tensors [batch..., cols] lead with; one
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
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
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

/// The launcher's C parameters (see LauncherBuilder::signature).
struct LauncherSignature {
  SmallVector<Type> types;
  SmallVector<std::string> names;
  unsigned numIn = 0, numOut = 0, numDomains = 1;
  bool perGroup = false; // a (rows, cols) pair per group
  // Per domain: the parameter of its rows (cols follows, then batch where
  // its groups are batched rows).
  SmallVector<unsigned> rowsParam;
  SmallVector<bool> batched;
  bool channelsFirst = false; // a group's N is not its domain's last dim
  DenseMap<unsigned, unsigned> strideOfArg, strideOfResult; // -> parameter
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
  LauncherSignature signature(func::FuncOp fn, ArrayRef<GroupParams> groups);
  void writeDeclaration(func::FuncOp fn, const LauncherSignature &sig,
                        llvm::raw_ostream &hdr);
  std::vector<GroupLaunchOperands> operands(ArrayRef<GroupParams> groups,
                                            const LauncherSignature &sig,
                                            Block *entry);
  void body(StringRef name, ArrayRef<GroupParams> groups,
            const LauncherSignature &sig, ArrayRef<GroupLaunchOperands> ops,
            Block *entry);

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

/// The launcher's C parameters: pointers of the arguments and results, a
/// (rows, cols) pair per domain, the row strides of the [rows, cols]
/// tensors in index order (arguments, then results), the stream.
LauncherSignature LauncherBuilder::signature(func::FuncOp fn,
                                             ArrayRef<GroupParams> groups) {
  LauncherSignature sig;
  MixedReductionOp first = groups.front().op;
  sig.perGroup = llvm::any_of(groups, [&](const GroupParams &g) {
    return !compile_detail::sameDomain(g.op, first);
  });
  llvm::SmallSet<unsigned, 8> strided, stridedRes, colStrided, colStridedRes;
  for (const GroupParams &g : groups) {
    bool channelsFirst = !MixedReductionOp(g.op).isRowMajor();
    sig.channelsFirst |= channelsFirst;
    for (const Param &p : g.fullIn)
      (channelsFirst ? colStrided : strided).insert(p.index);
    for (const Param &p : g.fullOut)
      (channelsFirst ? colStridedRes : stridedRes).insert(p.index);
  }
  MLIRContext *ctx = module.getContext();
  Type ptr = LLVM::LLVMPointerType::get(ctx), i64 = IntegerType::get(ctx, 64);
  FunctionType type = fn.getFunctionType();
  sig.numIn = type.getNumInputs();
  sig.numOut = type.getNumResults();
  sig.types.assign(sig.numIn + sig.numOut, ptr);
  for (unsigned i = 0; i < sig.numIn; ++i)
    sig.names.push_back("arg" + std::to_string(i));
  for (unsigned i = 0; i < sig.numOut; ++i)
    sig.names.push_back("res" + std::to_string(i));
  sig.numDomains = sig.perGroup ? groups.size() : 1;
  for (unsigned g = 0; g < sig.numDomains; ++g) {
    std::string suffix = sig.perGroup ? std::to_string(g) : "";
    sig.rowsParam.push_back(sig.names.size());
    sig.batched.push_back(compile_detail::batchParamRank(groups[g].op) > 0);
    sig.names.push_back("rows" + suffix);
    sig.names.push_back("cols" + suffix);
    sig.types.append(2, i64);
    if (sig.batched.back()) {
      sig.names.push_back("batch" + suffix);
      sig.types.push_back(i64);
    }
  }
  // A tensor of a channels-first group has a column stride instead.
  auto addStrides = [&](const llvm::SmallSet<unsigned, 8> &rowSet,
                        const llvm::SmallSet<unsigned, 8> &colSet, unsigned n,
                        StringRef prefix, DenseMap<unsigned, unsigned> &into) {
    for (unsigned i = 0; i < n; ++i)
      if (rowSet.contains(i) || colSet.contains(i)) {
        into[i] = sig.types.size();
        sig.names.push_back((prefix + Twine(i) +
                             (rowSet.contains(i) ? "_row_stride"
                                                 : "_col_stride"))
                                .str());
        sig.types.push_back(i64);
      }
  };
  addStrides(strided, colStrided, sig.numIn, "arg", sig.strideOfArg);
  addStrides(stridedRes, colStridedRes, sig.numOut, "res",
             sig.strideOfResult);
  sig.names.push_back("stream");
  sig.types.push_back(ptr);
  return sig;
}

/// The C declaration of the launcher, with the function's types as docs.
void LauncherBuilder::writeDeclaration(func::FuncOp fn,
                                       const LauncherSignature &sig,
                                       llvm::raw_ostream &hdr) {
  FunctionType type = fn.getFunctionType();
  hdr << "/* @" << fn.getSymName() << ": device pointers\n";
  for (auto [i, t] : llvm::enumerate(type.getInputs()))
    hdr << " *   arg" << i << ": " << typeString(t) << "\n";
  for (auto [i, t] : llvm::enumerate(type.getResults()))
    hdr << " *   res" << i << ": " << typeString(t) << " (written)\n";
  hdr << (sig.perGroup
              ? " * rowsG, colsG: the domain of group G (in order).\n"
              : "")
      << " * rows = product of the leading dims, cols = the last dim;"
      << " *_row_stride in elements (>= cols).\n"
      << (llvm::is_contained(sig.batched, true)
              ? " * Batched rows: batch = product of the batch dims (the "
                "leading dims of the\n * [batch..., cols] column tensors); "
                "rows is a multiple of it.\n"
              : "")
      << (sig.channelsFirst
              ? " * Channels-first (N not the last dim): rows = product of "
                "the other dims,\n * cols = N, *_col_stride = product of the "
                "dims after N (contiguous tensors).\n"
              : "")
      << " * Returns 0 or a normrt_status; normrt_last_error() says why. */\n"
      << "int " << fn.getSymName() << "(";
  unsigned pointers = sig.numIn + sig.numOut;
  for (auto [i, n] : llvm::enumerate(sig.names))
    hdr << (i ? ", " : "")
        << (i < sig.numIn                          ? "const void *"
            : i < pointers || i + 1 == sig.names.size() ? "void *"
                                                         : "int64_t ")
        << n;
  hdr << ");\n\n";
}

/// Each group's kernel operands, from the launcher's block arguments.
std::vector<GroupLaunchOperands>
LauncherBuilder::operands(ArrayRef<GroupParams> groups,
                          const LauncherSignature &sig, Block *entry) {
  auto arg = [&](unsigned i) { return entry->getArgument(i); };
  auto values = [&](ArrayRef<Param> ps) {
    SmallVector<LaunchValue> out;
    for (const Param &p : ps) {
      unsigned i = p.kind == Param::Argument ? p.index : sig.numIn + p.index;
      out.push_back({arg(i), sig.names[i], p.elementBytes});
    }
    return out;
  };
  auto stride = [&](unsigned param) -> LaunchValue {
    return {arg(param), sig.names[param], 8};
  };
  std::vector<GroupLaunchOperands> all(groups.size());
  for (auto [g, group] : llvm::enumerate(groups)) {
    GroupLaunchOperands &o = all[g];
    o.op = group.op;
    o.fullIn = values(group.fullIn);
    o.rowIn = values(group.rowIn);
    o.colIn = values(group.colIn);
    o.fullOut = values(group.fullOut);
    o.scalars = values(group.scalars);
    o.initIn = values(group.initIn);
    o.colOut = values(group.colOut);
    for (const Param &p : group.fullIn)
      o.stridesIn.push_back(stride(sig.strideOfArg.lookup(p.index)));
    for (const Param &p : group.fullOut)
      o.stridesOut.push_back(stride(sig.strideOfResult.lookup(p.index)));
    unsigned d = sig.perGroup ? g : 0;
    o.rows = arg(sig.rowsParam[d]);
    o.cols = arg(sig.rowsParam[d] + 1);
    if (sig.batched[d])
      o.batch = arg(sig.rowsParam[d] + 2);
  }
  return all;
}

/// The launcher's body: one launch sequence, every domain checked before
/// the driver is touched, then each group's launches.
void LauncherBuilder::body(StringRef name, ArrayRef<GroupParams> groups,
                           const LauncherSignature &sig,
                           ArrayRef<GroupLaunchOperands> ops, Block *entry) {
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  Location loc = entry->getParentOp()->getLoc();
  HostLaunchBuilder host(b, loc, module);
  Value stream = entry->getArguments().back();
  host.begin(stream);
  for (unsigned d = 0; d < sig.numDomains; ++d) {
    SmallVector<LaunchValue> strides;
    llvm::SmallSet<std::string, 8> seen;
    for (unsigned g = 0; g < groups.size(); ++g)
      if (!sig.perGroup || g == d)
        for (const LaunchValue &s :
             llvm::concat<const LaunchValue>(ops[g].stridesIn,
                                             ops[g].stridesOut))
          if (sig.perGroup || seen.insert(s.name).second)
            strides.push_back(s);
    // In parameter order (arguments' strides, then results').
    llvm::stable_sort(strides, [](const LaunchValue &x, const LaunchValue &y) {
      return cast<BlockArgument>(x.value).getArgNumber() <
             cast<BlockArgument>(y.value).getArgNumber();
    });
    MixedReductionOp op = groups[d].op;
    std::string suffix = sig.perGroup ? std::to_string(d) : "";
    // A slab domain's op splits C into [G, C/G]: its tensors' last dim is
    // not the op's (checkSlabs).
    if (std::optional<SlabDomain> slab = op.getSlabDomain())
      host.checkSlabs(name, op.getDomainShape(), *slab, ops[d].rows,
                      ops[d].cols, ops[d].batch, suffix);
    else
      host.checkDomain(name, op.getDomainShape(), op.getNDimIndex(),
                       ops[d].rows, ops[d].cols, suffix, strides);
    if (sig.batched[d])
      host.checkBatch(
          name,
          op.getDomainShape().take_front(compile_detail::batchParamRank(op)),
          ops[d].rows, ops[d].batch, suffix);
    if (op.getSlabDomain())
      host.checkContiguous(name, ops[d].cols, strides);
  }
  Value sms = host.smCount();
  for (auto [group, o] : llvm::zip(groups, ops)) {
    // Batched rows: the kernels take the rows of one sample. Slabs: the
    // slabs and a slab's elements.
    GroupLaunchOperands sample = o;
    MixedReductionOp op = group.op;
    if (std::optional<SlabDomain> slab = op.getSlabDomain()) {
      std::tie(sample.rows, sample.cols) =
          host.slabsOf(o.rows, o.cols, o.batch, *slab);
      sample.batch = Value();
    } else if (o.batch) {
      sample.rows = host.rowsPerSample(o.rows, o.batch);
    }
    host.launchGroup(name, group.plan, sample, sms, stream);
  }
  func::ReturnOp::create(b, loc, host.end(stream, /*printFailure=*/false));
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
  LauncherSignature sig = signature(fn, groups);
  writeDeclaration(fn, sig, hdr);
  // The launcher, in place of the function.
  OpBuilder b(fn);
  MLIRContext *ctx = module.getContext();
  auto launcher = func::FuncOp::create(
      b, fn.getLoc(), fn.getSymName(),
      FunctionType::get(ctx, sig.types, IntegerType::get(ctx, 32)));
  Block *entry = launcher.addEntryBlock();
  std::vector<GroupLaunchOperands> groupOps = operands(groups, sig, entry);
  body(fn.getSymName(), groups, sig, groupOps, entry);
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
