"""The operator watcher: every operator PyTorch dispatches is one kernel launch handed to the
injector, named without `aten.` and overload; view and metadata operators are counted, not
measured; inputs are measured before the operator runs, outputs after, by the injector's C++ code
on the tensors' memory.

Two watchers do it, behind one interface (watch, place, new_step, memory): the C++ observer
(libfpscope_torch-<version>.so, _observer.py), which follows storages itself, and the Python
dispatch mode (_Mode), which calls OperatorCalls.dispatch for each operator. The front end picks
one at start.
"""
import ctypes
import struct

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _api
from ._failures import _raise_in_callers_frame, _trap_text
from ._memory import Memory

_DTYPES = {
    torch.float32: _api.DTYPE_F32,
    torch.float16: _api.DTYPE_F16,
    torch.bfloat16: _api.DTYPE_BF16,
    torch.int32: _api.DTYPE_I32,
    torch.int64: _api.DTYPE_I64,
    torch.uint8: _api.DTYPE_U8,
    torch.bool: _api.DTYPE_U8,
    torch.float64: _api.DTYPE_F64,
}
# The 8-bit floats, where this torch has them (torch 2.1 and later).
for _name, _dtype in (("float8_e4m3fn", _api.DTYPE_E4M3), ("float8_e5m2", _api.DTYPE_E5M2),
                      ("float8_e4m3fnuz", _api.DTYPE_E4M3FNUZ), ("float8_e5m2fnuz", _api.DTYPE_E5M2FNUZ),
                      ("float8_e8m0fnu", _api.DTYPE_E8M0)):
    if isinstance(getattr(torch, _name, None), torch.dtype):
        _DTYPES[getattr(torch, _name)] = _dtype
_MEASURED_DTYPES = tuple(t for t, d in _DTYPES.items() if d in _api.MEASURED_DTYPES)
# Operators whose outputs hold whatever the memory held before: counted, never measured.
_UNINITIALIZED = frozenset(_api.UNINITIALIZED_OPERATORS)
# Views whose schema does not mark their result as an alias of their input.
_UNANNOTATED_VIEWS = frozenset(_api.UNANNOTATED_VIEW_OPERATORS)
_ZEROS = tuple((0,) * (_api.MAX_DIMS - n) for n in range(_api.MAX_DIMS + 1))


class _OpInfo:
    """What the front end needs to know of one operator overload, worked out once."""

    __slots__ = ("name", "unwatched", "unmeasured", "view", "arguments", "return_names")

    def __init__(self, func):
        self.name = func.overloadpacket.__name__.encode()
        schema = func._schema
        namespace = schema.name.split("::")[0].encode()
        # The profiler's bookkeeping and the like: run, never a launch.
        self.unwatched = namespace in _api.UNWATCHED_NAMESPACES
        returns = schema.returns
        # (position, keyword, written) of each argument that can hold a tensor (Tensor, Tensor?,
        # Tensor[], Tensor?[]); scalars, sizes and dtypes are never looked at.
        self.arguments = [(i, a.name, a.alias_info is not None and a.alias_info.is_write)
                          for i, a in enumerate(schema.arguments) if "Tensor" in str(a.type)]
        # A pure view or metadata operator: it returns tensors, each aliasing an input, none written.
        # (An operator that returns nothing, as the in-place _foreach_add_, writes its arguments.)
        # And the unannotated views' overloads that write no argument (_unsafe_view.out copies).
        self.view = (bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)
                     or (self.name in _UNANNOTATED_VIEWS and not any(w for _, _, w in self.arguments)))
        self.unmeasured = self.view or self.name in _UNINITIALIZED or namespace in _api.UNMEASURED_NAMESPACES
        # Per return in the schema: the name of a Tensor return ("indices" of sort's "(Tensor values,
        # Tensor indices)"), b"" for an unnamed one or a return of another type.
        self.return_names = [r.name.encode() if r.type.kind() == "TensorType" else b"" for r in returns]


_DISPATCHES_IN_PYTHON = {torch.Tensor: False, torch.nn.Parameter: False}


def _dispatches_in_python(t):
    """A tensor subclass with a __torch_dispatch__ of its own (torch.compile's FakeTensor, torchao's
    float8 tensors, whose operators run again on the plain tensors inside them)."""
    kind = type(t)
    python = _DISPATCHES_IN_PYTHON.get(kind)
    if python is None:
        python = _DISPATCHES_IN_PYTHON[kind] = (
            getattr(kind, "__torch_dispatch__", None) is not getattr(torch.Tensor, "__torch_dispatch__", None))
    return python


def _without_data_of_its_own(t):
    """A tensor whose operators are not the program's computation on data (as the C++ observer's
    without_data_of_its_own): a subclass that dispatches in Python, or a meta tensor."""
    return _dispatches_in_python(t) or t.is_meta


# From torch 2 a dispatch mode may decline an operator on a subclass (NotImplemented): the
# subclass's own __torch_dispatch__ runs it, and the operators that runs on the plain tensors
# inside come back through the mode, which measures them, as the C++ observer does.
_SUBCLASSES_DISPATCH_THROUGH_THE_MODE = int(torch.__version__.split(".")[0]) >= 2


def _returned(info, args, result):
    """What the dispatch mode hands back for an operator's result. A view of a wrapped number (a
    Python scalar PyTorch holds as a 0-dim tensor, as autograd detaches one to save it) comes back
    to Python as a number; the view is the tensor itself, which no gradient touches."""
    if info.view and result is not None and not isinstance(result, (torch.Tensor, list, tuple)):
        return args[0]
    return result


def _tensors_in(value, written, out):
    if isinstance(value, torch.Tensor):
        out.append((value, written))
    elif isinstance(value, (list, tuple)):
        for v in value:
            if isinstance(v, torch.Tensor):
                out.append((v, written))


def _returned_tensors(result, out):
    if isinstance(result, torch.Tensor):
        out.append(result)
    elif isinstance(result, (list, tuple)):
        for r in result:
            _returned_tensors(r, out)


def _returned_places(info, result):
    """Each tensor an operator returned, with its place among the returns (contract/tensor_names.h:
    a return is one place whether or not it holds a tensor, a list one place an element) and its
    return in the schema (None for a list's element)."""
    places = []
    place = 0
    for r, value in enumerate(result if len(info.return_names) > 1 else (result,)):
        if isinstance(value, (list, tuple)):
            for element in value:
                if isinstance(element, torch.Tensor):
                    places.append((element, place, None))
                place += 1
        else:
            if isinstance(value, torch.Tensor):
                places.append((value, place, r))
            place += 1
    return places


def _output_name(info, made_by, place, schema_return):
    """The name of a new storage an operator returned at `place` after its first return
    (contract/tensor_names.h): "norm.native_group_norm.out1", "sort.indices"."""
    named = info.return_names[schema_return] if schema_return is not None else b""
    return made_by + _NAME_SEPARATOR + (named or _UNNAMED_OUTPUT_PREFIX + str(place).encode())


_NAME_SEPARATOR = _api.NAME_SEPARATOR.encode()
_UNNAMED_OUTPUT_PREFIX = _api.UNNAMED_OUTPUT_PREFIX.encode()


def _data_name(t, what="data"):
    """'data f32[3000,1,28,28]': a tensor no operator made, by its type and shape."""
    dtype = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64",
             torch.int32: "i32", torch.uint8: "u8", torch.bool: "bool", torch.float64: "f64"}.get(t.dtype, str(t.dtype))
    return ("%s %s[%s]" % (what, dtype, ",".join(str(n) for n in t.shape))).encode()


def _tensor_list(value):
    out = []
    _returned_tensors(value, out)
    return out


class _Descriptors:
    """mpt_tensor arrays packed into one reusable buffer (fpscope/inject_api.h takes a pointer)."""

    LAYOUT = struct.Struct(_api.TENSOR_FORMAT)  # data, id, name, shape, ndim, dtype, device, 0

    def __init__(self, capacity=64):
        self._grow(capacity)

    def _grow(self, capacity):
        self.capacity = capacity
        self.buffer = bytearray(self.LAYOUT.size * capacity)
        self.flags = bytearray(capacity)
        self._views = ((ctypes.c_char * len(self.buffer)).from_buffer(self.buffer),
                       (ctypes.c_char * capacity).from_buffer(self.flags))
        self.address = ctypes.addressof(self._views[0])
        self.flags_address = ctypes.addressof(self._views[1])

    def reserve(self, n):
        if n > self.capacity:
            self._views = None
            self._grow(max(n, 2 * self.capacity))


class _Call:
    """What became of one operator call in the dispatch mode: whether the operator ran (and what it
    returned or raised) and whether the front end raised the trap, so that an error of the front
    end's own is told from the operator's."""

    __slots__ = ("ran", "result", "error", "trapped", "op")

    def __init__(self):
        self.ran = False
        self.result = None
        self.error = None
        self.trapped = False
        self.op = None  # the injector's op while it is begun and not ended


class _Mode(TorchDispatchMode):
    def __init__(self, front):
        super().__init__()
        self._front = front

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        front = self._front
        kwargs = kwargs or {}
        if front.failed:  # tracing stopped inside an operator: the mode goes at the next hook
            return front.untraced(func, args, kwargs)
        call = _Call()
        try:
            return front.dispatch(func, args, kwargs, call)
        except Exception as error:
            if call.trapped or error is call.error:
                raise  # the trap, or the operator's own error
            # The front end's own: tracing stops; the operator runs exactly once all the same, and
            # an error of its own is the one the program sees.
            front.fail(error, in_operator=True)
            if call.op is not None:  # tracing has stopped: ending it only frees it
                front.lib.op_end(call.op, None, 0, 1)
            if call.error is not None:
                raise call.error
            if call.ran:
                return call.result
            return front.untraced(func, args, kwargs)


class ObserverWatcher:
    """Operators watched by the C++ observer: it follows storages itself (it is `memory` too), and
    is told the layer and the category of what operators make when they change."""

    def __init__(self, observer):
        self.observer = observer
        self.memory = observer
        self.placed = None  # (layer, category) the observer was last told

    def watch(self, on):
        self.observer.watch(1 if on else 0)

    def place(self, layer, category):
        if (layer, category) != self.placed:
            self.placed = (layer, category)
            self.observer.place((layer or "").encode(), category)

    def new_step(self):
        self.observer.new_step()

    def compiling(self, on):
        self.observer.compiling(1 if on else 0)


class DispatchModeWatcher:
    """Operators watched by the Python dispatch mode, which hands each to the front end's dispatch();
    storages are followed in Python (_memory.Memory). The front end reads its own layer at each
    operator, so there is nothing to place, and nothing to do at a new step."""

    def __init__(self, front):
        self.mode = _Mode(front)
        self.memory = Memory(front.lib)

    def watch(self, on):
        if on:
            self.mode.__enter__()
        else:
            self.mode.__exit__(None, None, None)

    def place(self, layer, category):
        pass

    def new_step(self):
        pass

    def compiling(self, on):
        pass  # TorchDynamo compiles nothing while a dispatch mode is on


class OperatorCalls:
    """The front end's part in the dispatch mode: one operator call, its tensors described for the
    injector, measured around the call and named (a mixin of FrontEnd)."""

    def describe(self, descriptors, i, t, entry, written=False):
        """Packs the mpt_tensor of `t` at index i; a non-contiguous float tensor is measured
        through a contiguous copy (kept alive until the operator ends). A written tensor measured
        through a copy is reported written where it lies."""
        dtype = _DTYPES.get(t.dtype, -1)
        shape = t.shape
        ndim = len(shape)
        if ndim > _api.MAX_DIMS:  # the last dimensions fold into the sixth
            folded = 1
            for n in shape[_api.MAX_DIMS - 1:]:
                folded *= n
            shape = tuple(shape[:_api.MAX_DIMS - 1]) + (folded,)
            ndim = _api.MAX_DIMS
        data = 0
        original = t
        if entry is not None and entry.uninitialized:
            pass  # counted, not measured: its values mean nothing yet
        elif dtype >= 0 and t.layout == torch.strided and not t.is_meta and t.numel() > 0:
            if t.is_contiguous():
                data = t.data_ptr()
            elif t.dtype in _MEASURED_DTYPES:  # other dtypes are only read by the loss-scale probe
                t = t.contiguous()
                self.keep.append(t)
                data = t.data_ptr()
        # The injector sees a write through the descriptor only when it points at the tensor's own
        # memory: a copy, or a tensor it does not read (a complex view, a non-contiguous integer
        # tensor), is reported where it lies.
        if written and self.reports_writes and (data == 0 or t is not original):
            self.report_written(original)
        _Descriptors.LAYOUT.pack_into(
            descriptors.buffer, i * _Descriptors.LAYOUT.size, data,
            entry.ident if entry is not None else 0, entry.name_address if entry is not None else 0,
            *(tuple(shape) + _ZEROS[ndim]), ndim, dtype,
            _api.DEVICE_CUDA if t.is_cuda else _api.DEVICE_CPU, 0)

    def report_written(self, t):
        """Tells the injector that `t`'s memory changes outside what it sees of this operator."""
        if t.layout == torch.strided and not t.is_meta and t.numel() > 0:
            self.lib.memory_written(t.data_ptr(), t.numel() * t.element_size())

    def plan(self, info):
        """What the injector would measure of this operator now (cached for the step and layer)."""
        key = (info.name, self.layer)
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = self.lib.op_plan(info.name)
        return plan

    def dispatch(self, func, args, kwargs, call):
        lib = self.lib
        info = self.op_info(func)
        if info.unwatched:
            return func(*args, **kwargs)
        inputs = []
        for position, keyword, written in info.arguments:
            if position < len(args):
                _tensors_in(args[position], written, inputs)
            elif keyword in kwargs:
                _tensors_in(kwargs[keyword], written, inputs)
        if any(_without_data_of_its_own(t) for t, _ in inputs):
            if _SUBCLASSES_DISPATCH_THROUGH_THE_MODE and any(_dispatches_in_python(t) for t, _ in inputs):
                return NotImplemented
            return func(*args, **kwargs)
        adopt = self.memory.adopt
        # A tensor no operator made (torch.from_numpy, a batch from a worker) is data.
        entries = [adopt(t, _api.CAT_DATA, name_of=_data_name, unknown_writes=True) for t, _ in inputs]
        # What the operator makes is named after it and its layer: "conv1.convolution".
        made_by = self.made_by.get((self.layer, info.name))
        if made_by is None:
            made_by = self.made_by[(self.layer, info.name)] = (
                (self.layer + _api.NAME_SEPARATOR if self.layer else "").encode() + info.name)
        plan = 0 if info.unmeasured else self.plan(info)
        if plan == 0:
            op = call.op = lib.op_begin(info.name, None, len(inputs), None, 0)
            try:
                result = _returned(info, args, func(*args, **kwargs))
            except BaseException as error:
                call.error = error
                if self.reports_writes:
                    for t, w in inputs:
                        if w:
                            self.report_written(t)
                call.op = None
                lib.op_end(op, None, 0, 1)
                raise
            call.ran, call.result = True, result
            outputs, places = self.outputs_of(info, inputs, result)
            category = self.output_category
            for t, (place, schema_return) in zip(outputs, places):
                entry = (adopt(t, category, made_by) if place == 0 else
                         adopt(t, category, name_of=lambda _, p=place, r=schema_return: _output_name(info, made_by, p, r)))
                if not info.view:
                    if entry is not None:
                        entry.uninitialized = info.unmeasured
                    # Its tensors are not handed over: what it wrote is reported instead.
                    if self.reports_writes:
                        self.report_written(t)
            call.op = None
            lib.op_end(op, None, len(outputs), 0)
            return result

        n = len(inputs)
        descriptors = self.inputs
        descriptors.reserve(n)
        try:
            for i, (t, w) in enumerate(inputs):
                self.describe(descriptors, i, t, entries[i], w)
                descriptors.flags[i] = w
            op = call.op = lib.op_begin(info.name, descriptors.address, n, descriptors.flags_address, 1)
            try:
                result = _returned(info, args, func(*args, **kwargs))
            except BaseException as error:
                call.error = error
                call.op = None
                lib.op_end(op, None, 0, 1)
                raise
            call.ran, call.result = True, result
            outputs, places = self.outputs_of(info, inputs, result)
            m = len(outputs)
            descriptors = self.outputs
            descriptors.reserve(m)
            category = self.output_category
            for i, t in enumerate(outputs):
                place, schema_return = places[i]
                entry = (adopt(t, category, made_by) if place == 0 else
                         adopt(t, category, name_of=lambda _, p=place, r=schema_return: _output_name(info, made_by, p, r)))
                if entry is not None:
                    entry.uninitialized = False  # the operator wrote it
                self.describe(descriptors, i, t, entry, True)
            call.op = None
            trapped = lib.op_end(op, descriptors.address, m, 0)
        finally:
            self.keep.clear()
        if trapped == _api.TRAPPED:
            call.trapped = True
            _raise_in_callers_frame(FloatingPointError(_trap_text(lib)))
        return result

    def untraced(self, func, args, kwargs):
        """Runs an operator with nothing recorded (tracing stopped while the mode is still on)."""
        return _returned(self.op_info(func), args, func(*args, **kwargs))

    def op_info(self, func):
        info = self.ops.get(func)
        if info is None:
            info = self.ops[func] = _OpInfo(func)
        return info

    @staticmethod
    def outputs_of(info, inputs, result):
        """The tensors an operator wrote: its written arguments, then what it returned besides; and
        for each, where it was returned (place, schema return), as _returned_places() says. A
        written argument it did not return is at place 0, named as the first return would be (it
        is rarely new: its storage was seen as an input)."""
        outputs = [t for t, w in inputs if w]
        places = [None] * len(outputs)
        for t, place, schema_return in _returned_places(info, result):
            i = next((i for i, o in enumerate(outputs) if o is t), None)
            if i is None:
                outputs.append(t)
                places.append((place, schema_return))
            elif places[i] is None:
                places[i] = (place, schema_return)
        return outputs, [p or (0, None) for p in places]
