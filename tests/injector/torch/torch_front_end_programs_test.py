"""End-to-end tests of the PyTorch front end on programs that go wrong or do something unusual: a
NaN planted in a layer, --trap, intended infinities (attention masks), GradScaler's steps, the
front end's own failures, schedulers, DataLoader workers, DDP ranks, a program without torch and a
user's own sitecustomize.

Usage: torch_front_end_programs_test.py --fpscope PATH [--torch-operators observer|dispatch-mode]
       [--mptrain PATH] [--data-dir DIR] [unittest arguments]
"""
import json
import os

import torch_test_support as support
from torch_test_support import (DDP_PROGRAM, OUTSIDE_DOMAIN, PLANTED, PYTHON, SCALED, SPAWNED_DDP_PROGRAM,
                                TORCH_MAJOR, losses, run)

FPSCOPE = OPERATORS = MPTRAIN = DATA_DIR = None


class FrontEndTest(support.FrontEndCase):
    def test_a_failure_of_the_front_end_stops_tracing_and_the_program_goes_on(self):
        script = self.write("planted.py", PLANTED)
        plain = run([PYTHON, script], self.dir)
        self.assertEqual(len(losses(plain.stdout)), 4)
        # Before an operator runs (its plan), after it ran (its outputs), and in a module hook (a
        # range pushed): the dispatch mode meets the first two, both ways meet the third.
        parts = ["push"] if OPERATORS == "observer" else ["plan", "outputs_of", "push"]
        for part in parts:
            with self.subTest(part=part):
                trace, traced = self.trace(script, args=[part])
                # Every operator ran exactly once: the program computed what it computes untraced,
                # and the front end's dispatch mode is off.
                self.assertEqual(losses(traced.stdout), losses(plain.stdout))
                self.assertIn("counter 4.0", traced.stdout)
                self.assertIn("dispatch modes 0", traced.stdout)
                self.assertIn("tracing stopped in process", traced.stderr)
                self.assertIn("the PyTorch front end failed (RuntimeError: planted in %s" % part, traced.stderr)
                failure = self.query(trace, "SELECT value FROM meta WHERE key = 'injector.failure'")
                self.assertEqual(len(failure), 1, traced.stderr)
                self.assertTrue(failure[0][0].startswith("the PyTorch front end: RuntimeError: planted in %s (" % part),
                                failure[0][0])
                # The trace keeps what came before the failure, and nothing after it.
                steps = self.query(trace, "SELECT DISTINCT step FROM v_kernels WHERE kernel = 'convolution'")
                self.assertEqual({s for (s,) in steps}, {0, 1})
                ended = dict(self.query(trace, "SELECT key, value FROM meta WHERE key IN ('end_reason', 'exit_code')"))
                self.assertEqual(ended, {"end_reason": "exited", "exit_code": "0"})

    def test_trap_raises_floating_point_error_at_the_users_line(self):
        script = self.write("nan.py", """
            import torch
            class Model(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = torch.nn.Linear(4, 4)
                def forward(self, x):
                    return torch.log(self.lin(x) - 100.0)  # the line that makes NaN
            m = Model()
            m(torch.ones(2, 4))
        """)
        trace, p = self.trace(script, "--trap", "nonfinite", check=False)
        self.assertIn("FloatingPointError: fpscope: first NaN made by log", p.stderr)
        self.assertIn("step 0", p.stderr)
        self.assertIn("in log at index 0", p.stderr)  # an output is named after the op (and layer) that made it
        self.assertIn("the line that makes NaN", p.stderr)  # the traceback shows the user's line
        first = self.query(trace, "SELECT kernel, step FROM v_first_nonfinite")
        self.assertEqual(first, [("log", 0)])
        self.assertEqual(p.returncode, 1)  # the exception ended the program, as any uncaught one does

    def test_grad_scaler_operators_become_loss_scale_events(self):
        # Debian's torch 1.13 has no CPU kernels for GradScaler's two operators, so the program
        # registers ones that follow their documented semantics and calls them as GradScaler does.
        script = self.write("scaler.py", """
            import torch
            lib = torch.library.Library("aten", "IMPL", "CPU")
            def unscale(grads, found_inf, inv_scale):
                for g in grads:
                    if not torch.isfinite(g).all():
                        found_inf.fill_(1.0)
                    g.mul_(inv_scale)
            def update(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
                if found_inf.item() > 0:
                    scale.mul_(backoff_factor)
                    growth_tracker.fill_(0)
                elif growth_tracker.item() + 1 == growth_interval:
                    scale.mul_(growth_factor)
                    growth_tracker.fill_(0)
                else:
                    growth_tracker.add_(1)
                return scale
            lib.impl("_amp_foreach_non_finite_check_and_unscale_", unscale)
            lib.impl("_amp_update_scale_", update)
            scale = torch.full((1,), 65536.0)
            tracker = torch.zeros(1, dtype=torch.int32)
            for bad in [True, False, False, True]:
                grads = [torch.tensor([1.0, float("inf") if bad else 2.0])]
                found = torch.zeros(1)
                torch._amp_foreach_non_finite_check_and_unscale_(grads, found, 1.0 / scale)
                before = scale.item()
                torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2)
                print(before, found.item(), scale.item(), tracker.item())
        """)
        trace, p = self.trace(script)
        expected = [tuple(float(v) for v in line.split()) for line in p.stdout.splitlines()]
        events = self.query(trace, "SELECT scale, found_inf, scale_after, event FROM v_loss_scale ORDER BY t_ns")
        self.assertEqual([(b, f, a) for b, f, a, _ in events], [(b, f, a) for b, f, a, _ in expected])
        self.assertEqual([e for *_, e in events], ["backoff", "unchanged", "growth", "backoff"])
        self.assertEqual(self.query(trace, "SELECT growth_tracker FROM loss_scale ORDER BY t_ns"),
                         [(int(t),) for *_, t in expected])

    def test_a_step_with_grad_scaler_ends_at_its_update_skipped_or_not(self):
        # An enabled scaler's step runs from the end of one update() to the end of the next, the
        # marker op between step() and update() included, whether the scaler skipped
        # optimizer.step() or not. A disabled one leaves the rule as without it: the step ends at
        # optimizer.step().
        script = self.write("scaled.py", SCALED)
        trace, p = self.trace(script)
        enabled = "enabled True" in p.stdout
        def steps(kernel, phase="%"):
            return [s for (s,) in self.query(trace, "SELECT step FROM v_kernels WHERE kernel = ? AND ifnull(phase, '')"
                                                    " LIKE ? ORDER BY id", kernel, phase)]
        self.assertEqual(steps("convolution"), [0, 1, 2, 3])
        if enabled:
            self.assertEqual(steps("neg"), [0, 1, 2, 3])
            self.assertEqual(steps("add_", "optimizer"), [0] * 4 + [2] * 4 + [3] * 4)  # SGD, four parameters
        else:
            self.assertEqual(steps("neg"), [1, 2, 3, 4])
            self.assertEqual(steps("add_", "optimizer"), [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4)
        # The loss of each step is the value the program scaled, not the scaled one.
        recorded = self.query(trace, "SELECT s.step, s.value FROM scalars s JOIN strings n ON n.id = s.name_id"
                                     " WHERE n.value = 'loss' ORDER BY s.step")
        self.assertEqual(recorded, list(enumerate(losses(p.stdout))))
        if enabled:
            events = self.query(trace, "SELECT step, event, found_inf, skipped FROM loss_scale ORDER BY t_ns")
            self.assertEqual(events, [(0, "unchanged", 0, 0), (1, "backoff", 1, 1), (2, "unchanged", 0, 0),
                                      (3, "unchanged", 0, 0)])

    def test_nan_planted_in_a_layer_at_one_step(self):
        script = self.write("planted.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            class Shift(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.amount = 0.0
                def forward(self, x):
                    return torch.sqrt(x * x + 1.0 - self.amount)  # NaN once amount exceeds 1
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1 = nn.Linear(8, 8)
                    self.act = Shift()
                    self.fc2 = nn.Linear(8, 2)
                def forward(self, x):
                    return self.fc2(self.act(self.fc1(x)))
            net = Net()
            opt = torch.optim.SGD(net.parameters(), lr=0.01)
            x = torch.randn(4, 8)
            for step in range(5):
                net.act.amount = 1e6 if step == 3 else 0.0
                opt.zero_grad()
                net(x).square().mean().backward()
                opt.step()
        """)
        trace, _ = self.trace(script)
        self.assertEqual(self.query(trace, "SELECT kernel, layer, phase, step FROM v_first_nonfinite"),
                         [("sqrt", "act", "forward", 3)])
        # Why: sqrt read negative values, which the subtraction wrote at step 3, its output's range
        # jumping there.
        why = json.loads(run([FPSCOPE, "report", "--section", "why", "--format", "json", trace], self.dir).stdout)["why"]
        cause = why["causes"][0]
        self.assertEqual(cause["kind"], "outside_domain")
        self.assertEqual(cause["step"], 3)
        self.assertEqual(self.query(trace, "SELECT kernel, layer FROM v_kernels WHERE id = ?", cause["kernel_id"]),
                         [("sqrt", "act")])
        self.assertEqual(self.query(trace, "SELECT role, min < -9e5 FROM tensors WHERE id = ?", cause["tensor_id"]),
                         [("in", 1)])
        self.assertIn("the square root of a negative number is NaN; sub (act) wrote it at step 3", cause["summary"])
        link = why["chain"][0]
        self.assertEqual(self.query(trace, "SELECT kernel, layer FROM v_kernels WHERE id = ?", link["writer_kernel_id"]),
                         [("sub", "act")])
        self.assertGreaterEqual(link["jump_log2"], 4)
        # advise writes mptrain's op lists, which a PyTorch program's operators do not map to: it says
        # so and writes none.
        advice = os.path.join(self.dir, "advice")
        said = run([FPSCOPE, "advise", trace, "-o", advice], self.dir).stdout
        self.assertIn("No op lists written: this trace is of a PyTorch program", said)
        self.assertIn("Loss scaling: ", said)
        self.assertFalse(os.path.exists(advice))
        trace, p = self.trace(script, "--trap", "nan", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("FloatingPointError: fpscope: first NaN made by sqrt (layer act, step 3, phase forward)",
                      p.stderr)
        self.assertIn("NaN once amount exceeds 1", p.stderr)
        # The trace holds everything up to the trap, and nothing of the steps after it.
        self.assertEqual(self.query(trace, "SELECT max(step) FROM v_kernels"), [(3,)])
        # The report says the trap ended the run.
        end = json.loads(run([FPSCOPE, "report", "--section", "summary", "--format", "json", trace],
                             self.dir).stdout)["run"]["end"]
        self.assertEqual(end["trap"], self.query(trace, "SELECT value FROM meta WHERE key = 'trap.message'")[0][0])
        self.assertIn("stopped by --trap: first NaN made by sqrt (layer act, step 3, phase forward)",
                      run([FPSCOPE, "report", "--section", "summary", trace], self.dir).stdout)

    def test_why_names_a_function_given_values_outside_its_domain(self):
        script = self.write("domain.py", OUTSIDE_DOMAIN)
        for function, rule in (("log", "the logarithm of a negative number is NaN"),
                               ("acos", "acos and asin of a number outside [-1, 1] are NaN")):
            trace, _ = self.trace(script, args=(function, "2"))
            self.assertEqual(self.query(trace, "SELECT kernel, layer, step FROM v_first_nonfinite"), [(function, "1", 2)])
            why = json.loads(run([FPSCOPE, "report", "--section", "why", "--format", "json", trace],
                                 self.dir).stdout)["why"]
            cause = why["causes"][0]
            self.assertEqual(cause["kind"], "outside_domain", function)
            self.assertIn(rule, cause["summary"])
            self.assertIn("sub (1) wrote it at step 2", cause["summary"])

    ATTENTION = """
        import sys, torch, torch.nn as nn, torch.nn.functional as F
        torch.manual_seed(0)
        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(16, 48)
            def forward(self, x, mask):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                scores = (q @ k.transpose(-2, -1)) / 4.0
                scores = scores.masked_fill(mask, float("-inf"))  # intended -inf
                return F.softmax(scores, dim=-1) @ v
        att = Attention()
        x = torch.randn(2, 5, 16)
        mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)  # causal
        if sys.argv[1] == "fully-masked":
            mask[3] = True  # row 3 sees nothing: softmax of all -inf is NaN, a real bug
        out = att(x, mask)
        out.sum().backward()
        print("finite", bool(torch.isfinite(out).all()))
    """

    def test_masked_fill_minus_inf_is_intended(self):
        script = self.write("attention.py", self.ATTENTION)
        trace, p = self.trace(script, "--trap", "nonfinite", args=["causal"])
        self.assertEqual(p.stdout.strip(), "finite True")  # no trap: the -inf were intended
        self.assertEqual(self.query(trace, "SELECT count(*) FROM v_first_nonfinite"), [(0,)])
        # Recorded all the same, flagged as allowed; the softmax that turns them into zeros is clean.
        self.assertEqual(self.query(trace, "SELECT k.kernel, n.kind, n.origin, n.allowed FROM nonfinite n"
                                           " JOIN v_kernels k ON k.id = n.kernel_id"),
                         [("masked_fill", "-inf", 1, 1)])
        report = run([FPSCOPE, "report", "--format", "json", trace], self.dir)
        summary = json.loads(report.stdout)
        text = json.dumps(summary)
        self.assertIn('"allowed_nonfinite_tensors": 1', text)
        self.assertIn('"nonfinite_tensors": 0', text)
        # Without the rule the same values are the run's first non-finite origin, and trap.
        trace, p = self.trace(script, "--allow", "none", args=["causal"])
        self.assertEqual(self.query(trace, "SELECT kernel, value FROM v_first_nonfinite"), [("masked_fill", "-inf")])
        _, p = self.trace(script, "--allow", "none", "--trap", "inf", args=["causal"], check=False)
        self.assertIn("FloatingPointError: fpscope: first -Inf made by masked_fill", p.stderr)

    def test_pytorchs_own_causal_mask_is_intended_and_a_later_nan_is_found(self):
        """nn.Transformer's causal mask is torch.full(..., -inf) then triu, added to the attention
        scores by the layer's matmul: intended from end to end, so the first non-finite value the
        trace names is the NaN the program makes at step 3."""
        script = self.write("causal.py", """
            import torch, torch.nn as nn
            torch.manual_seed(0)
            torch.set_num_threads(1)
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.block = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
                    self.head = nn.Linear(16, 4)
                    self.scale = 1.0
                def forward(self, x):
                    mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
                    return self.head(self.block(x, src_mask=mask) * self.scale)
            model = Model()
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            x = torch.randn(2, 6, 16)
            for step in range(5):
                model.scale = float("nan") if step == 3 else 1.0
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()
        """)
        trace, _ = self.trace(script)
        masks = self.query(trace, "SELECT DISTINCT k.kernel, n.allowed FROM nonfinite n JOIN v_kernels k"
                                  " ON k.id = n.kernel_id WHERE k.step < 3 ORDER BY k.kernel")
        self.assertIn(("full", 1), masks)
        self.assertIn(("triu", 1), masks)
        self.assertEqual({a for _, a in masks}, {1})  # every -inf of the first steps was intended
        self.assertEqual(self.query(trace, "SELECT kernel, layer, step, value FROM v_first_nonfinite"),
                         [("mul", None, 3, "nan")])  # in the model's own forward, after the block
        _, p = self.trace(script, "--trap", "nonfinite", check=False)
        self.assertIn("FloatingPointError: fpscope: first NaN made by mul (step 3, phase forward)", p.stderr)

    def test_a_fully_masked_row_is_still_caught(self):
        script = self.write("attention.py", self.ATTENTION)
        trace, p = self.trace(script, "--trap", "nan", args=["fully-masked"], check=False)
        self.assertIn("FloatingPointError: fpscope: first NaN made by _softmax (step 0, phase forward)", p.stderr)
        self.assertEqual(self.query(trace, "SELECT kernel, value FROM v_first_nonfinite"), [("_softmax", "nan")])

    def test_bad_allow_rule_is_refused(self):
        script = self.write("attention.py", self.ATTENTION)
        _, p = self.trace(script, "--allow", "masked_fill*", args=["causal"], check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--allow: allow rule 'masked_fill*' is not GLOB:KINDS", p.stderr)

    def test_scheduler_workers_clipping_and_eval(self):
        # What real training scripts use around the model: a learning-rate scheduler (it wraps
        # optimizer.step), DataLoader worker processes (forked: not traced), gradient clipping, and
        # an evaluation under no_grad in eval mode.
        script = self.write("utilities.py", """
            import torch, torch.nn as nn
            from torch.utils.data import DataLoader, TensorDataset
            torch.manual_seed(0)
            data = TensorDataset(torch.randn(96, 10), torch.randint(0, 3, (96,)))
            def untraced(worker):  # a forked worker is not traced: nothing of the program's tracing left on
                assert torch._C._len_torch_dispatch_stack() == 0
            loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=2, worker_init_fn=untraced)
            net = nn.Sequential(nn.Linear(10, 32), nn.Dropout(0.1), nn.ReLU(), nn.Linear(32, 3))
            opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=6)
            for x, y in loader:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(net(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
                sched.step()
                print("loss", sched.last_epoch, loss.item().hex())
            net.eval()
            with torch.no_grad():
                print("eval", net(torch.ones(2, 10)).sum().item().hex())
        """)
        plain = run([PYTHON, script], self.dir)
        trace, traced = self.trace(script)
        self.assertEqual(traced.stdout, plain.stdout)  # losses and the evaluation, bit for bit
        self.assertEqual(self.query(trace, "SELECT count(DISTINCT step) FROM v_kernels WHERE phase = 'optimizer'"),
                         [(6,)])
        self.assertEqual(self.query(trace, "SELECT count(*) FROM v_kernels WHERE phase = 'eval'"
                                           " AND kernel = 'addmm'"), [(2,)])
        self.assertEqual(self.query(trace, "SELECT count(*) FROM scalars s JOIN strings n ON n.id = s.name_id"
                                           " WHERE n.value = 'loss'"), [(6,)])

    def test_spawned_data_loader_workers_are_not_traced(self):
        # Workers started by "spawn" are fresh interpreters that import torch: they stay out of the
        # trace, as forked workers do, and the trace holds the one training process.
        script = self.write("spawned.py", """
            import torch, torch.nn as nn
            from torch.utils.data import DataLoader, TensorDataset
            if __name__ == "__main__":
                torch.manual_seed(0)
                data = TensorDataset(torch.randn(48, 10), torch.randint(0, 3, (48,)))
                loader = DataLoader(data, batch_size=16, num_workers=2, multiprocessing_context="spawn")
                net = nn.Linear(10, 3)
                opt = torch.optim.SGD(net.parameters(), lr=0.1)
                for x, y in loader:
                    opt.zero_grad()
                    loss = nn.functional.cross_entropy(net(x), y)
                    loss.backward()
                    opt.step()
                    print("loss", loss.item().hex())
        """)
        plain = run([PYTHON, script], self.dir)
        trace, traced = self.trace(script)
        self.assertEqual(traced.stdout, plain.stdout)
        self.assertEqual(self.query(trace, "SELECT count(*) FROM processes"), [(1,)])
        self.assertEqual(self.query(trace, "SELECT count(DISTINCT step) FROM v_kernels WHERE phase = 'optimizer'"),
                         [(3,)])

    def test_ddp_ranks_land_in_one_trace(self):
        """A DistributedDataParallel program (gloo on the CPU) of two ranks: one trace, each rank's
        operators under the model's own layer names, losses bit-identical with and without
        tracing. torch 2 launches it with torchrun, whose elastic agent (a Python process that
        imports torch and only starts the ranks) is left out of the trace; torch 1.13's torchrun
        does not run under Python 3.11, so the ranks are started by hand with RANK and WORLD_SIZE,
        as torchrun sets them."""
        script = self.write("ddp.py", DDP_PROGRAM)
        torchrun = os.path.join(os.path.dirname(PYTHON), "torchrun")
        if TORCH_MAJOR >= 2:
            self.assertTrue(os.path.exists(torchrun), torchrun)

        def launch():
            port = support.free_port()
            if TORCH_MAJOR >= 2:
                return [torchrun, "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(port),
                        script]
            return ["/bin/sh", "-c", "export MASTER_ADDR=127.0.0.1 MASTER_PORT=%d WORLD_SIZE=2; "
                    "RANK=0 %s %s & RANK=1 %s %s; wait" % (port, PYTHON, script, PYTHON, script)]

        out = os.path.join(self.dir, "ddp.sqlite")
        plain = support.run_ranks(lambda: launch(), self.dir)
        traced = support.run_ranks(lambda: [FPSCOPE, "run", "-q", "--force", "-o", out, "--torch-operators", OPERATORS,
                                            "--"] + launch(), self.dir)
        self.assertEqual(traced.stdout, plain.stdout)
        self.assertEqual(plain.stdout.count("loss"), 4)
        self.assertEqual(self.query(out, "SELECT rank, world_size, rank_source, ended FROM processes ORDER BY rank"),
                         [(0, 2, "RANK", "exited"), (1, 2, "RANK", "exited")])
        idle = "1" if TORCH_MAJOR >= 2 else "0"  # the agent
        self.assertEqual(self.query(out, "SELECT key, value FROM meta WHERE key IN ('idle_processes', 'traced_processes')"
                                         " ORDER BY key"), [("idle_processes", idle), ("traced_processes", "2")])
        # The model's own names (DDP holds it as `.module`), in forward and backward, on both ranks.
        layers = self.query(out, "SELECT rank, layer, phase, count(*) FROM v_kernels WHERE layer IS NOT NULL "
                                 "GROUP BY rank, layer, phase ORDER BY 1, 2, 3")
        self.assertEqual([(r, l, p) for r, l, p, _ in layers],
                         [(r, l, p) for r in (0, 1) for l in ("conv1", "fc1") for p in ("backward", "forward")])
        self.assertEqual(self.query(out, "SELECT count(DISTINCT rank) FROM scalars s JOIN strings n ON n.id = s.name_id "
                                         "WHERE n.value = 'loss'"), [(2,)])
        # The step ranges are the ranks' own: four optimizer steps each.
        self.assertEqual(self.query(out, "SELECT rank, count(*) FROM nvtx_ranges WHERE kind = 'step' AND step > 0"
                                         " GROUP BY rank"), [(0, 4), (1, 4)])
        # The all-reduce writes the gradient buckets on gloo's threads, out of the front end's sight:
        # no statistics are reused once the process group exists.
        self.assertEqual(self.query(out, "SELECT count(*) FROM meta WHERE key = 'injector.reused_input_stats'"), [(0,)])

    def test_ranks_the_program_spawns_are_traced_under_the_rank_they_join(self):
        """The DDP tutorial's launcher: the program starts its ranks itself, as fresh interpreters
        (torch.multiprocessing.spawn; mp.Process under the "spawn" start method). Each rank is
        traced from its init_process_group on, under the rank it joined; the parent, which only
        spawns, is left out; the NaN rank 1 makes (log of its batch at step 2) is found there."""
        script = self.write("spawned_ddp.py", SPAWNED_DDP_PROGRAM)
        for launcher in ("spawn", "process"):
            with self.subTest(launcher=launcher):
                trace = os.path.join(self.dir, "spawned-%s.sqlite" % launcher)
                plain = support.run_ranks(lambda: [PYTHON, script, str(support.free_port()), launcher], self.dir)
                traced = support.run_ranks(lambda: [FPSCOPE, "run", "-q", "--force", "-o", trace, "--torch-operators",
                                                    OPERATORS, "--", PYTHON, script, str(support.free_port()),
                                                    launcher], self.dir)
                self.assertEqual(sorted(traced.stdout.splitlines()), sorted(plain.stdout.splitlines()))
                self.assertEqual(len(plain.stdout.splitlines()), 8)
                self.assertEqual(self.query(trace, "SELECT rank, local_rank, world_size, rank_source, ended FROM processes"
                                                   " ORDER BY rank"),
                                 [(0, None, 2, "init_process_group", "exited"),
                                  (1, None, 2, "init_process_group", "exited")])
                self.assertEqual(self.query(trace, "SELECT value FROM meta WHERE key = 'idle_processes'"), [("1",)])
                layers = self.query(trace, "SELECT DISTINCT rank, layer FROM v_kernels WHERE layer IS NOT NULL"
                                           " ORDER BY 1, 2")
                self.assertEqual(layers, [(r, l) for r in (0, 1) for l in ("conv1", "fc1")])
                first = self.query(trace, "SELECT rank, kernel, step FROM v_first_nonfinite")
                self.assertEqual(first, [(1, "log", 2)])
                # Collectives are counted, not measured (they finish after the call returns).
                collectives = self.query(trace, "SELECT count(*), sum(sampled) FROM v_kernels WHERE kernel = 'allreduce_'")
                self.assertEqual(collectives, [(8, 0)])  # one bucket a step and rank
                report = run([FPSCOPE, "report", trace, "--section", "nonfinite"], self.dir).stdout
                self.assertIn("on rank 1", report)

    def test_program_without_torch_and_users_sitecustomize(self):
        own = os.path.join(self.dir, "own")
        os.mkdir(own)
        with open(os.path.join(own, "sitecustomize.py"), "w") as f:
            f.write("import builtins\nbuiltins.USER_SITECUSTOMIZE = 'ran'\n")
        script = self.write("plain.py", """
            import builtins, sys
            print(getattr(builtins, "USER_SITECUSTOMIZE", "missing"), "torch" in sys.modules)
        """)
        _, p = self.trace(script, env={"PYTHONPATH": own})
        self.assertEqual(p.stdout.strip(), "ran False")
        # And with torch: the user's sitecustomize still runs and the front end is installed.
        script = self.write("with_torch.py", """
            import builtins, torch
            print(getattr(builtins, "USER_SITECUSTOMIZE", "missing"))
            torch.ones(3).add_(1)
        """)
        trace, p = self.trace(script, env={"PYTHONPATH": own})
        self.assertEqual(p.stdout.strip(), "ran")
        self.assertEqual(self.query(trace, "SELECT count(*) FROM v_kernels WHERE kernel = 'add_'"), [(1,)])


if __name__ == "__main__":
    support.main(globals())
