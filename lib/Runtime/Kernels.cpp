//===- Kernels.cpp - Function lookup, occupancy, launch checks --------------===
//
// Part of norm-opt: the kernel runtime (lib/Runtime). RuntimeInternal.h
// says what its files share and the rules they keep.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <climits>
#include <cstring>
#include <memory>
#include <utility>

namespace normrt_detail {

namespace {
/// What the driver said of one function, kept for the module generation it
/// was said in (normrt_release_all unloads the modules: a later function
/// may get the same handle): the dynamic shared memory its limit allows
/// and its occupancies. Each launch would otherwise ask again (a launcher
/// call made 21 driver calls, 5 of them these).
struct LaunchShape { // a type of this file: its map stays unexported
  unsigned block, shared;
  bool operator<(const LaunchShape &o) const {
    return std::tie(block, shared) < std::tie(o.block, o.shared);
  }
};
struct FunctionFacts {
  uint64_t generation = 0;
  unsigned sharedAllowed = 0;
  std::map<LaunchShape, int> occupancy;
};
std::mutex gFactsMutex;
std::map<CUfunction, FunctionFacts> gFacts;

/// `f`'s facts (gFactsMutex held), emptied if from an older generation.
FunctionFacts &factsOf(CUfunction f) {
  FunctionFacts &facts = gFacts[f];
  uint64_t generation = gModuleGeneration.load(std::memory_order_acquire);
  if (facts.generation != generation) {
    facts = FunctionFacts();
    facts.generation = generation;
  }
  return facts;
}
} // namespace

// Any dynamic shared memory raises the function's limit to it: the kernel's
// static shared memory counts against the same 48 KiB default. A limit set
// before covers every smaller size.
int allowDynamicShared(const char *fn, CUfunction f, unsigned shared_bytes) {
  if (shared_bytes == 0)
    return NORMRT_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(gFactsMutex);
    if (factsOf(f).sharedAllowed >= shared_bytes)
      return NORMRT_SUCCESS;
  }
  CUresult result = gDriver.funcSetAttribute(
      f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
      static_cast<int>(shared_bytes));
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_LAUNCH, result,
                  "%s: cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, %u) "
                  "failed",
                  fn, shared_bytes);
  std::lock_guard<std::mutex> lock(gFactsMutex);
  FunctionFacts &facts = factsOf(f);
  facts.sharedAllowed = std::max(facts.sharedAllowed, shared_bytes);
  return NORMRT_SUCCESS;
}

namespace {
/// The current context's device and what the runtime asks of it, cached per
/// thread for the last context (a context belongs to one device for its
/// life) and per device.
thread_local CUcontext tDeviceContext;
thread_local CUdevice tDevice;
thread_local uint64_t tDeviceGeneration;
std::atomic<int> gCooperative[kMaxCachedDevices]; // 0 unknown, 1 yes, 2 no
} // namespace

void forgetDeviceFacts() {
  for (std::atomic<int> &known : gCooperative)
    known.store(0, std::memory_order_relaxed);
}

int currentDevice(const char *fn, CUdevice *out) {
  CUcontext context = nullptr;
  if (int status = requireContext(fn, &context))
    return status;
  uint64_t generation = gModuleGeneration.load(std::memory_order_acquire);
  if (context && context == tDeviceContext &&
      generation == tDeviceGeneration) {
    *out = tDevice;
    return NORMRT_SUCCESS;
  }
  CUresult result = gDriver.ctxGetDevice(out);
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_DRIVER, result, "%s: cuCtxGetDevice failed",
                  fn);
  tDeviceContext = context;
  tDevice = *out;
  tDeviceGeneration = generation;
  return NORMRT_SUCCESS;
}

bool cooperativeLaunchSupported(CUdevice device) {
  bool cacheable = device >= 0 && device < kMaxCachedDevices;
  int known = cacheable ? gCooperative[device].load(std::memory_order_relaxed)
                        : 0;
  if (known)
    return known == 1;
  int supported = 0;
  if (gDriver.deviceGetAttribute(&supported,
                                 CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH,
                                 device) != CUDA_SUCCESS)
    return false; // not cached: asked again next time
  if (cacheable)
    gCooperative[device].store(supported ? 1 : 2, std::memory_order_relaxed);
  return supported != 0;
}

// Multiprocessors of the current context's device (cached per device);
// `fn` names the entry point in messages.
int smCount(const char *fn, int *out) {
  CUdevice device = 0;
  if (int status = currentDevice(fn, &device))
    return status;
  bool cacheable = device >= 0 && device < kMaxCachedDevices;
  int count =
      cacheable ? gSmCount[device].load(std::memory_order_relaxed) : 0;
  if (count <= 0) {
    CUresult result = gDriver.deviceGetAttribute(
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
  {
    std::lock_guard<std::mutex> lock(gFactsMutex);
    FunctionFacts &facts = factsOf(f);
    auto it = facts.occupancy.find(LaunchShape{block_x, shared_bytes});
    if (it != facts.occupancy.end()) {
      *out = it->second;
      return NORMRT_SUCCESS;
    }
  }
  if (int status = allowDynamicShared(fn, f, shared_bytes))
    return status;
  int blocks = 0;
  CUresult result = gDriver.occupancyMaxActiveBlocks(
      &blocks, f, static_cast<int>(block_x), shared_bytes);
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_DRIVER, result,
                  "%s: cuOccupancyMaxActiveBlocksPerMultiprocessor failed", fn);
  std::lock_guard<std::mutex> lock(gFactsMutex);
  factsOf(f).occupancy[LaunchShape{block_x, shared_bytes}] = blocks;
  *out = blocks;
  return NORMRT_SUCCESS;
}

// The kernel `kernel_name` of `image`, loaded once per context and cached.
std::atomic<uint64_t> gModuleGeneration{0};

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
    // A latency kernel's cluster of 16 CTAs is past the portable 8: the
    // function must allow it. Chips without clusters refuse the attribute,
    // and their kernels have no cluster: the result does not matter.
    (void)gDriver.funcSetAttribute(
        function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    found = entry.functions.emplace(kernel_name, function).first;
  }
  *function_out = found->second;
  return static_cast<int>(NORMRT_SUCCESS);
}

namespace {
/// Lowered code looks a kernel up before every launch (the launchers of
/// norm-opt compile: up to four times a call). The last few lookups of this
/// thread are kept by (context, module, name); the module cache's mutex and
/// map are then skipped. normrt_release_all makes them stale.
struct RecentFunction {
  CUcontext context = nullptr;
  const void *module = nullptr;
  char name[64] = {};
  void *function = nullptr;
  uint64_t generation = 0;
};
constexpr int kRecentFunctions = 8;
thread_local RecentFunction tRecent[kRecentFunctions];
thread_local int tRecentNext;

} // namespace

/// The current context (the launch sequence's, once known), or null; no
/// error is reported: the recent-function cache just stands aside.
static CUcontext contextOrNull() {
  if (tSequence.active && tSequence.context)
    return tSequence.context;
  CUcontext context = nullptr;
  return gDriver.ctxGetCurrent(&context) == CUDA_SUCCESS ? context : nullptr;
}

void *recentFunction(const void *module, const char *name) {
  if (!module || !name || !gDriverReady.load(std::memory_order_acquire))
    return nullptr;
  if (tSequence.active && tSequence.status != NORMRT_SUCCESS)
    return nullptr;
  CUcontext context = contextOrNull();
  if (!context)
    return nullptr;
  uint64_t generation = gModuleGeneration.load(std::memory_order_acquire);
  for (const RecentFunction &r : tRecent)
    if (r.function && r.context == context && r.module == module &&
        r.generation == generation && std::strcmp(r.name, name) == 0)
      return r.function;
  return nullptr;
}

void rememberFunction(const void *module, const char *name, void *function) {
  if (!function || std::strlen(name) >= sizeof(RecentFunction::name))
    return;
  CUcontext context = contextOrNull();
  if (!context)
    return;
  RecentFunction &r = tRecent[tRecentNext];
  tRecentNext = (tRecentNext + 1) % kRecentFunctions;
  r.context = context;
  r.module = module;
  std::strcpy(r.name, name);
  r.function = function;
  r.generation = gModuleGeneration.load(std::memory_order_acquire);
}

} // namespace normrt_detail
