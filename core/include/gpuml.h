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
 *    outputs untouched. Each algorithm has a check call (gpuml_knn_check ...) that a
 *    front end runs before it allocates the outputs.
 *  - Options and parameters are input only (const). What a call used (the backend, the
 *    device, the precision, ...) comes back in its result struct, whose first member is
 *    a gpuml_run_info; a NULL result pointer is allowed everywhere.
 *  - Names follow gpuml_<algorithm>_<verb>.
 */
#ifndef GPUML_H
#define GPUML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version, as in the file VERSION at the top of the tree (a test holds them equal). */
#define GPUML_VERSION_MAJOR 0
#define GPUML_VERSION_MINOR 2
#define GPUML_VERSION_PATCH 0
#define GPUML_VERSION "0.2.0"

typedef enum {
  GPUML_OK = 0,
  GPUML_ERR_ARG = 1,         /* bad argument: sizes, k, NaN/Inf, unknown names */
  GPUML_ERR_NOMEM = 2,       /* host or device memory could not be allocated */
  GPUML_ERR_CUDA = 3,        /* a CUDA runtime or library call failed */
  GPUML_ERR_NO_CUDA = 4,     /* the CUDA backend was asked for but is not available */
  GPUML_ERR_NUMERIC = 5,     /* a numerical failure (e.g. a non-finite intermediate) */
  GPUML_ERR_INTERRUPTED = 6  /* the interrupted() callback asked to stop */
  /* 7 is the library's own (a backend's report to the core, never returned) */
} gpuml_status;

typedef enum {
  GPUML_BACKEND_AUTO = 0, /* CUDA when compiled in, a device is present and the problem
                             is large enough to gain; otherwise CPU */
  GPUML_BACKEND_CPU = 1,
  GPUML_BACKEND_CUDA = 2
} gpuml_backend;

typedef enum {
  GPUML_PRECISION_DOUBLE = 0, /* accumulate in fp64 throughout (the CPU backend always
                                 does) */
  GPUML_PRECISION_SINGLE = 1, /* fp32 accumulation on the GPU (kNN: fp32 candidates
                                 re-ranked in fp64, no proof that none was missed) */
  GPUML_PRECISION_AUTO = 2    /* the default: double input gets the double-precision
                                 answer the fastest exact way the backend has. kNN on the
                                 GPU (d >= 16): fp32 tensor-core candidates whose rounding
                                 error is bounded per query; a query whose list is not
                                 proven to hold its k nearest is searched again in fp64.
                                 Elsewhere the same as double. */
} gpuml_precision;

/* The distance of kNN searches and distance matrices. */
typedef enum {
  GPUML_METRIC_EUCLIDEAN = 0, /* ||x - y|| */
  GPUML_METRIC_COSINE = 1     /* 1 - cos(x, y) = ||x/||x|| - y/||y|| ||^2 / 2, in [0, 2]; a
                                 row of zeros is an error ("<stage>:zeroRow") */
} gpuml_metric;

/* Called between blocks of work, always from the calling thread. `stage` is a short
 * name ("knn", "dist"); done <= total counts units of that stage. */
typedef void (*gpuml_progress_fn)(void *ctx, const char *stage, int64_t done, int64_t total);
/* Return non-zero to stop: the call then frees everything and returns
 * GPUML_ERR_INTERRUPTED. Always called from the calling thread. */
typedef int (*gpuml_interrupted_fn)(void *ctx);

/* The most devices one call spreads over, and the `ndevices` value that means all. */
#define GPUML_MAX_DEVICES 16
#define GPUML_ALL_DEVICES (-1)

typedef struct {
  gpuml_backend backend;     /* in: which backend to use */
  int device;                /* in: CUDA device ordinal (when devices[] lists none) */
  int devices[GPUML_MAX_DEVICES]; /* in: CUDA devices to spread a call over, ndevices of
                                 them: kNN shards the references over them and merges
                                 the lists exactly (the answer of one device); the
                                 mixtures split the rows and combine the M-step's
                                 statistics (one device's fit up to the order of sums) */
  int ndevices;              /* in: 0 = `device` alone; GPUML_ALL_DEVICES = every device */
  gpuml_precision precision; /* in */
  gpuml_metric metric;       /* in: kNN, distances and the kNN index; default euclidean */
  int threads;               /* in: OpenMP threads; 0 = the OpenMP default */
  uint64_t seed;             /* in: for randomised algorithms */
  int verbose;               /* in: 0 silent; >0 the progress callback is called */
  size_t gpu_memory_limit;   /* in: bytes of device memory to use at most; 0 = the
                                environment variable GPUML_GPU_MEMORY_LIMIT if set (bytes,
                                or with a K/M/G suffix), else the free memory */
  gpuml_progress_fn progress;         /* may be NULL */
  gpuml_interrupted_fn interrupted;   /* may be NULL */
  void *callback_ctx;                 /* passed to both callbacks */
} gpuml_options;

/* Fills *opt with the defaults: backend auto, device 0 (no device list), precision
 * auto, metric euclidean, default threads, seed 42, silent, no limit, no callbacks. */
void gpuml_options_init(gpuml_options *opt);

/* The seed rule of every algorithm, for front ends that hold numbers as doubles: a whole
 * number in [0, 2^53). R and Octave draw it from their own generator when the user gives
 * none, so that set.seed() / rand("seed") decide. Error "badSeed" otherwise. */
gpuml_status gpuml_options_set_seed(gpuml_options *opt, double seed);

/* The device list of a call, for front ends that hold numbers: `count` CUDA ordinals,
 * whole numbers >= 0, distinct, at most GPUML_MAX_DEVICES (count 0: no list, `device`
 * alone). gpuml_options_set_devices_word() takes "all" (case-insensitive): every device.
 * Error "badDevice" otherwise, opt unchanged. A device that does not exist is an error
 * of the call that runs on CUDA. On the CPU backend (named, or chosen by "auto") a
 * device list is checked as here and then ignored: the CPU runs as one device, so a
 * script written for a GPU host runs unchanged without one, with the same results. */
gpuml_status gpuml_options_set_devices(gpuml_options *opt, const double *ids, int64_t count);
gpuml_status gpuml_options_set_devices_word(gpuml_options *opt, const char *word);

/* What a call ran on: the first member of every algorithm's result struct. */
typedef struct {
  gpuml_backend backend;     /* the backend that ran: CPU or CUDA (never auto) */
  int device;                /* the CUDA device, -1 on the CPU */
  gpuml_precision precision; /* the precision the arithmetic ran in */
  int threads;               /* OpenMP threads of the CPU backend */
  double seconds;            /* wall-clock time of the call */
} gpuml_run_info;

const char *gpuml_last_error(void);
const char *gpuml_last_error_id(void);
const char *gpuml_status_string(gpuml_status status);

/* "auto", "cpu", "cuda" <-> enum. Parsing is case-insensitive; an unknown name is
 * GPUML_ERR_ARG with a message listing the valid names. */
const char *gpuml_backend_name(gpuml_backend backend);
gpuml_status gpuml_parse_backend(const char *name, gpuml_backend *out);
gpuml_status gpuml_parse_precision(const char *name, gpuml_precision *out);
/* "euclidean", "cosine" <-> enum (case-insensitive; "badMetric" for another name). */
const char *gpuml_metric_name(gpuml_metric metric);
gpuml_status gpuml_parse_metric(const char *name, gpuml_metric *out);

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
 * matrices check that they agree with this before calling gpuml_dist_compute()/gpuml_knn_search().
 * GPUML_ERR_ARG with id "<stage>:dimMismatch" ("query has 2 columns but data has 3")
 * when d_second != d_first. */
gpuml_status gpuml_check_columns(const char *stage, const char *second, int64_t d_second,
                                 const char *first, int64_t d_first);

/* The version of the library linked (GPUML_VERSION of its build). */
const char *gpuml_version(void);

/* How the library was built, and the environment variables it reads. */
typedef struct {
  char version[16];
  char compiler[128];         /* the C compiler's version string */
  int openmp;                 /* OpenMP version macro (e.g. 201511), 0 without OpenMP */
  int cuda_compiled;
  int cuda_runtime_built;     /* the CUDA runtime version built against, e.g. 13000 */
  char cuda_architectures[256]; /* the device code built, e.g. "sm_70 sm_75 ... compute_90" */
  int mpi;                    /* 1 when libgpuml_mpi was built beside this library */
} gpuml_build;
gpuml_status gpuml_build_info(gpuml_build *build);
/* The environment variables gpuml reads: name i (0-based) and what it does, NULL past
 * the last. Front ends list them (gpuml_info() in R and Octave). */
const char *gpuml_env_name(int i);
const char *gpuml_env_meaning(int i);

/* What was compiled in and which device was found. Never fails for lack of a GPU. */
gpuml_status gpuml_backend_info(gpuml_info *info);

/* =====================================================================================
 * Parameters by name: every algorithm's parameter struct can be filled field by field by
 * name, so that a front end passes the arguments its user gave and holds no list of
 * names, defaults or rules of its own. Names are matched without regard to case; an
 * unknown name is an error listing the known ones ("<algo>:badParameter"); setting
 * converts and type-checks (a whole number for a count, a known word for a choice, "auto"
 * where a number has an automatic value), the run's checks judge the values.
 * ===================================================================================== */
typedef enum {
  GPUML_PARAMS_TSNE = 0, /* gpuml_tsne_params */
  GPUML_PARAMS_GMM = 1,  /* gpuml_gmm_params */
  GPUML_PARAMS_DPC = 2,  /* gpuml_dpc_params */
  GPUML_PARAMS_TSNE_TRANSFORM = 3 /* gpuml_tsne_transform_params */
} gpuml_params_kind;

/* One or several numbers (a list parameter takes several, a scalar one exactly one). */
gpuml_status gpuml_params_set_numbers(gpuml_params_kind kind, void *params, const char *name,
                                      const double *values, int64_t count);
/* One or several words (a choice, a list of choices, or "auto" for a number). */
gpuml_status gpuml_params_set_strings(gpuml_params_kind kind, void *params, const char *name,
                                      const char *const *values, int64_t count);
/* The value of a scalar parameter (a choice gives its index): the defaults front ends
 * show come from here. */
gpuml_status gpuml_params_get(gpuml_params_kind kind, const void *params, const char *name,
                              double *value);
/* The name of parameter i (0-based) of a kind, NULL past the last. */
const char *gpuml_params_name(gpuml_params_kind kind, int i);

/* The library keeps one context per GPU across calls (a stream, the cuBLAS and cuSOLVER
 * handles, a pool of device memory, page-locked staging buffers), created by the first
 * call that uses the device. gpuml_context_free() releases one device's context, waiting
 * for a call that uses it; gpuml_shutdown() releases them all (R and Octave call it when
 * the package is unloaded). A later call creates a context again. Objects that hold
 * device memory of their own (a kNN index) are not affected. Both are no-ops without
 * CUDA. The pool keeps at most GPUML_CUDA_POOL_CACHE bytes (K/M/G suffixes; default a
 * quarter of the device's memory) cached between calls. */
gpuml_status gpuml_context_free(int device);
void gpuml_shutdown(void);

typedef struct {
  gpuml_run_info run;
} gpuml_dist_result;

typedef struct {
  gpuml_run_info run;
  int64_t rechecked; /* queries searched again in fp64 because the fast candidates could not
                        be proven complete (CUDA, precision auto); 0 otherwise */
} gpuml_knn_result;

/*
 * Euclidean distances.
 *   x: n x d, y: m x d (y == NULL means y = x, m = n).
 *   out: n x m, out[i + j * n] = ||x_i - y_j|| (squared when `squared` != 0).
 * Never negative or NaN; exactly 0 for identical rows; symmetric with a zero diagonal
 * when y == NULL.
 */
gpuml_status gpuml_dist_compute(const double *x, int64_t n, int64_t d, const double *y,
                                int64_t m, int squared, double *out, const gpuml_options *opt,
                                gpuml_dist_result *result);
gpuml_status gpuml_dist_compute_f(const float *x, int64_t n, int64_t d, const float *y,
                                  int64_t m, int squared, float *out, const gpuml_options *opt,
                                  gpuml_dist_result *result);

/*
 * Exact k nearest neighbours of each query among the data.
 *   data: n x d; query: m x d, or NULL to search the data against itself, in which
 *   case each point is excluded from its own neighbours by index (k <= n - 1).
 *   index, dist: m x k, column-major: neighbour j of query i is index[i + j * m]
 *   (0-based) at distance dist[i + j * m]. Sorted by distance; equal distances are
 *   ordered by the smaller index, so results are deterministic.
 * The m x n distance matrix is never held in memory.
 */
gpuml_status gpuml_knn_search(const double *data, int64_t n, int64_t d, const double *query,
                              int64_t m, int64_t k, int64_t *index, double *dist,
                              const gpuml_options *opt, gpuml_knn_result *result);
gpuml_status gpuml_knn_search_f(const float *data, int64_t n, int64_t d, const float *query,
                                int64_t m, int64_t k, int64_t *index, float *dist,
                                const gpuml_options *opt, gpuml_knn_result *result);
/* The checks of gpuml_knn_search() that need no data (sizes, k, options; query_rows < 0
 * for the data searched against itself), so that a front end can refuse a call before
 * it allocates the m x k outputs. */
gpuml_status gpuml_knn_check(int64_t n, int64_t d, int64_t query_rows, int64_t k,
                             const gpuml_options *opt);

/* A kNN index: data prepared once and searched by many calls. On the GPU the points stay
 * resident on the device in the layout the search wants (centred, in the compute
 * precision, with their norms), so a search uploads only its queries; on the CPU the index
 * holds the prepared copy. The index owns a host copy of the data (scaled to unit rows
 * for the cosine metric), used for the CPU search and the GPU's exact fp64 re-checks: the
 * caller's matrix may be freed after the build. Its device memory is its own, not the
 * context's pool: gpuml_context_free() and gpuml_shutdown() leave it in place. */
typedef struct gpuml_knn_index gpuml_knn_index;

typedef struct {
  gpuml_run_info run;         /* the backend and device it lives on, the precision and
                                 the time the build took */
  int64_t rows, cols;
  gpuml_metric metric;
  size_t host_bytes;          /* host memory it holds (a borrowed matrix not counted) */
  size_t device_bytes;        /* device memory it holds (0 on the CPU) */
} gpuml_knn_index_info;

/* Builds an index of data (n x d) with opt's backend, device, precision and metric
 * (opt->ndevices must be 0: an index lives on one device). The checks of
 * gpuml_knn_search() on the data (and "knn:zeroRow" for cosine) apply. *out receives the
 * index (NULL on failure); gpuml_knn_index_free() releases it. */
gpuml_status gpuml_knn_index_build(const double *data, int64_t n, int64_t d,
                                   const gpuml_options *opt, gpuml_knn_index **out);
/* gpuml_knn_index_build() without the host copy, for callers that can keep the data: the
 * index reads `data` itself, which must stay allocated and unchanged until the index is
 * freed (R's glue holds its matrix for the index's lifetime). Saves the copy's time and
 * memory; the cosine metric still makes its own copy of the unit rows. */
gpuml_status gpuml_knn_index_build_borrowed(const double *data, int64_t n, int64_t d,
                                            const gpuml_options *opt, gpuml_knn_index **out);
/* gpuml_knn_search() against the index: query (m x d, the index's column count) or NULL
 * for the indexed data against itself. The backend, device, precision and metric are the
 * index's; opt gives the threads, the memory limit, verbosity and callbacks (and its
 * backend, device, precision and metric are ignored). The same answers as
 * gpuml_knn_search() on the same data and options. */
gpuml_status gpuml_knn_index_search(const gpuml_knn_index *ix, const double *query, int64_t m,
                                    int64_t k, int64_t *index, double *dist,
                                    const gpuml_options *opt, gpuml_knn_result *result);
/* The checks of gpuml_knn_index_search() that need no data (query_rows < 0: the data
 * against itself), for front ends that allocate the outputs first. */
gpuml_status gpuml_knn_index_check(const gpuml_knn_index *ix, int64_t query_rows, int64_t k,
                                   const gpuml_options *opt);
gpuml_status gpuml_knn_index_describe(const gpuml_knn_index *ix, gpuml_knn_index_info *info);
/* Releases the index and its device memory (NULL is a no-op). */
void gpuml_knn_index_free(gpuml_knn_index *ix);

/* =====================================================================================
 * Density peaks clustering (Rodriguez & Laio 2014): core/dpc.c, kernels/dpc.cu
 * ===================================================================================== */

/* (density peaks API)
 *
 * Definitions (both backends give the same answers):
 *  - rho_i = #{j != i : d_ij < dc} (cutoff kernel), or sum_{j != i} exp(-(d_ij / dc)^2)
 *    (Gaussian kernel). d_ij is the Euclidean distance computed in double precision
 *    in the direct form (differences, then squares summed in dimension order), so the
 *    cutoff decisions, and with them the cutoff rho, are exactly the same on both
 *    backends.
 *  - "Higher density" is a strict order: j is above i when rho_j > rho_i, or rho_j ==
 *    rho_i and j < i. delta_i is the distance from i to the nearest point above it
 *    (equal distances: the smaller index), nearest_i that point's index (0-based). The
 *    top point has no point above it: its delta is its largest distance to any point
 *    and its nearest is -1. gamma = rho * delta.
 *  - Memory is O(n): distances are computed on the fly (a spatial grid for d <= 3 with
 *    the cutoff kernel, distance tiles otherwise), never as an n x n matrix.
 */
typedef enum {
  GPUML_DPC_CUTOFF = 0,  /* count of the points closer than dc */
  GPUML_DPC_GAUSSIAN = 1 /* sum of exp(-(d / dc)^2) over the other points */
} gpuml_dpc_kernel;

/* The dc estimate: dc is the distance below which the given fraction of the pairs of
 * points lie (neighbor_rate 0.02: each point has on average about 2% of the others
 * within dc). Exact (all n(n-1)/2 pairs) for n <= GPUML_DPC_DC_SAMPLE; above that, from
 * the pairs among GPUML_DPC_DC_SAMPLE points drawn without replacement with opt->seed. */
#define GPUML_DPC_DC_SAMPLE 2000

/* How the centres are chosen: either k (the k points of largest gamma; equal gamma:
 * the higher density first), or both thresholds (every point with rho > rho_min and
 * delta > delta_min; the top point always qualifies when any point does). The has_*
 * flags say what the caller gave, so that a bad value (k = 0) is told apart from a
 * missing one. */
typedef struct {
  int has_k;
  int64_t k;          /* number of clusters, 1 .. n */
  int has_rho;
  double rho_min;     /* finite */
  int has_delta;
  double delta_min;   /* finite */
} gpuml_dpc_selection;

typedef struct {
  int estimate_dc;        /* non-zero: estimate dc (the default); 0: use dc */
  double dc;              /* the cutoff distance (> 0, finite) when estimate_dc == 0 */
  double neighbor_rate;   /* in: the fraction for the estimate, in (0, 1); default 0.02 */
  gpuml_dpc_kernel kernel; /* default GPUML_DPC_CUTOFF */
  /* The Gaussian kernel's truncation, in units of dc (>= 0, finite; ignored by the
   * cutoff kernel). 0 (the default): the exact sum over all other points. c > 0: only
   * the points at distance d < c dc are summed, so rho runs on the cell index for d <= 8
   * (as the cutoff kernel does) with the ball of radius c dc. Each dropped weight is
   * exp(-(d / dc)^2) <= exp(-c^2), so every rho is below the exact sum by at most
   * (n - 1) exp(-c^2) (at most the number of dropped points times that; c = 3: 1.2e-4
   * per dropped point); delta, the centres and the halo follow from that rho. */
  double gaussian_cutoff;
  gpuml_dpc_selection select; /* the centres, for gpuml_dpc_fit (none by default) */
} gpuml_dpc_params;

/* Fills *p with the defaults: estimate dc at a 2% neighbour rate, cutoff kernel, no
 * selection of centres. By name (gpuml_params_set_*, GPUML_PARAMS_DPC): "dc" (a
 * number, or "auto": estimated), "neighbor_rate", "kernel" ("cutoff", "gaussian"),
 * "gaussian_cutoff", and the selection: "k", "rho" and "delta" (the thresholds). */
void gpuml_dpc_params_init(gpuml_dpc_params *p);

/* Estimates dc for x (n x d, n >= 2) as described above; the CPU computes it on either
 * backend, so both get the same dc. Fails ("dpc:badData") when all sampled points
 * coincide. */
gpuml_status gpuml_dpc_estimate_dc(const double *x, int64_t n, int64_t d, double neighbor_rate,
                                   double *dc, const gpuml_options *opt);

typedef struct {
  gpuml_run_info run;
  double dc;              /* the dc used (given or estimated) */
} gpuml_dpc_result;

/* Densities and distances to the nearest denser point of x (n x d, n >= 2).
 * Outputs (caller-allocated, length n): rho, delta, nearest (0-based; -1 for the top
 * point) and gamma (may be NULL). result->dc receives the dc used. */
gpuml_status gpuml_dpc_density(const double *x, int64_t n, int64_t d,
                               const gpuml_dpc_params *params, double *rho, double *delta,
                               int64_t *nearest, double *gamma, const gpuml_options *opt,
                               gpuml_dpc_result *result);

/* Nothing given: the caller sets k or both thresholds. */
void gpuml_dpc_selection_init(gpuml_dpc_selection *s);

/* Checks a selection for n points without computing anything, so that front ends can
 * refuse a bad or conflicting selection before the densities are computed: errors
 * "dpc:badSelection" (none, both kinds, one threshold alone, non-finite thresholds)
 * and "dpc:badK" (k outside 1 .. n). */
gpuml_status gpuml_dpc_check_selection(const gpuml_dpc_selection *sel, int64_t n);

/* Centres and clusters from the output of gpuml_dpc_density(), without touching the data:
 * cheap, so that a fit can be recut. centres (caller-allocated, length n) receives
 * *ncentres point indices (0-based) ordered by decreasing gamma; cluster (length n)
 * the cluster of every point, 0 .. *ncentres - 1 (cluster c has centre centres[c]):
 * points are assigned in decreasing density to the cluster of their `nearest`.
 * Errors: those of gpuml_dpc_check_selection(), thresholds that select no point
 * ("dpc:noCentres"), inputs that are not the output of gpuml_dpc_density() ("dpc:badInput"). */
gpuml_status gpuml_dpc_cut(const double *rho, const double *delta, const int64_t *nearest,
                           int64_t n, const gpuml_dpc_selection *sel, int64_t *centres,
                           int64_t *ncentres, int64_t *cluster);

/* The m points of largest gamma = rho * delta (rho and delta from gpuml_dpc_density), in
 * the order of the centres by k (decreasing gamma; equal gamma: the denser, then the
 * smaller index): top (caller-allocated, length m) receives their indices (0-based), the
 * centres gpuml_dpc_cut() takes for k = m; a decision graph marks them as the candidate
 * centres. O(n) on the threads of opt, without sorting all points. Errors: m outside
 * 1 .. n ("dpc:badK"), rho or delta not finite and non-negative ("dpc:badInput"). */
gpuml_status gpuml_dpc_rank(const double *rho, const double *delta, int64_t n, int64_t m,
                            int64_t *top, const gpuml_options *opt);

/* The density order of rho (the output of gpuml_dpc_density): order (caller-allocated,
 * length n) receives the point indices (0-based) from the densest down, equal densities
 * by index. O(n) (a radix sort on the densities) and O(n) memory. A front end that keeps
 * it with a fit passes it to gpuml_dpc_recut(), whose cut then costs one pass over the
 * points in this order. Errors: rho not finite and non-negative ("dpc:badInput"). */
gpuml_status gpuml_dpc_order(const double *rho, int64_t n, int64_t *order);

/* Density peaks in one call: the densities (as gpuml_dpc_density), then, when
 * params->select gives k or both thresholds, the centres and clusters (as
 * gpuml_dpc_cut) and the halo (as gpuml_dpc_halo), on the backend of opt. The selection
 * is checked before anything is computed. order (length n, may be NULL) receives the
 * density order (as gpuml_dpc_order; on a GPU it is sorted there), which the cut follows
 * and a front end keeps for gpuml_dpc_recut(). centres, cluster and halo (length n) may
 * be NULL without a selection; *ncentres receives their number (0 without a selection).
 * result->dc receives the dc used. */
gpuml_status gpuml_dpc_fit(const double *x, int64_t n, int64_t d, const gpuml_dpc_params *params,
                           double *rho, double *delta, int64_t *nearest, double *gamma,
                           int64_t *order, int64_t *centres, int64_t *ncentres, int64_t *cluster,
                           int *halo, const gpuml_options *opt, gpuml_dpc_result *result);

/* gpuml_dpc_fit as a function of a context, for front ends that run either a fit of one
 * process or one over MPI ranks (gpuml_mpi_dpc_fit_comm) through one code path:
 * gpuml_dpc_fit_here ignores ctx. */
typedef gpuml_status (*gpuml_dpc_fit_fn)(void *ctx, const double *x, int64_t n, int64_t d,
                                         const gpuml_dpc_params *params, double *rho,
                                         double *delta, int64_t *nearest, double *gamma,
                                         int64_t *centres, int64_t *ncentres, int64_t *cluster,
                                         int *halo, const gpuml_options *opt,
                                         gpuml_dpc_result *result);
gpuml_status gpuml_dpc_fit_here(void *ctx, const double *x, int64_t n, int64_t d,
                                const gpuml_dpc_params *params, double *rho, double *delta,
                                int64_t *nearest, double *gamma, int64_t *centres,
                                int64_t *ncentres, int64_t *cluster, int *halo,
                                const gpuml_options *opt, gpuml_dpc_result *result);

/* The index a fit keeps for its recuts: the points sorted by cells of the grid the
 * halo walks (where the halo runs on it: d <= 8 and a ball of radius dc touching few
 * rows of cells; else it holds nothing and the halo runs on distance tiles). Built from
 * x and the dc of the fit; it copies the points, so it holds n (d + 2) doubles and the
 * cells' prefix counts (about n / 16 + 1 more): 325 MB for 10^7 points in 2-D. Freed by
 * gpuml_dpc_index_free() (NULL is a no-op). The CUDA backend sorts the points on the
 * device itself and takes only the grid's geometry from it. */
typedef struct gpuml_dpc_index gpuml_dpc_index;
gpuml_status gpuml_dpc_index_build(const double *x, int64_t n, int64_t d, double dc,
                                   const gpuml_options *opt, gpuml_dpc_index **index);
void gpuml_dpc_index_free(gpuml_dpc_index *index);

/* Recutting a fit: centres, clusters and halo (as gpuml_dpc_cut and gpuml_dpc_halo) for
 * the selection params->select, from the output of gpuml_dpc_fit or gpuml_dpc_density
 * (rho, delta, nearest and the dc used) and the same x. order: that of gpuml_dpc_order()
 * for this rho, kept with the fit (checked: "dpc:badInput" when it is not the density
 * order), or NULL to sort the densities here. index: that of gpuml_dpc_index_build()
 * for x and dc, kept with the fit, so that the halo does not build it again, or NULL;
 * one of other dimensions is refused ("dpc:badIndex"). The cut runs on the threads of
 * opt. */
gpuml_status gpuml_dpc_recut(const double *x, int64_t n, int64_t d, double dc, const double *rho,
                             const double *delta, const int64_t *nearest, const int64_t *order,
                             gpuml_dpc_index *index,
                             const gpuml_dpc_params *params, int64_t *centres,
                             int64_t *ncentres, int64_t *cluster, int *halo,
                             const gpuml_options *opt, gpuml_dpc_result *result);

/* Halo (border) points as in Rodriguez & Laio: the border density of a cluster is the
 * largest (rho_i + rho_j) / 2 over the pairs i in it, j in another cluster, with
 * d_ij <= dc; a point is halo (halo[i] = 1, else 0) when its rho is below its
 * cluster's border density. One more pass over the pairs within dc (on the backend
 * of opt), O(n) memory. x and dc as given to gpuml_dpc_density(), rho its output, cluster
 * that of gpuml_dpc_cut() (values 0 .. ncentres - 1). */
gpuml_status gpuml_dpc_halo(const double *x, int64_t n, int64_t d, double dc, const double *rho,
                            const int64_t *cluster, int64_t ncentres, int *halo,
                            const gpuml_options *opt, gpuml_dpc_result *result);

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
                           method, each pair once, is the faster up to there); on a CPU
                           without AVX-512 up to 3,000 (AVX2, measured) or 2,000 points;
                           with df != 1 on the CPU up to 2/5 of these */
  GPUML_TSNE_EXACT = 1, /* all pairs every iteration */
  GPUML_TSNE_FFT = 2    /* interpolation on a grid + FFT convolution */
} gpuml_tsne_method;

typedef enum {
  GPUML_TSNE_INIT_PCA = 0,    /* the first dims principal components, scaled to sd 1e-4 */
  GPUML_TSNE_INIT_RANDOM = 1, /* N(0, 1e-4^2) from the seed */
  GPUML_TSNE_INIT_USER = 2    /* params.init_y */
} gpuml_tsne_init;

#define GPUML_TSNE_MAX_PERPLEXITIES 8

typedef struct {
  int64_t dims;             /* 1, 2 or 3 */
  double perplexity;        /* > 0 and 3 * perplexity <= n - 1 */
  int64_t max_iter;         /* 1 .. 2^31 - 1 */
  int pca;                  /* reduce the data to initial_dims principal components first */
  int64_t initial_dims;     /* >= 1 */
  gpuml_tsne_init init;
  const double *init_y;     /* n x dims, column-major, when init = GPUML_TSNE_INIT_USER */
  double learning_rate;     /* > 0, or 0 for "auto" = max(200, n / 12). It scales the
                               gradient of KL / 4, as Rtsne, bhtsne and FIt-SNE do
                               (scikit-learn's value is 4x ours for the same step). */
  double exaggeration;      /* P is multiplied by this for the first stop_lying_iter iterations */
  int64_t stop_lying_iter;
  double momentum;          /* before mom_switch_iter */
  double final_momentum;    /* from mom_switch_iter on */
  int64_t mom_switch_iter;
  double max_step_norm;     /* a point moves at most this far per iteration; 0 = no limit */
  gpuml_tsne_method method;
  /* Multiscale affinities: n_perplexities (0 = none) values; when given they replace
   * perplexity: P is the mean of the conditional affinities of each perplexity over the
   * 3 * max(perplexities) neighbours, then symmetrised. */
  double perplexities[GPUML_TSNE_MAX_PERPLEXITIES];
  int64_t n_perplexities;
  double df;                /* degrees of freedom of the output kernel (Kobak et al. 2019):
                               q_ij ~ (1 + |y_i - y_j|^2 / df)^(-df); 1 is the Cauchy kernel
                               of t-SNE, smaller values give heavier tails (finer clusters).
                               > 0 (error "tsne:badDf") */
} gpuml_tsne_params;

/* Defaults (Rtsne's where they exist): dims 2, perplexity 30, max_iter 1000, pca on,
 * initial_dims 50, init PCA, learning rate auto, exaggeration 12 until iteration 250,
 * momentum 0.5 then 0.8 from iteration 250, max_step_norm 5, method auto, df 1. */
void gpuml_tsne_params_init(gpuml_tsne_params *params);

typedef struct {
  gpuml_run_info run;
  gpuml_tsne_method method_used; /* exact or FFT */
  double learning_rate_used;
  int64_t neighbours;            /* k used for P */
  int64_t nnz;                   /* non-zeros of the symmetric P */
  int iterations_done;
  double kl;                     /* the latest KL divergence (see gpuml_tsne_fit) */
  double seconds_affinities;     /* PCA, kNN and P */
  double seconds_optimisation;
} gpuml_tsne_result;

/* "auto", "exact", "fft" and "pca", "random" (case-insensitive) <-> enum; an unknown
 * name is GPUML_ERR_ARG ("tsne:badMethod", "tsne:badInit") listing the valid ones. A
 * user matrix is given as init = GPUML_TSNE_INIT_USER with params.init_y. */
gpuml_status gpuml_tsne_parse_method(const char *name, gpuml_tsne_method *out);
gpuml_status gpuml_tsne_parse_init(const char *name, gpuml_tsne_init *out);
const char *gpuml_tsne_method_name(gpuml_tsne_method method);

/* The number of KL values gpuml_tsne_fit() writes: ceil(max_iter / 50). */
int64_t gpuml_tsne_cost_count(int64_t max_iter);
/* The iteration after which KL value i (0-based) of itercosts is taken: 50, 100, ...,
 * and max_iter for the last. */
int64_t gpuml_tsne_cost_iteration(int64_t max_iter, int64_t i);

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
gpuml_status gpuml_tsne_fit(const double *x, int64_t n, int64_t d,
                           const gpuml_tsne_params *params, double *y, double *itercosts,
                           const gpuml_options *opt, gpuml_tsne_result *result);

/* t-SNE from each point's neighbours instead of its coordinates (Rtsne_neighbors):
 * nn_index (0-based, the point itself left out) and nn_dist, both n x k column-major as
 * gpuml_knn_search() gives them (in any order within a row: they are sorted by
 * distance, ties by index). P is bisected over all k given neighbours, so k =
 * floor(3 * perplexity) gives the P of gpuml_tsne_fit() on the same neighbours; fewer
 * than that is an error. Without coordinates init = PCA starts at random (from the
 * seed), as Rtsne does. Errors: indices outside 0 .. n - 1, a point listed as its own
 * neighbour or a neighbour listed twice, negative or non-finite distances
 * ("tsne:badNeighbours"), k < 3 * perplexity ("tsne:badPerplexity"), and those of
 * gpuml_tsne_fit(). */
gpuml_status gpuml_tsne_fit_neighbours(const int64_t *nn_index, const double *nn_dist, int64_t n,
                                       int64_t k, const gpuml_tsne_params *params, double *y,
                                       double *itercosts, const gpuml_options *opt,
                                       gpuml_tsne_result *result);

/* t-SNE from an n x n_cols matrix of distances (Rtsne's is_distance): each point's
 * floor(3 * perplexity) nearest others (off the diagonal, ties by index), then as
 * gpuml_tsne_fit_neighbours(). Errors: not square, a negative or non-finite entry
 * ("tsne:badDistance"), and those of gpuml_tsne_fit(). */
gpuml_status gpuml_tsne_fit_distance(const double *dist, int64_t n, int64_t n_cols,
                                     const gpuml_tsne_params *params, double *y,
                                     double *itercosts, const gpuml_options *opt,
                                     gpuml_tsne_result *result);

/* New points placed into a fitted embedding (predict), after openTSNE's transform: each
 * new point gets affinities p_{j|i} to its 3 * perplexity nearest training points (a
 * small perplexity: the neighbourhood of a point, not of a cluster), starts at the
 * median (or the p-weighted mean) of those neighbours' places, and moves for max_iter
 * iterations (no exaggeration) to reduce its own KL divergence: attracted by its
 * neighbours, repelled by every training point (exactly or by FFT interpolation). The
 * training points stay where they are and the new points do not interact, so a point's
 * place does not depend on the others given with it. */
typedef enum {
  GPUML_TSNE_PLACE_MEDIAN = 0,  /* the coordinate-wise median of the neighbours' places */
  GPUML_TSNE_PLACE_WEIGHTED = 1 /* their mean weighted by p_{j|i} */
} gpuml_tsne_place_init;

typedef struct {
  double perplexity;           /* > 0 and 3 * perplexity <= n (training points) */
  int64_t max_iter;            /* 0 .. 2^31 - 1 (0: the starting places) */
  double learning_rate;        /* > 0, or 0 for "auto" (1: the step of a point's gradient) */
  double momentum;             /* in [0, 1) */
  double max_step_norm;        /* a point moves at most this far per iteration; 0 = no limit */
  double df;                   /* the fit's degrees of freedom (> 0) */
  gpuml_tsne_method method;    /* auto: exact while (new x training points) <= 2.5e7 */
  gpuml_tsne_place_init init;
} gpuml_tsne_transform_params;

/* Defaults (openTSNE's transform where it has them): perplexity 5, max_iter 250,
 * learning rate auto, momentum 0.8, max_step_norm 5, df 1, method auto, init median. */
void gpuml_tsne_transform_params_init(gpuml_tsne_transform_params *params);

/*
 * Places the m x d matrix x_new (column-major) into the embedding y (n x dims) of the
 * training data x (n x d) that gpuml_tsne_fit() gave; y_new (m x dims) receives the
 * places. The neighbours are found in the space of x as given (the fit's own PCA, when
 * it made one, is not reapplied: give the fit and the transform the same reduced data).
 * result may be NULL (method_used, learning_rate_used, neighbours are filled).
 * Errors: no training data ("tsne:noTrainingData"), x_new with another number of
 * columns than x ("tsne:badColumns"), y not n x dims with finite values
 * ("tsne:badEmbedding"), non-finite data ("tsne:nonFinite"), 3 * perplexity > n
 * ("tsne:badPerplexity"), df <= 0 ("tsne:badDf"), other bad parameters
 * ("tsne:badParameter").
 */
gpuml_status gpuml_tsne_transform(const double *x, int64_t n, int64_t d, const double *y,
                                  int64_t dims, const double *x_new, int64_t m, int64_t d_new,
                                  const gpuml_tsne_transform_params *params, double *y_new,
                                  const gpuml_options *opt, gpuml_tsne_result *result);

/* =====================================================================================
 * Gaussian mixture models: core/gmm.c, kernels/gmm.cu
 * ===================================================================================== */

/* The covariance models, with mclust's names and in mclust's order: component k has
 * covariance Sigma_k = lambda_k D_k A_k D_k' (volume lambda_k, diagonal shape A_k of
 * determinant 1, orthogonal orientation D_k), each letter saying whether volume, shape
 * and orientation are Equal across components, Variable, or the Identity. */
typedef enum {
  GPUML_GMM_EII = 0, /* lambda I: spherical, equal volume */
  GPUML_GMM_VII,     /* lambda_k I: spherical */
  GPUML_GMM_EEI,     /* lambda A: diagonal, equal */
  GPUML_GMM_VEI,     /* lambda_k A */
  GPUML_GMM_EVI,     /* lambda A_k */
  GPUML_GMM_VVI,     /* lambda_k A_k: diagonal */
  GPUML_GMM_EEE,     /* lambda D A D': one covariance for all */
  GPUML_GMM_VEE,     /* lambda_k D A D' */
  GPUML_GMM_EVE,     /* lambda D A_k D' */
  GPUML_GMM_VVE,     /* lambda_k D A_k D' */
  GPUML_GMM_EEV,     /* lambda D_k A D_k' */
  GPUML_GMM_VEV,     /* lambda_k D_k A D_k' */
  GPUML_GMM_EVV,     /* lambda D_k A_k D_k' */
  GPUML_GMM_VVV,     /* lambda_k D_k A_k D_k': unrestricted */
  GPUML_GMM_FULL = GPUML_GMM_VVV,
  GPUML_GMM_DIAG = GPUML_GMM_VVI,
  GPUML_GMM_SPHERICAL = GPUML_GMM_VII
} gpuml_gmm_covariance;
#define GPUML_GMM_N_MODELS 14

/* A model's name: mclust's three letters ("E" or "V" when d = 1, where every model is
 * one of mclust's two univariate ones); "" for an unknown value. */
const char *gpuml_gmm_model_name(gpuml_gmm_covariance model, int64_t d);
/* A name (case-insensitive) -> the model: the 14 names, "full", "diag", "spherical"
 * (VVV, VVI, VII) and "E", "V" (EII, VII). An unknown name is GPUML_ERR_ARG with id
 * "gmm:badModel" and a message listing the valid names. */
gpuml_status gpuml_gmm_parse_covariance(const char *name, gpuml_gmm_covariance *out);
/* Free parameters of a G-component model in d dimensions, counted as mclust counts
 * them: G - 1 weights, G d means and the model's covariance parameters.
 * BIC = 2 loglik - npar log(n). */
int64_t gpuml_gmm_npar(gpuml_gmm_covariance model, int64_t G, int64_t d);

/* The most numbers of components one fit tries (params.G). */
#define GPUML_GMM_MAX_G 256

typedef enum {
  GPUML_GMM_INIT_HC = 0,      /* model-based agglomerative clustering (deterministic) */
  GPUML_GMM_INIT_KMEANSPP = 1 /* greedy k-means++ centres drawn with opt->seed */
} gpuml_gmm_init;

typedef struct {
  int64_t G[GPUML_GMM_MAX_G]; /* the numbers of components to try: nG values >= 1 */
  int64_t nG;
  gpuml_gmm_covariance models[GPUML_GMM_N_MODELS]; /* the models to try ... */
  int64_t n_models;      /* ... 0: all that apply (gpuml_gmm_models_tried) */
  gpuml_gmm_init init;   /* how each fit starts */
  int64_t max_iter;      /* EM iterations per fit, >= 1 */
  double tol;            /* stop when |loglik_t - loglik_{t-1}| <= tol (1 + |loglik_t|);
                            0 runs max_iter iterations */
  double reg;            /* >= 0, added to the diagonal of every covariance matrix */
  int64_t n_init;        /* starts per G and model (the first from `init`, the others
                            k-means++); the one of largest loglik is kept */
} gpuml_gmm_params;

/* Defaults: G = 1:9 and all models that apply (mclust's), init "hc", max_iter 1000,
 * tol 1e-5 (mclust's), reg 0 (mclust has none), n_init 1. */
void gpuml_gmm_params_init(gpuml_gmm_params *params);

/* The models a fit with these params tries, in order, into models[GPUML_GMM_N_MODELS];
 * returns their number. With n_models = 0, mclust's rule: all 14 in the order above;
 * only the six spherical and diagonal ones when n <= d; EII and VII (mclust's E and V)
 * when d = 1. */
int64_t gpuml_gmm_models_tried(int64_t n, int64_t d, const gpuml_gmm_params *params,
                               gpuml_gmm_covariance *models);

/* A fitted mixture. The arrays are the caller's, sized for the largest G that the
 * model may hold; the first G components are meaningful. Column-major, as mclust
 * holds them: component k has weight weights[k], mean means[0 .. d-1 + k d] and
 * covariance covariances[k d d .. (k + 1) d d - 1] (a full d x d matrix for every
 * model). */
typedef struct {
  gpuml_gmm_covariance covariance; /* the model */
  int64_t G, d;
  double *weights;       /* G: mixing proportions, summing to 1 */
  double *means;         /* d x G */
  double *covariances;   /* d x d x G, reg included */
  double loglik;         /* out (fit): the log-likelihood of the data under the model */
  int64_t n_iter;        /* out (fit): EM iterations run */
  int converged;         /* out (fit): 1 when tol was met before max_iter */
  double seconds_em;     /* out (fit): wall-clock seconds of those iterations (the start,
                            the data's upload and the other fits of a sweep not included) */
} gpuml_gmm_model;

/*
 * Fits Gaussian mixtures by EM (fp64 on both backends) for each G in params->G and
 * each model tried (gpuml_gmm_models_tried), and keeps the one of largest BIC (ties:
 * the earlier model, then the earlier G). Each fit starts from params->init:
 *  - "hc": the partitions of a model-based agglomerative clustering (VVV criterion,
 *    on SVD-scaled data, of at most 2,000 rows chosen deterministically; quantile
 *    classes when d = 1), computed once for all G and models; the model's M-step on
 *    those rows gives the starting parameters. Its cost grows as d^2 to d^3 per
 *    merge: above d = 100 the fits start from k-means++ instead;
 *  - "kmeans++": greedy k-means++ centres drawn with opt->seed (the same on both
 *    backends; a given G gives the same fit whatever else is in the list).
 * With "hc" the best fits are then refined: the 3 best are fitted again from the other
 * best models' partitions (at their G), and every G of the best models from a k-means++
 * start of a fixed seed; a cell keeps the better fit (hierarchical starts can leave a
 * whole G far below its optimum).
 * Further starts (n_init > 1) are k-means++ draws; the fit of largest loglik is kept.
 * A component left with less than one point's worth of responsibility, or whose
 * covariance is not positive definite even after reg, is re-seeded at the
 * worst-fitted points; a fit where that keeps happening fails ("gmm:collapse"): that
 * G and model get a NaN BIC and the others go on.
 *   x: n x d data.
 *   model: in: weights, means, covariances allocated for max(G) components; out: the
 *     chosen model (G, d, covariance and all fields).
 *   z: NULL or n x max(G); out: z[i + k n] (k < model->G) = P(component k | x_i).
 *   classification: NULL or n; out: the component of largest z (0-based; ties: the
 *     smaller index). uncertainty: NULL or n; out: 1 - max_k z[i, k].
 *   bic: NULL or nG x (number of models tried), column-major (G down, models across,
 *     as mclustBIC); out: the BIC of each fit (NaN where it could not be fitted).
 * Same data, params, seed and backend give identical results (any thread count).
 */
typedef struct {
  gpuml_run_info run;
} gpuml_gmm_result;

/* The checks of gpuml_gmm_fit() that need no data (sizes, G, the parameters, options), so
 * that a front end can refuse a call before it allocates; *gmax (may be NULL) receives
 * the largest G, the number of components the model's arrays and z must hold. */
gpuml_status gpuml_gmm_check(int64_t n, int64_t d, const gpuml_gmm_params *params,
                             const gpuml_options *opt, int64_t *gmax);

gpuml_status gpuml_gmm_fit(const double *x, int64_t n, int64_t d,
                           const gpuml_gmm_params *params, gpuml_gmm_model *model,
                           double *z, int64_t *classification, double *uncertainty,
                           double *bic, const gpuml_options *opt, gpuml_gmm_result *result);

/* gpuml_gmm_fit as a function of a context (as gpuml_dpc_fit_fn: a fit of one process, or
 * over MPI ranks by gpuml_mpi_gmm_fit_comm); gpuml_gmm_fit_here ignores ctx. */
typedef gpuml_status (*gpuml_gmm_fit_fn)(void *ctx, const double *x, int64_t n, int64_t d,
                                         const gpuml_gmm_params *params,
                                         gpuml_gmm_model *model, double *z,
                                         int64_t *classification, double *uncertainty,
                                         double *bic, const gpuml_options *opt,
                                         gpuml_gmm_result *result);
gpuml_status gpuml_gmm_fit_here(void *ctx, const double *x, int64_t n, int64_t d,
                                const gpuml_gmm_params *params, gpuml_gmm_model *model,
                                double *z, int64_t *classification, double *uncertainty,
                                double *bic, const gpuml_options *opt,
                                gpuml_gmm_result *result);

/*
 * Posterior probabilities of a fitted model for new data x (m x d, d = model->d).
 *   z: NULL or m x model->G; classification, uncertainty: NULL or m (as in the fit).
 */
gpuml_status gpuml_gmm_predict(const gpuml_gmm_model *model, const double *x, int64_t m,
                               double *z, int64_t *classification, double *uncertainty,
                               const gpuml_options *opt, gpuml_gmm_result *result);

#ifdef __cplusplus
}
#endif

#endif /* GPUML_H */
