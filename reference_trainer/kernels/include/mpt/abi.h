/* The kernel ABI of libmpt_kernels.so: the contract between the reference trainer and any tool
 * that interposes it (fpscope's injector above all).
 *
 * Every kernel, CPU or CUDA, is reached through one exported call, mpt_launch(), whose argument
 * describes the launch completely: kernel name, input and output tensors, scalar parameters and
 * stream. A tool that interposes mpt_launch() therefore sees every kernel without knowing any of
 * them, and adding a kernel never touches the tool. Memory goes through mpt_alloc()/mpt_free(),
 * which carry a category and a name. mpt_log_scalar() and mpt_log_text() let the program report
 * per-step values (loss, accuracy) and its configuration; mpt_host_written() declares a write the
 * program made itself to memory it got from mpt_alloc(); the library ignores all three.
 *
 * Rules that keep the calls interposable (checked by tests/reference_trainer):
 *   - these symbols have default visibility, are called through the PLT and are never inlined
 *     across the library boundary (no -Bsymbolic, no -fvisibility=hidden on this header);
 *   - a tensor's elements are contiguous and row-major; `data` points at the first one;
 *   - a kernel that updates a tensor in place lists it among its inputs and among its outputs
 *     (same data pointer): a tool measures inputs before the call and outputs after it;
 *   - a kernel writes only its outputs, and the program declares every write of its own to
 *     allocated memory (mpt_host_written()), so a tool may take a tensor nobody wrote since it
 *     last measured it as unchanged;
 *   - the loss scaler is two kernels, "amp_unscale_check" and "amp_update_scale", whose tensors
 *     are laid out as documented in docs/kernels.md so a tool can read loss-scale events off them.
 *
 * docs/kernels.md lists every kernel with its tensors and scalars.
 */
#ifndef MPT_ABI_H
#define MPT_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 2 added the launch report (mpt_launch_desc.report); the library still takes version 1
 * descriptors, which end before that field. */
#define MPT_ABI_VERSION 2u
#define MPT_ABI_OLDEST_VERSION 1u
#define MPT_MAX_DIMS 6

#if defined(__GNUC__)
#define MPT_API __attribute__((visibility("default")))
#else
#define MPT_API
#endif

/* Element types. Values are stable: they are stored in traces. */
typedef enum mpt_dtype {
  MPT_DTYPE_F32 = 0,
  MPT_DTYPE_F16 = 1,  /* IEEE binary16, stored as uint16_t bits */
  MPT_DTYPE_BF16 = 2, /* bfloat16, stored as uint16_t bits */
  MPT_DTYPE_I32 = 3,
  MPT_DTYPE_I64 = 4,
  MPT_DTYPE_U8 = 5,
  MPT_DTYPE_F64 = 6,
  /* 8-bit floating formats, one byte each (fpscope/contract/number_formats.h defines them): */
  MPT_DTYPE_E4M3 = 7,      /* OCP E4M3FN: no Inf, NaN S.1111.111, largest 448 */
  MPT_DTYPE_E5M2 = 8,      /* OCP E5M2: IEEE-like, largest 57344 */
  MPT_DTYPE_E4M3FNUZ = 9,  /* bias 8, no Inf, no -0, NaN 0x80, largest 240 */
  MPT_DTYPE_E5M2FNUZ = 10, /* bias 16, no Inf, no -0, NaN 0x80, largest 57344 */
  MPT_DTYPE_E8M0 = 11,     /* E8M0FNU: unsigned powers of two 2^-127..2^127, NaN 0xFF */
  MPT_DTYPE_E2M1 = 12      /* OCP FP4 E2M1, one value per byte in its low four bits (sign bit 3;
                              largest 6, no NaN or Inf); the high four bits are zero */
} mpt_dtype;

/* Bytes of one element of `dtype`; 0 for a number that is no mpt_dtype. (Which dtypes a kernel
 * takes is the kernel's to say: the fp8 quantize and dequantize kernels compute with the 8-bit and
 * 4-bit floats, and `copy` moves any dtype's bytes.) */
static inline size_t mpt_dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case MPT_DTYPE_F16:
    case MPT_DTYPE_BF16: return 2;
    case MPT_DTYPE_F32:
    case MPT_DTYPE_I32: return 4;
    case MPT_DTYPE_I64:
    case MPT_DTYPE_F64: return 8;
    case MPT_DTYPE_U8:
    case MPT_DTYPE_E4M3:
    case MPT_DTYPE_E5M2:
    case MPT_DTYPE_E4M3FNUZ:
    case MPT_DTYPE_E5M2FNUZ:
    case MPT_DTYPE_E8M0:
    case MPT_DTYPE_E2M1: return 1;
    default: return 0;
  }
}

typedef enum mpt_device {
  MPT_DEVICE_CPU = 0,
  MPT_DEVICE_CUDA = 1
} mpt_device;

/* What an allocation holds. Values are stable: they are stored in traces. */
typedef enum mpt_category {
  MPT_CAT_WEIGHT = 0,          /* parameters the forward pass reads (16-bit copies included) */
  MPT_CAT_MASTER_WEIGHT = 1,   /* fp32 copies the optimizer updates in mixed precision */
  MPT_CAT_GRADIENT = 2,
  MPT_CAT_ACTIVATION = 3,      /* forward outputs kept for backward, and their gradients */
  MPT_CAT_OPTIMIZER_STATE = 4, /* momentum, Adam moments */
  MPT_CAT_WORKSPACE = 5,       /* scratch: im2col buffers, loss-scaler state, reductions */
  MPT_CAT_DATA = 6             /* input batches and labels */
} mpt_category;

typedef struct mpt_tensor {
  void* data;                   /* first element; host or device memory per `device` */
  uint64_t id;                  /* id of the allocation it lives in (mpt_alloc), 0 if none */
  const char* name;             /* stable, human-readable: "fc1.weight", "conv2.out", "fc1.weight.grad" */
  int64_t shape[MPT_MAX_DIMS];  /* only the first `ndim` entries are meaningful */
  int32_t ndim;
  int32_t dtype;                /* mpt_dtype */
  int32_t device;               /* mpt_device */
  int32_t reserved;             /* zero */
} mpt_tensor;

typedef struct mpt_scalar {
  const char* name;             /* "lr", "stride", "partials_fp16", ... */
  double value;
} mpt_scalar;

/* What a CPU kernel can report about its own work when the caller asks (MPT_LAUNCH_REPORT): things
 * only the kernel sees, because they exist only in its fp32 registers before the store.
 *
 * Narrowing stores. A kernel that computes in fp32 and stores an f16 or bf16 output counts, at that
 * store, the results that the rounding (nearest even, or stochastic where asked) damaged. `results`
 * counts the nonzero finite fp32 results stored; of those, `flushed` became zero, `subnormal` became
 * a nonzero subnormal and `overflowed` became an infinity. A quantize kernel (fp8_quantize_*)
 * counts its 8-bit or 4-bit output q the same way, over the nonzero finite inputs it scaled
 * (those of an MX or NVFP4 block holding a NaN or Inf excepted: they are not scaled): `flushed`
 * became zero, `subnormal` a nonzero subnormal,
 * and `overflowed` counts the values that saturated at the format's largest value (the scaled
 * value rounded beyond it). `narrowed` is 1 for an output the kernel stored that way (a 16-bit
 * output written through the library's fp32 store path, a quantized output) and 0 otherwise (an f32
 * output, an integer one, one the kernel copies bits into, a quantize kernel's scales): its counts
 * are then zero and mean nothing. Outputs past MPT_MAX_REPORTED_OUTPUTS are not counted. */
#define MPT_MAX_REPORTED_OUTPUTS 8
typedef struct mpt_store_counts {
  uint64_t results;
  uint64_t flushed;
  uint64_t subnormal;
  uint64_t overflowed;
  uint32_t narrowed;
  uint32_t reserved;
} mpt_store_counts;

/* Parameter update. An optimizer kernel (sgd_step, adamw_step) compares, element by element, the
 * parameter before the step (p) with the update it computed in fp32 before rounding the new value
 * to the parameter's dtype, and with the value it stored. docs/kernels.md ("Launch reports") defines
 * the computed update u of each kernel exactly. `elements`: the parameter's elements; `nonzero`:
 * those with u != 0; `changed`: those whose stored bits differ from p's; `lost`: those with u != 0
 * whose stored bits equal p's (the update was rounded away). The sums run over finite elements in a
 * fixed order (so they do not depend on the thread count's timing) in double: sum |u|, sum u^2, sum
 * |stored - p|, sum (stored - p)^2 and sum p^2. */
typedef struct mpt_update_counts {
  uint64_t elements;
  uint64_t nonzero;
  uint64_t changed;
  uint64_t lost;
  double computed_abs_sum;
  double computed_sq_sum;
  double applied_abs_sum;
  double applied_sq_sum;
  double weight_sq_sum;
} mpt_update_counts;

/* What the kernel filled in (mpt_launch_report.filled). */
#define MPT_REPORTED_STORES 1u /* stores[0 .. n_outputs) */
#define MPT_REPORTED_UPDATE 2u /* update: the first output is the parameter */

typedef struct mpt_launch_report {
  uint32_t filled;              /* MPT_REPORTED_* bits; the caller sets it to 0 */
  uint32_t reserved;
  mpt_store_counts stores[MPT_MAX_REPORTED_OUTPUTS];
  mpt_update_counts update;
} mpt_launch_report;

/* mpt_launch_desc.flags */
#define MPT_LAUNCH_REPORT 1u  /* fill *report (version 2 and later); CUDA kernels report nothing */

typedef struct mpt_launch_desc {
  uint32_t abi_version;         /* MPT_ABI_VERSION */
  uint32_t flags;               /* MPT_LAUNCH_* bits, or zero */
  const char* kernel;           /* "conv2d_forward", "amp_update_scale", ... */
  const mpt_tensor* inputs;
  int32_t n_inputs;
  int32_t n_outputs;
  const mpt_tensor* outputs;
  const mpt_scalar* scalars;
  int32_t n_scalars;
  int32_t reserved;             /* zero */
  void* stream;                 /* cudaStream_t for CUDA kernels, NULL on the CPU */
  mpt_launch_report* report;    /* with MPT_LAUNCH_REPORT: where the kernel reports; version 2 */
} mpt_launch_desc;

/* Status codes of mpt_launch(). */
typedef enum mpt_status {
  MPT_OK = 0,
  MPT_ERR_UNKNOWN_KERNEL = 1,
  MPT_ERR_BAD_ARGUMENTS = 2,    /* wrong tensor count, dtype, shape or scalar */
  MPT_ERR_DEVICE = 3,           /* CUDA error or no device */
  MPT_ERR_ABI_VERSION = 4,
  MPT_ERR_COMMUNICATION = 5     /* a collective kernel's transport failed (mpt_set_communicator) */
} mpt_status;

/* Runs one kernel. Returns MPT_OK or an mpt_status; mpt_last_error() then says what was wrong. */
MPT_API int mpt_launch(const mpt_launch_desc* launch);

/* The newest descriptor version this library takes (MPT_ABI_VERSION when it was built): a tool
 * that interposes mpt_launch() asks before it sends a version 2 descriptor. */
MPT_API uint32_t mpt_abi_version(void);

/* Human-readable reason for the last failure on this thread ("" if none). */
MPT_API const char* mpt_last_error(void);

/* Allocates `bytes` on `device` (mpt_device), zero-filled, 64-byte aligned on the host.
 * `category` is an mpt_category; `name` names what it holds. The allocation's id, unique for the
 * life of the process and never 0, is stored in *id_out when id_out is not NULL.
 * Returns NULL when the memory cannot be had (mpt_last_error() says why). */
MPT_API void* mpt_alloc(size_t bytes, int32_t device, int32_t category, const char* name,
                        uint64_t* id_out);

/* Frees what mpt_alloc() returned. NULL is ignored. */
MPT_API void mpt_free(void* ptr, int32_t device);

/* Declares that the program itself (not a kernel) wrote the `bytes` bytes at `data`, host memory
 * it got from mpt_alloc(): a batch it filled, initial values it copied in. Call it after the write
 * and before the next launch that reads them. Writes into an allocation before any launch has
 * named it need no declaration, but making one is never wrong. The library does nothing with it;
 * a tool that remembers what it measured forgets those bytes. */
MPT_API void mpt_host_written(const void* data, size_t bytes);

/* Sets how many threads the CPU kernels use: OpenBLAS's and the library's own pool. n <= 0 means
 * one per hardware thread (the default, or MPT_NUM_THREADS when set). Results are deterministic for
 * a given thread count. */
MPT_API void mpt_set_num_threads(int n);

/* Runs task(context, i) once for each i in [0, tasks) and returns when all have run. The tasks
 * share the library's thread pool with the caller, each thread taking the next task as it comes
 * free, so a tool's work between two kernels (measuring a kernel's outputs) can use the threads
 * that wait for the next kernel. They run on the calling thread alone when the pool cannot be had
 * (one thread, a call from inside a kernel, another thread using the pool). Tasks may run in any
 * order and at once; kernels launched from a task run serially. */
MPT_API void mpt_parallel_tasks(int64_t tasks, void (*task)(void* context, int64_t i), void* context);

/* The transport of the collective kernels (allreduce_sum) in a program that runs as several
 * processes, one per rank: the program moves bytes (over MPI, say), the kernels do the arithmetic,
 * so every rank computes the same result in the same order. `allgather` gives every rank the
 * `bytes` bytes each rank passed in `send`: rank r's land at recv + r * bytes. It returns 0 on
 * success. Without a communicator (or with size 1) a collective kernel reduces over this process
 * alone. The structure is copied; `context` must outlive the kernels' use of it. */
typedef struct mpt_communicator {
  int32_t rank;
  int32_t size;
  void* context;
  int (*allgather)(void* context, const void* send, void* recv, size_t bytes);
} mpt_communicator;

/* Sets (or with NULL clears) the communicator of the collective kernels. */
MPT_API void mpt_set_communicator(const mpt_communicator* communicator);

/* Reports a value of the program's own: "loss" and "train_accuracy" once a step, "test_accuracy"
 * at the end, "lr". `step` is the optimizer step it belongs to, or -1. The library does nothing
 * with it; a tool records it. */
MPT_API void mpt_log_scalar(const char* name, double value, int64_t step);

/* Reports one item of the program's configuration ("precision" = "amp-fp16", ...). Same rule. */
MPT_API void mpt_log_text(const char* key, const char* value);

#ifdef __cplusplus
}
#endif

#endif /* MPT_ABI_H */
