/* Where the values of the full-covariance mixtures' tensor-core (DMMA) kernels sit
 * (kernels/gmm.cu, GPUML_GMM_DMMA): the fragments of the fp64 instruction
 * mma.sync.aligned.m8n8k4.row.col.f64 (sm_80 and later), the packed inverse Cholesky
 * factors of the E-step and the triangle of 8 x 8 blocks of the scatter. Header-only,
 * so that tests/test_gmm_dmma_layout.c checks on the host the same index arithmetic the
 * kernels use.
 *
 * The instruction, for the 32 lanes of a warp, lane = 4 g + t (g = lane >> 2 in 0..7,
 * t = lane & 3 in 0..3): D (8 x 8) = A (8 x 4) B (4 x 8) + C, where the lane holds
 * A[g][t], B[t][g], and C[g][2t], C[g][2t + 1] (D likewise).
 *
 * E-step, component k: Y = X U_k for a tile of 8 rows (U_k = R_k^-1, upper triangular,
 * d x d; X the rows, centred on the column means), then |y - m_k|^2 with m_k = mu_k' U_k,
 * as the GEMM path forms it. Output column block cb (columns 8 cb .. 8 cb + 7) needs
 * the input columns a <= 8 cb + 7 only (U_k is upper triangular): the k-steps
 * s = 0 .. 2 cb + 1 (4 columns each), so the zero 8 x 8 blocks below the diagonal are
 * never multiplied. A = X[rows][4 s .. 4 s + 3]: the lane holds X[g][4 s + t];
 * B = U_k[4 s .. 4 s + 3][8 cb .. 8 cb + 7]: the lane holds U_k[4 s + t][8 cb + g],
 * packed by component as fragments of 32 values in lane order (one conflict-free
 * shared-memory load per fragment).
 *
 * Scatter, component k: S_k = W' W for W = sqrt(z_k) (X - mu_k), 4 rows at a time:
 * block (rb, cb) of S_k, rb <= cb, is A B with A = W[4 rows][8 rb ..]' and
 * B = W[4 rows][8 cb ..]: the lane holds W[4 q + t][8 rb + g] as A and
 * W[4 q + t][8 cb + g] as B, the same value when rb = cb, so a lane loads one value per
 * column block and 4 rows and feeds it to every block of its row and column. */
#ifndef GPUML_GMM_DMMA_SHARED_H
#define GPUML_GMM_DMMA_SHARED_H

#include <stdint.h>

#ifdef __CUDACC__
/* constexpr: the kernels size their shared memory and registers with these */
#define GM_DMMA_HD constexpr __host__ __device__ inline
#else
#define GM_DMMA_HD static inline
#endif

/* The largest d of the kernels: 8 column blocks of 8 (their registers and shared memory
 * grow with the blocks; larger d take the GEMM path). */
#define GM_DMMA_MAX_D 64
#define GM_DMMA_MAX_BLOCKS (GM_DMMA_MAX_D / 8)
/* Warps of a block, both kernels. */
#define GM_DMMA_WARPS 8
/* E-step: 8-row tiles a warp holds in registers (each factor fragment loaded from shared
 * memory feeds this many instructions), and so the rows of a block. */
#define GM_DMMA_ESTEP_TILES 2
#define GM_DMMA_ESTEP_ROWS (GM_DMMA_WARPS * GM_DMMA_ESTEP_TILES * 8)
/* Scatter: rows staged in shared memory at a time (double-buffered), and the leading
 * dimension of a staged column: 36 = 4 mod 16, so that the 16 lanes of a half-warp,
 * which read rows 4 q + t of columns 8 b + g, hit 16 different 8-byte banks. */
#define GM_DMMA_STAGE_ROWS 32
#define GM_DMMA_STAGE_LD (GM_DMMA_STAGE_ROWS + 4)
/* Scatter: the rows of a block's partial sum at most (fewer where that fills the
 * device's last wave of blocks), and at least (the partials' memory is planned for
 * chunks of this many rows). */
#define GM_DMMA_CHUNK_ROWS 4096
#define GM_DMMA_MIN_CHUNK_ROWS 2048

GM_DMMA_HD int gm_dmma_group_of(int lane) { return lane >> 2; }
GM_DMMA_HD int gm_dmma_thread_of(int lane) { return lane & 3; }

/* Column blocks of 8 for d columns. */
GM_DMMA_HD int gm_dmma_blocks(int64_t d) { return (int)((d + 7) / 8); }

/* A component's packed factor: fragment (cb, s), s < 2 cb + 2, at 32 gm_dmma_fragment(cb,
 * s); then m_k (8 nb values, zero past d) at gm_dmma_means_at(nb); then the constant c_k
 * (log w_k + log det U_k - d/2 log 2 pi); padded to an even count of doubles so that
 * every component starts on 16 bytes. */
GM_DMMA_HD int gm_dmma_fragment(int cb, int s) { return cb * (cb + 1) + s; }
GM_DMMA_HD int gm_dmma_fragments(int nb) { return nb * (nb + 1); }
GM_DMMA_HD int gm_dmma_means_at(int nb) { return 32 * gm_dmma_fragments(nb); }
GM_DMMA_HD int gm_dmma_constant_at(int nb) { return gm_dmma_means_at(nb) + 8 * nb; }
GM_DMMA_HD int gm_dmma_component_doubles(int nb) { return gm_dmma_constant_at(nb) + 2; }

/* The entry of U_k at packed position r (< gm_dmma_means_at(nb)): row *a, column *j. */
GM_DMMA_HD void gm_dmma_factor_entry(int r, int *a, int *j) {
  const int f = r / 32, lane = r % 32;
  int cb = 0;
  while ((cb + 1) * (cb + 2) <= f) cb++;
  const int s = f - cb * (cb + 1);
  *a = 4 * s + gm_dmma_thread_of(lane);
  *j = 8 * cb + gm_dmma_group_of(lane);
}

/* Value r (< gm_dmma_component_doubles(nb)) of component k's packed factor, from the
 * inverse factors U (d x d x K), m (d x K) and c (K): U's lower triangle is never read
 * (zero in the package whatever it holds). */
GM_DMMA_HD double gm_dmma_packed_value(int r, int64_t k, const double *U, const double *m,
                                       const double *c, int64_t d, int nb) {
  if (r < gm_dmma_means_at(nb)) {
    int a = 0, j = 0;
    gm_dmma_factor_entry(r, &a, &j);
    return a <= j && j < d ? U[k * d * d + a + j * d] : 0.0;
  }
  if (r < gm_dmma_constant_at(nb)) {
    const int j = r - gm_dmma_means_at(nb);
    return j < d ? m[j + k * d] : 0.0;
  }
  return r == gm_dmma_constant_at(nb) ? c[k] : 0.0;
}

/* Scatter: the accumulator of block (rb, cb), rb <= cb, among the nb (nb + 1) / 2 of the
 * triangle. */
GM_DMMA_HD int gm_dmma_triangle_block(int rb, int cb) { return cb * (cb + 1) / 2 + rb; }
GM_DMMA_HD int gm_dmma_triangle_blocks(int nb) { return nb * (nb + 1) / 2; }

/* Scatter: the partial sums (chunks of rows) of a tile of `rows` rows, at most. */
GM_DMMA_HD int64_t gm_dmma_parts_max(int64_t rows) {
  return (rows + GM_DMMA_MIN_CHUNK_ROWS - 1) / GM_DMMA_MIN_CHUNK_ROWS;
}

/* Scatter: the chunks of a tile of rn >= 1 rows for K components, one block per chunk and
 * GM_DMMA_WARPS components, when the device runs `slots` >= 1 blocks at once: chunks of
 * at most GM_DMMA_CHUNK_ROWS rows, more of them (at most gm_dmma_parts_max(rn)) where
 * that fills the last wave; a chunk a whole number of stages. Fixed by rn, K and the
 * device, so that the partial sums and their order are the same every run. */
GM_DMMA_HD void gm_dmma_scatter_split(int64_t rn, int64_t K, int64_t slots, int64_t *chunk_rows,
                                      int64_t *parts) {
  const int64_t groups = (K + GM_DMMA_WARPS - 1) / GM_DMMA_WARPS;
  int64_t p = (rn + GM_DMMA_CHUNK_ROWS - 1) / GM_DMMA_CHUNK_ROWS;
  int64_t fill = (p * groups + slots - 1) / slots * slots / groups;
  if (fill > gm_dmma_parts_max(rn)) fill = gm_dmma_parts_max(rn);
  if (fill > p) p = fill;
  const int64_t per = (rn + p - 1) / p;
  *chunk_rows = (per + GM_DMMA_STAGE_ROWS - 1) / GM_DMMA_STAGE_ROWS * GM_DMMA_STAGE_ROWS;
  *parts = (rn + *chunk_rows - 1) / *chunk_rows;
}

#endif
