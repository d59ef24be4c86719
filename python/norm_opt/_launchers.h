// _launchers.h - the C ABI of norm-opt's backward launchers, for C++ hosts.
//
// Part of norm-opt's Python package: the function types the torch ops
// (_torch_ops.cpp) and the XLA FFI handlers (_jax_launch.h) call through,
// for the libraries norm_opt.kernels compiles (docs/compile.md): the
// inputs', then the results' pointers, rows, cols, a row stride per
// [rows, cols] tensor (dy, x, dx), the stream; 0 or a normrt_status. The
// runtime entry points each library exports beside them follow.

#ifndef NORM_OPT_LAUNCHERS_H
#define NORM_OPT_LAUNCHERS_H

#include <cstddef>
#include <cstdint>

namespace norm_opt_launchers {

// layer_norm_backward(dy, x, mean, rstd, w, b, dx, dw, db, ...)
using LayerLauncher = int (*)(const void *, const void *, const void *,
                              const void *, const void *, const void *,
                              void *, void *, void *, int64_t, int64_t,
                              int64_t, int64_t, int64_t, void *);
// rms_norm_backward(dy, x, rstd, w, dx, dw, ...)
using RmsLauncher = int (*)(const void *, const void *, const void *,
                            const void *, void *, void *, int64_t, int64_t,
                            int64_t, int64_t, int64_t, void *);
// normrt_set_workspace(stream, ptr, bytes)
using SetWorkspaceFn = int (*)(void *, void *, size_t);
// normrt_last_error()
using LastErrorFn = const char *(*)();

} // namespace norm_opt_launchers

#endif // NORM_OPT_LAUNCHERS_H
