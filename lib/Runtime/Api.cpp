//===- Api.cpp - The C API: status, init, functions, release ----------------===
//
// Part of norm-opt: the kernel runtime (lib/Runtime). RuntimeInternal.h
// says what its files share and the rules they keep.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

using namespace normrt_detail;

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
    gModuleGeneration.fetch_add(1, std::memory_order_acq_rel);
    forgetDeviceFacts();
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

// Lets generated launchers report their own checks (shapes, strides)
// through the same thread-local message.
int normrt_report(int status, const char *message) {
  return fail(status, "%s", message ? message : "");
}

} // extern "C"
