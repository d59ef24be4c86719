//===- MLIRCAPI.cpp - Upstream's core C API as a shared library -----------===//
//
// Part of norm-opt. Empty on purpose: libNormOptMLIRCAPI.so is the objects
// of libMLIRCAPIIR.a (linked whole, see CMakeLists.txt) over libMLIR.so, the
// mlir-c/ functions a C host of libNormCAPI.so calls.
//
//===----------------------------------------------------------------------===//
