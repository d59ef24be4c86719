//===- Driver.cpp - Loading libcuda, errors and messages --------------------===
//
// Part of norm-opt: the kernel runtime (lib/Runtime). RuntimeInternal.h
// says what its files share and the rules they keep.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace normrt_detail {

//===----------------------------------------------------------------------===//
// Error messages
//===----------------------------------------------------------------------===//

// This thread's last failure. Trivially constructed and destroyed, so it
// needs no TLS constructor or destructor (safe in a dlopen'ed library).
thread_local char tLastError[kMessageSize];

int vfail(int status, const char *fmt, va_list args) {
  std::vsnprintf(tLastError, kMessageSize, fmt, args);
  return status;
}

__attribute__((format(printf, 2, 3))) int fail(int status, const char *fmt,
                                               ...) {
  va_list args;
  va_start(args, fmt);
  vfail(status, fmt, args);
  va_end(args);
  return status;
}

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

// Written once by loadDriver(), read-only afterwards (the guarded static in
// initOnce() orders the writes before every reader, and every reader goes
// through initOnce()).
Driver gDriver;
int gInitStatus = NORMRT_ERROR_NO_DRIVER;
char gInitError[kMessageSize];
// True once the driver is usable; lets normrt_release_all skip work without
// triggering initialisation.
std::atomic<bool> gDriverReady{false};

template <typename Fn> bool resolve(void *handle, const char *name, Fn &fn) {
  void *symbol = dlsym(handle, name);
  if (!symbol)
    return false;
  fn = reinterpret_cast<Fn>(symbol);
  return true;
}

// Names of common CUresult values, for libraries whose cuGetErrorName does
// not answer (the toolkit's stub returns CUDA_ERROR_STUB_LIBRARY for every
// call). Numbers rather than enumerators: they are the driver's stable ABI.
struct ErrorName {
  int result;
  const char *name;
};
constexpr ErrorName kErrorNames[] = {
    {0, "CUDA_SUCCESS"},
    {1, "CUDA_ERROR_INVALID_VALUE"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"},
    {4, "CUDA_ERROR_DEINITIALIZED"},
    {34, "CUDA_ERROR_STUB_LIBRARY"},
    {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE"},
    {100, "CUDA_ERROR_NO_DEVICE"},
    {101, "CUDA_ERROR_INVALID_DEVICE"},
    {200, "CUDA_ERROR_INVALID_IMAGE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
    {218, "CUDA_ERROR_INVALID_PTX"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
    {223, "CUDA_ERROR_JIT_COMPILATION_DISABLED"},
    {300, "CUDA_ERROR_INVALID_SOURCE"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM"},
    {400, "CUDA_ERROR_INVALID_HANDLE"},
    {401, "CUDA_ERROR_ILLEGAL_STATE"},
    {500, "CUDA_ERROR_NOT_FOUND"},
    {600, "CUDA_ERROR_NOT_READY"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
    {710, "CUDA_ERROR_ASSERT"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS"},
    {719, "CUDA_ERROR_LAUNCH_FAILED"},
    {800, "CUDA_ERROR_NOT_PERMITTED"},
    {801, "CUDA_ERROR_NOT_SUPPORTED"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"},
    {907, "CUDA_ERROR_CAPTURED_EVENT"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"},
    {999, "CUDA_ERROR_UNKNOWN"},
};

const char *fallbackErrorName(int result) {
  for (const ErrorName &entry : kErrorNames)
    if (entry.result == result)
      return entry.name;
  return nullptr;
}

const char *fallbackErrorString(int result) {
  switch (result) {
  case 34:
    return "the CUDA driver library is the toolkit's stub, not a real driver";
  case 100:
    return "no CUDA-capable device is detected";
  case 803:
    return "the CUDA driver library does not match the kernel module";
  default:
    return nullptr;
  }
}

// "CUDA_ERROR_X (description)" for `result`, asking `driver` first.
void describe(const Driver &driver, CUresult result, char *buffer,
              size_t size) {
  const char *name = nullptr;
  const char *text = nullptr;
  if (driver.getErrorName && driver.getErrorName(result, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (driver.getErrorString &&
      driver.getErrorString(result, &text) != CUDA_SUCCESS)
    text = nullptr;
  if (!name)
    name = fallbackErrorName(static_cast<int>(result));
  if (!text)
    text = fallbackErrorString(static_cast<int>(result));
  if (name && text)
    std::snprintf(buffer, size, "%s (%s)", name, text);
  else if (name)
    std::snprintf(buffer, size, "%s", name);
  else
    std::snprintf(buffer, size, "CUresult %d", static_cast<int>(result));
}

// fail() with ": <CUDA error name (string)>" appended to the message.
__attribute__((format(printf, 3, 4))) int cuFail(int status, CUresult result,
                                                 const char *fmt, ...) {
  char what[kMessageSize / 2];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(what, sizeof(what), fmt, args);
  va_end(args);
  char error[kMessageSize / 2];
  describe(gDriver, result, error, sizeof(error));
  return fail(status, "%s: %s", what, error);
}

// The status for a driver failure: memory and device errors keep their own
// codes, everything else gets `otherwise`.
int statusFor(CUresult result, int otherwise) {
  if (result == CUDA_ERROR_OUT_OF_MEMORY)
    return NORMRT_ERROR_OUT_OF_MEMORY;
  if (result >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
      result <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
    return NORMRT_ERROR_CAPTURE;
  return otherwise;
}

void setInitError(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void setInitError(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(gInitError, kMessageSize, fmt, args);
  va_end(args);
}

// An off switch in the environment (NORMRT_NO_COOPERATIVE, ...): set to
// anything but "" or "0". Read at every call, so tests and A/B timing can
// flip it inside one process.
bool envSwitchSet(const char *name) {
  const char *value = std::getenv(name);
  return value && *value && std::strcmp(value, "0") != 0;
}

// dlopens libcuda (NORMRT_LIBCUDA, else libcuda.so.1, else libcuda.so);
// null, with gInitError set, when none loads. `path` names the library.
void *openDriver(const char *&path) {
  const char *override = std::getenv("NORMRT_LIBCUDA");
  path = nullptr;
  void *handle = nullptr;
  if (override && *override) {
    path = override;
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      setInitError("normrt_init: cannot load the CUDA driver library '%s' "
                   "(named by NORMRT_LIBCUDA): %s",
                   path, why ? why : "dlopen failed");
      return nullptr;
    }
  } else {
    char first[kMessageSize / 2] = "dlopen failed";
    path = "libcuda.so.1";
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      if (const char *why = dlerror())
        std::snprintf(first, sizeof(first), "%s", why);
      path = "libcuda.so";
      handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!handle) {
      const char *why = dlerror();
      setInitError("normrt_init: cannot load the CUDA driver library "
                   "(libcuda.so.1: %s; libcuda.so: %s); is the NVIDIA driver "
                   "installed? NORMRT_LIBCUDA may name the library's path",
                   first, why ? why : "dlopen failed");
      return nullptr;
    }
  }
  return handle;
}

// Resolves the entry points into `driver`; false, with gInitError set, when
// a required one is missing.
bool resolveDriver(void *handle, const char *path, Driver &driver) {

  struct Entry {
    const char *name;
    bool ok;
  };
  const Entry entries[] = {
      {"cuInit", resolve(handle, "cuInit", driver.init)},
      {"cuGetErrorName",
       resolve(handle, "cuGetErrorName", driver.getErrorName)},
      {"cuGetErrorString",
       resolve(handle, "cuGetErrorString", driver.getErrorString)},
      {"cuDeviceGet", resolve(handle, "cuDeviceGet", driver.deviceGet)},
      {"cuDeviceGetCount",
       resolve(handle, "cuDeviceGetCount", driver.deviceGetCount)},
      {"cuDeviceGetAttribute",
       resolve(handle, "cuDeviceGetAttribute", driver.deviceGetAttribute)},
      {"cuDevicePrimaryCtxRetain", resolve(handle, "cuDevicePrimaryCtxRetain",
                                           driver.devicePrimaryCtxRetain)},
      {"cuCtxGetCurrent",
       resolve(handle, "cuCtxGetCurrent", driver.ctxGetCurrent)},
      {"cuCtxSetCurrent",
       resolve(handle, "cuCtxSetCurrent", driver.ctxSetCurrent)},
      {"cuCtxGetDevice",
       resolve(handle, "cuCtxGetDevice", driver.ctxGetDevice)},
      {"cuCtxSynchronize",
       resolve(handle, "cuCtxSynchronize", driver.ctxSynchronize)},
      {"cuMemAlloc_v2", resolve(handle, "cuMemAlloc_v2", driver.memAlloc)},
      {"cuMemFree_v2", resolve(handle, "cuMemFree_v2", driver.memFree)},
      {"cuModuleLoadData",
       resolve(handle, "cuModuleLoadData", driver.moduleLoadData)},
      {"cuModuleGetFunction",
       resolve(handle, "cuModuleGetFunction", driver.moduleGetFunction)},
      {"cuModuleUnload",
       resolve(handle, "cuModuleUnload", driver.moduleUnload)},
      {"cuFuncSetAttribute",
       resolve(handle, "cuFuncSetAttribute", driver.funcSetAttribute)},
      {"cuOccupancyMaxActiveBlocksPerMultiprocessor",
       resolve(handle, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
               driver.occupancyMaxActiveBlocks)},
      {"cuLaunchKernel",
       resolve(handle, "cuLaunchKernel", driver.launchKernel)},
      {"cuStreamSynchronize",
       resolve(handle, "cuStreamSynchronize", driver.streamSynchronize)},
  };
  resolve(handle, "cuLaunchCooperativeKernel", driver.launchCooperativeKernel);
  resolve(handle, "cuMemsetD32Async", driver.memsetD32Async);
  resolve(handle, "cuStreamGetCaptureInfo", driver.streamGetCaptureInfo);
  resolve(handle, "cuThreadExchangeStreamCaptureMode",
          driver.threadExchangeStreamCaptureMode);
  resolve(handle, "cuMemAllocAsync", driver.memAllocAsync);
  resolve(handle, "cuMemFreeAsync", driver.memFreeAsync);
  resolve(handle, "cuFuncLoad", driver.funcLoad);
  resolve(handle, "cuOccupancyMaxActiveClusters",
          driver.occupancyMaxActiveClusters);
  resolve(handle, "cuLaunchKernelEx", driver.launchKernelEx);
  resolve(handle, "cuStreamCreate", driver.streamCreate);
  resolve(handle, "cuStreamDestroy_v2", driver.streamDestroy);
  resolve(handle, "cuStreamWaitEvent", driver.streamWaitEvent);
  resolve(handle, "cuEventCreate", driver.eventCreate);
  resolve(handle, "cuEventDestroy_v2", driver.eventDestroy);
  resolve(handle, "cuEventRecord", driver.eventRecord);
  resolve(handle, "cuEventSynchronize", driver.eventSynchronize);
  resolve(handle, "cuMemcpyAsync", driver.memcpyAsync);
  resolve(handle, "cuMemsetD16Async", driver.memsetD16Async);
  resolve(handle, "cuMemAllocManaged", driver.memAllocManaged);
  resolve(handle, "cuMemHostRegister_v2", driver.memHostRegister);
  resolve(handle, "cuMemHostUnregister", driver.memHostUnregister);
  for (const Entry &entry : entries) {
    if (!entry.ok) {
      setInitError("normrt_init: '%s' has no %s; it is not a usable CUDA "
                   "driver library (too old?)",
                   path, entry.name);
      return false;
    }
  }

  return true;
}

// Loads libcuda, resolves the entry points and calls cuInit(0); sets
// gInitStatus and, on failure, gInitError. Runs once (initOnce).
void loadDriver() {
  gInitStatus = NORMRT_ERROR_NO_DRIVER;
  const char *path = nullptr;
  // The handle stays open for the life of the process, also on failure.
  void *handle = openDriver(path);
  if (!handle)
    return;
  Driver driver{};
  if (!resolveDriver(handle, path, driver))
    return;
  char error[kMessageSize / 2];
  CUresult result = driver.init(0);
  if (result != CUDA_SUCCESS) {
    describe(driver, result, error, sizeof(error));
    gInitStatus = result == CUDA_ERROR_NO_DEVICE ? NORMRT_ERROR_NO_DEVICE
                                                 : NORMRT_ERROR_NO_DRIVER;
    setInitError("normrt_init: cuInit(0) failed with the CUDA driver library "
                 "'%s': %s",
                 path, error);
    return;
  }
  int count = 0;
  result = driver.deviceGetCount(&count);
  if (result != CUDA_SUCCESS) {
    describe(driver, result, error, sizeof(error));
    gInitStatus = statusFor(result, NORMRT_ERROR_DRIVER);
    setInitError("normrt_init: cuDeviceGetCount failed: %s", error);
    return;
  }
  if (count <= 0) {
    gInitStatus = NORMRT_ERROR_NO_DEVICE;
    setInitError("normrt_init: the CUDA driver ('%s') reports no device", path);
    return;
  }
  gDriver = driver;
  gInitStatus = NORMRT_SUCCESS;
  gDriverReady.store(true, std::memory_order_release);
}

int loadDriverOnce() {
  loadDriver();
  return gInitStatus;
}

int initOnce() {
  // A function-local static is std::call_once without its cost or its
  // exported template instantiations: initialised exactly once, other threads
  // wait for it, and the initialisation happens-before every return.
  static const int status = loadDriverOnce();
  return status;
}

// initOnce(), with the failure copied to this thread's message, prefixed by
// the entry point `fn` unless it is normrt_init itself.
int requireDriver(const char *fn) {
  int status = initOnce();
  if (status == NORMRT_SUCCESS)
    return status;
  if (std::strcmp(fn, "normrt_init") == 0)
    return fail(status, "%s", gInitError);
  return fail(status, "%s: the CUDA driver is not available (%s)", fn,
              gInitError);
}

} // namespace normrt_detail
