//===- RuntimeABITest.cpp - The host lowering's runtime ABI table ---------===//
//
// Part of norm-opt. The host lowering declares each normrt_ir_* function
// from one table (norm/Conversion/NormToLaunch/RuntimeABI.h); the runtime
// declares them for C in NormRuntime.h. This test holds the two together:
// every table entry must be declared there, with the same result and
// parameter types.
//
//===----------------------------------------------------------------------===//

#include "norm/Conversion/NormToLaunch/RuntimeABI.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

#include <gtest/gtest.h>

using namespace mlir::norm;

namespace {

/// The ABI type of a C type as NormRuntime.h spells it, or nothing.
std::optional<AbiType> abiTypeOf(llvm::StringRef c) {
  c = c.trim();
  if (c.ends_with("*"))
    return AbiType::Ptr;
  if (c == "void")
    return AbiType::Void;
  if (c == "int" || c == "int32_t")
    return AbiType::I32;
  if (c == "int64_t")
    return AbiType::I64;
  return std::nullopt;
}

/// A parameter's C type: the declaration without its name.
llvm::StringRef paramType(llvm::StringRef param) {
  param = param.trim();
  size_t cut = param.find_last_of(" *");
  return cut == llvm::StringRef::npos ? param : param.take_front(cut + 1);
}

TEST(RuntimeABITest, TableMatchesNormRuntimeHeader) {
  auto file = llvm::MemoryBuffer::getFile(NORM_RUNTIME_HEADER);
  ASSERT_TRUE(bool(file)) << NORM_RUNTIME_HEADER;
  // The header's text with its comments' line breaks as spaces.
  std::string text = (*file)->getBuffer().str();
  llvm::replace(text, '\n', ' ');
  unsigned index = 0;
  for (const RuntimeFunction &f : kRuntimeFunctions) {
    EXPECT_EQ(static_cast<unsigned>(f.fn), index++)
        << f.name << ": the table is in RuntimeFn order";
    llvm::Regex decl(std::string("NORMRT_API ([^;(]*[ *])") + f.name +
                     "\\(([^)]*)\\);");
    llvm::SmallVector<llvm::StringRef> m;
    ASSERT_TRUE(decl.match(text, &m)) << f.name << " is not in NormRuntime.h";
    EXPECT_EQ(abiTypeOf(m[1]), f.result) << f.name << ": result " << m[1].str();
    llvm::SmallVector<llvm::StringRef> params;
    if (m[2].trim() != "void")
      llvm::SplitString(m[2], params, ",");
    ASSERT_EQ(params.size(), f.numParams) << f.name << "(" << m[2].str() << ")";
    for (auto [i, p] : llvm::enumerate(params))
      EXPECT_EQ(abiTypeOf(paramType(p)), f.parameters()[i])
          << f.name << ": parameter " << i << " '" << p.str() << "'";
  }
}

TEST(RuntimeABITest, AWrongEntryWouldFail) {
  // The self-check: the header's normrt_ir_end takes (void *, int32_t).
  EXPECT_EQ(abiTypeOf(paramType(" int32_t print_failure")), AbiType::I32);
  EXPECT_EQ(abiTypeOf(paramType("const char *message")), AbiType::Ptr);
  EXPECT_NE(abiTypeOf(paramType("int64_t bytes")), AbiType::I32);
  EXPECT_FALSE(abiTypeOf("double").has_value());
}

} // namespace
