# `cmake --install build --component debug`: the library's debug info,
# apart from the stripped library, where gdb looks it up by build id:
# <prefix>/lib/debug/.build-id/NN/REST.debug (gdb: `set debug-file-directory
# <prefix>/lib/debug`; Debian's own -dbgsym packages use the same layout
# under /usr/lib/debug). Set by the CODE rule before this script:
# KVTIER_DEBUG_SOURCE (the built library), KVTIER_OBJCOPY, KVTIER_DEBUG_DIR.
execute_process(COMMAND readelf -n ${KVTIER_DEBUG_SOURCE}
  OUTPUT_VARIABLE notes RESULT_VARIABLE rc)
string(REGEX MATCH "Build ID: ([0-9a-f]+)" found "${notes}")
if(NOT rc EQUAL 0 OR NOT found)
  message(FATAL_ERROR "kvtier debug info: no build id in ${KVTIER_DEBUG_SOURCE}")
endif()
set(id ${CMAKE_MATCH_1})
string(SUBSTRING ${id} 0 2 head)
string(SUBSTRING ${id} 2 -1 rest)
set(dir "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${KVTIER_DEBUG_DIR}/.build-id/${head}")
file(MAKE_DIRECTORY ${dir})
message(STATUS "Installing: ${dir}/${rest}.debug")
execute_process(COMMAND ${KVTIER_OBJCOPY} --only-keep-debug
  ${KVTIER_DEBUG_SOURCE} ${dir}/${rest}.debug RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvtier debug info: objcopy failed")
endif()
