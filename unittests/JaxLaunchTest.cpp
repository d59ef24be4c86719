//===- JaxLaunchTest.cpp - norm_opt.jax's FFI call, without XLA -----------===//
//
// _jax_launch.h is what the XLA FFI handlers (python/norm_opt/_jax_ffi.cc)
// run once XLA has decoded a call: the buffers' checks, one launch per vmap
// batch element with the pointers, rows, cols and row strides the launcher
// ABI takes, and the workspace set for the stream around the launches and
// reset after them, failure or not. A fake launcher records each call. The
// handlers themselves, with XLA, run in test/gpu/jax_check.py.
//
//===----------------------------------------------------------------------===//

#include "_jax_launch.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace {

using norm_opt_jax::Buffer;
using norm_opt_jax::Kernel;
using norm_opt_jax::Kind;

struct Launch {
  std::vector<const void *> pointers;
  int64_t rows, cols, strideDy, strideX, strideDx;
  void *stream;
};

std::vector<Launch> gLaunches;
std::vector<std::pair<void *, size_t>> gWorkspaces;
int gStatus = 0;

int layerLauncher(const void *dy, const void *x, const void *mean,
                  const void *rstd, const void *w, const void *b, void *dx,
                  void *dw, void *db, int64_t rows, int64_t cols, int64_t sdy,
                  int64_t sx, int64_t sdx, void *stream) {
  gLaunches.push_back({{dy, x, mean, rstd, w, b, dx, dw, db}, rows, cols, sdy,
                       sx, sdx, stream});
  return gStatus;
}

int rmsLauncher(const void *dy, const void *x, const void *rstd,
                const void *w, void *dx, void *dw, int64_t rows, int64_t cols,
                int64_t sdy, int64_t sx, int64_t sdx, void *stream) {
  gLaunches.push_back(
      {{dy, x, rstd, w, dx, dw}, rows, cols, sdy, sx, sdx, stream});
  return gStatus;
}

int setWorkspace(void *, void *ptr, size_t bytes) {
  gWorkspaces.emplace_back(ptr, bytes);
  return 0;
}

const char *lastError() { return "the fake launcher failed"; }

char *at(uintptr_t address) { return reinterpret_cast<char *>(address); }

// A call's buffers: dims kept alive beside the Buffer views.
struct Call {
  std::vector<std::vector<int64_t>> dims;
  std::vector<Buffer> ins, outs;
  void add(std::vector<Buffer> &into, uintptr_t address,
           std::vector<int64_t> d, int bytes) {
    dims.push_back(std::move(d));
    into.push_back(Buffer{at(address), nullptr, dims.back().size(), bytes});
  }
  void bind() { // dims' storage is final now
    size_t i = 0;
    for (auto *list : {&ins, &outs})
      for (Buffer &b : *list)
        b.dims = dims[i++].data();
  }
};

Kernel kernel(Kind kind, int64_t n, int xBytes, int wBytes) {
  Kernel k;
  k.kind = kind;
  k.n = n;
  k.xBytes = xBytes;
  k.wBytes = wBytes;
  k.launcher = kind == Kind::Layer ? reinterpret_cast<void *>(&layerLauncher)
                                   : reinterpret_cast<void *>(&rmsLauncher);
  k.setWorkspace = &setWorkspace;
  k.lastError = &lastError;
  return k;
}

// A LayerNorm call over x [batch, rows, n] (vmap's batch dim in front,
// x_rank 2), bf16 activations, f32 weight.
Call layerCall(int64_t batch, int64_t rows, int64_t n) {
  Call c;
  c.dims.reserve(9);
  c.add(c.ins, 0x10000, {batch, rows, n}, 2);   // dy
  c.add(c.ins, 0x20000, {batch, rows, n}, 2);   // x
  c.add(c.ins, 0x30000, {batch, rows}, 4);      // mean
  c.add(c.ins, 0x40000, {batch, rows}, 4);      // rstd
  c.add(c.ins, 0x50000, {batch, n}, 4);         // w
  c.add(c.outs, 0x60000, {batch, rows, n}, 2);  // dx
  c.add(c.outs, 0x70000, {batch, n}, 4);        // dw
  c.add(c.outs, 0x80000, {batch, n}, 4);        // db
  c.add(c.outs, 0x90000, {batch, 256}, 1);      // workspace
  c.bind();
  return c;
}

class JaxLaunch : public ::testing::Test {
protected:
  void SetUp() override {
    gLaunches.clear();
    gWorkspaces.clear();
    gStatus = 0;
  }
  std::string run(const Kernel &k, int64_t xRank, const Call &c) {
    return norm_opt_jax::launch(k, xRank, c.ins.data(), c.ins.size(),
                                c.outs.data(), c.outs.size(), at(0x5));
  }
};

TEST_F(JaxLaunch, OneLaunchPerBatchElement) {
  Call c = layerCall(3, 4, 8);
  EXPECT_EQ(run(kernel(Kind::Layer, 8, 2, 4), 2, c), "");
  ASSERT_EQ(gLaunches.size(), 3u);
  for (int b = 0; b < 3; ++b) {
    const Launch &l = gLaunches[b];
    EXPECT_EQ(l.rows, 4);
    EXPECT_EQ(l.cols, 8);
    EXPECT_EQ(l.strideDy, 8);
    EXPECT_EQ(l.strideX, 8);
    EXPECT_EQ(l.strideDx, 8);
    EXPECT_EQ(l.stream, at(0x5));
    EXPECT_EQ(l.pointers[0], at(0x10000 + b * 4 * 8 * 2)); // dy
    EXPECT_EQ(l.pointers[1], at(0x20000 + b * 4 * 8 * 2)); // x
    EXPECT_EQ(l.pointers[2], at(0x30000 + b * 4 * 4));     // mean
    EXPECT_EQ(l.pointers[3], at(0x40000 + b * 4 * 4));     // rstd
    EXPECT_EQ(l.pointers[4], at(0x50000 + b * 8 * 4));     // w
    EXPECT_EQ(l.pointers[5], l.pointers[4]); // the unread bias slot
    EXPECT_EQ(l.pointers[6], at(0x60000 + b * 4 * 8 * 2)); // dx
    EXPECT_EQ(l.pointers[7], at(0x70000 + b * 8 * 4));     // dw: its own
    EXPECT_EQ(l.pointers[8], at(0x80000 + b * 8 * 4));     // db
  }
  // One element's workspace slice, set before and reset after.
  ASSERT_EQ(gWorkspaces.size(), 2u);
  EXPECT_EQ(gWorkspaces[0], std::make_pair(static_cast<void *>(at(0x90000)),
                                           static_cast<size_t>(256)));
  EXPECT_EQ(gWorkspaces[1],
            std::make_pair(static_cast<void *>(nullptr), static_cast<size_t>(0)));
}

TEST_F(JaxLaunch, RowsFoldLeadingDims) {
  // RMSNorm over x [2, 3, 16] without vmap (x_rank 3): one launch, 6 rows.
  Call c;
  c.dims.reserve(7);
  c.add(c.ins, 0x1000, {2, 3, 16}, 4);
  c.add(c.ins, 0x2000, {2, 3, 16}, 4);
  c.add(c.ins, 0x3000, {2, 3}, 4);
  c.add(c.ins, 0x4000, {16}, 4);
  c.add(c.outs, 0x5000, {2, 3, 16}, 4);
  c.add(c.outs, 0x6000, {16}, 4);
  c.add(c.outs, 0x7000, {16}, 1);
  c.bind();
  EXPECT_EQ(run(kernel(Kind::Rms, 16, 4, 4), 3, c), "");
  ASSERT_EQ(gLaunches.size(), 1u);
  EXPECT_EQ(gLaunches[0].rows, 6);
  EXPECT_EQ(gLaunches[0].cols, 16);
  EXPECT_EQ(gLaunches[0].pointers.size(), 6u);
  EXPECT_EQ(gLaunches[0].pointers[5], at(0x6000));
}

TEST_F(JaxLaunch, RejectsBuffersThatDoNotFit) {
  struct Bad {
    const char *what;
    std::function<void(Call &)> change;
    int64_t xRank;
    const char *message;
  };
  std::vector<Bad> bad = {
      {"x_rank over x's rank", [](Call &) {}, 4, "x_rank 4 does not fit"},
      {"hidden size", [](Call &c) { c.dims[1][2] = 9; c.bind(); }, 2,
       "kernel was compiled for 8"},
      {"dy shape", [](Call &c) { c.dims[0][1] = 5; c.bind(); }, 2,
       "dy [3, 5, 8] must have x's shape"},
      {"statistics", [](Call &c) { c.dims[3][1] = 5; c.bind(); }, 2,
       "the statistics [3, 5]"},
      {"weight dtype", [](Call &c) { c.ins[4].elementBytes = 2; }, 2,
       "w [3, 8] (2-byte elements) does not fit"},
      {"dw length", [](Call &c) { c.dims[6][1] = 7; c.bind(); }, 2,
       "dw [3, 7] must end in N = 8"},
      {"misaligned workspace",
       [](Call &c) { c.outs[3].data = at(0x90004); }, 2,
       "16-byte aligned uint8"},
  };
  for (const Bad &b : bad) {
    SCOPED_TRACE(b.what);
    Call c = layerCall(3, 4, 8);
    b.change(c);
    std::string message = run(kernel(Kind::Layer, 8, 2, 4), b.xRank, c);
    EXPECT_NE(message.find(b.message), std::string::npos) << message;
  }
  EXPECT_TRUE(gLaunches.empty());
  EXPECT_TRUE(gWorkspaces.empty());
  Call c = layerCall(1, 4, 8);
  EXPECT_NE(norm_opt_jax::launch(kernel(Kind::Layer, 8, 2, 4), 2,
                                 c.ins.data(), 4, c.outs.data(), 4, nullptr)
                .find("expected 5 operands and 4 results"),
            std::string::npos);
}

TEST_F(JaxLaunch, FailureStopsAndResetsTheWorkspace) {
  gStatus = 7;
  Call c = layerCall(3, 4, 8);
  std::string message = run(kernel(Kind::Layer, 8, 2, 4), 2, c);
  EXPECT_NE(message.find("layer_norm_backward failed with status 7: the "
                         "fake launcher failed"),
            std::string::npos)
      << message;
  EXPECT_EQ(gLaunches.size(), 1u); // the later elements are not launched
  ASSERT_EQ(gWorkspaces.size(), 2u);
  EXPECT_EQ(gWorkspaces[1].first, nullptr);
}

} // namespace
