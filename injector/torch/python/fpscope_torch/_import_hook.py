"""Installs the front end at the moment the program's `import torch` completes.

The finder and the loader follow importlib's protocols without deriving from importlib.abc, whose
import (importlib.resources, pathlib, tempfile...) would cost every Python program under
`fpscope run` about 15 ms at start-up.
"""
import importlib.machinery
import sys

_installed = False


class _TorchFinder:
    """Finds `torch` through the other finders and wraps its loader."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch" or _installed:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            for finder in sys.meta_path:
                if spec is not None:
                    break
                if hasattr(finder, "find_spec"):
                    spec = finder.find_spec(fullname, path, target)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _InstallingLoader(spec.loader)
        return spec


class _InstallingLoader:
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _install_front_end()

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _install_front_end():
    global _installed
    if _installed:
        return
    _installed = True
    for finder in list(sys.meta_path):
        if isinstance(finder, _TorchFinder):
            sys.meta_path.remove(finder)
    try:
        from fpscope_torch import _install
    except Exception as error:  # the program's `import torch` must not fail for fpscope's sake
        try:
            from fpscope_torch import _api
            _api.front_end_failed("%s: %s" % (type(error).__name__, error))
        except Exception:
            sys.stderr.write("fpscope: the PyTorch front end is not installed: %s: %s\n" % (type(error).__name__, error))
        return
    _install.install()  # never raises


def install():
    """Called by sitecustomize: installs now if torch is already imported, else at its import."""
    if "torch" in sys.modules:
        _install_front_end()
    else:
        sys.meta_path.insert(0, _TorchFinder())
