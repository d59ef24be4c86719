/* The host of test/gpu/build_block_e2e.sh's program: managed memory for every
 * allocation (finalize-memref-to-llvm's generic functions and the inputs),
 * fresh random inputs from a seed, two calls of the lowered block backward
 * (_mlir_ciface_block_backward), and every input and result written as raw
 * little-endian f32 to DIR for test/gpu/block_e2e_check.py.
 *   block_e2e ROWS SEED DIR */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *mgpuMemAlloc(uint64_t bytes, void *stream, _Bool host_shared);
void mgpuMemFree(void *ptr, void *stream);

void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  return mgpuMemAlloc(bytes ? bytes : 1, NULL, 1);
}
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  (void)alignment; /* managed allocations are 4 KiB aligned */
  return mgpuMemAlloc(bytes ? bytes : 1, NULL, 1);
}
void _mlir_memref_to_llvm_free(void *ptr) { mgpuMemFree(ptr, NULL); }

typedef struct { float *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } M1;
typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } M2;
typedef struct { M2 dqx; M1 dweight, dqw, dqb; } Results;

void _mlir_ciface_block_backward(Results *out, M2 *g, M2 *w_down, M2 *x,
                                 M1 *rstd, M1 *weight, M2 *g_residual,
                                 M2 *w_up, M2 *q, M1 *q_mean, M1 *q_rstd,
                                 M1 *q_weight);

static uint64_t state;
static double uniform(void) { /* xorshift64* in (0, 1) */
  state ^= state >> 12; state ^= state << 25; state ^= state >> 27;
  return ((state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0) + 1e-17;
}
static float normal(void) {
  return (float)(sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()));
}
static float *fill(int64_t n, float scale, float shift, int positive) {
  float *p = mgpuMemAlloc(n * sizeof(float), NULL, 1);
  if (!p) { fprintf(stderr, "allocation failed\n"); exit(2); }
  for (int64_t i = 0; i < n; ++i) {
    float v = normal() * scale + shift;
    p[i] = positive ? fabsf(v) + 0.5f : v;
  }
  return p;
}
static M2 m2(float *p, int64_t r, int64_t c) { M2 m = {p, p, 0, {r, c}, {c, 1}}; return m; }
static M1 m1(float *p, int64_t n) { M1 m = {p, p, 0, {n}, {1}}; return m; }
static void dump(const char *dir, const char *name, const float *p, int64_t n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.f32", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, sizeof(float), n, f) != (size_t)n) { perror(path); exit(3); }
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: block_e2e ROWS SEED DIR\n"); return 1; }
  int64_t rows = atoll(argv[1]);
  state = 0x9e3779b97f4a7c15ull ^ (uint64_t)atoll(argv[2]);
  const char *dir = argv[3];
  float *g = fill(rows * 512, 1, 0, 0), *w_down = fill(512 * 256, 0.05f, 0, 0),
        *x = fill(rows * 256, 1, 0.1f, 0), *rstd = fill(rows, 0.5f, 0, 1),
        *weight = fill(256, 0.5f, 1, 0), *g_res = fill(rows * 256, 1, 0, 0),
        *w_up = fill(256 * 128, 0.05f, 0, 0), *q = fill(rows * 128, 1, 0.2f, 0),
        *q_mean = fill(rows, 0.1f, 0.2f, 0), *q_rstd = fill(rows, 0.5f, 0, 1),
        *q_weight = fill(128, 0.5f, 1, 0);
  M2 a_g = m2(g, rows, 512), a_wd = m2(w_down, 512, 256), a_x = m2(x, rows, 256),
     a_gr = m2(g_res, rows, 256), a_wu = m2(w_up, 256, 128), a_q = m2(q, rows, 128);
  M1 a_rstd = m1(rstd, rows), a_w = m1(weight, 256), a_qm = m1(q_mean, rows),
     a_qr = m1(q_rstd, rows), a_qw = m1(q_weight, 128);
  Results r[2];
  for (int call = 0; call < 2; ++call)
    _mlir_ciface_block_backward(&r[call], &a_g, &a_wd, &a_x, &a_rstd, &a_w,
                                &a_gr, &a_wu, &a_q, &a_qm, &a_qr, &a_qw);
  int same = memcmp(r[0].dqx.aligned, r[1].dqx.aligned, rows * 128 * 4) == 0 &&
             memcmp(r[0].dweight.aligned, r[1].dweight.aligned, 256 * 4) == 0 &&
             memcmp(r[0].dqw.aligned, r[1].dqw.aligned, 128 * 4) == 0 &&
             memcmp(r[0].dqb.aligned, r[1].dqb.aligned, 128 * 4) == 0;
  dump(dir, "g", g, rows * 512); dump(dir, "w_down", w_down, 512 * 256);
  dump(dir, "x", x, rows * 256); dump(dir, "rstd", rstd, rows);
  dump(dir, "weight", weight, 256); dump(dir, "g_residual", g_res, rows * 256);
  dump(dir, "w_up", w_up, 256 * 128); dump(dir, "q", q, rows * 128);
  dump(dir, "q_mean", q_mean, rows); dump(dir, "q_rstd", q_rstd, rows);
  dump(dir, "q_weight", q_weight, 128);
  dump(dir, "dqx", r[0].dqx.aligned, rows * 128);
  dump(dir, "dweight", r[0].dweight.aligned, 256);
  dump(dir, "dqw", r[0].dqw.aligned, 128);
  dump(dir, "dqb", r[0].dqb.aligned, 128);
  printf("rows=%lld bitwise_over_2_calls=%s\n", (long long)rows, same ? "yes" : "no");
  return 0;
}
