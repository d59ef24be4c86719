#!/usr/bin/env python3
#===- gen_plan_fields.py - The kernel plan's fields from NormAttrs.td -----===#
#
# Part of norm-opt. Reads `llvm-tblgen --dump-json` of NormAttrs.td and
# writes KernelPlanFields.h.inc, the C++ side of the kernel plan's fields,
# whose one definition is the parameter lists of #norm.kernel_plan and
# #norm.resident_tier (the PlanField, DefaultPlanField and DerivedPlanField
# parameters; see NormAttrs.td):
#
#   GEN_KERNEL_PLAN_FIELDS       the struct KernelPlanFields: a member per
#                                field parameter of either attribute, and
#                                firstDifferentField (a comparison);
#   GEN_KERNEL_PLAN_CONVERSIONS  for each attribute, `get<Attr>` (the
#                                attribute of a plan; the parameters that
#                                are not fields, such as `kernel` and
#                                `tiers`, are its arguments), `readFields`
#                                (the members it has) and
#                                `derivedFieldMismatch` (the first derived
#                                parameter that disagrees with the plan's
#                                method, or "").
#
# The conversions take `const PlanT &` of any type with the members and the
# derived fields' methods (KernelPlan, NormToGPU.h).
#
# usage: gen_plan_fields.py JSON OUT
#===----------------------------------------------------------------------===#
import json
import sys

from gen_common import write_if_changed

# The attributes whose parameters are plan fields, in the order their
# members are declared (a member of both is declared once).
ATTRS = ("Norm_KernelPlanAttr", "Norm_ResidentTierAttr")
MEMBER_TYPES = {"int64_t": "int64_t", "bool": "bool",
                "::mlir::BoolAttr": "bool"}


def camel(snake, upper=False):
    words = snake.split("_")
    head = words[0].capitalize() if upper else words[0]
    return head + "".join(w.capitalize() for w in words[1:])


class Param:
    def __init__(self, records, arg):
        ref, self.name = arg
        self.member, self.getter = camel(self.name), "get" + camel(self.name, True)
        record = records[ref["def"]] if isinstance(ref, dict) else None
        self.cpp_type = record["cppType"] if record else ref
        classes = record["!superclasses"] if record else []
        self.derived = record["planMethod"] if "DerivedPlanField" in classes else None
        self.field = "PlanField" in classes or "DefaultPlanField" in classes
        self.init = record["planInit"] if self.field else None
        self.summary = record["summary"] if record else ""
        if self.field and self.cpp_type not in MEMBER_TYPES:
            sys.exit(f"gen_plan_fields.py: ${self.name}: a plan field must be "
                     f"int64_t, bool or ::mlir::BoolAttr, not {self.cpp_type}")

    def member_type(self):
        return MEMBER_TYPES[self.cpp_type]

    def to_attr(self):
        """The `get` argument of this field from `plan`."""
        if self.derived:
            return f"plan.{self.derived}()"
        if self.cpp_type == "::mlir::BoolAttr":
            return f"::mlir::BoolAttr::get(ctx, plan.{self.member})"
        return f"plan.{self.member}"

    def from_attr(self):
        value = f"attr.{self.getter}()"
        if self.cpp_type == "::mlir::BoolAttr":
            value += ".getValue()"
        return value


def read_params(records, attr):
    return [Param(records, arg) for arg in records[attr]["parameters"]["args"]]


def struct(params_by_attr):
    lines = ["struct KernelPlanFields {"]
    declared = {}
    for attr, params in params_by_attr:
        for p in params:
            if not p.field:
                continue
            if p.member in declared:
                first = declared[p.member]
                if (first.member_type(), first.init) != (p.member_type(), p.init):
                    sys.exit(f"gen_plan_fields.py: ${p.name} differs between "
                             "the attributes")
                continue
            declared[p.member] = p
            lines.append(f"  /// {p.summary} (`{p.name}`)")
            lines.append(f"  {p.member_type()} {p.member} = {p.init};")
    lines += ["", "  /// The parameter name of the first member that differs from",
              "  /// `other`'s, or \"\".",
              "  const char *firstDifferentField(const KernelPlanFields &other) const {"]
    for p in declared.values():
        lines.append(f"    if ({p.member} != other.{p.member})")
        lines.append(f"      return \"{p.name}\";")
    lines += ["    return \"\";", "  }", "};"]
    return lines


def conversions(attr, params):
    cpp = attr[len("Norm_"):]
    args = [p for p in params if not p.field and not p.derived]
    sig_args = "".join(f", {p.cpp_type} {p.member}" for p in args)
    get_args = ",\n      ".join(
        p.member if p in args else p.to_attr() for p in params)
    lines = [
        f"/// The {cpp} of `plan`.",
        "template <typename PlanT>",
        f"{cpp} get{cpp}(::mlir::MLIRContext *ctx, const PlanT &plan{sig_args}) {{",
        f"  return {cpp}::get(ctx,\n      {get_args});",
        "}",
        "",
        f"/// Sets the members {cpp} has.",
        f"inline void readFields({cpp} attr, KernelPlanFields &plan) {{",
    ]
    lines += [f"  plan.{p.member} = {p.from_attr()};" for p in params if p.field]
    verify_args = ", ".join(f"attr.{p.getter}()" for p in params)
    lines += ["}", "",
              f"/// The attribute's own verifier on `attr` (a {cpp} made by get,",
              "/// as the planner's are, was never verified).",
              f"inline ::llvm::LogicalResult verifyFields({cpp} attr,",
              "    ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError) {",
              f"  return {cpp}::verify(emitError, {verify_args});",
              "}", "",
              "/// The first derived parameter that disagrees with `plan`, or \"\".",
              "template <typename PlanT>",
              f"::llvm::StringRef derivedFieldMismatch({cpp} attr, const PlanT &plan) {{"]
    for p in params:
        if p.derived:
            lines.append(f"  if ({p.from_attr()} != plan.{p.derived}())")
            lines.append(f"    return \"{p.name}\";")
    lines += ["  return \"\";", "}", ""]
    return lines


def main():
    json_path, out_path = sys.argv[1:3]
    with open(json_path) as f:
        records = json.load(f)
    params_by_attr = [(a, read_params(records, a)) for a in ATTRS]
    lines = ["/* Generated by cmake/gen_plan_fields.py from the parameters of "
             "#norm.kernel_plan and #norm.resident_tier (NormAttrs.td); do "
             "not edit. */", "",
             "#ifdef GEN_KERNEL_PLAN_FIELDS", "#undef GEN_KERNEL_PLAN_FIELDS"]
    lines += struct(params_by_attr)
    lines += ["#endif // GEN_KERNEL_PLAN_FIELDS", "",
              "#ifdef GEN_KERNEL_PLAN_CONVERSIONS",
              "#undef GEN_KERNEL_PLAN_CONVERSIONS"]
    for attr, params in params_by_attr:
        lines += conversions(attr, params)
    lines.append("#endif // GEN_KERNEL_PLAN_CONVERSIONS")
    text = "\n".join(lines) + "\n"
    write_if_changed(out_path, text)


if __name__ == "__main__":
    main()
