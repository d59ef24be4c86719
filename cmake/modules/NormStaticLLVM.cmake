#===- NormStaticLLVM.cmake - LLVM/MLIR linked in: the wheel's norm-opt ----===#
#
# Debian's MLIR archives (libMLIR*.a) are exported as linking the LLVM dylib
# (libLLVM.so): Debian builds LLVM with LLVM_LINK_LLVM_DYLIB. For a norm-opt
# that runs where no LLVM is installed (the Python wheel, docs/embedding.md
# "The wheel"), every MLIR archive links the static LLVM components instead
# (the imported target NormStaticLLVM), and LLVMSupport links zlib and zstd
# statically and Z3 not at all. Only what the tools reference is pulled out
# of the archives: the targets are NVPTX (the kernels) and the host's (the
# launchers `--emit=lib` compiles in process); a reference to any other
# target fails the link, so none slips in. libstdc++ and libgcc are linked
# statically.
#
# Two uses:
#  * -DNORM_OPT_STATIC_LLVM=ON: the whole build links this way (norm-opt,
#    the C API, the runtime), as a packager would build it;
#  * otherwise (the shared-library build), the target
#    norm-opt-self-contained links the same objects as norm-opt this way:
#    scripts/dev.sh wheel takes it, so CI compiles the project once.
# Sets NORM_STATIC_LLVM_AVAILABLE, and NORM_STATIC_EXE_LINK_OPTIONS for a
# self-contained executable.
#===----------------------------------------------------------------------===#

set(NORM_STATIC_LLVM_AVAILABLE OFF)
function(norm_static_llvm_missing what)
  if(NORM_OPT_STATIC_LLVM)
    message(FATAL_ERROR "NORM_OPT_STATIC_LLVM: ${what}")
  endif()
  message(STATUS "norm-opt-self-contained (the wheel's norm-opt) left out: ${what}")
endfunction()

# The archives it needs besides LLVM's: zlib and zstd (Debian: zlib1g-dev,
# libzstd-dev), and lld for the size of the executable.
find_library(NORM_ZLIB_STATIC NAMES libz.a)
find_library(NORM_ZSTD_STATIC NAMES libzstd.a)
find_program(NORM_LLD ld.lld HINTS "${LLVM_TOOLS_BINARY_DIR}" NO_DEFAULT_PATH)
if(NOT EXISTS "${LLVM_LIBRARY_DIR}/libLLVMSupport.a" OR
   NOT EXISTS "${LLVM_LIBRARY_DIR}/libMLIRIR.a")
  norm_static_llvm_missing("no static LLVM/MLIR archives in ${LLVM_LIBRARY_DIR}")
  return()
elseif(NOT NORM_ZLIB_STATIC OR NOT NORM_ZSTD_STATIC)
  norm_static_llvm_missing("needs libz.a and libzstd.a (apt-get install zlib1g-dev libzstd-dev)")
  return()
elseif(NOT NORM_LLD)
  norm_static_llvm_missing("links with lld: ld.lld not in ${LLVM_TOOLS_BINARY_DIR} (apt-get install lld-22)")
  return()
endif()
set(NORM_STATIC_LLVM_AVAILABLE ON)

# Every static LLVM component (LLVMConfig's LLVM_AVAILABLE_LIBS) but the
# targets other than NVPTX and the host.
set(norm_llvm_all ${LLVM_AVAILABLE_LIBS})
set(norm_llvm_targets_kept NVPTX ${LLVM_NATIVE_ARCH})
set(norm_llvm_static_libs)
foreach(lib IN LISTS norm_llvm_all)
  set(keep ON)
  foreach(target IN LISTS LLVM_TARGETS_TO_BUILD)
    if(NOT target IN_LIST norm_llvm_targets_kept AND lib MATCHES "^LLVM${target}")
      set(keep OFF)
    endif()
  endforeach()
  # Not components a compiler of ours links: the dylib, tools' own
  # libraries, and those that need libraries outside glibc (libcurl, libedit,
  # libxml2) or are JITs and debuggers.
  if(lib MATCHES "^(LLVM|LTO|Remarks|Polly)$|^LLVM(TableGen|Exegesis|LTO|BOLT|Debuginfod|LineEditor|Windows|LibDriver|DlltoolDriver|OptDriver|Fuzz|CFIVerify|Diff|MCA|DWP|DWARFCFIChecker|DWARFLinker|XRay|Telemetry|SupportLSP|Interpreter|MCJIT|OrcJIT|OrcDebugging|JITLink|PerfJITEvents|ExecutionEngine|RuntimeDyld|ObjCopy|InterfaceStub|DebugInfoLogicalView|FileCheck)")
    set(keep OFF)
  endif()
  if(keep AND TARGET ${lib})
    list(APPEND norm_llvm_static_libs ${lib})
  endif()
endforeach()
add_library(NormStaticLLVM INTERFACE IMPORTED)
set_target_properties(NormStaticLLVM PROPERTIES
  INTERFACE_LINK_LIBRARIES "${norm_llvm_static_libs}")

# The MLIR archives: libLLVM.so -> the static components. (A shared-library
# build links libMLIR.so, not these imported archives: nothing of it changes.)
get_property(norm_mlir_libs GLOBAL PROPERTY MLIR_ALL_LIBS)
foreach(lib IN LISTS norm_mlir_libs)
  if(NOT TARGET ${lib})
    continue()
  endif()
  get_target_property(type ${lib} TYPE)
  if(NOT type STREQUAL "STATIC_LIBRARY")
    continue()
  endif()
  get_target_property(deps ${lib} INTERFACE_LINK_LIBRARIES)
  if(NOT deps)
    continue()
  endif()
  list(TRANSFORM deps REPLACE "^LLVM$" "NormStaticLLVM")
  list(TRANSFORM deps REPLACE "^\\$<LINK_ONLY:LLVM>$" "$<LINK_ONLY:NormStaticLLVM>")
  set_target_properties(${lib} PROPERTIES INTERFACE_LINK_LIBRARIES "${deps}")
endforeach()

# LLVMExtensions (linked by LLVMLTO and the like) names Polly, whose archive
# Debian does not ship: no static plugin is linked in.
if(TARGET LLVMExtensions)
  set_target_properties(LLVMExtensions PROPERTIES INTERFACE_LINK_LIBRARIES LLVMSupport)
endif()

# LLVMSupport: no Z3 (only the static analyzer's solver uses it), zlib and
# zstd from their archives.
get_target_property(deps LLVMSupport INTERFACE_LINK_LIBRARIES)
list(FILTER deps EXCLUDE REGEX "z3")
list(TRANSFORM deps REPLACE "^ZLIB::ZLIB$" "${NORM_ZLIB_STATIC}")
list(TRANSFORM deps REPLACE "^zstd::libzstd_(shared|static)$" "${NORM_ZSTD_STATIC}")
set_target_properties(LLVMSupport PROPERTIES INTERFACE_LINK_LIBRARIES "${deps}")

# A self-contained executable: the C++ runtime inside, nothing linked that is
# not needed (libz3, libxml2 and the like must not appear as NEEDED), and
# its size (docs/embedding.md, "The wheel"): lld folds identical functions
# (--icf=all: 72.7 -> 58.8 MB stripped; the archives' address-significance
# tables are gone, so --icf=safe folds nothing), and a position-dependent
# executable has no dynamic relocations (2.7 MB).
get_filename_component(norm_lld_dir "${NORM_LLD}" DIRECTORY)
set(NORM_STATIC_EXE_LINK_OPTIONS -static-libstdc++ -static-libgcc
    LINKER:--as-needed LINKER:--gc-sections
    -B${norm_lld_dir} -fuse-ld=lld LINKER:--icf=all -no-pie)

if(NORM_OPT_STATIC_LLVM)
  # The whole build: our libraries' LINK_COMPONENTS and MLIR libraries name
  # the static archives, every binary carries libstdc++, and shared
  # libraries keep the archives' symbols to themselves.
  set(MLIR_LINK_MLIR_DYLIB OFF)
  set(LLVM_LINK_LLVM_DYLIB OFF)
  add_link_options(-static-libstdc++ -static-libgcc LINKER:--as-needed)
  set(CMAKE_SHARED_LINKER_FLAGS "${CMAKE_SHARED_LINKER_FLAGS} -Wl,--exclude-libs,ALL")
endif()
message(STATUS "Static LLVM/MLIR for the self-contained norm-opt (targets: "
               "${norm_llvm_targets_kept}; lld: ${NORM_LLD})")
