# Install step: writes share/doorbell/doorbell.tune from the template in
# scripts/share with the absolute paths of this installation (a tune file
# cannot expand variables, and LD_PRELOAD needs an absolute path).
# Expects DOORBELL_LIBDIR and DOORBELL_DATADIR (relative or absolute).
cmake_policy(VERSION 3.25)
foreach(_var LIBDIR DATADIR)
  if(IS_ABSOLUTE "${DOORBELL_${_var}}")
    set(_${_var} "${DOORBELL_${_var}}")
  else()
    set(_${_var} "${CMAKE_INSTALL_PREFIX}/${DOORBELL_${_var}}")
  endif()
endforeach()
set(_src "${CMAKE_CURRENT_LIST_DIR}/../../scripts/share/doorbell.tune")
set(_dst "$ENV{DESTDIR}${_DATADIR}/doorbell/doorbell.tune")
file(READ "${_src}" _text)
string(REPLACE "@DOORBELL_UCT_MODULE@" "${_LIBDIR}/ucx/libuct_doorbell.so" _text "${_text}")
string(REPLACE "@DOORBELL_PREFIX@" "${CMAKE_INSTALL_PREFIX}" _text "${_text}")
string(REPLACE "@DOORBELL_OMPI_COMPONENT_DIR@" "${_LIBDIR}/openmpi" _text "${_text}")
string(REPLACE "@DOORBELL_LIBDIR@" "${_LIBDIR}" _text "${_text}")
string(REPLACE "@DOORBELL_DATADIR@" "${_DATADIR}/doorbell" _text "${_text}")
file(WRITE "${_dst}" "${_text}")
message(STATUS "Generated: ${_dst}")
