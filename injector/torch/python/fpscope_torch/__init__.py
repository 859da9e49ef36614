"""fpscope's PyTorch front end.

Loaded by `fpscope run` into a Python program when it imports torch; the program imports nothing
from here. It sees every operator PyTorch dispatches (libfpscope_torch-<version>.so, a C++ observer
of the dispatcher; a TorchDispatchMode where no such library matches the torch), module boundaries
(global module hooks), backward() and optimizer steps, and hands each operator's tensors to
libfpscope_inject.so through its C API, where the same C++ code as for mptrain measures them and
writes the same records. docs/pytorch.md describes what lands in the trace.
"""
