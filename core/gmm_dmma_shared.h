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
 * On sm_90 (Hopper) the kernels use mma.sync.aligned.m16n8k8.row.col.f64 instead (PTX
 * ISA 7.8), four times the work of an m8n8k4 per instruction ("wide" below): D (16 x 8) =
 * A (16 x 8) B (8 x 8) + C, where lane 4 g + t holds a0 = A[g][t], a1 = A[g + 8][t],
 * a2 = A[g][t + 4], a3 = A[g + 8][t + 4]; b0 = B[t][g], b1 = B[t + 4][g]; c0 = C[g][2t],
 * c1 = C[g][2t + 1], c2 = C[g + 8][2t], c3 = C[g + 8][2t + 1] (D likewise). The host
 * takes the layout the device's code was built with (its PTX version, 90 or later:
 * wide), so that the packing and the grids match the kernels.
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
 * column block and 4 rows and feeds it to every block of its row and column.
 *
 * Wide E-step: tiles of 16 rows; k-step s covers the input columns 8 s .. 8 s + 7, so
 * output column block cb takes the steps s = 0 .. cb. A = X[16 rows][8 s ..]: the lane
 * holds X[g][8 s + t], X[g + 8][8 s + t], X[g][8 s + t + 4], X[g + 8][8 s + t + 4];
 * B = U_k[8 s ..][8 cb ..]: the lane holds U_k[8 s + t][8 cb + g] and
 * U_k[8 s + t + 4][8 cb + g], packed as fragments of 64 values (lane-major pairs, one
 * 16-byte shared-memory load per lane). The accumulator starts at -m_k, so that D is
 * y - m_k for rows g (c0, c1) and g + 8 (c2, c3).
 *
 * Wide scatter: 8 rows at a time; the blocks of S_k are 16 x 8: rows 16 p .. 16 p + 15
 * (column blocks 2 p and 2 p + 1 of W), columns 8 cb .. 8 cb + 7, for 2 p <= cb (the
 * diagonal's lower half is computed and not written). A = W[8 rows][16 p ..]': the lane
 * holds W[t][16 p + g], W[t][16 p + 8 + g], W[t + 4][16 p + g], W[t + 4][16 p + 8 + g];
 * B = W[8 rows][8 cb ..]: W[t][8 cb + g], W[t + 4][8 cb + g]. So a lane loads two values
 * (rows t and t + 4) per column block of 8 and feeds them to every block. */
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
/* Wide E-step: tiles of 16 rows, GM_DMMA_WIDE_ESTEP_TILES a warp, blocks of
 * GM_DMMA_WIDE_ESTEP_WARPS warps (two blocks an SM at up to 255 registers, so that one
 * block's loads of its rows and final normalisation overlap the other's products). */
#define GM_DMMA_WIDE_ESTEP_TILES 2
#define GM_DMMA_WIDE_ESTEP_WARPS 4
#define GM_DMMA_WIDE_ESTEP_ROWS (GM_DMMA_WIDE_ESTEP_WARPS * GM_DMMA_WIDE_ESTEP_TILES * 16)
/* Scatter: rows staged in shared memory at a time (GM_DMMA_STAGES buffers), and the leading
 * dimension of a staged column: 36 = 4 mod 16, so that the 16 lanes of a half-warp,
 * which read rows 4 q + t of columns 8 b + g, hit 16 different 8-byte banks. */
#define GM_DMMA_STAGE_ROWS 32
#define GM_DMMA_STAGE_LD (GM_DMMA_STAGE_ROWS + 4)
/* Scatter: stages in the ring of shared-memory buffers (GM_DMMA_STAGES - 1 in flight
 * while one is multiplied). */
#define GM_DMMA_STAGES 4
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

/* Wide layout: fragment (cb, s), s <= cb, at 64 gm_dmma_wide_fragment(cb, s); as many
 * values in all as the narrow one (32 nb (nb + 1)), so the means and the constant sit at
 * the same places. */
GM_DMMA_HD int gm_dmma_wide_fragment(int cb, int s) { return cb * (cb + 1) / 2 + s; }

/* The entry of U_k at packed position r (< gm_dmma_means_at(nb)) of the wide layout. */
GM_DMMA_HD void gm_dmma_wide_factor_entry(int r, int *a, int *j) {
  const int f = r / 64, lane = (r % 64) / 2, h = r % 2;
  int cb = 0;
  while ((cb + 1) * (cb + 2) / 2 <= f) cb++;
  const int s = f - cb * (cb + 1) / 2;
  *a = 8 * s + gm_dmma_thread_of(lane) + 4 * h;
  *j = 8 * cb + gm_dmma_group_of(lane);
}

/* Value r (< gm_dmma_component_doubles(nb)) of component k's packed factor, narrow
 * (wide = 0) or wide layout, from the inverse factors U (d x d x K), m (d x K) and c (K):
 * U's lower triangle is never read (zero in the package whatever it holds). */
GM_DMMA_HD double gm_dmma_packed_value(int r, int64_t k, const double *U, const double *m,
                                       const double *c, int64_t d, int nb, int wide) {
  if (r < gm_dmma_means_at(nb)) {
    int a = 0, j = 0;
    if (wide) gm_dmma_wide_factor_entry(r, &a, &j);
    else gm_dmma_factor_entry(r, &a, &j);
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

/* Wide scatter: the accumulator of the 16 x 8 block (p, cb), 2 p <= cb: the blocks of
 * column blocks c < cb come first (c / 2 + 1 each). */
GM_DMMA_HD int gm_dmma_wide_block(int p, int cb) {
  return cb + (cb % 2 == 0 ? (cb / 2) * (cb / 2 - 1) : (cb / 2) * (cb / 2)) + p;
}
GM_DMMA_HD int gm_dmma_wide_blocks(int nb) { return gm_dmma_wide_block(0, nb); }

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
