"""Steps, phases and layers: ranges of the trainer's convention, from the program's own calls. Step
N runs from the end of step N-1 to the end of optimizer step N, or to the end of GradScaler.update()
for a step whose loss an enabled GradScaler scaled; phases forward, backward, optimizer (eval for a
module called in eval mode); a layer is the qualified name of the innermost module. The value
backward() was called on is the step's `loss` (for a loss GradScaler scaled, the value before
scaling). Parameters, gradients and optimizer state are labelled as they are met."""
import functools
import threading
import types
import weakref

import torch

from . import _api
from ._failures import _guarded
from ._operators import _DTYPES, _data_name, _tensor_list

threading_ident = threading.get_ident
# True while torch.compile traces a function (TorchDynamo reads the call as a constant): the module
# hooks then do nothing, so that they become no part of the compiled graph and make it break
# nowhere the untraced program's would not; torch 1.13 has no torch.compile.
_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)

# Modules that wrap the model, and the attribute that holds it: data parallelism
# (torch.nn.parallel) and torch.compile's OptimizedModule.
_WRAPPERS = {"DistributedDataParallel": "module", "DataParallel": "module", "OptimizedModule": "_orig_mod"}

try:  # a parameter update of host tensors is counted by numpy (no operator); torch does without it
    import numpy as _np
except ImportError:
    _np = None

_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits_of(t):
    """A host tensor's elements as unsigned integers of their width (numpy, sharing its memory)."""
    return t.detach().reshape(-1).view(_INT_OF_SIZE[t.element_size()]).numpy().view("u%d" % t.element_size())


def _magnitude_mask(bits):
    return bits.dtype.type((1 << (8 * bits.dtype.itemsize - 1)) - 1)


class _Scratch:
    """Arrays reused from one watched step to the next, grown as needed. A fresh array of a few
    hundred kilobytes a parameter a step costs its page faults each time, which was most of the
    update counting's time; the copies of the parameters before a step are kept per parameter."""

    def __init__(self):
        self._arrays = {}

    def get(self, key, n, dtype):
        a = self._arrays.get(key)
        if a is None or a.dtype != dtype or a.size < n:
            a = self._arrays[key] = _np.empty(max(n, 1024), dtype)
        return a[:n]

    def keep_only(self, owners):
        """Drops the arrays kept for a parameter (a key ("...", id)) whose id is not in `owners`."""
        for key in [k for k in self._arrays if isinstance(k, tuple) and k[1] not in owners]:
            del self._arrays[key]


def _floats_of(bits, dtype, scratch, key):
    """A floating dtype's bits as numpy floats of at least their precision (bf16 widened to float32
    in a scratch array, the others viewed in place)."""
    if dtype == torch.bfloat16:
        wide = scratch.get(key, bits.size, _np.uint32)
        _np.copyto(wide, bits)
        _np.left_shift(wide, 16, out=wide)
        return wide.view(_np.float32)
    return bits.view({2: _np.float16, 4: _np.float32, 8: _np.float64}[bits.dtype.itemsize])


def _update_sums_numpy(old_bits, new_bits, dtype, grad_nonzero, scratch):
    """(changed, nonzero, lost, sum |new - old|, sum (new - old)^2, sum old^2) of host bits. The
    differences are taken in float64, where the difference of two floats is exact; the sums of
    squares by einsum, one pass and no BLAS (whose threads would contend with the program's)."""
    n = old_bits.size
    flags = scratch.get("flags", n, _np.bool_)
    changed = int(n - _np.count_nonzero(_np.equal(old_bits, new_bits, out=flags)))
    nonzero = int(_np.count_nonzero(grad_nonzero))
    lost = int(_np.count_nonzero(_np.logical_and(grad_nonzero, flags, out=flags)))
    old = _floats_of(old_bits, dtype, scratch, "old")
    applied = _np.subtract(_floats_of(new_bits, dtype, scratch, "new"), old, dtype=_np.float64,
                           out=scratch.get("applied", n, _np.float64))
    if not _np.isfinite(applied, out=flags).all():  # the elements where both are finite only
        applied, old = applied[flags], old[flags]
    weight = scratch.get("weight", applied.size, _np.float64)
    _np.copyto(weight, old)
    applied_sq = float(_np.einsum("i,i->", applied, applied))
    return (changed, nonzero, lost, float(_np.abs(applied, out=applied).sum()), applied_sq,
            float(_np.einsum("i,i->", weight, weight)))


def _update_sums_torch(old, new, grad_nonzero):
    """The same of device tensors, with torch's operators."""
    bits = _INT_OF_SIZE[old.element_size()]
    changed = old.view(bits) != new.view(bits)
    old64 = old.double().reshape(-1)
    applied = new.double().reshape(-1) - old64
    if not bool(torch.isfinite(applied).all()):
        finite = torch.isfinite(applied)
        applied, old64 = applied[finite], old64[finite]
    return (int(changed.sum()), int(grad_nonzero.sum()), int((grad_nonzero & ~changed).sum()),
            float(applied.abs().sum()), float(applied.dot(applied)), float(old64.dot(old64)))


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


class TrainingLoop:
    """The front end's part in the training loop: module hooks, backward(), optimizer.step() and
    GradScaler, and the ranges they open and close (a mixin of FrontEnd)."""

    def ranges_changed(self):
        self.layer = self.ranges.innermost(_api.RANGE_LAYER)
        optimizer = self.ranges.innermost(_api.RANGE_PHASE) == _api.PHASE_OPTIMIZER
        self.output_category = _api.CAT_WORKSPACE if optimizer else _api.CAT_ACTIVATION
        self.watcher.place(self.layer, self.output_category)

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

    def name_model(self, root):
        """Names every module and parameter of a model the first time its outermost module runs.
        DistributedDataParallel and DataParallel hold the model as `.module`, torch.compile's
        OptimizedModule as `._orig_mod`: names are the model's own, as without the wrapper (`conv1`,
        not `module.conv1`), and the wrapper is the model too.
        A program that trains more than one model (a generator and a discriminator) keeps them
        apart: the first model with parameters keeps its names, each later one's begin with its
        class name (`Discriminator.net.0`), and a number after it where two share a class
        (`Net#2.fc`). A model's own forward is a phase, never a layer."""
        while isinstance(getattr(root, _WRAPPERS.get(type(root).__name__, " "), None), torch.nn.Module):
            self.module_names[root] = ""
            root = getattr(root, _WRAPPERS[type(root).__name__])
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
        if _compiling() or threading_ident() != self.main_thread:
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
        if _compiling() or threading_ident() != self.main_thread:
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
            if self.updates_on:
                self.updates_before = self.parameters_before(optimizer)
        self.ranges.push(_api.RANGE_PHASE, _api.PHASE_OPTIMIZER)
        return watched

    @_guarded
    def optimizer_step_ends(self, optimizer, watched):
        self.ranges.close(_api.RANGE_PHASE)
        self.log_learning_rate(optimizer)
        if watched:
            self.label_state(optimizer)
            self.report_updates()
        if not self.scaled_in_step:
            self.next_step()

    # [SECTION] Parameter updates (docs/statistics.md, "Parameter updates") ------------------------

    def parameters_before(self, optimizer):
        """A watched step's floating parameters that have a dense gradient, before the step: a copy
        of each (its bytes again, for the step's length) and where its gradient is nonzero (a byte
        an element). Host tensors are copied and compared by numpy, which costs no operator, into
        arrays kept for the next watched step; device tensors by the front end's own operators,
        unwatched."""
        before = []
        scratch = self.update_scratch
        with self.paused(), torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None or g.is_sparse or p.dtype not in _DTYPES or not p.is_floating_point():
                        continue
                    if _np is not None and p.device.type == "cpu" and g.device.type == "cpu":
                        bits, grad_bits = _bits_of(p), _bits_of(g)
                        old = scratch.get(("before", id(p)), bits.size, bits.dtype)
                        _np.copyto(old, bits)
                        magnitude = scratch.get(("grad", id(p)), grad_bits.size, grad_bits.dtype)
                        _np.bitwise_and(grad_bits, _magnitude_mask(grad_bits), out=magnitude)
                        nonzero = _np.not_equal(magnitude, 0, out=scratch.get(("nonzero", id(p)), magnitude.size, _np.bool_))
                        before.append((p, old, nonzero))
                    else:
                        before.append((p, p.detach().clone(), g.detach() != 0))
        scratch.keep_only({id(p) for p, _, _ in before})
        return before

    def report_updates(self):
        """After a watched step: each parameter's elements changed, its nonzero-gradient elements
        left unchanged (lost), and the sums of the applied change and of the weight, to the injector.
        A step the optimizer skipped (GradScaler found inf) changes nothing and loses nothing. The
        sums are in double, where the difference of two floats is exact and finite exactly where
        both are; they take the elements where it is."""
        before, self.updates_before = self.updates_before, []
        with self.paused(), torch.no_grad():
            for p, old, grad_nonzero in before:
                new = p.detach()
                if (old.numel() if isinstance(old, torch.Tensor) else old.size) != new.numel():
                    continue  # replaced, not updated
                if isinstance(old, torch.Tensor):
                    counts = _update_sums_torch(old, new, grad_nonzero)
                else:
                    counts = _update_sums_numpy(old, _bits_of(new), p.dtype, grad_nonzero, self.update_scratch)
                self.lib.param_update(self.param_name(p).encode(), _DTYPES[p.dtype], self.step, new.numel(), *counts)

    def log_learning_rate(self, optimizer):
        """The scalar `lr` (the first parameter group's of the first optimizer that steps) every
        step once it has differed from its first step's: a learning-rate schedule's curve. The rate
        of that first step is logged then too, at its step."""
        if self.lr_first_step and id(optimizer) not in self.lr_first_step:
            return
        try:
            lr = float(optimizer.param_groups[0]["lr"])
        except (KeyError, IndexError, TypeError, ValueError):
            return
        first = self.lr_first_step.setdefault(id(optimizer), (self.step, lr))
        if id(optimizer) not in self.lr_logging:
            if lr == first[1]:
                return
            self.lr_logging.add(id(optimizer))
            self.lib.log_scalar(b"lr", first[1], first[0])
        self.lib.log_scalar(b"lr", lr, self.step)

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

    @_guarded
    def parameter_names(self, module):
        """The ids and names of a module's own parameters (name None for one no model run has named
        yet), taken before to(), half() or cuda() give it parameters on new storages."""
        return {key: (id(p), self.param_names.get(id(p))) for key, p in module._parameters.items() if p is not None}

    @_guarded
    def parameters_converted(self, module, names):
        """Module._apply returned: the module's parameters hold new storages (the same Parameter
        objects, or new ones). Each is a weight again, under its name; the storage it left is freed
        when nothing else uses it."""
        for key, p in module._parameters.items():
            if p is None or key not in names:
                continue
            old_id, name = names[key]
            if old_id != id(p):  # a new Parameter: the old one's id may be another object's later
                self.param_names.pop(old_id, None)
                self.param_dtypes.pop(old_id, None)
            if name is None:
                self.memory.label(p, _api.CAT_WEIGHT, _data_name(p, "parameter"))
                continue
            self.param_names[id(p)] = name
            self.param_dtypes[id(p)] = p.dtype
            self.memory.label(p, _api.CAT_WEIGHT, name.encode())

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
        self.watcher.new_step()
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

