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

_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# The dtypes whose host parameters the injector copies and compares itself (fpscope_update_before).
_COPIED_BY_INJECTOR = frozenset((torch.float32, torch.float16, torch.bfloat16, torch.float64))


def _update_sums_torch(old, new, grad_nonzero):
    """(changed, nonzero, lost, sum |new - old|, sum (new - old)^2, sum old^2) of a parameter the
    injector does not copy (device memory, another dtype, not contiguous), with torch's operators.
    The differences are taken in float64, and the sums over the elements where they are finite."""
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
        an element). The injector copies contiguous host parameters itself, into memory it keeps
        for the next watched step, and compares them after the step in one pass (no operator, no
        Python per element); the others are copied by the front end's own operators, unwatched."""
        before = []
        lib = self.lib
        with self.paused(), torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None or g.is_sparse or p.dtype not in _DTYPES or not p.is_floating_point():
                        continue
                    if (p.dtype in _COPIED_BY_INJECTOR and p.device.type == "cpu" and g.device.type == "cpu"
                            and g.dtype == p.dtype and p.is_contiguous() and g.is_contiguous()
                            and lib.update_before(id(p), p.data_ptr(), g.data_ptr(), p.numel(), _DTYPES[p.dtype])):
                        before.append((p, None, None))
                    else:
                        before.append((p, p.detach().clone(), g.detach() != 0))
        lib.update_prune()
        return before

    def report_updates(self):
        """After a watched step: each parameter's elements changed, its nonzero-gradient elements
        left unchanged (lost), and the sums of the applied change and of the weight, to the injector.
        A step the optimizer skipped (GradScaler found inf) changes nothing and loses nothing. A
        parameter replaced during the step by one of another element count, dtype or device is
        left out."""
        before, self.updates_before = self.updates_before, []
        with self.paused(), torch.no_grad():
            for p, old, grad_nonzero in before:
                new = p.detach()
                name = self.param_name(p).encode()
                if old is None:  # the injector's copy, compared with host memory only
                    if new.device.type == "cpu" and p.dtype in _COPIED_BY_INJECTOR:
                        new = new.contiguous()
                        self.lib.update_after(id(p), name, new.data_ptr(), new.numel(), _DTYPES[p.dtype], self.step,
                                              None)
                    continue
                if old.numel() != new.numel():
                    continue
                counts = _update_sums_torch(old, new, grad_nonzero)
                self.lib.param_update(name, _DTYPES[p.dtype], self.step, new.numel(), *counts)

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

