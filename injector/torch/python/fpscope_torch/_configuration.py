"""The run's configuration in the trace's meta (config.*): the framework, device and autocast, every
model and its parameter count, and the precision the parameters are held in."""
import torch

from ._operators import _MEASURED_DTYPES

_PRECISION_WORDS = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}


def _autocast_dtype(device):
    """The dtype autocast runs in on `device` ("cpu", "cuda"), or None when it is off there."""
    if hasattr(torch, "get_autocast_dtype"):  # torch 2.4 on: one function for every device type
        return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    if device == "cuda":
        return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
    if device == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return None


class Configuration:
    """The front end's part in describing the run (a mixin of FrontEnd)."""

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
