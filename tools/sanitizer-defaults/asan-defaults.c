/*===- asan-defaults.c - ASan defaults of the instrumented executables ---===*
 *
 * Part of norm-opt. Linked into norm-opt, norm-fuzz, the unit tests and the
 * C API test of a sanitizer build (LLVM_USE_SANITIZER, build-asan/): our
 * code is instrumented, Debian's libMLIR.so and libLLVM.so are not.
 *
 * allow_user_poisoning=0: llvm::BumpPtrAllocator (inline in the headers)
 * poisons each new slab and unpoisons each allocation, but only where it is
 * compiled with ASan. MLIR's attribute and type storage shares one
 * allocator between our instrumented code (e.g. KernelPlanAttr's storage)
 * and the uninstrumented libMLIR (e.g. StringAttr's): a slab our code
 * started stays poisoned under libMLIR's allocations, and ASan reports a
 * use-after-poison in memmove that is not one (the PTX tests hit it). The
 * rest of ASan (heap, stack, globals of our code) is unaffected.
 * detect_leaks=0: LLVM's and MLIR's registries are not freed at exit.
 * ASAN_OPTIONS in the environment still overrides both.
 *
 *===----------------------------------------------------------------------===*/

const char *__asan_default_options(void);

const char *__asan_default_options(void) {
  return "detect_leaks=0:allow_user_poisoning=0";
}
