//===- NormRuntime.cpp - CUDA driver-API runtime for generated kernels ----===//
//
// Part of norm-opt. Implements include/norm/Runtime/NormRuntime.h: a C ABI
// over the CUDA driver API with libcuda loaded by dlopen at run time. Every
// driver entry point is resolved with dlsym; cuda.h is used for types and
// enumerators only.
//
// Rules this file keeps:
//  - nothing aborts or prints; every failure returns a normrt_status and
//    writes the calling thread's message (a fixed thread_local buffer);
//  - no exception leaves an extern "C" function (each body runs in guarded();
//    the file is compiled with -fexceptions so std::bad_alloc can be caught);
//  - no work in global constructors or destructors: globals are constant-
//    initialised (function pointers, plain values, atomics), the caches live in
//    a heap object created on first use and never destroyed (process exit
//    leaves device memory and modules to the driver);
//  - the exported functions never call each other (each one works on the
//    state of its own copy of the runtime, also when a kernel library links
//    the static archive and another copy is loaded beside it).
//
//===----------------------------------------------------------------------===//

#include "norm/Runtime/NormRuntime.h"

#include "RuntimeInternal.h"

#include <cuda.h>

#include <dlfcn.h>

#include <atomic>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <tuple>
#include <utility>

namespace normrt_detail {

//===----------------------------------------------------------------------===//
// Error messages
//===----------------------------------------------------------------------===//

constexpr size_t kMessageSize = 1024;

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

// Loads libcuda, resolves the entry points and calls cuInit(0); sets
// gInitStatus and, on failure, gInitError. Runs once (initOnce).
void loadDriver() {
  gInitStatus = NORMRT_ERROR_NO_DRIVER;
  const char *override = std::getenv("NORMRT_LIBCUDA");
  const char *path = nullptr;
  void *handle = nullptr;
  if (override && *override) {
    path = override;
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      setInitError("normrt_init: cannot load the CUDA driver library '%s' "
                   "(named by NORMRT_LIBCUDA): %s",
                   path, why ? why : "dlopen failed");
      return;
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
      return;
    }
  }
  // The handle stays open for the life of the process, also on failure.

  Driver driver{};
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
      return;
    }
  }

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

//===----------------------------------------------------------------------===//
// Caches
//===----------------------------------------------------------------------===//

struct Module {
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  // std::less<> allows lookups by const char * without a std::string.
  std::map<std::string, CUfunction, std::less<>> functions;
};

struct Workspace {
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr owned = 0; // the runtime's buffer
  size_t ownedBytes = 0;
  void *user = nullptr; // the caller's buffer (normrt_set_workspace)
  size_t userBytes = 0;
  CUdeviceptr barrier = 0; // the grid-barrier word (normrt_grid_barrier_word)
};

// Grid-barrier words for CUDA graphs, made (and zeroed, synchronously) by
// the first eager normrt_grid_barrier_word of a context: a capture takes a
// word of its own from here, one that no graph used before, so its graph
// needs no memset node. A word is never handed out twice (graphs outlive
// anything the runtime can see), so kCaptureWords captured calls use them
// up (a model captures a call per layer, in several graphs: 512 KiB of
// words); later ones get a stream-ordered word and a memset node.
constexpr int kCaptureWords = 4096;
struct CaptureWords {
  CUdeviceptr base = 0; // kCaptureWords lines of 128 bytes
  int used = 0;
};

struct State {
  std::mutex contextMutex;
  CUcontext primary = nullptr; // device 0's primary context, once retained

  std::mutex moduleMutex;
  std::map<std::pair<CUcontext, const void *>, Module> modules;

  // Held while a workspace grows, which synchronises that stream.
  std::mutex workspaceMutex;
  std::map<std::tuple<CUcontext, CUstream, uint64_t>, Workspace> workspaces;
  // Per context, zeroed grid-barrier words for captures (same mutex).
  std::map<CUcontext, CaptureWords> captureWords;
};

// A number per thread, never reused (0: not drawn yet).
std::atomic<uint64_t> gNextThreadId{1};
thread_local uint64_t tThreadId;

// The workspace key of `stream` in `context`. CU_STREAM_PER_THREAD is one
// handle for a different stream in every thread, so it is keyed per thread
// too. Thread numbers are never reused: a thread that starts later cannot
// inherit a buffer that kernels of an exited thread's stream may still use;
// the buffer stays until normrt_release_all.
std::tuple<CUcontext, CUstream, uint64_t> workspaceKey(CUcontext context,
                                                       CUstream stream) {
  uint64_t thread = 0;
  if (stream == CU_STREAM_PER_THREAD) {
    if (tThreadId == 0)
      tThreadId = gNextThreadId.fetch_add(1, std::memory_order_relaxed);
    thread = tThreadId;
  }
  return std::make_tuple(context, stream, thread);
}

// The workspace entry of (context, stream), made on first use; the caller
// holds State::workspaceMutex.
Workspace &workspaceOf(State &s, CUcontext context, CUstream stream) {
  Workspace &w = s.workspaces[workspaceKey(context, stream)];
  w.context = context;
  w.stream = stream;
  return w;
}

// Created on first use, never destroyed: no global constructor, and nothing
// runs at exit when the driver may already be gone.
State &state() {
  static State *instance = new State();
  return *instance;
}

// Multiprocessor counts by device ordinal (0: not known yet).
constexpr int kMaxCachedDevices = 64;
std::atomic<int> gSmCount[kMaxCachedDevices];

// The current context, making device 0's primary context current when there
// is none. Needs the driver.
int currentContext(const char *fn, CUcontext *out) {
  CUcontext context = nullptr;
  CUresult result = gDriver.ctxGetCurrent(&context);
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_DRIVER, result, "%s: cuCtxGetCurrent failed",
                  fn);
  if (!context) {
    State &s = state();
    {
      std::lock_guard<std::mutex> lock(s.contextMutex);
      if (!s.primary) {
        CUdevice device = 0;
        result = gDriver.deviceGet(&device, 0);
        if (result != CUDA_SUCCESS)
          return cuFail(result == CUDA_ERROR_INVALID_DEVICE
                            ? NORMRT_ERROR_NO_DEVICE
                            : NORMRT_ERROR_DRIVER,
                        result, "%s: cuDeviceGet(0) failed", fn);
        CUcontext primary = nullptr;
        result = gDriver.devicePrimaryCtxRetain(&primary, device);
        if (result != CUDA_SUCCESS)
          return cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                        "%s: cuDevicePrimaryCtxRetain(device 0) failed", fn);
        s.primary = primary;
      }
      context = s.primary;
    }
    result = gDriver.ctxSetCurrent(context);
    if (result != CUDA_SUCCESS)
      return cuFail(NORMRT_ERROR_DRIVER, result,
                    "%s: cuCtxSetCurrent(device 0's primary context) failed",
                    fn);
  }
  *out = context;
  return NORMRT_SUCCESS;
}

const char *lastError() { return tLastError; }

int makeDeviceCurrent(const char *fn, int ordinal) {
  if (int status = requireDriver(fn))
    return status;
  CUdevice device = 0;
  CUresult result = gDriver.deviceGet(&device, ordinal);
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_NO_DEVICE, result, "%s: cuDeviceGet(%d) failed",
                  fn, ordinal);
  CUcontext context = nullptr;
  result = gDriver.devicePrimaryCtxRetain(&context, device);
  if (result != CUDA_SUCCESS)
    return cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                  "%s: cuDevicePrimaryCtxRetain(device %d) failed", fn,
                  ordinal);
  result = gDriver.ctxSetCurrent(context);
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_DRIVER, result,
                  "%s: cuCtxSetCurrent(device %d's primary context) failed",
                  fn, ordinal);
  return NORMRT_SUCCESS;
}

// Driver + current context, the preamble of every context-bound call.
int requireContext(const char *fn, CUcontext *out) {
  if (int status = requireDriver(fn))
    return status;
  return currentContext(fn, out);
}

// What an image looks like, for messages.
const char *imageKind(const void *image) {
  const unsigned char *b = static_cast<const unsigned char *>(image);
  // Short-circuit evaluation never reads past a NUL of a short PTX string.
  if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F')
    return "cubin";
  if (b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba)
    return "fatbin";
  return "PTX";
}

// Rounds `bytes` up for a new runtime-owned workspace: at least 1.5x the old
// size (fewer regrowths while shapes increase), in 64 KiB steps. Returns
// `bytes` itself where that would overflow.
size_t paddedWorkspaceSize(size_t bytes, size_t oldBytes) {
  constexpr size_t kStep = size_t(64) << 10;
  size_t want = bytes;
  if (oldBytes <= SIZE_MAX / 3 && oldBytes + oldBytes / 2 > want)
    want = oldBytes + oldBytes / 2;
  if (want > SIZE_MAX - (kStep - 1))
    return bytes;
  return (want + kStep - 1) / kStep * kStep;
}

// Frees and forgets the runtime-owned buffer of `w` (the caller has
// synchronised whatever may still use it).
CUresult freeOwned(Workspace &w) {
  CUresult result = CUDA_SUCCESS;
  if (w.owned) {
    result = gDriver.memFree(w.owned);
    w.owned = 0;
    w.ownedBytes = 0;
  }
  return result;
}

CUresult freeBarrier(Workspace &w) {
  CUresult result = CUDA_SUCCESS;
  if (w.barrier) {
    result = gDriver.memFree(w.barrier);
    w.barrier = 0;
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Stream capture
//===----------------------------------------------------------------------===//

bool isLegacyStream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY;
}

// The capture state of `stream`. Fails with NORMRT_ERROR_CAPTURE where no
// work may go onto it: its capture was invalidated, or it is the legacy
// stream while a blocking stream captures (the query itself breaks nothing).
int captureOf(const char *fn, CUstream stream, Capture *out) {
  *out = Capture();
  if (!gDriver.streamGetCaptureInfo)
    return NORMRT_SUCCESS; // a driver before CUDA 10.1 captures nothing
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUresult result = gDriver.streamGetCaptureInfo(stream, &status, &id);
  if (result == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
    return cuFail(NORMRT_ERROR_CAPTURE, result,
                  "%s: stream %p is the legacy default stream and another "
                  "stream of the context is capturing a CUDA graph; work on "
                  "it now would break that capture (nothing was done; pass "
                  "the capturing stream or a non-blocking one)",
                  fn, static_cast<void *>(stream));
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_DRIVER, result,
                  "%s: cuStreamGetCaptureInfo(%p) failed", fn,
                  static_cast<void *>(stream));
  if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
    return fail(NORMRT_ERROR_CAPTURE,
                "%s: the CUDA graph capture on stream %p was already "
                "invalidated by an earlier call; nothing was done (end the "
                "capture and capture again)",
                fn, static_cast<void *>(stream));
  out->active = status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  out->id = id;
  return NORMRT_SUCCESS;
}

// Relaxes this thread's stream capture mode for one scope: module loads and
// function lookups are "potentially unsafe" calls that a global or
// thread-local capture would refuse (and be invalidated by), though they
// touch no stream. Outside any capture it changes nothing.
class RelaxedCaptureMode {
public:
  RelaxedCaptureMode() {
    if (gDriver.threadExchangeStreamCaptureMode)
      swapped = gDriver.threadExchangeStreamCaptureMode(&saved) ==
                CUDA_SUCCESS;
  }
  ~RelaxedCaptureMode() {
    if (swapped)
      gDriver.threadExchangeStreamCaptureMode(&saved);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode &) = delete;
  RelaxedCaptureMode &operator=(const RelaxedCaptureMode &) = delete;

private:
  CUstreamCaptureMode saved = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool swapped = false;
};

// Stream-ordered scratch taken during a capture and not yet freed: the
// calling thread's, since one launcher call runs on one thread. A fixed
// array of plain values, so the thread_local needs no constructor or
// destructor (safe in a dlopen'ed library).
struct CaptureScratch {
  CUcontext context;
  CUstream stream;
  uint64_t capture;
  CUdeviceptr pointer;
};
constexpr int kMaxCaptureScratch = 64;
thread_local CaptureScratch tCaptureScratch[kMaxCaptureScratch];
thread_local int tCaptureScratchCount;

// A workspace query (normrt_query_begin .. normrt_query_end) on this
// thread: the largest workspace request so far; nothing launches.
thread_local bool tQuerying;
thread_local size_t tQueryBytes;
// What a query hands out instead of device memory: never dereferenced
// (nothing launches), 128-byte aligned like the runtime's own buffers.
constexpr uintptr_t kQueryPlaceholder = 0x80;

// `bytes` of stream-ordered scratch on the capturing `stream` (an allocation
// node of its graph), to be freed by normrt_scratch_done. `what` names it.
int captureAlloc(const char *fn, CUcontext context, CUstream stream,
                 const Capture &capture, size_t bytes, const char *what,
                 CUdeviceptr *out) {
  *out = 0;
  if (!gDriver.memAllocAsync || !gDriver.memFreeAsync)
    return fail(NORMRT_ERROR_CAPTURE,
                "%s: stream %p is capturing a CUDA graph and the driver has "
                "no stream-ordered allocator (cuMemAllocAsync) for the "
                "%zu-byte %s; nothing was done (set a workspace for the "
                "stream with normrt_set_workspace, or update the driver)",
                fn, static_cast<void *>(stream), bytes, what);
  CUdevice device = 0;
  CUresult result = gDriver.ctxGetDevice(&device);
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_DRIVER, result, "%s: cuCtxGetDevice failed",
                  fn);
  // Asked at every capture allocation (not cached): captures are rare, and
  // the query is a host call that captures allow.
  int pools = 0;
  result = gDriver.deviceGetAttribute(
      &pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device);
  if (result != CUDA_SUCCESS || !pools)
    return fail(NORMRT_ERROR_CAPTURE,
                "%s: stream %p is capturing a CUDA graph and device %d has "
                "no memory pools (stream-ordered allocation) for the "
                "%zu-byte %s; nothing was done (set a workspace for the "
                "stream with normrt_set_workspace)",
                fn, static_cast<void *>(stream), static_cast<int>(device),
                bytes, what);
  if (tCaptureScratchCount == kMaxCaptureScratch)
    return fail(NORMRT_ERROR_CAPTURE,
                "%s: %d scratch allocations of captures are pending on this "
                "thread; call normrt_scratch_done(stream) after each "
                "launcher's launches",
                fn, kMaxCaptureScratch);
  CUdeviceptr pointer = 0;
  result = gDriver.memAllocAsync(&pointer, bytes, stream);
  if (result != CUDA_SUCCESS)
    return cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                  "%s: cuMemAllocAsync(%zu bytes) for the %s of capturing "
                  "stream %p failed",
                  fn, bytes, what, static_cast<void *>(stream));
  tCaptureScratch[tCaptureScratchCount++] =
      CaptureScratch{context, stream, capture.id, pointer};
  *out = pointer;
  return NORMRT_SUCCESS;
}

// Makes the capture words of `context` on `stream`, which does not capture
// (the caller holds State::workspaceMutex). Zeroed and synchronised now,
// once per context, since graphs using them may replay on any stream. A
// failure is not an error: captures then use memset nodes.
void makeCaptureWords(State &s, CUcontext context, CUstream stream) {
  CUdeviceptr base = 0;
  if (gDriver.memAlloc(&base, 128u * kCaptureWords) != CUDA_SUCCESS)
    return;
  if (gDriver.memsetD32Async(base, 0, 32u * kCaptureWords, stream) !=
          CUDA_SUCCESS ||
      gDriver.streamSynchronize(stream) != CUDA_SUCCESS) {
    gDriver.memFree(base);
    return;
  }
  s.captureWords[context].base = base;
}

} // namespace normrt_detail

using namespace normrt_detail;

//===----------------------------------------------------------------------===//
// The C API
//===----------------------------------------------------------------------===//

namespace normrt_detail {
// Any dynamic shared memory raises the function's limit to it: the kernel's
// static shared memory counts against the same 48 KiB default.
int allowDynamicShared(const char *fn, CUfunction f, unsigned shared_bytes) {
  if (shared_bytes == 0)
    return NORMRT_SUCCESS;
  CUresult result = gDriver.funcSetAttribute(
      f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
      static_cast<int>(shared_bytes));
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_LAUNCH, result,
                  "%s: cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, %u) "
                  "failed",
                  fn, shared_bytes);
  return NORMRT_SUCCESS;
}

// Multiprocessors of the current context's device (cached per device);
// `fn` names the entry point in messages.
int smCount(const char *fn, int *out) {
  CUcontext context = nullptr;
  if (int status = requireContext(fn, &context))
    return status;
  CUdevice device = 0;
  CUresult result = gDriver.ctxGetDevice(&device);
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_DRIVER, result, "%s: cuCtxGetDevice failed",
                  fn);
  bool cacheable = device >= 0 && device < kMaxCachedDevices;
  int count =
      cacheable ? gSmCount[device].load(std::memory_order_relaxed) : 0;
  if (count <= 0) {
    result = gDriver.deviceGetAttribute(
        &count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    if (result != CUDA_SUCCESS)
      return cuFail(NORMRT_ERROR_DRIVER, result,
                    "%s: cuDeviceGetAttribute(MULTIPROCESSOR_COUNT, "
                    "device %d) failed",
                    fn, static_cast<int>(device));
    if (cacheable)
      gSmCount[device].store(count, std::memory_order_relaxed);
  }
  *out = count;
  return static_cast<int>(NORMRT_SUCCESS);
}

// The argument checks every launch shares: nonzero dimensions within the
// limits every CUDA device has had since compute capability 3.0.
int checkLaunchShape(const char *fn, const void *function, unsigned grid_x,
                     unsigned grid_y, unsigned block_x, unsigned shared_bytes) {
  if (!function)
    return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: function is NULL", fn);
  if (grid_x == 0 || grid_y == 0 || block_x == 0)
    return fail(NORMRT_ERROR_INVALID_ARGUMENT,
                "%s: grid %ux%u, block %u: every dimension must be nonzero",
                fn, grid_x, grid_y, block_x);
  if (grid_x > 0x7fffffffu || grid_y > 65535u || block_x > 1024u)
    return fail(NORMRT_ERROR_OUT_OF_RANGE,
                "%s: grid %ux%u, block %u exceeds the limits (grid x < "
                "2^31, grid y <= 65535, block <= 1024)",
                fn, grid_x, grid_y, block_x);
  if (shared_bytes > static_cast<unsigned>(INT_MAX))
    return fail(NORMRT_ERROR_OUT_OF_RANGE,
                "%s: %u bytes of shared memory is out of range", fn,
                shared_bytes);
  return NORMRT_SUCCESS;
}

// A launch on the legacy default stream while a blocking stream of the
// context captures would invalidate that capture: refuse it first. Other
// streams need no query (work on a capturing stream is what capture is).
int checkLegacyStream(const char *fn, CUstream stream) {
  if (!isLegacyStream(stream))
    return NORMRT_SUCCESS;
  Capture capture;
  return captureOf(fn, stream, &capture);
}

// CTAs of `f` per multiprocessor (the driver's occupancy calculator).
/// The arguments of an occupancy query (before any driver call); *out = 0.
int checkOccupancyQuery(const char *fn, void *function, unsigned block_x,
                        unsigned shared_bytes, int *out) {
  if (!out)
    return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
  *out = 0;
  if (!function || block_x == 0 || block_x > 1024u)
    return fail(NORMRT_ERROR_INVALID_ARGUMENT,
                "%s: function is NULL or block %u is not in [1, 1024]", fn,
                block_x);
  if (shared_bytes > static_cast<unsigned>(INT_MAX))
    return fail(NORMRT_ERROR_OUT_OF_RANGE,
                "%s: %u bytes of shared memory is out of range", fn,
                shared_bytes);
  return NORMRT_SUCCESS;
}

int maxActiveCtas(const char *fn, CUfunction f, unsigned block_x,
                  unsigned shared_bytes, int *out) {
  if (int status = allowDynamicShared(fn, f, shared_bytes))
    return status;
  int blocks = 0;
  CUresult result = gDriver.occupancyMaxActiveBlocks(
      &blocks, f, static_cast<int>(block_x), shared_bytes);
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_DRIVER, result,
                  "%s: cuOccupancyMaxActiveBlocksPerMultiprocessor failed", fn);
  *out = blocks;
  return NORMRT_SUCCESS;
}

// The kernel `kernel_name` of `image`, loaded once per context and cached.
int getFunction(const char *fn, const void *image, const char *kernel_name,
                void **function_out) {
  if (!function_out)
    return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: function_out is NULL", fn);
  *function_out = nullptr;
  if (!image)
    return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: image is NULL", fn);
  if (!kernel_name || !*kernel_name)
    return fail(NORMRT_ERROR_INVALID_ARGUMENT,
                "%s: kernel_name is NULL or empty", fn);
  CUcontext context = nullptr;
  if (int status = requireContext(fn, &context))
    return status;

  State &s = state();
  std::lock_guard<std::mutex> lock(s.moduleMutex);
  auto key = std::make_pair(context, image);
  auto it = s.modules.find(key);
  std::unique_ptr<RelaxedCaptureMode> relaxed;
  if (it == s.modules.end()) {
    relaxed.reset(new RelaxedCaptureMode());
    CUmodule module = nullptr;
    CUresult result = gDriver.moduleLoadData(&module, image);
    if (result != CUDA_SUCCESS)
      return cuFail(statusFor(result, NORMRT_ERROR_MODULE), result,
                    "%s(\"%s\"): cuModuleLoadData of the %s image at %p "
                    "failed%s",
                    fn, kernel_name, imageKind(image), image,
                    statusFor(result, 0) == NORMRT_ERROR_CAPTURE
                        ? " during a CUDA graph capture (call the "
                          "function once before capturing)"
                        : "");
    try {
      Module entry;
      entry.context = context;
      entry.module = module;
      it = s.modules.emplace(key, std::move(entry)).first;
    } catch (...) {
      gDriver.moduleUnload(module);
      throw;
    }
  }
  Module &entry = it->second;
  auto found = entry.functions.find(kernel_name);
  if (found == entry.functions.end()) {
    if (!relaxed)
      relaxed.reset(new RelaxedCaptureMode());
    CUfunction function = nullptr;
    CUresult result =
        gDriver.moduleGetFunction(&function, entry.module, kernel_name);
    if (result != CUDA_SUCCESS)
      return cuFail(statusFor(result, NORMRT_ERROR_MODULE), result,
                    "%s: no kernel '%s' in the %s image at %p "
                    "(cuModuleGetFunction failed)",
                    fn, kernel_name, imageKind(image), image);
    // With lazy loading (the default since CUDA 12.2) the kernel itself
    // loads at its first use, which may be a launch inside a capture:
    // load it here, still in relaxed mode.
    if (gDriver.funcLoad) {
      result = gDriver.funcLoad(function);
      if (result != CUDA_SUCCESS)
        return cuFail(statusFor(result, NORMRT_ERROR_MODULE), result,
                      "%s: cuFuncLoad of kernel '%s' in the %s image at "
                      "%p failed",
                      fn, kernel_name, imageKind(image), image);
    }
    found = entry.functions.emplace(kernel_name, function).first;
  }
  *function_out = found->second;
  return static_cast<int>(NORMRT_SUCCESS);
}
} // namespace normrt_detail

extern "C" {

const char *normrt_status_string(int status) {
  switch (status) {
  case NORMRT_SUCCESS:
    return "NORMRT_SUCCESS";
  case NORMRT_ERROR_NO_DRIVER:
    return "NORMRT_ERROR_NO_DRIVER";
  case NORMRT_ERROR_NO_DEVICE:
    return "NORMRT_ERROR_NO_DEVICE";
  case NORMRT_ERROR_INVALID_ARGUMENT:
    return "NORMRT_ERROR_INVALID_ARGUMENT";
  case NORMRT_ERROR_MISALIGNED:
    return "NORMRT_ERROR_MISALIGNED";
  case NORMRT_ERROR_OUT_OF_RANGE:
    return "NORMRT_ERROR_OUT_OF_RANGE";
  case NORMRT_ERROR_MODULE:
    return "NORMRT_ERROR_MODULE";
  case NORMRT_ERROR_LAUNCH:
    return "NORMRT_ERROR_LAUNCH";
  case NORMRT_ERROR_OUT_OF_MEMORY:
    return "NORMRT_ERROR_OUT_OF_MEMORY";
  case NORMRT_ERROR_DRIVER:
    return "NORMRT_ERROR_DRIVER";
  case NORMRT_ERROR_CAPTURE:
    return "NORMRT_ERROR_CAPTURE";
  default:
    return "NORMRT_ERROR_UNKNOWN";
  }
}

const char *normrt_last_error(void) { return tLastError; }

int normrt_init(void) {
  return guarded("normrt_init", [] { return requireDriver("normrt_init"); });
}

int normrt_ensure_context(void) {
  return guarded("normrt_ensure_context", [] {
    CUcontext context = nullptr;
    return requireContext("normrt_ensure_context", &context);
  });
}

int normrt_sm_count(int *out) {
  constexpr const char *fn = "normrt_sm_count";
  return guarded(fn, [&] {
    if (!out)
      return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = 0;
    return smCount(fn, out);
  });
}

int normrt_get_function(const void *image, const char *kernel_name,
                        void **function_out) {
  constexpr const char *fn = "normrt_get_function";
  return guarded(fn, [&] {
    return getFunction(fn, image, kernel_name, function_out);
  });
}

int normrt_workspace(void *stream, size_t bytes, void **ptr_out) {
  constexpr const char *fn = "normrt_workspace";
  return guarded(fn, [&] {
    if (!ptr_out)
      return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: ptr_out is NULL", fn);
    *ptr_out = nullptr;
    CUcontext context = nullptr;
    if (int status = requireContext(fn, &context))
      return status;
    if (bytes == 0)
      return static_cast<int>(NORMRT_SUCCESS);
    if (tQuerying) {
      tQueryBytes = std::max(tQueryBytes, bytes);
      *ptr_out = reinterpret_cast<void *>(kQueryPlaceholder);
      return static_cast<int>(NORMRT_SUCCESS);
    }

    CUstream cuStream = static_cast<CUstream>(stream);
    State &s = state();
    std::lock_guard<std::mutex> lock(s.workspaceMutex);
    Workspace &w = workspaceOf(s, context, cuStream);
    if (w.user) {
      if (w.userBytes < bytes)
        return fail(NORMRT_ERROR_OUT_OF_RANGE,
                    "%s: the workspace set by normrt_set_workspace for "
                    "stream %p has %zu bytes; this call needs %zu bytes",
                    fn, stream, w.userBytes, bytes);
      *ptr_out = w.user;
      return static_cast<int>(NORMRT_SUCCESS);
    }
    // During capture: the graph's own stream-ordered buffer, never the
    // stream's (graphs replay on other streams, concurrently).
    Capture capture;
    if (int status = captureOf(fn, cuStream, &capture))
      return status;
    if (capture.active) {
      CUdeviceptr pointer = 0;
      if (int status = captureAlloc(fn, context, cuStream, capture, bytes,
                                    "workspace", &pointer))
        return status;
      *ptr_out = reinterpret_cast<void *>(static_cast<uintptr_t>(pointer));
      return static_cast<int>(NORMRT_SUCCESS);
    }
    if (w.ownedBytes >= bytes) {
      *ptr_out = reinterpret_cast<void *>(static_cast<uintptr_t>(w.owned));
      return static_cast<int>(NORMRT_SUCCESS);
    }
    size_t oldBytes = w.ownedBytes;
    if (w.owned) {
      // Kernels queued on this stream may still use the old buffer.
      CUresult result = gDriver.streamSynchronize(cuStream);
      if (result != CUDA_SUCCESS)
        return cuFail(NORMRT_ERROR_DRIVER, result,
                      "%s: cuStreamSynchronize(%p) before growing the "
                      "workspace from %zu to %zu bytes failed",
                      fn, stream, oldBytes, bytes);
      result = freeOwned(w);
      if (result != CUDA_SUCCESS)
        return cuFail(NORMRT_ERROR_DRIVER, result,
                      "%s: cuMemFree_v2 of the old %zu-byte workspace failed",
                      fn, oldBytes);
    }
    size_t size = paddedWorkspaceSize(bytes, oldBytes);
    CUdeviceptr pointer = 0;
    CUresult result = gDriver.memAlloc(&pointer, size);
    if (result == CUDA_ERROR_OUT_OF_MEMORY && size != bytes) {
      size = bytes; // the padding is optional
      result = gDriver.memAlloc(&pointer, size);
    }
    if (result != CUDA_SUCCESS)
      return cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                    "%s: cuMemAlloc_v2(%zu bytes) for the workspace of "
                    "stream %p failed",
                    fn, size, stream);
    w.owned = pointer;
    w.ownedBytes = size;
    *ptr_out = reinterpret_cast<void *>(static_cast<uintptr_t>(pointer));
    return static_cast<int>(NORMRT_SUCCESS);
  });
}

int normrt_set_workspace(void *stream, void *ptr, size_t bytes) {
  constexpr const char *fn = "normrt_set_workspace";
  return guarded(fn, [&] {
    if (ptr && bytes == 0)
      return fail(NORMRT_ERROR_INVALID_ARGUMENT,
                  "%s: bytes is 0 for a non-NULL buffer", fn);
    if (ptr && reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      return fail(NORMRT_ERROR_MISALIGNED,
                  "%s: the workspace %p is not 16-byte aligned", fn, ptr);
    CUcontext context = nullptr;
    if (int status = requireContext(fn, &context))
      return status;
    CUstream cuStream = static_cast<CUstream>(stream);
    State &s = state();
    std::lock_guard<std::mutex> lock(s.workspaceMutex);
    auto key = workspaceKey(context, cuStream);
    if (!ptr) {
      auto it = s.workspaces.find(key);
      if (it != s.workspaces.end()) {
        it->second.user = nullptr;
        it->second.userBytes = 0;
      }
      return static_cast<int>(NORMRT_SUCCESS);
    }
    Workspace &w = workspaceOf(s, context, cuStream);
    w.user = ptr;
    w.userBytes = bytes;
    return static_cast<int>(NORMRT_SUCCESS);
  });
}

namespace {
/// A launch of normrt_launch (dependent = false) or normrt_launch_dependent.
int launchKernel(const char *fn, void *function, unsigned grid_x,
                 unsigned grid_y, unsigned block_x, unsigned shared_bytes,
                 void *stream, void **args, bool dependent) {
  if (int status =
          checkLaunchShape(fn, function, grid_x, grid_y, block_x, shared_bytes))
    return status;
  if (int status = requireDriver(fn))
    return status;
  if (tQuerying)
    return static_cast<int>(NORMRT_SUCCESS);
  CUfunction f = static_cast<CUfunction>(function);
  CUstream cuStream = static_cast<CUstream>(stream);
  if (int status = checkLegacyStream(fn, cuStream))
    return status;
  if (int status = allowDynamicShared(fn, f, shared_bytes))
    return status;
  if (dependent && gDriver.launchKernelEx &&
      !envSwitchSet("NORMRT_NO_DEPENDENT_LAUNCH")) {
    // The kernel may start once every CTA of the kernel before it on the
    // stream has signalled (griddepcontrol.launch_dependents) or finished;
    // it waits for that kernel's completion itself (griddepcontrol.wait).
    CUlaunchAttribute attribute = {};
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config = {};
    config.gridDimX = grid_x;
    config.gridDimY = grid_y;
    config.gridDimZ = 1;
    config.blockDimX = block_x;
    config.blockDimY = 1;
    config.blockDimZ = 1;
    config.sharedMemBytes = shared_bytes;
    config.hStream = cuStream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    CUresult result = gDriver.launchKernelEx(&config, f, args, nullptr);
    if (result != CUDA_SUCCESS)
      return cuFail(NORMRT_ERROR_LAUNCH, result,
                    "%s: cuLaunchKernelEx(grid %ux%u, block %u, %u bytes of "
                    "shared memory, stream %p, programmatic stream "
                    "serialization) failed",
                    fn, grid_x, grid_y, block_x, shared_bytes, stream);
    return static_cast<int>(NORMRT_SUCCESS);
  }
  CUresult result = gDriver.launchKernel(f, grid_x, grid_y, 1, block_x, 1, 1,
                                         shared_bytes, cuStream, args, nullptr);
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_LAUNCH, result,
                  "%s: cuLaunchKernel(grid %ux%u, block %u, %u bytes of "
                  "shared memory, stream %p) failed",
                  fn, grid_x, grid_y, block_x, shared_bytes, stream);
  return static_cast<int>(NORMRT_SUCCESS);
}
} // namespace

int normrt_launch(void *function, unsigned grid_x, unsigned grid_y,
                  unsigned block_x, unsigned shared_bytes, void *stream,
                  void **args) {
  constexpr const char *fn = "normrt_launch";
  return guarded(fn, [&] {
    return launchKernel(fn, function, grid_x, grid_y, block_x, shared_bytes,
                        stream, args, /*dependent=*/false);
  });
}

int normrt_launch_dependent(void *function, unsigned grid_x, unsigned grid_y,
                            unsigned block_x, unsigned shared_bytes,
                            void *stream, void **args) {
  constexpr const char *fn = "normrt_launch_dependent";
  return guarded(fn, [&] {
    return launchKernel(fn, function, grid_x, grid_y, block_x, shared_bytes,
                        stream, args, /*dependent=*/true);
  });
}

int normrt_check_aligned(const void *ptr, size_t alignment, const char *what) {
  constexpr const char *fn = "normrt_check_aligned";
  return guarded(fn, [&] {
    const char *name = what && *what ? what : "pointer";
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
      return fail(NORMRT_ERROR_INVALID_ARGUMENT,
                  "%s: alignment %zu for %s is not a power of two", fn,
                  alignment, name);
    uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
    if (address % alignment != 0)
      return fail(NORMRT_ERROR_MISALIGNED,
                  "%s: %s (%p) is not aligned to %zu bytes (address mod %zu "
                  "= %zu)",
                  fn, name, ptr, alignment, alignment,
                  static_cast<size_t>(address % alignment));
    return static_cast<int>(NORMRT_SUCCESS);
  });
}

void normrt_release_all(void) {
  guarded("normrt_release_all", [] {
    // Without a driver nothing was ever loaded or allocated.
    if (!gDriverReady.load(std::memory_order_acquire))
      return static_cast<int>(NORMRT_SUCCESS);
    State &s = state();
    std::lock_guard<std::mutex> moduleLock(s.moduleMutex);
    std::lock_guard<std::mutex> workspaceLock(s.workspaceMutex);
    CUcontext saved = nullptr;
    bool restore = gDriver.ctxGetCurrent(&saved) == CUDA_SUCCESS;
    CUcontext current = saved;
    auto enter = [&](CUcontext context) {
      if (context != current && gDriver.ctxSetCurrent(context) == CUDA_SUCCESS)
        current = context;
      return current == context;
    };
    int status = NORMRT_SUCCESS;
    // Workspaces first: kernels still running may use them. A whole-context
    // synchronisation also covers streams destroyed since.
    std::map<CUcontext, bool> synced;
    for (auto &item : s.workspaces) {
      Workspace &w = item.second;
      if (!w.owned && !w.barrier)
        continue;
      if (!enter(w.context)) {
        status = fail(NORMRT_ERROR_DRIVER,
                      "normrt_release_all: cannot make the context of a "
                      "workspace current; its %zu bytes (and %d of its "
                      "grid-barrier word) are leaked",
                      w.ownedBytes, w.barrier ? 128 : 0);
        continue;
      }
      if (!synced[w.context])
        synced[w.context] = gDriver.ctxSynchronize() == CUDA_SUCCESS;
      if (CUresult result = freeOwned(w))
        status = cuFail(NORMRT_ERROR_DRIVER, result,
                        "normrt_release_all: cuMemFree_v2 failed");
      if (CUresult result = freeBarrier(w))
        status = cuFail(NORMRT_ERROR_DRIVER, result,
                        "normrt_release_all: cuMemFree_v2 failed");
    }
    s.workspaces.clear();
    for (auto &item : s.captureWords) {
      if (!enter(item.first)) {
        status = fail(NORMRT_ERROR_DRIVER,
                      "normrt_release_all: cannot make the context of the "
                      "capture barrier words current; they are leaked");
        continue;
      }
      if (!synced[item.first])
        synced[item.first] = gDriver.ctxSynchronize() == CUDA_SUCCESS;
      if (CUresult result = gDriver.memFree(item.second.base))
        status = cuFail(NORMRT_ERROR_DRIVER, result,
                        "normrt_release_all: cuMemFree_v2 failed");
    }
    s.captureWords.clear();
    for (auto &item : s.modules) {
      Module &m = item.second;
      if (!enter(m.context)) {
        status = fail(NORMRT_ERROR_DRIVER,
                      "normrt_release_all: cannot make the context of a "
                      "module current; it stays loaded");
        continue;
      }
      if (CUresult result = gDriver.moduleUnload(m.module))
        status = cuFail(NORMRT_ERROR_DRIVER, result,
                        "normrt_release_all: cuModuleUnload failed");
    }
    s.modules.clear();
    if (restore && current != saved)
      gDriver.ctxSetCurrent(saved);
    return status;
  });
}

int normrt_max_active_ctas(void *function, unsigned block_x,
                           unsigned shared_bytes, int *out) {
  constexpr const char *fn = "normrt_max_active_ctas";
  return guarded(fn, [&] {
    if (int status = checkOccupancyQuery(fn, function, block_x,
                                         shared_bytes, out))
      return status;
    if (int status = requireDriver(fn))
      return status;
    return maxActiveCtas(fn, static_cast<CUfunction>(function), block_x,
                         shared_bytes, out);
  });
}

int normrt_max_active_clusters(void *function, unsigned block_x,
                               unsigned shared_bytes, unsigned cluster_ctas,
                               int *out) {
  constexpr const char *fn = "normrt_max_active_clusters";
  return guarded(fn, [&] {
    if (int status = checkOccupancyQuery(fn, function, block_x,
                                         shared_bytes, out))
      return status;
    if (cluster_ctas == 0 || cluster_ctas > 16u)
      return fail(NORMRT_ERROR_INVALID_ARGUMENT,
                  "%s: cluster of %u CTAs is not in [1, 16]", fn,
                  cluster_ctas);
    if (int status = requireDriver(fn))
      return status;
    if (!gDriver.occupancyMaxActiveClusters)
      return fail(NORMRT_ERROR_DRIVER,
                  "%s: the driver has no cuOccupancyMaxActiveClusters "
                  "(clustered kernels need CUDA 12)",
                  fn);
    CUfunction f = static_cast<CUfunction>(function);
    if (int status = allowDynamicShared(fn, f, shared_bytes))
      return status;
    CUlaunchAttribute cluster = {};
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = cluster_ctas;
    cluster.value.clusterDim.y = 1;
    cluster.value.clusterDim.z = 1;
    CUlaunchConfig config = {};
    config.gridDimX = cluster_ctas;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = block_x;
    config.blockDimY = config.blockDimZ = 1;
    config.sharedMemBytes = shared_bytes;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int clusters = 0;
    CUresult result = gDriver.occupancyMaxActiveClusters(&clusters, f, &config);
    if (result != CUDA_SUCCESS)
      return cuFail(NORMRT_ERROR_DRIVER, result,
                    "%s: cuOccupancyMaxActiveClusters(cluster %u, block %u, "
                    "%u bytes of shared memory) failed",
                    fn, cluster_ctas, block_x, shared_bytes);
    *out = clusters;
    return static_cast<int>(NORMRT_SUCCESS);
  });
}

int normrt_cooperative_fits(void *function, unsigned grid_x,
                            unsigned block_x, unsigned shared_bytes,
                            int *out) {
  constexpr const char *fn = "normrt_cooperative_fits";
  return guarded(fn, [&] {
    if (!out)
      return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = 0;
    if (int status =
            checkLaunchShape(fn, function, grid_x, 1, block_x, shared_bytes))
      return status;
    if (int status = requireDriver(fn))
      return status;
    if (envSwitchSet("NORMRT_NO_COOPERATIVE") ||
        !gDriver.launchCooperativeKernel || !gDriver.memsetD32Async)
      return static_cast<int>(NORMRT_SUCCESS);
    CUcontext context = nullptr;
    if (int status = requireContext(fn, &context))
      return status;
    CUdevice device = 0;
    int supported = 0, sms = 0;
    if (gDriver.ctxGetDevice(&device) != CUDA_SUCCESS ||
        gDriver.deviceGetAttribute(&supported,
                                   CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH,
                                   device) != CUDA_SUCCESS ||
        !supported)
      return static_cast<int>(NORMRT_SUCCESS);
    if (int status = smCount(fn, &sms))
      return status;
    int perSM = 0;
    if (int status = maxActiveCtas(fn, static_cast<CUfunction>(function),
                                   block_x, shared_bytes, &perSM))
      return status;
    *out = grid_x <= static_cast<unsigned>(sms) * static_cast<unsigned>(perSM);
    return static_cast<int>(NORMRT_SUCCESS);
  });
}

int normrt_grid_barrier_word(void *stream, void **ptr_out) {
  constexpr const char *fn = "normrt_grid_barrier_word";
  return guarded(fn, [&] {
    if (!ptr_out)
      return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: ptr_out is NULL", fn);
    *ptr_out = nullptr;
    CUcontext context = nullptr;
    if (int status = requireContext(fn, &context))
      return status;
    if (tQuerying) {
      *ptr_out = reinterpret_cast<void *>(kQueryPlaceholder);
      return static_cast<int>(NORMRT_SUCCESS);
    }
    if (!gDriver.memsetD32Async)
      return fail(NORMRT_ERROR_DRIVER, "%s: the driver has no cuMemsetD32Async",
                  fn);
    CUstream cuStream = static_cast<CUstream>(stream);
    Capture capture;
    if (int status = captureOf(fn, cuStream, &capture))
      return status;
    State &s = state();
    if (capture.active) {
      // A word no graph used before, zeroed outside the capture: the kernel
      // leaves it as it found it (modulo 2^31) at every replay.
      {
        std::lock_guard<std::mutex> lock(s.workspaceMutex);
        auto it = s.captureWords.find(context);
        if (it != s.captureWords.end() && it->second.used < kCaptureWords) {
          CUdeviceptr pointer = it->second.base + 128u * it->second.used++;
          *ptr_out = reinterpret_cast<void *>(static_cast<uintptr_t>(pointer));
          return static_cast<int>(NORMRT_SUCCESS);
        }
      }
      // Else the graph's own stream-ordered word, zeroed by a memset node at
      // every replay.
      CUdeviceptr pointer = 0;
      if (int status = captureAlloc(fn, context, cuStream, capture, 128,
                                    "grid-barrier word", &pointer))
        return status;
      CUresult result = gDriver.memsetD32Async(pointer, 0, 32, cuStream);
      if (result != CUDA_SUCCESS) // normrt_scratch_done frees it
        return cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                      "%s: cuMemsetD32Async of the barrier word on "
                      "capturing stream %p failed",
                      fn, stream);
      *ptr_out = reinterpret_cast<void *>(static_cast<uintptr_t>(pointer));
      return static_cast<int>(NORMRT_SUCCESS);
    }
    std::lock_guard<std::mutex> lock(s.workspaceMutex);
    Workspace &w = workspaceOf(s, context, cuStream);
    if (!s.captureWords.count(context))
      makeCaptureWords(s, context, cuStream);
    if (!w.barrier) {
      // One 128-byte line per stream: launches on one stream run in order,
      // launches on two streams never share a counter.
      CUdeviceptr pointer = 0;
      CUresult result = gDriver.memAlloc(&pointer, 128);
      if (result != CUDA_SUCCESS)
        return cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                      "%s: cuMemAlloc_v2(128 bytes) failed", fn);
      result = gDriver.memsetD32Async(pointer, 0, 32, cuStream);
      if (result != CUDA_SUCCESS) {
        gDriver.memFree(pointer);
        return cuFail(NORMRT_ERROR_DRIVER, result,
                      "%s: cuMemsetD32Async of the barrier word failed", fn);
      }
      w.barrier = pointer;
    }
    *ptr_out = reinterpret_cast<void *>(static_cast<uintptr_t>(w.barrier));
    return static_cast<int>(NORMRT_SUCCESS);
  });
}

int normrt_launch_cooperative(void *function, unsigned grid_x,
                              unsigned block_x, unsigned shared_bytes,
                              void *stream, void **args) {
  constexpr const char *fn = "normrt_launch_cooperative";
  return guarded(fn, [&] {
    if (int status =
            checkLaunchShape(fn, function, grid_x, 1, block_x, shared_bytes))
      return status;
    if (int status = requireDriver(fn))
      return status;
    if (tQuerying)
      return static_cast<int>(NORMRT_SUCCESS);
    if (!gDriver.launchCooperativeKernel)
      return fail(NORMRT_ERROR_LAUNCH,
                  "%s: the driver has no cuLaunchCooperativeKernel", fn);
    CUfunction f = static_cast<CUfunction>(function);
    if (int status = checkLegacyStream(fn, static_cast<CUstream>(stream)))
      return status;
    if (int status = allowDynamicShared(fn, f, shared_bytes))
      return status;
    CUresult result = gDriver.launchCooperativeKernel(
        f, grid_x, 1, 1, block_x, 1, 1, shared_bytes,
        static_cast<CUstream>(stream), args);
    if (result != CUDA_SUCCESS)
      return cuFail(NORMRT_ERROR_LAUNCH, result,
                    "%s: cuLaunchCooperativeKernel(grid %u, block %u, %u "
                    "bytes of shared memory, stream %p) failed",
                    fn, grid_x, block_x, shared_bytes, stream);
    return static_cast<int>(NORMRT_SUCCESS);
  });
}

int normrt_scratch_done(void *stream) {
  constexpr const char *fn = "normrt_scratch_done";
  return guarded(fn, [&] {
    if (tCaptureScratchCount == 0)
      return static_cast<int>(NORMRT_SUCCESS); // nothing taken in a capture
    CUcontext context = nullptr;
    if (int status = requireContext(fn, &context))
      return status;
    CUstream cuStream = static_cast<CUstream>(stream);
    Capture capture;
    int status = captureOf(fn, cuStream, &capture);
    // This (context, stream)'s entries leave the list whatever happens: an
    // allocation of an ended or invalidated capture belongs to its graph.
    int kept = 0, stale = 0;
    for (int i = 0; i < tCaptureScratchCount; ++i) {
      CaptureScratch entry = tCaptureScratch[i];
      if (entry.context != context || entry.stream != cuStream) {
        tCaptureScratch[kept++] = entry;
        continue;
      }
      if (status != NORMRT_SUCCESS || !capture.active ||
          entry.capture != capture.id) {
        ++stale;
        continue;
      }
      CUresult result = gDriver.memFreeAsync(entry.pointer, cuStream);
      if (result != CUDA_SUCCESS && status == NORMRT_SUCCESS)
        status = cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                        "%s: cuMemFreeAsync of capture scratch on stream %p "
                        "failed",
                        fn, stream);
    }
    tCaptureScratchCount = kept;
    if (status == NORMRT_SUCCESS && stale > 0 && !capture.active)
      status = fail(NORMRT_ERROR_CAPTURE,
                    "%s: the capture on stream %p ended before its %d "
                    "scratch allocation(s) were freed; the graph keeps them "
                    "(call normrt_scratch_done before ending the capture)",
                    fn, stream, stale);
    return status;
  });
}

int normrt_query_begin(void) {
  tQuerying = true;
  tQueryBytes = 0;
  return static_cast<int>(NORMRT_SUCCESS);
}

int normrt_query_end(size_t *bytes_out) {
  constexpr const char *fn = "normrt_query_end";
  bool was = tQuerying;
  size_t bytes = tQueryBytes;
  tQuerying = false;
  tQueryBytes = 0;
  if (!bytes_out)
    return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: bytes_out is NULL", fn);
  *bytes_out = bytes;
  if (!was)
    return fail(NORMRT_ERROR_INVALID_ARGUMENT,
                "%s: no query on this thread (normrt_query_begin first)", fn);
  return static_cast<int>(NORMRT_SUCCESS);
}

// Lets generated launchers report their own checks (shapes, strides)
// through the same thread-local message.
int normrt_report(int status, const char *message) {
  return fail(status, "%s", message ? message : "");
}

} // extern "C"
