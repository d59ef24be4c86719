//===- Signature.cpp - The JSON signature of a compiled library -----------===//
//
// Part of norm-opt. The parameters of a generated launcher (Launcher.cpp,
// docs/compile.md) are: one pointer per function argument, then per result,
// rows, cols (rows0, cols0, rows1, ... when its groups have different
// domains or N dims: "domains" lists them, each tensor names its "domain"),
// then batch where the domain is batched rows ("batch_rank" leading dims),
// one row (or column) stride per full argument then result (index order),
// the stream. Each tensor's layout follows from the fused op's operand it
// feeds or result it is:
//   "rows_by_cols"  full operands/results: [rows..., cols], a row stride,
//                   unit stride along cols
//   "channels_first" full operands/results of a group whose N is not the
//                   last dim: contiguous [outer..., cols, inner...], rows =
//                   outer x inner, a column stride = the product of inner
//   "rows"          row operands (mean, rstd): contiguous [rows...]
//   "cols"          column operands, initial values and results: [cols]
//   "batch_cols"    the same of batched rows: contiguous [batch..., cols]
//   "slab_rows"     row operands of a slab domain (GroupNorm's mean, rstd
//                   [N, G]): contiguous, led by the batch dims
//   "slab_cols"     column operands, initial values and results of a slab
//                   domain ([C] or [G, C/G]): contiguous, static
//   "scalar"        a 0-d tensor read by a payload
//
//===----------------------------------------------------------------------===//

#include "norm/Compile/Signature.h"

#include "FunctionOperands.h"

#include "norm/Conversion/NormToGPU.h"
#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::norm;

namespace {

/// Per "argN" / "resN" of one function: its layout and the group whose
/// domain it follows; and the number of domain parameter pairs (1 when
/// every group has one [rows, cols] domain, else one pair per group).
/// Empty when the function has no fused op (no launcher).
struct Layouts {
  llvm::StringMap<StringRef> layout;
  llvm::StringMap<unsigned> domain;
  unsigned domains = 1;
  SmallVector<unsigned> nDims; // the dim that is N, per domain
  SmallVector<int64_t> batchRanks; // batched rows' batch dims, per domain
};

FailureOr<Layouts> layouts(func::FuncOp fn) {
  Layouts result;
  llvm::StringMap<StringRef> &layout = result.layout;
  bool any = false;
  unsigned group = 0;
  MixedReductionOp first;
  bool perGroup = false;
  // A multi-axis group other than batched rows has no kernels (nor a
  // launcher layout) yet.
  WalkResult multiAxis = fn.walk([&](MixedReductionOp op) {
    return op.isMultiAxis() && failed(checkSupportedOnGpu(op))
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  if (multiAxis.wasInterrupted())
    return failure();
  fn.walk([&](MixedReductionOp op) {
    if (!first)
      first = op;
    perGroup |= !compile_detail::sameDomain(op, first);
  });
  auto note = [&](std::optional<unsigned> index, StringRef prefix,
                  StringRef kind, Operation *op) -> LogicalResult {
    if (!index)
      return op->emitError() << "compile: an operand or result of a fused op "
                                "is not a parameter of @"
                             << fn.getSymName();
    std::string name = (prefix + Twine(*index)).str();
    layout[name] = kind;
    result.domain.try_emplace(name, perGroup ? group : 0);
    return success();
  };
  WalkResult walk = fn.walk([&](MixedReductionOp op) {
    any = true;
    using compile_detail::argumentOf;
    using compile_detail::resultOf;
    StringRef full = op.isRowMajor() ? "rows_by_cols" : "channels_first";
    bool slabs = op.getSlabDomain().has_value();
    StringRef cols = slabs                   ? "slab_cols"
                     : op.getBatchRank() > 0 ? "batch_cols"
                                             : "cols";
    StringRef rows = slabs ? "slab_rows" : "rows";
    for (Value v : op.getFull())
      if (failed(note(argumentOf(v), "arg", full, op)))
        return WalkResult::interrupt();
    for (Value v : op.getRow())
      if (failed(note(argumentOf(v), "arg", rows, op)))
        return WalkResult::interrupt();
    for (Value v : op.getCol())
      if (failed(note(argumentOf(v), "arg", cols, op)))
        return WalkResult::interrupt();
    for (tensor::ExtractOp e : getCapturedScalars(op))
      if (failed(note(argumentOf(e.getTensor()), "arg", "scalar", op)))
        return WalkResult::interrupt();
    for (Value v : op.getColInit())
      if (!getConstantColumnInit(v) &&
          failed(note(argumentOf(compile_detail::columnInitSource(v)), "arg",
                      cols, op)))
        return WalkResult::interrupt();
    for (Value v : op.getFullResults())
      if (failed(note(resultOf(v), "res", full, op)))
        return WalkResult::interrupt();
    for (Value v : op.getColResults()) {
      Value out = v;
      if (linalg::GenericOp e = getColumnEpilogue(v))
        out = e->getResult(0);
      if (failed(note(resultOf(out), "res", cols, op)))
        return WalkResult::interrupt();
    }
    if (perGroup || result.nDims.empty()) {
      result.nDims.push_back(op.getNDimIndex());
      result.batchRanks.push_back(compile_detail::batchParamRank(op));
    }
    ++group;
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (!any)
    layout.clear();
  result.domains = perGroup ? group : 1;
  return result;
}

void tensorEntry(llvm::json::OStream &j, StringRef name, StringRef role,
                 unsigned index, Type type, StringRef layout,
                 std::optional<unsigned> domain) {
  j.object([&] {
    j.attribute("name", name);
    j.attribute("role", role);
    j.attribute("index", index);
    j.attribute("type", compile_detail::typeString(type));
    auto shaped = dyn_cast<RankedTensorType>(type);
    Type element = shaped ? shaped.getElementType() : type;
    j.attribute("dtype", compile_detail::typeString(element));
    j.attribute("element_bytes", elementBytes(element));
    if (shaped)
      j.attributeArray("shape", [&] {
        for (int64_t d : shaped.getShape())
          j.value(ShapedType::isDynamic(d) ? int64_t(-1) : d);
      });
    j.attribute("layout", layout.empty() ? StringRef("unused") : layout);
    if (layout == "rows_by_cols")
      j.attribute("row_stride", (name + "_row_stride").str());
    if (layout == "channels_first")
      j.attribute("col_stride", (name + "_col_stride").str());
    if (domain)
      j.attribute("domain", *domain);
  });
}

} // namespace

FailureOr<std::string>
mlir::norm::librarySignatureJSON(ModuleOp module, const SignatureInfo &info) {
  // Every function with a launcher and its layouts, before writing anything.
  SmallVector<std::pair<func::FuncOp, Layouts>> functions;
  for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
    FailureOr<Layouts> layout = layouts(fn);
    if (failed(layout))
      return failure();
    if (!layout->layout.empty())
      functions.emplace_back(fn, std::move(*layout));
  }

  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream j(os, /*IndentSize=*/1);
  j.object([&] {
    j.attribute("format", "norm-opt-library");
    j.attribute("version", 1);
    j.attribute("library", info.library);
    j.attribute("header", info.header);
    j.attribute("chip", info.chip);
    j.attribute("features", info.features);
    j.attributeArray("functions", [&] {
      for (auto &[fn, all] : functions) {
        FunctionType type = fn.getFunctionType();
        const Layouts &layouts = all;
        auto layoutOf = [&](const std::string &name) {
          auto it = layouts.layout.find(name);
          return it == layouts.layout.end() ? StringRef() : it->second;
        };
        auto domainOf = [&](const std::string &name) {
          auto it = layouts.domain.find(name);
          return it == layouts.domain.end() ? std::optional<unsigned>()
                                            : std::optional(it->second);
        };
        // The names of the domain parameters.
        auto domainParam = [&](StringRef what, unsigned d) {
          return layouts.domains == 1 ? what.str()
                                      : what.str() + std::to_string(d);
        };
        auto strided = [&](StringRef prefix, unsigned count) {
          for (unsigned i = 0; i < count; ++i) {
            std::string name = prefix.str() + std::to_string(i);
            StringRef layout = layoutOf(name);
            if (layout == "rows_by_cols")
              j.value(name + "_row_stride");
            else if (layout == "channels_first")
              j.value(name + "_col_stride");
          }
        };
        j.object([&] {
          j.attribute("name", fn.getSymName());
          j.attributeArray("tensors", [&] {
            for (auto [i, t] : llvm::enumerate(type.getInputs())) {
              std::string n = "arg" + std::to_string(i);
              tensorEntry(j, n, "input", i, t, layoutOf(n), domainOf(n));
            }
            for (auto [i, t] : llvm::enumerate(type.getResults())) {
              std::string n = "res" + std::to_string(i);
              tensorEntry(j, n, "output", i, t, layoutOf(n), domainOf(n));
            }
          });
          // The [rows, cols] domains: one, or one per group in order.
          j.attributeArray("domains", [&] {
            for (unsigned d = 0; d < layouts.domains; ++d)
              j.object([&] {
                j.attribute("rows", domainParam("rows", d));
                j.attribute("cols", domainParam("cols", d));
                j.attribute("n_dim", layouts.nDims[d]);
                if (layouts.batchRanks[d] > 0) {
                  j.attribute("batch", domainParam("batch", d));
                  j.attribute("batch_rank", layouts.batchRanks[d]);
                }
              });
          });
          // The C parameters in order (Launcher.cpp).
          j.attributeArray("params", [&] {
            for (unsigned i = 0; i < type.getNumInputs(); ++i)
              j.value("arg" + std::to_string(i));
            for (unsigned i = 0; i < type.getNumResults(); ++i)
              j.value("res" + std::to_string(i));
            for (unsigned d = 0; d < layouts.domains; ++d) {
              j.value(domainParam("rows", d));
              j.value(domainParam("cols", d));
              if (layouts.batchRanks[d] > 0)
                j.value(domainParam("batch", d));
            }
            strided("arg", type.getNumInputs());
            strided("res", type.getNumResults());
            j.value("stream");
          });
        });
      }
    });
  });
  os << "\n";
  return text;
}
