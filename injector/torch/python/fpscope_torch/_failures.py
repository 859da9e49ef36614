"""How the PyTorch front end fails and traps: an error of its own stops tracing and lets the program
go on (_guarded, FrontEnd.fail); a trap is raised in the program's own frame, as a
FloatingPointError, so that the traceback ends at the line that holds the operator."""
import functools
import os
import sys
import traceback

import torch

from . import _api

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


def guarded_code():
    """The code every method `_guarded` wraps runs in first."""
    return _guarded(lambda self: None).__code__


class _Trapped(FloatingPointError):
    """The exception the C++ observer raises in the program at a trap (it passes no arguments).
    Shown as a FloatingPointError, which it is."""

    def __init__(self, *args):
        from . import _front_end  # the installed front end, whose library holds the message
        if not args and _front_end._front is not None:
            args = (_trap_text(_front_end._front.lib),)
        super().__init__(*args)


_Trapped.__name__ = _Trapped.__qualname__ = "FloatingPointError"
_Trapped.__module__ = "builtins"
