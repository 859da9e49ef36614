"""Checks a trace's narrowing-store counts (tensor_stores) by running the same kernel again with fp32
outputs on the inputs --dump wrote, and casting its results with numpy.

Usage: stores_from_dumps.py TRACE.sqlite LIBMPT_KERNELS.so

For every launch with tensor_stores rows whose inputs were all dumped and whose kernel takes no
scalar the trace does not hold and whose every input is a measured float tensor (the backward
kernels of linear with fp32 partials, relu and log-softmax),
the kernel library runs the kernel once more through its C ABI (ctypes), every output f32. numpy
rounds each f32 result to the output's dtype (astype(float16), or bf16 by round to nearest even on
the bits) and counts: nonzero finite results, those that became zero, a nonzero subnormal, an
infinity. They must equal the row; where the output was dumped too, the rounded results must equal
its bits. Prints a JSON summary; exits 1 on any difference, 2 when nothing could be compared.
"""
import ctypes
import json
import os
import sqlite3
import sys

import numpy as np

MAX_DIMS = 6
F32, F16, BF16 = 0, 1, 2
KERNELS = {"linear_backward_weight", "linear_backward_data", "relu_backward", "log_softmax_backward"}


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("id", ctypes.c_uint64), ("name", ctypes.c_char_p),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("ndim", ctypes.c_int32), ("dtype", ctypes.c_int32),
                ("device", ctypes.c_int32), ("reserved", ctypes.c_int32)]


class Desc(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("kernel", ctypes.c_char_p),
                ("inputs", ctypes.POINTER(Tensor)), ("n_inputs", ctypes.c_int32), ("n_outputs", ctypes.c_int32),
                ("outputs", ctypes.POINTER(Tensor)), ("scalars", ctypes.c_void_p), ("n_scalars", ctypes.c_int32),
                ("reserved", ctypes.c_int32), ("stream", ctypes.c_void_p), ("report", ctypes.c_void_p)]


def tensor_of(array, dtype):
    t = Tensor()
    t.data = array.ctypes.data
    t.ndim = array.ndim
    for i, extent in enumerate(array.shape):
        t.shape[i] = extent
    t.dtype = dtype
    return t


def round_bf16(x):
    """float32 -> bf16 bits, round to nearest even (finite values; NaN does not occur here)."""
    b = x.view(np.uint32).astype(np.uint64)
    rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def stored_class(result, dtype):
    """The rounding of f32 results to dtype: (values as float64, their bits)."""
    if dtype == F16:
        h = result.astype(np.float16)
        return h.astype(np.float64), h.view(np.uint16)
    bits = round_bf16(result)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64), bits


def main():
    trace, library = sys.argv[1], sys.argv[2]
    lib = ctypes.CDLL(library)
    lib.mpt_launch.argtypes = [ctypes.POINTER(Desc)]
    lib.mpt_last_error.restype = ctypes.c_char_p
    folder = os.path.dirname(os.path.abspath(trace))
    db = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)

    def load(path):
        return np.load(path if os.path.isabs(path) else os.path.join(folder, path))

    launches = db.execute(
        "SELECT DISTINCT t.kernel_id, k.kernel FROM tensor_stores s JOIN tensors t ON t.id = s.tensor_id "
        "JOIN v_kernels k ON k.id = t.kernel_id ORDER BY t.kernel_id").fetchall()
    compared = failures = kinds_seen = 0
    problems = []
    for kernel_id, kernel in launches:
        if kernel not in KERNELS:
            continue
        tensors = db.execute(
            "SELECT t.role, t.slot, t.dtype, t.shape, d.path, s.results, s.flushed, s.subnormal, s.overflowed "
            "FROM tensors t LEFT JOIN dumps d ON d.tensor_id = t.id LEFT JOIN tensor_stores s ON s.tensor_id = t.id "
            "WHERE t.kernel_id = ? ORDER BY t.role DESC, t.slot", (kernel_id,)).fetchall()
        inputs = [r for r in tensors if r[0] == "in"]
        outputs = [r for r in tensors if r[0] == "out"]
        if not inputs or any(r[4] is None for r in inputs) or [r[1] for r in inputs] != list(range(len(inputs))):
            continue
        if [r[1] for r in outputs] != list(range(len(outputs))):
            continue
        arrays = [np.ascontiguousarray(load(r[4])) for r in inputs]
        in_tensors = (Tensor * len(arrays))(*[tensor_of(a, r[2]) for a, r in zip(arrays, inputs)])
        results = [np.zeros(json.loads(r[3]), dtype=np.float32) for r in outputs]
        out_tensors = (Tensor * len(results))(*[tensor_of(a, F32) for a in results])
        desc = Desc(abi_version=1, kernel=kernel.encode(), inputs=in_tensors, n_inputs=len(arrays),
                    n_outputs=len(results), outputs=out_tensors)
        status = lib.mpt_launch(ctypes.byref(desc))
        if status != 0:
            failures += 1
            problems.append(f"{kernel} launch {kernel_id}: {lib.mpt_last_error().decode()}")
            continue
        for r, result in zip(outputs, results):
            _, slot, dtype, _, path, got_results, got_flushed, got_subnormal, got_overflowed = r
            if got_results is None:
                continue
            values, stored_bits = stored_class(result.ravel(), dtype)
            source = result.ravel().astype(np.float64)
            counted = np.isfinite(source) & (source != 0)
            smallest_normal = 2.0 ** -14 if dtype == F16 else 2.0 ** -126
            want = {
                "results": int(counted.sum()),
                "flushed": int((counted & (values == 0)).sum()),
                "subnormal": int((counted & (values != 0) & (np.abs(values) < smallest_normal)).sum()),
                "overflowed": int((counted & np.isinf(values)).sum()),
            }
            got = {"results": got_results, "flushed": got_flushed, "subnormal": got_subnormal,
                   "overflowed": got_overflowed}
            for name in want:
                if got[name] != want[name]:
                    failures += 1
                    problems.append(f"{kernel} launch {kernel_id} out {slot}: {name} {got[name]} != {want[name]}")
            if path is not None:
                dumped = load(path).ravel()
                dumped_bits = dumped.view(np.uint16) if dumped.dtype != np.uint16 else dumped
                if not np.array_equal(dumped_bits, stored_bits):
                    failures += 1
                    problems.append(f"{kernel} launch {kernel_id} out {slot}: the recomputation differs from the run")
            kinds_seen += sum(1 for name in ("flushed", "subnormal", "overflowed") if want[name])
            compared += 1
    print(json.dumps({"compared": compared, "failures": failures, "nonzero_kinds": kinds_seen,
                      "problems": problems[:20]}, indent=1))
    if failures:
        return 1
    return 0 if compared else 2


if __name__ == "__main__":
    sys.exit(main())
