//===- Memory.cpp - The C API: workspace, barrier words, scratch ------------===
//
// Part of norm-opt: the kernel runtime (lib/Runtime). RuntimeInternal.h
// says what its files share and the rules they keep.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cstring>

using namespace normrt_detail;

extern "C" {

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
    std::unique_lock<std::mutex> lock(s.workspaceMutex);
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
    if (capture.active && s.captureAlloc) {
      // The framework's code runs without the runtime's lock.
      normrt_capture_alloc_fn alloc = s.captureAlloc;
      void *user = s.captureAllocUser;
      lock.unlock();
      void *pointer = nullptr;
      if (alloc(user, stream, bytes, &pointer) != 0 || !pointer)
        return fail(NORMRT_ERROR_OUT_OF_MEMORY,
                    "%s: the capture allocator set by "
                    "normrt_set_capture_allocator gave no %zu-byte workspace "
                    "for stream %p",
                    fn, bytes, stream);
      if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0)
        return fail(NORMRT_ERROR_MISALIGNED,
                    "%s: the capture allocator's workspace %p is not 16-byte "
                    "aligned",
                    fn, pointer);
      *ptr_out = pointer;
      return static_cast<int>(NORMRT_SUCCESS);
    }
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

int normrt_set_capture_allocator(normrt_capture_alloc_fn alloc, void *user) {
  return guarded("normrt_set_capture_allocator", [&] {
    State &s = state();
    std::lock_guard<std::mutex> lock(s.workspaceMutex);
    s.captureAlloc = alloc;
    s.captureAllocUser = alloc ? user : nullptr;
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

} // extern "C"
