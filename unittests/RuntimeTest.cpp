//===- RuntimeTest.cpp - The CUDA driver-API runtime without a GPU --------===//
//
// Part of norm-opt. normrt_init loads the driver once per process, so each
// driver scenario runs in its own process: ctest runs this binary once per
// scenario with NORMRT_TEST_SCENARIO and NORMRT_LIBCUDA set and a
// --gtest_filter (unittests/CMakeLists.txt). A suite whose scenario is not
// the current one skips, and ctest fails a run that skips anything.
//
//   no-driver       NORMRT_LIBCUDA=/nonexistent/libcuda.so.1
//   not-a-driver    NORMRT_LIBCUDA=libm.so.6 (loads, lacks cuInit)
//   stub            NORMRT_LIBCUDA=<toolkit>/lib64/stubs/libcuda.so
//   default         NORMRT_LIBCUDA empty: the real loader path
//   fake            NORMRT_LIBCUDA=libnormrt_fakecuda.so (RuntimeFakeCuda.cpp)
//   fake-no-device  the fake with FAKECUDA_DEVICES=0
//
// RuntimeStatus, RuntimeAlign and RuntimeArgs need no driver and hold in
// every scenario.
//
//===----------------------------------------------------------------------===//

#include "norm/Runtime/NormRuntime.h"

#include "RuntimeFakeCuda.h"

#include <gtest/gtest.h>

#include <cuda.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string env(const char *name) {
  const char *value = std::getenv(name);
  return value ? value : "";
}

#define REQUIRE_SCENARIO(name)                                                 \
  do {                                                                         \
    if (env("NORMRT_TEST_SCENARIO") != name)                                   \
      GTEST_SKIP() << "runs in the '" name "' scenario (ctest runtime-" name   \
                      ")";                                                     \
  } while (0)

std::string lastError() { return normrt_last_error(); }

::testing::AssertionResult mentions(const std::string &text,
                                    const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "'" << text << "' does not mention '" << part << "'";
}

void *fakeAddress(uintptr_t address) {
  return reinterpret_cast<void *>(address);
}

const char kImage[] = "// fake PTX\n.entry norm_fwd\n.entry norm_bwd\n";

// Sets (value non-NULL) or unsets an environment variable for one scope and
// puts the old value back: the runtime and the fake read theirs at each call.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    const char *old = std::getenv(name);
    hadOld = old != nullptr;
    if (old)
      oldValue = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (hadOld)
      setenv(name, oldValue.c_str(), 1);
    else
      unsetenv(name);
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  const char *name;
  bool hadOld = false;
  std::string oldValue;
};

// The argument checks of the cooperative entry points. They come before the
// driver, so they hold in every scenario; `function` is never dereferenced.
void expectCooperativeArgumentChecks(void *function) {
  int fits = -1;
  EXPECT_EQ(normrt_cooperative_fits(function, 1, 32, 0, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "normrt_cooperative_fits: out is NULL"));
  EXPECT_EQ(normrt_cooperative_fits(nullptr, 1, 32, 0, &fits),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fits, 0);
  EXPECT_TRUE(mentions(lastError(), "normrt_cooperative_fits"));
  EXPECT_TRUE(mentions(lastError(), "function is NULL"));
  fits = -1;
  EXPECT_EQ(normrt_cooperative_fits(function, 1, 0, 0, &fits),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fits, 0);
  EXPECT_TRUE(mentions(lastError(), "block 0: every dimension must be"));
  EXPECT_EQ(normrt_cooperative_fits(function, 0, 32, 0, &fits),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "grid 0x1, block 32"));
  // The same limits as normrt_launch.
  EXPECT_EQ(normrt_cooperative_fits(function, 1, 1025, 0, &fits),
            NORMRT_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(mentions(lastError(), "normrt_cooperative_fits"));
  EXPECT_TRUE(mentions(lastError(), "block 1025 exceeds the limits"));
  EXPECT_EQ(normrt_cooperative_fits(function, 1, 32, 0x80000000u, &fits),
            NORMRT_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(mentions(lastError(), "bytes of shared memory is out of range"));

  EXPECT_EQ(normrt_grid_barrier_word(nullptr, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(
      mentions(lastError(), "normrt_grid_barrier_word: ptr_out is NULL"));

  EXPECT_EQ(normrt_launch_cooperative(nullptr, 1, 32, 0, nullptr, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "normrt_launch_cooperative"));
  EXPECT_TRUE(mentions(lastError(), "function is NULL"));
  EXPECT_EQ(normrt_launch_cooperative(function, 0, 32, 0, nullptr, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "normrt_launch_cooperative"));
  EXPECT_TRUE(mentions(lastError(), "grid 0x1, block 32"));
  EXPECT_EQ(normrt_launch_cooperative(function, 1, 0, 0, nullptr, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "grid 1x1, block 0"));
  EXPECT_EQ(normrt_launch_cooperative(function, 1, 2048, 0, nullptr, nullptr),
            NORMRT_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(mentions(lastError(), "normrt_launch_cooperative"));
  EXPECT_TRUE(mentions(lastError(), "block 2048 exceeds the limits"));
  EXPECT_EQ(normrt_launch_cooperative(function, 0x80000000u, 32, 0, nullptr,
                                      nullptr),
            NORMRT_ERROR_OUT_OF_RANGE);
  EXPECT_EQ(normrt_launch_cooperative(function, 1, 32, 0x80000000u, nullptr,
                                      nullptr),
            NORMRT_ERROR_OUT_OF_RANGE);
}

//===----------------------------------------------------------------------===//
// No driver needed
//===----------------------------------------------------------------------===//

TEST(RuntimeStatus, EveryCodeHasItsName) {
  const char *names[] = {"NORMRT_SUCCESS",
                         "NORMRT_ERROR_NO_DRIVER",
                         "NORMRT_ERROR_NO_DEVICE",
                         "NORMRT_ERROR_INVALID_ARGUMENT",
                         "NORMRT_ERROR_MISALIGNED",
                         "NORMRT_ERROR_OUT_OF_RANGE",
                         "NORMRT_ERROR_MODULE",
                         "NORMRT_ERROR_LAUNCH",
                         "NORMRT_ERROR_OUT_OF_MEMORY",
                         "NORMRT_ERROR_DRIVER",
                         "NORMRT_ERROR_CAPTURE"};
  for (int code = NORMRT_SUCCESS; code <= NORMRT_ERROR_CAPTURE; ++code)
    EXPECT_STREQ(normrt_status_string(code), names[code]) << code;
  EXPECT_STREQ(normrt_status_string(-1), "NORMRT_ERROR_UNKNOWN");
  EXPECT_STREQ(normrt_status_string(11), "NORMRT_ERROR_UNKNOWN");
  EXPECT_EQ(NORMRT_ERROR_NO_DRIVER, 1);
  EXPECT_EQ(NORMRT_ERROR_DRIVER, 9);
  EXPECT_EQ(NORMRT_ERROR_CAPTURE, 10);
}

TEST(RuntimeStatus, LastErrorIsPerThreadAndEmptyAtFirst) {
  std::string before, after;
  std::thread([&] {
    before = lastError();
    EXPECT_EQ(normrt_sm_count(nullptr), NORMRT_ERROR_INVALID_ARGUMENT);
    after = lastError();
  }).join();
  EXPECT_EQ(before, "");
  EXPECT_TRUE(mentions(after, "normrt_sm_count"));
  std::thread([&] { before = lastError(); }).join();
  EXPECT_EQ(before, "");
}

TEST(RuntimeAlign, AlignedAndMisaligned) {
  alignas(64) static char buffer[128];
  EXPECT_EQ(normrt_check_aligned(buffer, 16, "x"), NORMRT_SUCCESS);
  EXPECT_EQ(normrt_check_aligned(buffer, 64, "x"), NORMRT_SUCCESS);
  EXPECT_EQ(normrt_check_aligned(buffer + 4, 1, "x"), NORMRT_SUCCESS);
  EXPECT_EQ(normrt_check_aligned(buffer + 4, 4, "x"), NORMRT_SUCCESS);
  EXPECT_EQ(normrt_check_aligned(nullptr, 16, "weight"), NORMRT_SUCCESS);

  EXPECT_EQ(normrt_check_aligned(buffer + 4, 16, "dy row stride"),
            NORMRT_ERROR_MISALIGNED);
  std::string message = lastError();
  EXPECT_TRUE(mentions(message, "dy row stride"));
  EXPECT_TRUE(mentions(message, "16 bytes"));
  EXPECT_TRUE(mentions(message, "= 4"));

  EXPECT_EQ(normrt_check_aligned(fakeAddress(0x1008), 16, nullptr),
            NORMRT_ERROR_MISALIGNED);
  EXPECT_TRUE(mentions(lastError(), "pointer"));
  EXPECT_TRUE(mentions(lastError(), "0x1008"));
}

TEST(RuntimeAlign, AlignmentMustBeAPowerOfTwo) {
  EXPECT_EQ(normrt_check_aligned(fakeAddress(48), 0, "x"),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(normrt_check_aligned(fakeAddress(48), 12, "x"),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "power of two"));
}

// Argument checks come before the driver: these hold with or without one.
TEST(RuntimeArgs, NullOutPointers) {
  EXPECT_EQ(normrt_sm_count(nullptr), NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(normrt_get_function(kImage, "norm_fwd", nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "function_out"));
  EXPECT_EQ(normrt_workspace(nullptr, 64, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "normrt_workspace"));
}

TEST(RuntimeArgs, NullImageOrName) {
  void *function = fakeAddress(0x1234);
  EXPECT_EQ(normrt_get_function(nullptr, "norm_fwd", &function),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(function, nullptr);
  EXPECT_TRUE(mentions(lastError(), "image is NULL"));
  EXPECT_EQ(normrt_get_function(kImage, nullptr, &function),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(normrt_get_function(kImage, "", &function),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "kernel_name"));
}

TEST(RuntimeArgs, LaunchShape) {
  void *function = fakeAddress(0x1234); // never reached
  EXPECT_EQ(normrt_launch(nullptr, 1, 1, 32, 0, nullptr, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(normrt_launch(function, 0, 1, 32, 0, nullptr, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(normrt_launch(function, 1, 0, 32, 0, nullptr, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(normrt_launch(function, 1, 1, 0, 0, nullptr, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "grid 1x1, block 0"));
  EXPECT_EQ(normrt_launch(function, 1, 1, 2048, 0, nullptr, nullptr),
            NORMRT_ERROR_OUT_OF_RANGE);
  EXPECT_EQ(normrt_launch(function, 1, 70000, 32, 0, nullptr, nullptr),
            NORMRT_ERROR_OUT_OF_RANGE);
  EXPECT_EQ(normrt_launch(function, 1u << 31, 1, 32, 0, nullptr, nullptr),
            NORMRT_ERROR_OUT_OF_RANGE);
  // The dependent launch checks the same, before any driver call.
  EXPECT_EQ(normrt_launch_dependent(nullptr, 1, 1, 32, 0, nullptr, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "normrt_launch_dependent"));
  EXPECT_EQ(normrt_launch_dependent(function, 1, 1, 2048, 0, nullptr, nullptr),
            NORMRT_ERROR_OUT_OF_RANGE);
}

TEST(RuntimeArgs, CallerWorkspace) {
  EXPECT_EQ(normrt_set_workspace(nullptr, fakeAddress(0x7000), 0),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(normrt_set_workspace(nullptr, fakeAddress(0x7004), 64),
            NORMRT_ERROR_MISALIGNED);
  EXPECT_TRUE(mentions(lastError(), "16-byte"));
}

TEST(RuntimeArgs, CooperativeEntryPoints) {
  expectCooperativeArgumentChecks(fakeAddress(0x1234));
}

TEST(RuntimeArgs, ReleaseAllIsAlwaysSafe) {
  normrt_release_all();
  normrt_release_all();
}

//===----------------------------------------------------------------------===//
// No driver: every entry point fails cleanly with NO_DRIVER
//===----------------------------------------------------------------------===//

TEST(RuntimeNoDriver, InitFailsNamingThePath) {
  REQUIRE_SCENARIO("no-driver");
  std::string path = env("NORMRT_LIBCUDA");
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(normrt_init(), NORMRT_ERROR_NO_DRIVER);
  std::string message = lastError();
  EXPECT_TRUE(mentions(message, "normrt_init"));
  EXPECT_TRUE(mentions(message, path));
  EXPECT_TRUE(mentions(message, "NORMRT_LIBCUDA"));
  // Cached: the same status and message again.
  EXPECT_EQ(normrt_init(), NORMRT_ERROR_NO_DRIVER);
  EXPECT_EQ(lastError(), message);
}

TEST(RuntimeNoDriver, EveryEntryPointReportsIt) {
  REQUIRE_SCENARIO("no-driver");
  std::string path = env("NORMRT_LIBCUDA");
  auto expectNoDriver = [&](int status, const char *fn) {
    EXPECT_EQ(status, NORMRT_ERROR_NO_DRIVER) << fn;
    EXPECT_TRUE(mentions(lastError(), fn));
    EXPECT_TRUE(mentions(lastError(), path));
  };
  expectNoDriver(normrt_ensure_context(), "normrt_ensure_context");
  int sms = -1;
  expectNoDriver(normrt_sm_count(&sms), "normrt_sm_count");
  EXPECT_EQ(sms, 0);
  void *function = fakeAddress(0x1234);
  expectNoDriver(normrt_get_function(kImage, "norm_fwd", &function),
                 "normrt_get_function");
  EXPECT_EQ(function, nullptr);
  void *workspace = fakeAddress(0x1234);
  expectNoDriver(normrt_workspace(nullptr, 256, &workspace),
                 "normrt_workspace");
  EXPECT_EQ(workspace, nullptr);
  expectNoDriver(normrt_set_workspace(nullptr, fakeAddress(0x7000), 4096),
                 "normrt_set_workspace");
  expectNoDriver(normrt_set_workspace(nullptr, nullptr, 0),
                 "normrt_set_workspace");
  expectNoDriver(
      normrt_launch(fakeAddress(0x1234), 1, 1, 32, 64 << 10, nullptr, nullptr),
      "normrt_launch");
  int ctas = -1;
  expectNoDriver(normrt_max_active_ctas(fakeAddress(0x1234), 256, 0, &ctas),
                 "normrt_max_active_ctas");
  EXPECT_EQ(ctas, 0);
  int clusters = -1;
  expectNoDriver(normrt_max_active_clusters(fakeAddress(0x1234), 256, 0, 2,
                                            &clusters),
                 "normrt_max_active_clusters");
  EXPECT_EQ(clusters, 0);
  int fits = -1;
  expectNoDriver(
      normrt_cooperative_fits(fakeAddress(0x1234), 1, 256, 0, &fits),
      "normrt_cooperative_fits");
  EXPECT_EQ(fits, 0);
  void *barrier = fakeAddress(0x1234);
  expectNoDriver(normrt_grid_barrier_word(nullptr, &barrier),
                 "normrt_grid_barrier_word");
  EXPECT_EQ(barrier, nullptr);
  expectNoDriver(normrt_launch_cooperative(fakeAddress(0x1234), 1, 32,
                                           64 << 10, nullptr, nullptr),
                 "normrt_launch_cooperative");
  normrt_release_all();
}

TEST(RuntimeNoDriver, OtherThreadsGetTheirOwnMessage) {
  REQUIRE_SCENARIO("no-driver");
  EXPECT_EQ(normrt_check_aligned(fakeAddress(3), 4, "main"),
            NORMRT_ERROR_MISALIGNED);
  std::string mainMessage = lastError();
  std::vector<std::thread> threads;
  std::vector<int> statuses(8, -1);
  std::vector<std::string> messages(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      statuses[i] = normrt_init();
      messages[i] = lastError();
    });
  for (std::thread &t : threads)
    t.join();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(statuses[i], NORMRT_ERROR_NO_DRIVER);
    EXPECT_TRUE(mentions(messages[i], env("NORMRT_LIBCUDA")));
  }
  EXPECT_EQ(lastError(), mainMessage);
}

TEST(RuntimeNotADriver, MissingEntryPoint) {
  REQUIRE_SCENARIO("not-a-driver");
  EXPECT_EQ(normrt_init(), NORMRT_ERROR_NO_DRIVER);
  EXPECT_TRUE(mentions(lastError(), "has no cuInit"));
  int sms = 0;
  EXPECT_EQ(normrt_sm_count(&sms), NORMRT_ERROR_NO_DRIVER);
}

//===----------------------------------------------------------------------===//
// The toolkit's stub libcuda: it loads, and cuInit says what it is
//===----------------------------------------------------------------------===//

TEST(RuntimeStub, InitFailsWithTheCudaErrorName) {
  REQUIRE_SCENARIO("stub");
  EXPECT_EQ(normrt_init(), NORMRT_ERROR_NO_DRIVER);
  std::string message = lastError();
  EXPECT_TRUE(mentions(message, "cuInit"));
  EXPECT_TRUE(mentions(message, "CUDA_ERROR_STUB_LIBRARY"));
  EXPECT_TRUE(mentions(message, env("NORMRT_LIBCUDA")));
}

TEST(RuntimeStub, EveryEntryPointReportsIt) {
  REQUIRE_SCENARIO("stub");
  void *out = nullptr;
  int sms = 0;
  EXPECT_EQ(normrt_ensure_context(), NORMRT_ERROR_NO_DRIVER);
  EXPECT_EQ(normrt_sm_count(&sms), NORMRT_ERROR_NO_DRIVER);
  EXPECT_EQ(normrt_get_function(kImage, "norm_fwd", &out),
            NORMRT_ERROR_NO_DRIVER);
  EXPECT_EQ(normrt_workspace(nullptr, 16, &out), NORMRT_ERROR_NO_DRIVER);
  EXPECT_EQ(normrt_launch(fakeAddress(0x1234), 1, 1, 32, 0, nullptr, nullptr),
            NORMRT_ERROR_NO_DRIVER);
  EXPECT_TRUE(mentions(lastError(), "normrt_launch"));
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_STUB_LIBRARY"));
  int fits = -1;
  EXPECT_EQ(normrt_cooperative_fits(fakeAddress(0x1234), 1, 256, 0, &fits),
            NORMRT_ERROR_NO_DRIVER);
  EXPECT_EQ(fits, 0);
  EXPECT_TRUE(mentions(lastError(), "normrt_cooperative_fits"));
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_STUB_LIBRARY"));
  out = fakeAddress(0x1234);
  EXPECT_EQ(normrt_grid_barrier_word(nullptr, &out), NORMRT_ERROR_NO_DRIVER);
  EXPECT_EQ(out, nullptr);
  EXPECT_TRUE(mentions(lastError(), "normrt_grid_barrier_word"));
  EXPECT_EQ(normrt_launch_cooperative(fakeAddress(0x1234), 1, 32, 0, nullptr,
                                      nullptr),
            NORMRT_ERROR_NO_DRIVER);
  EXPECT_TRUE(mentions(lastError(), "normrt_launch_cooperative"));
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_STUB_LIBRARY"));
  normrt_release_all();
}

//===----------------------------------------------------------------------===//
// The default loader path (libcuda.so.1, then libcuda.so)
//===----------------------------------------------------------------------===//

TEST(RuntimeDefault, InitIsCleanWhateverTheMachine) {
  REQUIRE_SCENARIO("default");
  int status = normrt_init();
  EXPECT_TRUE(status == NORMRT_SUCCESS || status == NORMRT_ERROR_NO_DRIVER ||
              status == NORMRT_ERROR_NO_DEVICE)
      << normrt_status_string(status) << ": " << lastError();
  if (status == NORMRT_ERROR_NO_DRIVER) {
    EXPECT_TRUE(mentions(lastError(), "libcuda"));
  }
}

//===----------------------------------------------------------------------===//
// The fake driver: caches, workspaces, launches
//===----------------------------------------------------------------------===//

class RuntimeFake : public ::testing::Test {
protected:
  void SetUp() override {
    if (env("NORMRT_TEST_SCENARIO") != "fake")
      GTEST_SKIP() << "runs in the 'fake' scenario (ctest runtime-fake)";
    ASSERT_EQ(normrt_init(), NORMRT_SUCCESS) << lastError();
    // The runtime dlopen'ed the fake already; this finds the same copy.
    handle = dlopen(env("NORMRT_LIBCUDA").c_str(), RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(handle, nullptr) << dlerror();
    stats = lookup<FakeCudaStatsFn>("fakecuda_stats")();
    lastLaunch = lookup<FakeCudaLastLaunchFn>("fakecuda_last_launch");
    setMemoryLimit =
        lookup<FakeCudaSetMemoryLimitFn>("fakecuda_set_memory_limit");
    newContext = lookup<FakeCudaNewContextFn>("fakecuda_new_context");
    primaryContext =
        lookup<FakeCudaPrimaryContextFn>("fakecuda_primary_context");
    currentContext =
        lookup<FakeCudaCurrentContextFn>("fakecuda_current_context");
    setCurrentContext =
        lookup<FakeCudaSetCurrentContextFn>("fakecuda_set_current_context");
    beginCapture = lookup<FakeCudaBeginCaptureFn>("fakecuda_begin_capture");
    endCapture = lookup<FakeCudaEndCaptureFn>("fakecuda_end_capture");
    graphNodes = lookup<FakeCudaGraphNodesFn>("fakecuda_graph_nodes");
    graphUnfreed = lookup<FakeCudaGraphUnfreedFn>("fakecuda_graph_unfreed");
    graphLaunch = lookup<FakeCudaGraphLaunchFn>("fakecuda_graph_launch");
    lastViolation =
        lookup<FakeCudaLastViolationFn>("fakecuda_last_violation");
    barrierReads = lookup<FakeCudaBarrierReadsFn>("fakecuda_barrier_reads");
    normrt_release_all();
    violationsAtStart = stats->captureViolations.load();
    unsigned ignored[1];
    barrierReads(ignored, 0);
  }
  void TearDown() override {
    if (!handle)
      return;
    normrt_release_all();
    EXPECT_EQ(stats->liveModules.load(), 0);
    EXPECT_EQ(stats->liveAllocations.load(), 0);
    EXPECT_EQ(stats->badFrees.load(), 0);
    EXPECT_EQ(stats->badMemsets.load(), 0);
    // No test breaks a capture unless it says so (and then by calling the
    // fake itself, to show that the fake notices).
    EXPECT_EQ(stats->captureViolations.load() - violationsAtStart,
              allowedViolations)
        << "last call that broke a capture: " << lastViolation();
    EXPECT_EQ(stats->graphUnfreed.load(), 0);
    EXPECT_EQ(stats->badBarriers.load(), 0);
    dlclose(handle);
  }
  template <typename Fn> Fn lookup(const char *name) {
    void *symbol = dlsym(handle, name);
    EXPECT_NE(symbol, nullptr) << name;
    return reinterpret_cast<Fn>(symbol);
  }
  // The first eager grid-barrier word of a context also makes the context's
  // capture words (one allocation, one memset, one stream synchronisation;
  // RuntimeFakeCapture tests them). Tests of the per-stream words make them
  // first, on a stream of their own, so that their counts are about the
  // words they ask for: two allocations (the capture words, that stream's
  // word).
  static constexpr int kCaptureWordAllocations = 2;
  void makeCaptureWords() {
    void *word = nullptr;
    ASSERT_EQ(normrt_grid_barrier_word(fakeAddress(0x6f), &word),
              NORMRT_SUCCESS)
        << lastError();
  }
  void *function(const void *image, const char *name) {
    void *f = nullptr;
    EXPECT_EQ(normrt_get_function(image, name, &f), NORMRT_SUCCESS)
        << lastError();
    return f;
  }

  /// The last launch the fake recorded, checked field by field (a grid_y
  /// of 1 and z dimensions of 1).
  void expectLastLaunch(void *function, unsigned gridX, unsigned gridY,
                        unsigned blockX, unsigned shared, void *stream,
                        void **args, int cooperative, int dependent) {
    FakeCudaLaunch launch{};
    lastLaunch(&launch);
    EXPECT_EQ(launch.function, function);
    EXPECT_EQ(launch.grid[0], gridX);
    EXPECT_EQ(launch.grid[1], gridY);
    EXPECT_EQ(launch.grid[2], 1u);
    EXPECT_EQ(launch.block[0], blockX);
    EXPECT_EQ(launch.block[1], 1u);
    EXPECT_EQ(launch.block[2], 1u);
    EXPECT_EQ(launch.shared, shared);
    EXPECT_EQ(launch.stream, stream);
    EXPECT_EQ(launch.args, args);
    EXPECT_EQ(launch.cooperative, cooperative);
    EXPECT_EQ(launch.dependent, dependent);
  }

  void *handle = nullptr;
  FakeCudaStats *stats = nullptr;
  FakeCudaLastLaunchFn lastLaunch = nullptr;
  FakeCudaSetMemoryLimitFn setMemoryLimit = nullptr;
  FakeCudaNewContextFn newContext = nullptr;
  FakeCudaPrimaryContextFn primaryContext = nullptr;
  FakeCudaCurrentContextFn currentContext = nullptr;
  FakeCudaSetCurrentContextFn setCurrentContext = nullptr;
  FakeCudaBeginCaptureFn beginCapture = nullptr;
  FakeCudaEndCaptureFn endCapture = nullptr;
  FakeCudaGraphNodesFn graphNodes = nullptr;
  FakeCudaGraphUnfreedFn graphUnfreed = nullptr;
  FakeCudaGraphLaunchFn graphLaunch = nullptr;
  FakeCudaLastViolationFn lastViolation = nullptr;
  FakeCudaBarrierReadsFn barrierReads = nullptr;
  int violationsAtStart = 0;
  int allowedViolations = 0;
};

TEST_F(RuntimeFake, InitOnce) {
  EXPECT_EQ(normrt_init(), NORMRT_SUCCESS);
  EXPECT_EQ(stats->inits.load(), 1);
}

TEST_F(RuntimeFake, EnsureContextRetainsThePrimaryOnce) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      EXPECT_EQ(currentContext(), nullptr);
      EXPECT_EQ(normrt_ensure_context(), NORMRT_SUCCESS) << lastError();
      EXPECT_EQ(currentContext(), primaryContext());
      EXPECT_EQ(normrt_ensure_context(), NORMRT_SUCCESS);
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(stats->primaryRetains.load(), 1);
}

TEST_F(RuntimeFake, EnsureContextKeepsACurrentOne) {
  void *other = newContext();
  std::thread([&] {
    setCurrentContext(other);
    EXPECT_EQ(normrt_ensure_context(), NORMRT_SUCCESS);
    EXPECT_EQ(currentContext(), other);
  }).join();
}

TEST_F(RuntimeFake, SmCountIsCached) {
  int sms = 0;
  ASSERT_EQ(normrt_sm_count(&sms), NORMRT_SUCCESS) << lastError();
  EXPECT_EQ(sms, 132);
  int queries = stats->attributeQueries.load();
  sms = 0;
  ASSERT_EQ(normrt_sm_count(&sms), NORMRT_SUCCESS);
  EXPECT_EQ(sms, 132);
  EXPECT_EQ(stats->attributeQueries.load(), queries);
}

TEST_F(RuntimeFake, ModuleLoadedOncePerContextAndImage) {
  int loads = stats->moduleLoads.load();
  int lookups = stats->functionLookups.load();
  void *fwd = function(kImage, "norm_fwd");
  void *bwd = function(kImage, "norm_bwd");
  EXPECT_NE(fwd, nullptr);
  EXPECT_NE(bwd, nullptr);
  EXPECT_NE(fwd, bwd);
  EXPECT_EQ(function(kImage, "norm_fwd"), fwd);
  EXPECT_EQ(stats->moduleLoads.load(), loads + 1);
  EXPECT_EQ(stats->functionLookups.load(), lookups + 2);

  // The same text at another address is another image.
  static const char kCopy[] = "// fake PTX\n.entry norm_fwd\n.entry norm_bwd\n";
  EXPECT_NE(function(kCopy, "norm_fwd"), fwd);
  EXPECT_EQ(stats->moduleLoads.load(), loads + 2);

  // Another context loads its own module.
  void *other = newContext();
  void *otherFwd = nullptr;
  std::thread([&] {
    setCurrentContext(other);
    otherFwd = function(kImage, "norm_fwd");
  }).join();
  EXPECT_NE(otherFwd, nullptr);
  EXPECT_NE(otherFwd, fwd);
  EXPECT_EQ(stats->moduleLoads.load(), loads + 3);
  EXPECT_EQ(stats->liveModules.load(), 3);
}

TEST_F(RuntimeFake, ModuleCacheIsThreadSafe) {
  static const char kShared[] = ".entry k\n";
  int loads = stats->moduleLoads.load();
  std::vector<void *> functions(16, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] {
      EXPECT_EQ(normrt_get_function(kShared, "k", &functions[i]),
                NORMRT_SUCCESS)
          << lastError();
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(stats->moduleLoads.load(), loads + 1);
  for (void *f : functions) {
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(f, functions[0]);
  }
}

TEST_F(RuntimeFake, ModuleErrors) {
  void *f = fakeAddress(0x1234);
  EXPECT_EQ(normrt_get_function(kImage, "nope", &f), NORMRT_ERROR_MODULE);
  EXPECT_EQ(f, nullptr);
  EXPECT_TRUE(mentions(lastError(), "'nope'"));
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_NOT_FOUND"));

  static const char kBadPtx[] = "BAD PTX\n.entry k\n";
  EXPECT_EQ(normrt_get_function(kBadPtx, "k", &f), NORMRT_ERROR_MODULE);
  EXPECT_TRUE(mentions(lastError(), "cuModuleLoadData"));
  EXPECT_TRUE(mentions(lastError(), "PTX image"));
  EXPECT_TRUE(mentions(lastError(),
                       "CUDA_ERROR_INVALID_PTX (fake: a PTX JIT compilation "
                       "failed)"));

  static const char kBadCubin[] = "\x7f"
                                  "ELF BAD\n";
  EXPECT_EQ(normrt_get_function(kBadCubin, "k", &f), NORMRT_ERROR_MODULE);
  EXPECT_TRUE(mentions(lastError(), "cubin image"));
  // A failed load is not cached: a second try goes to the driver again.
  EXPECT_EQ(normrt_get_function(kBadPtx, "k", &f), NORMRT_ERROR_MODULE);
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_INVALID_PTX"));
}

TEST_F(RuntimeFake, WorkspacePerStreamGrowsAndIsReused) {
  void *s1 = fakeAddress(0x51), *s2 = fakeAddress(0x52);
  int allocs = stats->allocs.load();
  int frees = stats->frees.load();
  void *p = nullptr;
  ASSERT_EQ(normrt_workspace(s1, 1000, &p), NORMRT_SUCCESS) << lastError();
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(stats->lastAllocBytes.load(), size_t(64) << 10); // 64 KiB steps
  void *again = nullptr;
  ASSERT_EQ(normrt_workspace(s1, 64 << 10, &again), NORMRT_SUCCESS);
  EXPECT_EQ(again, p);
  EXPECT_EQ(stats->allocs.load(), allocs + 1);

  // Growing synchronises the stream, frees the old buffer, takes >= 1.5x.
  int syncs = stats->streamSyncs.load();
  void *grown = nullptr;
  ASSERT_EQ(normrt_workspace(s1, (64 << 10) + 1, &grown), NORMRT_SUCCESS);
  EXPECT_EQ(stats->streamSyncs.load(), syncs + 1);
  EXPECT_EQ(stats->lastSyncedStream.load(), s1);
  EXPECT_EQ(stats->frees.load(), frees + 1);
  EXPECT_EQ(stats->allocs.load(), allocs + 2);
  EXPECT_EQ(stats->lastAllocBytes.load(), size_t(128) << 10);
  EXPECT_EQ(stats->liveAllocations.load(), 1);

  // Another stream has its own buffer.
  void *q = nullptr;
  ASSERT_EQ(normrt_workspace(s2, 16, &q), NORMRT_SUCCESS);
  EXPECT_NE(q, grown);
  EXPECT_EQ(stats->liveAllocations.load(), 2);
  ASSERT_EQ(normrt_workspace(s1, 100, &again), NORMRT_SUCCESS);
  EXPECT_EQ(again, grown);

  // Zero bytes: no buffer.
  void *none = fakeAddress(1);
  ASSERT_EQ(normrt_workspace(s1, 0, &none), NORMRT_SUCCESS);
  EXPECT_EQ(none, nullptr);
}

TEST_F(RuntimeFake, WorkspaceOfThePerThreadStreamIsPerThread) {
  void *perThread = fakeAddress(0x2); // CU_STREAM_PER_THREAD
  void *mine = nullptr, *again = nullptr, *legacy = nullptr;
  ASSERT_EQ(normrt_workspace(perThread, 256, &mine), NORMRT_SUCCESS);
  ASSERT_EQ(normrt_workspace(perThread, 256, &again), NORMRT_SUCCESS);
  EXPECT_EQ(again, mine);
  ASSERT_EQ(normrt_workspace(nullptr, 256, &legacy), NORMRT_SUCCESS);
  std::vector<void *> theirs(4, nullptr), theirLegacy(4, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      EXPECT_EQ(normrt_workspace(perThread, 256, &theirs[i]), NORMRT_SUCCESS);
      EXPECT_EQ(normrt_workspace(nullptr, 256, &theirLegacy[i]),
                NORMRT_SUCCESS);
    });
  for (std::thread &t : threads)
    t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(theirs[i], mine);
    for (int j = 0; j < i; ++j)
      EXPECT_NE(theirs[i], theirs[j]);
    // The legacy default stream is one stream for every thread.
    EXPECT_EQ(theirLegacy[i], legacy);
  }
}

TEST_F(RuntimeFake, WorkspaceOutOfMemory) {
  setMemoryLimit(size_t(100) << 10);
  // The 64 KiB-rounded size does not fit; the exact size does.
  void *p = nullptr;
  ASSERT_EQ(normrt_workspace(nullptr, 70000, &p), NORMRT_SUCCESS)
      << lastError();
  EXPECT_EQ(stats->lastAllocBytes.load(), 70000u);
  EXPECT_EQ(normrt_workspace(fakeAddress(0x53), 1 << 20, &p),
            NORMRT_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(mentions(lastError(), "cuMemAlloc_v2(1048576 bytes)"));
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_OUT_OF_MEMORY"));
  setMemoryLimit(size_t(1) << 30);
}

TEST_F(RuntimeFake, CallerWorkspaceTakesPrecedence) {
  void *s = fakeAddress(0x54);
  void *mine = fakeAddress(0x7000);
  ASSERT_EQ(normrt_set_workspace(s, mine, 4096), NORMRT_SUCCESS) << lastError();
  int allocs = stats->allocs.load();
  void *p = nullptr;
  ASSERT_EQ(normrt_workspace(s, 4096, &p), NORMRT_SUCCESS);
  EXPECT_EQ(p, mine);
  EXPECT_EQ(normrt_workspace(s, 8192, &p), NORMRT_ERROR_OUT_OF_RANGE);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(mentions(lastError(), "has 4096 bytes"));
  EXPECT_TRUE(mentions(lastError(), "needs 8192 bytes"));
  EXPECT_EQ(stats->allocs.load(), allocs);

  // Other streams are not affected.
  ASSERT_EQ(normrt_workspace(fakeAddress(0x55), 8192, &p), NORMRT_SUCCESS);
  EXPECT_NE(p, mine);

  // Removing it brings the runtime's own buffer back.
  ASSERT_EQ(normrt_set_workspace(s, nullptr, 0), NORMRT_SUCCESS);
  ASSERT_EQ(normrt_workspace(s, 8192, &p), NORMRT_SUCCESS);
  EXPECT_NE(p, mine);
  EXPECT_EQ(stats->allocs.load(), allocs + 2);
  // Removing one that is not there is fine.
  EXPECT_EQ(normrt_set_workspace(fakeAddress(0x56), nullptr, 0),
            NORMRT_SUCCESS);
}

// A workspace query plans a launcher call without running it: the largest
// workspace request is recorded, placeholders come back, nothing is
// allocated, zeroed or launched; the real call then takes the caller's
// buffer of that size.
TEST_F(RuntimeFake, QueryRecordsTheWorkspaceAndLaunchesNothing) {
  void *f = function(kImage, "norm_bwd");
  void *s = fakeAddress(0x58);
  int allocs = stats->allocs.load();
  int launches = stats->launches.load();
  ASSERT_EQ(normrt_query_begin(), NORMRT_SUCCESS);
  void *ws = nullptr, *barrier = nullptr;
  ASSERT_EQ(normrt_workspace(s, 4096, &ws), NORMRT_SUCCESS) << lastError();
  ASSERT_EQ(normrt_workspace(s, 12288, &ws), NORMRT_SUCCESS);
  ASSERT_EQ(normrt_workspace(s, 256, &ws), NORMRT_SUCCESS);
  EXPECT_NE(ws, nullptr);
  ASSERT_EQ(normrt_grid_barrier_word(s, &barrier), NORMRT_SUCCESS);
  EXPECT_NE(barrier, nullptr);
  int value = 7;
  void *args[] = {&value};
  EXPECT_EQ(normrt_launch(f, 4, 1, 128, 0, s, args), NORMRT_SUCCESS);
  EXPECT_EQ(normrt_launch_cooperative(f, 4, 128, 0, s, args), NORMRT_SUCCESS);
  EXPECT_EQ(normrt_launch_dependent(f, 4, 1, 128, 0, s, args), NORMRT_SUCCESS);
  // Bad arguments are still errors.
  EXPECT_EQ(normrt_launch(nullptr, 4, 1, 128, 0, s, args),
            NORMRT_ERROR_INVALID_ARGUMENT);
  size_t bytes = 0;
  ASSERT_EQ(normrt_query_end(&bytes), NORMRT_SUCCESS);
  EXPECT_EQ(bytes, 12288u);
  EXPECT_EQ(stats->allocs.load(), allocs);
  EXPECT_EQ(stats->launches.load(), launches);

  // Over: a second end is an error, and calls run again.
  EXPECT_EQ(normrt_query_end(&bytes), NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions(lastError(), "normrt_query_begin first"));
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(normrt_query_end(nullptr), NORMRT_ERROR_INVALID_ARGUMENT);
  void *mine = fakeAddress(0x9000);
  ASSERT_EQ(normrt_set_workspace(s, mine, 12288), NORMRT_SUCCESS);
  ASSERT_EQ(normrt_workspace(s, 12288, &ws), NORMRT_SUCCESS);
  EXPECT_EQ(ws, mine);
  ASSERT_EQ(normrt_launch(f, 4, 1, 128, 0, s, args), NORMRT_SUCCESS);
  EXPECT_EQ(stats->launches.load(), launches + 1);
  ASSERT_EQ(normrt_set_workspace(s, nullptr, 0), NORMRT_SUCCESS);
  EXPECT_EQ(stats->allocs.load(), allocs);
}

TEST_F(RuntimeFake, Launch) {
  void *f = function(kImage, "norm_bwd");
  int setAttributes = stats->setAttributes.load();
  int value = 7;
  void *args[] = {&value};
  void *stream = fakeAddress(0x57);
  ASSERT_EQ(normrt_launch(f, 4, 2, 128, 1024, stream, args), NORMRT_SUCCESS)
      << lastError();
  expectLastLaunch(f, 4, 2, 128, 1024, stream, args, /*cooperative=*/0,
                   /*dependent=*/0);
  // Any dynamic shared memory sets the limit (static shared memory counts
  // against the same 48 KiB default); none sets nothing.
  EXPECT_EQ(stats->setAttributes.load(), setAttributes + 1);
  ASSERT_EQ(normrt_launch(f, 1, 1, 32, 0, nullptr, args), NORMRT_SUCCESS);
  EXPECT_EQ(stats->setAttributes.load(), setAttributes + 1);
  ASSERT_EQ(normrt_launch(f, 1, 1, 32, 48 << 10, nullptr, args),
            NORMRT_SUCCESS);
  EXPECT_EQ(stats->setAttributes.load(), setAttributes + 2);
  ASSERT_EQ(normrt_launch(f, 1, 1, 32, 100 << 10, nullptr, args),
            NORMRT_SUCCESS)
      << lastError();
  EXPECT_EQ(stats->setAttributes.load(), setAttributes + 3);
  EXPECT_EQ(stats->lastSharedAttribute.load(), 100 << 10);

  // More than the device has: the attribute call fails.
  EXPECT_EQ(normrt_launch(f, 1, 1, 32, 300 << 10, nullptr, args),
            NORMRT_ERROR_LAUNCH);
  EXPECT_TRUE(mentions(lastError(), "cuFuncSetAttribute"));
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_INVALID_VALUE"));

  // A function whose module is gone: cuLaunchKernel fails.
  normrt_release_all();
  EXPECT_EQ(normrt_launch(f, 3, 1, 64, 0, nullptr, args), NORMRT_ERROR_LAUNCH);
  EXPECT_TRUE(mentions(lastError(), "cuLaunchKernel(grid 3x1, block 64"));
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_INVALID_HANDLE"));
}

// What does not change is asked of the driver once: a function's raised
// shared-memory limit and its occupancies (until normrt_release_all, after
// which a function may have the handle of an unloaded one), a device's
// cooperative-launch support.
TEST_F(RuntimeFake, LaunchAsksTheDriverOnce) {
  void *f = function(kImage, "norm_bwd");
  int value = 7;
  void *args[] = {&value};
  int sets = stats->setAttributes.load();
  int occupancies = stats->occupancyQueries.load();
  int attributes = stats->attributeQueries.load();
  int ctas = 0, fits = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(normrt_launch(f, 2, 1, 128, 64 << 10, nullptr, args),
              NORMRT_SUCCESS)
        << lastError();
    ASSERT_EQ(normrt_max_active_ctas(f, 128, 64 << 10, &ctas),
              NORMRT_SUCCESS);
    ASSERT_EQ(normrt_cooperative_fits(f, 2, 128, 64 << 10, &fits),
              NORMRT_SUCCESS);
  }
  EXPECT_EQ(stats->setAttributes.load(), sets + 1);
  EXPECT_EQ(stats->occupancyQueries.load(), occupancies + 1);
  EXPECT_GT(ctas, 0);
  EXPECT_EQ(fits, 1);
  int afterFirst = stats->attributeQueries.load();
  EXPECT_LE(afterFirst, attributes + 2); // SM count, cooperative support
  // A smaller size is covered by the limit; another shape is a new query.
  ASSERT_EQ(normrt_max_active_ctas(f, 128, 32 << 10, &ctas), NORMRT_SUCCESS);
  EXPECT_EQ(stats->setAttributes.load(), sets + 1);
  EXPECT_EQ(stats->occupancyQueries.load(), occupancies + 2);
  // After normrt_release_all everything is asked again.
  normrt_release_all();
  f = function(kImage, "norm_bwd");
  ASSERT_EQ(normrt_cooperative_fits(f, 2, 128, 64 << 10, &fits),
            NORMRT_SUCCESS);
  EXPECT_EQ(stats->setAttributes.load(), sets + 2);
  EXPECT_EQ(stats->occupancyQueries.load(), occupancies + 3);
  EXPECT_GT(stats->attributeQueries.load(), afterFirst);
}

TEST_F(RuntimeFake, LaunchDependent) {
  void *f = function(kImage, "norm_bwd");
  int value = 7;
  void *args[] = {&value};
  void *stream = fakeAddress(0x59);
  int launches = stats->launches.load();
  int dependent = stats->dependentLaunches.load();
  int setAttributes = stats->setAttributes.load();
  ASSERT_EQ(normrt_launch_dependent(f, 5, 3, 256, 64 << 10, stream, args),
            NORMRT_SUCCESS)
      << lastError();
  expectLastLaunch(f, 5, 3, 256, 64u << 10, stream, args, /*cooperative=*/0,
                   /*dependent=*/1);
  FakeCudaLaunch launch{};
  EXPECT_EQ(stats->launches.load(), launches + 1);
  EXPECT_EQ(stats->dependentLaunches.load(), dependent + 1);
  // Past 48 KiB the limit is raised first, as for a plain launch.
  EXPECT_EQ(stats->setAttributes.load(), setAttributes + 1);

  // NORMRT_NO_DEPENDENT_LAUNCH: a plain launch ("" and "0" count as unset).
  for (const char *value : {"", "0"}) {
    ScopedEnv on("NORMRT_NO_DEPENDENT_LAUNCH", value);
    ASSERT_EQ(normrt_launch_dependent(f, 1, 1, 32, 0, stream, args),
              NORMRT_SUCCESS);
    lastLaunch(&launch);
    EXPECT_EQ(launch.dependent, 1) << "'" << value << "'";
  }
  {
    ScopedEnv off("NORMRT_NO_DEPENDENT_LAUNCH", "1");
    ASSERT_EQ(normrt_launch_dependent(f, 2, 1, 64, 0, stream, args),
              NORMRT_SUCCESS);
    lastLaunch(&launch);
    EXPECT_EQ(launch.dependent, 0);
    EXPECT_EQ(launch.grid[0], 2u);
    EXPECT_EQ(stats->dependentLaunches.load(), dependent + 3);
  }
  // A plain launch never sets the attribute.
  ASSERT_EQ(normrt_launch(f, 1, 1, 32, 0, stream, args), NORMRT_SUCCESS);
  lastLaunch(&launch);
  EXPECT_EQ(launch.dependent, 0);

  // The driver's refusal is the launch's error, with its name.
  {
    ScopedEnv refuse("FAKECUDA_NO_DEPENDENT_LAUNCH", "1");
    EXPECT_EQ(normrt_launch_dependent(f, 1, 1, 32, 0, stream, args),
              NORMRT_ERROR_LAUNCH);
    EXPECT_TRUE(mentions(lastError(), "cuLaunchKernelEx(grid 1x1, block 32"));
    EXPECT_TRUE(mentions(lastError(), "programmatic stream serialization"));
    EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_NOT_SUPPORTED"));
  }
  // The legacy stream, with no capture anywhere, launches.
  ASSERT_EQ(normrt_launch_dependent(f, 1, 1, 32, 0, nullptr, args),
            NORMRT_SUCCESS);
  // A function whose module is gone.
  normrt_release_all();
  EXPECT_EQ(normrt_launch_dependent(f, 3, 1, 64, 0, stream, args),
            NORMRT_ERROR_LAUNCH);
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_INVALID_HANDLE"));
}

TEST_F(RuntimeFake, ReleaseAllFreesEverythingAndKeepsTheContext) {
  void *other = newContext();
  std::thread([&] {
    setCurrentContext(other);
    void *p = nullptr;
    function(kImage, "norm_fwd");
    EXPECT_EQ(normrt_workspace(nullptr, 100, &p), NORMRT_SUCCESS);
  }).join();
  ASSERT_EQ(normrt_ensure_context(), NORMRT_SUCCESS);
  void *before = currentContext();
  int contextSyncs = stats->contextSyncs.load();
  function(kImage, "norm_fwd");
  void *p = nullptr;
  ASSERT_EQ(normrt_workspace(nullptr, 100, &p), NORMRT_SUCCESS);
  EXPECT_EQ(stats->liveModules.load(), 2);
  EXPECT_EQ(stats->liveAllocations.load(), 2);

  normrt_release_all();
  EXPECT_EQ(stats->liveModules.load(), 0);
  EXPECT_EQ(stats->liveAllocations.load(), 0);
  EXPECT_EQ(stats->contextSyncs.load(), contextSyncs + 2);
  EXPECT_EQ(currentContext(), before);

  // Everything comes back on demand.
  int loads = stats->moduleLoads.load();
  function(kImage, "norm_fwd");
  EXPECT_EQ(stats->moduleLoads.load(), loads + 1);
}

//===----------------------------------------------------------------------===//
// The fake driver: cooperative launches and the grid-barrier word
//===----------------------------------------------------------------------===//

// The fake has 132 multiprocessors of 2048 threads and 228 KiB of shared
// memory: 256-thread CTAs without shared memory fit 8 per multiprocessor,
// 128-thread CTAs with 100 KiB fit 2.
TEST_F(RuntimeFake, CooperativeFitsUpToWhatIsResident) {
  void *f = function(kImage, "norm_fwd");
  int launches = stats->launches.load();
  int allocs = stats->allocs.load();
  int fits = -1;
  ASSERT_EQ(normrt_cooperative_fits(f, 132 * 8, 256, 0, &fits),
            NORMRT_SUCCESS)
      << lastError();
  EXPECT_EQ(fits, 1);
  fits = -1;
  ASSERT_EQ(normrt_cooperative_fits(f, 1, 256, 0, &fits), NORMRT_SUCCESS);
  EXPECT_EQ(fits, 1);
  fits = -1;
  ASSERT_EQ(normrt_cooperative_fits(f, 132 * 8 + 1, 256, 0, &fits),
            NORMRT_SUCCESS);
  EXPECT_EQ(fits, 0);

  // Dynamic shared memory counts (and raises the function's limit first).
  fits = -1;
  ASSERT_EQ(normrt_cooperative_fits(f, 132 * 2, 128, 100 << 10, &fits),
            NORMRT_SUCCESS)
      << lastError();
  EXPECT_EQ(fits, 1);
  EXPECT_EQ(stats->lastSharedAttribute.load(), 100 << 10);
  fits = -1;
  ASSERT_EQ(normrt_cooperative_fits(f, 132 * 2 + 1, 128, 100 << 10, &fits),
            NORMRT_SUCCESS);
  EXPECT_EQ(fits, 0);
  // Asking launches nothing and allocates nothing.
  EXPECT_EQ(stats->launches.load(), launches);
  EXPECT_EQ(stats->allocs.load(), allocs);
}

// Clusters resident at once: the driver's count for the cluster shape (the
// fake: 16 GPCs of 8 SMs), with the dynamic shared memory allowed first.
TEST_F(RuntimeFake, MaxActiveClusters) {
  void *f = function(kImage, "norm_fwd");
  int queries = stats->clusterQueries.load();
  int clusters = -1;
  ASSERT_EQ(normrt_max_active_clusters(f, 256, 0, 2, &clusters),
            NORMRT_SUCCESS)
      << lastError();
  EXPECT_EQ(clusters, 16 * (8 * 8 / 2));
  ASSERT_EQ(normrt_max_active_clusters(f, 256, 96 << 10, 4, &clusters),
            NORMRT_SUCCESS)
      << lastError();
  EXPECT_EQ(clusters, 16 * (8 * 2 / 4));
  EXPECT_EQ(stats->lastSharedAttribute.load(), 96 << 10);
  EXPECT_EQ(normrt_max_active_clusters(f, 256, 0, 0, &clusters),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(clusters, 0);
  EXPECT_TRUE(mentions(lastError(), "cluster of 0 CTAs"));
  EXPECT_EQ(normrt_max_active_clusters(f, 256, 0, 32, &clusters),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(normrt_max_active_clusters(f, 256, 0, 2, nullptr),
            NORMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(normrt_max_active_clusters(nullptr, 256, 0, 2, &clusters),
            NORMRT_ERROR_INVALID_ARGUMENT);
  // The driver refuses a shape it cannot place (the fake: above 8).
  EXPECT_EQ(normrt_max_active_clusters(f, 256, 0, 16, &clusters),
            NORMRT_ERROR_DRIVER);
  EXPECT_TRUE(mentions(lastError(), "cuOccupancyMaxActiveClusters"));
  // Two answered; the bad arguments reached no driver.
  EXPECT_EQ(stats->clusterQueries.load() - queries, 2);
}

TEST_F(RuntimeFake, CooperativeFitsHonoursNormrtNoCooperative) {
  void *f = function(kImage, "norm_fwd");
  int fits = -1;
  {
    ScopedEnv off("NORMRT_NO_COOPERATIVE", "1");
    ASSERT_EQ(normrt_cooperative_fits(f, 1, 256, 0, &fits), NORMRT_SUCCESS)
        << lastError();
    EXPECT_EQ(fits, 0);
  }
  {
    // "0" and "" mean "not set".
    ScopedEnv zero("NORMRT_NO_COOPERATIVE", "0");
    fits = -1;
    ASSERT_EQ(normrt_cooperative_fits(f, 1, 256, 0, &fits), NORMRT_SUCCESS);
    EXPECT_EQ(fits, 1);
  }
  {
    ScopedEnv empty("NORMRT_NO_COOPERATIVE", "");
    fits = -1;
    ASSERT_EQ(normrt_cooperative_fits(f, 1, 256, 0, &fits), NORMRT_SUCCESS);
    EXPECT_EQ(fits, 1);
  }
  EXPECT_EQ(std::getenv("NORMRT_NO_COOPERATIVE"), nullptr);
  fits = -1;
  ASSERT_EQ(normrt_cooperative_fits(f, 1, 256, 0, &fits), NORMRT_SUCCESS);
  EXPECT_EQ(fits, 1);
}

TEST_F(RuntimeFake, CooperativeFitsNeedsDeviceSupport) {
  void *f = function(kImage, "norm_fwd");
  ScopedEnv unsupported("FAKECUDA_NO_COOPERATIVE", "1");
  int fits = -1;
  ASSERT_EQ(normrt_cooperative_fits(f, 1, 256, 0, &fits), NORMRT_SUCCESS)
      << lastError();
  EXPECT_EQ(fits, 0);
}

TEST_F(RuntimeFake, CooperativeBadArgumentsReachNoDriver) {
  void *f = function(kImage, "norm_fwd");
  int queries = stats->attributeQueries.load();
  int setAttributes = stats->setAttributes.load();
  int launches = stats->launches.load();
  int allocs = stats->allocs.load();
  int memsets = stats->memsets.load();
  expectCooperativeArgumentChecks(f);
  EXPECT_EQ(stats->attributeQueries.load(), queries);
  EXPECT_EQ(stats->setAttributes.load(), setAttributes);
  EXPECT_EQ(stats->launches.load(), launches);
  EXPECT_EQ(stats->allocs.load(), allocs);
  EXPECT_EQ(stats->memsets.load(), memsets);
}

TEST_F(RuntimeFake, GridBarrierWordOncePerStream) {
  void *s1 = fakeAddress(0x61), *s2 = fakeAddress(0x62);
  makeCaptureWords();
  int allocs = stats->allocs.load();
  int memsets = stats->memsets.load();
  void *word = nullptr;
  ASSERT_EQ(normrt_grid_barrier_word(s1, &word), NORMRT_SUCCESS)
      << lastError();
  ASSERT_NE(word, nullptr);
  EXPECT_EQ(stats->allocs.load(), allocs + 1);
  EXPECT_EQ(stats->lastAllocBytes.load(), 128u);
  // Zeroed on its stream: 32 words, the whole 128-byte line.
  EXPECT_EQ(stats->memsets.load(), memsets + 1);
  EXPECT_EQ(stats->lastMemsetPointer.load(), word);
  EXPECT_EQ(stats->lastMemsetValue.load(), 0u);
  EXPECT_EQ(stats->lastMemsetCount.load(), 32u);
  EXPECT_EQ(stats->lastMemsetStream.load(), s1);

  // The same stream: the same word, not zeroed again (a kernel in flight
  // may be using it).
  void *again = nullptr;
  ASSERT_EQ(normrt_grid_barrier_word(s1, &again), NORMRT_SUCCESS);
  EXPECT_EQ(again, word);
  EXPECT_EQ(stats->allocs.load(), allocs + 1);
  EXPECT_EQ(stats->memsets.load(), memsets + 1);

  // Another stream never shares a counter.
  void *other = nullptr;
  ASSERT_EQ(normrt_grid_barrier_word(s2, &other), NORMRT_SUCCESS);
  EXPECT_NE(other, word);
  EXPECT_EQ(stats->allocs.load(), allocs + 2);
  EXPECT_EQ(stats->memsets.load(), memsets + 2);
  EXPECT_EQ(stats->lastMemsetPointer.load(), other);
  EXPECT_EQ(stats->lastMemsetStream.load(), s2);
  EXPECT_EQ(stats->liveAllocations.load(), 2 + kCaptureWordAllocations);

  // normrt_release_all frees both; the next call gets a new, zeroed word.
  normrt_release_all();
  EXPECT_EQ(stats->liveAllocations.load(), 0);
  makeCaptureWords();
  allocs = stats->allocs.load() - 2;
  memsets = stats->memsets.load() - 2;
  void *fresh = nullptr;
  ASSERT_EQ(normrt_grid_barrier_word(s1, &fresh), NORMRT_SUCCESS);
  EXPECT_NE(fresh, nullptr);
  EXPECT_EQ(stats->allocs.load(), allocs + 3);
  EXPECT_EQ(stats->memsets.load(), memsets + 3);
  EXPECT_EQ(stats->lastMemsetPointer.load(), fresh);
  EXPECT_EQ(stats->liveAllocations.load(), 1 + kCaptureWordAllocations);
}

TEST_F(RuntimeFake, GridBarrierWordBesideTheWorkspace) {
  void *s = fakeAddress(0x63);
  makeCaptureWords();
  int memsets = stats->memsets.load();
  void *word = nullptr, *workspace = nullptr;
  ASSERT_EQ(normrt_grid_barrier_word(s, &word), NORMRT_SUCCESS) << lastError();
  ASSERT_EQ(normrt_workspace(s, 1000, &workspace), NORMRT_SUCCESS);
  EXPECT_NE(workspace, word);
  EXPECT_EQ(stats->liveAllocations.load(), 2 + kCaptureWordAllocations);

  // Growing the workspace frees the old workspace, never the barrier word.
  int frees = stats->frees.load();
  void *grown = nullptr;
  ASSERT_EQ(normrt_workspace(s, 1 << 20, &grown), NORMRT_SUCCESS);
  EXPECT_EQ(stats->frees.load(), frees + 1);
  EXPECT_EQ(stats->liveAllocations.load(), 2 + kCaptureWordAllocations);
  // A caller's workspace set and removed again leaves it alone too.
  ASSERT_EQ(normrt_set_workspace(s, fakeAddress(0x7000), 4096),
            NORMRT_SUCCESS);
  ASSERT_EQ(normrt_set_workspace(s, nullptr, 0), NORMRT_SUCCESS);
  void *again = nullptr;
  ASSERT_EQ(normrt_grid_barrier_word(s, &again), NORMRT_SUCCESS);
  EXPECT_EQ(again, word);
  EXPECT_EQ(stats->memsets.load(), memsets + 1);

  // release_all synchronises before it frees (kernels may still spin on it).
  int contextSyncs = stats->contextSyncs.load();
  normrt_release_all();
  EXPECT_EQ(stats->contextSyncs.load(), contextSyncs + 1);
  EXPECT_EQ(stats->liveAllocations.load(), 0);
}

TEST_F(RuntimeFake, GridBarrierWordPerContextAndThread) {
  void *perThread = fakeAddress(0x2); // CU_STREAM_PER_THREAD
  makeCaptureWords();
  int memsets = stats->memsets.load();
  void *mine = nullptr, *again = nullptr;
  ASSERT_EQ(normrt_grid_barrier_word(perThread, &mine), NORMRT_SUCCESS)
      << lastError();
  ASSERT_EQ(normrt_grid_barrier_word(perThread, &again), NORMRT_SUCCESS);
  EXPECT_EQ(again, mine);
  void *legacy = nullptr;
  ASSERT_EQ(normrt_grid_barrier_word(nullptr, &legacy), NORMRT_SUCCESS);
  EXPECT_NE(legacy, mine);

  void *theirs = nullptr, *theirLegacy = nullptr, *otherContext = nullptr;
  std::thread([&] {
    EXPECT_EQ(normrt_grid_barrier_word(perThread, &theirs), NORMRT_SUCCESS);
    EXPECT_EQ(normrt_grid_barrier_word(nullptr, &theirLegacy),
              NORMRT_SUCCESS);
  }).join();
  EXPECT_NE(theirs, nullptr);
  EXPECT_NE(theirs, mine);
  // The legacy default stream is one stream for every thread.
  EXPECT_EQ(theirLegacy, legacy);

  // Another context has its own words, freed by normrt_release_all from
  // whatever thread calls it.
  void *context = newContext();
  std::thread([&] {
    setCurrentContext(context);
    EXPECT_EQ(normrt_grid_barrier_word(nullptr, &otherContext),
              NORMRT_SUCCESS);
  }).join();
  EXPECT_NE(otherContext, nullptr);
  EXPECT_NE(otherContext, legacy);
  // Four words, and the other context's capture words.
  EXPECT_EQ(stats->liveAllocations.load(), 4 + 1 + kCaptureWordAllocations);
  EXPECT_EQ(stats->memsets.load(), memsets + 4 + 1);
}

TEST_F(RuntimeFake, GridBarrierWordFailures) {
  void *s = fakeAddress(0x64);
  makeCaptureWords();
  int memsets = stats->memsets.load();
  void *word = fakeAddress(0x1234);
  setMemoryLimit(64);
  EXPECT_EQ(normrt_grid_barrier_word(s, &word), NORMRT_ERROR_OUT_OF_MEMORY);
  setMemoryLimit(size_t(1) << 30);
  EXPECT_EQ(word, nullptr);
  EXPECT_TRUE(mentions(lastError(), "normrt_grid_barrier_word"));
  EXPECT_TRUE(mentions(lastError(), "cuMemAlloc_v2(128 bytes)"));
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_OUT_OF_MEMORY"));

  // A failed memset frees the new buffer and remembers nothing.
  {
    ScopedEnv failing("FAKECUDA_FAIL_MEMSET", "1");
    word = fakeAddress(0x1234);
    EXPECT_EQ(normrt_grid_barrier_word(s, &word), NORMRT_ERROR_DRIVER);
    EXPECT_EQ(word, nullptr);
    EXPECT_TRUE(mentions(lastError(), "normrt_grid_barrier_word"));
    EXPECT_TRUE(mentions(lastError(), "cuMemsetD32Async"));
    EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_INVALID_VALUE"));
    EXPECT_EQ(stats->liveAllocations.load(), kCaptureWordAllocations);
  }
  // The next call tries again.
  ASSERT_EQ(normrt_grid_barrier_word(s, &word), NORMRT_SUCCESS)
      << lastError();
  EXPECT_NE(word, nullptr);
  EXPECT_EQ(stats->memsets.load(), memsets + 1);
  EXPECT_EQ(stats->liveAllocations.load(), 1 + kCaptureWordAllocations);
}

TEST_F(RuntimeFake, LaunchCooperative) {
  void *f = function(kImage, "norm_bwd");
  int launches = stats->launches.load();
  int cooperative = stats->cooperativeLaunches.load();
  int setAttributes = stats->setAttributes.load();
  int value = 7;
  void *word = nullptr;
  void *stream = fakeAddress(0x65);
  ASSERT_EQ(normrt_grid_barrier_word(stream, &word), NORMRT_SUCCESS);
  void *args[] = {&value, &word};
  ASSERT_EQ(normrt_launch_cooperative(f, 264, 128, 100 << 10, stream, args),
            NORMRT_SUCCESS)
      << lastError();
  expectLastLaunch(f, 264, 1, 128, unsigned(100 << 10), stream, args,
                   /*cooperative=*/1, /*dependent=*/0);
  EXPECT_EQ(stats->cooperativeLaunches.load(), cooperative + 1);
  EXPECT_EQ(stats->launches.load(), launches + 1);
  // Dynamic shared memory raised the limit first, as normrt_launch does.
  EXPECT_EQ(stats->setAttributes.load(), setAttributes + 1);
  EXPECT_EQ(stats->lastSharedAttribute.load(), 100 << 10);

  // Without shared memory no attribute is set; a plain launch after it is
  // not cooperative.
  ASSERT_EQ(normrt_launch_cooperative(f, 1, 32, 0, nullptr, nullptr),
            NORMRT_SUCCESS);
  EXPECT_EQ(stats->setAttributes.load(), setAttributes + 1);
  EXPECT_EQ(stats->cooperativeLaunches.load(), cooperative + 2);
  ASSERT_EQ(normrt_launch(f, 1, 1, 32, 0, nullptr, args), NORMRT_SUCCESS);
  expectLastLaunch(f, 1, 1, 32, 0, nullptr, args, /*cooperative=*/0,
                   /*dependent=*/0);
  EXPECT_EQ(stats->cooperativeLaunches.load(), cooperative + 2);
  EXPECT_EQ(stats->launches.load(), launches + 3);
}

TEST_F(RuntimeFake, LaunchCooperativeDriverFailures) {
  void *f = function(kImage, "norm_fwd");
  int launches = stats->launches.load();
  // What normrt_cooperative_fits refuses, the driver refuses too.
  int fits = -1;
  ASSERT_EQ(normrt_cooperative_fits(f, 132 * 8 + 1, 256, 0, &fits),
            NORMRT_SUCCESS);
  EXPECT_EQ(fits, 0);
  EXPECT_EQ(normrt_launch_cooperative(f, 132 * 8 + 1, 256, 0, nullptr,
                                      nullptr),
            NORMRT_ERROR_LAUNCH);
  EXPECT_TRUE(mentions(lastError(),
                       "normrt_launch_cooperative: cuLaunchCooperativeKernel("
                       "grid 1057, block 256, 0 bytes of shared memory"));
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"));

  // More shared memory than the device has: the attribute call fails.
  EXPECT_EQ(normrt_launch_cooperative(f, 1, 32, 300 << 10, nullptr, nullptr),
            NORMRT_ERROR_LAUNCH);
  EXPECT_TRUE(mentions(lastError(), "normrt_launch_cooperative"));
  EXPECT_TRUE(mentions(lastError(), "cuFuncSetAttribute"));

  // A function whose module is gone.
  normrt_release_all();
  EXPECT_EQ(normrt_launch_cooperative(f, 2, 64, 0, nullptr, nullptr),
            NORMRT_ERROR_LAUNCH);
  EXPECT_TRUE(mentions(lastError(), "cuLaunchCooperativeKernel(grid 2, "
                                    "block 64"));
  EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_INVALID_HANDLE"));
  EXPECT_EQ(stats->launches.load(), launches);
}


//===----------------------------------------------------------------------===//
// The fake driver: CUDA graph capture
//===----------------------------------------------------------------------===//

// "norm_grid" is the fake's barrier kernel: argument 0 points to its word.
const char kGridImage[] = "// fake PTX\n.entry norm_grid\n";

constexpr int kGlobal = CU_STREAM_CAPTURE_MODE_GLOBAL;
constexpr int kThreadLocal = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;

class RuntimeFakeCapture : public RuntimeFake {
protected:
  // What a generated launcher does for one fused group with a column
  // result, on the cooperative path: function, workspace, barrier word,
  // one cooperative launch, then normrt_scratch_done (also on failure).
  struct Call {
    void *workspace = nullptr;
    void *word = nullptr;
  };
  int launcher(const void *image, void *stream, size_t bytes, Call *call) {
    int st = launches(image, stream, bytes, call);
    int done = normrt_scratch_done(stream);
    return st != 0 ? st : done;
  }
  int launches(const void *image, void *stream, size_t bytes, Call *call) {
    void *f = nullptr;
    int st, sms = 0, fits = 0;
    if ((st = normrt_ensure_context()) || (st = normrt_sm_count(&sms)) ||
        (st = normrt_get_function(image, "norm_grid", &f)) ||
        (st = normrt_workspace(stream, bytes, &call->workspace)) ||
        (st = normrt_cooperative_fits(f, 132, 256, 0, &fits)) ||
        (st = normrt_grid_barrier_word(stream, &call->word)))
      return st;
    EXPECT_EQ(fits, 1);
    void *args[] = {&call->word, &call->workspace};
    return normrt_launch_cooperative(f, 132, 256, 0, stream, args);
  }
  std::vector<FakeCudaNode> nodes(void *graph) {
    std::vector<FakeCudaNode> out(64);
    int count = graphNodes(graph, out.data(), 64);
    out.resize(count);
    return out;
  }
  static unsigned long long at(void *p) {
    return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p));
  }
  // The nodes of one launcher call when the context had capture words: the
  // word needs no node at all.
  void expectLauncherNodesWithCaptureWord(void *graph, const Call &call,
                                          size_t bytes) {
    std::vector<FakeCudaNode> n = nodes(graph);
    ASSERT_EQ(n.size(), 3u);
    EXPECT_EQ(n[0].kind, FAKECUDA_NODE_ALLOC);
    EXPECT_EQ(n[0].pointer, at(call.workspace));
    EXPECT_EQ(n[0].bytes, bytes);
    EXPECT_EQ(n[1].kind, FAKECUDA_NODE_KERNEL);
    EXPECT_EQ(n[1].cooperative, 1);
    EXPECT_EQ(n[1].pointer, at(call.word));
    EXPECT_EQ(n[2].kind, FAKECUDA_NODE_FREE);
    EXPECT_EQ(n[2].pointer, at(call.workspace));
    EXPECT_EQ(graphUnfreed(graph), 0);
  }
  // The nodes one launcher call adds to a capture, in order.
  void expectLauncherNodes(void *graph, const Call &call, size_t bytes) {
    std::vector<FakeCudaNode> n = nodes(graph);
    ASSERT_EQ(n.size(), 6u);
    EXPECT_EQ(n[0].kind, FAKECUDA_NODE_ALLOC);
    EXPECT_EQ(n[0].pointer, at(call.workspace));
    EXPECT_EQ(n[0].bytes, bytes); // exactly what was asked
    EXPECT_EQ(n[1].kind, FAKECUDA_NODE_ALLOC);
    EXPECT_EQ(n[1].pointer, at(call.word));
    EXPECT_EQ(n[1].bytes, 128u);
    // Zeroed in the graph, before the kernel, at every replay.
    EXPECT_EQ(n[2].kind, FAKECUDA_NODE_MEMSET);
    EXPECT_EQ(n[2].pointer, at(call.word));
    EXPECT_EQ(n[2].bytes, 32u);
    EXPECT_EQ(n[2].value, 0u);
    EXPECT_EQ(n[3].kind, FAKECUDA_NODE_KERNEL);
    EXPECT_EQ(n[3].cooperative, 1);
    EXPECT_EQ(n[3].pointer, at(call.word));
    // Freed in the graph, after the kernel.
    EXPECT_EQ(n[4].kind, FAKECUDA_NODE_FREE);
    EXPECT_EQ(n[4].pointer, at(call.workspace));
    EXPECT_EQ(n[5].kind, FAKECUDA_NODE_FREE);
    EXPECT_EQ(n[5].pointer, at(call.word));
    EXPECT_EQ(graphUnfreed(graph), 0);
  }
  std::vector<unsigned> reads() {
    std::vector<unsigned> out(4096);
    int count = barrierReads(out.data(), 4096);
    out.resize(count);
    return out;
  }
};

TEST_F(RuntimeFakeCapture, FirstCallEverInsideACapture) {
  void *s = fakeAddress(0x71);
  int allocs = stats->allocs.load(), loads = stats->moduleLoads.load();
  int syncs = stats->streamSyncs.load(), exchanges = stats->modeExchanges.load();
  int functionLoads = stats->functionLoads.load();
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  Call call;
  ASSERT_EQ(launcher(kGridImage, s, 5000, &call), NORMRT_SUCCESS)
      << lastError();
  // The module was loaded and the function looked up in relaxed mode (two
  // exchanges each way), the scratch came from the stream-ordered allocator.
  EXPECT_EQ(stats->moduleLoads.load(), loads + 1);
  EXPECT_EQ(stats->modeExchanges.load(), exchanges + 2);
  // The kernel was loaded there too (cuFuncLoad), not at its launch.
  EXPECT_EQ(stats->functionLoads.load(), functionLoads + 1);
  EXPECT_EQ(stats->allocs.load(), allocs);
  EXPECT_EQ(stats->streamSyncs.load(), syncs);
  void *graph = nullptr;
  ASSERT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
  ASSERT_NE(graph, nullptr);
  expectLauncherNodes(graph, call, 5000);
  // This thread's capture mode is global again.
  auto exchange = lookup<CUresult (*)(CUstreamCaptureMode *)>(
      "cuThreadExchangeStreamCaptureMode");
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  ASSERT_EQ(exchange(&mode), CUDA_SUCCESS);
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
  ASSERT_EQ(exchange(&mode), CUDA_SUCCESS);
}

TEST_F(RuntimeFakeCapture, ReplaysSeeAZeroedWordEveryTime) {
  void *s = fakeAddress(0x72);
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  Call call;
  ASSERT_EQ(launcher(kGridImage, s, 4096, &call), NORMRT_SUCCESS)
      << lastError();
  void *graph = nullptr;
  ASSERT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
  EXPECT_TRUE(reads().empty()); // capture ran nothing
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(graphLaunch(graph), CUDA_SUCCESS) << i;
  // Fresh graph memory reads as poison; the memset node zeroes it first.
  std::vector<unsigned> seen = reads();
  ASSERT_EQ(seen.size(), 100u);
  for (unsigned value : seen)
    EXPECT_EQ(value, 0u);
  // Eager calls on the same stream keep their own word (zeroed once, and
  // left with the low 31 bits as they were by every kernel).
  Call eager;
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(launcher(kGridImage, s, 4096, &eager), NORMRT_SUCCESS)
        << lastError();
  EXPECT_NE(eager.word, call.word);
  EXPECT_NE(eager.workspace, call.workspace);
  seen = reads();
  ASSERT_EQ(seen.size(), 3u);
  for (unsigned value : seen)
    EXPECT_EQ(value & 0x7fffffffu, 0u);
}

TEST_F(RuntimeFakeCapture, LaterCallsNeverTouchTheStreamsBuffers) {
  void *s = fakeAddress(0x73);
  Call eager;
  ASSERT_EQ(launcher(kGridImage, s, 1000, &eager), NORMRT_SUCCESS)
      << lastError();
  int allocs = stats->allocs.load(), frees = stats->frees.load();
  int syncs = stats->streamSyncs.load(), loads = stats->moduleLoads.load();
  // A bigger shape inside the capture: outside capture the stream's buffer
  // would grow (synchronise, free, allocate); inside, the graph gets its own.
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  Call captured;
  ASSERT_EQ(launcher(kGridImage, s, 1 << 20, &captured), NORMRT_SUCCESS)
      << lastError();
  void *graph = nullptr;
  ASSERT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
  expectLauncherNodesWithCaptureWord(graph, captured, 1 << 20);
  EXPECT_EQ(stats->allocs.load(), allocs);
  EXPECT_EQ(stats->frees.load(), frees);
  EXPECT_EQ(stats->streamSyncs.load(), syncs);
  EXPECT_EQ(stats->moduleLoads.load(), loads); // cached: no load at all
  EXPECT_NE(captured.workspace, eager.workspace);
  EXPECT_NE(captured.word, eager.word);
  // After the capture the stream's own buffers are there as before.
  Call again;
  ASSERT_EQ(launcher(kGridImage, s, 1000, &again), NORMRT_SUCCESS);
  EXPECT_EQ(again.workspace, eager.workspace);
  EXPECT_EQ(again.word, eager.word);
}

TEST_F(RuntimeFakeCapture, CaptureWordsAreZeroedOnceAndNeverShared) {
  // An eager call makes the context's capture words: zeroed on its stream,
  // which is synchronised (graphs may replay on any stream).
  void *s = fakeAddress(0x7d);
  int syncs = stats->streamSyncs.load();
  Call eager;
  ASSERT_EQ(launcher(kGridImage, s, 100, &eager), NORMRT_SUCCESS)
      << lastError();
  EXPECT_EQ(stats->streamSyncs.load(), syncs + 1);
  EXPECT_EQ(stats->lastSyncedStream.load(), s);
  reads();
  // Every capture takes its own word, on any stream, until they run out.
  constexpr int kWords = 4096; // RuntimeInternal.h's kCaptureWords
  std::vector<void *> graphs;
  std::vector<void *> words;
  for (int i = 0; i < kWords + 1; ++i) {
    void *stream = fakeAddress(i % 2 ? 0x7e : 0x7f);
    ASSERT_EQ(beginCapture(stream, kGlobal), CUDA_SUCCESS);
    Call call;
    ASSERT_EQ(launcher(kGridImage, stream, 64, &call), NORMRT_SUCCESS)
        << lastError();
    void *graph = nullptr;
    ASSERT_EQ(endCapture(stream, &graph), CUDA_SUCCESS) << lastViolation();
    if (i < kWords) {
      expectLauncherNodesWithCaptureWord(graph, call, 64);
      words.push_back(call.word);
    } else {
      expectLauncherNodes(graph, call, 64); // used up: a memset node
    }
    graphs.push_back(graph);
  }
  std::sort(words.begin(), words.end());
  EXPECT_EQ(std::unique(words.begin(), words.end()), words.end());
  EXPECT_EQ(std::find(words.begin(), words.end(), eager.word), words.end());
  EXPECT_EQ(stats->streamSyncs.load(), syncs + 1);
  // Replays: the words start at zero and every kernel leaves its word's low
  // 31 bits at zero.
  for (int round = 0; round < 3; ++round)
    for (void *graph : graphs)
      ASSERT_EQ(graphLaunch(graph), CUDA_SUCCESS);
  std::vector<unsigned> seen = reads();
  ASSERT_EQ(seen.size(), 3u * (kWords + 1));
  for (unsigned value : seen)
    EXPECT_EQ(value & 0x7fffffffu, 0u) << std::hex << value;
}

TEST_F(RuntimeFakeCapture, EachGraphHasItsOwnScratchWhateverTheSize) {
  // Two graphs of one function on one stream, then one on a second stream
  // captured by another thread while the first capture is still open: every
  // graph has its own workspace and word, of the size it asked for, so they
  // may replay concurrently on any streams.
  void *s1 = fakeAddress(0x74), *s2 = fakeAddress(0x75);
  std::vector<void *> graphs;
  std::vector<Call> calls;
  const size_t sizes[] = {1000, 10 << 20};
  for (size_t bytes : sizes) {
    ASSERT_EQ(beginCapture(s1, kGlobal), CUDA_SUCCESS);
    Call call;
    ASSERT_EQ(launcher(kGridImage, s1, bytes, &call), NORMRT_SUCCESS)
        << lastError();
    void *graph = nullptr;
    ASSERT_EQ(endCapture(s1, &graph), CUDA_SUCCESS) << lastViolation();
    expectLauncherNodes(graph, call, bytes);
    graphs.push_back(graph);
    calls.push_back(call);
  }
  ASSERT_EQ(beginCapture(s1, kGlobal), CUDA_SUCCESS);
  Call other;
  void *otherGraph = nullptr;
  // The other thread's first call loads another image while this thread's
  // global capture is open: relaxed mode keeps both captures intact.
  static const char kOtherImage[] = "// other\n.entry norm_grid\n";
  std::thread([&] {
    ASSERT_EQ(beginCapture(s2, kGlobal), CUDA_SUCCESS);
    EXPECT_EQ(launcher(kOtherImage, s2, 3000, &other), NORMRT_SUCCESS)
        << lastError();
    EXPECT_EQ(endCapture(s2, &otherGraph), CUDA_SUCCESS) << lastViolation();
  }).join();
  Call third;
  ASSERT_EQ(launcher(kGridImage, s1, 2000, &third), NORMRT_SUCCESS)
      << lastError();
  void *thirdGraph = nullptr;
  ASSERT_EQ(endCapture(s1, &thirdGraph), CUDA_SUCCESS) << lastViolation();
  ASSERT_NE(otherGraph, nullptr);
  expectLauncherNodes(otherGraph, other, 3000);
  expectLauncherNodes(thirdGraph, third, 2000);
  graphs.push_back(otherGraph);
  graphs.push_back(thirdGraph);
  calls.push_back(other);
  calls.push_back(third);
  for (size_t i = 0; i < calls.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      EXPECT_NE(calls[i].workspace, calls[j].workspace);
      EXPECT_NE(calls[i].word, calls[j].word);
    }
  // Interleaved replays: every kernel sees its word zeroed.
  for (int round = 0; round < 25; ++round)
    for (void *graph : graphs)
      ASSERT_EQ(graphLaunch(graph), CUDA_SUCCESS);
  std::vector<unsigned> seen = reads();
  ASSERT_EQ(seen.size(), 100u);
  for (unsigned value : seen)
    EXPECT_EQ(value, 0u);
}

TEST_F(RuntimeFakeCapture, ThreadLocalModeAndTheTwoLaunchPath) {
  // The two-launch path takes no barrier word: one allocation, one free.
  // With a dependent final launch the final kernel's node carries the
  // programmatic edge, the main kernel's does not.
  for (bool dependent : {false, true}) {
    SCOPED_TRACE(dependent ? "dependent final launch" : "plain final launch");
    void *s = fakeAddress(dependent ? 0x77 : 0x76);
    void *f = function(kImage, "norm_fwd");
    ASSERT_EQ(beginCapture(s, kThreadLocal), CUDA_SUCCESS);
    void *ws = nullptr;
    ASSERT_EQ(normrt_workspace(s, 777, &ws), NORMRT_SUCCESS) << lastError();
    void *args[] = {&ws};
    ASSERT_EQ(normrt_launch(f, 4, 1, 256, 0, s, args), NORMRT_SUCCESS);
    ASSERT_EQ(dependent ? normrt_launch_dependent(f, 1, 1, 512, 0, s, args)
                        : normrt_launch(f, 1, 1, 512, 0, s, args),
              NORMRT_SUCCESS)
        << lastError();
    ASSERT_EQ(normrt_scratch_done(s), NORMRT_SUCCESS) << lastError();
    void *graph = nullptr;
    ASSERT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
    std::vector<FakeCudaNode> n = nodes(graph);
    ASSERT_EQ(n.size(), 4u);
    EXPECT_EQ(n[0].kind, FAKECUDA_NODE_ALLOC);
    EXPECT_EQ(n[0].bytes, 777u);
    EXPECT_EQ(n[1].kind, FAKECUDA_NODE_KERNEL);
    EXPECT_EQ(n[1].dependent, 0);
    EXPECT_EQ(n[2].kind, FAKECUDA_NODE_KERNEL);
    EXPECT_EQ(n[2].dependent, dependent ? 1 : 0);
    EXPECT_EQ(n[3].kind, FAKECUDA_NODE_FREE);
    EXPECT_EQ(graphUnfreed(graph), 0);
    ASSERT_EQ(graphLaunch(graph), CUDA_SUCCESS);
  }
}

TEST_F(RuntimeFakeCapture, ScratchDoneOutsideCaptureCallsNoDriver) {
  void *s = fakeAddress(0x77);
  void *ws = nullptr;
  ASSERT_EQ(normrt_workspace(s, 100, &ws), NORMRT_SUCCESS);
  int queries = stats->captureQueries.load();
  int frees = stats->asyncFrees.load();
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(normrt_scratch_done(s), NORMRT_SUCCESS);
  EXPECT_EQ(normrt_scratch_done(nullptr), NORMRT_SUCCESS);
  EXPECT_EQ(stats->captureQueries.load(), queries);
  EXPECT_EQ(stats->asyncFrees.load(), frees);
}

TEST_F(RuntimeFakeCapture, NoStreamOrderedAllocatorIsAnErrorNotABrokenCapture) {
  void *s = fakeAddress(0x78);
  void *f = function(kImage, "norm_fwd");
  ScopedEnv noPools("FAKECUDA_NO_MEMPOOLS", "1");
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  void *ws = fakeAddress(0x1234);
  EXPECT_EQ(normrt_workspace(s, 4096, &ws), NORMRT_ERROR_CAPTURE);
  EXPECT_EQ(ws, nullptr);
  EXPECT_TRUE(mentions(lastError(), "normrt_workspace"));
  EXPECT_TRUE(mentions(lastError(), "no memory pools"));
  EXPECT_TRUE(mentions(lastError(), "normrt_set_workspace"));
  void *word = fakeAddress(0x1234);
  EXPECT_EQ(normrt_grid_barrier_word(s, &word), NORMRT_ERROR_CAPTURE);
  EXPECT_EQ(word, nullptr);
  EXPECT_TRUE(mentions(lastError(), "grid-barrier word"));
  EXPECT_EQ(normrt_scratch_done(s), NORMRT_SUCCESS);
  // A caller workspace works in a capture (the graph then uses it).
  void *mine = fakeAddress(0x7000);
  ASSERT_EQ(normrt_set_workspace(s, mine, 4096), NORMRT_SUCCESS);
  ASSERT_EQ(normrt_workspace(s, 4096, &ws), NORMRT_SUCCESS) << lastError();
  EXPECT_EQ(ws, mine);
  void *args[] = {&ws};
  ASSERT_EQ(normrt_launch(f, 1, 1, 32, 0, s, args), NORMRT_SUCCESS);
  EXPECT_EQ(normrt_scratch_done(s), NORMRT_SUCCESS);
  void *graph = nullptr;
  ASSERT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
  std::vector<FakeCudaNode> n = nodes(graph);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].kind, FAKECUDA_NODE_KERNEL);
  ASSERT_EQ(normrt_set_workspace(s, nullptr, 0), NORMRT_SUCCESS);
}

TEST_F(RuntimeFakeCapture, LegacyStreamWhileAnotherCapturesIsRefused) {
  void *s = fakeAddress(0x79);
  void *f = function(kImage, "norm_fwd");
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  int launches = stats->launches.load();
  for (void *legacy : {fakeAddress(0), fakeAddress(1)}) {
    EXPECT_EQ(normrt_launch(f, 1, 1, 32, 0, legacy, nullptr),
              NORMRT_ERROR_CAPTURE);
    EXPECT_TRUE(mentions(lastError(), "normrt_launch: stream"));
    EXPECT_TRUE(mentions(lastError(), "legacy default stream"));
    EXPECT_TRUE(mentions(lastError(), "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"));
    EXPECT_EQ(normrt_launch_cooperative(f, 1, 32, 0, legacy, nullptr),
              NORMRT_ERROR_CAPTURE);
    void *p = fakeAddress(0x1234);
    EXPECT_EQ(normrt_workspace(legacy, 64, &p), NORMRT_ERROR_CAPTURE);
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(normrt_grid_barrier_word(legacy, &p), NORMRT_ERROR_CAPTURE);
    EXPECT_EQ(p, nullptr);
  }
  EXPECT_EQ(stats->launches.load(), launches);
  void *graph = nullptr;
  EXPECT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
  // Without a capture anywhere the legacy stream is fine.
  EXPECT_EQ(normrt_launch(f, 1, 1, 32, 0, nullptr, nullptr), NORMRT_SUCCESS)
      << lastError();
}

TEST_F(RuntimeFakeCapture, AnInvalidatedCaptureGetsNothingMore) {
  // Break a capture the way the old runtime did (a stream synchronisation
  // while it captures): the fake refuses and invalidates, as CUDA does.
  void *s = fakeAddress(0x7a);
  auto streamSynchronize =
      lookup<CUresult (*)(CUstream)>("cuStreamSynchronize");
  auto memAlloc = lookup<CUresult (*)(CUdeviceptr *, size_t)>("cuMemAlloc_v2");
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  EXPECT_EQ(streamSynchronize(static_cast<CUstream>(s)),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  allowedViolations = 1;
  EXPECT_STREQ(lastViolation(), "cuStreamSynchronize");
  int asyncAllocs = stats->asyncAllocs.load();
  void *p = fakeAddress(0x1234);
  EXPECT_EQ(normrt_workspace(s, 64, &p), NORMRT_ERROR_CAPTURE);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(mentions(lastError(), "already invalidated"));
  EXPECT_EQ(normrt_grid_barrier_word(s, &p), NORMRT_ERROR_CAPTURE);
  EXPECT_EQ(stats->asyncAllocs.load(), asyncAllocs);
  void *graph = fakeAddress(0x1234);
  EXPECT_EQ(endCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(graph, nullptr);

  // cuMemAlloc from the capturing thread breaks a global capture; from
  // another thread too (global mode), unless that thread is relaxed.
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  std::thread([&] {
    setCurrentContext(primaryContext());
    CUdeviceptr q = 0;
    EXPECT_EQ(memAlloc(&q, 256), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  }).join();
  allowedViolations = 2;
  EXPECT_STREQ(lastViolation(), "cuMemAlloc_v2");
  EXPECT_EQ(endCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  // A thread-local capture ignores other threads.
  ASSERT_EQ(beginCapture(s, kThreadLocal), CUDA_SUCCESS);
  std::thread([&] {
    void *q = nullptr;
    EXPECT_EQ(normrt_workspace(fakeAddress(0x7b), 256, &q), NORMRT_SUCCESS)
        << lastError();
  }).join();
  EXPECT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
}

TEST_F(RuntimeFakeCapture, ScratchDoneAfterTheCaptureEndedSaysSo) {
  void *s = fakeAddress(0x7c);
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  void *ws = nullptr;
  ASSERT_EQ(normrt_workspace(s, 512, &ws), NORMRT_SUCCESS) << lastError();
  void *graph = nullptr;
  ASSERT_EQ(endCapture(s, &graph), CUDA_SUCCESS);
  EXPECT_EQ(graphUnfreed(graph), 1);
  EXPECT_EQ(normrt_scratch_done(s), NORMRT_ERROR_CAPTURE);
  EXPECT_TRUE(mentions(lastError(), "ended before its 1 scratch"));
  // Forgotten: the next call has nothing to do.
  int queries = stats->captureQueries.load();
  EXPECT_EQ(normrt_scratch_done(s), NORMRT_SUCCESS);
  EXPECT_EQ(stats->captureQueries.load(), queries);
}

// A framework's allocator (normrt_set_capture_allocator) gives the workspace
// of calls made during a capture: no allocation node of ours in the graph,
// eager calls untouched, a failure or a misaligned buffer reported.
struct CaptureAllocations {
  int calls = 0;
  size_t bytes = 0;
  void *stream = nullptr;
  uintptr_t next = 0x700000; // 16-byte aligned fake addresses
  int status = 0;
};

int captureAllocate(void *user, void *stream, size_t bytes, void **ptr) {
  auto *a = static_cast<CaptureAllocations *>(user);
  ++a->calls;
  a->bytes = bytes;
  a->stream = stream;
  *ptr = fakeAddress(a->next);
  return a->status;
}

TEST_F(RuntimeFakeCapture, CaptureAllocatorGivesTheWorkspace) {
  void *s = fakeAddress(0x7d);
  CaptureAllocations allocations;
  ASSERT_EQ(normrt_set_capture_allocator(captureAllocate, &allocations),
            NORMRT_SUCCESS);
  struct Reset {
    ~Reset() { normrt_set_capture_allocator(nullptr, nullptr); }
  } reset;
  // Eager: the runtime's own workspace; the allocator is not asked.
  Call eager;
  ASSERT_EQ(launcher(kGridImage, s, 4096, &eager), NORMRT_SUCCESS)
      << lastError();
  EXPECT_EQ(allocations.calls, 0);
  int asyncAllocs = stats->asyncAllocs.load();
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  Call call;
  ASSERT_EQ(launcher(kGridImage, s, 5000, &call), NORMRT_SUCCESS)
      << lastError();
  EXPECT_EQ(allocations.calls, 1);
  EXPECT_EQ(allocations.bytes, 5000u); // exactly what the call asked
  EXPECT_EQ(allocations.stream, s);
  EXPECT_EQ(call.workspace, fakeAddress(0x700000));
  EXPECT_NE(call.workspace, eager.workspace);
  // No stream-ordered allocation for the workspace (the context already has
  // capture words, so the barrier word needs none either).
  EXPECT_EQ(stats->asyncAllocs.load(), asyncAllocs);
  void *graph = nullptr;
  ASSERT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
  for (const FakeCudaNode &node : nodes(graph))
    EXPECT_NE(node.kind, FAKECUDA_NODE_ALLOC);
  EXPECT_EQ(graphUnfreed(graph), 0);

  // The allocator fails: an error naming it, and the capture stays valid.
  allocations.status = 1;
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  Call failed;
  EXPECT_EQ(launcher(kGridImage, s, 5000, &failed),
            NORMRT_ERROR_OUT_OF_MEMORY);
  EXPECT_TRUE(mentions(lastError(), "normrt_set_capture_allocator"));
  ASSERT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
  // A misaligned buffer is refused.
  allocations.status = 0;
  allocations.next = 0x700008;
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  EXPECT_EQ(launcher(kGridImage, s, 5000, &failed), NORMRT_ERROR_MISALIGNED);
  EXPECT_TRUE(mentions(lastError(), "not 16-byte aligned"));
  ASSERT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
}

TEST(RuntimeFakeNoDevice, InitReportsNoDevice) {
  REQUIRE_SCENARIO("fake-no-device");
  EXPECT_EQ(normrt_init(), NORMRT_ERROR_NO_DEVICE);
  EXPECT_TRUE(mentions(lastError(), "no device"));
  int sms = 0;
  EXPECT_EQ(normrt_sm_count(&sms), NORMRT_ERROR_NO_DEVICE);
  int fits = -1;
  EXPECT_EQ(normrt_cooperative_fits(fakeAddress(0x1234), 1, 256, 0, &fits),
            NORMRT_ERROR_NO_DEVICE);
  EXPECT_EQ(fits, 0);
  void *barrier = fakeAddress(0x1234);
  EXPECT_EQ(normrt_grid_barrier_word(nullptr, &barrier),
            NORMRT_ERROR_NO_DEVICE);
  EXPECT_EQ(barrier, nullptr);
  EXPECT_EQ(normrt_launch_cooperative(fakeAddress(0x1234), 1, 32, 0, nullptr,
                                      nullptr),
            NORMRT_ERROR_NO_DEVICE);
  EXPECT_TRUE(mentions(lastError(), "normrt_launch_cooperative"));
}

} // namespace

//===----------------------------------------------------------------------===//
// The upstream runner ABI (UpstreamABI.cpp): the mgpu* entry points that
// gpu-to-llvm's output calls, on the fake driver. LLVM 22's signatures.
//===----------------------------------------------------------------------===//

extern "C" {
void *mgpuModuleLoad(void *data, size_t size);
void *mgpuModuleLoadJIT(void *data, int optLevel);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);
void mgpuLaunchKernel(void *f, intptr_t gx, intptr_t gy, intptr_t gz,
                      intptr_t bx, intptr_t by, intptr_t bz, int32_t smem,
                      void *stream, void **params, void **extra, size_t n);
void mgpuLaunchClusterKernel(void *f, intptr_t cx, intptr_t cy, intptr_t cz,
                             intptr_t gx, intptr_t gy, intptr_t gz,
                             intptr_t bx, intptr_t by, intptr_t bz,
                             int32_t smem, void *stream, void **params,
                             void **extra);
void *mgpuStreamCreate(void);
void mgpuStreamDestroy(void *stream);
void mgpuStreamSynchronize(void *stream);
void mgpuStreamWaitEvent(void *stream, void *event);
void *mgpuEventCreate(void);
void mgpuEventDestroy(void *event);
void mgpuEventSynchronize(void *event);
void mgpuEventRecord(void *event, void *stream);
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool isHostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream);
void mgpuMemset32(void *dst, unsigned value, size_t count, void *stream);
void mgpuMemset16(void *dst, unsigned short value, size_t count,
                  void *stream);
void mgpuSetDefaultDevice(int32_t device);
}

using RuntimeFakeUpstream = RuntimeFakeCapture;

TEST_F(RuntimeFakeUpstream, ModulesFunctionsAndLaunches) {
  // The image is the module handle; it loads at the first lookup, once.
  int loads = stats->moduleLoads.load();
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kImage), 2);
  EXPECT_EQ(module, kImage);
  EXPECT_EQ(stats->moduleLoads.load(), loads);
  void *f = mgpuModuleGetFunction(module, "norm_bwd");
  ASSERT_NE(f, nullptr) << lastError();
  EXPECT_EQ(mgpuModuleGetFunction(module, "norm_bwd"), f);
  EXPECT_EQ(stats->moduleLoads.load(), loads + 1);
  EXPECT_EQ(mgpuModuleGetFunction(module, "no_such_kernel"), nullptr);
  EXPECT_TRUE(mentions(lastError(), "mgpuModuleGetFunction: no kernel "
                                    "'no_such_kernel'"));
  mgpuModuleUnload(module);
  EXPECT_EQ(stats->liveModules.load(), 1); // cached until release_all

  void *stream = mgpuStreamCreate();
  ASSERT_NE(stream, nullptr) << lastError();
  int value = 3;
  void *params[] = {&value};
  mgpuLaunchKernel(f, 4, 2, 1, 128, 1, 1, 1024, stream, params, nullptr, 1);
  FakeCudaLaunch last;
  lastLaunch(&last);
  EXPECT_EQ(last.function, f);
  EXPECT_EQ(last.grid[0], 4u);
  EXPECT_EQ(last.grid[1], 2u);
  EXPECT_EQ(last.block[0], 128u);
  EXPECT_EQ(last.shared, 1024u);
  EXPECT_EQ(last.stream, stream);
  EXPECT_EQ(last.args, params);

  // A cluster launch: the cluster shape goes with cuLaunchKernelEx.
  int clusters = stats->clusterLaunches.load();
  mgpuLaunchClusterKernel(f, 2, 1, 1, 8, 1, 1, 256, 1, 1, 0, stream, params,
                          nullptr);
  lastLaunch(&last);
  EXPECT_EQ(stats->clusterLaunches.load(), clusters + 1);
  EXPECT_EQ(last.cluster[0], 2u);
  EXPECT_EQ(last.grid[0], 8u);
  // A grid that is not a multiple of the cluster is refused before the
  // driver, with the message in normrt_last_error.
  int launches = stats->launches.load();
  mgpuLaunchClusterKernel(f, 4, 1, 1, 6, 1, 1, 256, 1, 1, 0, stream, params,
                          nullptr);
  EXPECT_EQ(stats->launches.load(), launches);
  EXPECT_TRUE(mentions(lastError(), "not a multiple of the cluster"));
  mgpuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr, 1);
  EXPECT_TRUE(mentions(lastError(), "mgpuLaunchKernel: function is NULL"));

  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
  EXPECT_EQ(stats->liveStreams.load(), 0);
}

TEST_F(RuntimeFakeUpstream, MemoryEventsAndStreams) {
  void *stream = mgpuStreamCreate();
  ASSERT_NE(stream, nullptr);
  int allocs = stats->allocs.load();
  void *d = mgpuMemAlloc(4096, stream, false);
  ASSERT_NE(d, nullptr) << lastError();
  EXPECT_EQ(stats->allocs.load(), allocs + 1);
  EXPECT_EQ(mgpuMemAlloc(0, stream, false), nullptr); // nothing to allocate
  mgpuMemset32(d, 7, 1024, stream);
  EXPECT_EQ(stats->lastMemsetCount.load(), 1024u);
  mgpuMemset16(d, 7, 2048, stream);
  EXPECT_EQ(stats->memsets16.load(), 1);
  std::vector<char> host(4096);
  mgpuMemcpy(host.data(), d, 4096, stream);
  EXPECT_EQ(stats->lastMemcpyBytes.load(), 4096u);

  void *event = mgpuEventCreate();
  ASSERT_NE(event, nullptr);
  mgpuEventRecord(event, stream);
  mgpuStreamWaitEvent(stream, event);
  mgpuEventSynchronize(event);
  EXPECT_EQ(stats->eventRecords.load(), 1);
  EXPECT_EQ(stats->eventWaits.load(), 1);
  mgpuEventDestroy(event);
  EXPECT_EQ(stats->liveEvents.load(), 0);

  mgpuMemFree(d, stream);
  EXPECT_EQ(stats->liveAllocations.load(), 0);
  mgpuStreamDestroy(stream);

  mgpuSetDefaultDevice(0);
  EXPECT_EQ(currentContext(), primaryContext());
  mgpuSetDefaultDevice(5); // the fake has one device
  EXPECT_TRUE(mentions(lastError(), "mgpuSetDefaultDevice: cuDeviceGet(5)"));
}

// The caller's stream, handed over while it captures a CUDA graph: the
// lowered code's stream is that stream, its allocation and free become
// nodes of the graph, its synchronisation is skipped, and nothing breaks
// the capture.
TEST_F(RuntimeFakeUpstream, HandedStreamInsideACapture) {
  void *s = fakeAddress(0x7a);
  void *f = mgpuModuleGetFunction(const_cast<char *>(kImage), "norm_bwd");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(normrt_use_stream(s), NORMRT_SUCCESS);
  int created = stats->streamsCreated.load(), syncs = stats->streamSyncs.load();
  int allocs = stats->allocs.load();
  ASSERT_EQ(beginCapture(s, kGlobal), CUDA_SUCCESS);
  void *stream = mgpuStreamCreate();
  EXPECT_EQ(stream, s);
  void *d = mgpuMemAlloc(1 << 20, stream, false);
  ASSERT_NE(d, nullptr) << lastError();
  void *params[] = {&d};
  mgpuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, stream, params, nullptr, 1);
  mgpuMemFree(d, stream);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
  void *graph = nullptr;
  ASSERT_EQ(endCapture(s, &graph), CUDA_SUCCESS) << lastViolation();
  EXPECT_EQ(stats->streamsCreated.load(), created);
  EXPECT_EQ(stats->streamSyncs.load(), syncs);
  EXPECT_EQ(stats->allocs.load(), allocs);
  std::vector<FakeCudaNode> n = nodes(graph);
  ASSERT_EQ(n.size(), 3u);
  EXPECT_EQ(n[0].kind, FAKECUDA_NODE_ALLOC);
  EXPECT_EQ(n[1].kind, FAKECUDA_NODE_KERNEL);
  EXPECT_EQ(n[2].kind, FAKECUDA_NODE_FREE);
  EXPECT_EQ(graphLaunch(graph), CUDA_SUCCESS);
  EXPECT_EQ(graphUnfreed(graph), 0);
  // Handed back: streams of its own again, synchronised for real.
  ASSERT_EQ(normrt_use_stream(nullptr), NORMRT_SUCCESS);
  void *own = mgpuStreamCreate();
  EXPECT_NE(own, s);
  mgpuStreamSynchronize(own);
  EXPECT_EQ(stats->streamSyncs.load(), syncs + 1);
  mgpuStreamDestroy(own);
}

//===----------------------------------------------------------------------===//
// The host lowering's launch sequences (LaunchSequence.cpp): what the IR of
// --convert-norm-to-gpu-launch and of norm-opt compile's launchers calls.
//===----------------------------------------------------------------------===//

TEST_F(RuntimeFakeUpstream, LaunchSequenceKindsQueriesAndStream) {
  void *module = mgpuModuleLoad(const_cast<char *>(kImage), 0);
  void *stream = mgpuStreamCreate();
  ASSERT_NE(stream, nullptr) << lastError();
  ASSERT_EQ(normrt_ir_begin(stream), NORMRT_SUCCESS);
  // The sequence's stream is what lowered code's `gpu.wait async` gets,
  // and destroying it leaves it alone.
  EXPECT_EQ(mgpuStreamCreate(), stream);
  mgpuStreamDestroy(stream);
  EXPECT_GT(normrt_ir_sm_count(), 0);
  void *f = mgpuModuleGetFunction(module, "norm_bwd");
  ASSERT_NE(f, nullptr) << lastError();
  int value = 3;
  void *params[] = {&value};
  // An occupancy query launches nothing and answers.
  int launches = stats->launches.load();
  normrt_ir_next_launch(NORMRT_IR_QUERY_OCCUPANCY, 1);
  mgpuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, stream, params, nullptr, 1);
  EXPECT_EQ(stats->launches.load(), launches);
  EXPECT_GT(normrt_ir_query_result(), 0);
  normrt_ir_next_launch(NORMRT_IR_QUERY_COOPERATIVE_FITS, 1);
  mgpuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, stream, params, nullptr, 1);
  EXPECT_EQ(normrt_ir_query_result(), 1);
  // A cooperative launch, then a plain one (the kind lasts one launch),
  // then a programmatic dependent one, all on the sequence's stream.
  FakeCudaLaunch last;
  normrt_ir_next_launch(NORMRT_IR_LAUNCH_COOPERATIVE, 1);
  mgpuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, stream, params, nullptr, 1);
  lastLaunch(&last);
  EXPECT_EQ(last.cooperative, 1);
  EXPECT_EQ(last.stream, stream);
  mgpuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, stream, params, nullptr, 1);
  lastLaunch(&last);
  EXPECT_EQ(last.cooperative, 0);
  normrt_ir_next_launch(NORMRT_IR_LAUNCH_DEPENDENT, 1);
  mgpuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, stream, params, nullptr, 1);
  lastLaunch(&last);
  EXPECT_EQ(last.dependent, 1);
  EXPECT_EQ(stats->launches.load(), launches + 3);
  EXPECT_NE(normrt_ir_workspace(stream, 4096), nullptr);
  EXPECT_NE(normrt_ir_grid_barrier(stream), nullptr);
  EXPECT_EQ(normrt_ir_end(stream, 0), NORMRT_SUCCESS);
  // Outside a sequence mgpuStreamCreate makes streams again.
  void *other = mgpuStreamCreate();
  EXPECT_NE(other, stream);
  mgpuStreamDestroy(other);
  mgpuStreamDestroy(stream);
  EXPECT_EQ(stats->liveStreams.load(), 0);
}

TEST_F(RuntimeFakeUpstream, LaunchSequenceKeepsTheFirstFailure) {
  void *module = mgpuModuleLoad(const_cast<char *>(kImage), 0);
  int launches = stats->launches.load();
  ASSERT_EQ(normrt_ir_begin(nullptr), NORMRT_SUCCESS);
  normrt_ir_fail(NORMRT_ERROR_OUT_OF_RANGE, "f: cols must be 256 (static shape)");
  // Nothing after the failure runs: no context, lookup, launch or scratch,
  // and a later failure does not replace the message.
  EXPECT_EQ(normrt_ir_sm_count(), 0);
  EXPECT_EQ(mgpuModuleGetFunction(module, "norm_bwd"), nullptr);
  mgpuLaunchKernel(reinterpret_cast<void *>(1), 1, 1, 1, 32, 1, 1, 0, nullptr,
                   nullptr, nullptr, 0);
  EXPECT_EQ(normrt_ir_workspace(nullptr, 1024), nullptr);
  normrt_ir_check_aligned(reinterpret_cast<void *>(3), 4, "f: arg0");
  EXPECT_EQ(stats->launches.load(), launches);
  EXPECT_EQ(normrt_ir_end(nullptr, 0), NORMRT_ERROR_OUT_OF_RANGE);
  EXPECT_EQ(lastError(), "f: cols must be 256 (static shape)");
  // A misaligned pointer fails the sequence with normrt_check_aligned's
  // message.
  ASSERT_EQ(normrt_ir_begin(nullptr), NORMRT_SUCCESS);
  normrt_ir_check_aligned(reinterpret_cast<void *>(6), 4, "f: arg1");
  EXPECT_EQ(normrt_ir_end(nullptr, 0), NORMRT_ERROR_MISALIGNED);
  EXPECT_TRUE(mentions(lastError(), "f: arg1"));
}
