/*
 * gpuml.h — the public C API of gpuml.
 *
 * Conventions
 *  - Matrices are column-major, as R and Octave hold them: an n x d matrix X has
 *    element (i, j) at X[i + j * n]. Each row is a point, each column a variable.
 *  - Sizes and indices are int64_t. Neighbour indices are 0-based; the R and Octave
 *    layers add 1.
 *  - Every entry point returns a gpuml_status. On failure, gpuml_last_error() gives a
 *    sentence a user can act on and gpuml_last_error_id() a short identifier such as
 *    "knn:badK" (Octave turns it into the error id "gpuml:knn:badK"). Both are per
 *    thread. The library never prints, exits or aborts, and frees everything it
 *    allocated on every path.
 *  - Output arrays are allocated by the caller. Every argument (sizes, k, finiteness)
 *    is checked before anything is written, so a call that fails its checks leaves the
 *    outputs untouched.
 */
#ifndef GPUML_H
#define GPUML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUML_VERSION "0.1.0"

typedef enum {
  GPUML_OK = 0,
  GPUML_ERR_ARG = 1,         /* bad argument: sizes, k, NaN/Inf, unknown names */
  GPUML_ERR_NOMEM = 2,       /* host or device memory could not be allocated */
  GPUML_ERR_CUDA = 3,        /* a CUDA runtime or library call failed */
  GPUML_ERR_NO_CUDA = 4,     /* the CUDA backend was asked for but is not available */
  GPUML_ERR_NUMERIC = 5,     /* a numerical failure (e.g. a non-finite intermediate) */
  GPUML_ERR_INTERRUPTED = 6  /* the interrupted() callback asked to stop */
} gpuml_status;

typedef enum {
  GPUML_BACKEND_AUTO = 0, /* CUDA when compiled in, a device is present and the problem
                             is large enough to gain; otherwise CPU */
  GPUML_BACKEND_CPU = 1,
  GPUML_BACKEND_CUDA = 2
} gpuml_backend;

typedef enum {
  GPUML_PRECISION_DOUBLE = 0, /* accumulate in fp64 (the CPU backend always does) */
  GPUML_PRECISION_SINGLE = 1  /* fp32 accumulation on the GPU, TF32 off */
} gpuml_precision;

/* Called between blocks of work, always from the calling thread. `stage` is a short
 * name ("knn", "dist"); done <= total counts units of that stage. */
typedef void (*gpuml_progress_fn)(void *ctx, const char *stage, int64_t done, int64_t total);
/* Return non-zero to stop: the call then frees everything and returns
 * GPUML_ERR_INTERRUPTED. Always called from the calling thread. */
typedef int (*gpuml_interrupted_fn)(void *ctx);

typedef struct {
  gpuml_backend backend;     /* in: which backend to use */
  int device;                /* in: CUDA device ordinal */
  gpuml_precision precision; /* in */
  int threads;               /* in: OpenMP threads; 0 = the OpenMP default */
  uint64_t seed;             /* in: for randomised algorithms */
  int verbose;               /* in: 0 silent; >0 the progress callback is called */
  size_t gpu_memory_limit;   /* in: bytes of device memory to use at most; 0 = the
                                environment variable GPUML_GPU_MEMORY_LIMIT if set (bytes,
                                or with a K/M/G suffix), else the free memory */
  gpuml_progress_fn progress;         /* may be NULL */
  gpuml_interrupted_fn interrupted;   /* may be NULL */
  void *callback_ctx;                 /* passed to both callbacks */
  gpuml_backend backend_used;         /* out: the backend that ran (CPU or CUDA) */
} gpuml_options;

/* Fills *opt with the defaults: backend auto, device 0, double precision, default
 * threads, seed 42, silent, no limit, no callbacks. */
void gpuml_options_init(gpuml_options *opt);

const char *gpuml_last_error(void);
const char *gpuml_last_error_id(void);
const char *gpuml_status_string(gpuml_status status);

/* "auto", "cpu", "cuda" <-> enum. Parsing is case-insensitive; an unknown name is
 * GPUML_ERR_ARG with a message listing the valid names. */
const char *gpuml_backend_name(gpuml_backend backend);
gpuml_status gpuml_parse_backend(const char *name, gpuml_backend *out);
gpuml_status gpuml_parse_precision(const char *name, gpuml_precision *out);

typedef struct {
  char version[16];
  int openmp;                 /* compiled with OpenMP */
  int max_threads;            /* OpenMP threads available */
  int cuda_compiled;          /* the CUDA backend was built */
  int cuda_runtime_version;   /* e.g. 13000; 0 when not compiled */
  int cuda_driver_version;    /* 0 when no driver */
  int device_count;           /* CUDA devices found (0 when none or not compiled) */
  char device_name[256];      /* device 0, "" when none */
  int compute_major, compute_minor;
  size_t device_memory;       /* total bytes on device 0 */
  char cuda_message[256];     /* why CUDA is unusable, "" when it is usable */
} gpuml_info;

/* The C calls take one column count for both matrices; front ends holding two
 * matrices check that they agree with this before calling gpuml_dist()/gpuml_knn().
 * GPUML_ERR_ARG with id "<stage>:dimMismatch" ("query has 2 columns but data has 3")
 * when d_second != d_first. */
gpuml_status gpuml_check_columns(const char *stage, const char *second, int64_t d_second,
                                 const char *first, int64_t d_first);

/* What was compiled in and which device was found. Never fails for lack of a GPU. */
gpuml_status gpuml_backend_info(gpuml_info *info);

/*
 * Euclidean distances.
 *   x: n x d, y: m x d (y == NULL means y = x, m = n).
 *   out: n x m, out[i + j * n] = ||x_i - y_j|| (squared when `squared` != 0).
 * Never negative or NaN; exactly 0 for identical rows; symmetric with a zero diagonal
 * when y == NULL.
 */
gpuml_status gpuml_dist(const double *x, int64_t n, int64_t d, const double *y, int64_t m,
                        int squared, double *out, gpuml_options *opt);
gpuml_status gpuml_dist_f(const float *x, int64_t n, int64_t d, const float *y, int64_t m,
                          int squared, float *out, gpuml_options *opt);

/*
 * Exact k nearest neighbours of each query among the data.
 *   data: n x d; query: m x d, or NULL to search the data against itself, in which
 *   case each point is excluded from its own neighbours by index (k <= n - 1).
 *   index, dist: m x k, column-major: neighbour j of query i is index[i + j * m]
 *   (0-based) at distance dist[i + j * m]. Sorted by distance; equal distances are
 *   ordered by the smaller index, so results are deterministic.
 * The m x n distance matrix is never held in memory.
 */
gpuml_status gpuml_knn(const double *data, int64_t n, int64_t d, const double *query,
                       int64_t m, int64_t k, int64_t *index, double *dist,
                       gpuml_options *opt);
gpuml_status gpuml_knn_f(const float *data, int64_t n, int64_t d, const float *query,
                         int64_t m, int64_t k, int64_t *index, float *dist,
                         gpuml_options *opt);

/* =====================================================================================
 * Density peaks clustering (Rodriguez & Laio 2014): core/dpc.c, kernels/dpc.cu
 * ===================================================================================== */

/* (density peaks API) */

/* =====================================================================================
 * t-SNE: core/tsne.c, kernels/tsne.cu
 * ===================================================================================== */

/* t-SNE (van der Maaten & Hinton 2008) with the affinities P from gpuml's exact kNN
 * (k = 3 * perplexity neighbours, per-point perplexity bisection, symmetrised, sparse)
 * and the repulsion either exact (all pairs, tiled, O(n^2) per iteration) or by
 * FFT-accelerated interpolation (Linderman et al. 2019, O(n) per iteration). The
 * optimisation follows the reference implementations: early exaggeration, momentum,
 * gains, step-norm clipping. Every reduction has a fixed order, so the same input,
 * parameters, seed and backend give a bit-identical embedding (the CPU result does
 * not depend on the number of threads either). The CPU and GPU backends compute the
 * same P and the same gradient formulas; their embeddings differ in rounding only,
 * which the iterations amplify, so they agree in quality (KL), not bit for bit. */

typedef enum {
  GPUML_TSNE_AUTO = 0,  /* exact for n <= 10,000, else FFT (on 2 CPU cores the exact
                           method, each pair once, is the faster up to there) */
  GPUML_TSNE_EXACT = 1, /* all pairs every iteration */
  GPUML_TSNE_FFT = 2    /* interpolation on a grid + FFT convolution */
} gpuml_tsne_method;

typedef enum {
  GPUML_TSNE_INIT_PCA = 0,    /* the first dims principal components, scaled to sd 1e-4 */
  GPUML_TSNE_INIT_RANDOM = 1, /* N(0, 1e-4^2) from the seed */
  GPUML_TSNE_INIT_USER = 2    /* params.init_y */
} gpuml_tsne_init;

typedef struct {
  int dims;                 /* 1, 2 or 3 */
  double perplexity;        /* > 0 and 3 * perplexity <= n - 1 */
  int max_iter;             /* >= 1 */
  int pca;                  /* reduce the data to initial_dims principal components first */
  int initial_dims;         /* >= 1 */
  gpuml_tsne_init init;
  const double *init_y;     /* n x dims, column-major, when init = GPUML_TSNE_INIT_USER */
  double learning_rate;     /* > 0, or 0 for "auto" = max(200, n / 12). It scales the
                               gradient of KL / 4, as Rtsne, bhtsne and FIt-SNE do
                               (scikit-learn's value is 4x ours for the same step). */
  double exaggeration;      /* P is multiplied by this for the first stop_lying_iter iterations */
  int stop_lying_iter;
  double momentum;          /* before mom_switch_iter */
  double final_momentum;    /* from mom_switch_iter on */
  int mom_switch_iter;
  double max_step_norm;     /* a point moves at most this far per iteration; 0 = no limit */
  gpuml_tsne_method method;
} gpuml_tsne_params;

/* Defaults (Rtsne's where they exist): dims 2, perplexity 30, max_iter 1000, pca on,
 * initial_dims 50, init PCA, learning rate auto, exaggeration 12 until iteration 250,
 * momentum 0.5 then 0.8 from iteration 250, max_step_norm 5, method auto. */
void gpuml_tsne_params_init(gpuml_tsne_params *params);

typedef struct {
  gpuml_tsne_method method_used; /* exact or FFT */
  double learning_rate_used;
  int64_t neighbours;            /* k used for P */
  int64_t nnz;                   /* non-zeros of the symmetric P */
  int iterations_done;
  double kl;                     /* the latest KL divergence (see gpuml_tsne) */
  double seconds_affinities;     /* PCA, kNN and P */
  double seconds_optimisation;
} gpuml_tsne_result;

/* "auto", "exact", "fft" and "pca", "random" (case-insensitive) <-> enum; an unknown
 * name is GPUML_ERR_ARG ("tsne:badMethod", "tsne:badInit") listing the valid ones. A
 * user matrix is given as init = GPUML_TSNE_INIT_USER with params.init_y. */
gpuml_status gpuml_tsne_parse_method(const char *name, gpuml_tsne_method *out);
gpuml_status gpuml_tsne_parse_init(const char *name, gpuml_tsne_init *out);
const char *gpuml_tsne_method_name(gpuml_tsne_method method);

/* The number of KL values gpuml_tsne() writes: ceil(max_iter / 50). */
int gpuml_tsne_cost_count(int max_iter);

/*
 * t-SNE embedding of the n x d matrix x (column-major).
 *   y: n x params->dims, column-major (written on success).
 *   itercosts: gpuml_tsne_cost_count(max_iter) values, or NULL: the KL divergence
 *     KL(P || Q) of the embedding after iterations 50, 100, ... and after the last
 *     one, with the true (not exaggerated) P. For the FFT method Z (the normaliser of
 *     Q) is the interpolated one, as FIt-SNE reports it.
 *   result: may be NULL. During the call, result->kl and result->iterations_done are
 *     updated before each progress callback of the stage "tsne" (done = iterations),
 *     so a front end can show the KL while it runs.
 * Progress stages: "pca", "knn", "affinities", "tsne". opt->seed drives the random
 * initialisation (and nothing else).
 * Errors: n < 4 ("tsne:tooFewPoints"), 3 * perplexity > n - 1 ("tsne:badPerplexity"),
 * dims not in 1..3 ("tsne:badDims"), non-finite data ("tsne:nonFinite"), other bad
 * parameters ("tsne:badParameter", "tsne:badInit").
 */
gpuml_status gpuml_tsne(const double *x, int64_t n, int64_t d, const gpuml_tsne_params *params,
                        double *y, double *itercosts, gpuml_tsne_result *result,
                        gpuml_options *opt);

/* =====================================================================================
 * Gaussian mixture models: core/gmm.c, kernels/gmm.cu
 * ===================================================================================== */

/* (GMM API) */

#ifdef __cplusplus
}
#endif

#endif /* GPUML_H */
