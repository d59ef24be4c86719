#===- NormTablegenJson.cmake - C++ generated from a .td's JSON dump --------===#
#
# Part of norm-opt. norm_tablegen_json(TARGET TD SCRIPT OUTPUT [ARGS...])
# runs `llvm-tblgen --dump-json` on TD (in the calling directory, with the
# project's and MLIR's include directories) and then
# `python3 SCRIPT <json> ARGS... OUTPUT`, writing OUTPUT in the binary
# directory; TARGET is the custom target that makes it. The generators
# (cmake/gen_pass_options.py, cmake/gen_plan_fields.py) write OUTPUT only
# when it changes.
#===----------------------------------------------------------------------===#
find_package(Python3 REQUIRED COMPONENTS Interpreter)

function(norm_tablegen_json target td script output)
  get_filename_component(stem ${td} NAME_WE)
  set(json ${CMAKE_CURRENT_BINARY_DIR}/${stem}.json)
  set(includes -I ${PROJECT_SOURCE_DIR}/include)
  foreach(dir IN LISTS MLIR_INCLUDE_DIRS)
    list(APPEND includes -I ${dir})
  endforeach()
  add_custom_command(
    OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/${output}
    COMMAND $<TARGET_FILE:llvm-tblgen> --dump-json ${includes}
            ${CMAKE_CURRENT_SOURCE_DIR}/${td} -o ${json}
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/cmake/${script}
            ${json} ${ARGN} ${CMAKE_CURRENT_BINARY_DIR}/${output}
    DEPENDS ${td} ${PROJECT_SOURCE_DIR}/cmake/${script}
            ${PROJECT_SOURCE_DIR}/cmake/gen_common.py
    COMMENT "Generating ${output} from ${td}")
  add_custom_target(${target} DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/${output})
endfunction()
