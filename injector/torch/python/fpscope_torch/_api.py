"""ctypes bindings to the C API of libfpscope_inject.so (fpscope/inject_api.h).

The library is already in the process: `fpscope run` preloads it, so its symbols are found in the
program's global namespace.
"""
import ctypes
import sys

# The constants of mpt/abi.h, fpscope/inject_api.h and fpscope/contract/ (nvtx.h, run_end.h,
# tensor_names.h, torch_operators.h), as the build wrote them from those headers.
from ._contract import (  # noqa: F401 (the front end reads them from here)
    API_VERSION, CAT_ACTIVATION, CAT_DATA, CAT_GRADIENT, CAT_MASTER_WEIGHT, CAT_OPTIMIZER_STATE,
    CAT_WEIGHT, CAT_WORKSPACE, DEVICE_CPU, DEVICE_CUDA, DTYPE_BF16, DTYPE_E4M3, DTYPE_E4M3FNUZ, DTYPE_E5M2,
    DTYPE_E5M2FNUZ, DTYPE_E8M0, DTYPE_F16, DTYPE_F32, DTYPE_F64, DTYPE_I32, DTYPE_I64, DTYPE_U8, MAX_DIMS, MEASURE_INPUTS, MEASURED_DTYPES, MEASURE_OUTPUTS, NAME_SEPARATOR,
    PHASE_BACKWARD, PHASE_EVAL, PHASE_FORWARD, PHASE_OPTIMIZER, RANGE_LAYER, RANGE_PHASE, RANGE_STEP,
    TENSOR_FORMAT, TRAP_MESSAGE_PREFIX, TRAPPED, UNANNOTATED_VIEW_OPERATORS, UNINITIALIZED_OPERATORS,
    UNMEASURED_NAMESPACES,
    UNNAMED_OUTPUT_PREFIX, UNWATCHED_NAMESPACES)


class UpdateSums(ctypes.Structure):
    """fpscope_update_sums: what fpscope_update_after() counted."""
    _fields_ = [("changed", ctypes.c_uint64), ("nonzero", ctypes.c_uint64), ("lost", ctypes.c_uint64),
                ("applied_abs_sum", ctypes.c_double), ("applied_sq_sum", ctypes.c_double),
                ("weight_sq_sum", ctypes.c_double)]


class Library:
    """The injector's C API, or an error saying why it cannot be used."""

    def __init__(self):
        lib = ctypes.CDLL(None)
        try:
            version = lib.fpscope_api_version
        except AttributeError:
            raise RuntimeError("libfpscope_inject.so is not loaded in this process (run the program "
                               "under `fpscope run`)")
        version.restype = ctypes.c_int
        if version() != API_VERSION:
            raise RuntimeError("libfpscope_inject.so speaks C API version %d, this front end %d"
                               % (version(), API_VERSION))
        def bind(name, restype, *argtypes):
            f = getattr(lib, name)
            f.restype = restype
            f.argtypes = list(argtypes)
            return f
        self.tracing = bind("fpscope_tracing", ctypes.c_int)
        self.set_rank = bind("fpscope_set_rank", ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
                             ctypes.c_char_p)
        self.step_watched = bind("fpscope_step_watched", ctypes.c_int, ctypes.c_int64)
        self.range_push = bind("fpscope_range_push", ctypes.c_int, ctypes.c_int32, ctypes.c_char_p,
                               ctypes.c_int64)
        self.range_pop = bind("fpscope_range_pop", ctypes.c_int)
        self.op_plan = bind("fpscope_op_plan", ctypes.c_int, ctypes.c_char_p)
        # Tensor arrays and flags are passed as addresses (the front end packs them itself).
        self.op_begin = bind("fpscope_op_begin", ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                             ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32)
        self.op_end = bind("fpscope_op_end", ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                           ctypes.c_int32)
        self.trap_message = bind("fpscope_trap_message", ctypes.c_char_p)
        self.alloc_seen = bind("fpscope_alloc_seen", ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64,
                               ctypes.c_int32, ctypes.c_int32, ctypes.c_char_p)
        self.free_seen = bind("fpscope_free_seen", None, ctypes.c_void_p)
        self.relabel = bind("fpscope_relabel", None, ctypes.c_uint64, ctypes.c_int32, ctypes.c_char_p)
        self.report_writes = bind("fpscope_report_writes", ctypes.c_int)
        self.memory_written = bind("fpscope_memory_written", None, ctypes.c_void_p, ctypes.c_uint64)
        self.stop_reuse = bind("fpscope_stop_reuse", None)
        self.log_scalar = bind("fpscope_log_scalar", None, ctypes.c_char_p, ctypes.c_double, ctypes.c_int64)
        self.log_text = bind("fpscope_log_text", None, ctypes.c_char_p, ctypes.c_char_p)
        self.front_end_failed = bind("fpscope_front_end_failed", None, ctypes.c_char_p, ctypes.c_char_p)
        self.param_update = bind("fpscope_param_update", None, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int64,
                                 ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64, ctypes.c_double,
                                 ctypes.c_double, ctypes.c_double)
        self.update_before = bind("fpscope_update_before", ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p,
                                  ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int32)
        self.update_after = bind("fpscope_update_after", ctypes.c_int, ctypes.c_uint64, ctypes.c_char_p,
                                 ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64,
                                 ctypes.POINTER(UpdateSums))
        self.update_prune = bind("fpscope_update_prune", None)


def front_end_failed(what):
    """Says that the front end failed before it was up (`what`: the error): tracing stops in this
    process if the injector is in it (meta injector.failure), else stderr has it. Never raises."""
    message = "fpscope: the PyTorch front end is off: %s\n" % what
    try:
        report = ctypes.CDLL(None).fpscope_front_end_failed
    except (AttributeError, OSError):
        sys.stderr.write(message)
        return
    try:
        report.restype = None
        report.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        report(b"the PyTorch front end", what.encode(errors="replace"))
    except Exception:
        sys.stderr.write(message)
