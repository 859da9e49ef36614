#!/usr/bin/env python3
"""End-to-end test of fpscope-gui under a virtual X server (one Xvfb for the whole test).

Makes a small trace pair (a traced training run when the trainer and collector are built, or a
synthetic trace from fpscope-gen-trace), then renders every view with --screenshot for one trace
and for the pair, and checks that each PNG is valid, not blank, and differs from the other views.
Then opens damaged inputs (not a database, a truncated trace, a newer schema, a missing file)
beside a good trace and checks that the window reports each error and keeps the good trace.

Only the standard library is used: PNGs are decoded with zlib here.
"""
import argparse
import atexit
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import zlib

VIEWS = ["summary", "timeline", "ranges", "loss", "memory", "events", "fp8", "updates"]
WIDTH, HEIGHT = 1024, 700


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(cmd, expect_rc=0, timeout=300):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if expect_rc is not None and proc.returncode != expect_rc:
        fail("%s exited %d (expected %d):\n%s" % (" ".join(cmd), proc.returncode, expect_rc, proc.stdout))
    return proc


def decode_png(path):
    """Returns (width, height, rows of RGBA bytes) of an 8-bit RGBA or RGB PNG; fails on anything else."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + " is not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]:
            fail(path + ": bad CRC in chunk " + kind.decode())
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                fail(path + ": unexpected PNG format")
            channels = 4 if color == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        filt = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if filt == 1:
                line[i] = (line[i] + a) & 255
            elif filt == 2:
                line[i] = (line[i] + b) & 255
            elif filt == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def differing_share(a, b):
    """Share of pixel rows, sampled every 4th row, whose bytes differ between two decoded images."""
    sampled = range(0, min(len(a[2]), len(b[2])), 4)
    return sum(1 for y in sampled if a[2][y] != b[2][y]) / len(sampled)


def check_image(path):
    width, height, rows = decode_png(path)
    if (width, height) != (WIDTH, HEIGHT):
        fail("%s is %dx%d, expected %dx%d" % (path, width, height, WIDTH, HEIGHT))
    colours = set()
    for y in range(0, height, 16):
        row = rows[y]
        for x in range(0, len(row), 4 * 16):
            colours.add(row[x:x + 3])
    if len(colours) < 8:
        fail("%s looks blank (%d colours)" % (path, len(colours)))
    return width, height, rows


def start_xvfb(xvfb):
    """Starts Xvfb on a display it chooses itself (-displayfd: no race with other X servers) and
    points DISPLAY at it for the GUI runs of this test."""
    read_end, write_end = os.pipe()
    proc = subprocess.Popen([xvfb, "-displayfd", str(write_end), "-screen", "0", "%dx%dx24" % (WIDTH + 64, HEIGHT + 64),
                             "-nolisten", "tcp"], pass_fds=(write_end,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    os.close(write_end)
    atexit.register(proc.terminate)
    number = b""
    while not number.endswith(b"\n"):
        chunk = os.read(read_end, 16)
        if not chunk:
            fail("Xvfb exited before it opened a display")
        number += chunk
    os.close(read_end)
    os.environ["DISPLAY"] = ":" + number.decode().strip()


def screenshot(args, view, traces, out, expect_rc=0, extra=()):
    cmd = [args.gui, "--screenshot", out, "--view", view, "--size", "%dx%d" % (WIDTH, HEIGHT), *extra, *traces]
    return run(cmd, expect_rc)


def make_traces(args, work):
    fp32, fp16 = os.path.join(work, "fp32.sqlite"), os.path.join(work, "fp16.sqlite")
    if args.fpscope and args.mptrain:
        common = ["--model", "cnn", "--train-subset", "256", "--test-subset", "64", "--epochs", "1"]
        if args.data_dir:
            common += ["--data-dir", args.data_dir]
        run([args.fpscope, "run", "-o", fp32, "--recipes", "operands", "--", args.mptrain, *common, "--precision", "fp32"],
            timeout=600)
        run([args.fpscope, "run", "-o", fp16, "--", args.mptrain, *common, "--precision", "amp-fp16",
             "--loss-scale", "dynamic", "--scale-init", "16777216", "--scale-interval", "50"], timeout=600)  # as the demo
    else:
        run([args.gen_trace, "-o", fp32, "--steps", "30", "--precision", "fp32"])
        run([args.gen_trace, "-o", fp16, "--steps", "30", "--precision", "amp-fp16", "--loss-scale", "dynamic",
             "--overflow-at", "9", "--nan-at", "20"])
    return fp32, fp16


def check_views(args, work, traces, tag):
    images = {}
    for view in VIEWS:
        out = os.path.join(work, "%s-%s.png" % (tag, view))
        screenshot(args, view, traces, out)
        images[view] = check_image(out)
    for i, a in enumerate(VIEWS):
        for b in VIEWS[i + 1:]:
            share = differing_share(images[a], images[b])
            if share < 0.05:
                fail("%s: views %s and %s look the same (%.1f%% of rows differ)" % (tag, a, b, 100 * share))
    print("ok: %s: %d views rendered, valid and distinct" % (tag, len(VIEWS)))


def check_damaged(args, work, good):
    not_db = os.path.join(work, "not-a-trace.sqlite")
    with open(not_db, "wb") as f:
        f.write(b"this is a text file, not a database\n" * 100)
    truncated = os.path.join(work, "truncated.sqlite")
    with open(good, "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[:len(data) // 3])
    newer = os.path.join(work, "newer.sqlite")
    shutil.copy(good, newer)
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version = 999")
        db.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    missing = os.path.join(work, "no-such-file.sqlite")
    for bad in (not_db, truncated, newer, missing):
        out = os.path.join(work, "damaged-%s.png" % os.path.basename(bad))
        proc = screenshot(args, "summary", [bad, good], out, expect_rc=3, extra=["--dump-state"])
        states = dump_state(proc.stdout)
        bad_state, good_state = states.get(1, {}), states.get(2, {})
        if bad_state.get("state") != "failed" or len(bad_state.get("error", "")) < 10:
            fail("no error reported for %s:\n%s" % (bad, proc.stdout))
        if good_state.get("state") != "ready":
            fail("the good trace was not kept beside %s:\n%s" % (bad, proc.stdout))
        check_image(out)
        print("ok: %s -> %s" % (os.path.basename(bad), bad_state["error"][:100]))


def dump_state(output):
    """The --dump-state lines (one JSON object per trace) by trace number."""
    states = {}
    for line in output.splitlines():
        if line.startswith("{"):
            state = json.loads(line)
            states[state["trace"]] = state
    return states


def check_gui_numbers_equal_report(args, traces, work):
    """Every number the GUI shows for each trace equals `fpscope report --format json`'s."""
    out = os.path.join(work, "agree.png")
    states = dump_state(screenshot(args, "summary", traces, out, extra=["--dump-state"]).stdout)
    for i, trace in enumerate(traces, start=1):
        report = json.loads(run([args.fpscope, "report", trace, "--format", "json"]).stdout)
        shown = states.get(i, {}).get("report")
        if shown is None:
            fail("no report in the GUI's state of %s" % trace)
        if shown != report:
            diff = [k for k in report if report.get(k) != shown.get(k)]
            fail("the GUI and fpscope report disagree on %s in %s" % (diff, trace))
        if report["run"]["kernels"] <= 0 or report["ranges"]["rows"] == []:
            fail("%s: an empty report proves nothing" % trace)
        # The traced fp32 run holds an fp8 forecast: the readiness view's numbers are compared too.
        if args.fpscope and args.mptrain and i == 1 and not report["fp8"]["operands"]:
            fail("%s: no fp8 forecast to compare" % trace)
        # A traced mptrain run has its parameter updates: the updates view's numbers are compared too.
        if args.fpscope and args.mptrain and not report["learning"]["params"]:
            fail("%s: no parameter updates to compare" % trace)
    print("ok: the GUI's numbers equal fpscope report's for %d traces" % len(traces))


def check_forecast_agrees(args, work):
    """A bf16 run without master weights whose learning rate decays: its update/weight ratios are
    forecast to reach bf16's spacing, and the GUI's numbers, forecasts included, equal the report's."""
    trace = os.path.join(work, "bf16-decay.sqlite")
    common = ["--model", "cnn", "--train-subset", "1280", "--test-subset", "64", "--epochs", "1"]
    if args.data_dir:
        common += ["--data-dir", args.data_dir]
    run([args.fpscope, "run", "-o", trace, "--", args.mptrain, *common, "--precision", "bf16", "--momentum", "0",
         "--lr", "0.1", "--lr-schedule", "exponential:0.96"], timeout=600)
    report = json.loads(run([args.fpscope, "report", trace, "--format", "json"]).stdout)
    if not report["learning"]["forecasts"]:
        fail("%s: no update/weight forecast to compare" % trace)
    shown = dump_state(screenshot(args, "updates", [trace], os.path.join(work, "forecast.png"),
                                  extra=["--dump-state"]).stdout).get(1, {}).get("report")
    if shown != report:
        fail("the GUI and fpscope report disagree on %s in %s"
             % ([k for k in report if report.get(k) != (shown or {}).get(k)], trace))
    print("ok: the GUI's forecasts equal fpscope report's (%d parameters)" % len(report["learning"]["forecasts"]))


def check_ranks(args, work):
    """A trace of two processes (two ranks): the GUI draws each rank's timeline lanes, and with
    --rank it shows one rank's numbers, equal to `fpscope report --rank`'s."""
    trace = os.path.join(work, "ranks.sqlite")
    common = [args.mptrain, "--model", "cnn", "--train-subset", "128", "--test-subset", "32", "--threads", "1"]
    if args.data_dir:
        common += ["--data-dir", args.data_dir]
    quoted = " ".join("'%s'" % c for c in common)
    run([args.fpscope, "run", "-o", trace, "--", "/bin/sh", "-c",
         "RANK=0 %s >/dev/null & RANK=1 %s --fault nan@fc1:2 >/dev/null; wait" % (quoted, quoted)], timeout=600)
    out = os.path.join(work, "ranks.png")
    screenshot(args, "timeline", [trace], out)
    for rank in (0, 1):
        states = dump_state(screenshot(args, "summary", [trace], out, extra=["--dump-state", "--rank", str(rank)]).stdout)
        report = json.loads(run([args.fpscope, "report", trace, "--rank", str(rank), "--format", "json"]).stdout)
        if states.get(1, {}).get("report") != report:
            fail("rank %d: the GUI and fpscope report --rank disagree" % rank)
        if report["ranks"]["ranks"][0]["rank"] != rank or len(report["ranks"]["ranks"]) != 1:
            fail("rank %d: the report is not that rank's alone: %s" % (rank, report["ranks"]))
    everything = json.loads(run([args.fpscope, "report", trace, "--format", "json"]).stdout)
    if everything["ranks"]["first_origin_rank"] != 1:
        fail("the fault was planted on rank 1: %s" % everything["ranks"])
    proc = screenshot(args, "summary", [trace], out, expect_rc=3, extra=["--rank", "7", "--dump-state"])
    if "no rank 7 in this trace (it holds ranks 0, 1)" not in proc.stdout:
        fail("--rank 7 of a two-rank trace does not say why it cannot be shown:\n" + proc.stdout)
    print("ok: two ranks: lanes drawn, each rank's numbers equal fpscope report --rank's")


def check_command_line(args):
    run([args.gui, "--help"], expect_rc=0)
    proc = run([args.gui, "--view", "nonsense"], expect_rc=None)
    if proc.returncode == 0:
        fail("an unknown --view was accepted")
    proc = run([args.gui, "--size", "12x"], expect_rc=2)
    if "--size" not in proc.stdout:
        fail("--size error does not name the option:\n" + proc.stdout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gui", required=True)
    parser.add_argument("--xvfb", required=True, help="the Xvfb server binary")
    parser.add_argument("--gen-trace")
    parser.add_argument("--fpscope")
    parser.add_argument("--mptrain")
    parser.add_argument("--data-dir")
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    if not args.gen_trace and not (args.fpscope and args.mptrain):
        fail("need --gen-trace, or --fpscope and --mptrain")
    # A folder of its own under --work (mkdtemp), kept only when the test fails.
    os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(prefix="run-", dir=args.work)
    start_xvfb(args.xvfb)
    check_command_line(args)
    fp32, fp16 = make_traces(args, work)
    if args.fpscope:
        check_gui_numbers_equal_report(args, [fp32, fp16], work)
    if args.fpscope and args.mptrain:
        check_forecast_agrees(args, work)
    if args.fpscope and args.mptrain:
        check_ranks(args, work)
    check_views(args, work, [fp16], "single")
    check_views(args, work, [fp32, fp16], "pair")
    check_damaged(args, work, fp16)
    shutil.rmtree(work, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
