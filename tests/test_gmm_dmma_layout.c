#define _POSIX_C_SOURCE 200809L /* clock_gettime in check.h */
/* The index arithmetic of the mixtures' tensor-core kernels (kernels/gmm.cu:
 * estep_dmma_kernel, scatter_dmma_kernel; core/gmm_dmma_shared.h), emulated on the host:
 * a warp of 32 lanes and the fp64 instructions mma.sync.m8n8k4.row.col (sm_80) and
 * mma.sync.m16n8k8.row.col (sm_90, "wide") as PTX defines their fragments, driven as the kernels drive it (the same packing, staging, loops and
 * lane reductions), against plain loops. It catches layout mistakes without a GPU; it
 * says nothing of the hardware's rounding, timing or synchronisation. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "gmm_dmma_shared.h"

static uint64_t rng_state = 7;
static double uniform(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}

/* The instruction for one warp: acc (D = A B + C) with lane 4 g + t holding A[g][t],
 * B[t][g], C[g][2 t] and C[g][2 t + 1]; written from PTX's description, not from the
 * header's helpers, so that the two are checked against each other. */
static void warp_mma(double acc[32][2], const double a[32], const double b[32]) {
  double A[8][4], B[4][8], C[8][8];
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    A[g][t] = a[lane];
    B[t][g] = b[lane];
    C[g][2 * t] = acc[lane][0];
    C[g][2 * t + 1] = acc[lane][1];
  }
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; h++) {
      double s = C[g][2 * t + h];
      for (int kk = 0; kk < 4; kk++) s += A[g][kk] * B[kk][2 * t + h];
      acc[lane][h] = s;
    }
  }
}

/* mma.sync.m16n8k8.row.col.f64 (sm_90, the "wide" layout) for one warp: lane 4 g + t holds
 * a0 = A[g][t], a1 = A[g + 8][t], a2 = A[g][t + 4], a3 = A[g + 8][t + 4] (A 16 x 8);
 * b0 = B[t][g], b1 = B[t + 4][g] (B 8 x 8); c0 = C[g][2 t], c1 = C[g][2 t + 1],
 * c2 = C[g + 8][2 t], c3 = C[g + 8][2 t + 1] (C 16 x 8), as the PTX ISA's tables give
 * them. */
static void warp_mma_wide(double acc[32][4], const double a[32][4], const double b[32][2]) {
  double A[16][8], B[8][8], C[16][8];
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    A[g][t] = a[lane][0];
    A[g + 8][t] = a[lane][1];
    A[g][t + 4] = a[lane][2];
    A[g + 8][t + 4] = a[lane][3];
    B[t][g] = b[lane][0];
    B[t + 4][g] = b[lane][1];
    C[g][2 * t] = acc[lane][0];
    C[g][2 * t + 1] = acc[lane][1];
    C[g + 8][2 * t] = acc[lane][2];
    C[g + 8][2 * t + 1] = acc[lane][3];
  }
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 4; h++) {
      const int row = g + 8 * (h >> 1), col = 2 * t + (h & 1);
      double s = C[row][col];
      for (int kk = 0; kk < 8; kk++) s += A[row][kk] * B[kk][col];
      acc[lane][h] = s;
    }
  }
}

/* The rows n x d of K components: U upper triangular with a nonzero lower triangle
 * (which the package must ignore), m, c. */
typedef struct {
  int64_t n, d, K;
  double *X, *U, *m, *c, *z, *mu;
} problem;

static problem make_problem(int64_t n, int64_t d, int64_t K) {
  problem p = {n, d, K, NULL, NULL, NULL, NULL, NULL, NULL};
  p.X = malloc(sizeof(double) * n * d);
  p.U = malloc(sizeof(double) * d * d * K);
  p.m = malloc(sizeof(double) * d * K);
  p.c = malloc(sizeof(double) * K);
  p.z = malloc(sizeof(double) * n * K);
  p.mu = malloc(sizeof(double) * d * K);
  for (int64_t i = 0; i < n * d; i++) p.X[i] = 4 * uniform() - 2;
  for (int64_t i = 0; i < d * d * K; i++) p.U[i] = uniform() - 0.5;
  for (int64_t i = 0; i < d * K; i++) p.m[i] = uniform() - 0.5;
  for (int64_t i = 0; i < d * K; i++) p.mu[i] = uniform() - 0.5;
  for (int64_t k = 0; k < K; k++) p.c[k] = -3 * uniform();
  for (int64_t i = 0; i < n * K; i++) p.z[i] = uniform() < 0.2 ? 0.0 : uniform();
  return p;
}

static void free_problem(problem *p) {
  free(p->X);
  free(p->U);
  free(p->m);
  free(p->c);
  free(p->z);
  free(p->mu);
}

/* estep_dmma_kernel's log-probabilities (before the normalisation), by blocks and warps
 * as the grid runs them; out n x K (ld n). */
static void emulate_estep(const problem *p, const double *packed, int nb, double *out) {
  const int per = gm_dmma_component_doubles(nb), steps = 2 * nb;
  enum { kTiles = GM_DMMA_ESTEP_TILES };
  static double xa[kTiles][2 * GM_DMMA_MAX_BLOCKS][32];
  const int64_t blocks = (p->n + GM_DMMA_ESTEP_ROWS - 1) / GM_DMMA_ESTEP_ROWS;
  for (int64_t blk = 0; blk < blocks; blk++)
    for (int warp = 0; warp < GM_DMMA_WARPS; warp++) {
      const int64_t w0 = blk * GM_DMMA_ESTEP_ROWS + (int64_t)warp * kTiles * 8;
      for (int lane = 0; lane < 32; lane++) {
        const int g = gm_dmma_group_of(lane), t = gm_dmma_thread_of(lane);
        for (int tile = 0; tile < kTiles; tile++)
          for (int s = 0; s < steps; s++) {
            const int64_t i = w0 + 8 * tile + g, a = 4 * s + t;
            xa[tile][s][lane] = i < p->n && a < p->d ? p->X[i + a * p->n] : 0.0;
          }
      }
      for (int64_t k = 0; k < p->K; k++) {
        const double *f = packed + k * per;  // what stage_factor copies to shared memory
        double sum[kTiles][32] = {{0}};
        for (int cb = 0; cb < nb; cb++) {
          double y[kTiles][32][2];
          memset(y, 0, sizeof y);
          for (int s = 0; s < 2 * cb + 2; s++) {
            double b[32];
            for (int lane = 0; lane < 32; lane++) b[lane] = f[32 * gm_dmma_fragment(cb, s) + lane];
            for (int tile = 0; tile < kTiles; tile++) warp_mma(y[tile], xa[tile][s], b);
          }
          for (int lane = 0; lane < 32; lane++) {
            const int t = gm_dmma_thread_of(lane);
            const double m0 = f[gm_dmma_means_at(nb) + 8 * cb + 2 * t];
            const double m1 = f[gm_dmma_means_at(nb) + 8 * cb + 2 * t + 1];
            for (int tile = 0; tile < kTiles; tile++) {
              const double v0 = y[tile][lane][0] - m0, v1 = y[tile][lane][1] - m1;
              sum[tile][lane] += v0 * v0 + v1 * v1;
            }
          }
        }
        const double ck = f[gm_dmma_constant_at(nb)];
        for (int tile = 0; tile < kTiles; tile++) {
          double s1[32], s2[32];  // the two __shfl_xor_sync steps
          for (int lane = 0; lane < 32; lane++) s1[lane] = sum[tile][lane] + sum[tile][lane ^ 1];
          for (int lane = 0; lane < 32; lane++) s2[lane] = s1[lane] + s1[lane ^ 2];
          for (int lane = 0; lane < 32; lane++) {
            const int64_t i = w0 + 8 * tile + gm_dmma_group_of(lane);
            if (gm_dmma_thread_of(lane) == 0 && i < p->n) out[i + k * p->n] = ck - 0.5 * s2[lane];
          }
        }
      }
    }
}

/* The same for the wide (sm_90) E-step: blocks of GM_DMMA_WIDE_ESTEP_WARPS warps, each
 * GM_DMMA_WIDE_ESTEP_TILES tiles of 16 rows, k-steps of 8 columns, the accumulator
 * started at -m_k. */
static void emulate_estep_wide(const problem *p, const double *packed, int nb, double *out) {
  const int per = gm_dmma_component_doubles(nb);
  enum { kTiles = GM_DMMA_WIDE_ESTEP_TILES };
  static double xa[kTiles][GM_DMMA_MAX_BLOCKS][32][4];
  const int64_t blocks = (p->n + GM_DMMA_WIDE_ESTEP_ROWS - 1) / GM_DMMA_WIDE_ESTEP_ROWS;
  for (int64_t blk = 0; blk < blocks; blk++)
    for (int warp = 0; warp < GM_DMMA_WIDE_ESTEP_WARPS; warp++) {
      const int64_t w0 = blk * GM_DMMA_WIDE_ESTEP_ROWS + (int64_t)warp * kTiles * 16;
      for (int lane = 0; lane < 32; lane++) {
        const int g = gm_dmma_group_of(lane), t = gm_dmma_thread_of(lane);
        for (int tile = 0; tile < kTiles; tile++)
          for (int s = 0; s < nb; s++)
            for (int h = 0; h < 4; h++) {
              const int64_t i = w0 + 16 * tile + g + 8 * (h & 1), a = 8 * s + t + 4 * (h >> 1);
              xa[tile][s][lane][h] = i < p->n && a < p->d ? p->X[i + a * p->n] : 0.0;
            }
      }
      for (int64_t k = 0; k < p->K; k++) {
        const double *f = packed + k * per;
        double lo[kTiles][32] = {{0}}, hi[kTiles][32] = {{0}};
        for (int cb = 0; cb < nb; cb++) {
          double y[kTiles][32][4];
          for (int lane = 0; lane < 32; lane++) {
            const int t = gm_dmma_thread_of(lane);
            const double m0 = f[gm_dmma_means_at(nb) + 8 * cb + 2 * t];
            const double m1 = f[gm_dmma_means_at(nb) + 8 * cb + 2 * t + 1];
            for (int tile = 0; tile < kTiles; tile++) {
              y[tile][lane][0] = -m0;
              y[tile][lane][1] = -m1;
              y[tile][lane][2] = -m0;
              y[tile][lane][3] = -m1;
            }
          }
          for (int s = 0; s <= cb; s++) {
            double b[32][2];
            for (int lane = 0; lane < 32; lane++)
              for (int h = 0; h < 2; h++)
                b[lane][h] = f[64 * gm_dmma_wide_fragment(cb, s) + 2 * lane + h];
            for (int tile = 0; tile < kTiles; tile++) warp_mma_wide(y[tile], xa[tile][s], b);
          }
          for (int lane = 0; lane < 32; lane++)
            for (int tile = 0; tile < kTiles; tile++) {
              const double *v = y[tile][lane];
              lo[tile][lane] += v[0] * v[0] + v[1] * v[1];
              hi[tile][lane] += v[2] * v[2] + v[3] * v[3];
            }
        }
        const double ck = f[gm_dmma_constant_at(nb)];
        for (int tile = 0; tile < kTiles; tile++) {
          double l1[32], h1[32], l2[32], h2[32];  // the __shfl_xor_sync steps
          for (int lane = 0; lane < 32; lane++) {
            l1[lane] = lo[tile][lane] + lo[tile][lane ^ 1];
            h1[lane] = hi[tile][lane] + hi[tile][lane ^ 1];
          }
          for (int lane = 0; lane < 32; lane++) {
            l2[lane] = l1[lane] + l1[lane ^ 2];
            h2[lane] = h1[lane] + h1[lane ^ 2];
          }
          for (int lane = 0; lane < 32; lane++) {
            const int t = gm_dmma_thread_of(lane);
            const int64_t i = w0 + 16 * tile + gm_dmma_group_of(lane) + (t == 1 ? 8 : 0);
            if (t < 2 && i < p->n) out[i + k * p->n] = ck - 0.5 * (t == 0 ? l2[lane] : h2[lane]);
          }
        }
      }
    }
}

/* Plain c_k - |x U_k - m_k|^2 / 2 with the upper triangle of U_k. */
static double plain_logprob(const problem *p, int64_t i, int64_t k) {
  const int64_t d = p->d;
  double s = 0;
  for (int64_t j = 0; j < d; j++) {
    double y = 0;
    for (int64_t a = 0; a <= j; a++) y += p->X[i + a * p->n] * p->U[k * d * d + a + j * d];
    const double v = y - p->m[j + k * d];
    s += v * v;
  }
  return p->c[k] - 0.5 * s;
}

static void check_estep(int64_t n, int64_t d, int64_t K, int wide) {
  problem p = make_problem(n, d, K);
  const int nb = gm_dmma_blocks(d), per = gm_dmma_component_doubles(nb);
  CHECK(per % 2 == 0, "d = %lld: a component's package is an even count of doubles", (long long)d);
  double *packed = malloc(sizeof(double) * per * K);
  for (int64_t k = 0; k < K; k++)  /* pack_dmma_kernel */
    for (int r = 0; r < per; r++)
      packed[k * per + r] = gm_dmma_packed_value(r, k, p.U, p.m, p.c, d, nb, wide);
  double *out = malloc(sizeof(double) * n * K);
  for (int64_t i = 0; i < n * K; i++) out[i] = NAN;
  if (wide) emulate_estep_wide(&p, packed, nb, out);
  else emulate_estep(&p, packed, nb, out);
  double worst = 0;
  int64_t unset = 0;
  for (int64_t k = 0; k < K; k++)
    for (int64_t i = 0; i < n; i++) {
      const double want = plain_logprob(&p, i, k), got = out[i + k * n];
      if (isnan(got)) unset++;
      const double r = fabs(got - want) / (1 + fabs(want));
      if (r > worst) worst = r;
    }
  CHECK(unset == 0 && worst < 1e-13,
        "E-step%s n = %lld d = %lld K = %lld: every row and component written (%lld not), "
        "largest relative difference %.2e",
        wide ? " (wide)" : "", (long long)n, (long long)d, (long long)K, (long long)unset, worst);
  free(out);
  free(packed);
  free_problem(&p);
}

/* scatter_dmma_kernel's partial sums P (d x d per component and chunk). */
static void emulate_scatter(const problem *p, int64_t chunk, int64_t parts, int nb, int wide,
                            double *P) {
  enum { kRows = GM_DMMA_STAGE_ROWS, kLd = GM_DMMA_STAGE_LD };
  const int kCols = 8 * nb, blocks = gm_dmma_triangle_blocks(nb);
  const int wblocks = gm_dmma_wide_blocks(nb);
  const int64_t n = p->n, d = p->d, K = p->K;
  double *xs = malloc(sizeof(double) * kCols * kLd);
  double zs[GM_DMMA_WARPS * kRows];
  double (*acc)[32][2] = malloc(sizeof(double) * 64 * GM_DMMA_WARPS * blocks);
  double (*wacc)[32][4] = malloc(sizeof(double) * 128 * GM_DMMA_WARPS * wblocks);
  const int64_t groups = (K + GM_DMMA_WARPS - 1) / GM_DMMA_WARPS;
  for (int64_t q = 0; q < parts; q++)
    for (int64_t grp = 0; grp < groups; grp++) {
      const int64_t k0 = grp * GM_DMMA_WARPS, i0 = q * chunk;
      const int64_t i1 = n < i0 + chunk ? n : i0 + chunk;
      memset(acc, 0, sizeof(double) * 64 * GM_DMMA_WARPS * blocks);
      memset(wacc, 0, sizeof(double) * 128 * GM_DMMA_WARPS * wblocks);
      for (int64_t s0 = i0; s0 < i1; s0 += kRows) {
        for (int e = 0; e < kCols * kRows; e++) {  /* stage() */
          const int l = e % kRows, a = e / kRows;
          const int64_t i = s0 + l;
          xs[a * kLd + l] = i < i1 && a < d ? p->X[i + a * n] : 0.0;
        }
        for (int e = 0; e < GM_DMMA_WARPS * kRows; e++) {
          const int l = e % kRows, w = e / kRows;
          const int64_t i = s0 + l;
          zs[e] = i < i1 && k0 + w < K ? p->z[i + (k0 + w) * n] : 0.0;
        }
        for (int warp = 0; warp < GM_DMMA_WARPS; warp++) {
          const int64_t k = k0 + warp;
          if (k >= K) continue;
          const double *zw = zs + warp * kRows;
          for (int r = 0; wide && r < kRows; r += 8) {
            double w[GM_DMMA_MAX_BLOCKS + 1][32][2];
            for (int lane = 0; lane < 32; lane++) {
              const int g = gm_dmma_group_of(lane), t = gm_dmma_thread_of(lane);
              const double root0 = sqrt(zw[r + t]), root1 = sqrt(zw[r + t + 4]);
              for (int b = 0; b < nb; b++) {
                const double mv = 8 * b + g < d ? p->mu[8 * b + g + k * d] : 0.0;
                w[b][lane][0] = root0 * (xs[(8 * b + g) * kLd + r + t] - mv);
                w[b][lane][1] = root1 * (xs[(8 * b + g) * kLd + r + t + 4] - mv);
              }
              w[nb][lane][0] = w[nb][lane][1] = 0.0;
            }
            for (int cb = 0; cb < nb; cb++)
              for (int q2 = 0; 2 * q2 <= cb; q2++) {
                double a[32][4];
                for (int lane = 0; lane < 32; lane++) {
                  a[lane][0] = w[2 * q2][lane][0];
                  a[lane][1] = w[2 * q2 + 1][lane][0];
                  a[lane][2] = w[2 * q2][lane][1];
                  a[lane][3] = w[2 * q2 + 1][lane][1];
                }
                warp_mma_wide(wacc[warp * wblocks + gm_dmma_wide_block(q2, cb)], a, w[cb]);
              }
          }
          for (int r = 0; !wide && r < kRows; r += 4) {
            double w[GM_DMMA_MAX_BLOCKS][32];
            for (int lane = 0; lane < 32; lane++) {
              const int g = gm_dmma_group_of(lane), t = gm_dmma_thread_of(lane);
              const double root = sqrt(zw[r + t]);
              for (int b = 0; b < nb; b++) {
                const double mv = 8 * b + g < d ? p->mu[8 * b + g + k * d] : 0.0;
                w[b][lane] = root * (xs[(8 * b + g) * kLd + r + t] - mv);
              }
            }
            for (int cb = 0; cb < nb; cb++)
              for (int rb = 0; rb <= cb; rb++)
                warp_mma(acc[warp * blocks + gm_dmma_triangle_block(rb, cb)], w[rb], w[cb]);
          }
        }
      }
      for (int warp = 0; warp < GM_DMMA_WARPS; warp++) {
        const int64_t k = k0 + warp;
        if (k >= K) continue;
        double *out = P + (k * parts + q) * d * d;
        for (int lane = 0; wide && lane < 32; lane++) {
          const int g = gm_dmma_group_of(lane), t = gm_dmma_thread_of(lane);
          for (int cb = 0; cb < nb; cb++)
            for (int q2 = 0; 2 * q2 <= cb; q2++)
              for (int h = 0; h < 4; h++) {
                const int64_t a = 16 * q2 + 8 * (h >> 1) + g, b = 8 * cb + 2 * t + (h & 1);
                if (a <= b && b < d) {
                  const double v = wacc[warp * wblocks + gm_dmma_wide_block(q2, cb)][lane][h];
                  out[a + b * d] = v;
                  out[b + a * d] = v;
                }
              }
        }
        for (int lane = 0; !wide && lane < 32; lane++) {
          const int g = gm_dmma_group_of(lane), t = gm_dmma_thread_of(lane);
          for (int cb = 0; cb < nb; cb++)
            for (int rb = 0; rb <= cb; rb++)
              for (int h = 0; h < 2; h++) {
                const int64_t a = 8 * rb + g, b = 8 * cb + 2 * t + h;
                if (a <= b && b < d) {
                  const double v = acc[warp * blocks + gm_dmma_triangle_block(rb, cb)][lane][h];
                  out[a + b * d] = v;
                  out[b + a * d] = v;
                }
              }
        }
      }
    }
  free(wacc);
  free(acc);
  free(xs);
}

static void check_scatter(int64_t n, int64_t d, int64_t K, int64_t slots, int wide) {
  problem p = make_problem(n, d, K);
  const int nb = gm_dmma_blocks(d);
  int64_t chunk = 0, parts = 0;
  gm_dmma_scatter_split(n, K, slots, &chunk, &parts);
  CHECK(chunk % GM_DMMA_STAGE_ROWS == 0 && parts >= 1 && parts <= gm_dmma_parts_max(n) &&
            (parts - 1) * chunk < n && parts * chunk >= n && chunk <= GM_DMMA_CHUNK_ROWS,
        "split of %lld rows, K = %lld, %lld slots: %lld chunks of %lld rows", (long long)n,
        (long long)K, (long long)slots, (long long)parts, (long long)chunk);
  double *P = malloc(sizeof(double) * parts * K * d * d);
  for (int64_t i = 0; i < parts * K * d * d; i++) P[i] = NAN;
  emulate_scatter(&p, chunk, parts, nb, wide, P);
  double worst = 0;
  int64_t unset = 0;
  for (int64_t k = 0; k < K; k++)
    for (int64_t b = 0; b < d; b++)
      for (int64_t a = 0; a < d; a++) {
        double got = 0, want = 0, scale = 0;
        for (int64_t q = 0; q < parts; q++) { /* sum_chunks_kernel */
          const double v = P[(k * parts + q) * d * d + a + b * d];
          if (isnan(v)) unset++;
          got += v;
        }
        for (int64_t i = 0; i < n; i++) {
          const double za = p.z[i + k * n];
          const double t = za * (p.X[i + a * n] - p.mu[a + k * d]) * (p.X[i + b * n] - p.mu[b + k * d]);
          want += t;
          scale += fabs(t);
        }
        const double r = fabs(got - want) / (1 + scale);
        if (r > worst) worst = r;
      }
  CHECK(unset == 0 && worst < 1e-13,
        "scatter%s n = %lld d = %lld K = %lld: all of S_k written (%lld not), largest relative "
        "difference %.2e",
        wide ? " (wide)" : "", (long long)n, (long long)d, (long long)K, (long long)unset, worst);
  free(P);
  free_problem(&p);
}

/* The shared-memory reads of the scatter (rows 4 q + t of columns 8 b + g, leading
 * dimension GM_DMMA_STAGE_LD) are free of bank conflicts: the 16 lanes of each half-warp
 * hit 16 different 8-byte banks. */
static void check_banks(void) {
  int ok = 1;
  for (int b = 0; b < GM_DMMA_MAX_BLOCKS; b++)
    for (int r = 0; r < GM_DMMA_STAGE_ROWS; r += 4)
      for (int half = 0; half < 2; half++) {
        int used[16] = {0};
        for (int lane = 16 * half; lane < 16 * half + 16; lane++) {
          const int word = (8 * b + gm_dmma_group_of(lane)) * GM_DMMA_STAGE_LD + r +
                           gm_dmma_thread_of(lane);
          ok &= !used[word % 16]++;
        }
      }
  CHECK(ok, "scatter: staged rows read without bank conflicts");
}

int main(void) {
  check_banks();
  /* d at the block edges and between them; rows fewer than a warp's, not a multiple of a
   * block's, and more than one block */
  const int64_t ds[] = {1, 3, 8, 13, 50, 64};
  for (int wide = 0; wide < 2; wide++) {
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
      check_estep(5, ds[i], 2, wide);
      check_estep(300, ds[i], 3, wide);
    }
    check_estep(129, 9, 1, wide);
    check_estep(141, 50, 2, wide);
    /* one chunk with a partial stage; several chunks (the last partial) and two groups of
     * components; a split that fills a wave */
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) check_scatter(45, ds[i], 3, 132, wide);
    check_scatter(5000, 13, 9, 132, wide);
    check_scatter(4500, 64, 2, 1, wide);
    check_scatter(9000, 5, 1, 264, wide);
    check_scatter(300, 50, 3, 132, wide);
  }
  /* the wide packing puts every entry of the upper triangle of 8 x 8 blocks once */
  for (int nb = 1; nb <= GM_DMMA_MAX_BLOCKS; nb++) {
    static int seen[GM_DMMA_MAX_D][GM_DMMA_MAX_D];
    memset(seen, 0, sizeof seen);
    int ok = 1;
    for (int r = 0; r < gm_dmma_means_at(nb); r++) {
      int a = 0, j = 0;
      gm_dmma_wide_factor_entry(r, &a, &j);
      ok &= a < 8 * nb && j < 8 * nb && a / 8 <= j / 8 && !seen[a][j]++;
    }
    for (int a = 0; a < 8 * nb; a++)
      for (int j = 0; j < 8 * nb; j++) ok &= seen[a][j] == (a / 8 <= j / 8);
    CHECK(ok, "wide packing of %d column blocks: each block-triangle entry once", nb);
    int count = 0;
    for (int cb = 0; cb < nb; cb++)
      for (int q2 = 0; 2 * q2 <= cb; q2++) ok &= gm_dmma_wide_block(q2, cb) == count++;
    CHECK(ok && count == gm_dmma_wide_blocks(nb), "wide scatter blocks of %d column blocks", nb);
  }
  int64_t chunk = 0, parts = 0;
  gm_dmma_scatter_split(1000000, 16, 132, &chunk, &parts);
  CHECK(parts * 2 <= 4 * 132 && parts * 2 > 3 * 132 && parts * chunk >= 1000000,
        "10^6 rows, 16 components, 132 slots: %lld chunks of %lld rows fill 4 waves",
        (long long)parts, (long long)chunk);
  return check_summary("C");
}
