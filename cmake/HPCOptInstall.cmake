#===- cmake/HPCOptInstall.cmake - headers, C API and the CMake package ----===#
#
# `cmake --install build --prefix P` lays out
#
#   P/bin/                 hpc-opt, hpc-calibrate, hpc-launch
#   P/lib/                 libHPCOptPipeline.so, libHPCOptCAPI.so, libhpcrt.a
#                          (and libhpcrt_nccl.a where NCCL was found)
#   P/lib/hpc-opt/         hpcrt-link.txt: the installed compiler's link line,
#                          libhpcrt relative to itself (runtime/CMakeLists.txt)
#   P/include/             hpc/ (C++), hpc-c/ (C), hpcrt.h (the runtime's ABI)
#   P/include/hpc-opt/     what hpc/ includes from the rest of the project: the
#                          dialects' headers (HPC/, Dist/) and the generated
#                          .h.inc files (HPC/, Dist/, passes/), kept out of
#                          P/include's top level; HPCOpt::Pipeline puts both
#                          directories on the include path
#   P/lib/cmake/HPCOpt/    find_package(HPCOpt CONFIG): HPCOpt::CAPI,
#                          HPCOpt::Pipeline, HPCOpt::hpcrt (and
#                          HPCOpt::hpcrt_nccl), cmake/HPCOptConfig.cmake.in
#
# The tools, the libraries and the runtime's files are installed next to
# their targets (tools/*, lib/, runtime/); this file installs the headers,
# the C API's library (lib/CAPI defines HPCOptCAPI) and the package. Nothing
# installed names a path of this build or of P: shared objects find each
# other through $ORIGIN/../lib, the package through its own location.
#
#===-----------------------------------------------------------------------===#

include(CMakePackageConfigHelpers)

set(HPC_INSTALL_CMAKEDIR lib/cmake/HPCOpt)

# --- headers -------------------------------------------------------------
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/hpc DESTINATION include
        FILES_MATCHING PATTERN "*.h")
foreach(dialect HPC Dist)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/dialects/${dialect}
          DESTINATION include/hpc-opt FILES_MATCHING PATTERN "*.h")
  install(DIRECTORY ${PROJECT_BINARY_DIR}/dialects/${dialect}
          DESTINATION include/hpc-opt FILES_MATCHING PATTERN "*.h.inc"
          PATTERN CMakeFiles EXCLUDE)
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/passes/Passes.h.inc
        DESTINATION include/hpc-opt/passes)

# --- the C API -------------------------------------------------------------
if(TARGET HPCOptCAPI)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/hpc-c DESTINATION include
          FILES_MATCHING PATTERN "*.h")
  set_target_properties(HPCOptCAPI PROPERTIES EXPORT_NAME CAPI)
  install(TARGETS HPCOptCAPI EXPORT HPCOptTargets
          LIBRARY DESTINATION lib
          INCLUDES DESTINATION include)
endif()

# --- the CMake package -------------------------------------------------------
install(EXPORT HPCOptTargets NAMESPACE HPCOpt:: DESTINATION ${HPC_INSTALL_CMAKEDIR}
        FILE HPCOptTargets.cmake)
install(EXPORT HPCOptRuntimeTargets NAMESPACE HPCOpt:: DESTINATION ${HPC_INSTALL_CMAKEDIR}
        FILE HPCOptRuntimeTargets.cmake)
if(TARGET hpcrt_nccl)
  install(EXPORT HPCOptNcclTargets NAMESPACE HPCOpt:: DESTINATION ${HPC_INSTALL_CMAKEDIR}
          FILE HPCOptNcclTargets.cmake)
endif()

# What the config needs to know of this build: facts, never paths of it.
set(HPC_PACKAGE_HAS_CAPI OFF)
if(TARGET HPCOptCAPI)
  set(HPC_PACKAGE_HAS_CAPI ON)
endif()
set(HPC_PACKAGE_HAS_NCCL OFF)
if(TARGET hpcrt_nccl)
  set(HPC_PACKAGE_HAS_NCCL ON)
endif()
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/HPCOptConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/HPCOptConfig.cmake
  INSTALL_DESTINATION ${HPC_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so only the same minor matches.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/HPCOptConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/HPCOptConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/HPCOptConfigVersion.cmake
        DESTINATION ${HPC_INSTALL_CMAKEDIR})
