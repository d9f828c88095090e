// Density peaks on the GPU over all pairs (d > 3, or the Gaussian kernel): the direct
// form (d < 16) and the GEMM form with every pair near a threshold recomputed exactly,
// and their host side. Included by kernels/dpc.cu inside its namespace.
// ---------------------------------------------------------------------------------------
// All pairs, direct form (d < 16): one thread per point, the others through shared
// memory in blocks of kDirectThreads. DIM > 0: d known at compile time.

template <int Mode, int DIM>
__global__ void __launch_bounds__(kDirectThreads)
    direct_pass_kernel(const double *__restrict__ X, int64_t n, int d, PassArgs a, int64_t q0,
                       int64_t q1) {
  extern __shared__ double smem[];
  double *sx = smem;                               // kDirectThreads points, d values each
  double *srho = smem + (size_t)kDirectThreads * d;  // kDelta, kBorder
  int64_t *scl = (int64_t *)(srho + kDirectThreads); // kBorder
  const int dd = DIM > 0 ? DIM : d;
  const int64_t i = q0 + (int64_t)blockIdx.x * kDirectThreads + threadIdx.x;
  const bool active = i < q1;
  double xi[DIM > 0 ? DIM : kDirectMaxDim - 1];
#pragma unroll
  for (int t = 0; t < (DIM > 0 ? DIM : kDirectMaxDim - 1); t++)
    xi[t] = active && t < dd ? X[(size_t)i * dd + t] : 0;
  const double rho_i = (Mode == kDelta || Mode == kBorder) && active ? a.rho[i] : 0;
  const int64_t cl_i = Mode == kBorder && active ? a.cluster[i] : 0;
  int64_t count = 0;
  double acc = Mode == kDelta ? __longlong_as_double(0x7ff0000000000000LL) : 0;
  int64_t best_j = -1;
  for (int64_t j0 = 0; j0 < n; j0 += kDirectThreads) {
    const int64_t jn = n - j0 < kDirectThreads ? n - j0 : kDirectThreads;
    for (int64_t e = threadIdx.x; e < jn * dd; e += kDirectThreads) sx[e] = X[(size_t)j0 * dd + e];
    if (Mode == kDelta || Mode == kBorder)
      if (threadIdx.x < jn) srho[threadIdx.x] = a.rho[j0 + threadIdx.x];
    if (Mode == kBorder)
      if (threadIdx.x < jn) scl[threadIdx.x] = a.cluster[j0 + threadIdx.x];
    __syncthreads();
    if (active) {
      for (int jj = 0; jj < (int)jn; jj++) {
        const int64_t j = j0 + jj;
        if (Mode == kDelta && !above(srho[jj], j, rho_i, i)) continue;
        if (Mode == kBorder && (scl[jj] == cl_i || (rho_i + srho[jj]) / 2 <= acc)) continue;
        if ((Mode == kCount || Mode == kGauss) && j == i) continue;
        const double *xj = sx + (size_t)jj * dd;
        double s = 0;
#pragma unroll
        for (int t = 0; t < (DIM > 0 ? DIM : kDirectMaxDim - 1); t++)
          if (t < dd) {
            double diff = __dsub_rn(xj[t], xi[t]);
            s = __dadd_rn(s, __dmul_rn(diff, diff));
          }
        if (Mode == kCount) count += s < a.cut;
        if (Mode == kGauss && s < a.cut) acc += exp(-s * a.inv_dc2);
        if (Mode == kDelta && (s < acc || (s == acc && j < best_j))) {
          acc = s;
          best_j = j;
        }
        if (Mode == kBorder && s < a.cut) acc = (rho_i + srho[jj]) / 2;
      }
    }
    __syncthreads();
  }
  if (!active) return;
  if (Mode == kCount) a.value[i] = (double)count;
  if (Mode == kGauss || Mode == kBorder) a.value[i] = acc;
  if (Mode == kDelta) {
    a.value[i] = acc;
    a.index[i] = best_j;
  }
}

// Host side of the all-pairs passes.

// The points resident on the device (points-major, plus the centred copy and norms for
// the GEMM form), and the GEMM tile.
struct AllPairs {
  bool gemm = false;
  PointSet<double, double> R;
  Staging<double> sg;
  double *centre = nullptr;
  double *G = nullptr;
  int64_t rt = 0, qt = 0;
};

size_t resident_bytes(int64_t n, int64_t d, bool gemm, int64_t staging_rows) {
  return (size_t)n * point_bytes<double, double>(d, gemm) +
         (size_t)staging_rows * (size_t)d * 8 + (size_t)d * 8 + 4096;
}

// The passes below take the points first .. last - 1 against all n.
template <int Mode>
gpuml_status direct_pass(Context &ctx, const AllPairs &ap, int64_t n, int64_t d,
                         const PassArgs &args, int64_t first, int64_t last,
                         const gpuml_options *opt) {
  const size_t shared = ((size_t)kDirectThreads * (size_t)d + kDirectThreads) * 8 +
                        (Mode == kBorder ? kDirectThreads * 8 : 0);
  const double *X = ap.R.x;
  for (int64_t q0 = first; q0 < last; q0 += kDirectChunk) {
    const int64_t q1 = min64(last, q0 + kDirectChunk);
    const unsigned blocks = grid_1d(q1 - q0, kDirectThreads);
    switch (d) {
      case 1: direct_pass_kernel<Mode, 1><<<blocks, kDirectThreads, shared, ctx.stream()>>>(X, n, 1, args, q0, q1); break;
      case 2: direct_pass_kernel<Mode, 2><<<blocks, kDirectThreads, shared, ctx.stream()>>>(X, n, 2, args, q0, q1); break;
      case 3: direct_pass_kernel<Mode, 3><<<blocks, kDirectThreads, shared, ctx.stream()>>>(X, n, 3, args, q0, q1); break;
      default: direct_pass_kernel<Mode, 0><<<blocks, kDirectThreads, shared, ctx.stream()>>>(X, n, (int)d, args, q0, q1);
    }
    GM_TRY(ctx.launched("density peaks pass (direct)"));
    GM_TRY(ctx.sync("density peaks pass (direct)"));
    GM_TRY(interrupted(ctx, opt));
    gm_progress(opt, stage_of(Mode), q1 - first, last - first);
  }
  return GPUML_OK;
}

template <int Mode>
gpuml_status gemm_pass(Context &ctx, const AllPairs &ap, int64_t n, int64_t d,
                       const PassArgs &args, int64_t first, int64_t last,
                       const gpuml_options *opt) {
  const double slack = GM_DPC_SCREEN_SLACK * (double)(d + 4);
  for (int64_t q0 = first; q0 < last; q0 += ap.qt) {
    const int64_t qn = min64(ap.qt, last - q0);
    for (int64_t r0 = 0; r0 < n; r0 += ap.rt) {
      const int64_t rn = min64(ap.rt, n - r0);
      GM_TRY(gemm_tile<double>(ctx, ap.R.p_at(r0), rn, ap.R.p_at(q0), qn, d, ap.G, rn));
      if (Mode == kDelta)
        gemm_delta_kernel<<<(unsigned)qn, kPassThreads, 0, ctx.stream()>>>(
            ap.G, rn, r0, q0, ap.R.norm, ap.R.x, d, slack, args, r0 == 0);
      else
        gemm_fold_kernel<Mode><<<(unsigned)qn, kPassThreads, 0, ctx.stream()>>>(
            ap.G, rn, r0, q0, ap.R.norm, ap.R.x, d, slack, args, r0 == 0);
      GM_TRY(ctx.launched("density peaks pass (GEMM)"));
    }
    GM_TRY(ctx.sync("density peaks pass (GEMM)"));
    GM_TRY(interrupted(ctx, opt));
    gm_progress(opt, stage_of(Mode), q0 + qn - first, last - first);
  }
  return GPUML_OK;
}

template <int Mode>
gpuml_status all_pairs_pass(Context &ctx, const AllPairs &ap, int64_t n, int64_t d,
                            const PassArgs &args, int64_t first, int64_t last,
                            const gpuml_options *opt) {
  return ap.gemm ? gemm_pass<Mode>(ctx, ap, n, d, args, first, last, opt)
                 : direct_pass<Mode>(ctx, ap, n, d, args, first, last, opt);
}

// Uploads the points; `fixed` is the other device memory the call needs. The GEMM tile
// takes what the budget leaves. The resident points, the centre and the tile in `keep`
// when given (a session's, for later calls), else in the call's Context; the staging
// buffer in the Context either way.
gpuml_status setup_all_pairs(Context &ctx, AllPairs &ap, const double *x, int64_t n, int64_t d,
                             size_t fixed, HeldList *keep) {
  ap.gemm = d >= kGemmMinDim;
  const size_t staging_bytes = ctx.budget() / 16 < ((size_t)32 << 20) ? ctx.budget() / 16
                                                                         : ((size_t)32 << 20);
  ap.sg.rows = staging_rows<double>(staging_bytes, d, n);
  const size_t need = fixed + resident_bytes(n, d, ap.gemm, ap.sg.rows);
  if (ap.gemm) {
    ap.qt = min64(n, kQueryTile);
    ap.rt = min64(n, kRefTile);
    while (need + (size_t)ap.rt * (size_t)ap.qt * 8 > ctx.budget() && ap.rt > 1024) ap.rt /= 2;
    while (need + (size_t)ap.rt * (size_t)ap.qt * 8 > ctx.budget() && ap.qt > 64) ap.qt /= 2;
  }
  const size_t total = need + (ap.gemm ? (size_t)ap.rt * (size_t)ap.qt * 8 : 0);
  if (total > ctx.budget())
    return gm_fail(GPUML_ERR_NOMEM, "dpc:cuda",
                   "density peaks needs %.1f MB of GPU memory for %lld points of dimension "
                   "%lld, more than the budget of %.1f MB: raise gpu_memory_limit, free GPU "
                   "memory or use backend \"cpu\"",
                   (double)total / 1e6, (long long)n, (long long)d, (double)ctx.budget() / 1e6);
  GM_TRY(ctx.alloc(&ap.sg.raw, (size_t)ap.sg.rows * (size_t)d, "the staging buffer"));
  ap.R.host = x;
  ap.R.ld = n;
  ap.R.d = d;
  ap.R.gemm = ap.gemm;
  if (ap.gemm) {
    GM_TRY(keep_alloc(ctx, keep, &ap.centre, (size_t)d, "the centre"));
    ap.R.centre = ap.centre;
  }
  // alloc_points() (kernels/points.cuh) with the arrays where keep says; fp64: no split
  ap.R.cap = n;
  ap.R.first = -1;
  ap.R.count = 0;
  GM_TRY(keep_alloc(ctx, keep, &ap.R.x, (size_t)n * (size_t)d, "points"));
  if (ap.gemm) {
    GM_TRY(keep_alloc(ctx, keep, &ap.R.p, (size_t)n * (size_t)ap.R.width(), "centred points"));
    GM_TRY(keep_alloc(ctx, keep, &ap.R.norm, (size_t)n, "squared norms"));
  }
  if (ap.gemm) {
    GM_TRY(load_resident_with_centre(ctx, ap.sg, ap.R, (const double *)nullptr, 0, ap.centre));
    GM_TRY(keep_alloc(ctx, keep, &ap.G, (size_t)ap.rt * (size_t)ap.qt, "the distance tile"));
  } else {
    GM_TRY(load_points(ctx, ap.sg, ap.R, 0, n));
  }
  return GPUML_OK;
}
