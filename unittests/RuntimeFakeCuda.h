//===- RuntimeFakeCuda.h - Controls of the fake libcuda for RuntimeTest ---===//
//
// Part of norm-opt. RuntimeFakeCuda.cpp builds libnormrt_fakecuda.so, a
// stand-in for libcuda that the runtime loads through NORMRT_LIBCUDA so its
// module cache, workspaces and launches can be tested without a GPU. The
// test reaches these controls with dlsym on the same library.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_UNITTESTS_RUNTIMEFAKECUDA_H
#define NORM_UNITTESTS_RUNTIMEFAKECUDA_H

#include <atomic>
#include <cstddef>

struct FakeCudaStats {
  std::atomic<int> inits{0};
  std::atomic<int> primaryRetains{0};
  std::atomic<int> attributeQueries{0};
  std::atomic<int> moduleLoads{0};
  std::atomic<int> moduleUnloads{0};
  std::atomic<int> liveModules{0};
  std::atomic<int> functionLookups{0};
  std::atomic<int> functionLoads{0}; // cuFuncLoad
  std::atomic<int> allocs{0};
  std::atomic<int> frees{0};
  std::atomic<int> badFrees{0};
  std::atomic<int> liveAllocations{0};
  std::atomic<size_t> lastAllocBytes{0};
  std::atomic<int> streamSyncs{0};
  std::atomic<void *> lastSyncedStream{nullptr};
  std::atomic<int> contextSyncs{0};
  std::atomic<int> setAttributes{0};
  std::atomic<int> lastSharedAttribute{0};
  std::atomic<int> launches{0}; // cooperative launches included
  std::atomic<int> cooperativeLaunches{0};
  // cuLaunchKernelEx with programmatic stream serialization allowed.
  std::atomic<int> dependentLaunches{0};
  // cuMemsetD32Async: successful calls, calls outside any live allocation,
  // and the arguments of the last successful one.
  std::atomic<int> memsets{0};
  std::atomic<int> badMemsets{0};
  std::atomic<unsigned> lastMemsetValue{0};
  std::atomic<size_t> lastMemsetCount{0};
  std::atomic<void *> lastMemsetPointer{nullptr};
  std::atomic<void *> lastMemsetStream{nullptr};
  // Stream capture. captureViolations: calls that broke a capture (the fake
  // invalidated it, as CUDA does); capturedNodes: stream work recorded into
  // a capture instead of run. asyncAllocs / asyncFrees: cuMemAllocAsync /
  // cuMemFreeAsync calls that succeeded (captured or not); modeExchanges:
  // cuThreadExchangeStreamCaptureMode calls.
  std::atomic<int> captureViolations{0};
  std::atomic<int> capturedNodes{0};
  std::atomic<int> asyncAllocs{0};
  std::atomic<int> asyncFrees{0};
  std::atomic<int> modeExchanges{0};
  std::atomic<int> captureQueries{0};
  // Replays: graph allocations still live when a replay ended, and runs of
  // the barrier kernel ("norm_grid") whose word was in no live allocation.
  std::atomic<int> graphUnfreed{0};
  std::atomic<int> badBarriers{0};
  std::atomic<int> clusterQueries{0}; // cuOccupancyMaxActiveClusters
  // What the upstream runner ABI (mgpu*) drives: streams and events made
  // and still live, event records / waits / synchronisations, async copies
  // and 16-bit memsets, cuLaunchKernelEx launches with a cluster shape.
  std::atomic<int> streamsCreated{0};
  std::atomic<int> liveStreams{0};
  std::atomic<int> liveEvents{0};
  std::atomic<int> eventRecords{0};
  std::atomic<int> eventWaits{0};
  std::atomic<int> eventSyncs{0};
  std::atomic<int> memcpys{0};
  std::atomic<size_t> lastMemcpyBytes{0};
  std::atomic<int> memsets16{0};
  std::atomic<int> clusterLaunches{0};
  // What a launch asks the driver: cuCtxGetCurrent / cuCtxGetDevice calls,
  // cuOccupancyMaxActiveBlocksPerMultiprocessor calls.
  std::atomic<int> contextQueries{0};
  std::atomic<int> occupancyQueries{0};
};

// A node of a fake graph, in capture order.
enum FakeCudaNodeKind {
  FAKECUDA_NODE_ALLOC = 1,  // cuMemAllocAsync: pointer, bytes
  FAKECUDA_NODE_FREE = 2,   // cuMemFreeAsync: pointer
  FAKECUDA_NODE_MEMSET = 3, // cuMemsetD32Async: pointer, bytes = count, value
  FAKECUDA_NODE_KERNEL = 4  // a launch: function, cooperative, pointer = the
                            // barrier kernel's argument 0 (else 0)
};
struct FakeCudaNode {
  int kind;
  unsigned long long pointer;
  size_t bytes;
  unsigned value;
  void *function;
  int cooperative;
  int dependent; // programmatic stream serialization (cuLaunchKernelEx)
};

// The last successful cuLaunchKernel, cuLaunchKernelEx or
// cuLaunchCooperativeKernel.
struct FakeCudaLaunch {
  void *function;
  unsigned grid[3];
  unsigned block[3];
  unsigned shared;
  void *stream;
  void **args;
  int cooperative; // 1: cuLaunchCooperativeKernel
  int dependent;   // 1: cuLaunchKernelEx, programmatic stream serialization
  unsigned cluster[3]; // cuLaunchKernelEx with a cluster shape (else 0s)
};

extern "C" {
typedef FakeCudaStats *(*FakeCudaStatsFn)(void);
typedef void (*FakeCudaLastLaunchFn)(FakeCudaLaunch *);
// The kernel name a CUfunction of the fake was looked up by.
typedef const char *(*FakeCudaFunctionNameFn)(void *function);
// Device memory limit in bytes, live allocations included (default 1 GiB).
typedef void (*FakeCudaSetMemoryLimitFn)(size_t);
// A new context, distinct from the primary one.
typedef void *(*FakeCudaNewContextFn)(void);
typedef void *(*FakeCudaPrimaryContextFn)(void);
// This thread's current context / make `ctx` current on this thread.
typedef void *(*FakeCudaCurrentContextFn)(void);
typedef void (*FakeCudaSetCurrentContextFn)(void *);

// Capture, as cuStreamBeginCapture / cuStreamEndCapture do (mode: a
// CUstreamCaptureMode); both return a CUresult. End gives NULL and
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED for an invalidated capture. The
// legacy stream (NULL) cannot capture; every other stream is a blocking one.
typedef int (*FakeCudaBeginCaptureFn)(void *stream, int mode);
typedef int (*FakeCudaEndCaptureFn)(void *stream, void **graph_out);
// The nodes of a graph: writes up to `max`, returns how many there are.
typedef int (*FakeCudaGraphNodesFn)(void *graph, FakeCudaNode *out, int max);
// Graph allocations the graph does not free itself.
typedef int (*FakeCudaGraphUnfreedFn)(void *graph);
// Runs a graph's nodes in order: allocations get fresh (poisoned) memory,
// memsets write, the barrier kernel runs, frees free. Returns a CUresult.
typedef int (*FakeCudaGraphLaunchFn)(void *graph);
// The name of the last call that broke a capture ("" if none).
typedef const char *(*FakeCudaLastViolationFn)(void);
// The barrier kernel "norm_grid" (argument 0: a pointer to its word) reads
// the word, then flips its top bit as the real grid barrier leaves it. This
// gives the values it read, oldest first (up to `max`), and forgets them.
typedef int (*FakeCudaBarrierReadsFn)(unsigned *out, int max);
}

#endif // NORM_UNITTESTS_RUNTIMEFAKECUDA_H
