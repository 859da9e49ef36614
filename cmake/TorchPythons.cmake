# The Python interpreters whose torch fpscope builds an operator observer for and runs its PyTorch
# tests under: Debian's /usr/bin/python3 (python3-torch 1.13) and the virtual environment of PyPI
# packages (a current torch 2.x) that scripts/python-env.sh installs outside the checkout.
# Included once, by cmake/Dependencies.cmake in the top directory, so every directory sees the list.
include_guard(GLOBAL)
# Set FPSCOPE_TORCH_PYTHONS (a list) to choose others; left unset, it is worked out at each configure,
# so that a build folder configured before the environment was installed picks it up.
if(NOT DEFINED FPSCOPE_TORCH_PYTHONS)
  set(_pythons /usr/bin/python3)
  execute_process(COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/python-env.sh --python
                  OUTPUT_VARIABLE _env_python OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                  RESULT_VARIABLE _no_env)
  if(_no_env EQUAL 0 AND _env_python)
    list(APPEND _pythons ${_env_python})
  else()
    message(STATUS "fpscope: the PyPI environment (a current torch 2.x) is not installed; run "
                   "scripts/python-env.sh for its observer and tests")
  endif()
  set(FPSCOPE_TORCH_PYTHONS ${_pythons})
endif()

# fpscope_probe_torch(<python> <prefix>): what injector/torch/tools/probe_torch.py says of the torch
# <python> imports, as <prefix>_version, _full, _include, _torch_cpu, _c10, _python_include and
# _cxx11_abi; <prefix>_version is empty when <python> cannot import torch.
# Each interpreter is asked once a configure.
function(fpscope_probe_torch python prefix)
  foreach(key version full include torch_cpu c10 python_include cxx11_abi)
    set(${prefix}_${key} "" PARENT_SCOPE)
  endforeach()
  string(MD5 _key "${python}")
  get_property(_out GLOBAL PROPERTY fpscope_probe_${_key})
  get_property(_asked GLOBAL PROPERTY fpscope_probe_${_key} SET)
  if(NOT _asked)
    execute_process(COMMAND ${python} ${PROJECT_SOURCE_DIR}/injector/torch/tools/probe_torch.py
                    OUTPUT_VARIABLE _out ERROR_QUIET RESULT_VARIABLE _failed)
    if(_failed)
      set(_out "")
      message(STATUS "fpscope: ${python} cannot import torch; no PyTorch observer or tests for it")
    endif()
    set_property(GLOBAL PROPERTY fpscope_probe_${_key} "${_out}")
  endif()
  string(REPLACE "\n" ";" _lines "${_out}")
  foreach(line IN LISTS _lines)
    if(line MATCHES "^([a-z_0-9]+)=(.*)$")
      set(${prefix}_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}" PARENT_SCOPE)
    endif()
  endforeach()
endfunction()
