# Warning flags shared by every fpscope target: fpscope_warnings(<target>).
function(fpscope_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wno-unused-parameter>)
endfunction()
