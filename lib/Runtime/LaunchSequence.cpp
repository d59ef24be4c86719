//===- LaunchSequence.cpp - The entry points of the host lowering ---------===//
//
// Part of norm-opt: the kernel runtime (lib/Runtime). RuntimeInternal.h
// says what its files share and the rules they keep.
//
// `--convert-norm-to-gpu-launch` lowers each fused group to upstream host
// ops (gpu.launch_func on the module's gpu.binary) plus calls of the
// normrt_ir_* functions below, for what gpu.launch_func cannot say: the
// caller's stream, the SM count, occupancy, the cooperative launch with
// its grid barrier, the programmatic dependent launch, and capture-safe
// scratch. A group's calls form a launch sequence on the calling thread,
// from normrt_ir_begin to normrt_ir_end:
//  - the first failure is kept (message in normrt_last_error) and every
//    later call of the sequence, the mgpu* ones included, does nothing, so
//    the lowered code is straight-line and its checks run before any
//    driver call;
//  - mgpuStreamCreate returns the sequence's stream and mgpuStreamDestroy
//    leaves it alone, so `gpu.wait async` + `gpu.launch_func async` launch
//    on the caller's stream (NULL: the legacy default stream);
//  - normrt_ir_next_launch says what the next mgpuLaunchKernel does: a
//    plain, cooperative or programmatic dependent launch, or a query
//    (occupancy, whether a cooperative grid fits) whose answer
//    normrt_ir_query_result returns. The kernel handle comes from the
//    lowered code's own module, so two libraries with equal kernel names
//    never mix.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cstdio>

using namespace normrt_detail;

namespace normrt_detail {
thread_local LaunchSequence tSequence;

int sequenceLaunch(void *function, intptr_t gridX, intptr_t gridY,
                   intptr_t blockX, int32_t smem, void *stream,
                   void **params) {
  LaunchSequence &s = tSequence;
  int kind = s.nextKind;
  int64_t cluster = s.nextCluster;
  s.nextKind = NORMRT_IR_LAUNCH;
  s.nextCluster = 1;
  if (gridX < 0 || gridX > 0x7fffffff || gridY < 1 || gridY > 65535 ||
      blockX < 1 || blockX > 1024 || smem < 0)
    return fail(NORMRT_ERROR_OUT_OF_RANGE,
                "mgpuLaunchKernel: grid %ldx%ld, block %ld, %d bytes of "
                "shared memory: out of range",
                long(gridX), long(gridY), long(blockX), int(smem));
  unsigned grid = unsigned(gridX), samples = unsigned(gridY),
           block = unsigned(blockX), shared = unsigned(smem);
  // Only plain and dependent launches take a second grid dim (batched
  // rows' samples); the cooperative launch and the queries are of one.
  if (samples != 1 && kind != NORMRT_IR_LAUNCH &&
      kind != NORMRT_IR_LAUNCH_DEPENDENT)
    return fail(NORMRT_ERROR_OUT_OF_RANGE,
                "mgpuLaunchKernel: a launch of kind %d has a "
                "one-dimensional grid, got %ux%u",
                kind, grid, samples);
  int answer = 0;
  int status = NORMRT_SUCCESS;
  switch (kind) {
  case NORMRT_IR_LAUNCH:
    return normrt_launch(function, grid, samples, block, shared, stream,
                         params);
  case NORMRT_IR_LAUNCH_COOPERATIVE:
    return normrt_launch_cooperative(function, grid, block, shared, stream,
                                     params);
  case NORMRT_IR_LAUNCH_DEPENDENT:
    return normrt_launch_dependent(function, grid, samples, block, shared,
                                   stream, params);
  case NORMRT_IR_QUERY_OCCUPANCY:
    status = cluster > 1
                 ? normrt_max_active_clusters(function, block, shared,
                                              unsigned(cluster), &answer)
                 : normrt_max_active_ctas(function, block, shared, &answer);
    break;
  case NORMRT_IR_QUERY_COOPERATIVE_FITS:
    status = normrt_cooperative_fits(function, grid, block, shared, &answer);
    break;
  default:
    return fail(NORMRT_ERROR_INVALID_ARGUMENT,
                "normrt_ir_next_launch: unknown launch kind %d", kind);
  }
  s.result = status == NORMRT_SUCCESS ? answer : 0;
  return status;
}
} // namespace normrt_detail

namespace {
/// Runs `body` (a normrt status) in the sequence unless it already failed.
template <typename Body> void step(const char *fn, Body &&body) {
  LaunchSequence &s = tSequence;
  if (!s.active || s.status != NORMRT_SUCCESS)
    return;
  s.status = guarded(fn, body);
}
} // namespace

extern "C" {

NORMRT_API int normrt_ir_begin(void *stream) {
  LaunchSequence &s = tSequence;
  s = LaunchSequence();
  s.active = true;
  s.stream = static_cast<CUstream>(stream);
  return NORMRT_SUCCESS;
}

NORMRT_API int normrt_ir_end(void *stream, int32_t print_failure) {
  LaunchSequence &s = tSequence;
  int status = s.active ? s.status : int(NORMRT_SUCCESS);
  s.active = false;
  // Scratch a capture took is freed (in the graph) also after a failure.
  int done = normrt_scratch_done(stream);
  if (status == NORMRT_SUCCESS)
    status = done;
  if (status != NORMRT_SUCCESS && print_failure)
    std::fprintf(stderr, "normrt: %s\n", lastError());
  return status;
}

NORMRT_API void normrt_ir_fail(int32_t status, const char *message) {
  step("normrt_ir_fail",
       [&] { return fail(status, "%s", message ? message : ""); });
}

NORMRT_API void normrt_ir_check_aligned(const void *ptr, int64_t alignment,
                                        const char *what) {
  step("normrt_ir_check_aligned", [&] {
    return normrt_check_aligned(ptr, size_t(alignment), what);
  });
}

NORMRT_API int64_t normrt_ir_sm_count(void) {
  int sms = 0;
  step("normrt_ir_sm_count", [&] {
    if (int status = normrt_ensure_context())
      return status;
    return normrt_sm_count(&sms);
  });
  return sms;
}

NORMRT_API void normrt_ir_next_launch(int32_t kind, int64_t cluster) {
  tSequence.nextKind = kind;
  tSequence.nextCluster = cluster;
}

NORMRT_API int64_t normrt_ir_query_result(void) { return tSequence.result; }

NORMRT_API void *normrt_ir_workspace(void *stream, int64_t bytes) {
  void *ptr = nullptr;
  step("normrt_ir_workspace", [&] {
    if (bytes < 0)
      return fail(NORMRT_ERROR_OUT_OF_RANGE,
                  "normrt_ir_workspace: %lld bytes", (long long)bytes);
    return normrt_workspace(stream, size_t(bytes), &ptr);
  });
  return ptr;
}

NORMRT_API void *normrt_ir_grid_barrier(void *stream) {
  void *ptr = nullptr;
  step("normrt_ir_grid_barrier",
       [&] { return normrt_grid_barrier_word(stream, &ptr); });
  return ptr;
}

} // extern "C"
