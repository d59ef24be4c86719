//===- RuntimeABI.h - The runtime functions the host lowering calls -*- C++ -*-===//
//
// Part of norm-opt.
//
// One typed table of the normrt_ir_* functions that
// --convert-norm-to-gpu-launch calls (include/norm/Runtime/NormRuntime.h
// declares them for C). The host lowering declares each from this table,
// once, and checks every call against it; unittests/RuntimeABITest.cpp
// checks the table against the header. (The mgpu* functions are upstream's
// ABI: gpu-to-llvm declares and calls them, lib/Runtime/UpstreamABI.cpp
// implements them.)
//
//===----------------------------------------------------------------------===//

#ifndef NORM_CONVERSION_NORMTOLAUNCH_RUNTIMEABI_H
#define NORM_CONVERSION_NORMTOLAUNCH_RUNTIMEABI_H

#include "llvm/ADT/ArrayRef.h"

#include <array>

namespace mlir::norm {

/// A C parameter or result type of the runtime ABI, as the host IR has it.
enum class AbiType {
  Void, // no result
  I32,  // int, int32_t
  I64,  // int64_t
  Ptr,  // any pointer (!llvm.ptr)
};

enum class RuntimeFn {
  Begin,
  End,
  Fail,
  Stream,
  CheckAligned,
  SmCount,
  NextLaunch,
  QueryResult,
  Workspace,
  GridBarrier,
};

struct RuntimeFunction {
  RuntimeFn fn;
  const char *name;
  AbiType result;
  unsigned numParams;
  std::array<AbiType, 3> params;

  llvm::ArrayRef<AbiType> parameters() const {
    return llvm::ArrayRef(params).take_front(numParams);
  }
};

/// Every runtime function the host lowering may call, in RuntimeFn order.
inline constexpr RuntimeFunction kRuntimeFunctions[] = {
    // int normrt_ir_begin(void *stream)
    {RuntimeFn::Begin, "normrt_ir_begin", AbiType::I32, 1, {AbiType::Ptr}},
    // int normrt_ir_end(void *stream, int32_t print_failure)
    {RuntimeFn::End, "normrt_ir_end", AbiType::I32, 2,
     {AbiType::Ptr, AbiType::I32}},
    // void normrt_ir_fail(int32_t status, const char *message)
    {RuntimeFn::Fail, "normrt_ir_fail", AbiType::Void, 2,
     {AbiType::I32, AbiType::Ptr}},
    // void *normrt_ir_stream(void)
    {RuntimeFn::Stream, "normrt_ir_stream", AbiType::Ptr, 0, {}},
    // void normrt_ir_check_aligned(const void *ptr, int64_t alignment,
    //                              const char *what)
    {RuntimeFn::CheckAligned, "normrt_ir_check_aligned", AbiType::Void, 3,
     {AbiType::Ptr, AbiType::I64, AbiType::Ptr}},
    // int64_t normrt_ir_sm_count(void)
    {RuntimeFn::SmCount, "normrt_ir_sm_count", AbiType::I64, 0, {}},
    // void normrt_ir_next_launch(int32_t kind, int64_t cluster)
    {RuntimeFn::NextLaunch, "normrt_ir_next_launch", AbiType::Void, 2,
     {AbiType::I32, AbiType::I64}},
    // int64_t normrt_ir_query_result(void)
    {RuntimeFn::QueryResult, "normrt_ir_query_result", AbiType::I64, 0, {}},
    // void *normrt_ir_workspace(void *stream, int64_t bytes)
    {RuntimeFn::Workspace, "normrt_ir_workspace", AbiType::Ptr, 2,
     {AbiType::Ptr, AbiType::I64}},
    // void *normrt_ir_grid_barrier(void *stream)
    {RuntimeFn::GridBarrier, "normrt_ir_grid_barrier", AbiType::Ptr, 1,
     {AbiType::Ptr}},
};

inline const RuntimeFunction &runtimeFunction(RuntimeFn fn) {
  return kRuntimeFunctions[static_cast<unsigned>(fn)];
}

} // namespace mlir::norm

#endif // NORM_CONVERSION_NORMTOLAUNCH_RUNTIMEABI_H
