"""End-to-end tests of data-parallel mptrain over MPI, traced by fpscope: every rank in one trace.

Each test runs `mpirun -np 2 mptrain --data-parallel ...` under `fpscope run` (or untraced) in a
fresh temporary folder and checks the trace with SQL against independent facts: where the fault
was planted, the all-reduce's arithmetic redone with numpy on the dumped tensors, and the losses of
the same training run by one process.

Usage: data_parallel_test.py --fpscope PATH --mptrain PATH --data-dir DIR [unittest arguments]
"""
import argparse
import glob
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

FPSCOPE = MPTRAIN = DATA_DIR = None
MPIRUN = shutil.which("mpirun")
# Open MPI refuses root without these; the machines CI runs on are root.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def run(args, cwd, check=True, timeout=600):
    env = dict(os.environ)
    env.update(MPI_ENV)
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def trainer(*options, images=256):
    return [MPTRAIN, "--model", "cnn", "--data-dir", DATA_DIR, "--train-subset", str(images), "--test-subset", "64",
            "--threads", "1"] + list(options)


def on_two_ranks(command):
    return [MPIRUN, "-np", "2", "--oversubscribe"] + command


def rows(trace, sql, *params):
    with sqlite3.connect("file:%s?mode=ro" % trace, uri=True) as db:
        return db.execute(sql, params).fetchall()


def f16_sum_in_rank_order(*values):
    """allreduce_sum of f16 tensors as docs/kernels.md states it, with numpy: each addition in fp32,
    rounded to fp16 (nearest even), rank 0 first."""
    acc = values[0].astype(np.float16)
    for v in values[1:]:
        acc = (acc.astype(np.float32) + v.astype(np.float16).astype(np.float32)).astype(np.float16)
    return acc


class DataParallelTest(unittest.TestCase):
    def setUp(self):
        if MPIRUN is None:
            self.fail("mpirun not found: scripts/install-deps.sh installs openmpi-bin")
        self.dir = tempfile.mkdtemp(prefix="fpscope-mpi-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.trace = os.path.join(self.dir, "dp.sqlite")

    def traced(self, command, *fpscope_options, check=True):
        return run([FPSCOPE, "run", "-o", self.trace] + list(fpscope_options) + ["--"] + command, self.dir, check=check)

    def test_nan_planted_on_rank_1_is_found_there_and_reaches_rank_0_through_the_allreduce(self):
        p = self.traced(on_two_ranks(trainer("--data-parallel", "--fault", "nan@conv2:3:5", "--fault-rank", "1")))
        self.assertIn("from 2 processes", p.stderr)
        self.assertEqual(rows(self.trace, "SELECT rank, world_size, rank_source, ended FROM processes ORDER BY rank"),
                         [(0, 2, "OMPI_COMM_WORLD_RANK", "exited"), (1, 2, "OMPI_COMM_WORLD_RANK", "exited")])
        self.assertEqual(rows(self.trace, 'SELECT rank, kernel, layer, phase, step, "index" FROM v_first_nonfinite'),
                         [(1, "inject_fault", "conv2", "forward", 3, 5)])
        # The one origin of the run; everything else, on both ranks, was handed on.
        self.assertEqual(rows(self.trace, "SELECT n.rank, k.kernel FROM nonfinite n JOIN v_kernels k ON k.id = n.kernel_id "
                                          "WHERE n.origin = 1"), [(1, "inject_fault")])
        # Rank 0 made no NaN: its first came in through the loss's all-reduce of step 3.
        first0 = rows(self.trace, "SELECT k.kernel, k.layer, k.step, n.origin FROM nonfinite n "
                                  "JOIN v_kernels k ON k.id = n.kernel_id WHERE n.rank = 0 ORDER BY k.start_ns LIMIT 1")
        self.assertEqual(first0, [("allreduce_sum", "loss", 3, 0)])
        report = run([FPSCOPE, "report", self.trace, "--section", "ranks"], self.dir).stdout
        self.assertIn("First NaN/Inf made from finite inputs: rank 1, step 3", report)
        # Each process's own injector state: the first's under its key, the other's beside it.
        reused = dict(rows(self.trace, "SELECT key, CAST(value AS INTEGER) FROM meta WHERE key LIKE 'injector.reused_input_stats%'"))
        self.assertEqual(sorted(reused), ["injector.reused_input_stats", "injector.reused_input_stats.process1"])
        self.assertTrue(all(n > 0 for n in reused.values()), reused)
        nonfinite = run([FPSCOPE, "report", self.trace, "--section", "nonfinite"], self.dir).stdout
        self.assertIn("inject_fault (conv2) made nan from finite inputs on rank 1", nonfinite)
        html = run([FPSCOPE, "export", self.trace, "--format", "html", "-o", "-"], self.dir).stdout
        self.assertIn("<h2>Ranks</h2>", html)
        self.assertIn("First NaN/Inf made from finite inputs: rank 1", html)
        # --rank: one rank read as if traced alone.
        alone = run([FPSCOPE, "report", self.trace, "--rank", "0", "--section", "nonfinite", "--format", "json"], self.dir)
        first = json.loads(alone.stdout)["nonfinite"]["first_origin"]
        self.assertEqual((first["kernel"], first["layer"], first["step"], first["origin"], first["rank"], first["inputs_finite"]),
                         ("allreduce_sum", "loss", 3, False, 0, True))
        text = run([FPSCOPE, "report", self.trace, "--rank", "0", "--section", "nonfinite"], self.dir).stdout
        self.assertIn("allreduce_sum (loss) received nan from another rank", text)
        # A made-up variant whose all-reduce input on rank 0 held the NaN itself: not received.
        own = os.path.join(self.dir, "own-input.sqlite")
        shutil.copy(self.trace, own)
        with sqlite3.connect(own) as db:
            db.execute("UPDATE tensors SET nan = 1 WHERE role = 'in' AND kernel_id = ?", (first["kernel_id"],))
        text = run([FPSCOPE, "report", own, "--rank", "0", "--section", "nonfinite"], self.dir).stdout
        self.assertIn("(no origin measured): allreduce_sum (loss) returned nan", text)
        self.assertNotIn("from another rank", text)
        counted = run([FPSCOPE, "query", self.trace, "--rank", "1", "--format", "csv",
                       "select count(*), min(rank), max(rank) from kernels"], self.dir).stdout.split()
        self.assertEqual(counted[-1], "%d,1,1" % rows(self.trace, "SELECT count(*) FROM kernels WHERE rank = 1")[0][0])
        # Made-up variants of this run (summaries recomputed at open): rank 0's all-reduce made its
        # NaN too, and rank 0's clock reads 1000 s later than rank 1's. On one host the clocks
        # compare: rank 1 is first, with a lead. Had rank 1 run on another host they could not be
        # compared: the earliest step decides (step 3 on both: the lower rank) and no lead is claimed.
        def ranks_of(trace):
            return json.loads(run([FPSCOPE, "report", trace, "--section", "ranks", "--format", "json"],
                                  self.dir).stdout)["ranks"]
        both = os.path.join(self.dir, "both-made.sqlite")
        shutil.copy(self.trace, both)
        with sqlite3.connect(both) as db:
            db.execute("UPDATE nonfinite SET origin = 1 WHERE rank = 0")
            db.execute("UPDATE kernels SET start_ns = start_ns + 1000000000000, end_ns = end_ns + 1000000000000 "
                       "WHERE rank = 0")
            db.execute("DELETE FROM meta WHERE key = 'summary_version'")
        ranks = ranks_of(both)
        self.assertEqual((ranks["same_host"], ranks["first_origin_rank"]), (True, 1))
        self.assertGreater(ranks["first_origin_lead_ns"], 0)
        elsewhere = os.path.join(self.dir, "two-hosts.sqlite")
        shutil.copy(both, elsewhere)
        with sqlite3.connect(elsewhere) as db:
            db.execute("UPDATE processes SET host = 'other-host' WHERE rank = 1")
        ranks = ranks_of(elsewhere)
        self.assertEqual((ranks["same_host"], ranks["first_origin_rank"], ranks["first_origin_lead_ns"]),
                         (False, 0, None))
        missing = run([FPSCOPE, "query", self.trace, "--rank", "5", "select 1"], self.dir, check=False)
        self.assertEqual(missing.returncode, 2)
        self.assertIn("no rank 5 in this trace (it holds ranks 0, 1)", missing.stderr)

    def test_fp16_allreduce_that_overflows_while_every_rank_is_finite_is_the_origin_and_both_skip(self):
        # fp16 training keeps fp16 gradients (amp-fp16 keeps them in fp32, as PyTorch's AMP does).
        # First a run at a known scale: each rank's largest gradient A and the largest sum M.
        probe = self.traced(on_two_ranks(trainer("--data-parallel", "--precision", "fp16", "--loss-scale", "dynamic",
                                                 "--scale-init", "1024", images=64)))
        sums = "FROM tensors t JOIN v_kernels k ON k.id = t.kernel_id WHERE k.kernel = 'allreduce_sum' " \
               "AND k.phase = 'backward' AND k.step = 0 AND t.dtype = 1"
        a = rows(self.trace, "SELECT max(t.absmax) " + sums + " AND t.role = 'in'")[0][0]
        m = rows(self.trace, "SELECT max(t.absmax) " + sums + " AND t.role = 'out'")[0][0]
        self.assertIsNotNone(a, probe.stderr)
        # The sum is larger than any share: a scale between 65504/M and 65504/A overflows only the sum.
        self.assertGreater(m / a, 1.05, "the two ranks' largest gradients do not add up: no scale can test this")
        scale = 1024 * 65520.0 / math.sqrt(m * a)
        os.remove(self.trace)
        self.traced(on_two_ranks(trainer("--data-parallel", "--precision", "fp16", "--loss-scale", "dynamic",
                                          "--scale-init", repr(scale), images=64)),
                    "--dump", "op=allreduce_sum,step=0")
        first = rows(self.trace, "SELECT kernel, phase, step, kind FROM v_first_nonfinite")
        self.assertEqual(first, [("allreduce_sum", "backward", 0, "+inf")] if first and first[0][3] == "+inf"
                         else [("allreduce_sum", "backward", 0, "-inf")])
        # Both ranks' inputs were finite, so the all-reduce made it on both, and both skipped step 0.
        self.assertEqual(rows(self.trace, "SELECT DISTINCT n.rank FROM nonfinite n JOIN v_kernels k ON k.id = n.kernel_id "
                                          "WHERE n.origin = 1 ORDER BY 1"), [(0,), (1,)])
        self.assertEqual(rows(self.trace, "SELECT count(*) " + sums + " AND t.role = 'in' AND t.pos_inf + t.neg_inf + t.nan > 0"),
                         [(0,)])
        self.assertEqual(rows(self.trace, "SELECT rank, skipped FROM loss_scale WHERE step = 0 ORDER BY rank"),
                         [(0, 1), (1, 1)])
        # The arithmetic, redone with numpy on the dumped tensors of both ranks, bit for bit.
        dumps = os.path.join(self.dir, "dp.sqlite.dumps")
        checked = 0
        for out0 in sorted(glob.glob(os.path.join(dumps, "rank0-step0-*-allreduce_sum-out*.npy"))):
            name = os.path.basename(out0)
            launch = name.split("-")[2]
            slot = name.split("-out")[1].split("-")[0]
            tensor = name.split("-out" + slot + "-", 1)[1]
            share = [np.load(glob.glob(os.path.join(dumps, "rank%d-step0-*-allreduce_sum-in%s-%s" % (r, slot, tensor)))[0])
                     for r in (0, 1)]
            out = [np.load(out0), np.load(glob.glob(os.path.join(dumps, "rank1-step0-*-allreduce_sum-out%s-%s" % (slot, tensor)))[0])]
            self.assertTrue(launch.startswith("launch"))
            if share[0].dtype != np.float16:
                continue
            expected = f16_sum_in_rank_order(*share)
            for o in out:  # every rank holds the same bits
                np.testing.assert_array_equal(o.view(np.uint16), expected.view(np.uint16), err_msg=tensor)
            checked += 1
        self.assertGreaterEqual(checked, 8, "the fp16 gradients of the eight parameters")

    def test_two_ranks_learn_what_one_learns_on_the_same_global_batch(self):
        one, two = os.path.join(self.dir, "one.json"), os.path.join(self.dir, "two.json")
        run(trainer("--metrics-json", one, images=640), self.dir)
        p = run(on_two_ranks(trainer("--data-parallel", "--metrics-json", two, images=640)), self.dir)
        self.assertEqual(p.stdout.count("test accuracy"), 1, "only rank 0 prints:\n" + p.stdout)
        a = json.load(open(one))["losses"]
        b = json.load(open(two))["losses"]
        self.assertEqual(len(a), 20)
        self.assertEqual(len(a), len(b))
        # The same sums in another order: each rank adds its half of the batch, then the halves are
        # added. Over 20 fp32 SGD steps the losses stay within 1e-5 relative (docs/multirank.md).
        for step, (x, y) in enumerate(zip(a, b)):
            self.assertLessEqual(abs(x - y), 1e-5 * abs(x), "step %d: %r against %r" % (step, x, y))

    def start_long_run(self):
        """`fpscope run` of a data-parallel run long enough to be killed in the middle."""
        env = dict(os.environ)
        env.update(MPI_ENV)
        return subprocess.Popen([FPSCOPE, "run", "-o", self.trace, "--"] +
                                on_two_ranks(trainer("--data-parallel", "--epochs", "20", images=2048)),
                                cwd=self.dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def pids_once_traced(self):
        """The pids of both ranks, once each has more than 100 launches in the trace (which is
        readable while it is written)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                found = rows(self.trace, "SELECT p.rank, p.pid FROM processes p WHERE "
                                         "(SELECT count(*) FROM kernels k WHERE k.rank = p.rank) > 100")
                if len(found) == 2:
                    return dict(found)
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        self.fail("the ranks never showed up in the trace")

    def assert_sound_with_both_ranks(self):
        self.assertEqual(rows(self.trace, "PRAGMA integrity_check"), [("ok",)])
        for rank in (0, 1):
            self.assertGreater(rows(self.trace, "SELECT count(*) FROM kernels WHERE rank = ?", rank)[0][0], 100)

    def test_killing_one_rank_leaves_a_sound_trace_with_both_ranks(self):
        proc = self.start_long_run()
        os.kill(self.pids_once_traced()[1], 9)
        out, err = proc.communicate(timeout=300)
        self.assertNotEqual(proc.returncode, 0, "mpirun reports a rank that died")
        self.assert_sound_with_both_ranks()
        ended = dict(rows(self.trace, "SELECT rank, ended FROM processes"))
        self.assertEqual(ended[1], "vanished", err)
        self.assertIn("1:vanished", rows(self.trace, "SELECT value FROM meta WHERE key = 'ranks_ended'")[0][0])
        self.assertEqual(rows(self.trace, "SELECT value FROM meta WHERE key = 'dropped_records'"), [("0",)])

    def test_killing_mpirun_loses_nothing_the_ranks_published(self):
        proc = self.start_long_run()
        ranks = self.pids_once_traced()
        # fpscope's own child is mpirun: kill it, then the ranks it leaves behind.
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        self.assertEqual(len(children), 1, children)
        os.kill(int(children[0]), 9)
        out, err = proc.communicate(timeout=300)
        for pid in ranks.values():
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        self.assertIn("was killed by SIGKILL", err)
        self.assertEqual(rows(self.trace, "SELECT value FROM meta WHERE key = 'end_reason'"), [("signaled",)])
        self.assert_sound_with_both_ranks()
        # Everything the ranks published reached the trace: nothing dropped, nothing torn.
        self.assertEqual(rows(self.trace, "SELECT key, value FROM meta WHERE key IN "
                                          "('dropped_records', 'corrupt_ring_records') ORDER BY key"),
                         [("corrupt_ring_records", "0"), ("dropped_records", "0")])

    def test_wrong_data_parallel_options_are_refused_with_status_2(self):
        p = run(trainer("--fault", "nan@fc1:1", "--fault-rank", "1"), self.dir, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--fault-rank needs --fault and --data-parallel", p.stderr)
        p = run(trainer("--data-parallel", "--device", "cuda"), self.dir, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--data-parallel runs on --device cpu only", p.stderr)
        p = run([MPIRUN, "-np", "3", "--oversubscribe"] + trainer("--data-parallel", "--batch-size", "2"), self.dir, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--batch-size 2 is smaller than the 3 ranks", p.stderr)


def main():
    global FPSCOPE, MPTRAIN, DATA_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--fpscope", required=True)
    parser.add_argument("--mptrain", required=True)
    parser.add_argument("--data-dir", required=True)
    args, rest = parser.parse_known_args()
    FPSCOPE, MPTRAIN, DATA_DIR = args.fpscope, args.mptrain, args.data_dir
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
