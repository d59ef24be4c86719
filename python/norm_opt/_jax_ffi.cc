// _jax_ffi.cc - norm_opt's backward kernels as typed XLA FFI handlers.
//
// Part of norm-opt's Python package. norm_opt/jax.py builds this file
// against jax.ffi.include_dir() on first use (cached), registers the two
// handlers with jax.ffi.register_ffi_target(platform="CUDA") and calls them
// with jax.ffi.ffi_call from the backward of its jax.custom_vjp functions.
//
// The launchers come from norm-opt's compiled libraries, loaded by Python
// (norm_opt.kernels) when the call is traced: Python hands each library's
// function pointers over with norm_opt_jax_register under the library's
// cache name, which the call carries as its `kernel` attribute (a name, not
// a pointer, so an executable from JAX's persistent cache stays valid in a
// new process once the call is traced there). _jax_launch.h checks the
// buffers and launches; this file is XLA's side:
//  - the stream is XLA's (PlatformStream<cudaStream_t>), and the launch runs
//    in the stream's context, pushed for the call;
//  - the fp32 workspace is a result buffer XLA allocates (its size asked of
//    the launcher when the call is traced), not the runtime's memory and not
//    XLA's scratch allocator, whose memory is freed when the handler returns
//    and so would be stale in a command buffer replayed later;
//  - the handlers declare kCmdBufferCompatible: nothing in a call depends on
//    host state that changes between replays of XLA's command buffers.

#include "_jax_launch.h"

#include "xla/ffi/api/ffi.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace ffi = xla::ffi;

struct CUstream_st;
struct CUctx_st;
using cudaStream_t = CUstream_st *;

namespace {

using norm_opt_jax::Buffer;
using norm_opt_jax::Kernel;

std::mutex gMutex;
std::map<std::string, Kernel, std::less<>> gKernels;

// The driver calls that make the stream's context current for the call.
struct Driver {
  using StreamGetCtx = int (*)(CUstream_st *, CUctx_st **);
  using CtxPush = int (*)(CUctx_st *);
  using CtxPop = int (*)(CUctx_st **);
  StreamGetCtx streamGetCtx = nullptr;
  CtxPush push = nullptr;
  CtxPop pop = nullptr;
};

const Driver &driver() {
  static Driver d = [] {
    Driver r;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib)
      lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib) {
      r.streamGetCtx =
          reinterpret_cast<Driver::StreamGetCtx>(dlsym(lib, "cuStreamGetCtx"));
      r.push = reinterpret_cast<Driver::CtxPush>(
          dlsym(lib, "cuCtxPushCurrent_v2"));
      r.pop = reinterpret_cast<Driver::CtxPop>(dlsym(lib, "cuCtxPopCurrent_v2"));
    }
    return r;
  }();
  return d;
}

int elementBytes(ffi::DataType t) {
  switch (t) {
  case ffi::DataType::F32:
  case ffi::DataType::S32:
    return 4;
  case ffi::DataType::BF16:
  case ffi::DataType::F16:
    return 2;
  case ffi::DataType::U8:
  case ffi::DataType::S8:
    return 1;
  default:
    return 0;
  }
}

Buffer view(const ffi::AnyBuffer &b) {
  auto dims = b.dimensions();
  return Buffer{b.untyped_data(), dims.begin(), dims.size(),
                elementBytes(b.element_type())};
}

Buffer view(ffi::Result<ffi::AnyBuffer> &b) { return view(*b); }

template <size_t NIns, size_t NOuts>
ffi::Error run(cudaStream_t stream, std::string_view name, int64_t xRank,
               const Buffer (&ins)[NIns], const Buffer (&outs)[NOuts]) {
  Kernel k;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto it = gKernels.find(name);
    if (it == gKernels.end())
      return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                        "norm_opt: kernel '" + std::string(name) +
                            "' is not loaded in this process (norm_opt.jax "
                            "loads it when the call is traced)");
    k = it->second;
  }
  const Driver &d = driver();
  CUctx_st *context = nullptr;
  bool pushed = false;
  if (d.streamGetCtx && d.push && d.pop &&
      d.streamGetCtx(stream, &context) == 0 && context)
    pushed = d.push(context) == 0;
  std::string failure = norm_opt_jax::launch(k, xRank, ins, NIns, outs, NOuts,
                                             stream);
  if (pushed) {
    CUctx_st *popped = nullptr;
    d.pop(&popped);
  }
  if (!failure.empty())
    return ffi::Error(ffi::ErrorCode::kInternal,
                      "norm_opt (" + std::string(name) + "): " + failure);
  return ffi::Error::Success();
}

ffi::Error layerNormBackward(cudaStream_t stream, ffi::AnyBuffer dy,
                             ffi::AnyBuffer x, ffi::AnyBuffer mean,
                             ffi::AnyBuffer rstd, ffi::AnyBuffer w,
                             ffi::Result<ffi::AnyBuffer> dx,
                             ffi::Result<ffi::AnyBuffer> dw,
                             ffi::Result<ffi::AnyBuffer> db,
                             ffi::Result<ffi::AnyBuffer> workspace,
                             std::string_view kernel, int64_t xRank) {
  const Buffer ins[] = {view(dy), view(x), view(mean), view(rstd), view(w)};
  const Buffer outs[] = {view(dx), view(dw), view(db), view(workspace)};
  return run(stream, kernel, xRank, ins, outs);
}

ffi::Error rmsNormBackward(cudaStream_t stream, ffi::AnyBuffer dy,
                           ffi::AnyBuffer x, ffi::AnyBuffer rstd,
                           ffi::AnyBuffer w, ffi::Result<ffi::AnyBuffer> dx,
                           ffi::Result<ffi::AnyBuffer> dw,
                           ffi::Result<ffi::AnyBuffer> workspace,
                           std::string_view kernel, int64_t xRank) {
  const Buffer ins[] = {view(dy), view(x), view(rstd), view(w)};
  const Buffer outs[] = {view(dx), view(dw), view(workspace)};
  return run(stream, kernel, xRank, ins, outs);
}

} // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    NormOptLayerNormBackward, layerNormBackward,
    ffi::Ffi::Bind()
        .Ctx<ffi::PlatformStream<cudaStream_t>>()
        .Arg<ffi::AnyBuffer>()  // dy
        .Arg<ffi::AnyBuffer>()  // x
        .Arg<ffi::AnyBuffer>()  // mean
        .Arg<ffi::AnyBuffer>()  // rstd
        .Arg<ffi::AnyBuffer>()  // w
        .Ret<ffi::AnyBuffer>()  // dx
        .Ret<ffi::AnyBuffer>()  // dw
        .Ret<ffi::AnyBuffer>()  // db
        .Ret<ffi::AnyBuffer>()  // workspace
        .Attr<std::string_view>("kernel")
        .Attr<int64_t>("x_rank"),
    {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    NormOptRmsNormBackward, rmsNormBackward,
    ffi::Ffi::Bind()
        .Ctx<ffi::PlatformStream<cudaStream_t>>()
        .Arg<ffi::AnyBuffer>()  // dy
        .Arg<ffi::AnyBuffer>()  // x
        .Arg<ffi::AnyBuffer>()  // rstd
        .Arg<ffi::AnyBuffer>()  // w
        .Ret<ffi::AnyBuffer>()  // dx
        .Ret<ffi::AnyBuffer>()  // dw
        .Ret<ffi::AnyBuffer>()  // workspace
        .Attr<std::string_view>("kernel")
        .Attr<int64_t>("x_rank"),
    {ffi::Traits::kCmdBufferCompatible});

extern "C" __attribute__((visibility("default"))) int
norm_opt_jax_register(const char *name, int kind, int64_t n, int xBytes,
                      int wBytes, void *launcher, void *setWorkspace,
                      void *lastError) {
  if (!name || !launcher || (kind != 0 && kind != 1) || n < 1)
    return 1;
  Kernel k;
  k.kind = static_cast<norm_opt_jax::Kind>(kind);
  k.n = n;
  k.xBytes = xBytes;
  k.wBytes = wBytes;
  k.launcher = launcher;
  k.setWorkspace = reinterpret_cast<norm_opt_jax::SetWorkspaceFn>(setWorkspace);
  k.lastError = reinterpret_cast<norm_opt_jax::LastErrorFn>(lastError);
  std::lock_guard<std::mutex> lock(gMutex);
  gKernels[name] = k;
  return 0;
}
