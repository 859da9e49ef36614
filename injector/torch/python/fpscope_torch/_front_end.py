"""The PyTorch front end: operators, modules, steps, the loss and memory, handed to the injector.

What it records and how it names things is documented in docs/pytorch.md. Its parts, one concern
each: _operators.py (the operator watcher: the C++ observer or the Python dispatch mode, behind one
interface), _training.py (steps, phases and layers from modules, backward(), optimizer.step() and
GradScaler), _configuration.py (the run's configuration), _failures.py (the front end's own failures
and the trap), _memory.py (storages as allocations). FrontEnd holds them together.
"""
import contextlib
import os
import sys
import threading
import weakref

import torch

from . import _api
from ._configuration import Configuration
from ._contract import ENV_UPDATES
from ._failures import _describe, _guarded
from ._operators import DispatchModeWatcher, ObserverWatcher, OperatorCalls, _Descriptors
from ._training import TrainingLoop, _Ranges


class FrontEnd(OperatorCalls, TrainingLoop, Configuration):
    def __init__(self, lib, observer=None):
        self.lib = lib
        # Operators are watched by the C++ observer when it is there (it follows storages itself),
        # else by the Python dispatch mode (_operators.py); `memory` follows storages for either.
        self.watcher = ObserverWatcher(observer) if observer is not None else DispatchModeWatcher(self)
        self.memory = self.watcher.memory
        self.ranges = _Ranges(lib, self.ranges_changed)
        self.step = 0
        # A GradScaler scaled a loss in this step: the step ends at the scaler's update(), not at
        # optimizer.step() (which a step the scaler skips never calls).
        self.scaled_in_step = False
        self.scaled = None  # (weak reference to the scaled loss, the loss it was scaled from)
        self.updates_before = []  # a watched optimizer step's parameters before it (TrainingLoop)
        self.lr_first_step = {}  # id(optimizer) -> (step, lr) of its first step (TrainingLoop.log_learning_rate)
        self.lr_logging = set()  # the optimizers whose rate has changed: logged every step
        self.updates_on = os.environ.get(ENV_UPDATES, "on") != "off"  # fpscope run --updates
        self.ops = {}
        self.module_names = weakref.WeakKeyDictionary()
        self.param_names = {}  # id(parameter) -> qualified name, for parameters of named models
        self.inputs = _Descriptors()
        self.outputs = _Descriptors()
        self.plans = {}  # (operator, layer) -> the injector's plan, for the current step
        self.made_by = {}  # (layer, operator) -> the name of what the operator makes there
        self.layer = None  # the innermost layer open, as the plan cache keys it
        self.output_category = _api.CAT_ACTIVATION  # what operators make in the current phase
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

    # [SECTION] Watching and failing ------------------------------------------------------------

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
                self.operators_ran_unwatched()
            self.watcher.watch(True)
            self.mode_on = True
        elif not on and self.mode_on:
            self.watcher.watch(False)
            self.mode_on = False

    def operators_ran_unwatched(self):
        """Operators that ran unwatched may have written any tensor: what the injector remembered
        is forgotten, and no storage is known to be uninitialised any more."""
        if self.reports_writes:
            self.lib.memory_written(None, 0)
        self.memory.initialized_all()

    @_guarded
    def compilation_started(self, _how=None):
        """TorchDynamo compiles a frame, or a backward when first needed: the operators it runs
        meanwhile on real tensors (copies of the inputs, buffers it tries kernels on) are not the
        program's computation, and are not watched."""
        self.watcher.compiling(True)

    @_guarded
    def compilation_ended(self, _how=None):
        self.watcher.compiling(False)
        if self.mode_on:
            self.operators_ran_unwatched()

    def compiled_graph(self, name, compiled):
        """`compiled`, a graph torch.compile made, as one launch named `name` whenever operators are
        watched (ObserverWatcher only: under the dispatch mode TorchDynamo compiles nothing)."""
        observer = getattr(self.watcher, "observer", None)
        if observer is None:
            return compiled
        encoded = name.encode()

        def run(*args):
            if not self.mode_on or self.failed:
                return compiled(*args)
            # A backend called with its inputs in one list (a "boxed" call) may empty that list.
            tensors = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else args
            try:
                launch = observer.graph_begin(encoded, tensors)
            except Exception as error:
                self.fail(error)
                return compiled(*args)
            try:
                out = compiled(*args)
            except BaseException:
                observer.graph_end(launch, None)
                raise
            observer.graph_end(launch, out if isinstance(out, (list, tuple)) else [out])
            return out

        run.__dict__.update(getattr(compiled, "__dict__", {}))
        run.__wrapped__ = compiled
        return run

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

threading_ident = threading.get_ident


def _distributed_initialized():
    return torch.distributed.is_available() and torch.distributed.is_initialized()
