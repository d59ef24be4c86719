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
  // cuMemsetD32Async: successful calls, calls outside any live allocation,
  // and the arguments of the last successful one.
  std::atomic<int> memsets{0};
  std::atomic<int> badMemsets{0};
  std::atomic<unsigned> lastMemsetValue{0};
  std::atomic<size_t> lastMemsetCount{0};
  std::atomic<void *> lastMemsetPointer{nullptr};
  std::atomic<void *> lastMemsetStream{nullptr};
};

// The last successful cuLaunchKernel or cuLaunchCooperativeKernel.
struct FakeCudaLaunch {
  void *function;
  unsigned grid[3];
  unsigned block[3];
  unsigned shared;
  void *stream;
  void **args;
  int cooperative; // 1: cuLaunchCooperativeKernel
};

extern "C" {
typedef FakeCudaStats *(*FakeCudaStatsFn)(void);
typedef void (*FakeCudaLastLaunchFn)(FakeCudaLaunch *);
// Device memory limit in bytes, live allocations included (default 1 GiB).
typedef void (*FakeCudaSetMemoryLimitFn)(size_t);
// A new context, distinct from the primary one.
typedef void *(*FakeCudaNewContextFn)(void);
typedef void *(*FakeCudaPrimaryContextFn)(void);
// This thread's current context / make `ctx` current on this thread.
typedef void *(*FakeCudaCurrentContextFn)(void);
typedef void (*FakeCudaSetCurrentContextFn)(void *);
}

#endif // NORM_UNITTESTS_RUNTIMEFAKECUDA_H
