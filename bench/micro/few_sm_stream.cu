// few_sm_stream.cu - how fast can a few SMs stream a small problem?
//
// The bound of issue 44's latency path (one thread-block cluster, at most
// 16 CTAs, so at most 16 SMs): a kernel that only reads x and dy and
// writes dx (16-byte accesses, every load of a thread issued before the
// first store) on G CTAs of 1024 threads, against the same on every SM.
// CUDA-graph replays after a 256 MB L2 flush (bench.py's protocol),
// median microseconds. If 16 CTAs alone take about as long as our whole
// kernel, a one-cluster kernel cannot be faster.
//
//   nvcc -O3 -arch=sm_90a -o few_sm_stream few_sm_stream.cu && ./few_sm_stream
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
  return 1; } } while (0)

// Each thread: U vectors of x and dy in flight, then U stores of dx.
template <int U>
__global__ void stream(const uint4 *x, const uint4 *dy, uint4 *dx, long n) {
  long stride = (long)gridDim.x * blockDim.x;
  for (long base = (long)blockIdx.x * blockDim.x + threadIdx.x; base < n;
       base += stride * U) {
    uint4 a[U], b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      long i = base + u * stride;
      if (i < n) { a[u] = x[i]; b[u] = dy[i]; }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      long i = base + u * stride;
      if (i < n)
        dx[i] = make_uint4(a[u].x ^ b[u].x, a[u].y ^ b[u].y, a[u].z ^ b[u].z,
                           a[u].w ^ b[u].w);
    }
  }
}

// Median microseconds of 50 replays of `ge`, each after the L2 flush (a
// 256 MB memset); -1 on a CUDA error.
static float medianReplay(cudaGraphExec_t ge, cudaStream_t s, char *flush) {
  std::vector<float> t;
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  for (int r = 0; r < 60; ++r) {
    if (cudaMemsetAsync(flush, r, 256 << 20, s) != cudaSuccess ||
        cudaEventRecord(a, s) != cudaSuccess ||
        cudaGraphLaunch(ge, s) != cudaSuccess ||
        cudaEventRecord(b, s) != cudaSuccess ||
        cudaEventSynchronize(b) != cudaSuccess) {
      printf("CUDA error: %s\n", cudaGetErrorString(cudaGetLastError()));
      return -1;
    }
    float ms; cudaEventElapsedTime(&ms, a, b);
    if (r >= 10) t.push_back(ms * 1e3f);
  }
  cudaEventDestroy(a); cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  char *flush;
  CHECK(cudaMalloc(&flush, 256 << 20));
  struct Shape { const char *name; long bytes; } shapes[] = {
      {"512x1024 bf16", 512L * 1024 * 2}, {"29x17389 bf16", 29L * 17392 * 2},
      {"512x1024 f32", 512L * 1024 * 4}, {"29x17389 f32", 29L * 17392 * 4},
      {"4096x1024 bf16", 4096L * 1024 * 2}};
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  printf("%-16s %8s %8s %8s %8s\n", "shape (x,dy,dx)", "grid", "us", "GB/s", "per SM");
  for (auto shape : shapes) {
    long n = shape.bytes / 16;
    uint4 *x, *dy, *dx;
    CHECK(cudaMalloc(&x, shape.bytes)); CHECK(cudaMalloc(&dy, shape.bytes));
    CHECK(cudaMalloc(&dx, shape.bytes));
    CHECK(cudaMemset(x, 1, shape.bytes)); CHECK(cudaMemset(dy, 2, shape.bytes));
    for (int grid : {8, 16, sms, 2 * sms}) {
      cudaGraph_t g; cudaGraphExec_t ge;
      CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      stream<4><<<grid, 1024, 0, s>>>(x, dy, dx, n);
      CHECK(cudaStreamEndCapture(s, &g));
      CHECK(cudaGraphInstantiate(&ge, g, 0));
      float us = medianReplay(ge, s, flush);
      if (us < 0) return 1;
      double gbs = 3.0 * shape.bytes / us / 1e3;
      printf("%-16s %8d %8.1f %8.0f %8.1f\n", shape.name, grid, us, gbs,
             gbs / std::min(grid, sms));
      cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
    }
    cudaFree(x); cudaFree(dy); cudaFree(dx);
  }
  // A graph of one empty kernel: the fixed cost every row above includes.
  {
    cudaGraph_t g; cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    stream<1><<<1, 32, 0, s>>>(nullptr, nullptr, nullptr, 0);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    float us = medianReplay(ge, s, flush);
    if (us < 0) return 1;
    printf("%-16s %8d %8.1f\n", "empty kernel", 1, us);
  }
  return 0;
}
