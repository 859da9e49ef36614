/* The matrix products on the device: linear and convolution kernels.
 *
 * With fp32 partials the products go to cuBLAS (cublasGemmEx / strided batched, CUBLAS_COMPUTE_32F:
 * fp16 and bf16 inputs run on tensor cores with fp32 accumulation, fp32 inputs without TF32) into
 * an fp32 buffer; an epilogue adds the bias and rounds once to the output dtype. cuBLAS sums in
 * its own order, so results agree with the CPU to a tolerance, not bit for bit (docs/gpu.md).
 * With fp16 partials the semantics is a running sum rounded to fp16 after every multiply-add,
 * which no tensor-core path reproduces; layers.cu runs it as direct loops in k order.
 * Convolutions are im2col + GEMM, one chunk of samples at a time to bound the scratch memory.
 */
#if defined(MPT_HOST_EMULATION)
#include "host_emulation.h"
#else
#include <cublas_v2.h>
#endif

#include <climits>
#include <string>

#include "device_scratch.h"
#include "launch_args.h"
#include "launchers.h"

namespace mpt::cuda::detail {
namespace {

// [SECTION] resources

/* One cuBLAS handle per thread and device, created on first use. */
cublasHandle_t blas_handle(cudaStream_t stream, cublasStatus_t* status) {
  thread_local cublasHandle_t handles[64] = {};
  int device = 0;
  cudaGetDevice(&device);
  cublasHandle_t& h = handles[device & 63];
  *status = CUBLAS_STATUS_SUCCESS;
  if (!h) *status = cublasCreate(&h);
  if (*status == CUBLAS_STATUS_SUCCESS) *status = cublasSetStream(h, stream);
  return h;
}

cudaDataType blas_type(int dtype) {
  return dtype == MPT_DTYPE_F16 ? CUDA_R_16F : dtype == MPT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* A cuBLAS failure, reported as a device error with the cuBLAS status. */
int blas_error(LaunchArgs& a, cublasStatus_t s) {
  a.bad(std::string("cuBLAS failed: ") + cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
  return MPT_ERR_DEVICE;
}

/* The two operands of a product in one dtype cuBLAS accepts: as given when they agree, otherwise
 * both widened exactly to fp32 in scratch memory. */
struct ProductInputs {
  const void* a;
  const void* b;
  int dtype;
};

cudaError_t unify(Flat a, Flat b, Scratch& scratch, cudaStream_t stream, ProductInputs* out) {
  *out = ProductInputs{a.data, b.data, a.dtype};
  if (a.dtype == b.dtype) return cudaSuccess;
  void* p;
  cudaError_t e = scratch.get(static_cast<size_t>(a.n + b.n) * sizeof(float), &p);
  float* wa = static_cast<float*>(p);
  if (e == cudaSuccess) e = widen_to_f32(a, wa, stream);
  if (e == cudaSuccess) e = widen_to_f32(b, wa + a.n, stream);
  *out = ProductInputs{wa, wa + a.n, MPT_DTYPE_F32};
  return e;
}

struct Gemm {
  cublasOperation_t op_a, op_b;
  int64_t m, n, k;
  const void* a;
  int64_t lda, stride_a;
  const void* b;
  int64_t ldb, stride_b;
  float* c;
  int64_t ldc, stride_c;
  int64_t batch;
  float beta;
};

bool fits_int(const Gemm& g) {
  return g.m < INT_MAX && g.n < INT_MAX && g.k < INT_MAX && g.lda < INT_MAX && g.ldb < INT_MAX &&
         g.ldc < INT_MAX && g.batch < INT_MAX;
}

/* C (fp32, column-major) = op(A) op(B) + beta*C, accumulated in fp32. */
cublasStatus_t run_gemm(const Gemm& g, int dtype, cudaStream_t stream) {
  cublasStatus_t s;
  cublasHandle_t h = blas_handle(stream, &s);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (!fits_int(g)) return CUBLAS_STATUS_INVALID_VALUE;
  const float alpha = 1.0f;
  cudaDataType t = blas_type(dtype);
  return cublasGemmStridedBatchedEx(
      h, g.op_a, g.op_b, int(g.m), int(g.n), int(g.k), &alpha, g.a, t, int(g.lda), g.stride_a,
      g.b, t, int(g.ldb), g.stride_b, &g.beta, g.c, CUDA_R_32F, int(g.ldc), g.stride_c,
      int(g.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

int64_t element_size(int dtype) { return dtype == MPT_DTYPE_F32 ? 4 : 2; }

Flat offset(Flat f, int64_t first, int64_t count) {
  return Flat{static_cast<char*>(f.data) + first * element_size(f.dtype), f.dtype, count};
}

// [SECTION] linear

bool linear_shapes(LaunchArgs& a, const mpt_tensor& m1, const mpt_tensor& m2, const char* r1,
                   const char* r2) {
  return a.floating(m1, r1) && a.floating(m2, r2) && a.ndim_is(m1, 2, r1) && a.ndim_is(m2, 2, r2);
}

Flat no_bias() { return Flat{nullptr, MPT_DTYPE_F32, 0}; }

}  // namespace

int run_linear_forward(LaunchArgs& a) {
  if (!a.counts(3, 1) || !a.on_device() || !linear_shapes(a, a.in(0), a.in(1), "x", "w") ||
      !a.floating(a.in(2), "b") || !a.floating(a.out(0), "y")) {
    return a.fail();
  }
  int64_t N = a.in(0).shape[0], I = a.in(0).shape[1], O = a.in(1).shape[0];
  if (!a.dim_is(a.in(1), 1, I, "w") || element_count(a.in(2)) != O ||
      !a.ndim_is(a.out(0), 2, "y") || !a.dim_is(a.out(0), 0, N, "y") || !a.dim_is(a.out(0), 1, O, "y")) {
    if (element_count(a.in(2)) != O) a.bad("b must hold O values");
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  Scratch acc_mem(a.stream()), widened(a.stream());
  void* acc;
  cudaError_t e = acc_mem.get(static_cast<size_t>(N * O) * sizeof(float), &acc);
  if (e != cudaSuccess) return a.device_error(e);
  float* c = static_cast<float*>(acc);
  Flat x = a.in_flat(0), w = a.in_flat(1), b = a.in_flat(2), y = a.out_flat(0);
  if (a.flag("partials_fp16")) {
    e = gemm_fp16_partials({x, I, 1}, {w, 1, I}, c, N, O, I, a.stream());
  } else {
    ProductInputs in;
    if ((e = unify(w, x, widened, a.stream(), &in)) != cudaSuccess) return a.device_error(e);
    Gemm g{CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, in.a, I, 0, in.b, I, 0, c, O, 0, 1, 0.0f};
    cublasStatus_t s = run_gemm(g, in.dtype, a.stream());
    if (s != CUBLAS_STATUS_SUCCESS) return blas_error(a, s);
  }
  if (e == cudaSuccess) e = add_bias_rows(c, b, y, O, a.stream());
  return a.done(e);
}

int run_linear_backward_data(LaunchArgs& a) {
  if (!a.counts(2, 1) || !a.on_device() || !linear_shapes(a, a.in(0), a.in(1), "dy", "w") ||
      !a.floating(a.out(0), "dx") || !a.ndim_is(a.out(0), 2, "dx")) {
    return a.fail();
  }
  int64_t N = a.in(0).shape[0], O = a.in(0).shape[1], I = a.in(1).shape[1];
  if (!a.dim_is(a.in(1), 0, O, "w") || !a.dim_is(a.out(0), 0, N, "dx") ||
      !a.dim_is(a.out(0), 1, I, "dx")) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  Scratch acc_mem(a.stream()), widened(a.stream());
  void* acc;
  cudaError_t e = acc_mem.get(static_cast<size_t>(N * I) * sizeof(float), &acc);
  if (e != cudaSuccess) return a.device_error(e);
  float* c = static_cast<float*>(acc);
  Flat dy = a.in_flat(0), w = a.in_flat(1);
  if (a.flag("partials_fp16")) {
    e = gemm_fp16_partials({dy, O, 1}, {w, I, 1}, c, N, I, O, a.stream());
  } else {
    ProductInputs in;
    if ((e = unify(w, dy, widened, a.stream(), &in)) != cudaSuccess) return a.device_error(e);
    Gemm g{CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, in.a, I, 0, in.b, O, 0, c, I, 0, 1, 0.0f};
    cublasStatus_t s = run_gemm(g, in.dtype, a.stream());
    if (s != CUBLAS_STATUS_SUCCESS) return blas_error(a, s);
  }
  if (e == cudaSuccess) e = add_bias_rows(c, no_bias(), a.out_flat(0), I, a.stream());
  return a.done(e);
}

int run_linear_backward_weight(LaunchArgs& a) {
  if (!a.counts(2, 2) || !a.on_device() || !linear_shapes(a, a.in(0), a.in(1), "dy", "x") ||
      !a.floating(a.out(0), "dw") || !a.floating(a.out(1), "db") || !a.ndim_is(a.out(0), 2, "dw")) {
    return a.fail();
  }
  int64_t N = a.in(0).shape[0], O = a.in(0).shape[1], I = a.in(1).shape[1];
  if (!a.dim_is(a.in(1), 0, N, "x") || !a.dim_is(a.out(0), 0, O, "dw") ||
      !a.dim_is(a.out(0), 1, I, "dw") || (element_count(a.out(1)) != O && !a.bad("db must hold O values"))) {
    return a.fail();
  }
  bool fp16 = a.flag("partials_fp16");
  if (a.dry_run()) return MPT_OK;
  Scratch acc_mem(a.stream()), widened(a.stream());
  void* acc;
  cudaError_t e = acc_mem.get(static_cast<size_t>(O * I) * sizeof(float), &acc);
  if (e != cudaSuccess) return a.device_error(e);
  float* c = static_cast<float*>(acc);
  Flat dy = a.in_flat(0), x = a.in_flat(1);
  if (fp16) {
    e = gemm_fp16_partials({dy, 1, O}, {x, I, 1}, c, O, I, N, a.stream());
  } else {
    ProductInputs in;
    if ((e = unify(x, dy, widened, a.stream(), &in)) != cudaSuccess) return a.device_error(e);
    Gemm g{CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, in.a, I, 0, in.b, O, 0, c, I, 0, 1, 0.0f};
    cublasStatus_t s = run_gemm(g, in.dtype, a.stream());
    if (s != CUBLAS_STATUS_SUCCESS) return blas_error(a, s);
  }
  if (e == cudaSuccess) e = add_bias_rows(c, no_bias(), a.out_flat(0), I, a.stream());
  if (e == cudaSuccess) e = sum_rows(dy, N, O, a.out_flat(1), fp16, a.stream());
  return a.done(e);
}

// [SECTION] convolution

namespace {

bool conv_scalars(LaunchArgs& a, int64_t* stride, int64_t* padding) {
  return a.integer("stride", 1, stride) && a.integer("padding", 0, padding);
}

/* Geometry from x [N,C,H,W] and w [K,C,R,S]; P, Q follow from stride and padding. */
bool conv_shape(LaunchArgs& a, const mpt_tensor& x, const mpt_tensor& w, ConvShape* s) {
  if (!a.floating(x, "x") || !a.floating(w, "w") || !a.ndim_is(x, 4, "x") || !a.ndim_is(w, 4, "w") ||
      !conv_scalars(a, &s->stride, &s->padding)) {
    return false;
  }
  s->N = x.shape[0]; s->C = x.shape[1]; s->H = x.shape[2]; s->W = x.shape[3];
  s->K = w.shape[0]; s->R = w.shape[2]; s->S = w.shape[3];
  if (w.shape[1] != s->C) return a.bad("w must be [K, C, R, S] with C matching x");
  s->P = (s->H + 2 * s->padding - s->R) / s->stride + 1;
  s->Q = (s->W + 2 * s->padding - s->S) / s->stride + 1;
  if (s->P < 1 || s->Q < 1) return a.bad("the kernel is larger than the padded input");
  return true;
}

bool output_is(LaunchArgs& a, const mpt_tensor& t, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
               const char* role) {
  if (t.ndim == 4 && t.shape[0] == d0 && t.shape[1] == d1 && t.shape[2] == d2 && t.shape[3] == d3) {
    return true;
  }
  return a.bad(std::string(role) + " must be [" + std::to_string(d0) + ", " + std::to_string(d1) +
               ", " + std::to_string(d2) + ", " + std::to_string(d3) + "]");
}

/* Samples per im2col chunk: the column buffer stays under ~128 MiB. */
int64_t chunk_samples(const ConvShape& s, int64_t bytes_per_element) {
  int64_t per_sample = s.crs() * s.pq() * bytes_per_element;
  int64_t n = (int64_t{128} << 20) / (per_sample > 0 ? per_sample : 1);
  return n < 1 ? 1 : (n > s.N ? s.N : n);
}

/* The weights in the dtype of the column buffer: as given, or widened into scratch. */
cudaError_t weights_as(Flat w, int dtype, Scratch& scratch, cudaStream_t stream, const void** out) {
  *out = w.data;
  if (w.dtype == dtype) return cudaSuccess;
  void* p;
  cudaError_t e = scratch.get(static_cast<size_t>(w.n) * sizeof(float), &p);
  if (e == cudaSuccess) e = widen_to_f32(w, static_cast<float*>(p), stream);
  *out = p;
  return e;
}

}  // namespace

int run_conv2d_forward(LaunchArgs& a) {
  ConvShape s;
  if (!a.counts(3, 1) || !a.on_device() || !conv_shape(a, a.in(0), a.in(1), &s) ||
      !a.floating(a.in(2), "b") || !a.floating(a.out(0), "y") ||
      !output_is(a, a.out(0), s.N, s.K, s.P, s.Q, "y") ||
      (element_count(a.in(2)) != s.K && !a.bad("b must hold K values"))) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  Flat x = a.in_flat(0), w = a.in_flat(1), b = a.in_flat(2), y = a.out_flat(0);
  cudaStream_t st = a.stream();
  Scratch acc_mem(st), col_mem(st), w_mem(st);
  void* acc;
  if (a.flag("partials_fp16")) {
    cudaError_t e = acc_mem.get(static_cast<size_t>(y.n) * sizeof(float), &acc);
    if (e == cudaSuccess) e = conv_forward_fp16_partials(x, w, s, static_cast<float*>(acc), st);
    if (e == cudaSuccess) e = add_bias_channels(static_cast<float*>(acc), b, y, s.K, s.pq(), st);
    return a.done(e);
  }
  int col_dtype = x.dtype == w.dtype ? x.dtype : MPT_DTYPE_F32;
  int64_t chunk = chunk_samples(s, element_size(col_dtype));
  void* col;
  const void* wd;
  cudaError_t e = acc_mem.get(static_cast<size_t>(chunk * s.K * s.pq()) * sizeof(float), &acc);
  if (e == cudaSuccess) e = col_mem.get(static_cast<size_t>(chunk * s.crs() * s.pq() * element_size(col_dtype)), &col);
  if (e == cudaSuccess) e = weights_as(w, col_dtype, w_mem, st, &wd);
  for (int64_t n0 = 0; n0 < s.N && e == cudaSuccess; n0 += chunk) {
    int64_t count = s.N - n0 < chunk ? s.N - n0 : chunk;
    e = im2col(x, s, n0, count, col, col_dtype, st);
    if (e != cudaSuccess) break;
    Gemm g{CUBLAS_OP_N, CUBLAS_OP_N, s.pq(), s.K, s.crs(), col, s.pq(), s.crs() * s.pq(),
           wd, s.crs(), 0, static_cast<float*>(acc), s.pq(), s.K * s.pq(), count, 0.0f};
    cublasStatus_t bs = run_gemm(g, col_dtype, st);
    if (bs != CUBLAS_STATUS_SUCCESS) return blas_error(a, bs);
    e = add_bias_channels(static_cast<float*>(acc), b, offset(y, n0 * s.K * s.pq(), count * s.K * s.pq()),
                          s.K, s.pq(), st);
  }
  return e == cudaSuccess ? MPT_OK : a.device_error(e);
}

int run_conv2d_backward_data(LaunchArgs& a) {
  ConvShape s;
  if (!a.counts(2, 1) || !a.on_device() || !conv_shape(a, a.out(0), a.in(1), &s) ||
      !a.floating(a.in(0), "dy") || !output_is(a, a.in(0), s.N, s.K, s.P, s.Q, "dy")) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  Flat dy = a.in_flat(0), w = a.in_flat(1), dx = a.out_flat(0);
  cudaStream_t st = a.stream();
  if (a.flag("partials_fp16")) return a.done(conv_backward_data_fp16_partials(dy, w, s, dx, st));
  Scratch dcol_mem(st), w_mem(st), dy_mem(st);
  int dtype = dy.dtype == w.dtype ? dy.dtype : MPT_DTYPE_F32;
  const void *wd = nullptr, *dyd = nullptr;
  cudaError_t e = weights_as(w, dtype, w_mem, st, &wd);
  if (e == cudaSuccess) e = weights_as(dy, dtype, dy_mem, st, &dyd);
  int64_t chunk = chunk_samples(s, 4);
  void* dcol;
  if (e == cudaSuccess) e = dcol_mem.get(static_cast<size_t>(chunk * s.crs() * s.pq()) * sizeof(float), &dcol);
  for (int64_t n0 = 0; n0 < s.N && e == cudaSuccess; n0 += chunk) {
    int64_t count = s.N - n0 < chunk ? s.N - n0 : chunk;
    const void* dy_chunk = static_cast<const char*>(dyd) + n0 * s.K * s.pq() * element_size(dtype);
    Gemm g{CUBLAS_OP_N, CUBLAS_OP_T, s.pq(), s.crs(), s.K, dy_chunk, s.pq(), s.K * s.pq(),
           wd, s.crs(), 0, static_cast<float*>(dcol), s.pq(), s.crs() * s.pq(), count, 0.0f};
    cublasStatus_t bs = run_gemm(g, dtype, st);
    if (bs != CUBLAS_STATUS_SUCCESS) return blas_error(a, bs);
    e = col2im(static_cast<float*>(dcol), s, n0, count, dx, st);
  }
  return e == cudaSuccess ? MPT_OK : a.device_error(e);
}

int run_conv2d_backward_weight(LaunchArgs& a) {
  ConvShape s;
  if (!a.counts(2, 2) || !a.on_device() || !conv_shape(a, a.in(1), a.out(0), &s) ||
      !a.floating(a.in(0), "dy") || !output_is(a, a.in(0), s.N, s.K, s.P, s.Q, "dy") ||
      !a.floating(a.out(1), "db") || (element_count(a.out(1)) != s.K && !a.bad("db must hold K values"))) {
    return a.fail();
  }
  if (a.dry_run()) return MPT_OK;
  Flat dy = a.in_flat(0), x = a.in_flat(1), dw = a.out_flat(0), db = a.out_flat(1);
  cudaStream_t st = a.stream();
  bool fp16 = a.flag("partials_fp16");
  if (fp16) {
    cudaError_t e = conv_backward_weight_fp16_partials(dy, x, s, dw, st);
    if (e == cudaSuccess) e = sum_channels(dy, s.N, s.K, s.pq(), db, true, st);
    return a.done(e);
  }
  int dtype = dy.dtype == x.dtype ? x.dtype : MPT_DTYPE_F32;
  Scratch acc_mem(st), col_mem(st), dy_mem(st);
  int64_t chunk = chunk_samples(s, element_size(dtype));
  void *acc, *col;
  const void* dyd = nullptr;
  cudaError_t e = acc_mem.get(static_cast<size_t>(dw.n) * sizeof(float), &acc);
  if (e == cudaSuccess) e = col_mem.get(static_cast<size_t>(chunk * s.crs() * s.pq() * element_size(dtype)), &col);
  if (e == cudaSuccess) e = weights_as(dy, dtype, dy_mem, st, &dyd);
  for (int64_t n0 = 0; n0 < s.N && e == cudaSuccess; n0 += chunk) {
    int64_t count = s.N - n0 < chunk ? s.N - n0 : chunk;
    e = im2col(x, s, n0, count, col, dtype, st);
    for (int64_t i = 0; i < count && e == cudaSuccess; ++i) {
      const char* coli = static_cast<const char*>(col) + i * s.crs() * s.pq() * element_size(dtype);
      const char* dyi = static_cast<const char*>(dyd) + (n0 + i) * s.K * s.pq() * element_size(dtype);
      Gemm g{CUBLAS_OP_T, CUBLAS_OP_N, s.crs(), s.K, s.pq(), coli, s.pq(), 0, dyi, s.pq(), 0,
             static_cast<float*>(acc), s.crs(), 0, 1, n0 + i == 0 ? 0.0f : 1.0f};
      cublasStatus_t bs = run_gemm(g, dtype, st);
      if (bs != CUBLAS_STATUS_SUCCESS) return blas_error(a, bs);
    }
  }
  if (e == cudaSuccess) e = add_bias_rows(static_cast<float*>(acc), no_bias(), dw, s.crs(), st);
  if (e == cudaSuccess) e = sum_channels(dy, s.N, s.K, s.pq(), db, false, st);
  return a.done(e);
}

}  // namespace mpt::cuda::detail
