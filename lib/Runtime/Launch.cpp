//===- Launch.cpp - The C API: launches and occupancy -----------------------===
//
// Part of norm-opt: the kernel runtime (lib/Runtime). RuntimeInternal.h
// says what its files share and the rules they keep.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cstring>

using namespace normrt_detail;

extern "C" {

namespace {
/// A launch of normrt_launch (dependent = false) or normrt_launch_dependent.
int launchKernel(const char *fn, void *function, unsigned grid_x,
                 unsigned grid_y, unsigned block_x, unsigned shared_bytes,
                 void *stream, void **args, bool dependent) {
  if (int status =
          checkLaunchShape(fn, function, grid_x, grid_y, block_x, shared_bytes))
    return status;
  if (int status = requireDriver(fn))
    return status;
  if (tQuerying)
    return static_cast<int>(NORMRT_SUCCESS);
  CUfunction f = static_cast<CUfunction>(function);
  CUstream cuStream = static_cast<CUstream>(stream);
  if (int status = checkLegacyStream(fn, cuStream))
    return status;
  if (int status = allowDynamicShared(fn, f, shared_bytes))
    return status;
  if (dependent && gDriver.launchKernelEx &&
      !envSwitchSet("NORMRT_NO_DEPENDENT_LAUNCH")) {
    // The kernel may start once every CTA of the kernel before it on the
    // stream has signalled (griddepcontrol.launch_dependents) or finished;
    // it waits for that kernel's completion itself (griddepcontrol.wait).
    CUlaunchAttribute attribute = {};
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config = {};
    config.gridDimX = grid_x;
    config.gridDimY = grid_y;
    config.gridDimZ = 1;
    config.blockDimX = block_x;
    config.blockDimY = 1;
    config.blockDimZ = 1;
    config.sharedMemBytes = shared_bytes;
    config.hStream = cuStream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    CUresult result = gDriver.launchKernelEx(&config, f, args, nullptr);
    if (result != CUDA_SUCCESS)
      return cuFail(NORMRT_ERROR_LAUNCH, result,
                    "%s: cuLaunchKernelEx(grid %ux%u, block %u, %u bytes of "
                    "shared memory, stream %p, programmatic stream "
                    "serialization) failed",
                    fn, grid_x, grid_y, block_x, shared_bytes, stream);
    return static_cast<int>(NORMRT_SUCCESS);
  }
  CUresult result = gDriver.launchKernel(f, grid_x, grid_y, 1, block_x, 1, 1,
                                         shared_bytes, cuStream, args, nullptr);
  if (result != CUDA_SUCCESS)
    return cuFail(NORMRT_ERROR_LAUNCH, result,
                  "%s: cuLaunchKernel(grid %ux%u, block %u, %u bytes of "
                  "shared memory, stream %p) failed",
                  fn, grid_x, grid_y, block_x, shared_bytes, stream);
  return static_cast<int>(NORMRT_SUCCESS);
}
} // namespace

int normrt_launch(void *function, unsigned grid_x, unsigned grid_y,
                  unsigned block_x, unsigned shared_bytes, void *stream,
                  void **args) {
  constexpr const char *fn = "normrt_launch";
  return guarded(fn, [&] {
    return launchKernel(fn, function, grid_x, grid_y, block_x, shared_bytes,
                        stream, args, /*dependent=*/false);
  });
}

int normrt_launch_dependent(void *function, unsigned grid_x, unsigned grid_y,
                            unsigned block_x, unsigned shared_bytes,
                            void *stream, void **args) {
  constexpr const char *fn = "normrt_launch_dependent";
  return guarded(fn, [&] {
    return launchKernel(fn, function, grid_x, grid_y, block_x, shared_bytes,
                        stream, args, /*dependent=*/true);
  });
}

int normrt_max_active_ctas(void *function, unsigned block_x,
                           unsigned shared_bytes, int *out) {
  constexpr const char *fn = "normrt_max_active_ctas";
  return guarded(fn, [&] {
    if (int status = checkOccupancyQuery(fn, function, block_x,
                                         shared_bytes, out))
      return status;
    if (int status = requireDriver(fn))
      return status;
    return maxActiveCtas(fn, static_cast<CUfunction>(function), block_x,
                         shared_bytes, out);
  });
}

int normrt_max_active_clusters(void *function, unsigned block_x,
                               unsigned shared_bytes, unsigned cluster_ctas,
                               int *out) {
  constexpr const char *fn = "normrt_max_active_clusters";
  return guarded(fn, [&] {
    if (int status = checkOccupancyQuery(fn, function, block_x,
                                         shared_bytes, out))
      return status;
    if (cluster_ctas == 0 || cluster_ctas > 16u)
      return fail(NORMRT_ERROR_INVALID_ARGUMENT,
                  "%s: cluster of %u CTAs is not in [1, 16]", fn,
                  cluster_ctas);
    if (int status = requireDriver(fn))
      return status;
    if (!gDriver.occupancyMaxActiveClusters)
      return fail(NORMRT_ERROR_DRIVER,
                  "%s: the driver has no cuOccupancyMaxActiveClusters "
                  "(clustered kernels need CUDA 12)",
                  fn);
    CUfunction f = static_cast<CUfunction>(function);
    if (int status = allowDynamicShared(fn, f, shared_bytes))
      return status;
    CUlaunchAttribute cluster = {};
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = cluster_ctas;
    cluster.value.clusterDim.y = 1;
    cluster.value.clusterDim.z = 1;
    CUlaunchConfig config = {};
    config.gridDimX = cluster_ctas;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = block_x;
    config.blockDimY = config.blockDimZ = 1;
    config.sharedMemBytes = shared_bytes;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int clusters = 0;
    CUresult result = gDriver.occupancyMaxActiveClusters(&clusters, f, &config);
    if (result != CUDA_SUCCESS)
      return cuFail(NORMRT_ERROR_DRIVER, result,
                    "%s: cuOccupancyMaxActiveClusters(cluster %u, block %u, "
                    "%u bytes of shared memory) failed",
                    fn, cluster_ctas, block_x, shared_bytes);
    *out = clusters;
    return static_cast<int>(NORMRT_SUCCESS);
  });
}

int normrt_cooperative_fits(void *function, unsigned grid_x,
                            unsigned block_x, unsigned shared_bytes,
                            int *out) {
  constexpr const char *fn = "normrt_cooperative_fits";
  return guarded(fn, [&] {
    if (!out)
      return fail(NORMRT_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = 0;
    if (int status =
            checkLaunchShape(fn, function, grid_x, 1, block_x, shared_bytes))
      return status;
    if (int status = requireDriver(fn))
      return status;
    if (envSwitchSet("NORMRT_NO_COOPERATIVE") ||
        !gDriver.launchCooperativeKernel || !gDriver.memsetD32Async)
      return static_cast<int>(NORMRT_SUCCESS);
    CUdevice device = 0;
    int sms = 0;
    if (currentDevice(fn, &device) != NORMRT_SUCCESS ||
        !cooperativeLaunchSupported(device))
      return static_cast<int>(NORMRT_SUCCESS);
    if (int status = smCount(fn, &sms))
      return status;
    int perSM = 0;
    if (int status = maxActiveCtas(fn, static_cast<CUfunction>(function),
                                   block_x, shared_bytes, &perSM))
      return status;
    *out = grid_x <= static_cast<unsigned>(sms) * static_cast<unsigned>(perSM);
    return static_cast<int>(NORMRT_SUCCESS);
  });
}

int normrt_launch_cooperative(void *function, unsigned grid_x,
                              unsigned block_x, unsigned shared_bytes,
                              void *stream, void **args) {
  constexpr const char *fn = "normrt_launch_cooperative";
  return guarded(fn, [&] {
    if (int status =
            checkLaunchShape(fn, function, grid_x, 1, block_x, shared_bytes))
      return status;
    if (int status = requireDriver(fn))
      return status;
    if (tQuerying)
      return static_cast<int>(NORMRT_SUCCESS);
    if (!gDriver.launchCooperativeKernel)
      return fail(NORMRT_ERROR_LAUNCH,
                  "%s: the driver has no cuLaunchCooperativeKernel", fn);
    CUfunction f = static_cast<CUfunction>(function);
    if (int status = checkLegacyStream(fn, static_cast<CUstream>(stream)))
      return status;
    if (int status = allowDynamicShared(fn, f, shared_bytes))
      return status;
    CUresult result = gDriver.launchCooperativeKernel(
        f, grid_x, 1, 1, block_x, 1, 1, shared_bytes,
        static_cast<CUstream>(stream), args);
    if (result != CUDA_SUCCESS)
      return cuFail(NORMRT_ERROR_LAUNCH, result,
                    "%s: cuLaunchCooperativeKernel(grid %u, block %u, %u "
                    "bytes of shared memory, stream %p) failed",
                    fn, grid_x, block_x, shared_bytes, stream);
    return static_cast<int>(NORMRT_SUCCESS);
  });
}

} // extern "C"
