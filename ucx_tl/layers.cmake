# The layers of the transport and the one direction of their dependencies.
# A folder of ucx_tl/ may include headers of, and its targets may link, only
# the folders its rule names: the core and the pacing library name nothing
# above them, a device names neither the other device nor the C API that
# wires the devices together.
#
# Included by ucx_tl/CMakeLists.txt (checks at configure time, writes the
# targets' links for the test) and run as a script by the doorbell_layers
# test (tests/layers/), which checks the sources as they are now:
#   cmake -DDOORBELL_TL_DIR=<ucx_tl> -DDOORBELL_LAYER_LINKS=<file> -P layers.cmake

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)
endif()

# Each folder of ucx_tl/: the folders it may use (DOORBELL_LAYER_ALLOWS_<folder>)
# and the targets it builds (DOORBELL_LAYER_TARGETS_<folder>).
set(DOORBELL_LAYERS core pacing devices/udp devices/verbs api gpu sim uct bench)
set(DOORBELL_LAYER_ALLOWS_core "")
set(DOORBELL_LAYER_ALLOWS_pacing "")
set(DOORBELL_LAYER_ALLOWS_devices/udp core pacing)
set(DOORBELL_LAYER_ALLOWS_devices/verbs core pacing)
set(DOORBELL_LAYER_ALLOWS_api core pacing devices/udp devices/verbs)
set(DOORBELL_LAYER_ALLOWS_gpu core api)
set(DOORBELL_LAYER_ALLOWS_sim pacing)
set(DOORBELL_LAYER_ALLOWS_uct core api pacing)
set(DOORBELL_LAYER_ALLOWS_bench "")
set(DOORBELL_LAYER_TARGETS_core doorbell_iface_core)
set(DOORBELL_LAYER_TARGETS_pacing doorbell_pacing)
set(DOORBELL_LAYER_TARGETS_devices/udp doorbell_udp)
set(DOORBELL_LAYER_TARGETS_devices/verbs doorbell_verbs)
set(DOORBELL_LAYER_TARGETS_api doorbell_core)
set(DOORBELL_LAYER_TARGETS_gpu doorbell_gpu doorbell_gpu_core doorbell_gpu_cuda)
set(DOORBELL_LAYER_TARGETS_sim doorbell_sim)
set(DOORBELL_LAYER_TARGETS_uct uct_doorbell)
set(DOORBELL_LAYER_TARGETS_bench "")

# The layer a header belongs to, seen from a file of layer `from` in folder
# `dir`: a path spelled from ucx_tl/ ("devices/udp/wire.h"), a file beside
# the includer, or a bare name found in exactly one layer's folder (the
# include directories make those resolve). "" for headers outside ucx_tl/.
function(doorbell_layer_of_include tl_dir from dir header out)
  set(_layer "")
  foreach(l IN LISTS DOORBELL_LAYERS)
    if(header MATCHES "^${l}/")
      set(_layer ${l})
    endif()
  endforeach()
  if(_layer STREQUAL "" AND EXISTS "${dir}/${header}")
    set(_layer ${from})
  endif()
  if(_layer STREQUAL "")
    foreach(l IN LISTS DOORBELL_LAYERS)
      if(EXISTS "${tl_dir}/${l}/${header}")
        list(APPEND _layer ${l})
      endif()
    endforeach()
    list(LENGTH _layer _n)
    if(_n GREATER 1)
      list(FIND _layer ${from} _own)
      if(_own GREATER -1)
        set(_layer ${from})
      else()
        list(GET _layer 0 _layer)
      endif()
    endif()
  endif()
  set(${out} "${_layer}" PARENT_SCOPE)
endfunction()

# "core, pacing" (or "nothing"): what a layer may use, for messages.
function(doorbell_layer_allowed_text layer out)
  string(REPLACE ";" ", " _text "${DOORBELL_LAYER_ALLOWS_${layer}}")
  if(_text STREQUAL "")
    set(_text "nothing")
  endif()
  set(${out} "${_text}" PARENT_SCOPE)
endfunction()

# Appends to `out` one line per include of a layer that `layer` may not use.
function(doorbell_check_layer_includes tl_dir layer out)
  set(_inc_bad "")
  file(GLOB_RECURSE _files LIST_DIRECTORIES false
    "${tl_dir}/${layer}/*.h" "${tl_dir}/${layer}/*.c" "${tl_dir}/${layer}/*.cc"
    "${tl_dir}/${layer}/*.cu" "${tl_dir}/${layer}/*.cuh")
  foreach(f IN LISTS _files)
    # a file of a nested layer (devices/udp inside devices) is checked there
    file(RELATIVE_PATH _rel "${tl_dir}" "${f}")
    set(_owner ${layer})
    foreach(l IN LISTS DOORBELL_LAYERS)
      string(LENGTH "${l}" _len)
      string(LENGTH "${_owner}" _olen)
      if(_rel MATCHES "^${l}/" AND _len GREATER _olen)
        set(_owner ${l})
      endif()
    endforeach()
    if(NOT _owner STREQUAL layer)
      continue()
    endif()
    get_filename_component(_dir "${f}" DIRECTORY)
    file(STRINGS "${f}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS _lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" _hdr "${line}")
      doorbell_layer_of_include("${tl_dir}" ${layer} "${_dir}" "${_hdr}" _to)
      if(_to STREQUAL "" OR _to STREQUAL layer)
        continue()
      endif()
      if(NOT _to IN_LIST DOORBELL_LAYER_ALLOWS_${layer})
        doorbell_layer_allowed_text(${layer} _allowed)
        list(APPEND _inc_bad
          "ucx_tl/${_rel} includes \"${_hdr}\" (${_to}): ${layer} may use ${_allowed}")
      endif()
    endforeach()
  endforeach()
  set(${out} ${${out}} ${_inc_bad} PARENT_SCOPE)
endfunction()

# Appends to `out` one line per link of `target` (layer `layer`) to a target
# of a layer it may not use. links: the target's LINK_LIBRARIES.
function(doorbell_check_layer_links layer target links out)
  set(_link_bad "")
  foreach(lib IN LISTS links)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" lib "${lib}")
    foreach(l IN LISTS DOORBELL_LAYERS)
      if(l STREQUAL layer OR NOT lib IN_LIST DOORBELL_LAYER_TARGETS_${l})
        continue()
      endif()
      if(NOT l IN_LIST DOORBELL_LAYER_ALLOWS_${layer})
        doorbell_layer_allowed_text(${layer} _allowed)
        list(APPEND _link_bad "${target} (${layer}) links ${lib} (${l}): ${layer} may use ${_allowed}")
      endif()
    endforeach()
  endforeach()
  set(${out} ${${out}} ${_link_bad} PARENT_SCOPE)
endfunction()

# Every rule over the sources, and over the links recorded in links_file
# ("set(DOORBELL_LINKS_<target> ...)" lines; may be absent).
function(doorbell_check_layers tl_dir links_file out)
  set(_bad "")
  foreach(layer IN LISTS DOORBELL_LAYERS)
    doorbell_check_layer_includes("${tl_dir}" ${layer} _bad)
  endforeach()
  if(links_file AND EXISTS "${links_file}")
    include("${links_file}")
    foreach(layer IN LISTS DOORBELL_LAYERS)
      foreach(t IN LISTS DOORBELL_LAYER_TARGETS_${layer})
        if(DEFINED DOORBELL_LINKS_${t})
          doorbell_check_layer_links(${layer} ${t} "${DOORBELL_LINKS_${t}}" _bad)
        endif()
      endforeach()
    endforeach()
  endif()
  set(${out} ${_bad} PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  doorbell_check_layers("${DOORBELL_TL_DIR}" "${DOORBELL_LAYER_LINKS}" _violations)
  if(_violations)
    list(JOIN _violations "\n  " _text)
    message(FATAL_ERROR "layering: dependencies against the rules of ucx_tl/layers.cmake:\n  ${_text}")
  endif()
  message(STATUS "layering: every folder of ${DOORBELL_TL_DIR} keeps to its rule")
endif()
