//===- tiers-librd.cpp - Which kernels a run-time N's launcher takes ------===//
//
// Part of norm-opt. Calls the library `norm-opt compile --emit=lib
// --tier-min-cols=4096` made from rms-dyn.mlir on the fake libcuda of the
// unit tests (argv[1]) at N around each resident tier's capacity, each call
// inside a capture, and prints the kernels it launched (the capture's
// kernel nodes): the smallest tier that holds N, vector or scalar, one
// cooperative launch or the main and the final kernel of the tier's block.
// Device pointers are fake addresses: nothing is dereferenced.
//
//===----------------------------------------------------------------------===//

#include "RuntimeFakeCuda.h"
#include "librd.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace {

FakeCudaBeginCaptureFn beginCapture;
FakeCudaEndCaptureFn endCapture;
FakeCudaGraphNodesFn graphNodes;
FakeCudaFunctionNameFn functionName;

void *at(uintptr_t address) { return reinterpret_cast<void *>(address); }

// 64 rows of `cols` floats, dense; 16-byte aligned pointers, so the vector
// kernel whenever cols is a multiple of 4.
void call(int64_t cols, const char *what, int64_t dxStride = 0) {
  void *stream = at(0x90);
  if (int rc = beginCapture(stream, /*CU_STREAM_CAPTURE_MODE_GLOBAL*/ 0)) {
    std::printf("cannot begin the capture (%d)\n", rc);
    return;
  }
  int st = rms_dyn(at(0x100000), at(0x200000), at(0x300000), at(0x400000),
                   at(0x500000), at(0x600000), 64, cols, cols, cols,
                   dxStride ? dxStride : cols, stream);
  void *graph = nullptr;
  int rc = endCapture(stream, &graph);
  std::printf("%s N=%lld: status %d, end %d:", what,
              static_cast<long long>(cols), st, rc);
  FakeCudaNode nodes[16];
  int count = graph ? graphNodes(graph, nodes, 16) : 0;
  for (int i = 0; i < count && i < 16; ++i)
    if (nodes[i].kind == FAKECUDA_NODE_KERNEL)
      std::printf(" %s%s", functionName(nodes[i].function),
                  nodes[i].cooperative ? "(cooperative)" : "");
  std::printf("\n");
}

template <typename Fn> Fn lookup(void *handle, const char *name) {
  void *symbol = dlsym(handle, name);
  if (!symbol) {
    std::fprintf(stderr, "the fake has no %s\n", name);
    std::exit(2);
  }
  return reinterpret_cast<Fn>(symbol);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LIBNORMRT_FAKECUDA_SO\n", argv[0]);
    return 2;
  }
  setenv("NORMRT_LIBCUDA", argv[1], 1);
  void *fake = dlopen(argv[1], RTLD_NOW);
  if (!fake) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  beginCapture = lookup<FakeCudaBeginCaptureFn>(fake, "fakecuda_begin_capture");
  endCapture = lookup<FakeCudaEndCaptureFn>(fake, "fakecuda_end_capture");
  graphNodes = lookup<FakeCudaGraphNodesFn>(fake, "fakecuda_graph_nodes");
  functionName =
      lookup<FakeCudaFunctionNameFn>(fake, "fakecuda_function_name");
  for (int64_t cols : {1, 4095, 4096, 4097, 6144, 6145, 8191, 8192, 8193})
    call(cols, "one launch");
  // Peeled rows: any N, as long as the rows' strides agree modulo 4.
  call(4095, "dx stride 4099", 4099);
  call(4095, "dx stride 4097", 4097);
  setenv("NORMRT_NO_COOPERATIVE", "1", 1);
  for (int64_t cols : {4096, 6143, 8193})
    call(cols, "two launches");
  return 0;
}
