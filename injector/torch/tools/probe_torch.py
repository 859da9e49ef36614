"""Says what the build needs to know of the torch an interpreter imports, one `key=value` a line.

Run by CMake (injector/torch/CMakeLists.txt) for each Python it builds an operator observer for:
  version    major.minor, the torch the observer is built for
  full       the whole version string
  include    the torch's own C++ headers (a PyPI wheel ships them), or nothing (Debian's are in
             libtorch-dev, found by CMake)
  torch_cpu  the real path of the libtorch_cpu this torch loads (the library the observer links)
  c10        the real path of its libc10
  python_include  the interpreter's Python.h folder
  cxx11_abi  1 or 0, the C++ library ABI libtorch was built with
"""
import os
import sysconfig

import torch


def mapped(prefix):
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line[line.find("/"):].strip() if "/" in line else ""
            if os.path.basename(path).startswith(prefix):
                return os.path.realpath(path)
    return ""


here = os.path.dirname(torch.__file__)
include = os.path.join(here, "include")
print("version=%s" % ".".join(torch.__version__.split("+")[0].split(".")[:2]))
print("full=%s" % torch.__version__)
print("include=%s" % (include if os.path.exists(os.path.join(include, "ATen", "record_function.h")) else ""))
print("torch_cpu=%s" % mapped("libtorch_cpu.so"))
print("c10=%s" % mapped("libc10.so"))
print("python_include=%s" % sysconfig.get_paths()["include"])
print("cxx11_abi=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
