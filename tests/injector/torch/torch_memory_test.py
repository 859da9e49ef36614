"""End-to-end tests of how the PyTorch front end follows memory: storages allocated, renamed and
freed, and the memory each category holds at the peak; views, counted but not measured, and the
walk back from a NaN through them; a tensor whose statistics an earlier launch measured, reused
instead of scanned again and equal to a rescan; and every returned tensor named. Each test writes a
small program into a fresh temporary folder, runs it under `fpscope run` and checks the trace with
SQL against facts the program itself establishes.

Usage: torch_memory_test.py --fpscope PATH [--torch-operators observer|dispatch-mode] [unittest arguments]
"""
import json
import os
import shutil
import sqlite3
import textwrap

import torch_test_support as support
from torch_test_support import CNN, FINALIZE_SQL, NET, OUTSIDE_DOMAIN, TENSORS, run

FPSCOPE = OPERATORS = MPTRAIN = DATA_DIR = None


class FrontEndTest(support.FrontEndCase):
    def test_a_view_its_schema_does_not_mark_is_counted_not_measured(self):
        # matmul of a batch by a matrix folds the batch into one mm and gives the product its
        # batch dimensions back with _unsafe_view: the same memory, which the mm's output row
        # measured already. Its out= overload copies into memory empty() left uninitialised: an
        # operator like any other, whose output is measured.
        script = self.write("fold.py", """
            import torch
            torch.manual_seed(0)
            x = torch.randn(4, 5, 6)
            w = torch.randn(6, 3, requires_grad=True)
            y = x @ w
            print(float(y.sum()))
            buf = torch.empty(2, 3)
            torch.ops.aten._unsafe_view.out(torch.arange(6.0), [2, 3], out=buf)
            print(float((buf * 2).sum()))
        """)
        trace, p = self.trace(script)
        self.assertEqual(p.stdout.split()[-1], "30.0")
        views = self.query(trace, "SELECT sampled, count(*) FROM v_kernels WHERE kernel = '_unsafe_view' GROUP BY sampled")
        self.assertEqual(dict(views).get(1), 1, views)  # the out= call
        self.assertGreaterEqual(dict(views).get(0, 0), 1, views)  # matmul's
        self.assertEqual(self.query(trace, TENSORS + " WHERE k.kernel = '_unsafe_view' AND k.sampled = 0")[0][0], 0)
        copied = self.query(trace, "SELECT t.count, t.min, t.max FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                   " WHERE k.kernel = '_unsafe_view' AND t.role = 'out'")
        self.assertEqual(copied, [(6, 0.0, 5.0)])
        # The copy initialised the buffer: the mul reading it measures it.
        read = self.query(trace, "SELECT t.count, t.min, t.max FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                 " WHERE k.kernel = 'mul' AND t.role = 'in' AND t.slot = 0")
        self.assertEqual(read, [(6, 0.0, 5.0)])
        made = self.query(trace, "SELECT t.count, t.shape FROM v_tensors t JOIN v_kernels k ON k.id = t.kernel_id"
                                 " WHERE k.kernel = 'mm' AND t.role = 'out'")
        self.assertEqual(made, [(60, "[20,3]")])

    def test_memory_by_category(self):
        # Gradients kept from step to step (zero_grad(set_to_none=False), torch 1.13's default): at
        # the peak every parameter has its gradient.
        script = self.write("kept.py", CNN.replace("STEPS", "3").replace("opt.zero_grad()",
                                                                         "opt.zero_grad(set_to_none=False)"))
        trace, p = self.trace(script, args=[os.path.join(self.dir, "out.npy")])
        parameters = int(p.stdout.split("parameters")[1].split()[0])
        peak = dict(self.query(trace, "SELECT category, bytes FROM v_memory_peak"))
        self.assertEqual(peak["weight"], 4 * parameters)
        self.assertEqual(peak["gradient"], 4 * parameters)
        self.assertEqual(peak["optimizer_state"], 4 * parameters)  # SGD momentum: one buffer a parameter
        self.assertGreater(peak["activation"], 0)
        names = {n for (n,) in self.query(trace, "SELECT DISTINCT s.value FROM memory_events m JOIN strings s"
                                                 " ON s.id = m.name_id")}
        self.assertTrue({"conv1.weight", "fc1.bias", "conv1.weight.grad", "fc1.weight.momentum_buffer"} <= names, names)
        # Every allocation is freed at most once, and never before it was made.
        bad = self.query(trace, "SELECT a.alloc_id FROM memory_events a JOIN memory_events f ON f.alloc_id = a.alloc_id"
                                " AND f.kind = 'free' WHERE a.kind = 'alloc' AND f.t_ns < a.t_ns")
        self.assertEqual(bad, [])
        # The collector kept the summaries as the rows arrived, storages relabelled as gradients and
        # optimizer state included: the tables are the ones the summaries script writes, row for row.
        kept = dict(self.query(trace, "SELECT key, value FROM meta WHERE key LIKE 'summaries_%rolled_up'"))
        self.assertEqual(kept["summaries_not_rolled_up"], "")
        self.assertIn("summary_memory_peak", kept["summaries_rolled_up"])
        copy = os.path.join(self.dir, "statements.sqlite")
        shutil.copyfile(trace, copy)
        with open(FINALIZE_SQL) as f, sqlite3.connect(copy) as db:
            db.executescript(f.read())
        tables = [t for (t,) in self.query(copy, "SELECT name FROM sqlite_master WHERE name LIKE 'summary_%'")]
        self.assertEqual(len(tables), 10)
        for table in tables:
            rows = "SELECT rowid, * FROM " + table + " ORDER BY rowid"
            self.assertEqual(self.query(trace, rows), self.query(copy, rows), table)

        # Gradients set to None at zero_grad (torch 2's default): each step's is an allocation of its
        # own, made in backward and freed at the next step's zero_grad. (The last is freed at exit,
        # which the dispatch mode may see after the trace has closed.)
        script = self.write("fresh.py", CNN.replace("STEPS", "3").replace("opt.zero_grad()",
                                                                          "opt.zero_grad(set_to_none=True)"))
        trace, _ = self.trace(script, args=[os.path.join(self.dir, "out.npy")])
        events = self.query(trace, "SELECT m.kind, m.step FROM memory_events m JOIN strings s ON s.id = m.name_id"
                                   " WHERE s.value = 'conv1.weight.grad' ORDER BY m.t_ns, m.id")
        self.assertEqual(events[:5], [("alloc", 0), ("free", 1), ("alloc", 1), ("free", 2), ("alloc", 2)])

    def test_storages_are_freed_when_the_program_lets_them_go(self):
        script = self.write("frees.py", """
            import numpy as np
            import torch
            torch.set_num_threads(1)
            a = torch.ones(1000).mul(2)        # made by mul: 4000 bytes
            b = a.add(1)
            del a                              # its storage goes now
            arr = np.ones(500, np.float32)
            t = torch.from_numpy(arr)          # memory numpy owns: data
            c = t.mul(3)
            del t, arr                         # the numpy memory goes now
            print(c.sum().item(), b.sum().item())
        """)
        trace, p = self.trace(script)
        self.assertEqual(p.stdout.split(), ["1500.0", "3000.0"])
        kernels = self.query(trace, "SELECT kernel, start_ns FROM v_kernels ORDER BY id")
        start = {}
        for kernel, t in kernels:
            start.setdefault(kernel, []).append(t)
        def events(name):
            return self.query(trace, "SELECT m.kind, m.t_ns, m.bytes FROM memory_events m JOIN strings s"
                                     " ON s.id = m.name_id WHERE s.value = ? ORDER BY m.id", name)
        made_by_mul = events("mul")
        self.assertEqual([(k, n) for k, _, n in made_by_mul[:3]], [("alloc", 4000), ("free", 4000), ("alloc", 2000)])
        # a's storage was freed after b was made and before the next operator ran.
        self.assertLess(start["add"][0], made_by_mul[1][1])
        self.assertLess(made_by_mul[1][1], start["mul"][1])
        # The numpy memory: an allocation of data from its first operator until it was let go, at the
        # latest by the next operator.
        data = events("data f32[500]")
        self.assertEqual([(k, n) for k, _, n in data], [("alloc", 2000), ("free", 2000)])
        self.assertLess(start["mul"][1], data[1][1])
        self.assertLess(data[1][1], start["sum"][0])

    def test_parameters_on_new_storages_stay_weights_and_their_old_memory_is_not_theirs(self):
        """A model that ran in fp32 and then went to bf16 (Module.to gives its Parameters new
        storages) still has weights, under their names, and the fp32 storages are freed by then.
        A parameter moved by hand (`p.data = ...`) leaves its storage unseen: another storage on the
        same memory later is not the parameter's."""
        script = self.write("moved.py", """
            import numpy as np
            import torch
            torch.manual_seed(0)
            torch.set_num_threads(1)
            model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
            with torch.no_grad():
                model(torch.randn(2, 16))                    # named and measured in fp32
                model.to(torch.bfloat16)
                model(torch.randn(2, 16).to(torch.bfloat16))
            arr = np.full((8, 8), 0.5, np.float32)
            lin = torch.nn.Linear(8, 8)
            lin.weight.data = torch.from_numpy(arr)          # a weight in memory numpy owns
            with torch.no_grad():
                lin(torch.ones(1, 8))
            lin.weight.data = torch.zeros(8, 8)              # its storage on arr goes, unseen
            print(torch.from_numpy(arr).mul(2.0).sum().item())  # another storage on arr's memory
        """)
        trace, p = self.trace(script)
        self.assertEqual(p.stdout.split(), ["64.0"])
        # Each allocation's first name and category, as memory_events recorded them.
        inputs = self.query(trace, """
            SELECT k.kernel, t.slot, d.name, t.tensor_uid, c.name, s.value
            FROM v_kernels k JOIN tensors t ON t.kernel_id = k.id JOIN dtypes d ON d.id = t.dtype
            JOIN memory_events m ON m.alloc_id = t.tensor_uid AND m.kind = 'alloc'
            JOIN categories c ON c.id = m.category JOIN strings s ON s.id = m.name_id
            WHERE t.role = 'in' AND k.kernel IN ('addmm', 'mul') ORDER BY k.id, t.slot""")
        weights = [(dtype, name) for kernel, slot, dtype, _, category, name in inputs
                   if kernel == "addmm" and slot != 1 and category == "weight"]
        self.assertEqual(weights, [("f32", "0.bias"), ("f32", "0.weight"), ("f32", "2.bias"), ("f32", "2.weight"),
                                   ("bf16", "0.bias"), ("bf16", "0.weight"), ("bf16", "2.bias"), ("bf16", "2.weight"),
                                   ("f32", "Linear.bias"), ("f32", "Linear.weight")])  # a second model
        # The fp32 weights were freed before the first bf16 operator read the bf16 ones.
        first_bf16 = self.query(trace, "SELECT min(k.start_ns) FROM v_kernels k JOIN tensors t ON t.kernel_id = k.id"
                                       " JOIN dtypes d ON d.id = t.dtype WHERE k.kernel = 'addmm' AND d.name = 'bf16'")[0][0]
        for _, slot, dtype, uid, _, name in inputs[:6]:
            if slot != 1:
                freed = self.query(trace, "SELECT t_ns FROM memory_events WHERE alloc_id = ? AND kind = 'free'", uid)
                self.assertEqual(len(freed), 1, name)
                self.assertLess(freed[0][0], first_bf16, name)
        # mul read numpy's memory as data of its own, not as the weight that lived there.
        lin_weight = inputs[-2]
        mul_input = inputs[-1]
        self.assertEqual((lin_weight[0], lin_weight[5]), ("addmm", "Linear.weight"))
        self.assertEqual(mul_input[0], "mul")
        self.assertNotEqual(mul_input[3], lin_weight[3])
        self.assertEqual((mul_input[4], mul_input[5]), ("data", "data f32[8,8]"))

    def test_every_returned_tensor_has_a_name_of_its_own(self):
        """An operator that returns several new tensors names the first after itself and each
        later one after its place among the returns, or after the schema's name for it: the mean
        and the reciprocal deviation of group_norm are not the output, nor sort's indices its
        values. A return without a tensor keeps its place: convolution_backward's gradients are
        .out1 and .out2 whether or not the input's gradient (place 0) was asked for."""
        script = self.write("outputs.py", """
            import torch
            torch.manual_seed(0)
            torch.set_num_threads(1)
            x = torch.randn(4, 6, 5)
            y = torch.nn.functional.group_norm(x, 3)   # native_group_norm: (Tensor, Tensor, Tensor)
            values, indices = torch.sort(x.flatten())   # sort: (Tensor values, Tensor indices)
            conv = torch.nn.Conv2d(3, 4, 3)             # weight 4x3x3x3, bias 4
            image = torch.randn(2, 3, 8, 8)             # needs no gradient: grad_input is undefined
            conv(image).sum().backward()
            print(y.sum().item(), values[0].item(), indices[0].item(), conv.weight.grad.sum().item())
        """)
        trace, p = self.trace(script)
        def made(name):
            return self.query(trace, "SELECT m.bytes FROM memory_events m JOIN strings s ON s.id = m.name_id"
                                     " WHERE s.value = ? AND m.kind = 'alloc' ORDER BY m.id", name)
        # The output is x's shape in f32; the mean and rstd are one per (sample, group).
        self.assertEqual(made("native_group_norm"), [(4 * 6 * 5 * 4,)])
        self.assertEqual(made("native_group_norm.out1"), [(4 * 3 * 4,)])
        self.assertEqual(made("native_group_norm.out2"), [(4 * 3 * 4,)])
        self.assertEqual(made("sort"), [(120 * 4,)])           # the values, f32
        self.assertEqual(made("sort.indices"), [(120 * 8,)])   # the indices, i64
        self.assertEqual(made("convolution_backward"), [])     # no grad_input was made
        self.assertEqual(made("convolution_backward.out1"), [(4 * 3 * 3 * 3 * 4,)])  # grad_weight
        self.assertEqual(made("convolution_backward.out2"), [(4 * 4,)])              # grad_bias
        # The measured outputs carry those names too, in the order the operator returned them.
        rows = self.query(trace, "SELECT t.slot, s.value FROM tensors t JOIN strings s ON s.id = t.name_id"
                                 " JOIN v_kernels k ON k.id = t.kernel_id WHERE k.kernel = 'native_group_norm'"
                                 " AND t.role = 'out' ORDER BY t.slot")
        self.assertEqual(rows, [(0, "native_group_norm"), (1, "native_group_norm.out1"), (2, "native_group_norm.out2")])

    def test_reused_input_statistics_equal_a_rescan_row_for_row(self):
        """An input that an earlier operator measured as its output, unchanged since, takes those
        statistics instead of a second scan. The program writes tensors every way it can: in place
        (the optimizer's _foreach_ operators, ReLU), through a transposed view, with out=, through
        a complex view, from numpy behind PyTorch's back, on a storage swapped in under a tensor,
        and in steps the front end does not watch; each run equals a rescan of every input."""
        script = self.write("writes.py", """
            import numpy as np
            import torch, torch.nn as nn, torch.nn.functional as F
            torch.manual_seed(0)
            torch.set_num_threads(1)
        """ + textwrap.indent(NET, " " * 12) + """
            net = Net()
            # foreach: _foreach_add_ and kin write their arguments and return nothing
            opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, foreach=True)
            batch = np.zeros((8, 1, 14, 14), np.float32)
            x = torch.from_numpy(batch)        # refilled by numpy every step
            rng = np.random.default_rng(0)
            y = torch.randint(0, 10, (8,))
            acc = torch.ones(10, 4)
            for step in range(5):
                batch[:] = rng.standard_normal(batch.shape, dtype=np.float32)
                opt.zero_grad()
                out = net(x)
                with torch.no_grad():
                    acc.t().mul_(0.5)                              # through a transposed view
                    torch.add(acc, out[:4].t(), out=acc)          # out=
                    F.relu(acc, inplace=True)
                    torch.view_as_complex(acc.view(10, 2, 2)).mul_(0.5 + 0.25j)  # a dtype not measured
                    acc.data = acc.data.clone()                    # another storage under acc
                loss = F.cross_entropy(out, y) + acc.square().mean()
                loss.backward()
                opt.step()
                print("loss", step, loss.item().hex())
        """)
        # Every statistic of every tensor row (tensor_uid, the allocation's number, is left out: a
        # storage freed and another made at its address may keep or get a number, and the heap's
        # layout differs with the injector's own allocations).
        every_column = ("SELECT t.kernel_id, t.role, t.slot, t.dtype, t.shape, t.count, t.nan, t.pos_inf, "
                        "t.neg_inf, t.zero, t.subnormal, quote(t.min), quote(t.max), quote(t.absmax), "
                        "quote(t.min_nonzero), quote(t.mean), quote(t.rms), t.f16_overflow, t.f16_underflow, "
                        "t.f16_subnormal, t.f16_near_max, t.bf16_overflow, t.bf16_underflow, t.bf16_subnormal, "
                        "t.bf16_near_max, t.e4m3_overflow, t.e4m3_underflow, t.e5m2_overflow, t.e5m2_underflow, "
                        "t.exp_hist FROM tensors t ORDER BY t.kernel_id, t.role, t.slot")
        reused_stats = "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'injector.reused_input_stats'"
        for options in ([], ["--every", "2"], ["--ops", "addmm,relu*,add*,mul*,convolution*"]):
            reused, p = self.trace(script, *options)
            scanned, q = self.trace(script, "--rescan-inputs", *options)
            self.assertEqual(p.stdout, q.stdout)
            a, b = self.query(reused, every_column), self.query(scanned, every_column)
            self.assertGreater(len(a), 100, options)
            self.assertEqual(len(a), len(b), options)
            for i, (row_a, row_b) in enumerate(zip(a, b)):
                self.assertEqual(row_a, row_b, "row %d of %s" % (i, options))
            self.assertGreater(self.query(reused, reused_stats)[0][0], 0, options)
            self.assertEqual(self.query(scanned, reused_stats), [], options)

    def test_why_walks_through_views_in_a_sampled_run(self):
        # With --every 2, whole steps go unmeasured; inside a measured step a view is unmeasured too
        # but writes nothing, so the walk back goes on through it.
        script = self.write("viewed.py", OUTSIDE_DOMAIN)
        trace, _ = self.trace(script, "--every", "2", args=("sqrt", "1e6", "view"))
        self.assertEqual(self.query(trace, "SELECT kernel, layer, step FROM v_first_nonfinite"), [("sqrt", "1", 2)])
        why = json.loads(run([FPSCOPE, "report", "--section", "why", "--format", "json", trace], self.dir).stdout)["why"]
        self.assertEqual(why["causes"][0]["kind"], "outside_domain")
        self.assertIn("sub (1) wrote it at step 2", why["causes"][0]["summary"])
        self.assertFalse([l for l in why["chain"] if "unmeasured" in l["note"]], why["chain"])
        self.assertEqual(self.query(trace, "SELECT kernel FROM v_kernels WHERE id = ?", why["chain"][0]["writer_kernel_id"]),
                         [("sub",)])


if __name__ == "__main__":
    support.main(globals())
