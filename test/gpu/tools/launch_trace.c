//===- launch_trace.c - log the kernels a norm library launches -----------===//
//
// Part of norm-opt. A stand-in libcuda for the GPU test scripts: the runtime
// loads it through NORMRT_LIBCUDA; it depends on the real libcuda.so.1, so
// every entry point but the launches resolves to the driver itself. The
// launches are forwarded and their kernel names (cuFuncGetName) appended to
// a log the script reads with launch_trace_take(): which kernel variant and
// which launch path (cooperative or not) a call really took.
//
//   cc -shared -fPIC -O2 -I/usr/local/cuda/include launch_trace.c
//      -o liblaunch_trace.so -L/usr/local/cuda/lib64/stubs
//      -Wl,--no-as-needed -lcuda -ldl
//
//===----------------------------------------------------------------------===//

#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static char gLog[1 << 16];
static size_t gLen;
static pthread_mutex_t gMutex = PTHREAD_MUTEX_INITIALIZER;

static void *real(const char *name) {
  static void *driver;
  if (!driver)
    driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  return driver ? dlsym(driver, name) : NULL;
}

static void note(CUfunction f, const char *mode, unsigned grid) {
  const char *name = "?";
  CUresult (*getName)(const char **, CUfunction) =
      (CUresult(*)(const char **, CUfunction))real("cuFuncGetName");
  if (getName)
    getName(&name, f);
  pthread_mutex_lock(&gMutex);
  int n = snprintf(gLog + gLen, sizeof(gLog) - gLen, "%s:%s:%u;", name, mode,
                   grid);
  if (n > 0 && gLen + (size_t)n < sizeof(gLog))
    gLen += (size_t)n;
  pthread_mutex_unlock(&gMutex);
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                        CUstream stream, void **params, void **extra) {
  note(f, "plain", gx * gy * gz);
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                     unsigned, unsigned, unsigned, CUstream, void **,
                     void **) = real("cuLaunchKernel");
  return launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy,
                                   unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shared,
                                   CUstream stream, void **params) {
  note(f, "coop", gx * gy * gz);
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                     unsigned, unsigned, unsigned, CUstream, void **) =
      real("cuLaunchCooperativeKernel");
  return launch(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                          void **params, void **extra) {
  const char *mode = "ex";
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE &&
        config->attrs[i].value.cooperative)
      mode = "coop";
    // A programmatic dependent launch (normrt_launch_dependent).
    if (config->attrs[i].id ==
            CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
        config->attrs[i].value.programmaticStreamSerializationAllowed)
      mode = "dependent";
  }
  note(f, mode, config->gridDimX * config->gridDimY * config->gridDimZ);
  CUresult (*launch)(const CUlaunchConfig *, CUfunction, void **, void **) =
      real("cuLaunchKernelEx");
  return launch(config, f, params, extra);
}

// Copies the log since the last call into buf (NUL-terminated) and clears it.
size_t launch_trace_take(char *buf, size_t size) {
  pthread_mutex_lock(&gMutex);
  size_t n = gLen < size - 1 ? gLen : size - 1;
  memcpy(buf, gLog, n);
  buf[n] = '\0';
  gLen = 0;
  pthread_mutex_unlock(&gMutex);
  return n;
}
