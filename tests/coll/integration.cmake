# MPI integration: the check program under mpirun with the component from
# this build, on a transport that exists here (shared memory + tcp).
find_path(DOORBELL_CHECK_MPI_INCLUDE mpi.h
  PATHS /usr/lib/x86_64-linux-gnu/openmpi/include NO_DEFAULT_PATH)
find_library(DOORBELL_CHECK_MPI_LIB mpi PATHS /usr/lib/x86_64-linux-gnu/openmpi/lib)
find_program(DOORBELL_MPIRUN mpirun)
if(NOT DOORBELL_CHECK_MPI_INCLUDE OR NOT DOORBELL_CHECK_MPI_LIB OR NOT DOORBELL_MPIRUN)
  return()
endif()
add_executable(coll_mpi_check mpi_allreduce_check.c allreduce_types_check.c)
target_include_directories(coll_mpi_check PRIVATE ${DOORBELL_CHECK_MPI_INCLUDE})
target_link_libraries(coll_mpi_check PRIVATE ${DOORBELL_CHECK_MPI_LIB} m)

doorbell_gtest(coll_mpi_test LABELS integration TIMEOUT 300
  SOURCES coll_mpi_test.cc)
add_dependencies(coll_mpi_test coll_mpi_check mca_coll_doorbell)
target_compile_definitions(coll_mpi_test PRIVATE
  DOORBELL_MPIRUN="${DOORBELL_MPIRUN}"
  DOORBELL_COLL_CHECK="$<TARGET_FILE:coll_mpi_check>"
  DOORBELL_COLL_DIR="$<TARGET_FILE_DIR:mca_coll_doorbell>")
