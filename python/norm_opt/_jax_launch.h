// _jax_launch.h - one XLA FFI call of a norm backward, without XLA.
//
// Part of norm-opt's Python package. _jax_ffi.cc binds XLA's typed FFI to
// launch(); everything here is plain C++ so that CI (which has no jaxlib
// and so no xla/ffi headers) tests it: unittests/JaxLaunchTest.cpp.
//
// A call's buffers are those of norm_opt.jax's ffi_call, in order:
//   layer: dy, x, mean, rstd, w  ->  dx, dw, db, workspace
//   rms:   dy, x, rstd, w        ->  dx, dw, workspace
// x is [batch..., rows..., N], where the call's `x_rank` attribute is the
// rank of x without the batch dims that vmap added (vmap_method
// "broadcast_all": every operand has the same batch dims in front). The
// statistics are [batch..., rows...] fp32, w and the dW / dB results
// [batch..., N]. Each batch element is one launch of the launcher (its own
// dW, as per-example gradients need; folding the batch into rows would sum
// them), on XLA's stream, one after the other with the one workspace.

#ifndef NORM_OPT_JAX_LAUNCH_H
#define NORM_OPT_JAX_LAUNCH_H

#include "_launchers.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace norm_opt_jax {

enum class Kind { Layer = 0, Rms = 1 };

using norm_opt_launchers::LastErrorFn;
using norm_opt_launchers::LayerLauncher;
using norm_opt_launchers::RmsLauncher;
using norm_opt_launchers::SetWorkspaceFn;

// One compiled kernel, as norm_opt.jax registered it.
struct Kernel {
  Kind kind = Kind::Layer;
  int64_t n = 0;           // the hidden size it was compiled for
  int xBytes = 0;          // element bytes of dy, x, dx
  int wBytes = 0;          // element bytes of w, dw, db
  void *launcher = nullptr;
  SetWorkspaceFn setWorkspace = nullptr;
  LastErrorFn lastError = nullptr;
};

// One FFI buffer: its data, dims and element bytes.
struct Buffer {
  void *data = nullptr;
  const int64_t *dims = nullptr;
  size_t rank = 0;
  int elementBytes = 0;
};

inline int64_t product(const int64_t *dims, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i)
    p *= dims[i];
  return p;
}

inline std::string dimsText(const Buffer &b) {
  std::string s = "[";
  for (size_t i = 0; i < b.rank; ++i)
    s += (i ? ", " : "") + std::to_string(b.dims[i]);
  return s + "]";
}

// The shape checks of one call; "" when the buffers fit `k`.
inline std::string check(const Kernel &k, int64_t xRank, const Buffer *ins,
                         size_t nIns, const Buffer *outs, size_t nOuts) {
  const bool layer = k.kind == Kind::Layer;
  const size_t wantIns = layer ? 5 : 4, wantOuts = layer ? 4 : 3;
  if (nIns != wantIns || nOuts != wantOuts)
    return "expected " + std::to_string(wantIns) + " operands and " +
           std::to_string(wantOuts) + " results, got " +
           std::to_string(nIns) + " and " + std::to_string(nOuts);
  const Buffer &x = ins[1];
  if (xRank < 1 || static_cast<size_t>(xRank) > x.rank)
    return "x_rank " + std::to_string(xRank) + " does not fit x " +
           dimsText(x);
  const size_t batchRank = x.rank - static_cast<size_t>(xRank);
  if (x.dims[x.rank - 1] != k.n)
    return "x " + dimsText(x) + " has hidden size " +
           std::to_string(x.dims[x.rank - 1]) + "; the kernel was compiled "
           "for " + std::to_string(k.n);
  auto same = [](const Buffer &a, const Buffer &b) {
    if (a.rank != b.rank)
      return false;
    for (size_t i = 0; i < a.rank; ++i)
      if (a.dims[i] != b.dims[i])
        return false;
    return true;
  };
  auto leading = [&](const Buffer &b, size_t rank, const char *name,
                     int bytes) -> std::string {
    bool ok = b.rank == rank && b.elementBytes == bytes;
    for (size_t i = 0; ok && i < rank && i < batchRank; ++i)
      ok = b.dims[i] == x.dims[i];
    if (!ok)
      return std::string(name) + " " + dimsText(b) + " (" +
             std::to_string(b.elementBytes) + "-byte elements) does not "
             "fit x " + dimsText(x);
    return "";
  };
  if (!same(ins[0], x) || ins[0].elementBytes != k.xBytes)
    return "dy " + dimsText(ins[0]) + " must have x's shape " + dimsText(x) +
           " and dtype";
  if (x.elementBytes != k.xBytes || outs[0].elementBytes != k.xBytes ||
      !same(outs[0], x))
    return "x and dx must be " + std::to_string(k.xBytes) + "-byte " +
           dimsText(x);
  // Statistics: x's dims but the last, fp32.
  const size_t nStats = layer ? 2 : 1;
  for (size_t i = 0; i < nStats; ++i) {
    const Buffer &s = ins[2 + i];
    std::string e = leading(s, x.rank - 1, layer && i == 0 ? "mean" : "rstd",
                            4);
    if (!e.empty())
      return e;
    if (product(s.dims, 0, s.rank) != product(x.dims, 0, x.rank - 1))
      return "the statistics " + dimsText(s) + " must be x's " + dimsText(x) +
             " without its last dim";
  }
  // w and the dW / dB results: [batch..., N].
  const Buffer *vectors[] = {&ins[wantIns - 1], &outs[1],
                             layer ? &outs[2] : nullptr};
  const char *names[] = {"w", "dw", "db"};
  for (size_t i = 0; i < 3; ++i) {
    if (!vectors[i])
      continue;
    std::string e = leading(*vectors[i], batchRank + 1, names[i], k.wBytes);
    if (!e.empty())
      return e;
    if (vectors[i]->dims[batchRank] != k.n)
      return std::string(names[i]) + " " + dimsText(*vectors[i]) +
             " must end in N = " + std::to_string(k.n);
  }
  const Buffer &ws = outs[wantOuts - 1];
  if (ws.rank < 1 || ws.elementBytes != 1 ||
      reinterpret_cast<uintptr_t>(ws.data) % 16 != 0)
    return "the workspace must be a 16-byte aligned uint8 buffer";
  return "";
}

// Runs the call: `check`, then a launch per batch element with the
// workspace set for `stream` around them. "" on success, else the message.
inline std::string launch(const Kernel &k, int64_t xRank, const Buffer *ins,
                          size_t nIns, const Buffer *outs, size_t nOuts,
                          void *stream) {
  std::string bad = check(k, xRank, ins, nIns, outs, nOuts);
  if (!bad.empty())
    return bad;
  const bool layer = k.kind == Kind::Layer;
  const Buffer &x = ins[1];
  const size_t batchRank = x.rank - static_cast<size_t>(xRank);
  const int64_t batch = product(x.dims, 0, batchRank);
  const int64_t rows = product(x.dims, batchRank, x.rank - 1);
  const int64_t n = k.n;
  const Buffer &ws = outs[nOuts - 1];
  // One batch element's slice of the workspace (broadcast_all gave every
  // element its own; they run one after the other, so the first serves).
  const size_t wsBytes = static_cast<size_t>(product(ws.dims, batchRank,
                                                     ws.rank));
  auto message = [&](const char *what, int status) {
    std::string m = std::string(what) + " failed with status " +
                    std::to_string(status);
    if (k.lastError && k.lastError())
      m += ": " + std::string(k.lastError());
    return m;
  };
  if (wsBytes && k.setWorkspace) {
    if (int status = k.setWorkspace(stream, ws.data, wsBytes))
      return message("normrt_set_workspace", status);
  }
  auto at = [](const Buffer &b, int64_t index, int64_t elements) {
    return static_cast<void *>(static_cast<char *>(b.data) +
                               index * elements * b.elementBytes);
  };
  std::string failure;
  for (int64_t b = 0; b < batch && failure.empty(); ++b) {
    void *dy = at(ins[0], b, rows * n), *xp = at(x, b, rows * n);
    void *w = at(ins[layer ? 4 : 3], b, n);
    void *dx = at(outs[0], b, rows * n), *dw = at(outs[1], b, n);
    int status;
    if (layer) {
      void *mean = at(ins[2], b, rows), *rstd = at(ins[3], b, rows);
      // The bias is not read (dbias = sum of dy): w stands in.
      status = reinterpret_cast<LayerLauncher>(k.launcher)(
          dy, xp, mean, rstd, w, w, dx, dw, at(outs[2], b, n), rows, n, n, n,
          n, stream);
    } else {
      status = reinterpret_cast<RmsLauncher>(k.launcher)(
          dy, xp, at(ins[2], b, rows), w, dx, dw, rows, n, n, n, n, stream);
    }
    if (status)
      failure = message(layer ? "layer_norm_backward" : "rms_norm_backward",
                        status);
  }
  if (wsBytes && k.setWorkspace) {
    // Later calls on the stream must not reuse XLA's buffer.
    int status = k.setWorkspace(stream, nullptr, 0);
    if (status && failure.empty())
      failure = message("normrt_set_workspace (reset)", status);
  }
  return failure;
}

} // namespace norm_opt_jax

#endif // NORM_OPT_JAX_LAUNCH_H
