//===- RuntimeFakeCuda.cpp - A fake libcuda for the runtime's tests -------===//
//
// Part of norm-opt. Implements the driver entry points NormRuntime resolves,
// with host-side bookkeeping only: contexts are tokens, "device memory" is a
// range of addresses never dereferenced, a module is any NUL-terminated text
// and holds the kernels named after ".entry " in it. Loading takes 20 ms so
// that races in the runtime's module cache would show. Images containing
// "BAD" fail to load. The device count comes from FAKECUDA_DEVICES (default
// 1). The device supports cooperative launches unless FAKECUDA_NO_COOPERATIVE
// is set non-empty; FAKECUDA_FAIL_MEMSET (non-empty) makes cuMemsetD32Async
// fail. Both are read at every call, so a test may set them for a while.
// Declarations come from cuda.h, so the signatures are the driver's.
//
//===----------------------------------------------------------------------===//

#include "RuntimeFakeCuda.h"

#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct FakeContext {
  int id;
};
struct FakeModule {
  std::string image;
  bool live = true;
};
struct FakeFunction {
  FakeModule *module;
  std::string name;
  int maxDynamicShared = 48 * 1024;
};

FakeCudaStats gStats;
FakeContext gPrimary{0};
std::mutex gMutex;
std::map<CUdeviceptr, size_t> gAllocations;
size_t gLiveBytes = 0;
size_t gMemoryLimit = size_t(1) << 30;
CUdeviceptr gNextAddress = 0x10000000;
int gNextContextId = 1;
FakeCudaLaunch gLastLaunch{};
thread_local CUcontext tCurrent = nullptr;

int deviceCount() {
  const char *env = std::getenv("FAKECUDA_DEVICES");
  return env && *env ? std::atoi(env) : 1;
}

bool envSet(const char *name) {
  const char *env = std::getenv(name);
  return env && *env;
}

constexpr int kMultiprocessors = 132;

// Resident CTAs per multiprocessor: 2048 threads and 228 KiB of shared
// memory each. cuLaunchCooperativeKernel checks its grid against the same
// numbers as the occupancy query, as the real driver does.
int maxActiveBlocks(int blockSize, size_t shared) {
  int byThreads = 2048 / blockSize;
  int byShared = shared ? int(228 * 1024 / shared) : byThreads;
  return byThreads < byShared ? byThreads : byShared;
}

} // namespace

FAKE_EXPORT FakeCudaStats *fakecuda_stats(void) { return &gStats; }

FAKE_EXPORT void fakecuda_last_launch(FakeCudaLaunch *out) {
  std::lock_guard<std::mutex> lock(gMutex);
  *out = gLastLaunch;
}

FAKE_EXPORT void fakecuda_set_memory_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(gMutex);
  gMemoryLimit = bytes;
}

FAKE_EXPORT void *fakecuda_new_context(void) {
  std::lock_guard<std::mutex> lock(gMutex);
  return new FakeContext{gNextContextId++};
}

FAKE_EXPORT void *fakecuda_primary_context(void) { return &gPrimary; }

FAKE_EXPORT void *fakecuda_current_context(void) { return tCurrent; }

FAKE_EXPORT void fakecuda_set_current_context(void *context) {
  tCurrent = static_cast<CUcontext>(context);
}

#define CU_EXPORT extern "C" __attribute__((visibility("default"))) CUresult

CU_EXPORT cuInit(unsigned int) {
  ++gStats.inits;
  return CUDA_SUCCESS;
}

CU_EXPORT cuGetErrorName(CUresult error, const char **name) {
  switch (error) {
  case CUDA_SUCCESS:
    *name = "CUDA_SUCCESS";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_VALUE:
    *name = "CUDA_ERROR_INVALID_VALUE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *name = "CUDA_ERROR_OUT_OF_MEMORY";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_CONTEXT:
    *name = "CUDA_ERROR_INVALID_CONTEXT";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_IMAGE:
    *name = "CUDA_ERROR_INVALID_IMAGE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_PTX:
    *name = "CUDA_ERROR_INVALID_PTX";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_HANDLE:
    *name = "CUDA_ERROR_INVALID_HANDLE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NOT_FOUND:
    *name = "CUDA_ERROR_NOT_FOUND";
    return CUDA_SUCCESS;
  case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
    *name = "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NOT_SUPPORTED:
    *name = "CUDA_ERROR_NOT_SUPPORTED";
    return CUDA_SUCCESS;
  default:
    *name = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CU_EXPORT cuGetErrorString(CUresult error, const char **text) {
  switch (error) {
  case CUDA_ERROR_OUT_OF_MEMORY:
    *text = "fake: out of memory";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_PTX:
    *text = "fake: a PTX JIT compilation failed";
    return CUDA_SUCCESS;
  default:
    *text = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CU_EXPORT cuDeviceGetCount(int *count) {
  *count = deviceCount();
  return CUDA_SUCCESS;
}

CU_EXPORT cuDeviceGet(CUdevice *device, int ordinal) {
  if (ordinal < 0 || ordinal >= deviceCount())
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CU_EXPORT cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                               CUdevice) {
  ++gStats.attributeQueries;
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = kMultiprocessors;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    *value = envSet("FAKECUDA_NO_COOPERATIVE") ? 0 : 1;
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CU_EXPORT cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice) {
  ++gStats.primaryRetains;
  *context = reinterpret_cast<CUcontext>(&gPrimary);
  return CUDA_SUCCESS;
}

CU_EXPORT cuCtxGetCurrent(CUcontext *context) {
  *context = tCurrent;
  return CUDA_SUCCESS;
}

CU_EXPORT cuCtxSetCurrent(CUcontext context) {
  tCurrent = context;
  return CUDA_SUCCESS;
}

CU_EXPORT cuCtxGetDevice(CUdevice *device) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  *device = 0;
  return CUDA_SUCCESS;
}

CU_EXPORT cuCtxSynchronize(void) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  ++gStats.contextSyncs;
  return CUDA_SUCCESS;
}

CU_EXPORT cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(gMutex);
  if (bytes > gMemoryLimit || gLiveBytes > gMemoryLimit - bytes)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = gNextAddress;
  gNextAddress += (bytes + 255) / 256 * 256 + 256;
  gAllocations[*pointer] = bytes;
  gLiveBytes += bytes;
  ++gStats.allocs;
  ++gStats.liveAllocations;
  gStats.lastAllocBytes = bytes;
  return CUDA_SUCCESS;
}

CU_EXPORT cuMemFree_v2(CUdeviceptr pointer) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gAllocations.find(pointer);
  if (it == gAllocations.end()) {
    ++gStats.badFrees;
    return CUDA_ERROR_INVALID_VALUE;
  }
  gLiveBytes -= it->second;
  gAllocations.erase(it);
  ++gStats.frees;
  --gStats.liveAllocations;
  return CUDA_SUCCESS;
}

CU_EXPORT cuModuleLoadData(CUmodule *module, const void *image) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const char *text = static_cast<const char *>(image);
  if (std::strstr(text, "BAD"))
    return CUDA_ERROR_INVALID_PTX;
  ++gStats.moduleLoads;
  ++gStats.liveModules;
  *module = reinterpret_cast<CUmodule>(new FakeModule{text});
  return CUDA_SUCCESS;
}

CU_EXPORT cuModuleGetFunction(CUfunction *function, CUmodule module,
                              const char *name) {
  FakeModule *m = reinterpret_cast<FakeModule *>(module);
  if (!m || !m->live)
    return CUDA_ERROR_INVALID_HANDLE;
  ++gStats.functionLookups;
  std::string entry = std::string(".entry ") + name + "\n";
  if (m->image.find(entry) == std::string::npos)
    return CUDA_ERROR_NOT_FOUND;
  *function = reinterpret_cast<CUfunction>(new FakeFunction{m, name});
  return CUDA_SUCCESS;
}

CU_EXPORT cuModuleUnload(CUmodule module) {
  FakeModule *m = reinterpret_cast<FakeModule *>(module);
  if (!m || !m->live)
    return CUDA_ERROR_INVALID_HANDLE;
  m->live = false; // kept, so that stale functions are detected
  ++gStats.moduleUnloads;
  --gStats.liveModules;
  return CUDA_SUCCESS;
}

CU_EXPORT cuFuncSetAttribute(CUfunction function,
                             CUfunction_attribute attribute, int value) {
  FakeFunction *f = reinterpret_cast<FakeFunction *>(function);
  if (!f->module->live)
    return CUDA_ERROR_INVALID_HANDLE;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ||
      value > 227 * 1024)
    return CUDA_ERROR_INVALID_VALUE;
  f->maxDynamicShared = value;
  ++gStats.setAttributes;
  gStats.lastSharedAttribute = value;
  return CUDA_SUCCESS;
}

CU_EXPORT cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks,
                                                       CUfunction function,
                                                       int blockSize,
                                                       size_t shared) {
  FakeFunction *f = reinterpret_cast<FakeFunction *>(function);
  if (!f->module->live || blockSize <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  *blocks = maxActiveBlocks(blockSize, shared);
  return CUDA_SUCCESS;
}

CU_EXPORT cuLaunchKernel(CUfunction function, unsigned int gridX,
                         unsigned int gridY, unsigned int gridZ,
                         unsigned int blockX, unsigned int blockY,
                         unsigned int blockZ, unsigned int shared,
                         CUstream stream, void **args, void **extra) {
  FakeFunction *f = reinterpret_cast<FakeFunction *>(function);
  if (!f->module->live)
    return CUDA_ERROR_INVALID_HANDLE;
  if (static_cast<int>(shared) > f->maxDynamicShared || extra)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(gMutex);
  gLastLaunch = FakeCudaLaunch{function, {gridX, gridY, gridZ},
                               {blockX, blockY, blockZ}, shared, stream,
                               args, 0};
  ++gStats.launches;
  return CUDA_SUCCESS;
}

CU_EXPORT cuLaunchCooperativeKernel(CUfunction function, unsigned int gridX,
                                    unsigned int gridY, unsigned int gridZ,
                                    unsigned int blockX, unsigned int blockY,
                                    unsigned int blockZ, unsigned int shared,
                                    CUstream stream, void **args) {
  FakeFunction *f = reinterpret_cast<FakeFunction *>(function);
  if (!f->module->live)
    return CUDA_ERROR_INVALID_HANDLE;
  if (static_cast<int>(shared) > f->maxDynamicShared)
    return CUDA_ERROR_INVALID_VALUE;
  if (envSet("FAKECUDA_NO_COOPERATIVE"))
    return CUDA_ERROR_NOT_SUPPORTED;
  // Every CTA must be resident at once, or the grid barrier would hang.
  unsigned long long threads =
      static_cast<unsigned long long>(blockX) * blockY * blockZ;
  unsigned long long ctas =
      static_cast<unsigned long long>(gridX) * gridY * gridZ;
  if (threads == 0 || threads > 1024 ||
      ctas > static_cast<unsigned long long>(kMultiprocessors) *
                 maxActiveBlocks(static_cast<int>(threads), shared))
    return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  std::lock_guard<std::mutex> lock(gMutex);
  gLastLaunch = FakeCudaLaunch{function, {gridX, gridY, gridZ},
                               {blockX, blockY, blockZ}, shared, stream,
                               args, 1};
  ++gStats.launches;
  ++gStats.cooperativeLaunches;
  return CUDA_SUCCESS;
}

CU_EXPORT cuMemsetD32Async(CUdeviceptr pointer, unsigned int value,
                           size_t count, CUstream stream) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (envSet("FAKECUDA_FAIL_MEMSET"))
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(gMutex);
  // The whole range [pointer, pointer + 4 * count) must lie in one live
  // allocation, 4-byte aligned: a stale or overrunning memset is a bug.
  auto it = gAllocations.upper_bound(pointer);
  bool inside = it != gAllocations.begin() && pointer % 4 == 0;
  if (inside) {
    --it;
    size_t offset = pointer - it->first;
    inside = offset < it->second && count <= (it->second - offset) / 4;
  }
  if (!inside) {
    ++gStats.badMemsets;
    return CUDA_ERROR_INVALID_VALUE;
  }
  ++gStats.memsets;
  gStats.lastMemsetValue = value;
  gStats.lastMemsetCount = count;
  gStats.lastMemsetPointer =
      reinterpret_cast<void *>(static_cast<uintptr_t>(pointer));
  gStats.lastMemsetStream = stream;
  return CUDA_SUCCESS;
}

CU_EXPORT cuStreamSynchronize(CUstream stream) {
  ++gStats.streamSyncs;
  gStats.lastSyncedStream = stream;
  return CUDA_SUCCESS;
}
