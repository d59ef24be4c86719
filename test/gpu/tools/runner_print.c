/* The printing entry points vector.print lowers to (the subset
 * libmlir_c_runner_utils provides), for programs linked without MLIR's
 * libraries: the GPU machine has none
 * (test/gpu/build_upstream_abi_check.sh). */
#include <inttypes.h>
#include <stdio.h>

void printI64(int64_t v) { printf("%" PRId64, v); }
void printU64(uint64_t v) { printf("%" PRIu64, v); }
void printF32(float v) { printf("%g", (double)v); }
void printF64(double v) { printf("%g", v); }
void printComma(void) { printf(", "); }
void printOpen(void) { printf("( "); }
void printClose(void) { printf(" )"); }
void printNewline(void) { printf("\n"); }
