// t-SNE on the GPU, before the optimiser: the perplexity bisection of the conditional
// affinities (core/tsne_shared.h's, one thread per point) and the PCA (cuBLAS +
// cuSOLVER) that reduces the data and starts the embedding.
#include "tsne_common.cuh"

namespace gm {
namespace {

// ---------------------------------------------------------------------------------------
// Affinities

__global__ void bisect_kernel(double *__restrict__ dist, int64_t rows, int64_t k,
                              double log_perp, double *__restrict__ p,
                              double *__restrict__ entropy) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  for (int64_t t = 0; t < k; t++) dist[i + t * rows] *= dist[i + t * rows];
  const double h = gm_tsne_bisect_point(dist + i, rows, k, log_perp, p + i);
  if (entropy) entropy[i] = h;
}

// ---------------------------------------------------------------------------------------
// PCA

__global__ void centre_columns_kernel(double *__restrict__ x, int64_t rows, int64_t ld,
                                      int64_t d, const double *__restrict__ sums, double n) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < rows * d;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e % rows, t = e / rows;
    x[i + t * ld] -= sums[t] / n;
  }
}

// Column sums of a rows x d block, added to acc[] (one block per column, fixed order).
__global__ void column_sums_kernel(const double *__restrict__ x, int64_t rows, int64_t d,
                                   double *__restrict__ acc) {
  __shared__ double sh[kThreads];
  for (int64_t t = blockIdx.x; t < d; t += gridDim.x) {
    double s = 0;
    for (int64_t i = threadIdx.x; i < rows; i += kThreads) s += x[i + t * rows];
    double r = block_tree<kSum>(s, sh);
    if (threadIdx.x == 0) acc[t] += r;
    __syncthreads();
  }
}

// v[:, c] = a[:, m - 1 - c] (the eigenvectors by decreasing eigenvalue), times
// sqrt(w[m - 1 - c]) when `scale`.
__global__ void pick_components_kernel(const double *__restrict__ a, int64_t m, int64_t rows,
                                       int64_t ncomp, const double *__restrict__ w, int scale,
                                       double *__restrict__ v) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < rows * ncomp;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e % rows, c = e / rows, src = m - 1 - c;
    double f = 1;
    if (scale) f = sqrt(w[src] > 0 ? w[src] : 0);
    v[e] = a[i + src * m] * f;
  }
}

}  // namespace
}  // namespace gm

using namespace gm;

extern "C" gpuml_status gm_cuda_tsne_conditional(const double *dist, int64_t n, int64_t k,
                                                    double perplexity, double *p, double *entropy,
                                                    const gpuml_options *opt) {
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 0));
  // Rows in blocks that fit the budget: distances, P and the entropy of each row.
  const size_t per_row = (size_t)k * 16 + 8;
  int64_t rows = (int64_t)(ctx.budget() / per_row);
  if (rows > n) rows = n;
  if (rows < 1)
    return gm_fail(GPUML_ERR_NOMEM, "tsne:cuda", "the GPU memory budget is too small for the affinities");
  double *dd = nullptr, *pd = nullptr, *hd = nullptr;
  GM_TRY(ctx.alloc(&dd, (size_t)rows * k, "the neighbour distances"));
  GM_TRY(ctx.alloc(&pd, (size_t)rows * k, "the affinities"));
  GM_TRY(ctx.alloc(&hd, (size_t)rows, "the entropies"));
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t rn = n - r0 < rows ? n - r0 : rows;
    GM_TRY(ctx.check(cudaMemcpy2DAsync(dd, (size_t)rn * 8, dist + r0, (size_t)n * 8, (size_t)rn * 8,
                                       (size_t)k, cudaMemcpyHostToDevice, ctx.stream()),
                     "copying the neighbour distances"));
    bisect_kernel<<<grid_1d(rn, 128), 128, 0, ctx.stream()>>>(dd, rn, k, log(perplexity), pd, hd);
    GM_TRY(ctx.launched("the perplexity bisection"));
    GM_TRY(ctx.check(cudaMemcpy2DAsync(p + r0, (size_t)n * 8, pd, (size_t)rn * 8, (size_t)rn * 8,
                                       (size_t)k, cudaMemcpyDeviceToHost, ctx.stream()),
                     "copying the affinities"));
    if (entropy)
      GM_TRY(ctx.check(cudaMemcpyAsync(entropy + r0, hd, (size_t)rn * 8, cudaMemcpyDeviceToHost,
                                       ctx.stream()), "copying the entropies"));
    GM_TRY(ctx.sync("the perplexity bisection"));
    if (gm_interrupted(opt))
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted");
  }
  return GPUML_OK;
}

extern "C" gpuml_status gm_cuda_tsne_pca(const double *x, int64_t n, int64_t d, int64_t ncomp,
                                            double *scores, const gpuml_options *opt) {
  const int64_t m = n < d ? n : d;
  if (n > INT32_MAX || d > INT32_MAX || (d > n && n > 46000))
    return gm_tsne_pca_cpu(x, n, d, ncomp, scores, opt);
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 1));
  cusolverDnHandle_t solver = nullptr;
  GM_TRY(ctx.solver(&solver));
  gm_progress(opt, "pca", 0, 1);
  // Rows in blocks (all at once when they fit); the Gram form (d > n) needs all rows.
  // covariance, eigenvalues, sums, rotation and syevd's work space (1 + 6m + 2m^2)
  const size_t fixed = (size_t)m * m * 8 * 3 + (size_t)m * 56 + (size_t)d * 16 +
                       (size_t)ncomp * d * 8 + 4096;
  int64_t rows = n;
  if (fixed + (size_t)n * d * 8 + (size_t)n * ncomp * 8 > ctx.budget()) {
    if (d > n) return gm_tsne_pca_cpu(x, n, d, ncomp, scores, opt);
    const size_t per_row = (size_t)(d + ncomp) * 8;
    rows = ctx.budget() > fixed ? (int64_t)((ctx.budget() - fixed) / per_row) : 0;
    if (rows < 1)
      return gm_fail(GPUML_ERR_NOMEM, "tsne:cuda", "the GPU memory budget is too small for the PCA");
  }
  const bool resident = rows == n;
  double *xb = nullptr, *a = nullptr, *w = nullptr, *sums = nullptr, *v = nullptr, *sb = nullptr;
  int *info = nullptr;
  GM_TRY(ctx.alloc(&xb, (size_t)rows * d, "the data"));
  GM_TRY(ctx.alloc(&a, (size_t)m * m, "the covariance"));
  GM_TRY(ctx.alloc(&w, (size_t)m, "the eigenvalues"));
  GM_TRY(ctx.alloc(&sums, (size_t)d, "the column sums"));
  GM_TRY(ctx.alloc(&info, 1, "the solver status"));
  GM_TRY(ctx.check(cudaMemsetAsync(sums, 0, (size_t)d * 8, ctx.stream()), "clearing sums"));
  auto upload = [&](int64_t r0, int64_t rn) -> gpuml_status {
    return ctx.check(cudaMemcpy2DAsync(xb, (size_t)rn * 8, x + r0, (size_t)n * 8, (size_t)rn * 8,
                                       (size_t)d, cudaMemcpyHostToDevice, ctx.stream()),
                     "copying the data to the GPU");
  };
  const unsigned col_blocks = (unsigned)(d < 65535 ? d : 65535);
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t rn = n - r0 < rows ? n - r0 : rows;
    GM_TRY(upload(r0, rn));
    column_sums_kernel<<<col_blocks, kThreads, 0, ctx.stream()>>>(xb, rn, d, sums);
    GM_TRY(ctx.launched("column sums"));
  }
  const double one = 1, zero = 0;
  const int M = (int)m;
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t rn = n - r0 < rows ? n - r0 : rows;
    if (!resident) GM_TRY(upload(r0, rn));
    centre_columns_kernel<<<grid_1d(rn * d, kThreads) < 65536u ? grid_1d(rn * d, kThreads) : 65536u,
                            kThreads, 0, ctx.stream()>>>(xb, rn, rn, d, sums, (double)n);
    GM_TRY(ctx.launched("centring"));
    const double beta = r0 == 0 ? 0.0 : 1.0;
    if (d <= n)
      GM_TRY(ctx.check_blas(cublasDsyrk(ctx.blas(), CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, (int)d, (int)rn,
                                        &one, xb, (int)rn, &beta, a, M), "cublasDsyrk"));
    else
      GM_TRY(ctx.check_blas(cublasDsyrk(ctx.blas(), CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, (int)n, (int)d,
                                        &one, xb, (int)n, &zero, a, M), "cublasDsyrk"));
  }
  int lwork = 0;
  GM_TRY(check_solver(ctx, cusolverDnDsyevd_bufferSize(solver, CUSOLVER_EIG_MODE_VECTOR,
                                                       CUBLAS_FILL_MODE_LOWER, M, a, M, w, &lwork),
                      "sizing the eigensolver"));
  double *work = nullptr;
  GM_TRY(ctx.alloc(&work, (size_t)lwork, "the eigensolver's work space"));
  GM_TRY(check_solver(ctx, cusolverDnDsyevd(solver, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER,
                                            M, a, M, w, work, lwork, info), "the eigensolver"));
  int h_info = 0;
  GM_TRY(ctx.check(cudaMemcpyAsync(&h_info, info, sizeof h_info, cudaMemcpyDeviceToHost, ctx.stream()),
                   "reading the solver status"));
  GM_TRY(ctx.sync("the eigensolver"));
  if (h_info != 0)
    return gm_fail(GPUML_ERR_NUMERIC, "tsne:pca", "the PCA eigensolver failed (cuSOLVER info %d); try pca = FALSE",
                   h_info);
  if (d > n) {
    GM_TRY(ctx.alloc(&sb, (size_t)n * ncomp, "the scores"));
    pick_components_kernel<<<grid_1d(n * ncomp, kThreads) < 65536u ? grid_1d(n * ncomp, kThreads) : 65536u,
                             kThreads, 0, ctx.stream()>>>(a, m, n, ncomp, w, 1, sb);
    GM_TRY(ctx.launched("picking the components"));
    GM_TRY(ctx.check(cudaMemcpyAsync(scores, sb, (size_t)n * ncomp * 8, cudaMemcpyDeviceToHost, ctx.stream()),
                     "copying the scores"));
  } else {
    GM_TRY(ctx.alloc(&v, (size_t)d * ncomp, "the rotation"));
    GM_TRY(ctx.alloc(&sb, (size_t)rows * ncomp, "the scores"));
    pick_components_kernel<<<grid_1d(d * ncomp, kThreads) < 65536u ? grid_1d(d * ncomp, kThreads) : 65536u,
                             kThreads, 0, ctx.stream()>>>(a, m, d, ncomp, w, 0, v);
    GM_TRY(ctx.launched("picking the components"));
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
      const int64_t rn = n - r0 < rows ? n - r0 : rows;
      if (!resident) {
        GM_TRY(upload(r0, rn));
        centre_columns_kernel<<<grid_1d(rn * d, kThreads) < 65536u ? grid_1d(rn * d, kThreads) : 65536u,
                                kThreads, 0, ctx.stream()>>>(xb, rn, rn, d, sums, (double)n);
        GM_TRY(ctx.launched("centring"));
      }
      GM_TRY(ctx.check_blas(cublasDgemm(ctx.blas(), CUBLAS_OP_N, CUBLAS_OP_N, (int)rn, (int)ncomp, (int)d,
                                        &one, xb, (int)rn, v, (int)d, &zero, sb, (int)rn), "cublasDgemm"));
      GM_TRY(ctx.check(cudaMemcpy2DAsync(scores + r0, (size_t)n * 8, sb, (size_t)rn * 8, (size_t)rn * 8,
                                         (size_t)ncomp, cudaMemcpyDeviceToHost, ctx.stream()),
                       "copying the scores"));
      GM_TRY(ctx.sync("the projection"));
    }
  }
  GM_TRY(ctx.sync("the PCA"));
  gm_tsne_sign_fix(scores, n, ncomp);
  gm_progress(opt, "pca", 1, 1);
  return GPUML_OK;
}
