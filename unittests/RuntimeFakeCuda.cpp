//===- RuntimeFakeCuda.cpp - A fake libcuda for the runtime's tests -------===//
//
// Part of norm-opt. Implements the driver entry points NormRuntime resolves,
// with host-side bookkeeping only: contexts are tokens, "device memory" is a
// range of addresses never dereferenced, a module is any NUL-terminated text
// and holds the kernels named after ".entry " in it, or a 64-bit ELF (a
// cubin, as generated libraries embed) and holds the names of its string
// tables (so a generated launcher runs on the fake). Loading takes 20 ms so
// that races in the runtime's module cache would show. Images containing
// "BAD" fail to load. The device count comes from FAKECUDA_DEVICES (default
// 1). The device supports cooperative launches unless FAKECUDA_NO_COOPERATIVE
// is set non-empty; FAKECUDA_FAIL_MEMSET (non-empty) makes cuMemsetD32Async
// fail; FAKECUDA_NO_MEMPOOLS (non-empty) takes the device's memory pools
// (stream-ordered allocation) away. All are read at every call, so a test
// may set them for a while. Declarations come from cuda.h, so the
// signatures are the driver's.
//
// Stream capture is modelled as the CUDA programming guide and cuda.h
// describe it: work on a capturing stream (launches, cuMemsetD32Async,
// cuMemAllocAsync, cuMemFreeAsync) becomes nodes of the capture's graph;
// "potentially unsafe" calls (cuMemAlloc, cuMemFree, cuModuleLoadData,
// cuModuleGetFunction, cuFuncLoad, cuModuleUnload) are refused with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture when the
// calling thread's mode prohibits them (its own non-relaxed capture, or in
// global mode another thread's global capture; never in relaxed mode);
// synchronising a capturing stream, or the context while anything captures,
// is refused and invalidates whatever mode; any use of the legacy stream
// while a (blocking) stream captures invalidates it
// (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; the capture-status query only
// reports it). cuModuleGetFunction is counted unsafe, which is stricter than
// an eagerly loading driver, since a lazily loading one loads there.
//
//===----------------------------------------------------------------------===//

#include "RuntimeFakeCuda.h"

#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <vector>
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

// Capture state, under gMutex.
struct FakeCapture {
  uint64_t id = 0;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;
  bool invalidated = false;
  std::vector<FakeCudaNode> nodes;
  std::map<CUdeviceptr, size_t> allocations; // allocated, not yet freed
};
struct FakeGraph {
  std::vector<FakeCudaNode> nodes;
  int unfreed = 0;
};
std::map<CUstream, FakeCapture> gCaptures;
uint64_t gNextCaptureId = 1;
thread_local CUstreamCaptureMode tCaptureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;
std::string gLastViolation;
// Graph allocations live in a running replay.
std::map<CUdeviceptr, size_t> gGraphLive;
// The first word of device memory the fake has written (memsets, the
// barrier kernel); fresh memory reads as kPoison.
constexpr uint32_t kPoison = 0xa5a5a5a5u;
std::map<CUdeviceptr, uint32_t> gWords;
std::vector<uint32_t> gBarrierReads;

bool isLegacy(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY;
}

void violation(const char *name) {
  gLastViolation = name;
  ++gStats.captureViolations;
}

// A "potentially unsafe" call from this thread (gMutex held).
CUresult unsafeCall(const char *name) {
  if (tCaptureMode == CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_SUCCESS;
  bool prohibited = false;
  for (auto &item : gCaptures) {
    FakeCapture &c = item.second;
    if (c.invalidated || c.mode == CU_STREAM_CAPTURE_MODE_RELAXED)
      continue;
    bool mine = c.thread == std::this_thread::get_id();
    bool global = tCaptureMode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                  c.mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (mine || global) {
      c.invalidated = true;
      prohibited = true;
    }
  }
  if (!prohibited)
    return CUDA_SUCCESS;
  violation(name);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

// Any capture in flight (gMutex held)?
bool anyActiveCapture() {
  for (auto &item : gCaptures)
    if (!item.second.invalidated)
      return true;
  return false;
}

// Work submitted to `stream` (gMutex held): *capture is its capture, or
// null when the work runs now.
CUresult streamWork(CUstream stream, const char *name, FakeCapture **capture) {
  *capture = nullptr;
  if (isLegacy(stream)) {
    if (!anyActiveCapture())
      return CUDA_SUCCESS;
    for (auto &item : gCaptures)
      item.second.invalidated = true;
    violation(name);
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  auto it = gCaptures.find(stream);
  if (it == gCaptures.end())
    return CUDA_SUCCESS;
  if (it->second.invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  *capture = &it->second;
  return CUDA_SUCCESS;
}

// Whether [pointer, pointer + bytes) lies in one live allocation, eager or
// of a running replay, or of `capture` (gMutex held).
bool insideLive(CUdeviceptr pointer, size_t bytes,
                const FakeCapture *capture = nullptr) {
  auto inside = [&](const std::map<CUdeviceptr, size_t> &table) {
    auto it = table.upper_bound(pointer);
    if (it == table.begin())
      return false;
    --it;
    size_t offset = pointer - it->first;
    return offset < it->second && bytes <= it->second - offset;
  };
  return inside(gAllocations) || inside(gGraphLive) ||
         (capture && inside(capture->allocations));
}

// The barrier kernel: reads its word, then leaves it with the top bit
// flipped, as the grid barrier does (gMutex held).
void runBarrierKernel(CUdeviceptr word) {
  if (!insideLive(word, 4)) {
    ++gStats.badBarriers;
    return;
  }
  auto it = gWords.find(word);
  uint32_t value = it == gWords.end() ? kPoison : it->second;
  gBarrierReads.push_back(value);
  gWords[word] = value + 0x80000000u;
}

// The bytes of a module image: a 64-bit little-endian ELF (a cubin, as
// generated kernel libraries embed) up to the end of its section headers,
// where they end; anything else up to its NUL.
std::string imageText(const void *image) {
  const unsigned char *b = static_cast<const unsigned char *>(image);
  if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F' &&
      b[4] == 2 && b[5] == 1) {
    uint64_t sectionHeaders = 0;
    uint16_t entrySize = 0, entries = 0;
    std::memcpy(&sectionHeaders, b + 0x28, 8);
    std::memcpy(&entrySize, b + 0x3a, 2);
    std::memcpy(&entries, b + 0x3c, 2);
    return std::string(reinterpret_cast<const char *>(b),
                       sectionHeaders + uint64_t(entrySize) * entries);
  }
  return static_cast<const char *>(image);
}

// A memset of `count` words (gMutex held).
void writeWords(CUdeviceptr pointer, size_t count, uint32_t value) {
  for (size_t i = 0; i < count; ++i)
    gWords[pointer + 4 * i] = value;
}

// Argument 0 of a launch of the barrier kernel, else 0.
CUdeviceptr barrierArgument(CUfunction function, void **args);
std::string imageText(const void *image);

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

FAKE_EXPORT const char *fakecuda_function_name(void *function) {
  return function ? reinterpret_cast<FakeFunction *>(function)->name.c_str()
                  : "";
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

FAKE_EXPORT int fakecuda_begin_capture(void *stream, int mode) {
  CUstream s = static_cast<CUstream>(stream);
  std::lock_guard<std::mutex> lock(gMutex);
  if (isLegacy(s) || mode < 0 || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  if (gCaptures.count(s))
    return CUDA_ERROR_ILLEGAL_STATE;
  FakeCapture &c = gCaptures[s];
  c.id = gNextCaptureId++;
  c.mode = static_cast<CUstreamCaptureMode>(mode);
  c.thread = std::this_thread::get_id();
  return CUDA_SUCCESS;
}

FAKE_EXPORT int fakecuda_end_capture(void *stream, void **graph_out) {
  CUstream s = static_cast<CUstream>(stream);
  std::lock_guard<std::mutex> lock(gMutex);
  *graph_out = nullptr;
  auto it = gCaptures.find(s);
  if (it == gCaptures.end())
    return CUDA_ERROR_ILLEGAL_STATE;
  FakeCapture c = std::move(it->second);
  gCaptures.erase(it);
  if (c.invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  FakeGraph *graph = new FakeGraph();
  graph->nodes = std::move(c.nodes);
  graph->unfreed = static_cast<int>(c.allocations.size());
  *graph_out = graph;
  return CUDA_SUCCESS;
}

FAKE_EXPORT int fakecuda_graph_nodes(void *graph, FakeCudaNode *out,
                                     int max) {
  FakeGraph *g = static_cast<FakeGraph *>(graph);
  int count = static_cast<int>(g->nodes.size());
  for (int i = 0; i < count && i < max; ++i)
    out[i] = g->nodes[i];
  return count;
}

FAKE_EXPORT int fakecuda_graph_unfreed(void *graph) {
  return static_cast<FakeGraph *>(graph)->unfreed;
}

FAKE_EXPORT int fakecuda_graph_launch(void *graph) {
  FakeGraph *g = static_cast<FakeGraph *>(graph);
  std::lock_guard<std::mutex> lock(gMutex);
  std::map<CUdeviceptr, size_t> mine;
  for (const FakeCudaNode &node : g->nodes) {
    CUdeviceptr pointer = node.pointer;
    switch (node.kind) {
    case FAKECUDA_NODE_ALLOC:
      if (gGraphLive.count(pointer))
        return CUDA_ERROR_INVALID_VALUE; // a replay still holds it
      gGraphLive[pointer] = node.bytes;
      mine[pointer] = node.bytes;
      gWords.erase(pointer); // fresh memory: poisoned
      break;
    case FAKECUDA_NODE_MEMSET:
      if (!insideLive(pointer, node.bytes * 4)) {
        ++gStats.badMemsets;
        return CUDA_ERROR_INVALID_VALUE;
      }
      writeWords(pointer, node.bytes, node.value);
      break;
    case FAKECUDA_NODE_KERNEL:
      if (pointer)
        runBarrierKernel(pointer);
      break;
    case FAKECUDA_NODE_FREE:
      if (!gGraphLive.erase(pointer) && !gAllocations.count(pointer)) {
        ++gStats.badFrees;
        return CUDA_ERROR_INVALID_VALUE;
      }
      mine.erase(pointer);
      gWords.erase(pointer);
      break;
    }
  }
  // What the graph did not free stays mapped until the next replay frees
  // it (auto-free on launch); count it.
  gStats.graphUnfreed += static_cast<int>(mine.size());
  for (auto &item : mine)
    gGraphLive.erase(item.first);
  return CUDA_SUCCESS;
}

FAKE_EXPORT const char *fakecuda_last_violation(void) {
  std::lock_guard<std::mutex> lock(gMutex);
  return gLastViolation.c_str();
}

FAKE_EXPORT int fakecuda_barrier_reads(unsigned *out, int max) {
  std::lock_guard<std::mutex> lock(gMutex);
  int count = static_cast<int>(gBarrierReads.size());
  for (int i = 0; i < count && i < max; ++i)
    out[i] = gBarrierReads[i];
  gBarrierReads.clear();
  return count;
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
  case CUDA_ERROR_ILLEGAL_STATE:
    *name = "CUDA_ERROR_ILLEGAL_STATE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    return CUDA_SUCCESS;
  case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    return CUDA_SUCCESS;
  case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    *name = "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT";
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
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    *value = envSet("FAKECUDA_NO_MEMPOOLS") ? 0 : 1;
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
  ++gStats.contextQueries;
  *context = tCurrent;
  return CUDA_SUCCESS;
}

CU_EXPORT cuCtxSetCurrent(CUcontext context) {
  tCurrent = context;
  return CUDA_SUCCESS;
}

CU_EXPORT cuCtxGetDevice(CUdevice *device) {
  ++gStats.contextQueries;
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  *device = 0;
  return CUDA_SUCCESS;
}

CU_EXPORT cuCtxSynchronize(void) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  {
    // Synchronising a context while one of its streams captures is never
    // legal (one context in the fake).
    std::lock_guard<std::mutex> lock(gMutex);
    if (anyActiveCapture()) {
      for (auto &item : gCaptures)
        item.second.invalidated = true;
      violation("cuCtxSynchronize");
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  ++gStats.contextSyncs;
  return CUDA_SUCCESS;
}

CU_EXPORT cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(gMutex);
  if (CUresult refused = unsafeCall("cuMemAlloc_v2"))
    return refused;
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
  if (CUresult refused = unsafeCall("cuMemFree_v2"))
    return refused;
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
  {
    std::lock_guard<std::mutex> lock(gMutex);
    if (CUresult refused = unsafeCall("cuModuleLoadData"))
      return refused;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const char *text = static_cast<const char *>(image);
  if (std::strstr(text, "BAD"))
    return CUDA_ERROR_INVALID_PTX;
  ++gStats.moduleLoads;
  ++gStats.liveModules;
  *module = reinterpret_cast<CUmodule>(new FakeModule{imageText(image)});
  return CUDA_SUCCESS;
}

CU_EXPORT cuModuleGetFunction(CUfunction *function, CUmodule module,
                              const char *name) {
  FakeModule *m = reinterpret_cast<FakeModule *>(module);
  if (!m || !m->live)
    return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    if (CUresult refused = unsafeCall("cuModuleGetFunction"))
      return refused;
  }
  ++gStats.functionLookups;
  // ".entry NAME" at the end of a line (the tests' images) or before its
  // parameters (PTX as LLVM writes it).
  std::string entry = std::string(".entry ") + name + "\n";
  std::string withParams = std::string(".entry ") + name + "(";
  std::string symbol = std::string(1, '\0') + name + '\0'; // ELF .strtab
  if (m->image.find(entry) == std::string::npos &&
      m->image.find(withParams) == std::string::npos &&
      (m->image.compare(0, 4, "\x7f" "ELF") != 0 ||
       m->image.find(symbol) == std::string::npos))
    return CUDA_ERROR_NOT_FOUND;
  *function = reinterpret_cast<CUfunction>(new FakeFunction{m, name});
  return CUDA_SUCCESS;
}

CU_EXPORT cuFuncLoad(CUfunction function) {
  FakeFunction *f = reinterpret_cast<FakeFunction *>(function);
  if (!f || !f->module->live)
    return CUDA_ERROR_INVALID_HANDLE;
  {
    // Loading a kernel is as unsafe during capture as loading a module.
    std::lock_guard<std::mutex> lock(gMutex);
    if (CUresult refused = unsafeCall("cuFuncLoad"))
      return refused;
  }
  ++gStats.functionLoads;
  return CUDA_SUCCESS;
}

CU_EXPORT cuModuleUnload(CUmodule module) {
  FakeModule *m = reinterpret_cast<FakeModule *>(module);
  if (!m || !m->live)
    return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    if (CUresult refused = unsafeCall("cuModuleUnload"))
      return refused;
  }
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
  ++gStats.occupancyQueries;
  FakeFunction *f = reinterpret_cast<FakeFunction *>(function);
  if (!f->module->live || blockSize <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  *blocks = maxActiveBlocks(blockSize, shared);
  return CUDA_SUCCESS;
}

// The H100's GPCs: clusters never span one, so fewer fit than the SMs
// divided by the cluster size (16 GPCs of up to 9 SMs pairs here; as
// cudaOccupancyMaxActiveClusters, per cluster shape).
CU_EXPORT cuOccupancyMaxActiveClusters(int *clusters, CUfunction function,
                                       const CUlaunchConfig *config) {
  FakeFunction *f = reinterpret_cast<FakeFunction *>(function);
  if (!f->module->live || !config || config->blockDimX == 0)
    return CUDA_ERROR_INVALID_VALUE;
  unsigned size = 1;
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
      size = config->attrs[i].value.clusterDim.x;
  if (size == 0 || size > 8 || config->gridDimX % size != 0)
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  int perSM = maxActiveBlocks(int(config->blockDimX), config->sharedMemBytes);
  const int gpcs = 16, smsPerGPC = kMultiprocessors / gpcs; // 8 (of 132)
  *clusters = gpcs * (smsPerGPC * perSM / int(size));
  ++gStats.clusterQueries;
  return CUDA_SUCCESS;
}

// A launch the stream accepted (gMutex held): the last launch and the
// counters, then a captured kernel node, or the barrier kernel run.
static void recordLaunch(const FakeCudaLaunch &launch, FakeCapture *capture) {
  gLastLaunch = launch;
  ++gStats.launches;
  if (launch.cooperative)
    ++gStats.cooperativeLaunches;
  if (launch.dependent)
    ++gStats.dependentLaunches;
  CUdeviceptr word =
      barrierArgument(static_cast<CUfunction>(launch.function), launch.args);
  if (capture) {
    capture->nodes.push_back(FakeCudaNode{FAKECUDA_NODE_KERNEL, word, 0, 0,
                                          launch.function, launch.cooperative,
                                          launch.dependent});
    ++gStats.capturedNodes;
  } else if (word) {
    runBarrierKernel(word);
  }
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
  FakeCapture *capture = nullptr;
  if (CUresult refused = streamWork(stream, "cuLaunchKernel", &capture))
    return refused;
  recordLaunch(FakeCudaLaunch{function, {gridX, gridY, gridZ},
                              {blockX, blockY, blockZ}, shared, stream, args,
                              0, 0},
               capture);
  return CUDA_SUCCESS;
}

// Only the attribute the runtime sets; CUDA_ERROR_NOT_SUPPORTED with
// FAKECUDA_NO_DEPENDENT_LAUNCH (a driver or graph that refuses it).
CU_EXPORT cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction function,
                           void **args, void **extra) {
  if (!config || extra)
    return CUDA_ERROR_INVALID_VALUE;
  FakeFunction *f = reinterpret_cast<FakeFunction *>(function);
  if (!f->module->live)
    return CUDA_ERROR_INVALID_HANDLE;
  if (static_cast<int>(config->sharedMemBytes) > f->maxDynamicShared)
    return CUDA_ERROR_INVALID_VALUE;
  int dependent = 0;
  unsigned cluster[3] = {0, 0, 0};
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute &a = config->attrs[i];
    if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster[0] = a.value.clusterDim.x;
      cluster[1] = a.value.clusterDim.y;
      cluster[2] = a.value.clusterDim.z;
      if (!cluster[0] || !cluster[1] || !cluster[2] ||
          config->gridDimX % cluster[0] || config->gridDimY % cluster[1] ||
          config->gridDimZ % cluster[2])
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
      continue;
    }
    if (a.id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
      return CUDA_ERROR_INVALID_VALUE;
    dependent = a.value.programmaticStreamSerializationAllowed != 0;
  }
  if (cluster[0])
    ++gStats.clusterLaunches;
  if (dependent && envSet("FAKECUDA_NO_DEPENDENT_LAUNCH"))
    return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard<std::mutex> lock(gMutex);
  FakeCapture *capture = nullptr;
  if (CUresult refused = streamWork(config->hStream, "cuLaunchKernelEx",
                                    &capture))
    return refused;
  recordLaunch(FakeCudaLaunch{function,
                              {config->gridDimX, config->gridDimY,
                               config->gridDimZ},
                              {config->blockDimX, config->blockDimY,
                               config->blockDimZ},
                              config->sharedMemBytes, config->hStream, args,
                              0, dependent, {cluster[0], cluster[1], cluster[2]}},
               capture);
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
  FakeCapture *capture = nullptr;
  if (CUresult refused =
          streamWork(stream, "cuLaunchCooperativeKernel", &capture))
    return refused;
  recordLaunch(FakeCudaLaunch{function, {gridX, gridY, gridZ},
                              {blockX, blockY, blockZ}, shared, stream, args,
                              1, 0},
               capture);
  return CUDA_SUCCESS;
}

CU_EXPORT cuMemsetD32Async(CUdeviceptr pointer, unsigned int value,
                           size_t count, CUstream stream) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (envSet("FAKECUDA_FAIL_MEMSET"))
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(gMutex);
  FakeCapture *capture = nullptr;
  if (CUresult refused = streamWork(stream, "cuMemsetD32Async", &capture))
    return refused;
  // The whole range [pointer, pointer + 4 * count) must lie in one live
  // allocation (of the capture too, when captured), 4-byte aligned: a stale
  // or overrunning memset is a bug.
  if (pointer % 4 != 0 || count > SIZE_MAX / 4 ||
      !insideLive(pointer, count * 4, capture)) {
    ++gStats.badMemsets;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (capture) {
    capture->nodes.push_back(
        FakeCudaNode{FAKECUDA_NODE_MEMSET, pointer, count, value, nullptr, 0});
    ++gStats.capturedNodes;
  } else {
    writeWords(pointer, count, value);
  }
  ++gStats.memsets;
  gStats.lastMemsetValue = value;
  gStats.lastMemsetCount = count;
  gStats.lastMemsetPointer =
      reinterpret_cast<void *>(static_cast<uintptr_t>(pointer));
  gStats.lastMemsetStream = stream;
  return CUDA_SUCCESS;
}

// Streams and events: opaque handles, counted.
CU_EXPORT cuStreamCreate(CUstream *stream, unsigned int) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  *stream = reinterpret_cast<CUstream>(new char('s'));
  ++gStats.streamsCreated;
  ++gStats.liveStreams;
  return CUDA_SUCCESS;
}

CU_EXPORT cuStreamDestroy_v2(CUstream stream) {
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  delete reinterpret_cast<char *>(stream);
  --gStats.liveStreams;
  return CUDA_SUCCESS;
}

CU_EXPORT cuEventCreate(CUevent *event, unsigned int) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  *event = reinterpret_cast<CUevent>(new char('e'));
  ++gStats.liveEvents;
  return CUDA_SUCCESS;
}

CU_EXPORT cuEventDestroy_v2(CUevent event) {
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  delete reinterpret_cast<char *>(event);
  --gStats.liveEvents;
  return CUDA_SUCCESS;
}

CU_EXPORT cuEventRecord(CUevent event, CUstream stream) {
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(gMutex);
  FakeCapture *capture = nullptr;
  if (CUresult refused = streamWork(stream, "cuEventRecord", &capture))
    return refused;
  ++gStats.eventRecords;
  return CUDA_SUCCESS;
}

CU_EXPORT cuEventSynchronize(CUevent event) {
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  ++gStats.eventSyncs;
  return CUDA_SUCCESS;
}

CU_EXPORT cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int) {
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(gMutex);
  FakeCapture *capture = nullptr;
  if (CUresult refused = streamWork(stream, "cuStreamWaitEvent", &capture))
    return refused;
  ++gStats.eventWaits;
  return CUDA_SUCCESS;
}

// A copy between host and fake device memory copies nothing (the fake has
// no device memory); a device range must lie in a live allocation.
CU_EXPORT cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                        CUstream stream) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(gMutex);
  FakeCapture *capture = nullptr;
  if (CUresult refused = streamWork(stream, "cuMemcpyAsync", &capture))
    return refused;
  if (!insideLive(dst, bytes, capture) && !insideLive(src, bytes, capture))
    return CUDA_ERROR_INVALID_VALUE;
  ++gStats.memcpys;
  gStats.lastMemcpyBytes = bytes;
  return CUDA_SUCCESS;
}

CU_EXPORT cuMemsetD16Async(CUdeviceptr pointer, unsigned short, size_t count,
                           CUstream stream) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(gMutex);
  FakeCapture *capture = nullptr;
  if (CUresult refused = streamWork(stream, "cuMemsetD16Async", &capture))
    return refused;
  if (pointer % 2 != 0 || !insideLive(pointer, count * 2, capture))
    return CUDA_ERROR_INVALID_VALUE;
  ++gStats.memsets16;
  return CUDA_SUCCESS;
}

// FAKECUDA_REPORT set: what a whole program did, printed at exit (for lit
// runs of lowered programs through mlir-runner).
struct ExitReport {
  ~ExitReport() {
    if (!envSet("FAKECUDA_REPORT"))
      return;
    std::fprintf(stderr,
                 "fakecuda: modules=%d lookups=%d launches=%d "
                 "cluster_launches=%d allocs=%d frees=%d async_allocs=%d "
                 "async_frees=%d memcpys=%d streams=%d live_streams=%d "
                 "live_allocations=%d violations=%d\n",
                 gStats.moduleLoads.load(), gStats.functionLookups.load(),
                 gStats.launches.load(), gStats.clusterLaunches.load(),
                 gStats.allocs.load(), gStats.frees.load(),
                 gStats.asyncAllocs.load(), gStats.asyncFrees.load(),
                 gStats.memcpys.load(), gStats.streamsCreated.load(),
                 gStats.liveStreams.load(), gStats.liveAllocations.load(),
                 gStats.captureViolations.load());
  }
} gExitReport;

CU_EXPORT cuStreamSynchronize(CUstream stream) {
  {
    std::lock_guard<std::mutex> lock(gMutex);
    FakeCapture *capture = nullptr;
    if (CUresult refused =
            streamWork(stream, "cuStreamSynchronize", &capture))
      return refused;
    if (capture) { // never legal, whatever the mode
      capture->invalidated = true;
      violation("cuStreamSynchronize");
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  ++gStats.streamSyncs;
  gStats.lastSyncedStream = stream;
  return CUDA_SUCCESS;
}

// The first signature (CUDA 10.1), which the driver still exports under this
// name; cuda.h maps the name to a later version.
#undef cuStreamGetCaptureInfo
extern "C" __attribute__((visibility("default"))) CUresult
cuStreamGetCaptureInfo(CUstream stream, CUstreamCaptureStatus *status,
                       cuuint64_t *id) {
  std::lock_guard<std::mutex> lock(gMutex);
  ++gStats.captureQueries;
  if (isLegacy(stream)) {
    if (anyActiveCapture()) // reported, not invalidated
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  auto it = gCaptures.find(stream);
  if (it == gCaptures.end()) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  *status = it->second.invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                   : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id)
    *id = it->second.id;
  return CUDA_SUCCESS;
}

CU_EXPORT cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  if (!mode || *mode < CU_STREAM_CAPTURE_MODE_GLOBAL ||
      *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, tCaptureMode);
  ++gStats.modeExchanges;
  return CUDA_SUCCESS;
}

CU_EXPORT cuMemAllocAsync(CUdeviceptr *pointer, size_t bytes,
                          CUstream stream) {
  if (!tCurrent)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0 || envSet("FAKECUDA_NO_MEMPOOLS"))
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(gMutex);
  FakeCapture *capture = nullptr;
  if (CUresult refused = streamWork(stream, "cuMemAllocAsync", &capture))
    return refused;
  if (bytes > gMemoryLimit || gLiveBytes > gMemoryLimit - bytes)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = gNextAddress;
  gNextAddress += (bytes + 255) / 256 * 256 + 256;
  ++gStats.asyncAllocs;
  if (capture) {
    // A graph allocation: its address is fixed at capture, its memory is
    // the graph's (mapped at each replay).
    capture->allocations[*pointer] = bytes;
    capture->nodes.push_back(
        FakeCudaNode{FAKECUDA_NODE_ALLOC, *pointer, bytes, 0, nullptr, 0});
    ++gStats.capturedNodes;
    return CUDA_SUCCESS;
  }
  gAllocations[*pointer] = bytes;
  gLiveBytes += bytes;
  ++gStats.allocs;
  ++gStats.liveAllocations;
  gStats.lastAllocBytes = bytes;
  return CUDA_SUCCESS;
}

CU_EXPORT cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  std::lock_guard<std::mutex> lock(gMutex);
  FakeCapture *capture = nullptr;
  if (CUresult refused = streamWork(stream, "cuMemFreeAsync", &capture))
    return refused;
  if (capture) {
    if (!capture->allocations.erase(pointer)) {
      ++gStats.badFrees;
      return CUDA_ERROR_INVALID_VALUE;
    }
    capture->nodes.push_back(
        FakeCudaNode{FAKECUDA_NODE_FREE, pointer, 0, 0, nullptr, 0});
    ++gStats.capturedNodes;
    ++gStats.asyncFrees;
    return CUDA_SUCCESS;
  }
  auto it = gAllocations.find(pointer);
  if (it == gAllocations.end()) {
    ++gStats.badFrees;
    return CUDA_ERROR_INVALID_VALUE;
  }
  gLiveBytes -= it->second;
  gAllocations.erase(it);
  ++gStats.frees;
  --gStats.liveAllocations;
  ++gStats.asyncFrees;
  return CUDA_SUCCESS;
}

namespace {
CUdeviceptr barrierArgument(CUfunction function, void **args) {
  FakeFunction *f = reinterpret_cast<FakeFunction *>(function);
  if (f->name != "norm_grid" || !args || !args[0])
    return 0;
  CUdeviceptr word = 0;
  std::memcpy(&word, args[0], sizeof(word));
  return word;
}
} // namespace
