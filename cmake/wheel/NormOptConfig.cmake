# NormOptConfig.cmake of the Python wheel (scripts/dev.sh wheel): what a C or
# C++ host takes from an installed `norm_opt` package, with no LLVM on the
# machine. `python3 -m norm_opt --cmake-dir` prints this folder:
#   cmake -DNormOpt_DIR=$(python3 -m norm_opt --cmake-dir) ...
# Provides
#   NormOpt::norm-opt            the self-contained compiler (imported executable)
#   NormOpt::NormRuntime         libnorm_runtime.so (C ABI, include/norm/Runtime)
#   NormOpt::NormRuntimeStatic   libnorm_runtime_static.a (PIC)
#   NORM_OPT_EXECUTABLE, NORM_OPT_INCLUDE_DIRS
#   norm_opt_add_kernel_library(NAME SOURCE file.mlir [CHIP sm_90a]
#                               [OPTIONS --flag=value...])
#     compiles SOURCE with `norm-opt compile --emit=lib` at build time into
#     the shared library target NAME, whose header lib<NAME>.h is on its
#     include path.
# The MLIR libraries (NormOpt::NormRegistration and the rest) are not in the
# wheel: a host compiler on MLIR takes the install tree of a norm-opt build.
get_filename_component(_norm_opt_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

set(NORM_OPT_EXECUTABLE "${_norm_opt_prefix}/bin/norm-opt")
set(NORM_OPT_INCLUDE_DIRS "${_norm_opt_prefix}/include")
if(NOT TARGET NormOpt::norm-opt)
  add_executable(NormOpt::norm-opt IMPORTED)
  set_target_properties(NormOpt::norm-opt PROPERTIES
    IMPORTED_LOCATION "${NORM_OPT_EXECUTABLE}")
  add_library(NormOpt::NormRuntime SHARED IMPORTED)
  set_target_properties(NormOpt::NormRuntime PROPERTIES
    IMPORTED_LOCATION "${_norm_opt_prefix}/lib/libnorm_runtime.so"
    INTERFACE_INCLUDE_DIRECTORIES "${NORM_OPT_INCLUDE_DIRS}")
  add_library(NormOpt::NormRuntimeStatic STATIC IMPORTED)
  set_target_properties(NormOpt::NormRuntimeStatic PROPERTIES
    IMPORTED_LOCATION "${_norm_opt_prefix}/lib/libnorm_runtime_static.a"
    INTERFACE_INCLUDE_DIRECTORIES "${NORM_OPT_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "dl;pthread;stdc++")
endif()

function(norm_opt_add_kernel_library name)
  cmake_parse_arguments(ARG "" "SOURCE;CHIP" "OPTIONS" ${ARGN})
  if(NOT ARG_SOURCE)
    message(FATAL_ERROR "norm_opt_add_kernel_library(${name}): SOURCE is required")
  endif()
  if(NOT ARG_CHIP)
    set(ARG_CHIP sm_90a)
  endif()
  get_filename_component(source "${ARG_SOURCE}" ABSOLUTE)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/${name}")
  set(lib "${dir}/lib${name}.so")
  file(MAKE_DIRECTORY "${dir}")  # the include path exists before the build
  add_custom_command(
    OUTPUT "${lib}" "${dir}/lib${name}.h" "${dir}/lib${name}.json"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
    COMMAND NormOpt::norm-opt compile "${source}" --chip=${ARG_CHIP}
            --emit=lib -o "${lib}" ${ARG_OPTIONS}
    DEPENDS "${source}"
    COMMENT "norm-opt compile ${ARG_SOURCE} (${ARG_CHIP})"
    VERBATIM)
  add_custom_target(${name}_compile DEPENDS "${lib}")
  add_library(${name} SHARED IMPORTED GLOBAL)
  set_target_properties(${name} PROPERTIES
    IMPORTED_LOCATION "${lib}"
    IMPORTED_NO_SONAME ON
    INTERFACE_INCLUDE_DIRECTORIES "${dir}")
  add_dependencies(${name} ${name}_compile)
endfunction()

unset(_norm_opt_prefix)
