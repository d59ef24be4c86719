# cmake -P RuntimeLinkage.cmake: the runtime libraries do not link libcuda
# (it is dlopen'ed), and libnorm_runtime.so exports the C API alone.
#   -DSHARED=libnorm_runtime.so -DSTATIC=libnorm_runtime_static.a
#   -DNM=nm -DREADELF=readelf
cmake_minimum_required(VERSION 3.20)
foreach(var SHARED STATIC NM READELF)
  if(NOT ${var})
    message(FATAL_ERROR "RuntimeLinkage.cmake: -D${var}= is required")
  endif()
endforeach()

execute_process(COMMAND ${READELF} -d ${SHARED} OUTPUT_VARIABLE dynamic
  RESULT_VARIABLE rc)
if(rc OR NOT dynamic MATCHES "NEEDED")
  message(FATAL_ERROR "readelf -d ${SHARED} failed (${rc})")
endif()
if(dynamic MATCHES "libcuda|libMLIR|libLLVM")
  message(FATAL_ERROR "${SHARED} links libcuda, MLIR or LLVM:\n${dynamic}")
endif()

execute_process(COMMAND ${NM} -D --defined-only ${SHARED}
  OUTPUT_VARIABLE exported RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "nm -D ${SHARED} failed (${rc})")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${exported}")
set(api normrt_status_string normrt_last_error normrt_init
  normrt_ensure_context normrt_sm_count normrt_get_function normrt_workspace
  normrt_set_workspace normrt_set_capture_allocator normrt_launch
  normrt_launch_dependent
  normrt_check_aligned normrt_report
  normrt_max_active_ctas normrt_max_active_clusters normrt_cooperative_fits
  normrt_grid_barrier_word
  normrt_launch_cooperative normrt_scratch_done
  normrt_query_begin normrt_query_end
  normrt_release_all normrt_use_stream)
# The entry points upstream gpu-to-llvm calls (UpstreamABI.cpp), exported by
# the shared runtime only.
set(upstream mgpuModuleLoad mgpuModuleLoadJIT mgpuModuleUnload
  mgpuModuleGetFunction mgpuLaunchKernel mgpuLaunchClusterKernel
  mgpuStreamCreate mgpuStreamDestroy mgpuStreamSynchronize mgpuStreamWaitEvent
  mgpuEventCreate mgpuEventDestroy mgpuEventSynchronize mgpuEventRecord
  mgpuMemAlloc mgpuMemFree mgpuMemcpy mgpuMemset32 mgpuMemset16
  mgpuMemHostRegister mgpuMemHostUnregister mgpuMemHostRegisterMemRef
  mgpuMemHostUnregisterMemRef mgpuSetDefaultDevice)
list(APPEND api ${upstream})
set(found)
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^.* " "" symbol "${line}")
  if(NOT symbol MATCHES "^normrt_" AND NOT symbol IN_LIST upstream)
    message(FATAL_ERROR "${SHARED} exports '${symbol}', not part of the C API")
  endif()
  list(APPEND found ${symbol})
endforeach()
foreach(symbol IN LISTS api)
  if(NOT symbol IN_LIST found)
    message(FATAL_ERROR "${SHARED} does not export ${symbol}")
  endif()
endforeach()

foreach(library ${SHARED} ${STATIC})
  execute_process(COMMAND ${NM} -u ${library} OUTPUT_VARIABLE undefined
    RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "nm -u ${library} failed (${rc})")
  endif()
  if(undefined MATCHES "[ \n]cu[A-Z][A-Za-z_0-9]*")
    message(FATAL_ERROR "${library} references the driver symbol "
      "'${CMAKE_MATCH_0}' directly; it must go through dlsym")
  endif()
endforeach()
list(LENGTH found count)
message(STATUS
  "runtime linkage: OK (${count} C API symbols exported, no libcuda)")
