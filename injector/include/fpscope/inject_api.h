/* The C API of libfpscope_inject.so for front ends that run the operations themselves.
 *
 * mptrain needs none of this: the injector interposes its kernel library. A framework's front end
 * (fpscope's PyTorch front end, loaded by `fpscope run` when a Python program imports torch) sees
 * each operation from outside instead, and hands it to the injector in two calls around it:
 *
 *     int plan = fpscope_op_plan("convolution");          // which tensors would be measured
 *     fpscope_op* op = fpscope_op_begin("convolution", inputs, 3, written, plan != 0);
 *     ... run the operation ...
 *     if (fpscope_op_end(op, outputs, 1, 0) == FPSCOPE_TRAPPED) raise(fpscope_trap_message());
 *
 * The statistics, the records, the ring and the collector are those of mptrain's kernels: the same
 * C++ code measures the tensors' memory, so a PyTorch trace and an mptrain trace hold the same
 * numbers for the same values. Tensors are described with the kernel ABI's mpt_tensor (mpt/abi.h):
 * contiguous, row-major, `data` at the first element. Steps, phases and layers are ranges of the
 * trainer's NVTX convention (fpscope/contract/nvtx.h), opened through fpscope_range_push().
 *
 * Every call is safe in a process that does not trace (no `fpscope run`, or another process of the
 * run owns the ring): fpscope_tracing() is then 0, fpscope_op_begin() returns NULL and the rest do
 * nothing. Calls are thread-safe; an op is begun and ended on the same thread.
 * docs/pytorch.md describes the front end built on it.
 */
#ifndef FPSCOPE_INJECT_API_H
#define FPSCOPE_INJECT_API_H

#include <stdint.h>

#include "mpt/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FPSCOPE_INJECT_API_VERSION 6

/* fpscope_op_plan(): what an op of that name, launched now, would have measured. */
#define FPSCOPE_MEASURE_INPUTS 1
#define FPSCOPE_MEASURE_OUTPUTS 2
/* fpscope_op_end(): the op made the first NaN/Inf that --trap asked for. */
#define FPSCOPE_TRAPPED 1

typedef struct fpscope_op fpscope_op;

MPT_API int fpscope_api_version(void);
/* 1 when this process writes a trace (it claims the run's ring at its first call), else 0. */
MPT_API int fpscope_tracing(void);
/* The rank this process traces under, where its launcher's environment does not say it (a rank a
 * Python program started with torch.multiprocessing.spawn learns it from init_process_group):
 * `local_rank` and `world_size` -1 when unknown, `source` what said it ("init_process_group").
 * Only before the process's first other call: 1 when taken, 0 when tracing had already started. */
MPT_API int fpscope_set_rank(int32_t rank, int32_t local_rank, int32_t world_size, const char* source);
/* 1 when ops of optimizer step `step` may be measured (the --every and --steps filters, and
 * --dump), else 0: a front end may skip watching the ops of steps that answer 0. */
MPT_API int fpscope_step_watched(int64_t step);

/* Opens a range of the trainer's convention: `category` is 1 (step, `step`
 * is the optimizer step), 2 (phase: "forward", "backward", "optimizer", "eval") or 3 (layer).
 * Returns the depth of the new range, or -1 when not tracing. */
MPT_API int fpscope_range_push(int32_t category, const char* message, int64_t step);
/* Closes the innermost range opened by fpscope_range_push(). A front end's ranges are the
 * program's, not a thread's: they form one stack whichever thread opens or closes them, and an op
 * begun on any thread (a helper working for the program's, as the autograd engine's device thread)
 * takes the step, phase and layer open then. */
MPT_API int fpscope_range_pop(void);

MPT_API int fpscope_op_plan(const char* kernel);
/* Before the op runs. `inputs` may be NULL with n_inputs > 0 (an op counted, not measured);
 * `written` (may be NULL) flags the inputs the op overwrites; `measure` 0 records the op without
 * measuring any tensor. Returns NULL when not tracing. */
MPT_API fpscope_op* fpscope_op_begin(const char* kernel, const mpt_tensor* inputs, int32_t n_inputs,
                                     const uint8_t* written, int32_t measure);
/* After the op: its outputs (an input it overwrote is listed again, same data), and `status`
 * (0: it ran). Ends and frees `op`. Returns 0, or FPSCOPE_TRAPPED. */
MPT_API int fpscope_op_end(fpscope_op* op, const mpt_tensor* outputs, int32_t n_outputs, int32_t status);
/* The message of this process's trap ("" before one): op, layer, step, tensor and index. */
MPT_API const char* fpscope_trap_message(void);

/* Memory a front end saw appear: returns the allocation id for mpt_tensor.id (0 when not
 * tracing). `category` is an mpt_category. */
MPT_API uint64_t fpscope_alloc_seen(const void* ptr, uint64_t bytes, int32_t device, int32_t category,
                                    const char* name);
/* The allocation at `ptr` is gone. */
MPT_API void fpscope_free_seen(const void* ptr);
/* What allocation `id` holds, learnt after fpscope_alloc_seen(). */
MPT_API void fpscope_relabel(uint64_t id, int32_t category, const char* name);

/* Statistics reuse. An input that an earlier op measured as its output, unchanged since, takes
 * those statistics instead of a second scan (docs/injector.md, "Inputs measured once"). Only
 * memory of allocations reported through fpscope_alloc_seen() is remembered, except those of
 * category MPT_CAT_DATA (memory the program may fill behind the front end's back). The injector
 * sees the writes of every op begun with `written` flags and of every output passed to
 * fpscope_op_end(); a front end that reports every other write it knows of says so first:
 *   fpscope_report_writes(): declares that this front end reports writes; returns 1 when reuse is
 *   then on, 0 when it is off (--rescan-inputs, --tensors in or out), and a front end need not
 *   report writes. A front end that never declares it gets no reuse: its first op turns it off;
 *   fpscope_memory_written(ptr, bytes): bytes at `ptr` were written outside the ops it reported
 *   with their tensors (an op counted without them, say); ptr NULL: memory anywhere may have been
 *   written (after a stretch of ops the front end did not watch), so nothing remembered is reused. */
MPT_API int fpscope_report_writes(void);
MPT_API void fpscope_memory_written(const void* ptr, uint64_t bytes);
/* From now on the program writes memory where the front end cannot follow (a collective library's
 * own threads, say): reuse stops for the rest of the process, every input is scanned. */
MPT_API void fpscope_stop_reuse(void);

/* A per-step value ("loss") and an item of configuration, as mpt_log_scalar()/mpt_log_text(). */
MPT_API void fpscope_log_scalar(const char* name, double value, int64_t step);
MPT_API void fpscope_log_text(const char* key, const char* value);

/* One optimizer step of one parameter, from its values before and after the step
 * (docs/statistics.md, "Parameter updates"): `elements`, `changed` (elements whose bits differ),
 * `nonzero` (elements whose gradient was nonzero: the front end's stand-in for a nonzero update,
 * which it does not see) and `lost` (of those, elements the step left unchanged), both -1 when not
 * known; the sums over finite elements of |new - old|, (new - old)^2 and old^2. `name` names the
 * parameter, `dtype` is an mpt_dtype, `step` the optimizer step. */
MPT_API void fpscope_param_update(const char* name, int32_t dtype, int64_t step, uint64_t elements, uint64_t changed,
                                  int64_t nonzero, int64_t lost, double applied_abs_sum, double applied_sq_sum,
                                  double weight_sq_sum);

/* The same counted here, for a parameter in host memory: before the optimizer step,
 * fpscope_update_before() copies the parameter's `elements` values of `dtype` (contiguous, at
 * `param`) under the front end's `key`, with where its gradient (the same type and count, at
 * `grad`) is nonzero; it returns 1, or 0 when it keeps no copy (not tracing, a dtype other than
 * fp32, fp16, bf16 or fp64, memory short): the front end then counts the step itself. After the
 * step, fpscope_update_after() compares the parameter now at `param` with the copy under `key`,
 * writes what fpscope_param_update() would and, when `sums` is not NULL, fills it; it returns 1,
 * or 0 when there is no copy of that dtype and count under `key` (nothing is written). A copy is
 * compared once; its memory is kept for the key's next copy. Call fpscope_update_prune() after
 * each optimizer step's copies: it frees the memory of the keys not copied during its last eight
 * calls (parameters no longer stepped), so that optimizers stepped in turn keep theirs. */
typedef struct fpscope_update_sums {
  uint64_t changed, nonzero, lost;
  double applied_abs_sum, applied_sq_sum, weight_sq_sum;
} fpscope_update_sums;
MPT_API int fpscope_update_before(uint64_t key, const void* param, const void* grad, uint64_t elements,
                                  int32_t dtype);
MPT_API int fpscope_update_after(uint64_t key, const char* name, const void* param, uint64_t elements,
                                 int32_t dtype, int64_t step, fpscope_update_sums* sums);
MPT_API void fpscope_update_prune(void);

/* The front end itself failed (an error of its own, not the op's): tracing stops in this process,
 * said once on stderr and in the trace's meta `injector.failure` as "<front_end>: <what>"; the
 * program goes on untraced and the trace keeps what came before. */
MPT_API void fpscope_front_end_failed(const char* front_end, const char* what);

#ifdef __cplusplus
}
#endif

#endif /* FPSCOPE_INJECT_API_H */
