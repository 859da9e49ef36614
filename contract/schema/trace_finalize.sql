-- Summary tables of a finished trace, computed once when a run ends so that reports over millions
-- of tensor records answer at once. The collector runs this file in one transaction after its last
-- insert; fpscope-gen-trace runs it too. Running it again recomputes everything.
--
-- The analyzer reads these tables when meta summary_version matches; otherwise (a trace still being
-- written, a collector that was killed) it runs every `CREATE TABLE summary_...` statement of this
-- file into a temporary table of its own read-only connection, so both paths share one definition.
-- Keep each summary a single `CREATE TABLE summary_<name> AS SELECT ...` statement for that reason;
-- a summary may read summaries created before it. The collector makes the summaries that read no
-- other summary on two connections at once, then the rest in this file's order (trace_writer.cpp,
-- "Summaries"): a summary that reads another must name it (summary_...). Every summary but
-- summary_nonfinite it keeps up to date as the rows arrive instead, when it can do so exactly
-- (collector/src/summary_rollup.h); their statements here remain the definition, and a change to
-- one must be made to its rollup too (the tests that compare the two fail otherwise).

DROP TABLE IF EXISTS summary_ranges;
DROP TABLE IF EXISTS summary_layer_steps;
DROP TABLE IF EXISTS summary_steps;
DROP TABLE IF EXISTS summary_nonfinite;
DROP TABLE IF EXISTS summary_memory_peak;
DROP TABLE IF EXISTS summary_memory_by_rank;
DROP TABLE IF EXISTS summary_memory;
DROP TABLE IF EXISTS summary_allocations;
DROP TABLE IF EXISTS summary_counts;
DROP TABLE IF EXISTS summary_ranks;

-- Value ranges per (kernel, layer, phase, role, dtype). *_measured_elements: elements of tensors
-- whose format columns were measured (NULL with --stats basic), the denominator of their shares.
-- nan, pos_inf and neg_inf count the values no allow rule covers; intended_* the values of output
-- tensors whose non-finite values an allow rule covers (nonfinite.allowed = 1: every kind the
-- tensor holds is intended, so all its NaN/Inf are). Here and below, a step holding only intended
-- values counts no NaN/Inf. side: 1 for outputs after a kernel's first (slot > 0), which in the
-- forward phase are side outputs, not the layer's activation (fpscope/contract/tensor_role.h).
CREATE TABLE summary_ranges AS
SELECT k.name_id AS kernel_name_id, k.layer_id, k.phase_id, t.role, t.dtype, t.role = 'out' AND t.slot > 0 AS side,
       count(*) AS tensors, sum(t.count) AS elements, min(t.kernel_id) AS first_kernel_id,
       sum(iif(t.intended, 0, t.nan)) AS nan, sum(iif(t.intended, 0, t.pos_inf)) AS pos_inf,
       sum(iif(t.intended, 0, t.neg_inf)) AS neg_inf,
       sum(iif(t.intended, t.nan, 0)) AS intended_nan, sum(iif(t.intended, t.pos_inf, 0)) AS intended_pos_inf,
       sum(iif(t.intended, t.neg_inf, 0)) AS intended_neg_inf,
       sum(t.zero) AS zero, sum(t.subnormal) AS subnormal,
       max(t.absmax) AS absmax, min(t.min_nonzero) AS min_nonzero,
       sum(CASE WHEN t.f16_overflow IS NOT NULL THEN t.count END) AS formats_measured_elements,
       sum(t.f16_overflow) AS f16_overflow, sum(t.f16_underflow) AS f16_underflow,
       sum(t.f16_subnormal) AS f16_subnormal, sum(t.f16_near_max) AS f16_near_max,
       sum(t.bf16_overflow) AS bf16_overflow, sum(t.bf16_underflow) AS bf16_underflow,
       sum(t.bf16_subnormal) AS bf16_subnormal, sum(t.bf16_near_max) AS bf16_near_max,
       sum(t.e4m3_overflow) AS e4m3_overflow, sum(t.e4m3_underflow) AS e4m3_underflow,
       sum(t.e4m3_subnormal) AS e4m3_subnormal, sum(t.e4m3_near_max) AS e4m3_near_max,
       sum(t.e5m2_overflow) AS e5m2_overflow, sum(t.e5m2_underflow) AS e5m2_underflow,
       sum(t.e5m2_subnormal) AS e5m2_subnormal, sum(t.e5m2_near_max) AS e5m2_near_max
FROM (SELECT *, id IN (SELECT tensor_id FROM nonfinite WHERE allowed = 1) AS intended FROM tensors) t
JOIN kernels k ON k.id = t.kernel_id
GROUP BY k.name_id, k.layer_id, k.phase_id, t.role, t.dtype, side;

-- Output ranges per (step, layer, phase, side): heat maps, per-step non-finite counts, gradient
-- ranges. side as in summary_ranges.
CREATE TABLE summary_layer_steps AS
SELECT k.step, k.layer_id, k.phase_id, t.slot > 0 AS side, count(*) AS tensors, sum(t.count) AS elements,
       sum(iif(t.intended, 0, t.nan)) AS nan, sum(iif(t.intended, 0, t.pos_inf + t.neg_inf)) AS inf,
       sum(iif(t.intended, t.nan + t.pos_inf + t.neg_inf, 0)) AS intended,
       max(t.absmax) AS absmax, min(t.min_nonzero) AS min_nonzero,
       sum(t.f16_overflow) AS f16_overflow, sum(t.f16_underflow) AS f16_underflow
FROM (SELECT *, id IN (SELECT tensor_id FROM nonfinite WHERE allowed = 1) AS intended FROM tensors) t
JOIN kernels k ON k.id = t.kernel_id
WHERE t.role = 'out'
GROUP BY k.step, k.layer_id, k.phase_id, side;

-- One row per step that has a step range or kernels: time span and non-finite values of outputs
-- (intended ones apart).
CREATE TABLE summary_steps AS
SELECT step, min(start_ns) AS start_ns, max(end_ns) AS end_ns, sum(nan) AS nan, sum(inf) AS inf,
       sum(intended) AS intended
FROM (
  SELECT step, start_ns, end_ns, 0 AS nan, 0 AS inf, 0 AS intended FROM nvtx_ranges WHERE kind = 'step' AND step IS NOT NULL
  UNION ALL
  SELECT step, NULL, NULL, nan, inf, intended FROM summary_layer_steps WHERE step IS NOT NULL
)
GROUP BY step;

-- Non-finite output tensors per (kernel, layer); intended ones (allowed) are left out.
CREATE TABLE summary_nonfinite AS
SELECT k.name_id AS kernel_name_id, k.layer_id, count(*) AS tensors, sum(n.origin) AS origins,
       min(n.kernel_id) AS first_kernel_id, min(k.step) AS first_step
FROM nonfinite n JOIN kernels k ON k.id = n.kernel_id
WHERE n.allowed = 0
GROUP BY k.name_id, k.layer_id;

-- The memory timeline is walked twice in all (SQLite's window functions cost about a microsecond
-- per event and window): once for the peak, once for the running totals per rank and category.
-- The other memory summaries read these two.

-- v_memory_peak: each category's live bytes when the total peaked, and that moment.
CREATE TABLE summary_memory_peak AS SELECT * FROM v_memory_peak;

-- Per rank and category, from v_memory_timeline: the category's largest live bytes, what it
-- allocated, its live bytes at the end, and the largest total live bytes of the rank right after
-- one of the category's events (so a rank's peak is the largest of its rows').
CREATE TABLE summary_memory_by_rank AS
SELECT rank, category, max(category_live) AS max_live,
       sum(CASE WHEN kind = 'alloc' THEN bytes ELSE 0 END) AS allocated,
       sum(kind = 'alloc') AS allocations, sum(delta) AS live_at_end, max(live) AS max_total_live
FROM v_memory_timeline GROUP BY rank, category;

-- Memory per category: live bytes when the total peaked, the category's own maximum (in any rank),
-- and what was allocated in all.
CREATE TABLE summary_memory AS
WITH by_category AS (
  SELECT category, max(max_live) AS max_live, sum(allocated) AS allocated,
         sum(allocations) AS allocations, sum(live_at_end) AS live_at_end
  FROM summary_memory_by_rank GROUP BY category
)
SELECT c.id AS category, p.bytes AS at_peak, coalesce(b.max_live, 0) AS max_live,
       coalesce(b.allocated, 0) AS allocated, coalesce(b.allocations, 0) AS allocations,
       coalesce(b.live_at_end, 0) AS live_at_end
FROM categories c JOIN summary_memory_peak p ON p.category = c.name
LEFT JOIN by_category b ON b.category = c.id ORDER BY c.id;

-- Allocations grouped by (name, category, bytes), so an activation allocated every step is one row.
-- The bare columns come from the group's first event: SQLite takes them from the min() row.
CREATE TABLE summary_allocations AS
SELECT m.name_id, m.category, m.bytes, count(*) AS count, min(m.id) AS first_event_id,
       m.alloc_id AS first_alloc_id, m.t_ns AS first_alloc_ns, m.step AS first_step
FROM memory_events m WHERE m.kind = 'alloc'
GROUP BY m.name_id, m.category, m.bytes;

-- One row per rank: its processes and how they ended, its kernels and steps, its first NaN/Inf made
-- from finite inputs (by its own clock), its memory peak and its loss-scale events. A trace of one
-- process has one row, rank 0.
CREATE TABLE summary_ranks AS
WITH procs AS (
  SELECT rank, count(*) AS processes, min(pid) AS pid, min(host) AS host,
         CASE WHEN sum(ended IS 'vanished') > 0 THEN 'vanished'
              WHEN sum(ended IS 'exited') = count(*) THEN 'exited' END AS ended
  FROM processes GROUP BY rank
),
work AS MATERIALIZED (
  SELECT rank, count(*) AS kernels, count(DISTINCT step) AS steps, min(start_ns) AS start_ns,
         max(end_ns) AS end_ns
  FROM kernels GROUP BY rank
),
-- A rank's steps with kernels, its tail (v_step_ranges) left out.
tails AS (SELECT rank, step FROM v_step_ranges WHERE tail),
origins AS (
  SELECT k.rank, k.id AS kernel_id, k.step, k.start_ns,
         row_number() OVER (PARTITION BY k.rank ORDER BY k.start_ns, k.id) AS nth
  FROM nonfinite n JOIN kernels k ON k.id = n.kernel_id
  WHERE n.origin = 1 AND n.allowed = 0
),
nonfinite_counts AS (SELECT rank, count(*) AS tensors FROM nonfinite WHERE allowed = 0 GROUP BY rank),
memory AS (SELECT rank, max(max_total_live) AS peak FROM summary_memory_by_rank GROUP BY rank),
scaling AS (SELECT rank, count(*) AS events, sum(skipped) AS skipped FROM loss_scale GROUP BY rank),
ranks AS (SELECT rank FROM processes UNION SELECT rank FROM work)
SELECT r.rank, coalesce(p.processes, 0) AS processes, p.pid, p.host, p.ended,
       coalesce(w.kernels, 0) AS kernels,
       coalesce(w.steps, 0) - (SELECT count(*) FROM tails t WHERE t.rank = r.rank
                               AND EXISTS (SELECT 1 FROM kernels k WHERE k.rank = t.rank AND k.step = t.step)) AS steps,
       w.start_ns, w.end_ns,
       coalesce(nf.tensors, 0) AS nonfinite_tensors,
       o.kernel_id AS first_origin_kernel_id, o.step AS first_origin_step, o.start_ns AS first_origin_ns,
       m.peak AS memory_peak_bytes, coalesce(sc.events, 0) AS loss_scale_events,
       coalesce(sc.skipped, 0) AS skipped_steps
FROM ranks r
LEFT JOIN procs p ON p.rank = r.rank
LEFT JOIN work w ON w.rank = r.rank
LEFT JOIN origins o ON o.rank = r.rank AND o.nth = 1
LEFT JOIN nonfinite_counts nf ON nf.rank = r.rank
LEFT JOIN memory m ON m.rank = r.rank
LEFT JOIN scaling sc ON sc.rank = r.rank
ORDER BY r.rank;

-- Whole-trace counts and the memory peak, one row per key. value NULL: not known. Each table is
-- read once (the kernels and the step ranges in one pass each); the ranks are summary_ranks' rows.
-- steps counts training steps: a step range that is the tail of its rank's run (v_step_ranges: no
-- training phase begins in it) is not one; tail_step is its number (NULL when no rank has one).
CREATE TABLE summary_counts AS
WITH peak AS MATERIALIZED (SELECT peak_total_bytes AS live, peak_t_ns AS t_ns, peak_step AS step, rank
                          FROM summary_memory_peak LIMIT 1),
k AS MATERIALIZED (SELECT count(*) AS kernels, max(end_ns - start_ns) AS longest,
                          count(CASE WHEN sampled = 1 THEN 1 END) AS sampled, min(start_ns) AS first_ns,
                          max(end_ns) AS last_ns FROM kernels),
ranges AS MATERIALIZED (SELECT step, tail FROM v_step_ranges),
s AS MATERIALIZED (SELECT count(DISTINCT step) AS steps, min(step) AS first_step, max(step) AS last_step
                   FROM ranges WHERE NOT tail)
SELECT 'kernels' AS key, (SELECT kernels FROM k) AS value
UNION ALL SELECT 'longest_kernel_ns', (SELECT longest FROM k)
UNION ALL SELECT 'sampled_kernels', (SELECT sampled FROM k)
UNION ALL SELECT 'tensors', (SELECT count(*) FROM tensors)
UNION ALL SELECT 'nonfinite_tensors', (SELECT count(*) FROM nonfinite WHERE allowed = 0)
UNION ALL SELECT 'allowed_nonfinite_tensors', (SELECT count(*) FROM nonfinite WHERE allowed = 1)
UNION ALL SELECT 'memory_events', (SELECT count(*) FROM memory_events)
UNION ALL SELECT 'steps', (SELECT steps FROM s)
UNION ALL SELECT 'first_step', (SELECT first_step FROM s)
UNION ALL SELECT 'last_step', (SELECT last_step FROM s)
UNION ALL SELECT 'tail_step', (SELECT max(step) FROM ranges WHERE tail AND step NOT IN (SELECT step FROM ranges WHERE NOT tail))
UNION ALL SELECT 'start_ns', (SELECT min(v) FROM (SELECT first_ns AS v FROM k
                              UNION ALL SELECT min(start_ns) FROM nvtx_ranges
                              UNION ALL SELECT min(t_ns) FROM memory_events))
UNION ALL SELECT 'end_ns', (SELECT max(v) FROM (SELECT last_ns AS v FROM k
                            UNION ALL SELECT max(end_ns) FROM nvtx_ranges
                            UNION ALL SELECT max(t_ns) FROM memory_events))
UNION ALL SELECT 'memory_peak_bytes', (SELECT live FROM peak)
UNION ALL SELECT 'memory_peak_ns', (SELECT t_ns FROM peak)
UNION ALL SELECT 'memory_peak_step', (SELECT step FROM peak)
UNION ALL SELECT 'memory_peak_rank', (SELECT rank FROM peak)
UNION ALL SELECT 'ranks', (SELECT count(*) FROM summary_ranks);

-- Indexes for timeline windows. A new trace has them from its schema, kept up to date as the rows
-- arrived; a trace made before they were there gets them here.
CREATE INDEX IF NOT EXISTS kernels_by_start ON kernels(start_ns);
CREATE INDEX IF NOT EXISTS nvtx_ranges_by_start ON nvtx_ranges(start_ns);

INSERT OR REPLACE INTO meta(key, value) VALUES ('summary_version', '4');
