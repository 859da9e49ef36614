"""ctypes bindings to libfpscope_torch.so, the operators observed in C++ (injector/torch/src/observer.cpp).

The library is built beside the injector (<lib>/libfpscope_torch.so, this package being in
<lib>/../share/fpscope/python) against the C++ headers of the torch it runs in. load() returns None,
with the reason, when it cannot be used; the front end then watches operators with its Python
dispatch mode.
"""
import ctypes
import os

import torch

from ._contract import ENV_TORCH_DISPATCH_MODE

_HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "..", "lib", "libfpscope_torch.so"))
# `fpscope run --torch-operators dispatch-mode` asks for the Python dispatch mode.
DISPATCH_MODE_ENV = ENV_TORCH_DISPATCH_MODE


class Observer:
    def __init__(self, lib, with_gil):
        def bind(name, restype, *argtypes, library=lib):
            f = getattr(library, name)
            f.restype = restype
            f.argtypes = list(argtypes)
            return f
        self.watch = bind("fpscope_torch_watch", None, ctypes.c_int)
        self.place = bind("fpscope_torch_place", None, ctypes.c_char_p, ctypes.c_int32)
        self.new_step = bind("fpscope_torch_new_step", None)
        self.reports_writes = bind("fpscope_torch_reports_writes", None, ctypes.c_int)
        self.initialized_all = bind("fpscope_torch_initialized_all", None)
        self._label = bind("fpscope_torch_label", None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p)
        # It keeps a reference to a Python object: called with the GIL held.
        self.trap_exception = bind("fpscope_torch_trap_exception", None, ctypes.py_object, library=with_gil)

    def label(self, t, category, name):
        """Says what a tensor's storage holds (relabels it when it was first seen as something else)."""
        self._label(t._cdata, category, name)


def _mapped(name):
    """The real paths of the files this process has mapped whose name starts with `name`."""
    found = set()
    try:
        with open("/proc/self/maps") as maps:
            text = maps.read()
    except OSError:
        return found
    for line in text.splitlines():
        if name in line:  # the path is the line's last field
            path = line[line.find("/"):]
            if os.path.basename(path).startswith(name):
                found.add(os.path.realpath(path))
    return found


def load():
    """(Observer, None), or (None, why not)."""
    if os.environ.get(DISPATCH_MODE_ENV):
        return None, "asked for the dispatch mode"
    if not os.path.exists(LIBRARY):
        return None, ("%s is not there (a build makes it where libtorch-dev is installed; a copied "
                      "build may have left it out)" % LIBRARY)
    # The library links one libtorch; a process running another (a torch from elsewhere) must not
    # load it, or it would bring a second libtorch in.
    running = _mapped("libtorch_cpu.so")
    try:
        from . import _linked
        linked = os.path.realpath(_linked.TORCH_CPU_LIBRARY)
    except ImportError:
        return None, "the build did not say which libtorch %s links" % LIBRARY
    if running and linked not in running:
        return None, "%s links %s, this torch runs %s" % (LIBRARY, linked, ", ".join(sorted(running)))
    try:
        lib = ctypes.CDLL(LIBRARY)
    except OSError as error:
        return None, "cannot load %s: %s" % (LIBRARY, error)
    version = lib.fpscope_torch_built_for
    version.restype = ctypes.c_char_p
    wanted = version().decode()
    running = ".".join(torch.__version__.split(".")[:2])
    if running != wanted:
        return None, "%s was built for torch %s, this is torch %s" % (LIBRARY, wanted, torch.__version__)
    return Observer(lib, ctypes.PyDLL(LIBRARY)), None
