#===- NormStaticLLVM.cmake - a self-contained norm-opt (-DNORM_OPT_STATIC_LLVM=ON)
#
# Debian's MLIR archives (libMLIR*.a) are exported as linking the LLVM dylib
# (libLLVM.so): Debian builds LLVM with LLVM_LINK_LLVM_DYLIB. For a norm-opt
# that runs where no LLVM is installed (the Python wheel, docs/embedding.md
# "The wheel"), every MLIR archive links the static LLVM components instead,
# and LLVMSupport links zlib and zstd statically and Z3 not at all. Only what
# the tools reference is pulled out of the archives: the targets are NVPTX
# (the kernels) and the host's (the launchers `--emit=lib` compiles in
# process); a reference to any other target fails the link, so none slips in.
# libstdc++ and libgcc are linked statically, and shared libraries keep those
# archives' symbols local (--exclude-libs), so a process that loads its own
# libstdc++ (torch) does not bind to ours.
#===----------------------------------------------------------------------===#

set(MLIR_LINK_MLIR_DYLIB OFF)
set(LLVM_LINK_LLVM_DYLIB OFF)

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

# The MLIR archives: libLLVM.so -> the static components.
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
# zstd from their archives (Debian: zlib1g-dev, libzstd-dev).
find_library(NORM_ZLIB_STATIC NAMES libz.a)
find_library(NORM_ZSTD_STATIC NAMES libzstd.a)
if(NOT NORM_ZLIB_STATIC OR NOT NORM_ZSTD_STATIC)
  message(FATAL_ERROR "NORM_OPT_STATIC_LLVM needs libz.a and libzstd.a "
                      "(apt-get install zlib1g-dev libzstd-dev)")
endif()
get_target_property(deps LLVMSupport INTERFACE_LINK_LIBRARIES)
list(FILTER deps EXCLUDE REGEX "z3")
list(TRANSFORM deps REPLACE "^ZLIB::ZLIB$" "${NORM_ZLIB_STATIC}")
list(TRANSFORM deps REPLACE "^zstd::libzstd_(shared|static)$" "${NORM_ZSTD_STATIC}")
set_target_properties(LLVMSupport PROPERTIES INTERFACE_LINK_LIBRARIES "${deps}")

# The C++ runtime inside; nothing linked that is not needed (libz3, libxml2
# and the like must not appear as NEEDED entries).
add_link_options(-static-libstdc++ -static-libgcc LINKER:--as-needed)

# The size of the executable (docs/embedding.md, "The wheel"): LLVM's lld
# folds identical functions (--icf=all: 72.7 -> 59.0 MB stripped; the
# archives' address-significance tables are gone, so --icf=safe folds
# nothing), and a position-dependent executable has no dynamic relocations
# (2.7 MB). lld-22 comes with the LLVM packages (apt-get install lld-22).
find_program(NORM_LLD ld.lld HINTS "${LLVM_TOOLS_BINARY_DIR}" NO_DEFAULT_PATH)
if(NOT NORM_LLD)
  message(FATAL_ERROR "NORM_OPT_STATIC_LLVM links with lld: ld.lld not found in "
                      "${LLVM_TOOLS_BINARY_DIR} (apt-get install lld-22)")
endif()
get_filename_component(norm_lld_dir "${NORM_LLD}" DIRECTORY)
set(NORM_STATIC_EXE_LINK_OPTIONS -B${norm_lld_dir} -fuse-ld=lld
    LINKER:--icf=all -no-pie)
# Shared libraries keep the static archives' symbols to themselves.
set(CMAKE_SHARED_LINKER_FLAGS "${CMAKE_SHARED_LINKER_FLAGS} -Wl,--exclude-libs,ALL")
message(STATUS "NORM_OPT_STATIC_LLVM: static LLVM/MLIR (targets: "
               "${norm_llvm_targets_kept}), static libstdc++ and libgcc")
