//===- RuntimeInternal.h - What the runtime's files share -------*- C++ -*-===//
//
// Part of norm-opt. Internal to lib/Runtime (hidden symbols, never
// installed): the driver's entry points, the thread's error message, the
// context and capture helpers, and the module cache, for the files beside
// NormRuntime.cpp (UpstreamABI.cpp: the entry points upstream gpu-to-llvm
// calls).
//
//===----------------------------------------------------------------------===//

#ifndef NORM_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define NORM_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "norm/Runtime/NormRuntime.h"

#include <cuda.h>

#include <cstdint>
#include <exception>
#include <new>

namespace normrt_detail {

// The entry points this runtime uses, by their exported (versioned) names.
struct Driver {
  CUresult (*init)(unsigned int);
  CUresult (*getErrorName)(CUresult, const char **);
  CUresult (*getErrorString)(CUresult, const char **);
  CUresult (*deviceGet)(CUdevice *, int);
  CUresult (*deviceGetCount)(int *);
  CUresult (*deviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*devicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*ctxGetCurrent)(CUcontext *);
  CUresult (*ctxSetCurrent)(CUcontext);
  CUresult (*ctxGetDevice)(CUdevice *);
  CUresult (*ctxSynchronize)(void);
  CUresult (*memAlloc)(CUdeviceptr *, size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*moduleLoadData)(CUmodule *, const void *);
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*moduleUnload)(CUmodule);
  CUresult (*funcSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*occupancyMaxActiveBlocks)(int *, CUfunction, int, size_t);
  CUresult (*launchKernel)(CUfunction, unsigned int, unsigned int, unsigned int,
                           unsigned int, unsigned int, unsigned int,
                           unsigned int, CUstream, void **, void **);
  CUresult (*streamSynchronize)(CUstream);
  // Optional: without them, launchers take the two-kernel path.
  CUresult (*launchCooperativeKernel)(CUfunction, unsigned int, unsigned int,
                                      unsigned int, unsigned int, unsigned int,
                                      unsigned int, unsigned int, CUstream,
                                      void **);
  CUresult (*memsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
  // Optional: stream capture. Without cuStreamGetCaptureInfo no stream is
  // taken to capture; without the stream-ordered allocator a capture that
  // needs scratch gets NORMRT_ERROR_CAPTURE.
  // cuStreamGetCaptureInfo is the first (CUDA 10.1) signature, which every
  // later driver still exports under that name.
  CUresult (*streamGetCaptureInfo)(CUstream, CUstreamCaptureStatus *,
                                   cuuint64_t *);
  CUresult (*threadExchangeStreamCaptureMode)(CUstreamCaptureMode *);
  CUresult (*memAllocAsync)(CUdeviceptr *, size_t, CUstream);
  CUresult (*memFreeAsync)(CUdeviceptr, CUstream);
  // Optional (CUDA 12.4): finishes a lazily loaded function's loading.
  CUresult (*funcLoad)(CUfunction);
  // Optional (CUDA 12): clusters resident at once, for clustered kernels.
  CUresult (*occupancyMaxActiveClusters)(int *, CUfunction,
                                         const CUlaunchConfig *);
  // Optional (CUDA 12): launches with attributes (programmatic dependent
  // launch); without it a dependent launch is a plain one.
  CUresult (*launchKernelEx)(const CUlaunchConfig *, CUfunction, void **,
                             void **);
  // Optional: what the upstream runner ABI (UpstreamABI.cpp) needs beyond
  // the above; its entry points report a driver without them.
  CUresult (*streamCreate)(CUstream *, unsigned int);
  CUresult (*streamDestroy)(CUstream);
  CUresult (*streamWaitEvent)(CUstream, CUevent, unsigned int);
  CUresult (*eventCreate)(CUevent *, unsigned int);
  CUresult (*eventDestroy)(CUevent);
  CUresult (*eventRecord)(CUevent, CUstream);
  CUresult (*eventSynchronize)(CUevent);
  CUresult (*memcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*memsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*memAllocManaged)(CUdeviceptr *, size_t, unsigned int);
  CUresult (*memHostRegister)(void *, size_t, unsigned int);
  CUresult (*memHostUnregister)(void *);
};

// Written once by the first normrt_init (any entry point), read-only after.
extern Driver gDriver;

/// Writes this thread's message (printf-style) and returns `status`.
__attribute__((format(printf, 2, 3))) int fail(int status, const char *fmt,
                                               ...);
/// fail() with ": <CUDA error name (string)>" appended.
__attribute__((format(printf, 3, 4))) int cuFail(int status, CUresult result,
                                                 const char *fmt, ...);
/// This thread's last message ("" if none).
const char *lastError();
/// The status for a driver failure (memory and capture errors keep theirs).
int statusFor(CUresult result, int otherwise);

/// Loads the driver once; on failure the message names `fn`.
int requireDriver(const char *fn);
/// The driver and the current context (device 0's primary one if none).
int requireContext(const char *fn, CUcontext *out);

/// Makes device `ordinal`'s primary context current on this thread.
int makeDeviceCurrent(const char *fn, int ordinal);

/// What a stream is doing with respect to CUDA graph capture.
struct Capture {
  bool active = false;
  uint64_t id = 0; // the capture sequence (unique in the process) if active
};
bool isLegacyStream(CUstream stream);
/// The capture state of `stream`; fails where no work may go onto it.
int captureOf(const char *fn, CUstream stream, Capture *out);

/// Raises `f`'s dynamic shared memory limit to `shared_bytes`.
int allowDynamicShared(const char *fn, CUfunction f, unsigned shared_bytes);
/// The kernel `kernel_name` of `image`, loaded once per context and cached.
int getFunction(const char *fn, const void *image, const char *kernel_name,
                void **function_out);

/// Runs `body`; no exception leaves it (a C boundary).
template <typename Body> int guarded(const char *fn, Body &&body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(NORMRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  } catch (const std::exception &e) {
    return fail(NORMRT_ERROR_DRIVER, "%s: internal error: %s", fn, e.what());
  } catch (...) {
    return fail(NORMRT_ERROR_DRIVER, "%s: internal error", fn);
  }
}

} // namespace normrt_detail

#endif // NORM_LIB_RUNTIME_RUNTIMEINTERNAL_H
