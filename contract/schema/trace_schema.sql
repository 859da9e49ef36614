-- The fpscope trace: one SQLite file per traced run. This file is the schema's single source; the
-- collector compiles it in and runs it on a new trace. docs/schema.md documents every table, column
-- and view. Changing a table or view means raising schema_version (meta) and PRAGMA user_version,
-- and teaching the analyzer's reader the older versions it still accepts.
--
-- Conventions: times are integer nanoseconds on the traced process's monotonic clock (`processes`
-- has each process's wall-clock start); strings are interned in `strings`; one row per event; NULL
-- means unknown or not measured, never zero. Every event table has a `rank` column: the rank of the
-- process that recorded it (0 for a process no launcher gave a rank; since schema 3).

PRAGMA application_id = 1179669315;  -- 0x46505343, "FPSC"
PRAGMA user_version = 6;

CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT
) WITHOUT ROWID;

CREATE TABLE strings (
  id    INTEGER PRIMARY KEY,
  value TEXT NOT NULL
);

-- Lookup tables for the small enumerations stored as integers.
CREATE TABLE dtypes (id INTEGER PRIMARY KEY, name TEXT NOT NULL, bits INTEGER);
INSERT INTO dtypes VALUES (0,'f32',32),(1,'f16',16),(2,'bf16',16),(3,'i32',32),(4,'i64',64),(5,'u8',8),(6,'f64',64),
  (7,'e4m3',8),(8,'e5m2',8),(9,'e4m3fnuz',8),(10,'e5m2fnuz',8),(11,'e8m0',8),  -- the 8-bit floats (number_formats.h)
  (12,'e2m1',4);  -- OCP FP4, stored one value a byte
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO categories VALUES (0,'weight'),(1,'master_weight'),(2,'gradient'),(3,'activation'),
  (4,'optimizer_state'),(5,'workspace'),(6,'data');

-- The traced processes, one per ring: the first to trace is 0. A multi-process run (MPI ranks,
-- PyTorch DDP, a script that starts several programs) has one row per process; its rank comes from
-- the launcher's environment (fpscope/common/launcher_rank.h), 0 when none was given. Since schema 3.
CREATE TABLE processes (
  id           INTEGER PRIMARY KEY,  -- the process's ring; kernels.id >> 40 and memory_events.alloc_id >> 40
  rank         INTEGER NOT NULL,
  local_rank   INTEGER,              -- NULL: the launcher gave none
  world_size   INTEGER,              -- NULL: the launcher gave none
  pid          INTEGER NOT NULL,
  host         TEXT NOT NULL,
  rank_source  TEXT,                 -- the variable the rank came from (OMPI_COMM_WORLD_RANK, RANK, ...), or init_process_group
  exe          TEXT NOT NULL,
  injector_options TEXT NOT NULL,
  realtime_ns  INTEGER NOT NULL,     -- CLOCK_REALTIME when its tracing started
  monotonic_ns INTEGER NOT NULL,     -- its monotonic clock (the clock of its events) at that moment
  ended        TEXT,                 -- 'exited' (normally), 'vanished' (killed or crashed: no exit seen)
  exit_ns      INTEGER               -- when it exited, NULL if it vanished
);

-- NVTX ranges. kind: 'step', 'phase', 'layer' (the trainer's categories) or 'range' (any other).
CREATE TABLE nvtx_ranges (
  id        INTEGER PRIMARY KEY,
  start_ns  INTEGER NOT NULL,
  end_ns    INTEGER,            -- NULL: never closed (the program ended inside it)
  thread    INTEGER NOT NULL,
  depth     INTEGER NOT NULL,   -- nesting depth on its thread, 0 outermost
  kind      TEXT NOT NULL,
  name_id   INTEGER NOT NULL REFERENCES strings(id),
  domain_id INTEGER REFERENCES strings(id),
  step      INTEGER,             -- the payload of a step range; NULL otherwise
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

-- One row per kernel launch seen by the injector.
CREATE TABLE kernels (
  id        INTEGER PRIMARY KEY,  -- the launch's number in its process, plus processes.id << 40
  start_ns  INTEGER NOT NULL,
  end_ns    INTEGER NOT NULL,
  name_id   INTEGER NOT NULL REFERENCES strings(id),
  layer_id  INTEGER REFERENCES strings(id),
  phase_id  INTEGER REFERENCES strings(id),
  step      INTEGER,
  thread    INTEGER NOT NULL,
  device    INTEGER NOT NULL,     -- 0 cpu, 1 cuda
  status    INTEGER NOT NULL,     -- what the kernel returned, 0 = ok
  sampled   INTEGER NOT NULL,      -- 1: its tensors were measured
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

-- One row per measured tensor of a launch. Statistics over finite values; NULL where none exist.
-- The *_overflow/_underflow/_subnormal/_near_max columns count values by what a cast to that format
-- (round to nearest even) would do; they are NULL with --stats basic, as is exp_hist.
CREATE TABLE tensors (
  id          INTEGER PRIMARY KEY,
  kernel_id   INTEGER NOT NULL REFERENCES kernels(id),
  role        TEXT NOT NULL CHECK (role IN ('in', 'out')),  -- contract::kRoleNames
  slot        INTEGER NOT NULL,    -- index among the launch's inputs or outputs
  tensor_uid  INTEGER,             -- allocation id; NULL if the tensor has none
  name_id     INTEGER NOT NULL REFERENCES strings(id),
  dtype       INTEGER NOT NULL REFERENCES dtypes(id),
  shape       TEXT NOT NULL,       -- JSON array, e.g. '[64,5,26,26]'
  count       INTEGER NOT NULL,
  nan         INTEGER NOT NULL,
  pos_inf     INTEGER NOT NULL,
  neg_inf     INTEGER NOT NULL,
  zero        INTEGER NOT NULL,
  subnormal   INTEGER NOT NULL,    -- subnormal in the tensor's own dtype
  min         REAL,
  max         REAL,
  absmax      REAL,
  min_nonzero REAL,                -- smallest nonzero magnitude
  mean        REAL,
  rms         REAL,
  f16_overflow INTEGER, f16_underflow INTEGER, f16_subnormal INTEGER, f16_near_max INTEGER,
  bf16_overflow INTEGER, bf16_underflow INTEGER, bf16_subnormal INTEGER, bf16_near_max INTEGER,
  e4m3_overflow INTEGER, e4m3_underflow INTEGER, e4m3_subnormal INTEGER, e4m3_near_max INTEGER,
  e5m2_overflow INTEGER, e5m2_underflow INTEGER, e5m2_subnormal INTEGER, e5m2_near_max INTEGER,
  exp_hist    TEXT,                 -- JSON object {"exponent": count}: 2^e <= |x| < 2^(e+1), e in [-149, 127]
  hist_below  INTEGER,              -- fp64 values 0 < |x| < 2^-149, beyond exp_hist; since schema 4
  hist_above  INTEGER,              -- fp64 values |x| >= 2^128; 0 for the narrower types; since schema 4
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

-- The first NaN/Inf of each output tensor that holds any.
CREATE TABLE nonfinite (
  id          INTEGER PRIMARY KEY,
  tensor_id   INTEGER NOT NULL REFERENCES tensors(id),
  kernel_id   INTEGER NOT NULL REFERENCES kernels(id),
  kind        TEXT NOT NULL,       -- of the first one: 'nan', '+inf' or '-inf'
  first_index INTEGER NOT NULL,    -- flat, row-major
  first_bits  INTEGER NOT NULL,    -- bit pattern in the tensor's dtype (fp64: 64 bits, signed)
  origin      INTEGER NOT NULL,    -- 1: all inputs finite, this kernel made it; 0: passed on
  allowed     INTEGER NOT NULL DEFAULT 0,  -- 1: intended, an allow rule covers it (since schema 2)
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

-- Allocation and free events of the kernel library.
CREATE TABLE memory_events (
  id          INTEGER PRIMARY KEY,
  t_ns        INTEGER NOT NULL,
  kind        TEXT NOT NULL,       -- 'alloc' or 'free'
  alloc_id    INTEGER NOT NULL,    -- mpt_alloc's id; tensors.tensor_uid refers to it
  bytes       INTEGER NOT NULL,
  category    INTEGER NOT NULL REFERENCES categories(id),
  name_id     INTEGER NOT NULL REFERENCES strings(id),
  device      INTEGER NOT NULL,
  step        INTEGER,              -- the step range open at the time, NULL outside steps
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

-- The fp8 and microscaling scaling recipes forecast (docs/statistics.md, "Scaling recipes"): one
-- row per contract::Recipe, written from contract/.../scaling_recipes.h into every new trace.
-- Since schema 5.
CREATE TABLE recipes (
  id          INTEGER PRIMARY KEY,  -- contract::Recipe
  name        TEXT NOT NULL,        -- as users write it: 'mxfp8-e4m3'
  element     TEXT NOT NULL,        -- the element format: 'e4m3', 'e5m2' or 'e2m1'
  block       INTEGER NOT NULL,     -- values per block along a row; 0: the tensor, -1: the row
  weight_rows INTEGER NOT NULL,     -- a weight's tile height in rows (1: blocks along rows only)
  history     INTEGER NOT NULL,     -- delayed scaling: steps of amax history; 0 otherwise
  description TEXT NOT NULL
);

-- What each recipe would do to a tensor that fp8 training quantizes (the inputs of the matrix
-- products of linear and convolution layers; every measured tensor with --recipes all): one row
-- per tensor and recipe. Since schema 5.
CREATE TABLE tensor_recipes (
  tensor_id   INTEGER NOT NULL REFERENCES tensors(id),
  kernel_id   INTEGER NOT NULL REFERENCES kernels(id),
  operand     TEXT NOT NULL,        -- 'activation', 'weight', 'gradient' or 'other' (contract::kOperandNames)
  recipe      INTEGER NOT NULL REFERENCES recipes(id),
  quantized   INTEGER NOT NULL,     -- finite values quantized (not those of non-finite blocks)
  underflow   INTEGER NOT NULL,     -- nonzero values that round to zero
  subnormal   INTEGER NOT NULL,     -- nonzero values that land on a subnormal of the element format
  saturated   INTEGER NOT NULL,     -- values beyond the element format's largest, after scaling
  blocks      INTEGER NOT NULL,     -- blocks of the recipe's granularity
  blocks_lost INTEGER NOT NULL,     -- blocks whose every nonzero value rounds to zero
  blocks_nonfinite INTEGER NOT NULL,-- blocks a NaN or Inf makes non-finite (MX, NVFP4)
  sse         REAL NOT NULL,        -- sum of squared errors of the recovered values
  signal      REAL NOT NULL,        -- sum of squares of the same values
  scale       REAL,                 -- the per-tensor recipes' scale; NULL for block recipes
  amax        REAL,                 -- the tensor's largest finite |x|; NULL when it holds NaN or Inf
  rank        INTEGER NOT NULL DEFAULT 0
);

-- What a kernel's narrowing store did to an output it computed in fp32 and rounded into a 16-bit
-- dtype, or what a quantize kernel did to its 8-bit or 4-bit output (the kernel's own count,
-- mpt/abi.h's launch report: the reference trainer's CPU kernels): one row per measured output so
-- stored. Since schema 6.
CREATE TABLE tensor_stores (
  tensor_id   INTEGER PRIMARY KEY REFERENCES tensors(id),
  results     INTEGER NOT NULL,     -- nonzero finite fp32 results stored (values quantized)
  flushed     INTEGER NOT NULL,     -- of those, rounded to zero
  subnormal   INTEGER NOT NULL,     -- rounded to a nonzero subnormal
  overflowed  INTEGER NOT NULL,     -- rounded to an infinity (quantized: saturated at the largest value)
  rank        INTEGER NOT NULL DEFAULT 0
);

-- One optimizer step of one parameter (docs/statistics.md, "Parameter updates"): the parameter
-- before and after the step, and the update the kernel computed before rounding it to the
-- parameter's dtype where the kernel reports it. Since schema 6.
CREATE TABLE param_updates (
  id          INTEGER PRIMARY KEY,
  kernel_id   INTEGER REFERENCES kernels(id),  -- the optimizer launch; NULL for a front end's step
  step        INTEGER,              -- the optimizer step
  name_id     INTEGER NOT NULL REFERENCES strings(id),  -- the parameter as the program names it
  alloc_id    INTEGER,              -- its allocation (memory_events.alloc_id)
  dtype       INTEGER NOT NULL REFERENCES dtypes(id),
  elements    INTEGER NOT NULL,
  changed     INTEGER NOT NULL,     -- elements whose stored bits the step changed
  nonzero_from TEXT,                -- 'update': nonzero counts computed updates (the kernel's);
                                    -- 'gradient': nonzero gradients (a front end's); NULL: unknown
  nonzero     INTEGER,              -- elements with a nonzero update (as nonzero_from says)
  lost        INTEGER,              -- of those, elements the step left unchanged
  computed_abs_sum REAL,            -- sum |u| of the computed updates; NULL: not known
  computed_sq_sum  REAL,            -- sum u^2
  applied_abs_sum  REAL NOT NULL,   -- sum |new - old|
  applied_sq_sum   REAL NOT NULL,   -- sum (new - old)^2
  weight_sq_sum    REAL NOT NULL,   -- sum old^2
  rank        INTEGER NOT NULL DEFAULT 0
);

-- One row per amp_update_scale launch.
CREATE TABLE loss_scale (
  id             INTEGER PRIMARY KEY,
  kernel_id      INTEGER NOT NULL REFERENCES kernels(id),
  t_ns           INTEGER NOT NULL,
  step           INTEGER,
  scale_before   REAL NOT NULL,
  scale_after    REAL NOT NULL,
  found_inf      INTEGER NOT NULL,
  skipped        INTEGER NOT NULL, -- the optimizer step was skipped (found_inf)
  event          TEXT NOT NULL,    -- 'growth', 'backoff' or 'unchanged'
  growth_tracker INTEGER NOT NULL,
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

-- Values the program reported (mpt_log_scalar): loss, train_accuracy, test_accuracy, lr.
CREATE TABLE scalars (
  id      INTEGER PRIMARY KEY,
  t_ns    INTEGER NOT NULL,
  step    INTEGER,
  name_id INTEGER NOT NULL REFERENCES strings(id),
  value   REAL,                     -- NULL if the value was NaN
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

-- Tensors written to .npy files by --dump.
CREATE TABLE dumps (
  id        INTEGER PRIMARY KEY,
  tensor_id INTEGER NOT NULL REFERENCES tensors(id),
  path      TEXT NOT NULL          -- relative to the trace's folder
);

-- Device activity from CUPTI, for CUDA programs (empty otherwise). Times are the traced process's
-- monotonic clock; correlation_id is CUPTI's, shared with the runtime call that caused the activity.
CREATE TABLE cuda_kernels (
  id             INTEGER PRIMARY KEY,
  start_ns       INTEGER NOT NULL,
  end_ns         INTEGER NOT NULL,
  name_id        INTEGER NOT NULL REFERENCES strings(id),
  correlation_id INTEGER NOT NULL,
  device         INTEGER NOT NULL,
  stream         INTEGER NOT NULL,
  grid_x INTEGER NOT NULL, grid_y INTEGER NOT NULL, grid_z INTEGER NOT NULL,
  block_x INTEGER NOT NULL, block_y INTEGER NOT NULL, block_z INTEGER NOT NULL,
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

CREATE TABLE cuda_memcpy (
  id             INTEGER PRIMARY KEY,
  start_ns       INTEGER NOT NULL,
  end_ns         INTEGER NOT NULL,
  bytes          INTEGER NOT NULL,
  kind           TEXT NOT NULL,      -- 'htod', 'dtoh', 'dtod', 'htoh', 'ptop', ... or 'unknown'
  src_kind       INTEGER NOT NULL,   -- CUpti_ActivityMemoryKind
  dst_kind       INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  device         INTEGER NOT NULL,
  stream         INTEGER NOT NULL,
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

CREATE TABLE cuda_memset (
  id             INTEGER PRIMARY KEY,
  start_ns       INTEGER NOT NULL,
  end_ns         INTEGER NOT NULL,
  bytes          INTEGER NOT NULL,
  value          INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  device         INTEGER NOT NULL,
  stream         INTEGER NOT NULL,
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

-- Device memory allocated and released, as the driver saw it (whatever allocated it).
CREATE TABLE cuda_memory (
  id          INTEGER PRIMARY KEY,
  t_ns        INTEGER NOT NULL,
  kind        TEXT NOT NULL,         -- 'alloc' or 'free'
  bytes       INTEGER NOT NULL,
  address     INTEGER NOT NULL,
  memory_kind INTEGER NOT NULL,      -- CUpti_ActivityMemoryKind
  device      INTEGER NOT NULL,
  stream      INTEGER NOT NULL,
  rank        INTEGER NOT NULL DEFAULT 0  -- the process's rank (processes.rank); since schema 3
);

CREATE INDEX tensors_by_kernel ON tensors(kernel_id);
CREATE INDEX kernels_by_step ON kernels(step);
CREATE INDEX nonfinite_by_kernel ON nonfinite(kernel_id);
CREATE INDEX tensor_recipes_by_kernel ON tensor_recipes(kernel_id);
CREATE INDEX param_updates_by_kernel ON param_updates(kernel_id);
CREATE INDEX memory_events_by_time ON memory_events(t_ns);
CREATE INDEX scalars_by_name ON scalars(name_id, step);
CREATE INDEX memory_events_by_rank_time ON memory_events(rank, t_ns);
-- For timeline windows; kept up to date as the rows arrive, so the end of a run need not sort them.
CREATE INDEX kernels_by_start ON kernels(start_ns);
CREATE INDEX nvtx_ranges_by_start ON nvtx_ranges(start_ns);

-- [views] ----------------------------------------------------------------------------------------

CREATE VIEW v_kernels AS
SELECT k.id, k.start_ns, k.end_ns, k.end_ns - k.start_ns AS duration_ns,
       sn.value AS kernel, sl.value AS layer, sp.value AS phase, k.step, k.thread, k.device,
       k.status, k.sampled, k.rank
FROM kernels k
JOIN strings sn ON sn.id = k.name_id
LEFT JOIN strings sl ON sl.id = k.layer_id
LEFT JOIN strings sp ON sp.id = k.phase_id;

-- Each tensor_recipes row with its launch's place, its tensor's name and its recipe's name; the
-- shares are of the values quantized, sqnr_db = 10 log10(signal / sse) (NULL when nothing was
-- lost or nothing nonzero quantized). Since schema 5.
CREATE VIEW v_tensor_recipes AS
SELECT k.kernel, k.layer, k.phase, k.step, st.value AS tensor, r.operand, rc.name AS recipe,
       r.quantized, r.underflow, r.subnormal, r.saturated, r.blocks, r.blocks_lost, r.blocks_nonfinite,
       CASE WHEN r.quantized > 0 THEN 1.0 * r.underflow / r.quantized END AS underflow_share,
       CASE WHEN r.quantized > 0 THEN 1.0 * r.saturated / r.quantized END AS saturated_share,
       CASE WHEN r.sse > 0 AND r.signal > 0 THEN 10 * log10(r.signal / r.sse) END AS sqnr_db,
       r.sse, r.signal, r.scale, r.amax, r.tensor_id, r.kernel_id, r.rank
FROM tensor_recipes r
JOIN v_kernels k ON k.id = r.kernel_id
JOIN tensors t ON t.id = r.tensor_id
JOIN strings st ON st.id = t.name_id
JOIN recipes rc ON rc.id = r.recipe;

-- Each param_updates row with its step and name, and the shares and ratios the learning report
-- reads (docs/statistics.md, "Parameter updates"): lost_update_share = lost / nonzero;
-- lost_magnitude_share = 1 - applied_abs_sum / computed_abs_sum; update_ratio = rms of the applied
-- change over rms of the weight before the step; computed_ratio the same of the computed update.
-- Since schema 6.
CREATE VIEW v_param_updates AS
SELECT u.step, sn.value AS param, d.name AS dtype_name, u.elements, u.changed, u.nonzero_from, u.nonzero, u.lost,
       CASE WHEN u.nonzero > 0 THEN 1.0 * u.lost / u.nonzero END AS lost_update_share,
       CASE WHEN u.computed_abs_sum > 0 THEN 1.0 - u.applied_abs_sum / u.computed_abs_sum END AS lost_magnitude_share,
       CASE WHEN u.weight_sq_sum > 0 THEN sqrt(u.applied_sq_sum / u.weight_sq_sum) END AS update_ratio,
       CASE WHEN u.weight_sq_sum > 0 THEN sqrt(u.computed_sq_sum / u.weight_sq_sum) END AS computed_ratio,
       u.computed_abs_sum, u.computed_sq_sum, u.applied_abs_sum, u.applied_sq_sum, u.weight_sq_sum,
       k.kernel, u.kernel_id, u.alloc_id, u.id, u.rank
FROM param_updates u
LEFT JOIN v_kernels k ON k.id = u.kernel_id
JOIN strings sn ON sn.id = u.name_id
JOIN dtypes d ON d.id = u.dtype;

-- Each tensor_stores row with its launch's place and tensor: the shares are of the results stored.
-- Since schema 6.
CREATE VIEW v_tensor_stores AS
SELECT k.kernel, k.layer, k.phase, k.step, st.value AS tensor, d.name AS dtype_name,
       s.results, s.flushed, s.subnormal, s.overflowed,
       CASE WHEN s.results > 0 THEN 1.0 * s.flushed / s.results END AS flushed_share,
       CASE WHEN s.results > 0 THEN 1.0 * s.subnormal / s.results END AS subnormal_share,
       CASE WHEN s.results > 0 THEN 1.0 * s.overflowed / s.results END AS overflowed_share,
       s.tensor_id, t.kernel_id, s.rank
FROM tensor_stores s
JOIN tensors t ON t.id = s.tensor_id
JOIN v_kernels k ON k.id = t.kernel_id
JOIN strings st ON st.id = t.name_id
JOIN dtypes d ON d.id = t.dtype;

-- intended: 1 when an allow rule covers the tensor's NaN/Inf (its nonfinite row has allowed = 1).
CREATE VIEW v_tensors AS
SELECT t.*, s.value AS tensor, d.name AS dtype_name,
       CASE WHEN t.absmax > 0 AND t.min_nonzero > 0
            THEN log(2, t.absmax) - log(2, t.min_nonzero) END AS dynamic_range_log2,
       EXISTS (SELECT 1 FROM nonfinite n WHERE n.kernel_id = t.kernel_id AND n.tensor_id = t.id AND n.allowed = 1)
         AS intended
FROM tensors t
JOIN strings s ON s.id = t.name_id
JOIN dtypes d ON d.id = t.dtype;

-- The first NaN/Inf made from finite inputs, by time (each process's monotonic clock: one host's
-- ranks share it), among every rank.
CREATE VIEW v_first_nonfinite AS
SELECT k.kernel, k.layer, k.phase, k.step, st.value AS tensor, n.first_index AS "index",
       n.kind AS value, n.kind, n.first_bits, k.id AS kernel_id, n.tensor_id, k.rank, k.start_ns
FROM nonfinite n
JOIN v_kernels k ON k.id = n.kernel_id
JOIN tensors t ON t.id = n.tensor_id
JOIN strings st ON st.id = t.name_id
WHERE n.origin = 1 AND n.allowed = 0
ORDER BY k.start_ns, n.kernel_id, t.slot
LIMIT 1;

-- Each step range of each rank, and whether it is the run's tail: in a rank whose steps have
-- forward, backward or optimizer phases, a step range in which none of them begins (what the program
-- did after its last optimizer step: PyTorch's front end opens step N+1 when step N ends; a final
-- evaluation's phase is 'eval'). A run that stopped inside a step's forward keeps that step.
CREATE VIEW v_step_ranges AS
WITH training AS (
  SELECT p.rank, max(p.start_ns) AS last_ns FROM nvtx_ranges p JOIN strings n ON n.id = p.name_id
  WHERE p.kind = 'phase' AND n.value IN ('forward', 'backward', 'optimizer') GROUP BY p.rank
)
SELECT r.rank, r.step, r.start_ns, r.end_ns, t.last_ns IS NOT NULL AND r.start_ns > t.last_ns AS tail
FROM nvtx_ranges r LEFT JOIN training t ON t.rank = r.rank
WHERE r.kind = 'step' AND r.step IS NOT NULL;

-- The loss of each step of each rank: the mean of the losses logged in it (a program that
-- accumulates gradients over micro-batches calls backward() on several before one optimizer step),
-- NULL (NaN) when any of them was NaN; micro_batches: how many there were. scalars keeps each.
CREATE VIEW v_step_loss AS
SELECT sc.rank, sc.step, CASE WHEN count(sc.value) = count(*) THEN avg(sc.value) END AS loss,
       count(*) AS micro_batches, max(sc.t_ns) AS t_ns
FROM scalars sc JOIN strings s ON s.id = sc.name_id
WHERE s.value = 'loss' AND sc.step IS NOT NULL
GROUP BY sc.rank, sc.step;

-- One row per step of each rank. nan_values and inf_values count the NaN/Inf of outputs that no
-- allow rule covers; intended_values those it covers (an attention mask's -inf), so a step that
-- holds intended values only has nan_values + inf_values = 0.
CREATE VIEW v_step_summary AS
WITH steps AS (
  SELECT rank, step, min(start_ns) AS start_ns, max(end_ns) AS end_ns
  FROM nvtx_ranges WHERE kind = 'step' GROUP BY rank, step
),
loss AS (SELECT rank, step, loss AS value FROM v_step_loss),
intended AS (SELECT tensor_id FROM nonfinite WHERE allowed = 1),
nonfinite_by_step AS (
  SELECT k.rank, k.step, sum(iif(t.id IN intended, 0, t.nan)) AS nan,
         sum(iif(t.id IN intended, 0, t.pos_inf + t.neg_inf)) AS inf,
         sum(iif(t.id IN intended, t.nan + t.pos_inf + t.neg_inf, 0)) AS intended
  FROM tensors t JOIN kernels k ON k.id = t.kernel_id
  WHERE t.role = 'out' GROUP BY k.rank, k.step
)
SELECT st.step, st.start_ns, st.end_ns, l.value AS loss,
       ls.scale_before AS loss_scale, coalesce(ls.skipped, 0) AS skipped,
       coalesce(nf.nan, 0) AS nan_values, coalesce(nf.inf, 0) AS inf_values, st.rank,
       coalesce(nf.intended, 0) AS intended_values
FROM steps st
LEFT JOIN loss l ON l.rank = st.rank AND l.step = st.step
LEFT JOIN loss_scale ls ON ls.rank = st.rank AND ls.step = st.step
LEFT JOIN nonfinite_by_step nf ON nf.rank = st.rank AND nf.step = st.step
ORDER BY st.step, st.rank;

-- Shares of the format columns are over the elements of tensors whose formats were measured
-- (--stats full, floating-point tensors); NULL when none were.
-- nonfinite: NaN/Inf no allow rule covers; intended: those it covers.
CREATE VIEW v_op_ranges AS
WITH measured AS (
  SELECT t.*, CASE WHEN t.f16_overflow IS NOT NULL THEN t.count END AS measured_count,
         t.id IN (SELECT tensor_id FROM nonfinite WHERE allowed = 1) AS intended
  FROM tensors t
)
SELECT k.kernel, k.layer, t.role, count(*) AS tensors, sum(t.count) AS elements,
       max(t.absmax) AS absmax, min(t.min_nonzero) AS min_nonzero,
       sum(iif(t.intended, 0, t.nan + t.pos_inf + t.neg_inf)) AS nonfinite,
       1.0 * sum(t.f16_overflow) / sum(t.measured_count) AS f16_overflow_share,
       1.0 * sum(t.f16_underflow) / sum(t.measured_count) AS f16_underflow_share,
       1.0 * sum(t.f16_subnormal) / sum(t.measured_count) AS f16_subnormal_share,
       1.0 * sum(t.bf16_overflow) / sum(t.measured_count) AS bf16_overflow_share,
       1.0 * sum(t.bf16_underflow) / sum(t.measured_count) AS bf16_underflow_share,
       1.0 * sum(t.bf16_subnormal) / sum(t.measured_count) AS bf16_subnormal_share,
       1.0 * sum(t.e4m3_overflow) / sum(t.measured_count) AS e4m3_overflow_share,
       1.0 * sum(t.e4m3_underflow) / sum(t.measured_count) AS e4m3_underflow_share,
       1.0 * sum(t.e5m2_overflow) / sum(t.measured_count) AS e5m2_overflow_share,
       1.0 * sum(t.e5m2_underflow) / sum(t.measured_count) AS e5m2_underflow_share,
       sum(iif(t.intended, t.nan + t.pos_inf + t.neg_inf, 0)) AS intended
FROM measured t JOIN v_kernels k ON k.id = t.kernel_id
GROUP BY k.kernel, k.layer, t.role;

CREATE VIEW v_loss_scale AS
SELECT step, scale_before AS scale, found_inf, skipped, event, scale_after, t_ns, kernel_id, rank
FROM loss_scale ORDER BY t_ns;

-- The memory timeline, defined once, in three layers so that each reader pays only for what it
-- reads: every memory event in (t_ns, id) order with its signed size (delta: +bytes for an alloc,
-- -bytes for a free); then the total live bytes of its rank after it (live); then its category's
-- live bytes in its rank after it (category_live). Each rank is a process with memory of its own.
-- v_memory_peak, the memory summaries and the analyzer's memory plot all read these.
CREATE VIEW v_memory_deltas AS
SELECT id, t_ns, step, category, kind, bytes, CASE kind WHEN 'alloc' THEN bytes ELSE -bytes END AS delta, rank
FROM memory_events;

CREATE VIEW v_memory_live AS
SELECT id, t_ns, step, category, kind, bytes, delta, sum(delta) OVER (PARTITION BY rank ORDER BY t_ns, id) AS live,
       rank
FROM v_memory_deltas;

-- v_memory_timeline adds each category's live bytes (category_live), one running sum per category
-- of the `categories` table (0 to 6, the contract's list; a writer test checks that the view covers
-- every category and that its `live` is v_memory_live's). It computes `live` over v_memory_deltas
-- with the same window rather than reading v_memory_live: SQLite evaluates sums that share a window
-- in one pass, where a view over a view, or another window, sorts the events again.
CREATE VIEW v_memory_timeline AS
SELECT id, t_ns, step, category, kind, bytes, delta, sum(delta) OVER w AS live,
       CASE category
         WHEN 0 THEN sum(CASE category WHEN 0 THEN delta ELSE 0 END) OVER w
         WHEN 1 THEN sum(CASE category WHEN 1 THEN delta ELSE 0 END) OVER w
         WHEN 2 THEN sum(CASE category WHEN 2 THEN delta ELSE 0 END) OVER w
         WHEN 3 THEN sum(CASE category WHEN 3 THEN delta ELSE 0 END) OVER w
         WHEN 4 THEN sum(CASE category WHEN 4 THEN delta ELSE 0 END) OVER w
         WHEN 5 THEN sum(CASE category WHEN 5 THEN delta ELSE 0 END) OVER w
         WHEN 6 THEN sum(CASE category WHEN 6 THEN delta ELSE 0 END) OVER w
       END AS category_live, rank
FROM v_memory_deltas WINDOW w AS (PARTITION BY rank ORDER BY t_ns, id) ORDER BY rank, t_ns, id;

-- The moment a rank's total live bytes peaked: the event after which they were largest, the first
-- such; of several ranks, the one whose peak is largest (the lowest rank among equals).
CREATE VIEW v_memory_peak_moment AS
SELECT id, t_ns, step, live, rank FROM v_memory_live ORDER BY live DESC, rank, t_ns, id LIMIT 1;

-- Live bytes per category of that rank at that moment: each category's deltas up to it.
CREATE VIEW v_memory_peak AS
WITH peak AS MATERIALIZED (SELECT id, t_ns, step, live, rank FROM v_memory_peak_moment),
upto AS (SELECT m.category, sum(m.delta) AS bytes FROM v_memory_deltas m, peak p
         WHERE m.rank = p.rank AND (m.t_ns < p.t_ns OR (m.t_ns = p.t_ns AND m.id <= p.id)) GROUP BY m.category)
SELECT c.name AS category, coalesce(u.bytes, 0) AS bytes, p.t_ns AS peak_t_ns, p.live AS peak_total_bytes,
       p.rank, p.step AS peak_step
FROM categories c LEFT JOIN upto u ON u.category = c.id LEFT JOIN peak p ON 1
ORDER BY c.id;
