// libfpscope_analysis: the one place where fpscope turns a trace (an SQLite file written by
// `fpscope run`, schema in contract/schema/trace_schema.sql) into numbers. The command line
// (`fpscope report|compare|advise|export|query`) and fpscope-gui are thin front ends over this API,
// so both always show the same values.
//
// Usage:
//   auto trace = fpscope::analysis::Trace::open("runs/fp16.sqlite");   // throws TraceError
//   RunSummary s = summary(*trace);
//   NonfiniteReport nf = nonfinite(*trace);
//
// Threads: a Trace may be opened on one thread (a background loader, with a progress callback that
// can cancel) and used on another. Its connection is serialized, so calls from several threads are
// safe but run one at a time; Trace::interrupt() stops a long call from any thread.
//
// Speed: reports read the summary tables that contract/schema/trace_finalize.sql adds when a run
// ends. When they are absent (a trace still being written, a collector that was killed), open()
// computes the same tables into temporary tables of its own connection, which scans the trace once.
//
// Conventions: times in integer nanoseconds (the traced process's monotonic clock); std::nullopt
// where the trace has NULL (unknown or not measured), never zero.
//
// The API is split by area, one header each under fpscope/analysis/, matching the files of
// analyzer/src/: formats, trace, summary, nonfinite, ranges, steps, why, memory, ranks, timeline,
// tensors, events, compare, advise, fp8, learning. This header includes them all.
#pragma once

#include "fpscope/analysis/formats.h"
#include "fpscope/analysis/trace.h"
#include "fpscope/analysis/summary.h"
#include "fpscope/analysis/nonfinite.h"
#include "fpscope/analysis/ranges.h"
#include "fpscope/analysis/steps.h"
#include "fpscope/analysis/why.h"
#include "fpscope/analysis/trend.h"
#include "fpscope/analysis/memory.h"
#include "fpscope/analysis/ranks.h"
#include "fpscope/analysis/timeline.h"
#include "fpscope/analysis/tensors.h"
#include "fpscope/analysis/events.h"
#include "fpscope/analysis/compare.h"
#include "fpscope/analysis/advise.h"
#include "fpscope/analysis/fp8.h"
#include "fpscope/analysis/learning.h"
