# The build enforces the layering (CMakeLists.txt "the layers"): run by
# CTest as layering.upward_include_fails with
#   cmake -DBUILD_DIR=<build> -DSOURCE_DIR=<source>
#         -DPUBLIC_HEADERS=<the installed headers> -P check.cmake
#
# 1. A tiers/ source including its own and a lower layer's headers builds
#    (kvtier_layering_down): the probes are set up right.
# 2. A tiers/ source including an actors/ header (kvtier_layering_tiers_up)
#    and a runtime/http/ source including the embedded API of the floor
#    above (kvtier_layering_http_up) fail, each because that header is not
#    found: with the layer views removed (the source tree on every include
#    path) they would build, and this test fails.
# 3. A relative include ("../x.hpp", or "x.hpp" beside the includer) would
#    step around the views: only the public headers use them (they are
#    installed without the source tree), and only towards each other.
cmake_minimum_required(VERSION 3.25)

function(build target out_rc out_log)
  execute_process(
    COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${target}
    RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
  set(${out_rc} ${rc} PARENT_SCOPE)
  set(${out_log} "${log}" PARENT_SCOPE)
endfunction()

build(kvtier_layering_down rc log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the probe of allowed includes failed to build:\n${log}")
endif()

foreach(probe "kvtier_layering_tiers_up;actors/interfaces.hpp"
    "kvtier_layering_http_up;runtime/service.hpp")
  list(GET probe 0 target)
  list(GET probe 1 header)
  build(${target} rc log)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${target} built: its layer could include "
      "${header}, a header of a layer above (the layering is not enforced)")
  endif()
  string(FIND "${log}" "${header}: No such file or directory" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${target} failed, but not because ${header} is "
      "outside its view:\n${log}")
  endif()
  message(STATUS "${target}: refused (${header} is outside its view)")
endforeach()

# The installed headers (CMakeLists.txt KVTIER_PUBLIC_HEADERS): they
# include each other relatively, as the installed tree lays them out.
set(public ${PUBLIC_HEADERS})
if(NOT public)
  message(FATAL_ERROR "PUBLIC_HEADERS is empty: pass the installed headers "
    "(-DPUBLIC_HEADERS=...)")
endif()
file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}
  ${SOURCE_DIR}/messages/*.?pp ${SOURCE_DIR}/tiers/*.?pp
  ${SOURCE_DIR}/actors/*.?pp ${SOURCE_DIR}/runtime/*.?pp)
set(bad "")
foreach(source ${sources})
  file(STRINGS ${SOURCE_DIR}/${source} lines REGEX "^#include \"")
  foreach(line ${lines})
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" rel "${line}")
    if(rel MATCHES "^(messages|tiers|actors|runtime)/")
      continue() # from the root: the views decide
    endif()
    get_filename_component(dir ${source} DIRECTORY)
    get_filename_component(to ${SOURCE_DIR}/${dir}/${rel} ABSOLUTE)
    file(RELATIVE_PATH to ${SOURCE_DIR} ${to})
    if(NOT source IN_LIST public OR NOT to IN_LIST public)
      string(APPEND bad "\n  ${source}: ${line}")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "relative includes outside the public headers (write "
    "them from the repository's root, \"layer/file.hpp\"):${bad}")
endif()
