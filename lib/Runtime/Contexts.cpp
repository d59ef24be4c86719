//===- Contexts.cpp - Contexts, the caches, stream capture ------------------===
//
// Part of norm-opt: the kernel runtime (lib/Runtime). RuntimeInternal.h
// says what its files share and the rules they keep.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <climits>
#include <cstring>

namespace normrt_detail {

//===----------------------------------------------------------------------===//
// Caches
//===----------------------------------------------------------------------===//

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

// The current context, making device 0's primary context current when there
// is none. Needs the driver.
int currentContext(const char *fn, CUcontext *out) {
  if (tSequence.active && tSequence.context) {
    *out = tSequence.context;
    return NORMRT_SUCCESS;
  }
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
  if (tSequence.active)
    tSequence.context = context;
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

std::atomic<int> gSmCount[kMaxCachedDevices];
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
  LaunchSequence &sequence = tSequence;
  if (sequence.active && sequence.captureKnown &&
      sequence.captureStream == stream) {
    *out = sequence.capture;
    return NORMRT_SUCCESS;
  }
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
  if (sequence.active) {
    sequence.captureKnown = true;
    sequence.captureStream = stream;
    sequence.capture = *out;
  }
  return NORMRT_SUCCESS;
}

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

thread_local CaptureScratch tCaptureScratch[kMaxCaptureScratch];
thread_local int tCaptureScratchCount;
// A workspace query (normrt_query_begin .. normrt_query_end) on this
// thread: the largest workspace request so far; nothing launches.
thread_local bool tQuerying;
thread_local size_t tQueryBytes;

} // namespace normrt_detail
