"""fpscope's start-up hook for Python programs run under `fpscope run`.

`fpscope run` puts this folder first on PYTHONPATH. Python imports this module at start-up; it
loads the sitecustomize it shadows (Debian's, or the user's own), then waits for the program to
import torch and only then installs fpscope's PyTorch front end. A program that never imports torch
is not changed.
"""
import importlib
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_shadowed_sitecustomize():
    """Imports the next sitecustomize on sys.path, the one this module hides."""
    saved_path = list(sys.path)
    this = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
        try:
            importlib.import_module("sitecustomize")
        except ImportError as error:
            if error.name != "sitecustomize":
                raise
    finally:
        sys.path[:] = saved_path
        shadowed = sys.modules.get("sitecustomize")
        if this is not None:
            sys.modules["sitecustomize"] = this
            if shadowed is not None and shadowed is not this:
                this.shadowed = shadowed


_run_shadowed_sitecustomize()

if os.environ.get("FPSCOPE_RING"):
    try:
        from fpscope_torch import _import_hook
        _import_hook.install()
    except Exception as error:  # never stop the user's program for fpscope's sake
        sys.stderr.write("fpscope: the PyTorch front end is not installed: %s\n" % error)
