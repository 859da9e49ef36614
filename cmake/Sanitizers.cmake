# FPSCOPE_SANITIZE=address,undefined (or thread) instruments every target of the build.
# Tests that preload the injector into another process carry the label `injection`; a sanitized
# build excludes them (ctest -LE injection), as a preloaded sanitizer runtime cannot come second.
if(FPSCOPE_SANITIZE)
  string(REPLACE "," ";" _fpscope_sanitizers "${FPSCOPE_SANITIZE}")
  foreach(_s IN LISTS _fpscope_sanitizers)
    if(NOT _s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "FPSCOPE_SANITIZE: unknown sanitizer '${_s}' (use address, undefined, thread)")
    endif()
  endforeach()
  set(_flags "-fsanitize=${FPSCOPE_SANITIZE}" -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_compile_options(${_flags})
  add_link_options(${_flags})
  message(STATUS "fpscope: building with -fsanitize=${FPSCOPE_SANITIZE}")
endif()
