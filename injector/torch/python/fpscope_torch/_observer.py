"""ctypes bindings to libfpscope_torch-<version>.so, the operators observed in C++
(injector/torch/src/observer.cpp).

The build makes one library for each torch it finds, beside the injector (<lib>/, this package
being in <lib>/../share/fpscope/python), against that torch's C++ headers and libtorch; _observers.py
lists them. load() picks the one linked to the libtorch this process runs, or returns None with the
reason; the front end then watches operators with its Python dispatch mode.
"""
import ctypes
import os

import torch

from ._contract import ENV_TORCH_DISPATCH_MODE

_HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_DIR = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "..", "lib"))
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
        self.compiling = bind("fpscope_torch_compiling", None, ctypes.c_int)
        self._graph_begin = bind("fpscope_torch_graph_begin", ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.POINTER(ctypes.c_ssize_t), ctypes.c_int32)
        self._graph_end = bind("fpscope_torch_graph_end", None, ctypes.c_void_p,
                               ctypes.POINTER(ctypes.c_ssize_t), ctypes.c_int32)
        self._label = bind("fpscope_torch_label", None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p)
        # It keeps a reference to a Python object: called with the GIL held.
        self.trap_exception = bind("fpscope_torch_trap_exception", None, ctypes.py_object, library=with_gil)

    def graph_begin(self, name, tensors):
        """A compiled graph is called with `tensors`: its launch (None when nothing is watched)."""
        impls = [t._cdata for t in tensors if isinstance(t, torch.Tensor)]
        return self._graph_begin(name, (ctypes.c_ssize_t * len(impls))(*impls), len(impls))

    def graph_end(self, launch, outputs):
        """The graph returned `outputs` (None: it raised)."""
        impls = [t._cdata for t in outputs or () if isinstance(t, torch.Tensor)]
        self._graph_end(launch, (ctypes.c_ssize_t * len(impls))(*impls), len(impls))

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
    try:
        from ._observers import OBSERVERS
    except ImportError:
        return None, "the build did not say which observers it made (_observers.py is missing)"
    # Each library links one libtorch; a process running another must not load it, or it would
    # bring a second libtorch in.
    running = _mapped("libtorch_cpu.so")
    built = []
    for name, linked, version in OBSERVERS:
        built.append("torch %s" % version)
        if os.path.realpath(linked) in running:
            break
    else:
        has = ("this build has one for %s" % ", ".join(built)) if built else "this build has none"
        return None, ("no operator observer was built for this torch (%s, %s); %s. "
                      "Rebuild fpscope with this interpreter in FPSCOPE_TORCH_PYTHONS" %
                      (torch.__version__, ", ".join(sorted(running)) or "libtorch_cpu not mapped", has))
    library = os.path.join(LIBRARY_DIR, name)
    if not os.path.exists(library):
        return None, "%s is not there (a copied build may have left it out)" % library
    try:
        lib = ctypes.CDLL(library)
    except OSError as error:
        return None, "cannot load %s: %s" % (library, error)
    built_for = lib.fpscope_torch_built_for
    built_for.restype = ctypes.c_char_p
    wanted = built_for().decode()
    if ".".join(torch.__version__.split(".")[:2]) != wanted:
        return None, "%s was built for torch %s, this is torch %s" % (library, wanted, torch.__version__)
    return Observer(lib, ctypes.PyDLL(library)), None
