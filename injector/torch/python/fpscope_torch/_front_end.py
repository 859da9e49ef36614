"""The PyTorch front end: operators, modules, steps, the loss and memory, handed to the injector.

What it records and how it names things is documented in docs/pytorch.md. In short:
  - every operator PyTorch dispatches is one kernel launch, named without `aten.` and overload;
    view and metadata operators are counted, not measured; inputs are measured before the
    operator runs, outputs after, by the injector's C++ code on the tensors' memory;
  - steps, phases and layers are ranges of the trainer's convention: step N runs from the end of
    step N-1 to the end of optimizer step N, or to the end of GradScaler.update() for a step whose
    loss an enabled GradScaler scaled; phases forward, backward, optimizer (eval for a module called
    in eval mode); a layer is the qualified name of the innermost module;
  - the value backward() was called on is the step's `loss` (for a loss GradScaler scaled, the value
    before scaling);
  - memory: each tensor storage the operators make is an allocation from first sight to the death
    of the last tensor known to use it; parameters are `weight`, their .grad `gradient`, optimizer
    state `optimizer_state`, the rest `activation`.
"""
import contextlib
import ctypes
import functools
import os
import struct
import sys
import threading
import traceback
import types
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _api
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
_MEASURED_DTYPES = tuple(t for t, d in _DTYPES.items() if d in _api.MEASURED_DTYPES)
# Operators whose outputs hold whatever the memory held before: counted, never measured.
_UNINITIALIZED = {b"empty", b"empty_like", b"empty_strided", b"new_empty", b"new_empty_strided"}
_ZEROS = tuple((0,) * (_api.MAX_DIMS - n) for n in range(_api.MAX_DIMS + 1))
_PRECISION_WORDS = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}
# Modules that wrap the model for data parallelism (torch.nn.parallel).
_WRAPPERS = ("DistributedDataParallel", "DataParallel")


def _autocast_dtype(device):
    """The dtype autocast runs in on `device` ("cpu", "cuda"), or None when it is off there."""
    if hasattr(torch, "get_autocast_dtype"):  # torch 2.4 on: one function for every device type
        return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    if device == "cuda":
        return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
    if device == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return None


_MACHINERY = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
              os.path.dirname(os.path.abspath(__file__)) + os.sep)


def _raise_in_callers_frame(error):
    """Raises `error` (the trap) in the program's own frame that called the operator, at the next
    instruction it runs, so that the traceback ends at the line that holds the operator (`y = x / d`,
    `torch.log(...)`), not in PyTorch's dispatch or the front end. The operator returns first. Under
    a tracer of the program's own (a debugger, coverage) it is raised here instead."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_MACHINERY):
        frame = frame.f_back
    if frame is None or sys.gettrace() is not None:
        raise error

    def at_next_instruction(f, event, arg):
        if event not in ("line", "opcode"):
            return at_next_instruction
        sys.settrace(None)
        f.f_trace = None
        raise error

    frame.f_trace = at_next_instruction
    frame.f_trace_opcodes = True
    sys.settrace(lambda f, event, arg: None)  # tracing on; new frames untraced


def _trap_text(lib):
    """The injector's message of the trap just raised, as the program's FloatingPointError says it
    (the exception's type already says it is a trap)."""
    return lib.trap_message().decode(errors="replace").replace(_api.TRAP_MESSAGE_PREFIX, "fpscope: ", 1)


def _describe(error):
    """'Type: message (file:line)' of an exception, where it was raised; never raises."""
    try:
        frames = traceback.extract_tb(error.__traceback__)
        where = " (%s:%d)" % (os.path.basename(frames[-1].filename), frames[-1].lineno) if frames else ""
        return "%s: %s%s" % (type(error).__name__, error, where)
    except Exception:
        return "an error the front end cannot describe"


def _guarded(method):
    """A front-end method the program calls into (a hook, a wrapper's own part): an error of the
    front end's stops tracing in this process (FrontEnd.fail) instead of reaching the program, and
    the method then returns None. After a failure it does nothing."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        if self.failed:
            self.stand_down()
            return None
        try:
            return method(self, *args, **kwargs)
        except _Trapped:
            raise  # the observer's trap, raised in this thread whatever it was running
        except Exception as error:
            self.fail(error)
            return None
    return guarded


class _OpInfo:
    """What the front end needs to know of one operator overload, worked out once."""

    __slots__ = ("name", "unmeasured", "view", "arguments", "return_names")

    def __init__(self, func):
        self.name = func.overloadpacket.__name__.encode()
        schema = func._schema
        returns = schema.returns
        # A pure view or metadata operator: it returns tensors, each aliasing an input, none written.
        # (An operator that returns nothing, as the in-place _foreach_add_, writes its arguments.)
        self.view = bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)
        self.unmeasured = self.view or self.name in _UNINITIALIZED
        # (position, keyword, written) of each argument that can hold a tensor (Tensor, Tensor?,
        # Tensor[], Tensor?[]); scalars, sizes and dtypes are never looked at.
        self.arguments = [(i, a.name, a.alias_info is not None and a.alias_info.is_write)
                          for i, a in enumerate(schema.arguments) if "Tensor" in str(a.type)]
        # Per return in the schema: the name of a Tensor return ("indices" of sort's "(Tensor values,
        # Tensor indices)"), b"" for an unnamed one or a return of another type.
        self.return_names = [r.name.encode() if r.type.kind() == "TensorType" else b"" for r in returns]


def _returned(info, args, result):
    """What the dispatch mode hands back for an operator's result. A view of a wrapped number (a
    Python scalar PyTorch holds as a 0-dim tensor, as autograd detaches one to save it) comes back
    to Python as a number; the view is the tensor itself, which no gradient touches."""
    if info.unmeasured and result is not None and not isinstance(result, (torch.Tensor, list, tuple)):
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


class _Ranges:
    """The ranges the front end opened, mirrored so they close in order. `changed` is called after
    every push and pop. Gradient hooks may push and pop on the autograd engine's threads while the
    program's thread waits in backward(), and a ctypes call lets go of the GIL: a lock keeps the
    injector's stack and the mirror in the same order."""

    def __init__(self, lib, changed):
        self._lib = lib
        self._open = []  # (category, message)
        self._changed = changed
        self._lock = threading.RLock()

    def push(self, category, message, step=-1):
        with self._lock:
            self._lib.range_push(category, message.encode(), step)
            self._open.append((category, message))
            self._changed()

    def close(self, category):
        """Closes the innermost open range of `category` and any opened inside it."""
        with self._lock:
            if not any(c == category for c, _ in self._open):
                return
            while self._open:
                c, _ = self._open.pop()
                self._lib.range_pop()
                if c == category:
                    break
            self._changed()

    def innermost(self, category):
        for c, m in reversed(self._open):
            if c == category:
                return m
        return None

    def close_all(self):
        with self._lock:
            while self._open:
                self._open.pop()
                self._lib.range_pop()
            self._changed()


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


class FrontEnd:
    def __init__(self, lib, observer=None):
        self.lib = lib
        # Operators are watched by the C++ observer when it is there (it follows storages itself),
        # else by the Python dispatch mode below; `memory` is either, with the same methods.
        self.observer = observer
        self.memory = observer if observer is not None else Memory(lib)
        self.ranges = _Ranges(lib, self.ranges_changed)
        self.step = 0
        # A GradScaler scaled a loss in this step: the step ends at the scaler's update(), not at
        # optimizer.step() (which a step the scaler skips never calls).
        self.scaled_in_step = False
        self.scaled = None  # (weak reference to the scaled loss, the loss it was scaled from)
        self.ops = {}
        self.module_names = weakref.WeakKeyDictionary()
        self.param_names = {}  # id(parameter) -> qualified name, for parameters of named models
        self.mode = _Mode(self)
        self.inputs = _Descriptors()
        self.outputs = _Descriptors()
        self.plans = {}  # (operator, layer) -> the injector's plan, for the current step
        self.made_by = {}  # (layer, operator) -> the name of what the operator makes there
        self.layer = None  # the innermost layer open, as the plan cache keys it
        self.output_category = _api.CAT_ACTIVATION  # what operators make in the current phase
        self.placed = None  # (layer, category) the observer was last told
        self.module_hooks = None  # the global module hooks' handles while they are in
        self.mode_on = False
        self.keep = []  # contiguous copies measured for the operator in flight
        self.configured = False
        self.models = []  # (label, parameters) of every model named, the first first
        self.param_dtypes = {}  # id(parameter) -> its dtype when its model was named
        self.autocast = None  # the autocast dtype in force when the first model first ran
        self.main_thread = None
        self.failed = False  # the front end itself failed: tracing stopped in this process
        self.stood_down = False  # and its hooks and operator watching are off
        # The front end reports every write the operators' tensors do not show, so the injector
        # may reuse an output's statistics for an unchanged input (fpscope/inject_api.h).
        self.reports_writes = bool(lib.report_writes())
        if self.reports_writes:
            self.memory.reports_writes(1)

    # [SECTION] Operators ------------------------------------------------------------------------

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

    def ranges_changed(self):
        self.layer = self.ranges.innermost(_api.RANGE_LAYER)
        optimizer = self.ranges.innermost(_api.RANGE_PHASE) == _api.PHASE_OPTIMIZER
        self.output_category = _api.CAT_WORKSPACE if optimizer else _api.CAT_ACTIVATION
        if self.observer is not None and (self.layer, self.output_category) != self.placed:
            self.placed = (self.layer, self.output_category)
            self.observer.place((self.layer or "").encode(), self.output_category)

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
        inputs = []
        for position, keyword, written in info.arguments:
            if position < len(args):
                _tensors_in(args[position], written, inputs)
            elif keyword in kwargs:
                _tensors_in(kwargs[keyword], written, inputs)
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

    @contextlib.contextmanager
    def paused(self):
        """The front end's own operators are not the program's: they run unwatched (they only
        read, so nothing is reported written when watching resumes)."""
        was_on = self.mode_on
        self.watch(False)
        try:
            yield
        finally:
            self.watch(was_on, resumed=True)

    def watch(self, on, resumed=False):
        """Turns the dispatch mode on or off (off for steps no filter selects)."""
        if on and not self.mode_on:
            if not resumed:
                # Operators that ran unwatched may have written any tensor: what the injector
                # remembered is forgotten, and no storage is known to be uninitialised any more.
                if self.reports_writes:
                    self.lib.memory_written(None, 0)
                self.memory.initialized_all()
            if self.observer is not None:
                self.observer.watch(1)
            else:
                self.mode.__enter__()
            self.mode_on = True
        elif not on and self.mode_on:
            if self.observer is not None:
                self.observer.watch(0)
            else:
                self.mode.__exit__(None, None, None)
            self.mode_on = False

    def follow_modules(self, on):
        """Adds or removes the global module hooks. A step no filter selects runs without them: with
        a global hook, every module call takes nn.Module's slow path, and such a step records no
        operator for a layer to be given to. They stay in until the first forward has named the
        model (its configuration is written then)."""
        if on and self.module_hooks is None:
            import torch.nn.modules.module as modules
            self.module_hooks = (modules.register_module_forward_pre_hook(self.forward_pre_hook),
                                 modules.register_module_forward_hook(self.forward_hook))
        elif not on and self.module_hooks is not None:
            for handle in self.module_hooks:
                handle.remove()
            self.module_hooks = None

    @_guarded
    def process_group_coming(self):
        self.writes_unseen()

    def check_process_group(self):
        """A process group made without the wrapped init_process_group (a module that imported it
        before the front end was installed) stops reuse all the same, before any collective."""
        if self.reports_writes and _distributed_initialized():
            self.writes_unseen()

    def writes_unseen(self):
        """From now on tensors change where the front end cannot see: no statistics are reused."""
        if self.reports_writes:
            self.lib.stop_reuse()
            self.reports_writes = False
            self.memory.reports_writes(0)

    def fail(self, error, in_operator=False):
        """An error of the front end's own (not the program's): tracing stops in this process, said
        once on stderr and in the trace (meta injector.failure); the program goes on untraced.
        Inside an operator the dispatch mode stays on the stack (it cannot leave it from there) and
        passes operators through until the next hook takes it off."""
        if self.failed:
            return
        self.failed = True
        what = _describe(error)
        try:
            self.lib.front_end_failed(b"the PyTorch front end", what.encode(errors="replace"))
        except Exception:
            sys.stderr.write("fpscope: the PyTorch front end failed (%s); the program goes on untraced\n" % what)
        if not in_operator:
            self.stand_down()

    def stand_down(self):
        """After a failure, outside any operator: no module hook, no dispatch mode, no observer.
        Each part is tried on its own. The dispatch mode and the observer's callback belong to the
        program's thread: another (the autograd engine's, running a gradient hook) takes the module
        hooks off only, and the program's thread finishes at its next call into the front end."""
        if self.stood_down:
            return
        parts = [lambda: self.follow_modules(False)]
        if threading_ident() == self.main_thread:
            self.stood_down = True
            parts.append(lambda: self.watch(False))
        for part in parts:
            try:
                part()
            except Exception:
                pass

    # [SECTION] Modules ---------------------------------------------------------------------------

    def name_model(self, root):
        """Names every module and parameter of a model the first time its outermost module runs.
        DistributedDataParallel and DataParallel hold the model as `.module`: names are the model's
        own, as without the wrapper (`conv1`, not `module.conv1`), and the wrapper is the model too.
        A program that trains more than one model (a generator and a discriminator) keeps them
        apart: the first model with parameters keeps its names, each later one's begin with its
        class name (`Discriminator.net.0`), and a number after it where two share a class
        (`Net#2.fc`). A model's own forward is a phase, never a layer."""
        while type(root).__name__ in _WRAPPERS and isinstance(getattr(root, "module", None), torch.nn.Module):
            self.module_names[root] = ""
            root = root.module
        parameters = sum(p.numel() for p in root.parameters())
        label = type(root).__name__
        if parameters and self.models:
            same = sum(1 for name, _ in self.models if name.split("#")[0] == label)
            label = label if same == 0 else "%s#%d" % (label, same + 1)
        prefix = label + "." if parameters and self.models else ""
        for name, module in root.named_modules():
            self.module_names[module] = prefix + name if name else ""
        for name, p in root.named_parameters():
            self.param_names[id(p)] = prefix + name
            self.param_dtypes[id(p)] = p.dtype
            self.memory.label(p, _api.CAT_WEIGHT, (prefix + name).encode())
        if parameters:
            self.models.append((label, parameters))
        if not self.configured:
            self.configure(root)
        elif parameters:
            self.configure_models()

    @_guarded
    def forward_pre_hook(self, module, inputs):
        if threading_ident() != self.main_thread:
            return None
        name = self.module_names.get(module)
        if name is None:
            self.name_model(module)
            name = self.module_names.get(module, "")
        if name == "":  # the model itself: its forward is a phase, not a layer
            self.check_process_group()
            wanted = _api.PHASE_FORWARD if module.training else _api.PHASE_EVAL
            if self.ranges.innermost(_api.RANGE_PHASE) != wanted:
                self.ranges.close(_api.RANGE_PHASE)
                self.ranges.push(_api.RANGE_PHASE, wanted)
            return None
        if not self.mode_on:  # a step no filter selects records no operator: layers are not followed
            return None
        self.ranges.push(_api.RANGE_LAYER, name)
        # Backward: once the gradient of an input has arrived, this module's backward is over.
        if torch.is_grad_enabled():
            for t in _tensor_list(inputs):
                if t.requires_grad:
                    t.register_hook(self.backward_layer_end(name))
        return None

    @_guarded
    def forward_hook(self, module, inputs, output):
        if threading_ident() != self.main_thread:
            return None
        name = self.module_names.get(module, "")
        if name == "" or not self.mode_on:
            return None
        if self.ranges.innermost(_api.RANGE_LAYER) == name:
            self.ranges.close(_api.RANGE_LAYER)
        # Backward: the gradient of this module's output arrives just before its backward operators.
        if torch.is_grad_enabled():
            for t in _tensor_list(output):
                if t.requires_grad and not getattr(t, "_fpscope_layer_hooked", False):
                    t.register_hook(self.backward_layer_hook(name))
                    try:
                        t._fpscope_layer_hooked = True
                    except (AttributeError, RuntimeError):
                        pass
        return None

    def backward_layer_hook(self, name):
        return lambda grad: self.backward_layer_begins(name)

    def backward_layer_end(self, name):
        return lambda grad: self.backward_layer_ends(name)

    # Gradient hooks run on the thread that runs backward: the program's for CPU tensors, the
    # autograd engine's device thread for CUDA ones, while the program's thread waits in backward().
    @_guarded
    def backward_layer_begins(self, name):
        if self.ranges.innermost(_api.RANGE_PHASE) == _api.PHASE_BACKWARD:
            self.ranges.close(_api.RANGE_LAYER)
            self.ranges.push(_api.RANGE_LAYER, name)

    @_guarded
    def backward_layer_ends(self, name):
        if (self.ranges.innermost(_api.RANGE_PHASE) == _api.PHASE_BACKWARD
                and self.ranges.innermost(_api.RANGE_LAYER) == name):
            self.ranges.close(_api.RANGE_LAYER)

    # [SECTION] Backward and optimizer steps --------------------------------------------------------

    def backward(self, original, tensors, *args, **kwargs):
        opened = self.backward_begins(tensors)
        try:
            return original(tensors, *args, **kwargs)
        finally:
            if opened:
                self.backward_ends()

    @_guarded
    def backward_begins(self, tensors):
        """Before backward() on the program's thread: the loss, and the backward phase (True)."""
        if threading_ident() != self.main_thread:
            return False
        single = tensors if isinstance(tensors, torch.Tensor) else (
            tensors[0] if isinstance(tensors, (list, tuple)) and len(tensors) == 1 else None)
        if self.scaled is not None:
            # A loss GradScaler scaled: the step's loss is the value before scaling.
            scaled, unscaled = self.scaled
            self.scaled = None
            if scaled() is single:
                single = unscaled
        if isinstance(single, torch.Tensor) and single.numel() == 1:
            with self.paused():
                loss = single.detach().item()
            self.lib.log_scalar(b"loss", float(loss), self.step)
        self.check_process_group()
        self.ranges.close(_api.RANGE_PHASE)
        self.ranges.push(_api.RANGE_PHASE, _api.PHASE_BACKWARD)
        return True

    @_guarded
    def backward_ends(self):
        self.ranges.close(_api.RANGE_PHASE)

    def optimizer_step(self, optimizer, original, *args, **kwargs):
        watched = self.optimizer_step_begins(optimizer)
        try:
            return original(*args, **kwargs)
        finally:
            if watched is not None:
                self.optimizer_step_ends(optimizer, watched)

    @_guarded
    def optimizer_step_begins(self, optimizer):
        """Before optimizer.step() on the program's thread: whether the step is watched; None on
        another thread."""
        if threading_ident() != self.main_thread:
            return None
        self.check_process_group()
        self.ranges.close(_api.RANGE_PHASE)
        # Labels matter for storages the operators of a watched step met; in a step no filter
        # selects, the next watched step's optimizer labels what is new.
        watched = self.mode_on
        if watched:
            self.label_gradients(optimizer)
        self.ranges.push(_api.RANGE_PHASE, _api.PHASE_OPTIMIZER)
        return watched

    @_guarded
    def optimizer_step_ends(self, optimizer, watched):
        self.ranges.close(_api.RANGE_PHASE)
        if watched:
            self.label_state(optimizer)
        if not self.scaled_in_step:
            self.next_step()

    @_guarded
    def loss_scaled(self, scaler, outputs, scaled):
        """GradScaler.scale(outputs) returned `scaled`. A disabled scaler never skips a step: the
        step then ends at optimizer.step() as without one."""
        if threading_ident() != self.main_thread or not scaler.is_enabled():
            return
        self.scaled_in_step = True
        if isinstance(outputs, torch.Tensor) and isinstance(scaled, torch.Tensor):
            self.scaled = (weakref.ref(scaled), outputs)

    @_guarded
    def scale_updated(self):
        """GradScaler.update() returned: a step whose loss it scaled ends here."""
        if threading_ident() == self.main_thread and self.scaled_in_step:
            self.ranges.close(_api.RANGE_PHASE)
            self.next_step()

    @_guarded
    def label_parameter(self, p):
        # Named by type and shape until a model that holds it runs ('parameter f32[16,8]').
        self.memory.label(p, _api.CAT_WEIGHT, _data_name(p, "parameter"))

    def label_gradients(self, optimizer):
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.memory.label(p.grad, _api.CAT_GRADIENT, (self.param_name(p) + ".grad").encode())

    def label_state(self, optimizer):
        for p, state in optimizer.state.items():
            if not isinstance(p, torch.Tensor):
                continue
            base = self.param_name(p)
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and value.numel() > 1:
                    self.memory.label(value, _api.CAT_OPTIMIZER_STATE, ("%s.%s" % (base, key)).encode())

    def param_name(self, p):
        return self.param_names.get(id(p), "param%d" % (len(self.param_names)))

    def next_step(self):
        self.ranges.close_all()
        self.step += 1
        self.scaled_in_step = False
        self.scaled = None
        self.plans.clear()
        if self.observer is not None:
            self.observer.new_step()
        self.ranges.push(_api.RANGE_STEP, "step %d" % self.step, self.step)
        watched = bool(self.lib.step_watched(self.step))
        self.follow_modules(watched or not self.configured)  # the first forward names the model
        self.watch(watched)

    @_guarded
    def optimizer_created(self, optimizer):
        original = optimizer.step
        front = self

        def step(self, *args, **kwargs):
            return front.optimizer_step(self, original, *args, **kwargs)

        # A bound method, as the class's own: learning-rate schedulers wrap `optimizer.step` and
        # read its __self__ and __func__.
        functools.update_wrapper(step, original.__func__ if hasattr(original, "__func__") else original)
        optimizer.step = types.MethodType(step, optimizer)
        self.lib.log_text(b"optimizer", type(optimizer).__name__.encode())
        for key, value in sorted(optimizer.defaults.items()):
            if key == "lr":
                self.lib.log_text(b"lr", str(value).encode())
            elif isinstance(value, (int, float, bool, str, tuple)) or value is None:
                self.lib.log_text(("optimizer.%s" % key).encode(), str(value).encode())

    # [SECTION] Configuration -------------------------------------------------------------------------

    def configure(self, model):
        self.configured = True
        self.first_model = model
        params = list(model.parameters())
        log = self.lib.log_text
        log(b"framework", ("torch " + torch.__version__).encode())
        device = params[0].device.type if params else "cpu"
        log(b"device", device.encode())
        self.autocast = _autocast_dtype(device)
        if self.autocast is not None:
            log(b"autocast", _PRECISION_WORDS.get(self.autocast, str(self.autocast)).encode())
        self.configure_models()

    def configure_models(self):
        """The models named so far, with their parameters, and the precision they hold them in."""
        log = self.lib.log_text
        models = self.models or [(type(self.first_model).__name__, 0)]  # no model with parameters yet
        log(b"model", ", ".join(label for label, _ in models).encode())
        log(b"parameters", str(sum(n for _, n in models)).encode())
        if len(self.models) > 1:
            for label, n in self.models:
                log(("parameters.%s" % label).encode(), str(n).encode())
        # Parameters by dtype, named by their module: every dtype the program holds is said.
        by_dtype = {}
        for p_id, name in self.param_names.items():
            by_dtype.setdefault(self.param_dtypes.get(p_id), []).append(name.rpartition(".")[0] or name)
        by_dtype.pop(None, None)
        if not by_dtype:
            by_dtype = {torch.float32: []}
        main = max(by_dtype, key=lambda d: len(by_dtype[d]))
        word = lambda d: _PRECISION_WORDS.get(d, str(d).replace("torch.", ""))
        precision = ("amp-" + word(self.autocast)) if self.autocast is not None else word(main)
        others = []
        for dtype, modules in by_dtype.items():
            if dtype == main:
                continue
            named = sorted(set(modules))
            others.append("%s in %s%s" % (word(dtype), ", ".join(named[:3]), " and %d more" % (len(named) - 3)
                                          if len(named) > 3 else ""))
        log(b"precision", (precision + ("; " + "; ".join(others) if others else "")).encode())
        unmeasured = sorted({m for d, modules in by_dtype.items() if d not in _MEASURED_DTYPES for m in modules})
        if unmeasured:
            log(b"unmeasured", ("%s parameters (fpscope measures fp32, fp16 and bf16 tensors): %s" % (
                ", ".join(sorted({word(d) for d in by_dtype if d not in _MEASURED_DTYPES})),
                ", ".join(unmeasured[:6]) + (" and %d more" % (len(unmeasured) - 6) if len(unmeasured) > 6 else ""))).encode())

    # [SECTION] Saved tensors -----------------------------------------------------------------------

    def pack(self, t):
        self.count_saved(t)
        return t

    @_guarded
    def count_saved(self, t):
        # Autograd keeps its own handle on a saved output; count it as a user of the storage.
        if self.memory.seen(t):
            self.memory.adopt(t, _api.CAT_ACTIVATION)

    @staticmethod
    def unpack(t):
        return t


_front = None


class _Trapped(FloatingPointError):
    """The exception the C++ observer raises in the program at a trap (it passes no arguments).
    Shown as a FloatingPointError, which it is."""

    def __init__(self, *args):
        if not args and _front is not None:
            args = (_trap_text(_front.lib),)
        super().__init__(*args)


_Trapped.__name__ = _Trapped.__qualname__ = "FloatingPointError"
_Trapped.__module__ = "builtins"


threading_ident = threading.get_ident


def _distributed_initialized():
    return torch.distributed.is_available() and torch.distributed.is_initialized()
