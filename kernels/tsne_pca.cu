// t-SNE on the GPU, before the optimiser: the perplexity bisection of the conditional
// affinities (core/tsne_shared.h's, one thread per point), their symmetrisation into P
// (a radix sort of the entries and their transposes), and the PCA (cuBLAS; the
// eigenvectors by LAPACK on the host, or by cuSOLVER for a Gram matrix) that reduces the
// data and starts the embedding. A fit from data (gm_cuda_tsne_fit_affinities) keeps the
// kNN lists and P on the device: P goes to the optimiser (kernels/tsne.cu) in its own
// layout without a round trip through the host.
#include <new>
#include "knn_lists.cuh"
#include "shards.h"
#include "tsne_common.cuh"

namespace gm {
namespace {

// ---------------------------------------------------------------------------------------
// Affinities

// `square`: dist holds distances, squared here in place (once: further perplexities
// over the same rows pass false).
__global__ void bisect_kernel(double *__restrict__ dist, int64_t rows, int64_t k,
                              double log_perp, bool square, double *__restrict__ p,
                              double *__restrict__ entropy) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  if (square)
    for (int64_t t = 0; t < k; t++) dist[i + t * rows] *= dist[i + t * rows];
  const double h = gm_tsne_bisect_point(dist + i, rows, k, log_perp, p + i);
  if (entropy) entropy[i] = h;
}


// The multiscale mean, in the host path's order: acc += p per further perplexity, then
// acc /= scales.
__global__ void add_kernel(double *__restrict__ acc, const double *__restrict__ p, int64_t count) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < count) acc[e] += p[e];
}

__global__ void divide_kernel(double *__restrict__ acc, int64_t count, double by) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < count) acc[e] /= by;
}

// Each conditional entry p_{j|i} (e = i + t n of the n x k lists) twice: under the key
// i n + j at e, and under j n + i at nk + e, so that after a stable sort by key the
// entry of row i precedes the transposed one, as the host path adds them.
__global__ void pair_keys_kernel(const int64_t *__restrict__ idx, const double *__restrict__ p,
                                 int64_t n, int64_t nk, int64_t *__restrict__ key,
                                 double *__restrict__ val) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nk) return;
  const int64_t i = e % n, j = idx[e];
  key[e] = i * n + j;
  val[e] = p[e];
  key[nk + e] = j * n + i;
  val[nk + e] = p[e];
}

__global__ void run_heads_kernel(const int64_t *__restrict__ key, int64_t count,
                                 int64_t *__restrict__ head) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < count) head[e] = e == 0 || key[e] != key[e - 1];
}

// One entry of P per run of equal keys (at its rank among the runs, pos): the run's
// values added in order, times scale; the first entry of each row sets row[], the last
// run row[n] (every row has its k neighbours).
template <typename C>
__global__ void merge_runs_kernel(const int64_t *__restrict__ key, const double *__restrict__ val,
                                  const int64_t *__restrict__ pos, int64_t count, int64_t n,
                                  double scale, int64_t *__restrict__ row, C *__restrict__ col,
                                  double *__restrict__ out) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= count || (e > 0 && key[e] == key[e - 1])) return;
  const int64_t kk = key[e], r = kk / n, at = pos[e];
  double v = val[e];
  int64_t f = e + 1;
  for (; f < count && key[f] == kk; f++) v += val[f];
  col[at] = (C)(kk - r * n);
  out[at] = v * scale;
  if (e == 0 || key[e - 1] / n != r) row[r] = at;
  if (f == count) row[n] = at + 1;
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


// ---------------------------------------------------------------------------------------
// P on the device

// The radix sort of P's 2nk entries by key (row n + column < n^2) and the scan of runs.
struct PSortPlan {
  int64_t m = 0;
  int bits = 1;
  size_t sort_bytes = 0, scan_bytes = 0;
};

gpuml_status plan_p_sort(Context &ctx, int64_t n, int64_t k, PSortPlan *plan) {
  plan->m = 2 * n * k;
  while (plan->bits < 62 && (1LL << plan->bits) < n * n) plan->bits++;
  GM_TRY(ctx.check(cub::DeviceRadixSort::SortPairs(nullptr, plan->sort_bytes, (int64_t *)nullptr,
                                                    (int64_t *)nullptr, (double *)nullptr,
                                                    (double *)nullptr, (int)plan->m, 0,
                                                    plan->bits, ctx.stream()),
                   "sizing the sort of P"));
  return ctx.check(cub::DeviceScan::ExclusiveSum(nullptr, plan->scan_bytes, (int64_t *)nullptr,
                                                 (int64_t *)nullptr, (int)plan->m, ctx.stream()),
                   "sizing the scan of P");
}

// Device bytes of build_p beyond the lists: the affinities (and a further perplexity's),
// the entropies, keys and values before and after the sort (the run heads and their
// ranks reuse the first pair), the work spaces, and P (at most 2nk entries of col_bytes
// and 8 bytes, n + 1 row offsets).
size_t p_bytes(const PSortPlan &plan, int64_t n, int64_t k, int64_t scales, size_t col_bytes) {
  const size_t nk = (size_t)n * (size_t)k, m = (size_t)plan.m;
  return nk * 8 * (scales > 1 ? 2 : 1) + (size_t)n * 8 + m * 32 + plan.sort_bytes +
         plan.scan_bytes + ((size_t)n + 1) * 8 + m * (col_bytes + 8) + 4096;
}

// P's arrays: with C = int32_t in the held blocks of a DeviceCsr (the optimiser's
// layout, kept after the call), with C = int64_t in the call's memory (for the host).
template <typename C>
struct PArrays {
  int64_t nnz = 0;
  int64_t *row = nullptr;
  C *col = nullptr;
  double *val = nullptr;
};

// P = (P_cond + P_cond^T) / (2n) from the n x k lists on the device (id: neighbours; dd:
// distances, squared here in place), as gm_tsne_affinities_host() builds it: each row's
// bisection (gm_tsne_bisect_point), the multiscale mean, then every entry under the key
// (i, j) and its transpose under (j, i), a stable radix sort by key (so that within a
// key the row's own entry comes first, as the host's merge adds them) and one entry per
// run of equal keys. entropy (n, host, may be NULL): the entropies of one perplexity.
template <typename C>
gpuml_status build_p(Context &ctx, const PSortPlan &plan, const int64_t *id, double *dd,
                     int64_t n, int64_t k, const double *perplexities, int64_t scales,
                     double *entropy, DeviceCsr *held, PArrays<C> *out) {
  const int64_t nk = n * k, m = plan.m;
  double *pacc = nullptr, *ptmp = nullptr, *hd = nullptr, *val_a = nullptr, *val_b = nullptr;
  int64_t *key_a = nullptr, *key_b = nullptr;
  char *sort_tmp = nullptr, *scan_tmp = nullptr;
  GM_TRY(ctx.alloc(&pacc, (size_t)nk, "the affinities"));
  if (scales > 1) GM_TRY(ctx.alloc(&ptmp, (size_t)nk, "the affinities"));
  GM_TRY(ctx.alloc(&hd, (size_t)n, "the entropies"));
  GM_TRY(ctx.alloc(&key_a, (size_t)m, "P's keys"));
  GM_TRY(ctx.alloc(&key_b, (size_t)m, "P's keys"));
  GM_TRY(ctx.alloc(&val_a, (size_t)m, "P's values"));
  GM_TRY(ctx.alloc(&val_b, (size_t)m, "P's values"));
  GM_TRY(ctx.alloc(&sort_tmp, plan.sort_bytes, "sorting space"));
  GM_TRY(ctx.alloc(&scan_tmp, plan.scan_bytes, "scan space"));
  for (int64_t s = 0; s < scales; s++) {
    bisect_kernel<<<grid_1d(n, 128), 128, 0, ctx.stream()>>>(
        dd, n, k, log(perplexities[s]), s == 0, s == 0 ? pacc : ptmp, hd);
    GM_TRY(ctx.launched("the perplexity bisection"));
    if (s > 0) {
      add_kernel<<<grid_1d(nk, kThreads), kThreads, 0, ctx.stream()>>>(pacc, ptmp, nk);
      GM_TRY(ctx.launched("the multiscale mean"));
    }
  }
  if (scales > 1) {
    divide_kernel<<<grid_1d(nk, kThreads), kThreads, 0, ctx.stream()>>>(pacc, nk, (double)scales);
    GM_TRY(ctx.launched("the multiscale mean"));
  }
  if (entropy && scales == 1)
    GM_TRY(ctx.check(cudaMemcpyAsync(entropy, hd, (size_t)n * 8, cudaMemcpyDeviceToHost,
                                     ctx.stream()), "copying the entropies"));
  pair_keys_kernel<<<grid_1d(nk, kThreads), kThreads, 0, ctx.stream()>>>(id, pacc, n, nk, key_a, val_a);
  GM_TRY(ctx.launched("P's entries"));
  size_t sort_bytes = plan.sort_bytes, scan_bytes = plan.scan_bytes;
  GM_TRY(ctx.check(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, key_a, key_b, val_a,
                                                    val_b, (int)m, 0, plan.bits, ctx.stream()),
                   "sorting P's entries"));
  // the unsorted keys and values are spent: their space takes the runs' heads and ranks
  int64_t *head = key_a, *pos = (int64_t *)val_a;
  run_heads_kernel<<<grid_1d(m, kThreads), kThreads, 0, ctx.stream()>>>(key_b, m, head);
  GM_TRY(ctx.launched("P's runs"));
  GM_TRY(ctx.check(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, head, pos, (int)m,
                                                 ctx.stream()),
                   "ranking P's runs"));
  int64_t last[2];
  GM_TRY(ctx.check(cudaMemcpyAsync(&last[0], pos + m - 1, 8, cudaMemcpyDeviceToHost, ctx.stream()),
                   "counting P's entries"));
  GM_TRY(ctx.check(cudaMemcpyAsync(&last[1], head + m - 1, 8, cudaMemcpyDeviceToHost, ctx.stream()),
                   "counting P's entries"));
  GM_TRY(ctx.sync("counting P's entries"));
  out->nnz = last[0] + last[1];
  if constexpr (sizeof(C) == 4) {
    GM_TRY(ctx.alloc_held(held->row_block, &out->row, (size_t)n + 1, "P (rows)"));
    GM_TRY(ctx.alloc_held(held->col_block, &out->col, (size_t)out->nnz, "P (columns)"));
    GM_TRY(ctx.alloc_held(held->val_block, &out->val, (size_t)out->nnz, "P (values)"));
  } else {
    (void)held;
    GM_TRY(ctx.alloc(&out->row, (size_t)n + 1, "P (rows)"));
    GM_TRY(ctx.alloc(&out->col, (size_t)out->nnz, "P (columns)"));
    GM_TRY(ctx.alloc(&out->val, (size_t)out->nnz, "P (values)"));
  }
  merge_runs_kernel<C><<<grid_1d(m, kThreads), kThreads, 0, ctx.stream()>>>(
      key_b, val_b, pos, m, n, 1.0 / (2.0 * (double)n), out->row, out->col, out->val);
  return ctx.launched("merging P's entries");
}

// P of host lists on the device, back on the host (64-bit columns); *fits = false, and
// nothing done, when its space exceeds the memory budget or the sort's 32-bit count.
gpuml_status affinities_on_device(const int64_t *idx, const double *dist, int64_t n,
                                  int64_t k, const double *perplexities, int64_t scales,
                                  gm_csr *P, double *entropy, const gpuml_options *opt,
                                  bool *fits) {
  *fits = false;
  const int64_t nk = n * k;
  if (2 * nk > INT32_MAX) return GPUML_OK;
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 0));
  PSortPlan plan;
  GM_TRY(plan_p_sort(ctx, n, k, &plan));
  if ((size_t)nk * 16 + p_bytes(plan, n, k, scales, 8) > ctx.budget()) return GPUML_OK;
  *fits = true;
  double *dd = nullptr;
  int64_t *id = nullptr;
  GM_TRY(ctx.alloc(&dd, (size_t)nk, "the neighbour distances"));
  GM_TRY(ctx.alloc(&id, (size_t)nk, "the neighbours"));
  GM_TRY(ctx.check(cudaMemcpyAsync(dd, dist, (size_t)nk * 8, cudaMemcpyHostToDevice, ctx.stream()),
                   "copying the neighbour distances"));
  GM_TRY(ctx.check(cudaMemcpyAsync(id, idx, (size_t)nk * 8, cudaMemcpyHostToDevice, ctx.stream()),
                   "copying the neighbours"));
  PArrays<int64_t> out;
  GM_TRY(build_p(ctx, plan, id, dd, n, k, perplexities, scales, entropy, nullptr, &out));
  P->n = n;
  P->nnz = out.nnz;
  P->row = (int64_t *)gm_alloc((size_t)n + 1, sizeof *P->row);
  P->col = (int64_t *)gm_alloc((size_t)P->nnz, sizeof *P->col);
  P->val = (double *)gm_alloc((size_t)P->nnz, sizeof *P->val);
  if (!P->row || !P->col || !P->val) {
    gm_csr_free(P);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for P",
                   (double)out.nnz * 16 / 1e6);
  }
  gpuml_status st = ctx.check(cudaMemcpyAsync(P->row, out.row, ((size_t)n + 1) * 8,
                                              cudaMemcpyDeviceToHost, ctx.stream()), "copying P");
  if (!st) st = ctx.check(cudaMemcpyAsync(P->col, out.col, (size_t)P->nnz * 8,
                                          cudaMemcpyDeviceToHost, ctx.stream()), "copying P");
  if (!st) st = ctx.check(cudaMemcpyAsync(P->val, out.val, (size_t)P->nnz * 8,
                                          cudaMemcpyDeviceToHost, ctx.stream()), "copying P");
  if (!st) st = ctx.sync("copying P");
  if (st) gm_csr_free(P);
  return st;
}

// P of lists already on the device (held, dd squared in place), kept there in *held;
// *fits = false, and nothing done, when its space exceeds the budget or the sort's count.
gpuml_status resident_affinities(const int64_t *id, double *dd, int64_t n, int64_t k,
                                 const double *perplexities, int64_t scales,
                                 const gpuml_options *opt, DeviceCsr *held, bool *fits) {
  *fits = false;
  if (2 * n * k > INT32_MAX || n > INT32_MAX) return GPUML_OK;
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 0));
  PSortPlan plan;
  GM_TRY(plan_p_sort(ctx, n, k, &plan));
  if (p_bytes(plan, n, k, scales, 4) > ctx.budget()) return GPUML_OK;
  *fits = true;
  PArrays<int32_t> out;
  GM_TRY(build_p(ctx, plan, id, dd, n, k, perplexities, scales, nullptr, held, &out));
  held->n = n;
  held->nnz = out.nnz;
  held->row = out.row;
  held->col = out.col;
  held->val = out.val;
  return ctx.sync("the affinities");
}

}  // namespace
}  // namespace gm

using namespace gm;

extern "C" void gm_cuda_tsne_resident_free(void *resident) {
  delete (DeviceCsr *)resident;  // its held blocks go back to the pool
}

extern "C" gpuml_status gm_cuda_tsne_affinities(const int64_t *idx, const double *dist, int64_t n,
                                               int64_t k, const double *perplexities,
                                               int64_t scales, gm_csr *P, double *entropy,
                                               const gpuml_options *opt) {
  memset(P, 0, sizeof *P);
  bool fits = false;
  GM_TRY(affinities_on_device(idx, dist, n, k, perplexities, scales, P, entropy, opt, &fits));
  if (fits) {
    if (gm_interrupted(opt)) {
      gm_csr_free(P);
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted");
    }
    return GPUML_OK;
  }
  // too large for the budget: the host's symmetrisation (its bisection still on the GPU)
  return gm_tsne_affinities_host(idx, dist, n, k, perplexities, scales, P, entropy, opt);
}

// The search may be split over the devices of opt (knn_self_lists); its lists, P and
// everything after are on the first.
extern "C" gpuml_status gm_cuda_tsne_fit_affinities(const double *x, int64_t n, int64_t d,
                                                   int64_t k, const double *perplexities,
                                                   int64_t scales, gm_csr *P,
                                                   const gpuml_options *all) {
  memset(P, 0, sizeof *P);
  gm_shard_plan plan;
  GM_TRY(gm_shard_plan_make(all, n, &plan));
  gpuml_options first = *all;
  first.device = plan.devices[0];
  first.ndevices = 0;
  const gpuml_options *opt = &first;
  const size_t nk = (size_t)n * (size_t)k;
  HostArray<int64_t> idx;
  HostArray<double> dist;
  {
    HeldBlock idx_block, dist_block;
    bool lists_fit = false, p_fits = false;
    GM_TRY(knn_self_lists(x, n, d, k, all, idx_block, dist_block, &lists_fit));
    if (lists_fit) {
      DeviceCsr *held = new (std::nothrow) DeviceCsr;
      if (!held) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate P's record");
      held->device = opt->device;
      const gpuml_status st =
          resident_affinities((const int64_t *)idx_block.get(), (double *)dist_block.get(), n, k,
                              perplexities, scales, opt, held, &p_fits);
      if (!st && p_fits) {
        P->n = n;
        P->nnz = held->nnz;
        P->resident = held;
        P->resident_free = gm_cuda_tsne_resident_free;
        if (gm_interrupted(opt)) {
          gm_csr_free(P);
          return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted");
        }
        return GPUML_OK;
      }
      delete held;
      if (st) return st;
      // P does not fit beside the lists: they come to the host (their distances not yet
      // squared: resident_affinities touched nothing)
      if (!idx.alloc(nk) || !dist.alloc(nk))
        return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the neighbours",
                       (double)nk * 16 / 1e6);
      Context ctx("tsne:cuda");
      GM_TRY(ctx.init(opt, 0));
      GM_TRY(ctx.check(cudaMemcpyAsync(idx.p, idx_block.get(), nk * 8, cudaMemcpyDeviceToHost,
                                       ctx.stream()), "copying the neighbours"));
      GM_TRY(ctx.check(cudaMemcpyAsync(dist.p, dist_block.get(), nk * 8, cudaMemcpyDeviceToHost,
                                       ctx.stream()), "copying the neighbours"));
      GM_TRY(ctx.sync("copying the neighbours"));
    }
  }
  if (!idx.p) {  // the lists did not fit whole on the device: the search copies them out
    if (!idx.alloc(nk) || !dist.alloc(nk))
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the neighbours",
                     (double)nk * 16 / 1e6);
    const gm_matrix data = {x, n, d, GM_F64};
    GM_TRY(gm_cuda_knn(&data, nullptr, k, idx.p, dist.p, opt, nullptr));
  }
  return gm_cuda_tsne_affinities(idx.p, dist.p, n, k, perplexities, scales, P, nullptr, opt);
}

extern "C" gpuml_status gm_cuda_tsne_resident_to_host(gm_csr *P, const gpuml_options *opt) {
  const DeviceCsr *held = (const DeviceCsr *)P->resident;
  if (!held) return gm_fail(GPUML_ERR_ARG, "tsne:cuda", "internal: P is not on the device");
  HostArray<int32_t> col32;
  int64_t *row = (int64_t *)gm_alloc((size_t)held->n + 1, sizeof *row);
  int64_t *col = (int64_t *)gm_alloc((size_t)held->nnz, sizeof *col);
  double *val = (double *)gm_alloc((size_t)held->nnz, sizeof *val);
  if (!row || !col || !val || !col32.alloc((size_t)held->nnz)) {
    free(row);
    free(col);
    free(val);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for P",
                   (double)held->nnz * 20 / 1e6);
  }
  Context ctx("tsne:cuda");
  gpuml_status st = ctx.init(opt, 0);
  if (!st) st = ctx.check(cudaMemcpyAsync(row, held->row, ((size_t)held->n + 1) * 8,
                                          cudaMemcpyDeviceToHost, ctx.stream()), "copying P");
  if (!st) st = ctx.check(cudaMemcpyAsync(col32.p, held->col, (size_t)held->nnz * 4,
                                          cudaMemcpyDeviceToHost, ctx.stream()), "copying P");
  if (!st) st = ctx.check(cudaMemcpyAsync(val, held->val, (size_t)held->nnz * 8,
                                          cudaMemcpyDeviceToHost, ctx.stream()), "copying P");
  if (!st) st = ctx.sync("copying P");
  if (st) {
    free(row);
    free(col);
    free(val);
    return st;
  }
  for (int64_t e = 0; e < held->nnz; e++) col[e] = col32.p[e];
  free(P->row);
  free(P->col);
  free(P->val);
  P->row = row;
  P->col = col;
  P->val = val;
  return GPUML_OK;
}

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
    bisect_kernel<<<grid_1d(rn, 128), 128, 0, ctx.stream()>>>(dd, rn, k, log(perplexity), true,
                                                            pd, hd);
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
  if (d > n) {
    // the Gram matrix (up to 46,000 square) is solved on the device
    cusolverDnHandle_t solver = nullptr;
    GM_TRY(ctx.solver(&solver));
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
    GM_TRY(ctx.alloc(&sb, (size_t)n * ncomp, "the scores"));
    pick_components_kernel<<<grid_1d(n * ncomp, kThreads) < 65536u ? grid_1d(n * ncomp, kThreads) : 65536u,
                             kThreads, 0, ctx.stream()>>>(a, m, n, ncomp, w, 1, sb);
    GM_TRY(ctx.launched("picking the components"));
    GM_TRY(ctx.check(cudaMemcpyAsync(scores, sb, (size_t)n * ncomp * 8, cudaMemcpyDeviceToHost, ctx.stream()),
                     "copying the scores"));
  } else {
    // the d x d covariance (d <= n) is solved on the host by LAPACK (its top ncomp
    // eigenvectors only), so that a call creates no cuSOLVER handle and a first call
    // loads none of its kernels
    HostArray<double> ha, hw, hz, hv;
    if (!ha.alloc((size_t)m * m) || !hw.alloc((size_t)m) || !hz.alloc((size_t)m * ncomp) ||
        !hv.alloc((size_t)d * ncomp))
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the PCA",
                     (double)m * (m + 2 * ncomp) * 8 / 1e6);
    GM_TRY(ctx.check(cudaMemcpyAsync(ha.p, a, (size_t)m * m * 8, cudaMemcpyDeviceToHost, ctx.stream()),
                     "copying the covariance"));
    GM_TRY(ctx.sync("the covariance"));
    GM_TRY(gm_tsne_top_eigenvectors(ha.p, M, (int)ncomp, 'L', hw.p, hz.p));
    // eigenvalues ascending: component c is column ncomp - 1 - c
    for (int64_t c = 0; c < ncomp; c++)
      memcpy(hv.p + c * d, hz.p + (ncomp - 1 - c) * d, sizeof(double) * (size_t)d);
    GM_TRY(ctx.alloc(&v, (size_t)d * ncomp, "the rotation"));
    GM_TRY(ctx.alloc(&sb, (size_t)rows * ncomp, "the scores"));
    GM_TRY(ctx.check(cudaMemcpyAsync(v, hv.p, (size_t)d * ncomp * 8, cudaMemcpyHostToDevice,
                                     ctx.stream()), "copying the rotation"));
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
