//===- Launcher.cpp - Generated C launchers for compiled norm kernels -----===//
//
// Part of norm-opt.
//
// One C function per input function. Its ABI (documented in docs/compile.md
// and in the generated header):
//
//   int NAME(const void *arg0, ..., void *res0, ..., int64_t rows,
//            int64_t cols, int64_t <argI|resJ>_row_stride ...,
//            void *stream);
//
// `argI` / `resJ` are device pointers for the function's arguments and
// results in order; rows is the product of the leading dims, cols the
// trailing dim; one row stride (in elements) per [rows, cols] tensor;
// stream is a CUstream (NULL: the legacy default stream). It returns 0 or a
// normrt_status, with the message in normrt_last_error().
//
// MLIR's own host lowering (gpu-to-llvm) would need the upstream CUDA
// runtime wrappers, which Debian does not ship, and creates its own
// streams; a generated launcher over the project's runtime launches on the
// caller's stream and checks shapes and alignment first.
//
//===----------------------------------------------------------------------===//

#include "FunctionOperands.h"

#include "norm/Compile/Compile.h"
#include "norm/Conversion/NormToGPU.h"
#include "norm/Conversion/NormToGPU/KernelNames.h"
#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::norm;

namespace {

using compile_detail::argumentOf;
using compile_detail::resultOf;
using compile_detail::typeString;

/// The kernels of one plan (the op's own or a resident tier's) and how to
/// launch them.
struct KernelLaunch {
  std::string prefix;      // main kernels: prefix + the suffixes
  std::string finalKernel; // the two-launch path's final kernel
  int64_t block = 0, rowsPerCTA = 1, dynamicSharedBytes = 0;
  int64_t finalThreads = 512;
  bool combineInCTA = false, singleLaunch = false;
  int64_t columnGroups = 0; // looped: the fewest programs per row; else 0
  int64_t splitColumnGroups = 0, splitSharedBytes = 0; // the _split kernels
  int64_t tierCols = 0; // a resident tier: the largest N it takes
  int64_t clusterCTAs = 1; // CTAs of a cluster per row (the kernels' shape)
  // A `_main` kernel: the vector kernel of 16-byte aligned rows (not for a
  // static N that is not a multiple of the vector).
  bool alignedKernel = false;
  // A `_main_peel` kernel: the vector kernel of rows at any phase, where
  // `vec_peel` holds (not `vec`); its programs' row stride keeps every row
  // of a program at one phase.
  bool peel = false;
};

/// Everything the launcher of one fused op needs, in kernel-parameter order.
struct OpLaunch {
  MixedReductionOp op;
  int64_t vector = 1, programsPerSM = 0;
  // The final kernels wait for the main kernel (griddepcontrol): launched
  // as its programmatic dependents.
  bool dependentFinal = false;
  KernelLaunch kernels;                // the plan's own
  SmallVector<KernelLaunch> tiers;     // run-time N: the resident tiers
  SmallVector<std::string> fullIn, rowIn, colIn, fullOut, stridesIn,
      stridesOut, initIn, colOut, scalars;
  SmallVector<int64_t> fullInBytes, colInBytes, fullOutBytes, scalarBytes;
};

class LauncherWriter {
public:
  LauncherWriter(ModuleOp module, StringRef image, StringRef headerName)
      : module(module), image(image), headerName(headerName) {}
  LogicalResult write(std::string &source, std::string &header);

private:
  LogicalResult function(func::FuncOp fn, llvm::raw_ostream &src,
                         llvm::raw_ostream &hdr);
  void writeLaunch(llvm::raw_ostream &out, const OpLaunch &l,
                   const KernelLaunch &k, StringRef indent);
  LogicalResult describe(func::FuncOp fn, MixedReductionOp op,
                         llvm::SmallSet<unsigned, 8> &strided,
                         llvm::SmallSet<unsigned, 8> &stridedResults,
                         OpLaunch &launch);

  ModuleOp module;
  StringRef image, headerName;
};

LogicalResult LauncherWriter::describe(func::FuncOp fn, MixedReductionOp op,
                                       llvm::SmallSet<unsigned, 8> &strided,
                                       llvm::SmallSet<unsigned, 8> &stridedRes,
                                       OpLaunch &launch) {
  auto planAttr = op->getAttrOfType<KernelPlanAttr>(kKernelPlanAttrName);
  if (!planAttr)
    return op.emitError("compile: fused op has no kernels "
                        "(--convert-norm-to-gpu did not run)");
  launch.op = op;
  launch.vector = planAttr.getVector();
  launch.programsPerSM = planAttr.getProgramsPerSm();
  launch.dependentFinal = planAttr.getDependentLaunch();
  StringRef prefix = planAttr.getKernel();
  KernelLaunch &own = launch.kernels;
  own.prefix = prefix.str();
  own.block = planAttr.getBlock();
  own.rowsPerCTA = planAttr.getRowsPerCta();
  own.dynamicSharedBytes = planAttr.getDynamicSharedBytes();
  own.combineInCTA = planAttr.getCombineInCta().getValue();
  own.singleLaunch = planAttr.getSingleLaunch().getValue();
  own.finalThreads = planAttr.getFinalThreads();
  own.finalKernel =
      finalKernelName(prefix, own.finalThreads, own.finalThreads);
  own.columnGroups = planAttr.getColumnGroups();
  own.splitColumnGroups = planAttr.getSplitColumnGroups();
  own.splitSharedBytes = planAttr.getSplitSharedBytes();
  own.clusterCTAs = planAttr.getClusterCtas();
  own.peel = planAttr.getPeel();
  int64_t staticCols = op.getDomainShape().back();
  own.alignedKernel = launch.vector > 1 &&
                      (ShapedType::isDynamic(staticCols) ||
                       staticCols % launch.vector == 0);
  if (ArrayAttr tiers = planAttr.getTiers()) {
    if (!ShapedType::isDynamic(op.getDomainShape().back()))
      return op.emitError("compile: resident tiers in the kernel plan of an "
                          "op with a static N");
    for (auto tier : tiers.getAsRange<ResidentTierAttr>()) {
      KernelLaunch k;
      k.prefix = residentTierPrefix(prefix, tier.getCols());
      k.block = tier.getBlock();
      k.rowsPerCTA = tier.getRowsPerCta();
      k.dynamicSharedBytes = tier.getDynamicSharedBytes();
      k.combineInCTA = tier.getCombineInCta().getValue();
      k.singleLaunch = tier.getSingleLaunch().getValue();
      k.finalThreads = tier.getFinalThreads();
      k.finalKernel =
          finalKernelName(prefix, k.finalThreads, own.finalThreads);
      k.tierCols = tier.getCols();
      k.peel = tier.getPeel();
      k.alignedKernel = launch.vector > 1;
      launch.tiers.push_back(k);
    }
  }

  auto needArg = [&](Value v, StringRef what) -> FailureOr<unsigned> {
    if (std::optional<unsigned> a = argumentOf(v))
      return *a;
    return op.emitError() << "compile: the " << what << " operand of the "
                          << "fused op is not an argument of @"
                          << fn.getSymName()
                          << "; compile mode needs every input to be one";
  };
  for (Value v : op.getFull()) {
    FailureOr<unsigned> a = needArg(v, "full");
    if (failed(a))
      return failure();
    launch.fullIn.push_back("arg" + std::to_string(*a));
    launch.stridesIn.push_back("arg" + std::to_string(*a) + "_row_stride");
    launch.fullInBytes.push_back(elementBytes(v.getType()));
    strided.insert(*a);
  }
  for (Value v : op.getRow()) {
    FailureOr<unsigned> a = needArg(v, "row");
    if (failed(a))
      return failure();
    launch.rowIn.push_back("arg" + std::to_string(*a));
  }
  for (Value v : op.getCol()) {
    FailureOr<unsigned> a = needArg(v, "column");
    if (failed(a))
      return failure();
    launch.colIn.push_back("arg" + std::to_string(*a));
    launch.colInBytes.push_back(elementBytes(v.getType()));
  }
  for (tensor::ExtractOp e : getCapturedScalars(op)) {
    FailureOr<unsigned> a = needArg(e.getTensor(), "scalar (0-d tensor)");
    if (failed(a))
      return failure();
    launch.scalars.push_back("arg" + std::to_string(*a));
    launch.scalarBytes.push_back(elementBytes(e.getType()));
  }
  for (Value v : op.getColInit()) {
    if (getConstantColumnInit(v))
      continue;
    FailureOr<unsigned> a =
        needArg(compile_detail::columnInitSource(v), "column initial value");
    if (failed(a))
      return failure();
    launch.initIn.push_back("arg" + std::to_string(*a));
  }
  for (Value v : op.getFullResults()) {
    std::optional<unsigned> r = resultOf(v);
    if (!r)
      return op.emitError() << "compile: a full result of the fused op is "
                               "not returned by @"
                            << fn.getSymName() << " (exactly once)";
    launch.fullOut.push_back("res" + std::to_string(*r));
    launch.stridesOut.push_back("res" + std::to_string(*r) + "_row_stride");
    launch.fullOutBytes.push_back(elementBytes(v.getType()));
    stridedRes.insert(*r);
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
    launch.colOut.push_back("res" + std::to_string(*r));
  }
  return success();
}

/// The checks of one domain's rows and cols (parameters `rows<suffix>`,
/// `cols<suffix>`) and of the row strides of its tensors, against the
/// static type.
void writeDomainChecks(llvm::raw_ostream &src, StringRef name,
                       ArrayRef<int64_t> domain, StringRef suffix,
                       ArrayRef<std::string> strides, StringRef indent) {
  std::string rows = ("rows" + suffix).str(), cols = ("cols" + suffix).str();
  auto report = [&](const Twine &message) {
    src << indent << "  return normrt_report(NORMRT_ERROR_OUT_OF_RANGE, \""
        << name << ": " << message << "\");\n";
  };
  int64_t staticRows = 1;
  for (int64_t d : domain.drop_back())
    staticRows = ShapedType::isDynamic(d) || staticRows < 0 ? -1
                                                            : staticRows * d;
  src << indent << "if (" << rows << " < 0 || " << cols << " < 1)\n";
  report(rows + " must be >= 0 and " + cols + " >= 1");
  if (staticRows >= 0) {
    src << indent << "if (" << rows << " != " << staticRows << ")\n";
    report(rows + " must be " + Twine(staticRows) + " (static shape)");
  }
  if (!ShapedType::isDynamic(domain.back())) {
    src << indent << "if (" << cols << " != " << domain.back() << ")\n";
    report(cols + " must be " + Twine(domain.back()) + " (static shape)");
  }
  for (const std::string &s : strides) {
    src << indent << "if (" << s << " < " << cols << ")\n";
    report(s + " must be >= " + cols);
  }
}

/// The launches of one plan's kernels (`k`): the main kernel (vector or
/// scalar, `vec`; the split kernels for few rows), one cooperative launch
/// where the kernel can finish the column results itself and every CTA
/// fits, else the final kernel after it. Every line starts with `indent`.
void LauncherWriter::writeLaunch(llvm::raw_ostream &out, const OpLaunch &l,
                                 const KernelLaunch &k, StringRef indent) {
  std::string text;
  llvm::raw_string_ostream src(text);
  MixedReductionOp op = l.op; // its accessors are not const
  int64_t numCol = op.getColResults().size();
  int64_t R = k.rowsPerCTA;
  const bool anyTail = numCol > 0 && k.singleLaunch;
  // The main kernel: the vector kernel of aligned rows, the peeled one,
  // else the scalar one.
  std::string mainKernel;
  {
    llvm::raw_string_ostream name(mainKernel);
    if (k.alignedKernel)
      name << "vec ? \"" << k.prefix << kMainKernelSuffix << "\" : ";
    if (k.peel)
      name << "vec_peel ? \"" << k.prefix << kMainPeelKernelSuffix
           << "\" : ";
    name << "\"" << k.prefix << kMainScalarKernelSuffix << "\"";
  }
  src << "void *fn;\n"
      << "unsigned smem = " << k.dynamicSharedBytes << ";\n";
  if (anyTail)
    src << "int single = " << (k.singleLaunch ? 1 : 0)
        << "; /* the kernel can finish the columns itself */\n";
  if (k.columnGroups > 0)
    src << "int64_t cg = " << k.columnGroups << ";\n";
  if (k.splitColumnGroups > 0) {
    // Too few rows to fill the SMs: the kernels that share each row
    // among more CTAs.
    src << "int split = rows > 0 && rows * " << k.splitColumnGroups
        << " <= sms;\n"
        << "if (split) {\n"
        << "  cg = " << k.splitColumnGroups << ";\n"
        << "  smem = " << k.splitSharedBytes << ";\n"
        << (anyTail ? "  single = 0; /* the split kernels have no tail */\n"
                    : "")
        << "}\n"
        << "if ((st = normrt_get_function(norm_image, split ? (vec ? \""
        << k.prefix << kMainSplitKernelSuffix << "\" : \"" << k.prefix
        << kMainSplitScalarKernelSuffix << "\") : " << mainKernel
        << ", &fn)) != 0) return st;\n";
  } else {
    src << "if ((st = normrt_get_function(norm_image, " << mainKernel
        << ", &fn)) != 0) return st;\n";
  }
  // A persistent grid: as many CTAs as are resident at once, unless the
  // kernel was compiled with a fixed programs-per-SM.
  if (k.clusterCTAs > 1) {
    // Clusters of C CTAs share each row and form one program; the driver
    // counts the clusters that fit at once (a cluster stays in one GPC).
    int64_t C = k.clusterCTAs;
    if (l.programsPerSM > 0)
      src << "int clusters = (int)((int64_t)sms * " << l.programsPerSM
          << " / " << C << ");\n";
    else
      src << "int clusters = 0;\n"
          << "if ((st = normrt_max_active_clusters(fn, " << k.block
          << ", smem, " << C << ", &clusters)) != 0) return st;\n";
    src << "if (clusters < 1) clusters = 1;\n"
        << "int64_t programs = rows < clusters ? rows : clusters; "
           "/* clusters: rows of the partial buffer */\n"
        << "unsigned grid = (unsigned)(programs * " << C << ");\n";
  } else if (l.programsPerSM > 0)
    src << "int per_sm = " << l.programsPerSM << ";\n";
  else
    src << "int per_sm = 0;\n"
        << "if ((st = normrt_max_active_ctas(fn, " << k.block
        << ", smem, &per_sm)) != 0) return st;\n"
        << "if (per_sm < 1) per_sm = 1;\n";
  if (k.clusterCTAs > 1) {
    // The grid is above.
  } else if (k.columnGroups > 0) {
    // Looped: cg CTAs share each row, each owning a part of the columns.
    src << "int64_t limit = (int64_t)sms * per_sm;\n"
        << "if (limit < cg) limit = cg;\n"
        << "int64_t ctas = rows * cg;\n"
        << "int64_t most = limit / cg * cg;\n"
        << "unsigned grid = (unsigned)(ctas < most ? ctas : most);\n"
        << "int64_t programs = (int64_t)grid / cg; /* rows of the "
           "partial buffer */\n";
  } else {
    src << "int64_t ctas = (rows + " << R - 1 << ") / " << R << ";\n"
        << "int64_t limit = (int64_t)sms * per_sm;\n"
        << "unsigned grid = (unsigned)(ctas < limit ? ctas : limit);\n";
    if (k.peel)
      // Programs that take more than one row: grid x R rows apart, at one
      // phase only if (grid x R x stride) % V == 0. Fewer CTAs (at most
      // V - 1), or where fewer than one such grid fits, more (launched
      // without the tail: they need not all be resident).
      src << "if (vec_peel && rows > (int64_t)grid * " << R
          << ") { /* peeled rows: one phase per program */\n"
          << "  int64_t phase = " << l.stridesIn.front() << " % "
          << l.vector << ";\n"
          << "  int64_t q = phase ? " << l.vector
          << " / (phase & -phase) : 1; /* programs: a multiple of it */\n"
          << "  int64_t m = q > " << R << " ? q / " << R << " : 1;\n"
          << "  grid = grid >= m ? grid - grid % m : (unsigned)m;\n"
          << "}\n";
    src << "int64_t programs = (int64_t)grid * " << (k.combineInCTA ? 1 : R)
        << "; /* rows of the partial buffer */\n";
  }
  src << "void *ws = NULL;\n";
  if (numCol > 0)
    src << "if (programs > 0 && (st = normrt_workspace(stream, (size_t)("
        << numCol << " * programs * cols * 4), &ws)) != 0) return st;\n";
  // One cooperative launch when the kernel can finish the column
  // results itself (grid barrier) and every CTA fits at once; else the
  // main kernel with finalize = 0, then the final kernel.
  if (numCol > 0)
    src << "int64_t finalize = 0;\n"
        << "void *barrier = NULL;\n";
  src << "if (rows > 0) {\n";
  if (anyTail)
    src << "  int coop = 0;\n"
        << "  if (single && (st = normrt_cooperative_fits(fn, grid, "
        << k.block << ", smem, &coop)) != 0) return st;\n"
        << "  if (coop && (st = normrt_grid_barrier_word(stream, "
           "&barrier)) != 0) return st;\n"
        << "  finalize = coop;\n";
  src << "  void *args[] = {";
  auto argList = [&](ArrayRef<std::string> names) {
    for (const std::string &n : names)
      src << "(void *)&" << n << ", ";
  };
  argList(l.fullIn);
  argList(l.rowIn);
  argList(l.colIn);
  argList(l.fullOut);
  src << "&ws, &rows, &cols, ";
  argList(l.stridesIn);
  argList(l.stridesOut);
  argList(l.scalars);
  if (numCol > 0) {
    src << "&barrier, ";
    argList(l.initIn);
    argList(l.colOut);
    src << "&finalize, ";
  }
  src << "NULL};\n  if ((st = ";
  if (anyTail)
    src << "finalize ? normrt_launch_cooperative(fn, grid, " << k.block
        << ", smem, stream, args) : ";
  src << "normrt_launch(fn, grid, 1, " << k.block
      << ", smem, stream, args)) != 0) return st;\n"
      << "}\n";
  if (numCol > 0) {
    src << "if (!finalize) {\n"
        << "  if ((st = normrt_get_function(norm_image, \"" << k.finalKernel
        << "\", &fn)) != 0) return st;\n"
        << "  void *final_args[] = {&ws, ";
    argList(l.initIn);
    argList(l.colOut);
    src << "&programs, &cols, NULL};\n"
        << "  if ((st = "
        << (l.dependentFinal ? "normrt_launch_dependent" : "normrt_launch")
        << "(fn, (unsigned)((cols + "
        << kFinalColumnsPerCTA - 1 << ") / " << kFinalColumnsPerCTA
        << "), 1, " << k.finalThreads
        << ", 0, stream, final_args)) != 0) return st;\n"
        << "}\n";
  }
  SmallVector<StringRef> lines;
  StringRef(text).split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (StringRef line : lines)
    out << indent << line << "\n";
}

LogicalResult LauncherWriter::function(func::FuncOp fn, llvm::raw_ostream &src,
                                       llvm::raw_ostream &hdr) {
  SmallVector<MixedReductionOp> ops;
  llvm::SmallPtrSet<Operation *, 8> epilogues;
  fn.walk([&](MixedReductionOp op) {
    ops.push_back(op);
    for (Value r : op.getColResults())
      if (linalg::GenericOp e = getColumnEpilogue(r))
        epilogues.insert(e);
    for (Value init : op.getColInit())
      if (linalg::GenericOp p = getColumnInitPrologue(init))
        epilogues.insert(p);
  });
  if (ops.empty())
    return success(); // nothing to launch: no C function
  // Every other op must be side-effect-free glue (shapes, fills, reshapes,
  // sizes the kernels recompute); what the function returns is checked
  // below.
  for (Operation &inner : fn.getBody().front()) {
    if (isa<MixedReductionOp, func::ReturnOp>(inner) || isPure(&inner) ||
        isa<tensor::EmptyOp, linalg::FillOp>(inner) ||
        epilogues.contains(&inner))
      continue;
    return inner.emitError()
           << "compile: '" << inner.getName() << "' in @" << fn.getSymName()
           << " has side effects outside any fused norm group";
  }
  // Groups of one [rows, cols] domain share the rows and cols parameters;
  // groups of several domains take a pair each (rows0, cols0, ...).
  ArrayRef<int64_t> domain = ops.front().getDomainShape();
  bool perGroup = llvm::any_of(ops, [&](MixedReductionOp op) {
    return op.getDomainShape() != domain;
  });

  llvm::SmallSet<unsigned, 8> strided, stridedRes;
  std::vector<OpLaunch> launches(ops.size());
  for (auto [op, launch] : llvm::zip(ops, launches))
    if (failed(describe(fn, op, strided, stridedRes, launch)))
      return failure();
  // Every result must come out of a kernel.
  llvm::SmallSet<std::string, 8> produced;
  for (OpLaunch &l : launches) {
    for (const std::string &r : l.fullOut)
      produced.insert(r);
    for (const std::string &r : l.colOut)
      produced.insert(r);
  }
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (produced.contains("res" + std::to_string(i)))
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

  // The signature.
  std::string name = fn.getSymName().str();
  std::string params;
  llvm::raw_string_ostream ps(params);
  std::string docs;
  llvm::raw_string_ostream ds(docs);
  std::string callArgs; // the parameters' names, to forward them
  llvm::raw_string_ostream cs(callArgs);
  FunctionType type = fn.getFunctionType();
  for (auto [i, t] : llvm::enumerate(type.getInputs())) {
    ps << "const void *arg" << i << ", ";
    cs << "arg" << i << ", ";
    ds << " *   arg" << i << ": " << typeString(t) << "\n";
  }
  for (auto [i, t] : llvm::enumerate(type.getResults())) {
    ps << "void *res" << i << ", ";
    cs << "res" << i << ", ";
    ds << " *   res" << i << ": " << typeString(t) << " (written)\n";
  }
  if (!perGroup) {
    ps << "int64_t rows, int64_t cols";
    cs << "rows, cols";
  }
  for (unsigned g = 0; perGroup && g < ops.size(); ++g) {
    ps << (g ? ", " : "") << "int64_t rows" << g << ", int64_t cols" << g;
    cs << (g ? ", " : "") << "rows" << g << ", cols" << g;
  }
  SmallVector<std::string> strides;
  for (unsigned i = 0; i < type.getNumInputs(); ++i)
    if (strided.contains(i))
      strides.push_back("arg" + std::to_string(i) + "_row_stride");
  for (unsigned i = 0; i < type.getNumResults(); ++i)
    if (stridedRes.contains(i))
      strides.push_back("res" + std::to_string(i) + "_row_stride");
  for (const std::string &s : strides) {
    ps << ", int64_t " << s;
    cs << ", " << s;
  }
  ps << ", void *stream";
  cs << ", stream";

  hdr << "/* @" << name << ": device pointers\n"
      << docs
      << (perGroup ? " * rowsG, colsG: the domain of group G (in order).\n"
                   : "")
      << " * rows = product of the leading dims, cols = the last dim;"
      << " *_row_stride in elements (>= cols).\n"
      << " * Returns 0 or a normrt_status; normrt_last_error() says why. */\n"
      << "int " << name << "(" << params << ");\n\n";

  // The launches go in a static helper; the exported function ends every
  // call with normrt_scratch_done, which frees (in the graph) the scratch a
  // CUDA graph capture took for it, also when a launch failed.
  src << "static int " << name << "_launches(" << params << ") {\n"
      << "  int st;\n  int sms;\n";
  // Every domain is checked before the driver is touched.
  if (!perGroup)
    writeDomainChecks(src, name, domain, "", strides, "  ");
  for (unsigned g = 0; perGroup && g < launches.size(); ++g) {
    SmallVector<std::string> own(launches[g].stridesIn);
    llvm::append_range(own, launches[g].stridesOut);
    writeDomainChecks(src, name, launches[g].op.getDomainShape(),
                      std::to_string(g), own, "  ");
  }
  src << "  if ((st = normrt_ensure_context()) != 0) return st;\n"
      << "  if ((st = normrt_sm_count(&sms)) != 0) return st;\n";

  for (unsigned g = 0; g < launches.size(); ++g) {
    OpLaunch &l = launches[g];
    src << "  {\n";
    if (perGroup) // this group's domain, under the names the launches use
      src << "    int64_t rows = rows" << g << ", cols = cols" << g << ";\n";
    // Natural alignment is required; 16-byte alignment picks the vector
    // kernel.
    auto ptrs = [&](ArrayRef<std::string> names, ArrayRef<int64_t> bytes,
                    bool vectorCheck) {
      for (auto [n, b] : llvm::zip(names, bytes)) {
        if (!vectorCheck)
          src << "    if ((st = normrt_check_aligned(" << n << ", " << b
              << ", \"" << name << ": " << n << "\")) != 0) return st;\n";
        else
          src << "    vec = vec && ((uintptr_t)" << n << " % "
              << b * l.vector << ") == 0;\n";
      }
    };
    src << "    int vec = " << (l.vector > 1 ? "1" : "0") << ";\n";
    ptrs(l.fullIn, l.fullInBytes, false);
    ptrs(l.fullOut, l.fullOutBytes, false);
    ptrs(l.colIn, l.colInBytes, false);
    ptrs(l.scalars, l.scalarBytes, false);
    if (l.vector > 1) {
      ptrs(l.fullIn, l.fullInBytes, true);
      ptrs(l.fullOut, l.fullOutBytes, true);
      ptrs(l.colIn, l.colInBytes, true);
      // Peeled rows: any phase, but the same for every input and result
      // (strides that agree modulo V).
      bool anyPeel =
          l.kernels.peel ||
          llvm::any_of(l.tiers, [](const KernelLaunch &t) { return t.peel; });
      if (anyPeel) {
        src << "    int vec_any = vec";
        for (const std::string &s :
             llvm::concat<const std::string>(
                 ArrayRef(l.stridesIn).drop_front(), l.stridesOut))
          src << " && (" << s << " - " << l.stridesIn.front() << ") % "
              << l.vector << " == 0";
        src << ";\n";
      }
      src << "    vec = vec && cols % " << l.vector << " == 0";
      for (const std::string &s : l.stridesIn)
        src << " && " << s << " % " << l.vector << " == 0";
      for (const std::string &s : l.stridesOut)
        src << " && " << s << " % " << l.vector << " == 0";
      src << ";\n";
      if (anyPeel)
        src << "    int vec_peel = !vec && vec_any;\n";
    }
    // A run-time N: the smallest resident tier that holds it, else the
    // plan's own (looped) kernels. Each branch launches its kernels with
    // their own shared memory, block and final kernel.
    if (l.tiers.empty()) {
      writeLaunch(src, l, l.kernels, "    ");
    } else {
      for (auto [t, tier] : llvm::enumerate(l.tiers)) {
        src << (t == 0 ? "    if" : " else if") << " (cols <= "
            << tier.tierCols << ") {\n";
        writeLaunch(src, l, tier, "      ");
        src << "    }";
      }
      src << " else {\n";
      writeLaunch(src, l, l.kernels, "      ");
      src << "    }\n";
    }
    src << "  }\n";
  }
  src << "  return 0;\n}\n\n"
      << "int " << name << "(" << params << ") {\n"
      << "  int st = " << name << "_launches(" << callArgs << ");\n"
      << "  int done = normrt_scratch_done(stream);\n"
      << "  return st != 0 ? st : done;\n}\n\n";
  return success();
}

LogicalResult LauncherWriter::write(std::string &source, std::string &header) {
  llvm::raw_string_ostream src(source), hdr(header);
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

  src << "/* Generated by norm-opt compile: host launchers. */\n"
      << "#include <stddef.h>\n#include <stdint.h>\n\n"
      << "/* The norm-opt runtime (libnorm_runtime_static.a). */\n"
      << "enum { NORMRT_ERROR_OUT_OF_RANGE = 5 };\n"
      << "int normrt_report(int status, const char *message);\n"
      << "int normrt_ensure_context(void);\n"
      << "int normrt_sm_count(int *out);\n"
      << "int normrt_get_function(const void *image, const char *name, "
         "void **out);\n"
      << "int normrt_workspace(void *stream, size_t bytes, void **out);\n"
      << "int normrt_launch(void *fn, unsigned gx, unsigned gy, unsigned bx, "
         "unsigned smem, void *stream, void **args);\n"
      << "int normrt_launch_dependent(void *fn, unsigned gx, unsigned gy, "
         "unsigned bx, unsigned smem, void *stream, void **args);\n"
      << "int normrt_check_aligned(const void *p, size_t align, "
         "const char *what);\n"
      << "int normrt_max_active_ctas(void *fn, unsigned block, "
         "unsigned smem, int *out);\n"
      << "int normrt_max_active_clusters(void *fn, unsigned block, "
         "unsigned smem, unsigned cluster, int *out);\n"
      << "int normrt_cooperative_fits(void *fn, unsigned grid, unsigned block, "
         "unsigned smem, int *out);\n"
      << "int normrt_grid_barrier_word(void *stream, void **out);\n"
      << "int normrt_launch_cooperative(void *fn, unsigned grid, unsigned "
         "block, unsigned smem, void *stream, void **args);\n"
      << "int normrt_scratch_done(void *stream);\n\n"
      ;
  if (image.empty()) {
    // Assembled beside this source (compile mode: .incbin of the cubin).
    src << "extern const unsigned char norm_image[] "
           "__attribute__((visibility(\"hidden\")));\n\n";
  } else {
    src << "static const unsigned char norm_image[] = {";
    for (size_t i = 0; i < image.size(); ++i) {
      if (i % 16 == 0)
        src << "\n ";
      src << " " << unsigned(static_cast<unsigned char>(image[i])) << ",";
    }
    src << " 0};\n\n";
  }

  for (func::FuncOp fn : module.getOps<func::FuncOp>())
    if (failed(function(fn, src, hdr)))
      return failure();
  hdr << "#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
  return success();
}

} // namespace

LogicalResult mlir::norm::generateLauncher(ModuleOp module, StringRef image,
                                           StringRef headerName,
                                           std::string &source,
                                           std::string &header) {
  return LauncherWriter(module, image, headerName).write(source, header);
}
