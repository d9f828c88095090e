/* t-SNE internals shared by core/tsne.c (entry point, PCA, affinities), core/tsne_cpu.c
 * (the CPU optimiser), core/tsne_fft.c (a small FFT) and the C tests. Not public. */
#ifndef GPUML_TSNE_H
#define GPUML_TSNE_H

#include <stdint.h>
#include "internal.h"
#include "tsne_shared.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GM_TSNE_TRY(expr)       \
  do {                          \
    gpuml_status gm_s_ = (expr); \
    if (gm_s_) return gm_s_;    \
  } while (0)

/* KL divergence every this many iterations (itercosts). */
#define GM_TSNE_COST_EVERY 50
/* The FFT grid (number of boxes) is chosen again every this many iterations, from the
 * spread of the embedding at that time; in between the boxes only widen with it. The
 * GPU reads the spread back at these iterations only (no per-iteration sync). */
#define GM_TSNE_GRID_EVERY 10
/* method = auto: exact up to this many points (dims 1-2; dims 3 below). */
#define GM_TSNE_EXACT_MAX_N 10000
#define GM_TSNE_EXACT_MAX_N_3D 10000
/* The CPU's exact repulsion takes each pair once up to this many points; beyond, the
 * memory for the columns' shares (n^2 / 256 floats per dimension + 1) is too much and
 * each row runs over all columns. */
#define GM_TSNE_EXACT_PAIRED_MAX 40000

/* Symmetric sparse P in CSR form: row i holds columns col[row[i] .. row[i+1]-1],
 * ascending, with values val[]. The values sum to 1. */
typedef struct {
  int64_t n, nnz;
  int64_t *row; /* n + 1 */
  int64_t *col; /* nnz */
  double *val;  /* nnz */
  /* P kept in the memory of the backend that built it (gm_tsne_ops.fit_affinities: the
   * GPU's), for that backend's optimize(); row, col and val are NULL then (until
   * gm_tsne_ops.resident_to_host fills them). gm_csr_free() gives it back through
   * resident_free. NULL: P is on the host only. */
  void *resident;
  void (*resident_free)(void *resident);
} gm_csr;

/* Frees the host arrays and the backend's copy of P. */
void gm_csr_free(gm_csr *P);

/* Boxes per dimension of the FFT grid for an embedding whose coordinates span
 * `spread`: boxes of width at most 1 (the kernel's length scale), from the sizes whose
 * zero-padded grid 2 * boxes * GM_TSNE_NODES fills an FFT size of gm_fft_good_size();
 * capped per dims (the grid is boxes^dims) for the CPU's memory and time. */
int gm_tsne_grid_boxes(double spread, int dims);
/* The same under another cap: FFT sizes up to max_size (the GPU's 3-D grids). */
int gm_tsne_grid_boxes_within(double spread, int max_size);
/* The FFT size for `boxes` boxes per dimension (gm_fft_good_size of the padded grid). */
int gm_tsne_fft_size(int boxes);

/* P from the k nearest neighbours of each point (idx, dist: n x k column-major as
 * gpuml_knn_search() gives them): per-point bisection to the perplexity, then
 * P = (P_cond + P_cond^T) / (2n). `entropy` (n values, may be NULL) receives each
 * point's entropy in nats. Runs on the backend that opt->backend names (resolved
 * options): the same P on every backend up to the bisection's last bits. Deterministic. */
gpuml_status gm_tsne_affinities(const int64_t *idx, const double *dist, int64_t n, int64_t k,
                                double perplexity, gm_csr *P, double *entropy,
                                const gpuml_options *opt);
/* The same with several perplexities (multiscale): the conditional affinities of each,
 * over the same k neighbours, averaged, then symmetrised. `entropy` is written for one
 * perplexity only. */
gpuml_status gm_tsne_affinities_multiscale(const int64_t *idx, const double *dist, int64_t n,
                                           int64_t k, const double *perplexities, int64_t scales,
                                           gm_csr *P, double *entropy, const gpuml_options *opt);

/* P as gpuml_tsne_fit() builds it from the (reduced) data x (n x d): the backend's
 * fit_affinities where it has one and one device searches with the Euclidean metric (P
 * then stays in the backend's memory, P->resident), else the self-search for k
 * neighbours on the host followed by gm_tsne_affinities_multiscale(). */
gpuml_status gm_tsne_fit_affinities(const double *x, int64_t n, int64_t d, int64_t k,
                                    const double *perplexities, int64_t scales, gm_csr *P,
                                    const gpuml_options *opt);

/* The affinities on the host (the CPU backend's, and the GPU's when its memory budget
 * is too small): the backend's conditional affinities, each row sorted by column, then
 * P = (P_cond + P_cond^T) / (2n) merged row by row. */
gpuml_status gm_tsne_affinities_host(const int64_t *idx, const double *dist, int64_t n, int64_t k,
                                     const double *perplexities, int64_t scales, gm_csr *P,
                                     double *entropy, const gpuml_options *opt);

/* The first ncomp principal component scores (n x ncomp) of x on the CPU: covariance
 * (d <= n) or Gram matrix (d > n) by dsyrk, top eigenvectors by dsyevr. */
gpuml_status gm_tsne_pca_cpu(const double *x, int64_t n, int64_t d, int64_t ncomp,
                             double *scores, const gpuml_options *opt);
/* The k eigenvectors of the largest eigenvalues of the symmetric m x m matrix a (the
 * triangle `uplo`, 'U' or 'L', is read; a is overwritten) by LAPACK's dsyevr: ascending
 * eigenvalues into w (k), their vectors into z (m x k). */
gpuml_status gm_tsne_top_eigenvectors(double *a, int m, int k, char uplo, double *w, double *z);
/* Flips each score column so that its largest |value| (the first one on ties) is
 * positive: the same sign whatever the eigensolver returned. */
void gm_tsne_sign_fix(double *scores, int64_t n, int64_t ncomp);

/* Resolved settings of one optimisation (method and learning rate no longer auto). */
typedef struct {
  int64_t n;
  int dims;
  int max_iter;
  gpuml_tsne_method method;
  double learning_rate, exaggeration, momentum, final_momentum, max_step_norm;
  int stop_lying_iter, mom_switch_iter;
  double df; /* degrees of freedom of the output kernel (1: Cauchy) */
} gm_tsne_run;

/* Placing new points into a fixed embedding (gpuml_tsne_transform): the points
 * 0 .. n_fixed - 1 of a joint embedding of n points are the fitted ones and stay put;
 * each new point i >= n_fixed moves to reduce its own KL divergence
 *   KL_i = sum_j p_{j|i} log(p_{j|i} / q_{j|i}),  q_{j|i} = w_ij / Z_i,
 *   Z_i = sum_{j < n_fixed} w_ij  (w of the run's df),
 * attracted by its neighbours among the fixed points (P's row i) and repelled by all
 * fixed points, never by the other new points: a new point's place does not depend on
 * the others given with it. The step is gradient descent with momentum and gains, on
 * grad_i = sum_j p_{j|i} u_ij (y_i - y_j) - sum_j w_ij u_ij (y_i - y_j) / Z_i
 * which is half of dKL_i/dy_i (only y_i moves). */
typedef struct {
  int64_t n_fixed, n;
  int dims;
  int max_iter;
  gpuml_tsne_method method;
  double learning_rate, momentum, max_step_norm, df;
} gm_tsne_place_run;

/* method = auto on the CPU: exact up to GM_TSNE_EXACT_MAX_N points where the exact
 * tiles run 16 single-precision lanes per instruction (AVX-512), fewer where the CPU has
 * narrower vectors (the exact cost per pair grows, the FFT's much less). */
int64_t gm_tsne_exact_max_n_cpu(int dims, double df);

/* The CPU's placement: P is n x n (rows < n_fixed empty, columns < n_fixed, each row of
 * a new point summing to 1); y (n x dims) holds the fitted points and the new points'
 * starts, and receives the new points' places. */
gpuml_status gm_tsne_place_cpu(const gm_csr *P, const gm_tsne_place_run *run, double *y,
                               const gpuml_options *opt);

/* The CPU optimiser: y (n x dims, column-major) holds the initial embedding and
 * receives the result; itercosts may be NULL. */
gpuml_status gm_tsne_optimize_cpu(const gm_csr *P, const gm_tsne_run *run, double *y,
                                  double *itercosts, gpuml_tsne_result *result,
                                  const gpuml_options *opt);

/* One gradient evaluation on the CPU, as the optimiser does it:
 *   grad = exaggeration * sum_j p_ij u_ij (y_i - y_j) - sum_j w_ij u_ij (y_i - y_j) / Z,
 * u_ij = 1 / (1 + |y_i - y_j|^2 / df), w_ij = u_ij^df, Z = sum_{i != j} w_ij: a quarter
 * of dKL/dY when exaggeration = 1 (df = 1: w = u, the usual t-SNE gradient).
 * `boxes` fixes the FFT grid (0: chosen from the spread). Z is written to *z. Used by
 * the tests (finite differences, CPU vs GPU). */
gpuml_status gm_tsne_gradient_cpu(const gm_csr *P, const double *y, int64_t n, int dims,
                                  gpuml_tsne_method method, int boxes, double exaggeration,
                                  double df, double *grad, double *z, const gpuml_options *opt);
/* KL(P || Q) of the embedding y (Z exact or interpolated, by method), Q with df degrees
 * of freedom. */
gpuml_status gm_tsne_kl_cpu(const gm_csr *P, const double *y, int64_t n, int dims,
                            gpuml_tsne_method method, int boxes, double df, double *kl,
                            const gpuml_options *opt);

/* ---- the FFT of core/tsne_fft.c: complex, single precision, sizes 2^a 3^b ---------- */
#define GM_FFT_MAX_STAGES 40
typedef struct {
  int size, stages;
  int radix[GM_FFT_MAX_STAGES];          /* 4s, then a 2 where needed, then 3s */
  int64_t twiddle_at[GM_FFT_MAX_STAGES]; /* where each stage's twiddles start */
  float *cos_t, *sin_t;
} gm_fft;

/* A plan for transforms of `size` points: size must be 2^a 3^b (GPUML_ERR_ARG else). */
gpuml_status gm_fft_init(gm_fft *f, int size);
void gm_fft_free(gm_fft *f);
/* The smallest size gm_fft_init() takes (2^a, 3 * 2^a or 9 * 2^a) that is at least n. */
int gm_fft_good_size(int n);
/* Grids are padded along axis 0 (power-of-two strides would make lines of a grid
 * collide in the caches): the element (g0, g1, g2) is at g0 + row * (g1 + size * g2)
 * with row = gm_fft_row(size), and a plane holds gm_fft_plane(size, dims) floats. */
int64_t gm_fft_row(int size);
int64_t gm_fft_plane(int size, int dims);
/* In-place transform of a complex grid of size^dims held as two planes, the real
 * parts then the imaginary parts.
 * Only the lines that can be non-zero (forward) or are needed (inverse) are
 * transformed: coordinates beyond `keep` along the axes not yet transformed are
 * taken as zero / not wanted. keep = size gives the full transform. Lines run in
 * parallel on `threads` threads, each with gm_fft_scratch(size) floats of `scratch`. */
size_t gm_fft_scratch(int size);
void gm_fft_grid(const gm_fft *f, float *grid, int dims, int keep, int inverse, int threads,
                 float *scratch);
/* The forward transform (as gm_fft_grid with keep = size) of a real grid that is even
 * along every axis (x(g) = x(-g mod size)), whose spectrum is real and even: in 2-D it
 * takes a quarter of the line transforms. The imaginary plane is ignored on entry and
 * zero on return. */
void gm_fft_even_spectrum(const gm_fft *f, float *grid, int dims, int threads, float *scratch);
/* The round trip of a pruned forward transform (gm_fft_grid, keep), a product with the
 * real `spectrum` (a plane laid out as gm_fft_grid's forward output) times `scale`, and
 * the inverse transform, with the product done inside the pass along the last axis:
 * the same arithmetic as the three steps one after the other, in fewer passes over the
 * grid. */
void gm_fft_convolve(const gm_fft *f, float *grid, const float *spectrum, float scale, int dims,
                     int keep, int threads, float *scratch);

#ifdef __cplusplus
}
#endif

#endif
