/* Principal components for t-SNE on the CPU: covariance (d <= n) or Gram matrix
 * (d > n) by dsyrk, the top eigenvectors by dsyevr. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "blas.h"

gpuml_status gm_tsne_top_eigenvectors(double *a, int m, int k, char uplo, double *w, double *z) {
  int il = m - k + 1, iu = m, found = 0, info = 0, lwork = -1, liwork = -1, iwork_size = 0;
  double vl = 0, vu = 0, abstol = 0, work_size = 0;
  const char ul[2] = {uplo, 0};
  int *isuppz = gm_alloc(2 * (size_t)k, sizeof *isuppz);
  double *work = NULL;
  int *iwork = NULL;
  gpuml_status st = GPUML_OK;
  if (!isuppz) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the eigensolver's work space");
    goto done;
  }
  dsyevr_("V", "I", ul, &m, a, &m, &vl, &vu, &il, &iu, &abstol, &found, w, z, &m, isuppz,
          &work_size, &lwork, &iwork_size, &liwork, &info, 1, 1, 1);
  lwork = (int)work_size;
  liwork = iwork_size;
  work = gm_alloc((size_t)lwork, sizeof *work);
  iwork = gm_alloc((size_t)liwork, sizeof *iwork);
  if (!work || !iwork) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the eigensolver's work space");
    goto done;
  }
  dsyevr_("V", "I", ul, &m, a, &m, &vl, &vu, &il, &iu, &abstol, &found, w, z, &m, isuppz,
          work, &lwork, iwork, &liwork, &info, 1, 1, 1);
  if (info != 0 || found != k)
    st = gm_fail(GPUML_ERR_NUMERIC, "tsne:pca",
                 "the PCA eigensolver failed (LAPACK dsyevr info %d); try pca = FALSE", info);
done:
  free(isuppz);
  free(work);
  free(iwork);
  return st;
}

gpuml_status gm_tsne_pca_cpu(const double *x, int64_t n, int64_t d, int64_t ncomp,
                             double *scores, const gpuml_options *opt) {
  const int64_t m = n < d ? n : d;
  if (n > INT_MAX || d > INT_MAX || n * d > (int64_t)INT_MAX * 64)
    return gm_fail(GPUML_ERR_ARG, "tsne:tooLarge",
                   "PCA of a %lld x %lld matrix is beyond the BLAS of the CPU backend; use pca = FALSE",
                   (long long)n, (long long)d);
  gm_progress(opt, "pca", 0, 1);
  double *xc = gm_alloc((size_t)n * (size_t)d, sizeof *xc);
  double *a = gm_alloc((size_t)m * (size_t)m, sizeof *a);
  double *w = gm_alloc((size_t)m, sizeof *w);
  double *z = gm_alloc((size_t)m * (size_t)ncomp, sizeof *z);
  double *v = NULL;
  gpuml_status st = GPUML_OK;
  if (!xc || !a || !w || !z) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the PCA",
                 ((double)n * d + (double)m * m) * 8 / 1e6);
    goto done;
  }
  const int threads = gm_threads(opt);
#pragma omp parallel for schedule(static) num_threads(threads) if (n * d >= 65536)
  for (int64_t t = 0; t < d; t++) {
    const double *col = x + t * n;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += col[i];
    const double mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) xc[i + t * n] = col[i] - mean;
  }
  const int N = (int)n, D = (int)d, M = (int)m, K = (int)ncomp;
  const double one = 1, zero = 0;
  if (d <= n) dsyrk_("U", "T", &D, &N, &one, xc, &N, &zero, a, &D, 1, 1);
  else dsyrk_("U", "N", &N, &D, &one, xc, &N, &zero, a, &N, 1, 1);
  if (gm_interrupted(opt)) {
    st = gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted");
    goto done;
  }
  if ((st = gm_tsne_top_eigenvectors(a, M, K, 'U', w, z))) goto done;
  /* Eigenvalues come ascending: component c is column K - 1 - c. */
  if (d <= n) {
    v = gm_alloc((size_t)d * (size_t)K, sizeof *v);
    if (!v) {
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the PCA rotation");
      goto done;
    }
    for (int c = 0; c < K; c++) memcpy(v + (size_t)c * d, z + (size_t)(K - 1 - c) * d, sizeof *v * (size_t)d);
    dgemm_("N", "N", &N, &K, &D, &one, xc, &N, v, &D, &zero, scores, &N, 1, 1);
  } else {
    for (int c = 0; c < K; c++) {
      const double root = sqrt(w[K - 1 - c] > 0 ? w[K - 1 - c] : 0);
      for (int64_t i = 0; i < n; i++) scores[i + c * n] = z[i + (size_t)(K - 1 - c) * n] * root;
    }
  }
  gm_tsne_sign_fix(scores, n, ncomp);
  gm_progress(opt, "pca", 1, 1);
done:
  free(xc);
  free(a);
  free(w);
  free(z);
  free(v);
  return st;
}

