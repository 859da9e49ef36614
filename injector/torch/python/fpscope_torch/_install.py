"""Installs the PyTorch front end in a process that traces: wraps backward(), optimizers,
parameters, GradScaler and init_process_group, and starts watching operators (the C++ observer
when it is there, else the dispatch mode). An error while installing leaves the program untraced,
never stopped."""
import atexit
import functools
import os
import sys

import torch

from . import _api, _failures, _front_end, _observer
from ._contract import ENV_TORCH_EAGER
from ._failures import _describe, _Trapped
from ._front_end import FrontEnd, threading_ident


def _started_by_multiprocessing():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            arguments = f.read().split(b"\0")
    except OSError:
        return False
    return b"--multiprocessing-fork" in arguments or any(b"multiprocessing.forkserver" in a for a in arguments)


def install():
    """Installs the front end in this process; does nothing when it does not trace."""
    try:
        _install()
    except Exception as error:
        if _front_end._front is not None:
            _front_end._front.fail(error)
        else:
            _api.front_end_failed(_describe(error))


def _install():
    if _front_end._front is not None:
        return
    # A process multiprocessing started (under the "spawn" or "forkserver" start method: a fresh
    # interpreter of the program) is a DataLoader worker, the fork server, or a rank of a program
    # that starts its ranks itself (torch.multiprocessing.spawn, mp.Process). Its command line tells
    # it: torch is imported while the child prepares, before parent_process() is set, and after
    # sys.argv was given the parent's. A worker is not the program and is not traced, as a forked
    # worker is not; a rank says so by joining a process group: it is traced from then on.
    import multiprocessing
    if multiprocessing.parent_process() is not None or _started_by_multiprocessing():
        _trace_from_init_process_group()
        return
    _install_now()


def _trace_from_init_process_group():
    """Installs the front end when this process joins a process group, under the rank it joined."""
    if not torch.distributed.is_available():
        return
    import torch.distributed.distributed_c10d as c10d
    original_init_group = c10d.init_process_group

    @functools.wraps(original_init_group)
    def init_process_group(*args, **kwargs):
        result = original_init_group(*args, **kwargs)
        c10d.init_process_group = torch.distributed.init_process_group = original_init_group
        try:
            lib = _api.Library()
            local_rank = os.environ.get("LOCAL_RANK", "")
            lib.set_rank(c10d.get_rank(), int(local_rank) if local_rank.isdigit() else -1, c10d.get_world_size(),
                         b"init_process_group")
            _install_now()
            if _front_end._front is not None:
                _front_end._front.process_group_coming()
        except Exception as error:
            if _front_end._front is not None:
                _front_end._front.fail(error)
            else:
                _api.front_end_failed(_describe(error))
        return result

    c10d.init_process_group = init_process_group
    torch.distributed.init_process_group = init_process_group


def _install_now():
    try:
        lib = _api.Library()
    except RuntimeError as error:
        sys.stderr.write("fpscope: the PyTorch front end is off: %s\n" % error)
        return
    if not lib.tracing():
        return
    observer, why_not = _observer.load()
    if observer is None and not os.environ.get(_observer.DISPATCH_MODE_ENV):
        sys.stderr.write("fpscope: operators are watched by the slower Python dispatch mode: %s\n" % why_not)
    front = _front_end._front = FrontEnd(lib, observer)
    lib.log_text(b"torch_operators", b"observer" if observer is not None else b"dispatch-mode")
    if observer is not None:
        observer.trap_exception(_Trapped)
    front.main_thread = threading_ident()

    original_backward = torch.autograd.backward

    def backward(tensors, *args, **kwargs):
        return front.backward(original_backward, tensors, *args, **kwargs)

    backward.__wrapped__ = original_backward
    backward.__doc__ = original_backward.__doc__
    torch.autograd.backward = backward

    original_init = torch.optim.Optimizer.__init__

    def optimizer_init(self, params, defaults):
        original_init(self, params, defaults)
        front.optimizer_created(self)

    optimizer_init.__wrapped__ = original_init
    torch.optim.Optimizer.__init__ = optimizer_init

    original_new = torch.nn.Parameter.__new__

    def parameter_new(cls, data=None, requires_grad=True):
        p = original_new(cls, data, requires_grad)
        front.label_parameter(p)
        return p

    torch.nn.Parameter.__new__ = parameter_new

    # to(), half(), float(), cuda() and their kin: parameters on new storages stay the model's
    # weights, under their names.
    original_apply = torch.nn.Module._apply

    @functools.wraps(original_apply)
    def module_apply(self, fn, *args, **kwargs):
        names = front.parameter_names(self)
        result = original_apply(self, fn, *args, **kwargs)
        if names:
            front.parameters_converted(self, names)
        return result

    torch.nn.Module._apply = module_apply

    _follow_grad_scalers(front)
    _follow_compile(lib, front, dispatch_mode=observer is None)

    if torch.distributed.is_available():
        # Collectives (DDP's all-reduce of the gradient buckets, dist.all_reduce) write tensors on
        # the process group's own threads, below the dispatcher: the front end cannot follow them.
        import torch.distributed.distributed_c10d as c10d
        original_init_group = c10d.init_process_group

        @functools.wraps(original_init_group)
        def init_process_group(*args, **kwargs):
            front.process_group_coming()
            return original_init_group(*args, **kwargs)

        c10d.init_process_group = init_process_group
        torch.distributed.init_process_group = init_process_group

    if observer is None:  # the observer follows storages to their free
        torch.autograd.graph.saved_tensors_hooks(front.pack, front.unpack).__enter__()

    front.ranges.push(_api.RANGE_STEP, "step 0", 0)
    watched = bool(lib.step_watched(0))
    front.follow_modules(True)  # until the first forward has named the model
    front.watch(watched)
    os.register_at_fork(after_in_child=_forget_in_child)
    atexit.register(_finish)


def _follow_compile(lib, front, dispatch_mode):
    """Says in the trace (config.torch_compile) how torch.compile ran, the first time the program
    calls it, and turns it off under `fpscope run --eager`. Compiled, the operators Inductor fuses
    run in generated kernels no watcher sees; under the dispatch mode TorchDynamo compiles nothing
    (it leaves frames alone while a dispatch mode is on), so the program runs eagerly. While
    TorchDynamo compiles (a frame, or a backward it compiles when first needed), operators are not
    watched: what compilation runs on real tensors (copies of the inputs, buffers it benchmarks)
    is no part of the program's computation."""
    original = getattr(torch, "compile", None)
    if original is None:  # torch 1.13
        return
    eager = bool(os.environ.get(ENV_TORCH_EAGER))
    if eager:
        dynamo_config = sys.modules.get("torch._dynamo.config")
        if dynamo_config is not None:
            dynamo_config.disable = True
        else:  # read when TorchDynamo is first imported
            os.environ["TORCH_COMPILE_DISABLE"] = "1"
    how = (b"off (--eager): every operator ran eagerly" if eager
           else b"not compiled: the dispatch mode keeps TorchDynamo off" if dispatch_mode
           else b"compiled")
    said = []

    @functools.wraps(original)
    def compile(*args, **kwargs):
        if not said:
            said.append(True)
            lib.log_text(b"torch_compile", how)
            _pause_while_compiling(front)
            if not eager and not dispatch_mode:
                _measure_compiled_graphs(front)
        return original(*args, **kwargs)

    torch.compile = compile


def _pause_while_compiling(front):
    """Registers TorchDynamo's compilation callbacks (run once around the outermost compilation),
    and keeps TorchDynamo out of the front end's hooks: while a compiled function runs, TorchDynamo
    compiles every Python frame it enters, so the hooks a compiled module's call runs outside its
    graph (the model's own, under the OptimizedModule) would each become a graph of their own, one
    per hook, which the program untraced does not have. Their frames, and all they call, run as
    Python. (Hooks of the modules inside the graph are traced into it, where they do nothing.)"""
    try:
        from torch._dynamo import callback
    except ImportError:  # a torch 2 without them: compilation's operators are watched
        return
    callback.on_compile_start(front.compilation_started)
    callback.on_compile_end(front.compilation_ended)
    try:
        from torch._C._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy
    except ImportError:
        return
    set_code_exec_strategy(_failures.guarded_code(), FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))


def _measure_compiled_graphs(front):
    """Each graph torch.compile's backends make becomes one launch when it runs, named after the
    code it compiles ("compiled Net.forward"), its inputs and outputs measured at its boundary:
    the callable a backend returns is wrapped (torch.compile hands the backend to one of torch's
    wrapper classes, whose call returns it; their call is wrapped, so the backend, its mode and
    options are the program's own)."""
    for name in ("_TorchCompileInductorWrapper", "_TorchCompileAOTInductorWrapper", "_TorchCompileWrapper"):
        cls = getattr(torch, name, None)
        original = getattr(cls, "__call__", None) if isinstance(cls, type) else None
        if original is None or getattr(original, "_fpscope_wrapped", False):
            continue

        def call(self, model_, inputs_, _original=original):
            compiled = _original(self, model_, inputs_)
            return front.compiled_graph(_compiled_code_name(), compiled)

        functools.update_wrapper(call, original)
        call._fpscope_wrapped = True
        cls.__call__ = call


def _compiled_code_name():
    """The qualified name of the code TorchDynamo is compiling ("Net.forward"), asked while it does."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        tx = InstructionTranslator.current_tx()
        code = tx.f_code
        return "compiled " + getattr(code, "co_qualname", code.co_name)
    except Exception:
        return "compiled graph"


def _follow_grad_scalers(front):
    """Wraps GradScaler's scale() and update() (torch.amp's from torch 2.3, torch.cuda.amp's before;
    a class that inherits them is wrapped through its base)."""
    classes = []
    for owner in (getattr(torch, "amp", None), getattr(getattr(torch, "cuda", None), "amp", None)):
        cls = getattr(owner, "GradScaler", None)
        if isinstance(cls, type) and cls not in classes:
            classes.append(cls)
    for cls in classes:
        original_scale = cls.__dict__.get("scale")
        original_update = cls.__dict__.get("update")
        if original_scale is None or original_update is None:
            continue

        def scale(self, outputs, _original=original_scale):
            scaled = _original(self, outputs)
            front.loss_scaled(self, outputs, scaled)
            return scaled

        def update(self, *args, _original=original_update, **kwargs):
            try:
                return _original(self, *args, **kwargs)
            finally:
                front.scale_updated()

        functools.update_wrapper(scale, original_scale)
        functools.update_wrapper(update, original_update)
        cls.scale = scale
        cls.update = update


def _forget_in_child():
    """A forked child (a DataLoader worker) is not traced: it stops watching operators."""
    front, _front_end._front = _front_end._front, None
    if front is not None:
        front.main_thread = threading_ident()  # the child's one thread: it takes everything off
        front.stand_down()
        front.main_thread = None


def _finish():
    front = _front_end._front
    if front is not None and not front.failed:
        try:
            front.watch(False)
            front.ranges.close_all()
        except Exception as error:
            front.fail(error)
