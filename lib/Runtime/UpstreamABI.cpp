//===- UpstreamABI.cpp - The entry points upstream gpu-to-llvm calls ------===//
//
// Part of norm-opt. The C functions that upstream MLIR's GPU lowering
// (`gpu-to-llvm`, and the `gpu.binary` / `gpu.launch_func` translation to
// LLVM IR) emits calls to, over this runtime's driver loader, module cache
// and capture handling. Debian's MLIR 22 ships no CUDA runtime wrapper
// library, so `mlir-runner --shared-libs=libnorm_runtime.so` is how a whole
// lowered pipeline runs on a GPU. A kernel library (norm-opt compile) links
// the static copy and keeps these symbols local, so its launchers' calls stay
// in it and one process has one exported set.
//
// The signatures are those LLVM 22 emits (docs/runtime.md lists them).
// Where upstream's wrappers print and carry on, so do these: a failure
// prints "normrt: <message>" to stderr once, keeps the message for
// normrt_last_error(), and a function that returns a handle returns NULL.
//
// Differences from upstream's wrappers, on purpose:
//  - a module is loaded on its first function lookup, once per context (the
//    runtime's cache), so loading a program touches no driver;
//    mgpuModuleUnload leaves it to normrt_release_all;
//  - normrt_use_stream(s) hands the caller's stream to the lowered code:
//    mgpuStreamCreate returns it, mgpuStreamDestroy leaves it alone, and
//    mgpuStreamSynchronize does not synchronise it while it captures a CUDA
//    graph (a synchronisation would invalidate the capture);
//  - while the stream captures, mgpuMemAlloc / mgpuMemFree become
//    stream-ordered allocation and free nodes of the graph.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cstdio>
#include <cstring>

using namespace normrt_detail;

namespace {

// The stream normrt_use_stream handed over on this thread (set: true).
thread_local CUstream tHandedStream;
thread_local bool tStreamHanded;

/// Prints the calling thread's message for a failed `status`.
void report(int status) {
  if (status != NORMRT_SUCCESS)
    std::fprintf(stderr, "normrt: %s\n", lastError());
}

/// Runs `body` (a normrt status) guarded, reporting a failure; in a launch
/// sequence (LaunchSequence.cpp) it keeps the first failure instead and
/// does nothing after one.
template <typename Body> void run(const char *fn, Body &&body) {
  LaunchSequence &s = tSequence;
  if (!s.active)
    return report(guarded(fn, body));
  if (s.status == NORMRT_SUCCESS)
    s.status = guarded(fn, body);
}

/// A driver entry point the upstream ABI needs beyond the runtime's own.
int requireEntry(const char *fn, const void *entry, const char *name) {
  if (int status = requireDriver(fn))
    return status;
  if (!entry)
    return fail(NORMRT_ERROR_DRIVER,
                "%s: the CUDA driver has no %s (too old?)", fn, name);
  return NORMRT_SUCCESS;
}

/// `Member(args...)`, a driver entry point the upstream ABI needs beyond the
/// runtime's own, as a status whose message names `fn` and `name`.
template <auto Member, typename... Args>
int callDriver(const char *fn, const char *name, Args... args) {
  if (int status = requireDriver(fn))
    return status;
  auto entry = gDriver.*Member;
  if (!entry)
    return fail(NORMRT_ERROR_DRIVER,
                "%s: the CUDA driver has no %s (too old?)", fn, name);
  CUresult result = entry(args...);
  return result == CUDA_SUCCESS
             ? int(NORMRT_SUCCESS)
             : cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                      "%s: %s failed", fn, name);
}

/// The launch of `f` with a grid, a block, and a cluster shape (all 1: no
/// cluster attribute).
int launch(const char *fn, void *function, const intptr_t cluster[3],
           const intptr_t grid[3], const intptr_t block[3], int32_t smem,
           void *stream, void **params, void **extra) {
  if (!function)
    return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: function is NULL", fn);
  for (int i = 0; i < 3; ++i)
    if (grid[i] < 1 || block[i] < 1 || cluster[i] < 1 ||
        grid[i] > 0x7fffffff || block[i] > 1024 || cluster[i] > 16 ||
        grid[i] % cluster[i] != 0)
      return fail(NORMRT_ERROR_OUT_OF_RANGE,
                  "%s: grid %ldx%ldx%ld, block %ldx%ldx%ld, cluster "
                  "%ldx%ldx%ld: a dimension is out of range or the grid is "
                  "not a multiple of the cluster",
                  fn, long(grid[0]), long(grid[1]), long(grid[2]),
                  long(block[0]), long(block[1]), long(block[2]),
                  long(cluster[0]), long(cluster[1]), long(cluster[2]));
  if (smem < 0)
    return fail(NORMRT_ERROR_OUT_OF_RANGE, "%s: %d bytes of shared memory",
                fn, int(smem));
  if (int status = requireDriver(fn))
    return status;
  CUfunction f = static_cast<CUfunction>(function);
  CUstream s = static_cast<CUstream>(stream);
  if (isLegacyStream(s)) {
    Capture capture;
    if (int status = captureOf(fn, s, &capture))
      return status;
  }
  if (int status = allowDynamicShared(fn, f, unsigned(smem)))
    return status;
  bool clustered = cluster[0] * cluster[1] * cluster[2] > 1;
  CUresult result;
  if (clustered) {
    if (int status = requireEntry(fn, reinterpret_cast<const void *>(
                                          gDriver.launchKernelEx),
                                  "cuLaunchKernelEx"))
      return status;
    CUlaunchAttribute attribute = {};
    attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute.value.clusterDim.x = unsigned(cluster[0]);
    attribute.value.clusterDim.y = unsigned(cluster[1]);
    attribute.value.clusterDim.z = unsigned(cluster[2]);
    CUlaunchConfig config = {};
    config.gridDimX = unsigned(grid[0]);
    config.gridDimY = unsigned(grid[1]);
    config.gridDimZ = unsigned(grid[2]);
    config.blockDimX = unsigned(block[0]);
    config.blockDimY = unsigned(block[1]);
    config.blockDimZ = unsigned(block[2]);
    config.sharedMemBytes = unsigned(smem);
    config.hStream = s;
    config.attrs = &attribute;
    config.numAttrs = 1;
    result = gDriver.launchKernelEx(&config, f, params, extra);
  } else {
    result = gDriver.launchKernel(
        f, unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2]),
        unsigned(block[0]), unsigned(block[1]), unsigned(block[2]),
        unsigned(smem), s, params, extra);
  }
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_LAUNCH, result,
                  "%s: launch of grid %ldx%ldx%ld, block %ldx%ldx%ld, %d "
                  "bytes of shared memory on stream %p failed",
                  fn, long(grid[0]), long(grid[1]), long(grid[2]),
                  long(block[0]), long(block[1]), long(block[2]), int(smem),
                  stream);
  return NORMRT_SUCCESS;
}

/// Whether `stream` is the one handed over and captures a graph now.
bool handedAndCapturing(const char *fn, CUstream stream) {
  if (!tStreamHanded || stream != tHandedStream)
    return false;
  Capture capture;
  return captureOf(fn, stream, &capture) == NORMRT_SUCCESS && capture.active;
}

/// The bytes a strided memref descriptor spans: {allocated, aligned,
/// offset, sizes[rank], strides[rank]} of 64-bit fields.
size_t memrefBytes(int64_t rank, const int64_t *descriptor,
                   int64_t elementBytes) {
  const int64_t *sizes = descriptor + 3, *strides = sizes + rank;
  int64_t last = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (sizes[i] == 0)
      return 0;
    last += (sizes[i] - 1) * strides[i];
  }
  return size_t(last + 1) * size_t(elementBytes);
}

} // namespace

extern "C" {

NORMRT_API int normrt_use_stream(void *stream) {
  tHandedStream = static_cast<CUstream>(stream);
  tStreamHanded = stream != nullptr;
  return NORMRT_SUCCESS;
}

NORMRT_API void *normrt_ir_stream(void) {
  return tStreamHanded ? tHandedStream : nullptr;
}

NORMRT_API void *mgpuModuleLoad(void *data, size_t /*gpuBlobSize*/) {
  if (!data)
    report(fail(NORMRT_ERROR_INVALID_ARGUMENT, "mgpuModuleLoad: data is NULL"));
  return data; // the image is the handle: loaded at the first lookup
}

NORMRT_API void *mgpuModuleLoadJIT(void *data, int /*optLevel*/) {
  // PTX: the driver compiles it when the module loads, at its own level.
  return mgpuModuleLoad(data, 0);
}

NORMRT_API void mgpuModuleUnload(void * /*module*/) {
  // Cached per context until normrt_release_all: kernels may still run.
}

NORMRT_API void *mgpuModuleGetFunction(void *module, const char *name) {
  if (void *cached = recentFunction(module, name))
    return cached;
  void *function = nullptr;
  run("mgpuModuleGetFunction", [&] {
    return getFunction("mgpuModuleGetFunction", module, name, &function);
  });
  rememberFunction(module, name, function);
  return function;
}

NORMRT_API void mgpuLaunchKernel(void *function, intptr_t gridX,
                                 intptr_t gridY, intptr_t gridZ,
                                 intptr_t blockX, intptr_t blockY,
                                 intptr_t blockZ, int32_t smem, void *stream,
                                 void **params, void **extra,
                                 size_t /*paramsCount*/) {
  const intptr_t cluster[3] = {1, 1, 1}, grid[3] = {gridX, gridY, gridZ},
                 block[3] = {blockX, blockY, blockZ};
  if (tSequence.active) // plain, cooperative, dependent or a query
    return run("mgpuLaunchKernel", [&] {
      // Grids are (programs, samples): batched rows' sample is blockIdx.y.
      if (gridZ != 1 || blockY != 1 || blockZ != 1)
        return fail(NORMRT_ERROR_OUT_OF_RANGE,
                    "mgpuLaunchKernel: a launch sequence's grid is at most "
                    "two-dimensional and its block one-dimensional");
      return sequenceLaunch(function, gridX, gridY, blockX, smem, stream,
                            params);
    });
  run("mgpuLaunchKernel", [&] {
    return launch("mgpuLaunchKernel", function, cluster, grid, block, smem,
                  stream, params, extra);
  });
}

NORMRT_API void mgpuLaunchClusterKernel(
    void *function, intptr_t clusterX, intptr_t clusterY, intptr_t clusterZ,
    intptr_t gridX, intptr_t gridY, intptr_t gridZ, intptr_t blockX,
    intptr_t blockY, intptr_t blockZ, int32_t smem, void *stream,
    void **params, void **extra) {
  const intptr_t cluster[3] = {clusterX, clusterY, clusterZ},
                 grid[3] = {gridX, gridY, gridZ},
                 block[3] = {blockX, blockY, blockZ};
  run("mgpuLaunchClusterKernel", [&] {
    return launch("mgpuLaunchClusterKernel", function, cluster, grid, block,
                  smem, stream, params, extra);
  });
}

NORMRT_API void *mgpuStreamCreate(void) {
  if (tSequence.active)
    return tSequence.stream;
  if (tStreamHanded)
    return tHandedStream;
  CUstream stream = nullptr;
  constexpr const char *fn = "mgpuStreamCreate";
  run(fn, [&] {
    CUcontext context = nullptr;
    if (int status = requireContext(fn, &context))
      return status;
    if (int status = requireEntry(
            fn, reinterpret_cast<const void *>(gDriver.streamCreate),
            "cuStreamCreate"))
      return status;
    CUresult result = gDriver.streamCreate(&stream, CU_STREAM_NON_BLOCKING);
    return result == CUDA_SUCCESS
               ? int(NORMRT_SUCCESS)
               : cuFail(NORMRT_ERROR_DRIVER, result, "%s failed", fn);
  });
  return stream;
}

NORMRT_API void mgpuStreamDestroy(void *stream) {
  if (tSequence.active && stream == tSequence.stream)
    return; // the sequence's (the caller's)
  if (tStreamHanded && stream == tHandedStream)
    return; // the caller's
  run("mgpuStreamDestroy", [&] {
    return callDriver<&Driver::streamDestroy>(
        "mgpuStreamDestroy", "cuStreamDestroy", static_cast<CUstream>(stream));
  });
}

NORMRT_API void mgpuStreamSynchronize(void *stream) {
  constexpr const char *fn = "mgpuStreamSynchronize";
  run(fn, [&] {
    if (int status = requireDriver(fn))
      return status;
    CUstream s = static_cast<CUstream>(stream);
    if (handedAndCapturing(fn, s))
      return int(NORMRT_SUCCESS); // the graph's replay is the caller's
    CUresult result = gDriver.streamSynchronize(s);
    return result == CUDA_SUCCESS
               ? int(NORMRT_SUCCESS)
               : cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                        "%s(%p) failed", fn, stream);
  });
}

NORMRT_API void mgpuStreamWaitEvent(void *stream, void *event) {
  run("mgpuStreamWaitEvent", [&] {
    return callDriver<&Driver::streamWaitEvent>(
        "mgpuStreamWaitEvent", "cuStreamWaitEvent",
        static_cast<CUstream>(stream), static_cast<CUevent>(event), 0u);
  });
}

NORMRT_API void *mgpuEventCreate(void) {
  CUevent event = nullptr;
  constexpr const char *fn = "mgpuEventCreate";
  run(fn, [&] {
    CUcontext context = nullptr;
    if (int status = requireContext(fn, &context))
      return status;
    if (int status = requireEntry(
            fn, reinterpret_cast<const void *>(gDriver.eventCreate),
            "cuEventCreate"))
      return status;
    CUresult result = gDriver.eventCreate(&event, CU_EVENT_DISABLE_TIMING);
    return result == CUDA_SUCCESS
               ? int(NORMRT_SUCCESS)
               : cuFail(NORMRT_ERROR_DRIVER, result, "%s failed", fn);
  });
  return event;
}

NORMRT_API void mgpuEventDestroy(void *event) {
  run("mgpuEventDestroy", [&] {
    return callDriver<&Driver::eventDestroy>(
        "mgpuEventDestroy", "cuEventDestroy", static_cast<CUevent>(event));
  });
}

NORMRT_API void mgpuEventSynchronize(void *event) {
  run("mgpuEventSynchronize", [&] {
    return callDriver<&Driver::eventSynchronize>(
        "mgpuEventSynchronize", "cuEventSynchronize",
        static_cast<CUevent>(event));
  });
}

NORMRT_API void mgpuEventRecord(void *event, void *stream) {
  run("mgpuEventRecord", [&] {
    return callDriver<&Driver::eventRecord>(
        "mgpuEventRecord", "cuEventRecord", static_cast<CUevent>(event),
        static_cast<CUstream>(stream));
  });
}

NORMRT_API void *mgpuMemAlloc(uint64_t bytes, void *stream,
                              bool isHostShared) {
  CUdeviceptr pointer = 0;
  constexpr const char *fn = "mgpuMemAlloc";
  run(fn, [&] {
    CUcontext context = nullptr;
    if (int status = requireContext(fn, &context))
      return status;
    if (bytes == 0)
      return int(NORMRT_SUCCESS);
    CUstream s = static_cast<CUstream>(stream);
    Capture capture;
    if (int status = captureOf(fn, s, &capture))
      return status;
    CUresult result;
    if (isHostShared) {
      if (int status = requireEntry(
              fn, reinterpret_cast<const void *>(gDriver.memAllocManaged),
              "cuMemAllocManaged"))
        return status;
      result = gDriver.memAllocManaged(&pointer, bytes, CU_MEM_ATTACH_GLOBAL);
    } else if (capture.active) {
      // A stream-ordered allocation node of the graph being captured.
      if (int status = requireEntry(
              fn, reinterpret_cast<const void *>(gDriver.memAllocAsync),
              "cuMemAllocAsync"))
        return status;
      result = gDriver.memAllocAsync(&pointer, bytes, s);
    } else {
      result = gDriver.memAlloc(&pointer, bytes);
    }
    return result == CUDA_SUCCESS
               ? int(NORMRT_SUCCESS)
               : cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                        "%s(%llu bytes) failed", fn,
                        static_cast<unsigned long long>(bytes));
  });
  return reinterpret_cast<void *>(pointer);
}

NORMRT_API void mgpuMemFree(void *ptr, void *stream) {
  constexpr const char *fn = "mgpuMemFree";
  run(fn, [&] {
    if (!ptr)
      return int(NORMRT_SUCCESS);
    if (int status = requireDriver(fn))
      return status;
    CUstream s = static_cast<CUstream>(stream);
    Capture capture;
    if (int status = captureOf(fn, s, &capture))
      return status;
    CUdeviceptr pointer = reinterpret_cast<CUdeviceptr>(ptr);
    CUresult result = capture.active && gDriver.memFreeAsync
                          ? gDriver.memFreeAsync(pointer, s)
                          : gDriver.memFree(pointer);
    return result == CUDA_SUCCESS
               ? int(NORMRT_SUCCESS)
               : cuFail(statusFor(result, NORMRT_ERROR_DRIVER), result,
                        "%s(%p) failed", fn, ptr);
  });
}

NORMRT_API void mgpuMemcpy(void *dst, void *src, size_t bytes,
                           void *stream) {
  run("mgpuMemcpy", [&] {
    return callDriver<&Driver::memcpyAsync>(
        "mgpuMemcpy", "cuMemcpyAsync", reinterpret_cast<CUdeviceptr>(dst),
        reinterpret_cast<CUdeviceptr>(src), bytes,
        static_cast<CUstream>(stream));
  });
}

NORMRT_API void mgpuMemset32(void *dst, unsigned int value, size_t count,
                             void *stream) {
  run("mgpuMemset32", [&] {
    return callDriver<&Driver::memsetD32Async>(
        "mgpuMemset32", "cuMemsetD32Async", reinterpret_cast<CUdeviceptr>(dst),
        value, count, static_cast<CUstream>(stream));
  });
}

NORMRT_API void mgpuMemset16(void *dst, unsigned short value, size_t count,
                             void *stream) {
  run("mgpuMemset16", [&] {
    return callDriver<&Driver::memsetD16Async>(
        "mgpuMemset16", "cuMemsetD16Async", reinterpret_cast<CUdeviceptr>(dst),
        value, count, static_cast<CUstream>(stream));
  });
}

NORMRT_API void mgpuMemHostRegister(void *ptr, uint64_t bytes) {
  constexpr const char *fn = "mgpuMemHostRegister";
  run(fn, [&] {
    CUcontext context = nullptr;
    if (int status = requireContext(fn, &context))
      return status;
    if (int status = requireEntry(
            fn, reinterpret_cast<const void *>(gDriver.memHostRegister),
            "cuMemHostRegister"))
      return status;
    if (!ptr || bytes == 0)
      return int(NORMRT_SUCCESS);
    CUresult result = gDriver.memHostRegister(ptr, bytes, 0);
    return result == CUDA_SUCCESS
               ? int(NORMRT_SUCCESS)
               : cuFail(NORMRT_ERROR_DRIVER, result, "%s failed", fn);
  });
}

NORMRT_API void mgpuMemHostUnregister(void *ptr) {
  if (!ptr)
    return;
  run("mgpuMemHostUnregister", [&] {
    return callDriver<&Driver::memHostUnregister>(
        "mgpuMemHostUnregister", "cuMemHostUnregister", ptr);
  });
}

NORMRT_API void mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                                          int64_t elementSizeBytes) {
  const int64_t *d = static_cast<const int64_t *>(descriptor);
  void *aligned = reinterpret_cast<void *>(d[1]);
  mgpuMemHostRegister(static_cast<char *>(aligned) + d[2] * elementSizeBytes,
                      memrefBytes(rank, d, elementSizeBytes));
}

NORMRT_API void mgpuMemHostUnregisterMemRef(int64_t /*rank*/,
                                            void *descriptor,
                                            int64_t elementSizeBytes) {
  const int64_t *d = static_cast<const int64_t *>(descriptor);
  void *aligned = reinterpret_cast<void *>(d[1]);
  mgpuMemHostUnregister(static_cast<char *>(aligned) +
                        d[2] * elementSizeBytes);
}

NORMRT_API void mgpuSetDefaultDevice(int32_t device) {
  constexpr const char *fn = "mgpuSetDefaultDevice";
  run(fn, [&] { return makeDeviceCurrent(fn, device); });
}

} // extern "C"
