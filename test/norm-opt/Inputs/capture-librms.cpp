//===- capture-librms.cpp - A generated launcher inside fake captures -----===//
//
// Part of norm-opt. Calls the library `norm-opt compile --emit=lib` made
// from rms-f32.mlir with NORMRT_LIBCUDA naming the fake libcuda of the unit
// tests (argv[1]), inside captures the fake models, and prints the nodes
// each capture recorded and whether any call broke a capture. Device
// pointers are fake addresses: nothing is dereferenced.
//
//===----------------------------------------------------------------------===//

#include "RuntimeFakeCuda.h"
#include "librms.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

FakeCudaStats *stats;
FakeCudaBeginCaptureFn beginCapture;
FakeCudaEndCaptureFn endCapture;
FakeCudaGraphNodesFn graphNodes;
FakeCudaGraphUnfreedFn graphUnfreed;
FakeCudaLastViolationFn lastViolation;

void *at(uintptr_t address) { return reinterpret_cast<void *>(address); }

// One call: 64 rows of 256 floats, every row stride 256.
int call(void *stream) {
  return rms_f32(at(0x100000), at(0x200000), at(0x300000), at(0x400000),
                 at(0x500000), at(0x600000), 64, 256, 256, 256, 256, stream);
}

// Prints the nodes of the capture on `stream` after `body` ran in it.
template <typename Body> void capture(const char *what, void *stream,
                                      Body body) {
  int violations = stats->captureViolations.load();
  if (int rc = beginCapture(stream, /*CU_STREAM_CAPTURE_MODE_GLOBAL*/ 0)) {
    std::printf("%s: cannot begin the capture (%d)\n", what, rc);
    return;
  }
  body();
  void *graph = nullptr;
  int rc = endCapture(stream, &graph);
  std::printf("%s: end %d, broken %d", what, rc,
              stats->captureViolations.load() - violations);
  if (!graph) {
    std::printf(" (%s)\n", lastViolation());
    return;
  }
  FakeCudaNode nodes[16];
  int count = graphNodes(graph, nodes, 16);
  std::printf(", unfreed %d, nodes:", graphUnfreed(graph));
  for (int i = 0; i < count && i < 16; ++i) {
    switch (nodes[i].kind) {
    case FAKECUDA_NODE_ALLOC:
      std::printf(" alloc(%zu)", nodes[i].bytes);
      break;
    case FAKECUDA_NODE_FREE:
      std::printf(" free");
      break;
    case FAKECUDA_NODE_MEMSET:
      std::printf(" memset(%zu x %u)", nodes[i].bytes, nodes[i].value);
      break;
    case FAKECUDA_NODE_KERNEL:
      std::printf(nodes[i].cooperative ? " cooperative-kernel" : " kernel");
      break;
    }
  }
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
  // The library's runtime loads the fake through NORMRT_LIBCUDA; this is
  // the same copy.
  setenv("NORMRT_LIBCUDA", argv[1], 1);
  void *fake = dlopen(argv[1], RTLD_NOW);
  if (!fake) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  stats = lookup<FakeCudaStatsFn>(fake, "fakecuda_stats")();
  beginCapture = lookup<FakeCudaBeginCaptureFn>(fake, "fakecuda_begin_capture");
  endCapture = lookup<FakeCudaEndCaptureFn>(fake, "fakecuda_end_capture");
  graphNodes = lookup<FakeCudaGraphNodesFn>(fake, "fakecuda_graph_nodes");
  graphUnfreed =
      lookup<FakeCudaGraphUnfreedFn>(fake, "fakecuda_graph_unfreed");
  lastViolation =
      lookup<FakeCudaLastViolationFn>(fake, "fakecuda_last_violation");

  // The first call of the process, inside a capture: the module loads in
  // relaxed mode, the workspace and the barrier word are the graph's.
  capture("first", at(0x91), [] {
    std::printf("first call: %d\n", call(at(0x91)));
  });
  // An eager call on another stream, then a capture: the barrier word is a
  // capture word (no node).
  std::printf("eager call: %d\n", call(at(0x92)));
  // The same call again: what a steady eager call asks of the driver (the
  // function's limits and occupancy, the device's facts are cached; the
  // context and the stream's capture state are asked once per call).
  int contexts = stats->contextQueries, captures = stats->captureQueries,
      attributes = stats->attributeQueries, sets = stats->setAttributes,
      occupancies = stats->occupancyQueries, launches = stats->launches;
  int again = call(at(0x92));
  std::printf("steady eager call: %d, driver: context %d, capture %d, "
              "attribute %d, set-attribute %d, occupancy %d, launch %d\n",
              again, stats->contextQueries - contexts,
              stats->captureQueries - captures,
              stats->attributeQueries - attributes,
              stats->setAttributes - sets,
              stats->occupancyQueries - occupancies,
              stats->launches - launches);
  capture("after eager", at(0x93), [] {
    std::printf("captured call: %d\n", call(at(0x93)));
  });
  // The two-launch path.
  setenv("NORMRT_NO_COOPERATIVE", "1", 1);
  capture("two launches", at(0x94), [] {
    std::printf("captured call: %d\n", call(at(0x94)));
  });
  unsetenv("NORMRT_NO_COOPERATIVE");
  // The legacy stream while another stream captures: refused, and the
  // capture is intact.
  capture("legacy", at(0x95), [] {
    std::printf("legacy call: %d %s\n", call(nullptr), normrt_last_error());
  });
  std::printf("broken in all: %d\n", stats->captureViolations.load());
  return 0;
}
