# Every third-party dependency of fpscope, found once, from the system's packages.
# scripts/install-deps.sh installs them on Debian 12; each package is named in the error below.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(SQLite3 REQUIRED)            # libsqlite3-dev
find_package(ZLIB REQUIRED)               # zlib1g-dev
find_package(CLI11 CONFIG REQUIRED)       # libcli11-dev
find_package(nlohmann_json CONFIG REQUIRED) # nlohmann-json3-dev
find_package(fmt CONFIG REQUIRED)         # libfmt-dev
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)  # libopenblas-dev

# NVTX3 is header-only. It ships with the CUDA toolkit; without it the trainer's ranges compile out.
find_path(FPSCOPE_NVTX3_INCLUDE_DIR nvtx3/nvToolsExt.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
if(FPSCOPE_NVTX3_INCLUDE_DIR)
  add_library(fpscope_nvtx3 INTERFACE)
  target_include_directories(fpscope_nvtx3 SYSTEM INTERFACE ${FPSCOPE_NVTX3_INCLUDE_DIR})
  target_link_libraries(fpscope_nvtx3 INTERFACE ${CMAKE_DL_LIBS})
  target_compile_definitions(fpscope_nvtx3 INTERFACE FPSCOPE_HAVE_NVTX3=1)
  message(STATUS "fpscope: NVTX3 headers in ${FPSCOPE_NVTX3_INCLUDE_DIR}")
else()
  message(STATUS "fpscope: NVTX3 headers not found; NVTX ranges compile out")
endif()

# CUDA: optional. FPSCOPE_HAVE_CUDA tells the parts whether to build their GPU sources.
set(FPSCOPE_HAVE_CUDA OFF)
if(NOT FPSCOPE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    # Before enable_language(): it would otherwise fill in nvcc's own default architecture.
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    set(FPSCOPE_HAVE_CUDA ON)
    message(STATUS "fpscope: CUDA ${CUDAToolkit_VERSION} found; building the GPU paths")
  elseif(FPSCOPE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FPSCOPE_CUDA=ON but no CUDA toolkit was found (set CUDAToolkit_ROOT)")
  else()
    message(STATUS "fpscope: no CUDA toolkit; GPU paths left out")
  endif()
endif()

# The Pythons whose torch gets an operator observer and the PyTorch tests: worked out here, in the
# top directory's scope, so that injector/torch and tests/injector/torch see the same list.
include(TorchPythons)

# Test-only tools.
if(FPSCOPE_BUILD_TESTS)
  find_package(GTest REQUIRED)            # libgtest-dev
  # Debian's numpy belongs to /usr/bin/python3; another python3 earlier on PATH may not see it.
  set(FPSCOPE_REFERENCE_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with numpy, the independent reference in tests")
  execute_process(COMMAND ${FPSCOPE_REFERENCE_PYTHON} -c "import numpy"
                  RESULT_VARIABLE _numpy_missing OUTPUT_QUIET ERROR_QUIET)
  if(_numpy_missing)
    message(FATAL_ERROR "${FPSCOPE_REFERENCE_PYTHON} cannot import numpy: apt-get install python3-numpy")
  endif()
  # The reference for the 8-bit float formats decodes them with ml_dtypes (PyPI): the first of the
  # torch Pythons that has it (the PyPI environment's). Without one, those tests skip and say why.
  set(FPSCOPE_ML_DTYPES_PYTHON "")
  foreach(_python IN LISTS FPSCOPE_TORCH_PYTHONS)
    execute_process(COMMAND ${_python} -c "import numpy, ml_dtypes"
                    RESULT_VARIABLE _ml_dtypes_missing OUTPUT_QUIET ERROR_QUIET)
    if(NOT _ml_dtypes_missing)
      set(FPSCOPE_ML_DTYPES_PYTHON ${_python})
      break()
    endif()
  endforeach()
endif()
if(FPSCOPE_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)        # libbenchmark-dev
endif()
