//===- RuntimeInternal.h - What the runtime's files share -------*- C++ -*-===//
//
// Part of norm-opt. Internal to lib/Runtime (hidden symbols, never
// installed): the driver's entry points, the thread's error message, the
// context and capture helpers, and the module cache, for the files beside
// the runtime's C API (UpstreamABI.cpp: the entry points upstream gpu-to-llvm
// calls).
//
// The files: Driver.cpp (loading libcuda, messages), Contexts.cpp (the
// current context, the module / workspace caches, stream capture),
// Kernels.cpp (function lookup, occupancy, launch checks), Api.cpp /
// Memory.cpp / Launch.cpp (the C API by concern), UpstreamABI.cpp (the mgpu*
// entry points), LaunchSequence.cpp (the host lowering's normrt_ir_*).
//
// Rules the runtime keeps:
//  - nothing aborts or prints; every failure returns a normrt_status and
//    writes the calling thread's message (a fixed thread_local buffer);
//  - no exception leaves an extern "C" function (each body runs in guarded();
//    the file is compiled with -fexceptions so std::bad_alloc can be caught);
//  - no work in global constructors or destructors: globals are constant-
//    initialised (function pointers, plain values, atomics), the caches live in
//    a heap object created on first use and never destroyed (process exit
//    leaves device memory and modules to the driver);
//  - each copy of the runtime works on its own state: the exported functions
//    call each other only from LaunchSequence.cpp, and those calls bind
//    inside the copy (-Bsymbolic for libnorm_runtime.so; a kernel library
//    links the static archive with a version script that keeps all but its
//    launchers and normrt_* local, and -Bsymbolic).
//
//===----------------------------------------------------------------------===//

#ifndef NORM_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define NORM_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "norm/Runtime/NormRuntime.h"

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <exception>
#include <new>

namespace normrt_detail {

// Contexts.cpp: the caches and stream capture.
constexpr size_t kMessageSize = 1024;

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
int maxActiveCtas(const char *fn, CUfunction f, unsigned block_x,
                  unsigned shared_bytes, int *out);


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

// Driver.cpp
extern thread_local char tLastError[kMessageSize];
extern int gInitStatus;
extern char gInitError[kMessageSize];
extern std::atomic<bool> gDriverReady;
// Bumped by normrt_release_all: function handles cached outside the module
// cache (UpstreamABI.cpp's per-thread lookups) are stale after it.
extern std::atomic<uint64_t> gModuleGeneration;
/// This thread's recent lookups of mgpuModuleGetFunction (Kernels.cpp):
/// the function of (current context, module, name), or NULL.
void *recentFunction(const void *module, const char *name);
void rememberFunction(const void *module, const char *name, void *function);

// LaunchSequence.cpp: the host lowering's launch sequence on this thread
// (normrt_ir_begin .. normrt_ir_end).
struct LaunchSequence {
  bool active = false;
  int status = 0;           // the first failure (0: none)
  CUstream stream = nullptr; // what mgpuStreamCreate returns in it
  int nextKind = 0;          // NORMRT_IR_LAUNCH, ...: the next launch
  int64_t nextCluster = 1;   // the occupancy query's cluster size
  int64_t result = 0;        // the last query's answer
  // What the sequence's calls share (one launcher call, straight-line on
  // one thread: neither the current context nor a stream's capture can
  // change inside it), asked of the driver once per sequence.
  CUcontext context = nullptr;     // the current context, once known
  bool captureKnown = false;       // `capture` is `captureStream`'s
  CUstream captureStream = nullptr;
  Capture capture;
};
extern thread_local LaunchSequence tSequence;
/// What mgpuLaunchKernel does in a sequence (normrt_ir_next_launch); gridY:
/// batched rows' samples (plain and dependent launches only).
int sequenceLaunch(void *function, intptr_t gridX, intptr_t gridY,
                   intptr_t blockX, int32_t smem, void *stream,
                   void **params);

/// An off switch in the environment (NORMRT_NO_COOPERATIVE, ...).
bool envSwitchSet(const char *name);


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
  // The framework's allocator for workspaces taken during a capture (same
  // mutex; NULL: cuMemAllocAsync in the graph).
  normrt_capture_alloc_fn captureAlloc = nullptr;
  void *captureAllocUser = nullptr;
};

// Multiprocessor counts by device ordinal (0: not known yet).
constexpr int kMaxCachedDevices = 64;

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

// What a query hands out instead of device memory: never dereferenced
// (nothing launches), 128-byte aligned like the runtime's own buffers.
constexpr uintptr_t kQueryPlaceholder = 0x80;

extern std::atomic<int> gSmCount[kMaxCachedDevices];
extern thread_local CaptureScratch tCaptureScratch[kMaxCaptureScratch];
extern thread_local int tCaptureScratchCount;
extern thread_local bool tQuerying;
extern thread_local size_t tQueryBytes;
/// The workspace key of `stream` in `context` (per thread for the
/// per-thread default stream), and the entry made on first use.
std::tuple<CUcontext, CUstream, uint64_t> workspaceKey(CUcontext context,
                                                       CUstream stream);
Workspace &workspaceOf(State &s, CUcontext context, CUstream stream);
State &state();
int currentContext(const char *fn, CUcontext *out);
const char *imageKind(const void *image);
size_t paddedWorkspaceSize(size_t bytes, size_t oldBytes);
CUresult freeOwned(Workspace &w);
CUresult freeBarrier(Workspace &w);
int captureAlloc(const char *fn, CUcontext context, CUstream stream,
                 const Capture &capture, size_t bytes, const char *what,
                 CUdeviceptr *out);
void makeCaptureWords(State &s, CUcontext context, CUstream stream);

// Kernels.cpp
int smCount(const char *fn, int *out);
/// The current context's device (asked once per thread and context).
int currentDevice(const char *fn, CUdevice *out);
/// normrt_release_all: what was asked of the devices is asked again.
void forgetDeviceFacts();
/// Whether `device` launches cooperative kernels (asked once per device).
bool cooperativeLaunchSupported(CUdevice device);
int checkLaunchShape(const char *fn, const void *function, unsigned grid_x,
                     unsigned grid_y, unsigned block_x, unsigned shared_bytes);
int checkLegacyStream(const char *fn, CUstream stream);
int checkOccupancyQuery(const char *fn, void *function, unsigned block_x,
                        unsigned shared_bytes, int *out);

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
