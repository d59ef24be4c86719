/*===- NormRuntime.h - norm-opt's CUDA driver-API runtime (C ABI) -*- C -*-===*
 *
 * Part of norm-opt. The small runtime that generated host launchers and
 * Python (ctypes) call to load kernels and launch them. It talks to the CUDA
 * *driver* API, and loads libcuda at run time (dlopen "libcuda.so.1", then
 * "libcuda.so"; the environment variable NORMRT_LIBCUDA names another path),
 * so nothing links against libcuda and a machine without a driver gets an
 * error status instead of a loader failure.
 *
 * Conventions:
 *  - every entry point returning int returns a normrt_status;
 *  - nothing aborts, prints or throws; on failure the calling thread's
 *    message (normrt_last_error) says which call failed and why, with the
 *    CUDA error name and string where the driver reported one;
 *  - every entry point is thread-safe;
 *  - CUstream and CUfunction are passed as void * so this header needs no
 *    cuda.h and is valid C (C99 and later) and C++.
 *
 * docs/runtime.md describes the API, the module cache and the workspace
 * policy in full.
 *
 *===----------------------------------------------------------------------===*/

#ifndef NORM_RUNTIME_NORMRUNTIME_H
#define NORM_RUNTIME_NORMRUNTIME_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define NORMRT_API
#elif defined(__GNUC__)
#define NORMRT_API __attribute__((visibility("default")))
#else
#define NORMRT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum normrt_status {
  NORMRT_SUCCESS = 0,
  /* libcuda could not be loaded, lacks an entry point, or cuInit failed
     (for instance the toolkit's stub library). */
  NORMRT_ERROR_NO_DRIVER = 1,
  /* The driver works but there is no CUDA device. */
  NORMRT_ERROR_NO_DEVICE = 2,
  /* A null out-pointer or image, an empty name, a zero grid or block... */
  NORMRT_ERROR_INVALID_ARGUMENT = 3,
  /* A pointer or stride is not aligned as a kernel requires. */
  NORMRT_ERROR_MISALIGNED = 4,
  /* A size out of the supported range (a caller-set workspace too small, a
     grid or block dimension over the hardware limit). */
  NORMRT_ERROR_OUT_OF_RANGE = 5,
  /* Module load or function lookup failed. */
  NORMRT_ERROR_MODULE = 6,
  /* cuFuncSetAttribute or cuLaunchKernel failed. */
  NORMRT_ERROR_LAUNCH = 7,
  /* Device (or host) memory exhausted. */
  NORMRT_ERROR_OUT_OF_MEMORY = 8,
  /* Any other driver error; the message has the CUDA error name. */
  NORMRT_ERROR_DRIVER = 9,
  /* The call cannot be done while its stream captures a CUDA graph without
     breaking the capture, so nothing was done (the capture is intact); or
     the stream's capture was already invalidated; or the legacy default
     stream was passed while another stream of the context captures.
     docs/runtime.md, "CUDA graph capture", says what is legal. */
  NORMRT_ERROR_CAPTURE = 10
} normrt_status;

/* The enumerator's name ("NORMRT_ERROR_NO_DRIVER", ...), or
   "NORMRT_ERROR_UNKNOWN" for a value that is none of them. Never NULL. */
NORMRT_API const char *normrt_status_string(int status);

/* The message of this thread's last failure, "" when nothing has failed on
   this thread. A success does not clear it. The pointer stays valid for the
   thread's lifetime; the text changes at its next failure. */
NORMRT_API const char *normrt_last_error(void);

/* Loads libcuda and calls cuInit(0), once per process (thread-safe); later
   calls return the cached status. Every entry point that needs the driver
   calls it, so calling it first is optional. */
NORMRT_API int normrt_init(void);

/* If no context is current on this thread, retains device 0's primary
   context (once per process) and makes it current. A context someone else
   made current (PyTorch makes a device's primary context current) is left
   alone. */
NORMRT_API int normrt_ensure_context(void);

/* *out = the multiprocessor count of the current context's device. */
NORMRT_API int normrt_sm_count(int *out);

/* *function_out = the CUfunction `kernel_name` of `image` (a cubin, fatbin,
   or NUL-terminated PTX) in the current context. The module is loaded once
   per (context, image address) and the lookup is cached per (context, image,
   name); the image must stay at that address, unchanged, until
   normrt_release_all. The load and the lookup run with this thread's stream
   capture mode relaxed, so a first call inside a capture does not break it
   (a driver that still refuses gives NORMRT_ERROR_CAPTURE). */
NORMRT_API int normrt_get_function(const void *image, const char *kernel_name,
                                   void **function_out);

/* *ptr_out = at least `bytes` bytes of device scratch for the current
   context and `stream`, valid until the next normrt_workspace call for the
   same (context, stream) that asks for more, or normrt_release_all. A buffer
   set with normrt_set_workspace takes precedence; when it is smaller than
   `bytes` this returns NORMRT_ERROR_OUT_OF_RANGE and the message says the
   size needed. Otherwise the runtime allocates one buffer per (context,
   stream) and grows it on demand (after synchronising the stream, before
   freeing the old one). bytes == 0 gives *ptr_out == NULL. Every launch on
   the stream shares its workspace, so a kernel sequence that uses it must
   not interleave with another on the same stream. CU_STREAM_PER_THREAD
   ((void *)2) gets one workspace per calling thread (kept until
   normrt_release_all, also after the thread exits).
   While `stream` captures a CUDA graph (and no caller buffer is set) the
   buffer is a stream-ordered allocation (cuMemAllocAsync) of exactly `bytes`
   that the graph records: each graph has its own, valid in stream order
   until normrt_scratch_done(stream), which the caller must call on this
   thread after its last launch that uses it. */
NORMRT_API int normrt_workspace(void *stream, size_t bytes, void **ptr_out);

/* Makes [ptr, ptr + bytes) the workspace of (current context, stream);
   ptr must be 16-byte aligned. ptr == NULL removes the caller's buffer (the
   runtime's own is used again). The runtime never frees a caller's buffer. */
NORMRT_API int normrt_set_workspace(void *stream, void *ptr, size_t bytes);

/* A framework's allocator for the workspace of calls made while a stream
   captures a CUDA graph. `alloc(user, stream, bytes, &ptr)` returns 0 and
   a 16-byte aligned pointer to at least `bytes` bytes, valid in the
   capturing stream's order for the launches of the call, or a non-zero
   value for failure (the call then fails with NORMRT_ERROR_OUT_OF_MEMORY).
   Its owner frees the buffer when the launcher has returned, as it frees a
   temporary of its own: a graph memory pool keeps it for the graph. */
typedef int (*normrt_capture_alloc_fn)(void *user, void *stream, size_t bytes,
                                       void **ptr_out);

/* Makes `alloc` (with `user`) the source of every workspace that
   normrt_workspace hands out during a capture, instead of a stream-ordered
   allocation the graph records: a framework that sets it needs neither a
   query nor a check of the capture state per call. A buffer set with
   normrt_set_workspace still takes precedence. alloc == NULL: the
   stream-ordered allocation again. One per copy of the runtime (each
   kernel library has its own), for all threads; set it before the calls. */
NORMRT_API int normrt_set_capture_allocator(normrt_capture_alloc_fn alloc,
                                            void *user);

/* Launches `function` (from normrt_get_function) on a grid_x x grid_y grid of
   block_x-thread blocks with `shared_bytes` of dynamic shared memory on
   `stream` (NULL: the legacy default stream). Above 48 KiB it first raises
   the function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES. `args` is
   cuLaunchKernel's kernelParams (may be NULL for a kernel without
   parameters). */
NORMRT_API int normrt_launch(void *function, unsigned grid_x, unsigned grid_y,
                             unsigned block_x, unsigned shared_bytes,
                             void *stream, void **args);

/* normrt_launch as a programmatic dependent launch (cuLaunchKernelEx with
   CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): `function` may
   start before the kernel ahead of it on `stream` has finished, once every
   CTA of that kernel has executed griddepcontrol.launch_dependents (or
   finished), and must execute griddepcontrol.wait before it touches
   anything that kernel writes. The final kernels of norm-opt's two-launch
   path are written so (kernel plan `dependent_launch`). Inside a stream
   capture it becomes a programmatic edge of the graph. A plain launch
   (normrt_launch's) when the driver has no cuLaunchKernelEx or
   NORMRT_NO_DEPENDENT_LAUNCH is set to anything but "" or "0". */
NORMRT_API int normrt_launch_dependent(void *function, unsigned grid_x,
                                       unsigned grid_y, unsigned block_x,
                                       unsigned shared_bytes, void *stream,
                                       void **args);

/* NORMRT_SUCCESS when `ptr` is a multiple of `alignment` (a power of two;
   NULL counts as aligned), NORMRT_ERROR_MISALIGNED otherwise, with a message
   naming `what` (may be NULL). Needs no driver. */
NORMRT_API int normrt_check_aligned(const void *ptr, size_t alignment,
                                    const char *what);

/* How many CTAs of `block_x` threads and `shared_bytes` of dynamic shared
   memory of `function` fit on one multiprocessor at once (the driver's
   occupancy calculator); launchers size persistent grids with it. */
NORMRT_API int normrt_max_active_ctas(void *function, unsigned block_x,
                                      unsigned shared_bytes, int *out);

/* How many clusters of `cluster_ctas` CTAs (block_x threads, shared_bytes
   of dynamic shared memory each) of `function`, a kernel compiled with that
   cluster shape, are resident on the whole device at once
   (cuOccupancyMaxActiveClusters; NORMRT_ERROR_DRIVER where the driver has
   none). Launchers of clustered kernels size persistent grids with it. */
NORMRT_API int normrt_max_active_clusters(void *function, unsigned block_x,
                                          unsigned shared_bytes,
                                          unsigned cluster_ctas, int *out);

/* *out = 1 when `function` can be launched cooperatively on a grid of
   grid_x CTAs of block_x threads (the device supports it, the driver has
   cuLaunchCooperativeKernel, every CTA fits at once), else 0. The
   environment variable NORMRT_NO_COOPERATIVE (set, not "0") forces 0:
   launchers then take their two-kernel path. */
NORMRT_API int normrt_cooperative_fits(void *function, unsigned grid_x,
                                       unsigned block_x,
                                       unsigned shared_bytes, int *out);

/* A zeroed 4-byte grid-barrier counter of (current context, stream),
   allocated (and zeroed on `stream`) on first use, freed by
   normrt_release_all. Kernels leave it as they found it (modulo 2^31).
   While `stream` captures a CUDA graph it is a stream-ordered allocation
   with a memset node that zeroes it at every replay, freed in the graph by
   normrt_scratch_done(stream), as for normrt_workspace. */
NORMRT_API int normrt_grid_barrier_word(void *stream, void **ptr_out);

/* Ends one launcher call's use of the scratch it took on `stream` with
   normrt_workspace and normrt_grid_barrier_word on this thread: where those
   were stream-ordered allocations of the stream's current capture, frees
   them with cuMemFreeAsync (free nodes after the launches). Without any (the
   stream does not capture) it returns at once, calling no driver function.
   Generated launchers call it on every return after their first scratch
   request, also on failure. */
NORMRT_API int normrt_scratch_done(void *stream);

/* normrt_launch as a cooperative launch (cuLaunchCooperativeKernel): all
   grid_x CTAs are resident at once, so the kernel may wait on a grid-wide
   barrier. */
NORMRT_API int normrt_launch_cooperative(void *function, unsigned grid_x,
                                         unsigned block_x,
                                         unsigned shared_bytes, void *stream,
                                         void **args);

/* The workspace a call needs, without running it. Between
   normrt_query_begin and normrt_query_end the calling thread's launcher
   calls plan but launch nothing: normrt_workspace records the largest
   request and hands out a placeholder address (never dereferenced),
   normrt_grid_barrier_word a placeholder too, and normrt_launch,
   normrt_launch_dependent and normrt_launch_cooperative check their
   arguments and return NORMRT_SUCCESS without launching. normrt_query_end
   stores the largest
   workspace request since normrt_query_begin in *bytes_out (0: none) and
   ends the query (also when bytes_out is NULL, which is an error). A
   framework queries a call this way, allocates that many bytes (16-byte
   aligned) from its own allocator and passes them with normrt_set_workspace
   for the real call: a CUDA graph captured so holds no allocation nodes of
   ours. The query needs a context (it asks the occupancy calculator) and
   must not be made while the stream captures. */
NORMRT_API int normrt_query_begin(void);
NORMRT_API int normrt_query_end(size_t *bytes_out);

/* Sets this thread's message to `message` and returns `status`: generated
   launchers report their own argument checks through it. */
NORMRT_API int normrt_report(int status, const char *message);

/* Frees the runtime's workspaces, forgets caller-set ones, and unloads every
   module it loaded (functions from normrt_get_function become invalid). Safe
   to call at any time, also before normrt_init or without a driver; it must
   not race with launches that use those functions or workspaces, nor run
   while any stream of a context it touches captures a CUDA graph (it
   synchronises the contexts). The retained primary context is kept. */
NORMRT_API void normrt_release_all(void);

/* The entry points upstream MLIR's gpu-to-llvm lowering calls (mgpuModuleLoad,
 * mgpuLaunchKernel, mgpuStreamCreate, mgpuMemAlloc, ...: docs/runtime.md)
 * are exported by the shared runtime, libnorm_runtime.so (a kernel library
 * links its own copy and keeps it local). This hands them the caller's
 * stream on this thread: mgpuStreamCreate returns it, mgpuStreamDestroy
 * leaves it alone, mgpuStreamSynchronize skips it while it captures a CUDA
 * graph; NULL goes back to streams of their own. */
NORMRT_API int normrt_use_stream(void *stream);
/* The stream normrt_use_stream handed over on this thread, else NULL. */
NORMRT_API void *normrt_ir_stream(void);

/* The host lowering's entry points (--convert-norm-to-gpu-launch; the
 * calls its IR makes besides gpu.launch_func, docs/runtime.md). A launch
 * sequence runs on one thread from normrt_ir_begin to normrt_ir_end: its
 * first failure is kept and every later call of the sequence (mgpu*
 * included) does nothing; mgpuStreamCreate returns the sequence's stream
 * (NULL: the legacy default stream) and mgpuStreamDestroy leaves it. */
enum normrt_ir_launch_kind {
  NORMRT_IR_LAUNCH = 0,             /* a plain launch */
  NORMRT_IR_LAUNCH_COOPERATIVE = 1, /* cuLaunchCooperativeKernel */
  NORMRT_IR_LAUNCH_DEPENDENT = 2,   /* programmatic dependent launch */
  NORMRT_IR_QUERY_OCCUPANCY = 3,    /* CTAs (clusters) per SM; no launch */
  NORMRT_IR_QUERY_COOPERATIVE_FITS = 4 /* 1 if the grid fits; no launch */
};
NORMRT_API int normrt_ir_begin(void *stream);
/* Ends the sequence: normrt_scratch_done(stream), then the first failure's
 * status (0: none); print_failure != 0 also prints "normrt: <message>". */
NORMRT_API int normrt_ir_end(void *stream, int32_t print_failure);
/* A failed check of the lowered code: the sequence fails with `message`. */
NORMRT_API void normrt_ir_fail(int32_t status, const char *message);
/* normrt_check_aligned, in the sequence. */
NORMRT_API void normrt_ir_check_aligned(const void *ptr, int64_t alignment,
                                        const char *what);
/* The current context (made if none) and its SM count (0 after a failure). */
NORMRT_API int64_t normrt_ir_sm_count(void);
/* What the next mgpuLaunchKernel on this thread does (normrt_ir_launch_kind;
 * `cluster`: the CTAs per cluster an occupancy query counts clusters of). */
NORMRT_API void normrt_ir_next_launch(int32_t kind, int64_t cluster);
/* The answer of the last query launch. */
NORMRT_API int64_t normrt_ir_query_result(void);
/* normrt_workspace and normrt_grid_barrier_word, in the sequence (NULL
 * after a failure). */
NORMRT_API void *normrt_ir_workspace(void *stream, int64_t bytes);
NORMRT_API void *normrt_ir_grid_barrier(void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NORM_RUNTIME_NORMRUNTIME_H */
