// gm_cuda_knn(): exact k nearest neighbours on the GPU. For d < 16, K <= 32 and the
// data resident on the device, one fused kernel per query tile computes the distances
// and keeps each query's K best (knn_fused.cuh). Otherwise queries are taken in tiles;
// for each query tile the reference points are visited in tiles, each giving a distance
// tile (cuBLAS GEMM + norms for d >= 16, or the direct form computed inside the
// selection kernel for small k and d < 16; in fp32 the GEMM is the split TF32 form of
// points.cuh, fp32-accurate on the tensor cores) that is merged at once into every query's
// running top-K list on the device (select.cuh). The m x n matrix never exists beyond
// one tile. K = k plus up to 16 extra candidates; at the end the candidates' distances
// are recomputed exactly in fp64 from the points as given and sorted by (distance,
// index), which reproduces the CPU backend's answer.
//
// Precision auto, double input, d >= 16 (the default from R and Octave): the candidates
// come from the fp32 (split TF32) GEMM, and each query's list is certified: from a bound
// E on the rounding error of every approximate squared distance (certify_kernel), a list
// whose K-th value exceeds its k-th by more than 2E provably holds the k nearest by the
// exact fp64 distance; the fp64 re-ranking then gives exactly the fp64 answer. The rare
// query whose list cannot be certified (near ties within the fp32 error) is searched
// again with the fp64 GEMM (redo_rows), so the answer is the fp64 one always. Before it,
// every fp32 search in the split layout takes its candidates from the plain TF32 GEMM
// with a wider bound (plain_pass); the queries that pass cannot certify take the split
// pass (redo_rows). With the references resident, that GEMM runs in fp16 (half_pass) and
// writes fp16 tiles (half_tiles: half the tile traffic), each rounding in the bound.
//
// The kNN index (gpuml_knn_index_build) keeps this search's reference set on the device
// (ResidentPoints, loaded once with the data's own centre); its searches skip the upload
// and the preparation, and its fp64 re-checks use an fp64 form made on the device.
//
// Internal knobs (environment) that force the paths the test sizes would not reach:
//   GPUML_CUDA_TILE=N           tiles of at most N rows, data reloaded per tile
//   GPUML_CUDA_REF_TILE=N, GPUML_CUDA_QUERY_TILE=N   tile rows with the data resident
//   GPUML_CUDA_KNN_SELECT=general                    the radix selection for every k
//   GPUML_CUDA_KNN_FUSED=0      the tile-by-tile path where the fused kernel would run
//   GPUML_CUDA_FUSED_SPLIT=N    the fused kernel with the references split every ~N points
//   GPUML_CUDA_KNN_SPLIT=0      plain SGEMM instead of the split TF32 GEMM (fp32)
//   GPUML_CUDA_KNN_PLAIN=0      no plain TF32 candidate pass (the split pass at once)
//   GPUML_CUDA_KNN_RECHECK=all  no list certified: every query of the plain pass searched
//                               again by the split pass, and in precision auto by fp64
//   GPUML_CUDA_KNN_SYMMETRIC=0  the row-by-row path instead of the symmetric schedule of a
//                               one-device self-search (KnnSearch::run_symmetric)
//   GPUML_CUDA_KNN_RERANK=thread  the exact distances a thread per candidate (rerank_kernel)
//                               instead of staged through shared memory
//   GPUML_CUDA_KNN_QUEUE=0      the warp selection's one-pass kernel for the row side
//                               instead of the scan with a queue (select_queued_gemm_kernel)
//   GPUML_CUDA_KNN_HALF=0       the plain pass's GEMM in TF32 instead of fp16 (half_pass)
//   GPUML_CUDA_KNN_HALF_TILE=0  the fp16 GEMM's tiles in fp32 instead of fp16 (half_tiles)
#include <memory>
#include <type_traits>
#include <new>
#include "gpuml_cuda.h"
#include "knn_fused.cuh"
#include "knn_lists.cuh"
#include "knn_screen.cuh"
#include "shards.h"

namespace gm {
namespace {

constexpr int64_t kExtraCandidates = 16;  // GM_KNN_EXTRA_CANDIDATES on the CPU
constexpr int64_t kQueryTileMax = 4096;
constexpr int64_t kRefTileSmall = 16384;  // GEMM tile rows with the warp selection
constexpr int64_t kRefTileLarge = 65536;  // tile rows with the radix selection

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

constexpr int64_t kFusedQueryTile = 131072;  // a query tile's work stays near a second

// Queue slots per reference of a tile for the column side of the symmetric self-search
// (ColumnFeed, select.cuh); a reference offered more takes its whole row of the tile.
constexpr int kColumnSlots = 64;

// ---- The certificate of precision auto ------------------------------------------------
// The largest squared norm of the centred references, as float bits (norms are >= 0, so
// their bits order like their values).
__global__ void max_norm_kernel(const float *__restrict__ norm, int64_t rows,
                                unsigned *__restrict__ max_bits) {
  float m = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows;
       i += (int64_t)gridDim.x * blockDim.x)
    m = fmaxf(m, norm[i]);
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, off));
  if ((threadIdx.x & 31) == 0) atomicMax(max_bits, __float_as_uint(m));
}

// fail[q] = 0 when query q's sorted list of K approximate squared distances (Ld) provably
// holds its k nearest points by the exact fp64 distance, else 1.
//
// The bound. v_q, v_r are the centred points (fp64), a >= |v_q|, b >= |v_r| (from the
// stored norms, rounded up). The GEMM sees y = fl32(v) split as hi + lo (TF32 roundings),
// so |hi + lo - v| <= delta |v| componentwise with delta = 2^-24 + 2^-22 (1 + 2^-24).
// The products hi*hi, hi*lo, lo*hi are exact in fp32 (11-bit significands); their 3d-term
// sum (with the layout's zero padding, exact zero terms that round nothing) is accumulated in fp32 with a unit roundoff taken as 2^-22, twice the 2^-23 of the
// truncating adders that Fasi, Higham, Mikaitis and Pranesh measured in tensor cores
// (2021), whatever the summation order; the dropped lo*lo terms add 2^-22 |y_q||y_r|.
// The stored norms carry 2 delta + 2^-24, the two final fp32 additions 2^-24 each, and
// the fp64 reference distance itself at most (d + 1) 2^-53 of its value. Summed (with
// d < 2^20):
//     |approx - exact| <= E = 2^-22 (5 (a^2 + b^2) + (6 d + 12) a b),
// also for a value that the cancellation guard recomputed in fp64 (error 2^-24 of it).
// With b the largest reference norm, E holds for every reference of the query. A point
// outside the list has approx >= L_K, so exact >= L_K - E; the k listed points with the
// smallest approx have exact <= L_k + E. If L_K - L_k > 2E, no point outside the list
// can be among the k nearest (ties included). A list that holds every point (K = n, or
// n - 1 in a self-search) is complete.
//
// The plain pass (gemm_tile_tf32, plain) forms hi.hi only: |hi - v| <= delta' |v| with
// delta' = 2^-24 + 2^-11 (1 + 2^-24) (fp32, then TF32 rounding to nearest), so its d
// products, exact in fp32, sum to within (2 delta' + delta'^2) a b < 2^-10 (1 + 2^-10) a b
// of v_q.v_r (Cauchy-Schwarz), 2^-9 (1 + 2^-10) a b in the distance (the factor -2). Its
// accumulation (d terms) and norms are covered by E's other terms, which count 3d terms,
// so for the plain pass
//     E' = E + 2^-9 (1 + 2^-10) a b.
// The half pass (gemm_tile_half) forms the same hi.hi products from fp16 copies scaled
// by 2^s_r and 2^s_q (points.cuh, half_operands): exact but for components that fall on
// the fp16 subnormals' grid, |h 2^-s - hi| <= alpha = 2^-25 2^-s each. So its sum is
// within alpha_q |hi_r|_1 + alpha_r |hi_q|_1 + d alpha_q alpha_r of the TF32 sum, with
// |hi|_1 <= sqrt(d) |hi| <= sqrt(d) (1 + 2^-10) |v|; in the distance (the factor -2)
//     E'' = E' + 2 (sqrt(d) (1 + 2^-10) (alpha_q b + alpha_r a) + d alpha_q alpha_r).
// (exp_r, exp_q: the two scales, on the device; NULL when the plain pass was TF32.)
// The half pass's fp16 tiles (half_tiles) round each such value x = -2 hi.hi 2^-u once
// more, to y in fp16 (HalfTileGemm: any split of the sum reduced in fp32 first), and the
// selection reads y 2^u exactly (half_scale_kernel keeps the products normal fp32).
// Whatever the rounding's direction, |y - x| < one fp16 ulp <= 2^-10 |x| + 2^-24 (the
// subnormals' grid), so |x| <= (|y| + 2^-24) / (1 - 2^-10) and
// |y - x| <= 2^-10 (1 + 2^-9) |y| + 2^-24 (1 + 2^-9). With M the largest |y 2^u| that the
// selections read (tile16_max: every value offered to any list passed through them),
//     E16 = E'' + 2^-10 (1 + 2^-9) M + 2^-23 2^u,
// where the worst case M = 2 a b would double the plain pass's term; for points in
// general position M is a fraction of it.
// (tile16: the half tiles' scalars, [2] = 2^u, 0 when unusable; NULL for fp32 tiles.)
__global__ void certify_kernel(const float *__restrict__ Ld, int K, int k, int64_t qn,
                               const float *__restrict__ nq, const unsigned *__restrict__ max_bits,
                               int64_t d, int plain, const int *__restrict__ exp_r,
                               const int *__restrict__ exp_q, const float *__restrict__ tile16,
                               const unsigned *__restrict__ tile16_max, int complete,
                               int recheck_all, unsigned char *__restrict__ fail) {
  const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= qn) return;
  if (recheck_all || !complete) {
    const double up = 1.0 + 0x1p-20;  // the stored norms rounded up to bounds
    const double a = sqrt((double)nq[q]) * up, b = sqrt((double)__uint_as_float(*max_bits)) * up;
    double E = 0x1p-22 * (5.0 * (a * a + b * b) + (6.0 * (double)d + 12.0) * a * b) +
               (plain ? 0x1p-9 * (1.0 + 0x1p-10) * a * b : 0.0);
    bool usable = true;
    if (exp_r) {
      usable = exp_r[0] != kHalfUnusable && exp_q[0] != kHalfUnusable;
      const double alpha_r = ldexp(0x1p-25, -exp_r[0]), alpha_q = ldexp(0x1p-25, -exp_q[0]);
      E += 2.0 * (sqrt((double)d) * (1.0 + 0x1p-10) * (alpha_q * b + alpha_r * a) +
                  (double)d * alpha_q * alpha_r);
    }
    if (tile16) {
      usable = usable && tile16[2] != 0.0f;
      E += 0x1p-10 * (1.0 + 0x1p-9) * (double)__uint_as_float(*tile16_max) +
           0x1p-23 * (double)tile16[2];
    }
    const double gap = (double)Ld[q * K + K - 1] - (double)Ld[q * K + k - 1];
    fail[q] = recheck_all || !usable || !(gap > 2.0 * E);
  } else {
    fail[q] = 0;
  }
}

// Whether a search of In data computed in T is the certified one of precision auto:
// fp32 candidates of double data in the GEMM form (d >= 16; the bound assumes d < 2^20).
template <typename T, typename In>
inline bool certified_search(const gpuml_options *opt, int64_t d) {
  return sizeof(T) == 4 && sizeof(In) == 8 && opt->precision == GPUML_PRECISION_AUTO &&
         d >= kGemmMinDim && d < ((int64_t)1 << 20);
}

// The plain TF32 candidate pass: every fp32 search in the split layout (fp32 data, or
// double data in precision auto or single) first takes candidates from the plain TF32
// GEMM (a third of the split GEMM's work) with a longer list, certified with the plain
// bound. The queries it cannot certify are searched again by the split pass (redo_rows),
// which gives what the search gave before: certified in precision auto (its failures
// then searched in fp64), the fp32 answer otherwise. So every answer is the one the
// split search gives, or the exact one it approximates. GPUML_CUDA_KNN_PLAIN=0 turns the
// pass off (comparisons).
template <typename T, typename In>
inline bool plain_pass(const gpuml_options *opt, int64_t d) {
  const char *knob = getenv("GPUML_CUDA_KNN_PLAIN");
  return sizeof(T) == 4 && (sizeof(In) == 4 || opt->precision != GPUML_PRECISION_DOUBLE) &&
         d >= kGemmMinDim && d < ((int64_t)1 << 20) && !(knob && strcmp(knob, "0") == 0);
}

// The half pass: the plain pass's GEMM from fp16 copies of the same hi values
// (gemm_tile_half), with the references resident and the row-by-row or symmetric
// schedule (not the screen, whose kernel reads the TF32 values). Its bound is the plain
// one plus a subnormal term (certify_kernel). GPUML_CUDA_KNN_HALF=0 keeps the TF32 GEMM.
inline bool half_pass() {
  const char *knob = getenv("GPUML_CUDA_KNN_HALF");
  return !(knob && strcmp(knob, "0") == 0);
}

// The half tiles in fp16 (HalfTileGemm, the selection's TileRead) unless
// GPUML_CUDA_KNN_HALF_TILE=0 (fp32 tiles from the fp16 GEMM, for comparisons): half the
// tile traffic, for a bound wider by about 2^-9 a b (certify_kernel).
inline bool half_tiles() {
  const char *knob = getenv("GPUML_CUDA_KNN_HALF_TILE");
  return !(knob && strcmp(knob, "0") == 0);
}

// The scalars of the half tiles of sets with the scales s_a = e_a[0], s_b = e_b[0]
// (half_operands), scale[0..2] = alpha, beta = 0 and the tile's scale 2^u:
//  - fp32 tiles (!fp16): alpha = -2 2^-(s_a + s_b), which undoes the operands' scales;
//  - fp16 tiles: every |h| component is below 2^15, so |h_a . h_b| < d 2^30 (d <= 2^ld2d)
//    and with u = ld2d + 16 - s_a - s_b the tile's values fl16(-2 hi.hi 2^-u) stay below
//    2^15 (fp16's largest is 65504); alpha = -2 2^-(s_a + s_b + u). u is raised to -100
//    at least (smaller values, nothing overflows), so that the selection's products of
//    fp16 values and 2^u are normal fp32; a u above 111 (products past 2^127) leaves the
//    tiles unusable, as an unusable operand scale does: alpha = 2^u = 0 and every list
//    fails its certificate (certify_kernel).
__global__ void half_scale_kernel(const int *__restrict__ e_a, const int *__restrict__ e_b,
                                  int fp16, int ld2d, float *__restrict__ scale) {
  bool usable = e_a[0] != kHalfUnusable && e_b[0] != kHalfUnusable;
  int u = 0;
  if (usable && fp16) {
    u = ld2d + 16 - e_a[0] - e_b[0];
    if (u < -100) u = -100;
    usable = u <= 111;
  }
  const int e = e_a[0] + e_b[0] + u;  // alpha = -2 2^-e: e in [-120, 120], fp16 [16, 36]
  scale[0] = usable ? -2.0f * __int_as_float((127 - e) << 23) : 0.0f;
  scale[1] = 0.0f;
  scale[2] = usable && fp16 ? __int_as_float((127 + u) << 23) : 0.0f;
}

// The plain pass's extra candidates: its bound is wider (about 2^-9 a b), so the list
// takes up to k more, within the warp selection's kSmallMaxK (k <= kSmallMaxK - 16).
inline int64_t plain_extra(int64_t k) {
  const int64_t room = kSmallMaxK - k;
  const int64_t more = k < room ? k : room;
  return more > kExtraCandidates ? more : kExtraCandidates;
}

// The screened search (knn_screen.cuh): after a first reference tile through the GEMM and
// the selection (the lists and their thresholds), the references are taken in chunks that
// double in length, each screened by the fused kernel against the queries' thresholds;
// the few survivors are queued per query and merged (column_merge with the roles of the
// symmetric search's column side swapped: the queries own the queues). A chunk whose
// queues overflowed is done again through the GEMM tiles. A chunk [s, 2s) of references
// in random order brings about K ln 2 new entries into a list of K, so the queues hold
// 2K + 64. It serves the plain pass with the references resident and d up to
// kScreenMaxDim, where the distance tile's traffic costs more than the fused kernel's
// slower tensor-core use (H100: 2.1x at d = 64; the kernel reaches 110-125 TFLOP/s there,
// 150 at d = 768, where cuBLAS and the tiles did better). A self-search then takes it
// rather than the symmetric schedule (which halves the GEMM but writes the tiles): equal
// at 10^6 x 128, faster at 65,536 x 128 (23.0 against 27.1 ms, two runs). GPUML_CUDA_KNN_SCREEN=0 turns it off, =all lifts the
// dimension limit; GPUML_CUDA_KNN_SCREEN_SLOTS=N and GPUML_CUDA_KNN_SCREEN_CHUNK=N (the
// longest chunk) are for tests.
constexpr int64_t kScreenMaxDim = 128;
constexpr int64_t kScreenChunkMax = (int64_t)1 << 20;
inline int screen_slots(int64_t K) {
  const int64_t knob = env_int("GPUML_CUDA_KNN_SCREEN_SLOTS");
  return knob ? (int)knob : (int)(2 * K + 64);
}

// Whether the screen serves the plain pass at d on this device (the search's plan adds
// its own conditions); where it does, the index keeps no fp16 copy (build_resident).
template <typename In>
inline bool screen_serves(int64_t d, int cc_major) {
  const char *knob = getenv("GPUML_CUDA_KNN_SCREEN");
  if (knob && strcmp(knob, "0") == 0) return false;
  const bool all = knob && strcmp(knob, "all") == 0;
  return (d <= kScreenMaxDim || all) && screen_available<In>(cc_major);
}

template <typename T, typename In>
struct KnnPlan {
  bool small = false, gemm = false, tile = false, resident = false, q_view = false;
  bool fused = false;  // knn_fused.cuh: distances and selection in one kernel (d < 16)
  bool split = false;  // fp32 GEMM form through the split TF32 GEMM (points.cuh)
  bool certify = false;  // each fp32 list certified (precision auto, or the plain pass)
  bool plain = false;    // candidates from the plain TF32 GEMM (plain_pass)
  bool half = false;     // the plain pass's GEMM in fp16 (half_pass)
  bool half_tile = false;  // its tiles in fp16 (half_tiles)
  bool screen = false;   // the plain pass's tiles after the first screened (knn_screen.cuh)
  bool prepared = false;  // the references are a kNN index's resident set (no upload)
  int sm_count = 1;
  int64_t K = 0, rt = 0, qt = 0, raw_rows = 0;
  size_t cub_bytes = 0;
};

constexpr int64_t kFusedBlockQueries = (int64_t)kDirectWarps * kDirectQpw;

// Reference splits of the fused kernel for a query tile of qt: enough blocks for about
// four per multiprocessor, each split at least 2048 points. `per` is the split length.
template <typename T, typename In>
int64_t fused_splits(const KnnPlan<T, In> &p, int64_t n, int64_t qt, int64_t *per) {
  const int64_t qblocks = (qt + kFusedBlockQueries - 1) / kFusedBlockQueries;
  const int64_t want = 4 * (int64_t)p.sm_count;
  int64_t s = (want + qblocks - 1) / qblocks;
  if (s > n / 2048) s = n / 2048;
  // GPUML_CUDA_FUSED_SPLIT=N: splits of about N points (tests of the merge).
  const int64_t forced = env_int("GPUML_CUDA_FUSED_SPLIT");
  if (forced) s = (n + forced - 1) / forced;
  if (s > 65535) s = 65535;
  if (s < 1) s = 1;
  int64_t len = (n + s - 1) / s;
  len = (len + kFusedAlign - 1) / kFusedAlign * kFusedAlign;
  if (per) *per = len;
  return (n + len - 1) / len;
}

template <typename T>
size_t cub_sort_bytes(int64_t items, int64_t segments) {
  static const int64_t dummy[2] = {0, 0};  // only the sizes are asked for
  const int64_t *offsets = dummy;
  size_t a = 0, b = 0, c = 0;
  cub::DeviceSegmentedSort::StableSortPairs<T, int64_t>(nullptr, a, nullptr, nullptr, nullptr,
                                                        nullptr, items, segments, offsets,
                                                        offsets + 1);
  cub::DeviceSegmentedSort::StableSortPairs<int64_t, double>(
      nullptr, b, nullptr, nullptr, nullptr, nullptr, items, segments, offsets, offsets + 1);
  cub::DeviceSegmentedSort::StableSortPairs<double, int64_t>(
      nullptr, c, nullptr, nullptr, nullptr, nullptr, items, segments, offsets, offsets + 1);
  size_t m = a > b ? a : b;
  return m > c ? m : c;
}

// The warp selection of a GEMM tile runs on its own stream, overlapping the next GEMM,
// when the data stay on the device (nothing is reloaded under it).
template <typename T, typename In>
bool overlap_gemm(const KnnPlan<T, In> &p) {
  return p.small && p.gemm && p.resident;
}

template <typename T, typename In>
size_t plan_bytes(const KnnPlan<T, In> &p, int64_t n, int64_t d, int64_t k, bool self,
                  int64_t qt, size_t *cub_bytes) {
  const size_t pb = point_bytes<In, T>(d, p.gemm, p.split) +
                    (p.half ? (size_t)half_width(d) * 2 : 0);
  const size_t K = (size_t)p.K;
  size_t s = (size_t)p.raw_rows * (size_t)d * sizeof(In) + (size_t)d * 4 * 8 + 4096;
  if (!p.prepared) s += (p.resident ? (size_t)n : (size_t)p.rt) * pb;
  // Queries not held in the data set: two tiles (the next one loads during the search)
  // and a second staging buffer.
  if (!(self && p.resident))
    s += 2 * (size_t)qt * pb + (size_t)p.raw_rows * (size_t)d * sizeof(In);
  // Two distance tiles when the selection overlaps the next GEMM.
  if (p.tile) s += (size_t)p.rt * (size_t)qt * sizeof(T) * (overlap_gemm(p) ? 2 : 1);
  s += (size_t)qt * K * (sizeof(T) + 8) * (p.small ? 1 : 2);  // lists (+ compaction)
  if (p.fused) {  // partial lists of the reference splits
    const int64_t splits = fused_splits(p, n, qt, nullptr);
    if (splits > 1) s += (size_t)qt * K * (sizeof(T) + 8) * (size_t)splits;
  }
  s += (size_t)qt * K * 8;                                    // exact distances
  if (p.screen) s += (size_t)qt * ((size_t)screen_slots(p.K) * 8 + 8) + 256;  // the queues
  const bool big_final = p.K > kBitonicMaxK;
  if (big_final) s += (size_t)qt * K * 16;
  s += (size_t)qt * (size_t)k * (8 + sizeof(In));  // outputs
  size_t cb = 0;
  if (big_final) {
    s += ((size_t)qt + 1) * 8;
    cb = cub_sort_bytes<T>((int64_t)qt * p.K, qt);
    s += cb + 256;
  }
  if (cub_bytes) *cub_bytes = cb;
  return s;
}

// Picks the tiles: the largest query tile (up to kQueryTileMax) that fits the budget,
// with the data resident on the device when that leaves room for a good query tile.
template <typename T, typename In>
gpuml_status plan_knn(KnnPlan<T, In> &p, int64_t n, int64_t d, int64_t m, int64_t k, bool self,
                      size_t budget) {
  size_t raw_bytes = budget / 8 < ((size_t)64 << 20) ? budget / 8 : ((size_t)64 << 20);
  if (raw_bytes < (size_t)d * sizeof(In)) raw_bytes = (size_t)d * sizeof(In);
  p.raw_rows = staging_rows<In>(raw_bytes, d, n > m ? n : m);
  const int64_t knob = env_int("GPUML_CUDA_TILE");
  int64_t rt_pref = p.tile ? min64(n, p.small ? kRefTileSmall : kRefTileLarge) : n;
  int64_t qt_pref = min64(m, p.gemm && p.small ? 2 * kQueryTileMax : kQueryTileMax);
  if (p.fused) {
    // At least four query tiles when m allows, so that progress and Ctrl-C are seen
    // during the search; the reference splits keep the GPU busy with smaller tiles.
    const int64_t quarter = (m + 3) / 4, least = 8 * kFusedBlockQueries;
    qt_pref = min64(m, min64(kFusedQueryTile, quarter > least ? quarter : least));
  }
  if (knob) {
    rt_pref = min64(rt_pref, knob);
    qt_pref = min64(qt_pref, knob);
  }
  // Tuning knobs (tile rows of the references / queries), for benchmarks only.
  const int64_t rt_knob = env_int("GPUML_CUDA_REF_TILE"), qt_knob = env_int("GPUML_CUDA_QUERY_TILE");
  if (rt_knob && p.tile) rt_pref = min64(n, rt_knob);
  if (qt_knob) qt_pref = min64(m, qt_knob);
  for (int res = knob && !p.prepared ? 0 : 1; res >= 0; res--) {
    p.resident = res != 0;
    p.rt = p.resident && !p.tile ? n : rt_pref;
    for (;;) {
      // Largest qt <= qt_pref that fits (the bytes grow with qt).
      int64_t lo = 0, hi = qt_pref;
      while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (plan_bytes(p, n, d, k, self, mid, nullptr) <= budget) lo = mid;
        else hi = mid - 1;
      }
      const int64_t qt = lo;
      const int64_t want = min64(m, p.resident ? 256 : 64);
      if (qt >= 1 && (qt >= want || p.prepared || (!p.resident && p.rt <= 32))) {
        // Query tiles of equal length: a short last tile uses the GEMM poorly and costs
        // nearly a full tile's pass over the references.
        const int64_t tiles = (m + qt - 1) / qt;
        p.qt = (m + tiles - 1) / tiles;
        p.q_view = self && p.resident;
        plan_bytes(p, n, d, k, self, p.qt, &p.cub_bytes);
        return GPUML_OK;
      }
      if (p.resident) break;
      if (p.rt <= 1) {
        if (qt >= 1) {
          p.qt = qt;
          p.q_view = false;
          plan_bytes(p, n, d, k, self, qt, &p.cub_bytes);
          return GPUML_OK;
        }
        return gm_fail(GPUML_ERR_NOMEM, "knn:cuda",
                       "the GPU memory budget of %.1f MB is too small for k = %lld with "
                       "%lld-dimensional points; raise gpu_memory_limit or use backend \"cpu\"",
                       (double)budget / 1e6, (long long)k, (long long)d);
      }
      p.rt = p.rt / 2 > 1 ? p.rt / 2 : 1;
    }
  }
  return gm_fail(GPUML_ERR_NOMEM, "knn:cuda", "internal: no kNN plan");
}

// The row side's selection scans and inserts apart (select_queued_gemm_kernel) unless
// GPUML_CUDA_KNN_QUEUE=0 (the one-pass kernel, for comparisons).
inline bool queued_select() {
  const char *knob = getenv("GPUML_CUDA_KNN_QUEUE");
  return !(knob && strcmp(knob, "0") == 0);
}

// A distance tile as the selections read it: T values, or the half pass's fp16 values,
// the device scalar that scales them back (select.cuh, TileRead) and the largest
// |value| read so far (note_tile_max).
template <typename T>
struct TileView {
  const void *g = nullptr;
  const T *scale = nullptr;  // NULL: T values
  unsigned *gmax = nullptr;
};

// feed (may be NULL): the column side of the symmetric search as well (select.cuh,
// ColumnFeed); row_thr (may be NULL): each query's K-th value after the tile.
template <typename T, typename In, int KMAX, typename GT>
gpuml_status launch_small_gemm_of(Context &ctx, cudaStream_t stream, const GT *G,
                                  const T *gscale, unsigned *gmax, int64_t rn, int64_t qn, const T *nr,
                                  const T *nq, const In *xr, const In *xq, int64_t d,
                                  int64_t r0, int64_t q0, int self, T *Ld, int64_t *Li, int K,
                                  int fresh, const ColumnFeed<T> *feed, T *row_thr) {
  constexpr int W = SmallConfig<KMAX>::warps;
  // (32-bit positions in the queued kernel, with room for its last step)
  if (!feed && queued_select() && rn <= INT_MAX - 4096 && rn % TileRead<T, GT>::n == 0 &&
      reinterpret_cast<uintptr_t>(nr) % 16 == 0 && reinterpret_cast<uintptr_t>(G) % 16 == 0) {
    select_queued_gemm_kernel<T, In, KMAX, GT><<<grid_1d(qn, W), W * 32, 0, stream>>>(
        G, gscale, gmax, (int)rn, (int)qn, nr, nq, xr, xq, d, r0, q0, self, Ld, Li, K, fresh,
        row_thr);
    return ctx.launched("kNN selection");
  }
  if (feed)
    select_small_gemm_kernel<T, In, KMAX, true, GT><<<grid_1d(qn, W), W * 32, 0, stream>>>(
        G, gscale, gmax, rn, (int)qn, nr, nq, xr, xq, d, r0, q0, self, Ld, Li, K, fresh, *feed,
        row_thr);
  else
    select_small_gemm_kernel<T, In, KMAX, false, GT><<<grid_1d(qn, W), W * 32, 0, stream>>>(
        G, gscale, gmax, rn, (int)qn, nr, nq, xr, xq, d, r0, q0, self, Ld, Li, K, fresh,
        ColumnFeed<T>{}, row_thr);
  return ctx.launched("kNN selection");
}

template <typename T, typename In, int KMAX>
gpuml_status launch_small_gemm(Context &ctx, cudaStream_t stream, TileView<T> G, int64_t rn,
                               int64_t qn, const T *nr, const T *nq, const In *xr,
                               const In *xq, int64_t d, int64_t r0, int64_t q0, int self,
                               T *Ld, int64_t *Li, int K, int fresh, const ColumnFeed<T> *feed,
                               T *row_thr) {
  if constexpr (sizeof(T) == 4) {
    if (G.scale)
      return launch_small_gemm_of<T, In, KMAX, __half>(
          ctx, stream, static_cast<const __half *>(G.g), G.scale, G.gmax, rn, qn, nr, nq, xr, xq,
          d, r0, q0, self, Ld, Li, K, fresh, feed, row_thr);
  }
  return launch_small_gemm_of<T, In, KMAX, T>(ctx, stream, static_cast<const T *>(G.g), nullptr,
                                              nullptr, rn, qn, nr, nq, xr, xq, d, r0, q0, self, Ld, Li,
                                              K, fresh, feed, row_thr);
}

template <typename T, typename In, int KMAX>
gpuml_status launch_column_merge(Context &ctx, cudaStream_t stream, TileView<T> G, int64_t rn,
                                 int64_t qn, const T *nr, const T *nq, const In *xr,
                                 const In *xq, int64_t d, int64_t q0, const ColumnFeed<T> &feed,
                                 T *Ld, int64_t *Li, int K) {
  constexpr int W = SmallConfig<KMAX>::warps;
  if constexpr (sizeof(T) == 4) {
    if (G.scale) {
      column_merge_kernel<T, In, KMAX, __half><<<grid_1d(rn, W), W * 32, 0, stream>>>(
          static_cast<const __half *>(G.g), G.scale, rn, (int)qn, nr, nq, xr, xq, d, q0, feed,
          Ld, Li, K);
      return ctx.launched("kNN selection (column side)");
    }
  }
  column_merge_kernel<T, In, KMAX, T><<<grid_1d(rn, W), W * 32, 0, stream>>>(
      static_cast<const T *>(G.g), nullptr, rn, (int)qn, nr, nq, xr, xq, d, q0, feed, Ld, Li, K);
  return ctx.launched("kNN selection (column side)");
}

// The column side of a tile of the symmetric search: the references' queued values into
// their lists (Ld, Li: the lists of the tile's first reference on).
template <typename T, typename In>
gpuml_status column_merge(Context &ctx, cudaStream_t stream, TileView<T> G, int64_t rn, int64_t qn,
                          const T *nr, const T *nq, const In *xr, const In *xq, int64_t d,
                          int64_t q0, const ColumnFeed<T> &feed, T *Ld, int64_t *Li, int K) {
  if (K <= 32) return launch_column_merge<T, In, 32>(ctx, stream, G, rn, qn, nr, nq, xr, xq, d, q0, feed, Ld, Li, K);
  if (K <= 64) return launch_column_merge<T, In, 64>(ctx, stream, G, rn, qn, nr, nq, xr, xq, d, q0, feed, Ld, Li, K);
  if (K <= 128) return launch_column_merge<T, In, 128>(ctx, stream, G, rn, qn, nr, nq, xr, xq, d, q0, feed, Ld, Li, K);
  return launch_column_merge<T, In, 256>(ctx, stream, G, rn, qn, nr, nq, xr, xq, d, q0, feed, Ld, Li, K);
}

template <typename T, typename In, int KMAX, int DIM>
gpuml_status launch_small_direct(Context &ctx, cudaStream_t stream, const In *xr, int64_t rn, const In *xq,
                                 int64_t qn, int64_t d, int64_t r0, int64_t q0, int self,
                                 T *Ld, int64_t *Li, int K, int fresh) {
  constexpr int W = SmallConfig<KMAX>::warps;
  select_small_direct_kernel<T, In, KMAX, DIM><<<grid_1d(qn, W), W * 32, 0, stream>>>(
      xr, rn, xq, (int)qn, (int)d, r0, q0, self, Ld, Li, K, fresh);
  return ctx.launched("kNN selection (direct)");
}

template <typename T, typename In, int KMAX>
gpuml_status small_direct_dim(Context &ctx, cudaStream_t stream, const In *xr, int64_t rn, const In *xq, int64_t qn,
                              int64_t d, int64_t r0, int64_t q0, int self, T *Ld, int64_t *Li,
                              int K, int fresh) {
  switch (d) {
    case 1: return launch_small_direct<T, In, KMAX, 1>(ctx, stream, xr, rn, xq, qn, d, r0, q0, self, Ld, Li, K, fresh);
    case 2: return launch_small_direct<T, In, KMAX, 2>(ctx, stream, xr, rn, xq, qn, d, r0, q0, self, Ld, Li, K, fresh);
    case 3: return launch_small_direct<T, In, KMAX, 3>(ctx, stream, xr, rn, xq, qn, d, r0, q0, self, Ld, Li, K, fresh);
    default: return launch_small_direct<T, In, KMAX, 0>(ctx, stream, xr, rn, xq, qn, d, r0, q0, self, Ld, Li, K, fresh);
  }
}

template <typename T, typename In>
gpuml_status small_select(Context &ctx, cudaStream_t stream, bool gemm, TileView<T> G, int64_t rn, int64_t qn,
                          const T *nr, const T *nq, const In *xr, const In *xq, int64_t d,
                          int64_t r0, int64_t q0, int self, T *Ld, int64_t *Li, int K,
                          int fresh, const ColumnFeed<T> *feed = nullptr,
                          T *row_thr = nullptr) {
  if (gemm) {
    if (K <= 32) return launch_small_gemm<T, In, 32>(ctx, stream, G, rn, qn, nr, nq, xr, xq, d, r0, q0, self, Ld, Li, K, fresh, feed, row_thr);
    if (K <= 64) return launch_small_gemm<T, In, 64>(ctx, stream, G, rn, qn, nr, nq, xr, xq, d, r0, q0, self, Ld, Li, K, fresh, feed, row_thr);
    if (K <= 128) return launch_small_gemm<T, In, 128>(ctx, stream, G, rn, qn, nr, nq, xr, xq, d, r0, q0, self, Ld, Li, K, fresh, feed, row_thr);
    return launch_small_gemm<T, In, 256>(ctx, stream, G, rn, qn, nr, nq, xr, xq, d, r0, q0, self, Ld, Li, K, fresh, feed, row_thr);
  }
  if (K <= 32) return small_direct_dim<T, In, 32>(ctx, stream, xr, rn, xq, qn, d, r0, q0, self, Ld, Li, K, fresh);
  if (K <= 64) return small_direct_dim<T, In, 64>(ctx, stream, xr, rn, xq, qn, d, r0, q0, self, Ld, Li, K, fresh);
  if (K <= 128) return small_direct_dim<T, In, 128>(ctx, stream, xr, rn, xq, qn, d, r0, q0, self, Ld, Li, K, fresh);
  return small_direct_dim<T, In, 256>(ctx, stream, xr, rn, xq, qn, d, r0, q0, self, Ld, Li, K, fresh);
}

inline int pow2_at_least(int64_t K) {
  int P = 32;
  while (P < K) P <<= 1;
  return P;
}

// Dynamic shared memory above 48 KB must be allowed per kernel.
template <typename Kernel>
gpuml_status allow_shared(Context &ctx, Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return GPUML_OK;
  return ctx.check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes),
                   "cudaFuncSetAttribute (dynamic shared memory)");
}

template <typename TK>
gpuml_status sort_segments(Context &ctx, const TK *in_d, const int64_t *in_i, int64_t K,
                           int64_t qn, TK *out_d, int64_t *out_i) {
  const int P = pow2_at_least(K);
  const size_t bytes = (size_t)P * (sizeof(TK) + sizeof(int64_t));
  GM_TRY(allow_shared(ctx, sort_segments_kernel<TK>, bytes));
  sort_segments_kernel<TK><<<(unsigned)qn, kSortThreads, bytes, ctx.stream()>>>(
      in_d, in_i, K, P, out_d, out_i);
  return ctx.launched("sorting candidates");
}

// The exact distances of the candidates in data rows [r0, r0 + rn): rerank_staged_kernel,
// or rerank_kernel (a thread per candidate) for K < kRerankStagedMinK and with
// GPUML_CUDA_KNN_RERANK=thread (for comparisons).
template <typename In>
gpuml_status rerank(Context &ctx, const int64_t *Li, int64_t K, int64_t qn, const In *xr,
                    int64_t r0, int64_t rn, const In *xq, int64_t d, double *Rd) {
  const int64_t count = qn * K;
  const bool vec = ((size_t)d * sizeof(In)) % 16 == 0;
  const char *knob = getenv("GPUML_CUDA_KNN_RERANK");
  if (K < kRerankStagedMinK || (knob && strcmp(knob, "thread") == 0)) {
    rerank_kernel<In><<<grid_1d(count, 256), 256, 0, ctx.stream()>>>(Li, K, qn, xr, r0, rn, xq,
                                                                     d, vec, Rd);
  } else {
    const unsigned grid = grid_1d(count, kRerankThreads);
    if (vec)
      rerank_staged_kernel<In, true><<<grid, kRerankThreads, 0, ctx.stream()>>>(
          Li, K, qn, xr, r0, rn, xq, d, Rd);
    else
      rerank_staged_kernel<In, false><<<grid, kRerankThreads, 0, ctx.stream()>>>(
          Li, K, qn, xr, r0, rn, xq, d, Rd);
  }
  return ctx.launched("exact distances");
}

template <typename In>
gpuml_status final_sort(Context &ctx, const double *Rd, const int64_t *Li, int64_t K,
                        int64_t qn, int64_t k, int64_t *out_idx, In *out_dist, int64_t ldo) {
  const int P = pow2_at_least(K);
  const size_t bytes = (size_t)P * 16;
  GM_TRY(allow_shared(ctx, final_sort_kernel<In>, bytes));
  final_sort_kernel<In><<<(unsigned)qn, kSortThreads, bytes, ctx.stream()>>>(
      Rd, Li, K, P, k, out_idx, out_dist, ldo);
  return ctx.launched("sorting the neighbours");
}

template <typename T, typename In, int DIM>
gpuml_status launch_direct_lists(Context &ctx, dim3 grid, const In *xq, int64_t qn, const In *xr,
                                 int64_t n, int64_t d, int64_t q0, int self, int K, int64_t per,
                                 T *Pd, int64_t *Pi) {
  direct_list_kernel<T, In, DIM><<<grid, kDirectWarps * 32, 0, ctx.stream()>>>(
      xq, (int)qn, xr, (int)n, (int)d, 0, q0, self, K, (int)per, Pd, Pi);
  return ctx.launched("kNN search (fused direct form)");
}

// Every query of the tile at q0 against all n resident reference points in one kernel
// (split over `splits` blocks per query block, then merged): each query's K candidates,
// sorted, in Ld/Li.
template <typename T, typename In>
gpuml_status fused_lists(Context &ctx, const PointSet<In, T> &Qs, int64_t q0,
                         int64_t qn, const PointSet<In, T> &R, int64_t n, int64_t d, int self,
                         int K, int64_t splits, int64_t per, T *Pd, int64_t *Pi, T *Ld,
                         int64_t *Li) {
  const In *xq = Qs.x_at(q0), *xr = R.x_at(0);
  dim3 grid((unsigned)((qn + kFusedBlockQueries - 1) / kFusedBlockQueries), (unsigned)splits);
  switch (d) {
    case 1: GM_TRY((launch_direct_lists<T, In, 1>(ctx, grid, xq, qn, xr, n, d, q0, self, K, per, Pd, Pi))); break;
    case 2: GM_TRY((launch_direct_lists<T, In, 2>(ctx, grid, xq, qn, xr, n, d, q0, self, K, per, Pd, Pi))); break;
    case 3: GM_TRY((launch_direct_lists<T, In, 3>(ctx, grid, xq, qn, xr, n, d, q0, self, K, per, Pd, Pi))); break;
    default: GM_TRY((launch_direct_lists<T, In, 0>(ctx, grid, xq, qn, xr, n, d, q0, self, K, per, Pd, Pi))); break;
  }
  if (splits > 1) {
    merge_lists_kernel<T><<<grid_1d(qn * 32, 256), 256, 0, ctx.stream()>>>(
        Pd, Pi, (int)qn, K, (int)splits, Ld, Li);
    GM_TRY(ctx.launched("merging candidate lists"));
  }
  return GPUML_OK;
}

// A kNN index's points on the device (gpuml_knn_index_build): the reference set of the
// search, loaded once with its centre (of the data alone), in memory of its own
// (cudaMalloc, not the context's pool, so that freeing a context leaves it in place).
struct ResidentPoints {
  int device = 0;
  bool fp32 = false;  // compute type float (certified or single precision), else double
  int64_t n = 0, d = 0;
  bool gemm = false, split = false;
  void *x = nullptr, *p = nullptr, *norm = nullptr;
  double *centre = nullptr;
  __half *h = nullptr;  // the half pass's operands (NULL: none, build_resident)
  int *h_exp = nullptr;
  size_t bytes = 0;
};

// Frees what fp64_view made (not the borrowed raw points and centre).
void release_view(const ResidentPoints &view) {
  int prev = -1;
  const bool restore = cudaGetDevice(&prev) == cudaSuccess;
  if (cudaSetDevice(view.device) == cudaSuccess) {
    cudaFree(view.p);
    cudaFree(view.norm);
  }
  if (restore) cudaSetDevice(prev);
  cudaGetLastError();
}

// One search: the plan, the loading of the points, the loop over query tiles (the
// candidates of each tile, then their exact re-ranking and output), the final copy.
// Every device resource belongs to `ctx`, released whatever path the search takes.
template <typename T, typename In>
struct KnnSearch {
  // the call
  const In *data, *query;
  int64_t n, d, m, k;
  int64_t *index;
  In *dist;
  const gpuml_options *opt;
  bool self;
  const ResidentPoints *rp;  // the index's references, or NULL: upload the data
  bool allow_plain = true;   // false: the split pass of redo_rows (no plain pass first)
  // the plan and the device state
  KnnPlan<T, In> p;
  int K = 0;
  Context ctx{"knn:cuda"};
  Staging<In> sg, sg2;
  double *centre = nullptr;
  PointSet<In, T> R, Q, Qb[2];  // Q: the template of the query tiles
  int64_t qt = 0, rt = 0;
  size_t QK = 0;
  float *half_scale = nullptr;  // the half tiles' alpha, beta and 2^u (half_scale_kernel)
  HalfTileGemm half_gemm;       // the fp16 tiles' GEMM, and its workspace
  void *half_ws = nullptr;
  unsigned *half_max = nullptr;  // the largest |value| of the fp16 tiles (note_tile_max)
  static constexpr size_t kHalfWorkspace = (size_t)8 << 20;
  T *G = nullptr, *G2[2] = {nullptr, nullptr}, *Ld = nullptr, *Cd = nullptr, *Pd = nullptr;
  int64_t *Li = nullptr, *Ci = nullptr, *Pi = nullptr, *offsets = nullptr, *T1i = nullptr;
  double *Rd = nullptr, *T1d = nullptr;
  int64_t *out_idx = nullptr;
  In *out_dist = nullptr;
  void *cub_tmp = nullptr;
  size_t cub_bytes = 0;
  bool big_final = false, overlap = false, prefetch = false, full_out = false;
  // Set by the caller: the whole lists stay on the device in these blocks (index and dist
  // unused); lists_fit turns false, and nothing is searched, when they do not fit.
  HeldBlock *keep_idx = nullptr, *keep_dist = nullptr;
  bool lists_fit = true;
  // The queries searched: rows [q_begin, q_end) of the query matrix (all of it unless the
  // caller narrows it with only_rows); the lists hold their mq = q_end - q_begin rows.
  int64_t q_begin = 0, q_end = 0, mq = 0;
  int64_t splits = 1, fused_per = 0, gemm_count = 0;
  // precision auto: the largest reference norm, each tile's certificate flags, and the
  // queries whose lists were not certified (searched again in fp64 afterwards)
  unsigned *max_norm_bits = nullptr;
  unsigned char *fail_d = nullptr;
  HostArray<unsigned char> fail_h;
  HostArray<int64_t> recheck;
  int64_t recheck_count = 0;
  bool recheck_all = false;
  // The symmetric schedule of a self-search (run_symmetric): the lists of every point,
  // their thresholds, the column queues of a tile.
  bool symmetric = false;
  size_t sym_bytes = 0;
  T *sym_Ld = nullptr, *sym_thr = nullptr, *slot_d = nullptr;
  int64_t *sym_Li = nullptr;
  int *slot_q = nullptr, *slot_count = nullptr;
  // The screened search's queues (knn_screen.cuh): each query's threshold, queue and
  // count, and the overflow flag.
  T *screen_thr = nullptr, *screen_d = nullptr;
  int *screen_q = nullptr, *screen_count = nullptr, *screen_flag = nullptr;
  int64_t screened_chunks = 0, redone_chunks = 0;
  // Streams: the main one (GEMMs, reranking, outputs); `sel` for the warp selection
  // when it overlaps the next GEMM; `up` for loading the next query tile during the
  // search. Events order them.
  cudaStream_t main_s = nullptr, sel_s = nullptr, up_s = nullptr;
  cudaEvent_t g_done[2] = {}, s_done[2] = {}, sel_end = nullptr, q_ready[2] = {},
              q_free[2] = {};

  KnnSearch(const In *data_, int64_t n_, int64_t d_, const In *query_, int64_t m_, int64_t k_,
            int64_t *index_, In *dist_, const gpuml_options *opt_,
            const ResidentPoints *rp_ = nullptr)
      : data(data_), query(query_), n(n_), d(d_), m(m_), k(k_), index(index_), dist(dist_),
        opt(opt_), self(query_ == nullptr), rp(rp_) {
    if (self) {
      query = data;
      m = n;
    }
    q_end = mq = m;
  }

  // Searches only the queries [begin, end) (a block of a self-search split over devices:
  // each query's list is the whole search's, the self-exclusion by its global row).
  void only_rows(int64_t begin, int64_t end) {
    q_begin = begin;
    q_end = end;
    mq = end - begin;
  }

  // The kind of search and its tiles, from the device's free memory.
  gpuml_status plan() {
    p.gemm = d >= kGemmMinDim;
    // GPUML_CUDA_KNN_SPLIT=0: plain SGEMM for fp32 (for comparisons).
    const char *split_knob = getenv("GPUML_CUDA_KNN_SPLIT");
    p.split = p.gemm && sizeof(T) == 4 && !(split_knob && strcmp(split_knob, "0") == 0);
    p.certify = certified_search<T, In>(opt, d);
    if (rp) {  // the layout the index was loaded in
      p.prepared = true;
      p.split = rp->split;
    }
    // (Only while the longer list stays in the warp selection: for larger k the wider
    // bound would fail most lists.)
    p.plain = allow_plain && p.split && plain_pass<T, In>(opt, d) &&
              k + kExtraCandidates <= kSmallMaxK;
    if (p.plain) p.certify = true;
    // (a wish: kept below only with the references resident, off the screen)
    p.half = p.plain && half_pass() && (!rp || rp->h);
    const int64_t available = n - (self ? 1 : 0);
    int64_t extra = p.plain ? plain_extra(k) : kExtraCandidates;
    if (extra > available - k) extra = available - k;
    p.K = k + extra;
    const char *force = getenv("GPUML_CUDA_KNN_SELECT");
    p.small = p.K <= kSmallMaxK && !(force && strcmp(force, "general") == 0);
    // The fused kernel (d < 16, K <= 32) needs the data resident. GPUML_CUDA_KNN_FUSED=0
    // keeps the tile-by-tile path (for comparisons).
    const char *fused_knob = getenv("GPUML_CUDA_KNN_FUSED");
    p.fused = p.small && p.K <= kFusedMaxK && !p.gemm && n < 2147483647LL - kFusedAlign &&
              !(fused_knob && strcmp(fused_knob, "0") == 0);
    const char *recheck_knob = getenv("GPUML_CUDA_KNN_RECHECK");
    recheck_all = p.certify && recheck_knob && strcmp(recheck_knob, "all") == 0;
    p.tile = !p.fused && (p.gemm || !p.small);
    if (p.K > 2147483647LL)
      return gm_fail(GPUML_ERR_ARG, "knn:tooLarge", "k = %lld is too large for the GPU",
                     (long long)k);
    K = (int)p.K;
    GM_TRY(ctx.init(opt, p.gemm));
    p.sm_count = ctx.sm_count();
    p.screen = p.plain && p.small && screen_serves<In>(d, ctx.cc_major());
    if (p.fused && (plan_knn(p, n, d, mq, k, self, ctx.budget()) != GPUML_OK || !p.resident)) {
      p.fused = false;  // the data do not fit on the device: tile by tile instead
      p.tile = p.gemm || !p.small;
    }
    if (!p.fused) GM_TRY(plan_knn(p, n, d, mq, k, self, ctx.budget()));
    p.screen = p.screen && p.resident && p.tile;  // (its buffers were counted in the plan)
    p.half = p.half && p.resident && p.tile && !p.screen && ctx.cc_major() >= 7;
    p.half_tile = p.half && p.small && half_tiles();  // (the radix selection reads T tiles)
    qt = p.qt;
    rt = p.resident && !p.tile ? n : p.rt;
    QK = (size_t)qt * (size_t)K;
    big_final = p.K > kBitonicMaxK;
    overlap = overlap_gemm(p);
    prefetch = !p.q_view;
    // The symmetric schedule (the default; GPUML_CUDA_KNN_SYMMETRIC=0 turns it off for
    // comparisons: 1.47x at 10^6 x 128, 1.13x at 65,536 x 128 on an H200) covers the one-device search of
    // all the points against themselves with the GEMM form, the warp selection and the
    // data resident (the double-buffered tiles), when the lists of every point fit
    // beside the plan. Everything else (queries, a block of a search split over devices
    // or shards by only_rows, the data reloaded tile by tile, d < 16, K > kSmallMaxK, a
    // query tile longer than the reference tile) keeps the row-by-row path.
    const char *sym_knob = getenv("GPUML_CUDA_KNN_SYMMETRIC");
    symmetric = !(sym_knob && strcmp(sym_knob, "0") == 0) && self && q_begin == 0 && q_end == n &&
                overlap && p.q_view && qt <= rt && !p.screen;
    if (symmetric) {
      sym_bytes = (size_t)n * (size_t)K * (sizeof(T) + 8) + (size_t)n * sizeof(T) +
                  (size_t)rt * (sizeof(int) + (size_t)kColumnSlots * (sizeof(T) + sizeof(int))) +
                  4096;
      symmetric = plan_bytes(p, n, d, k, self, qt, nullptr) + sym_bytes <= ctx.budget();
    }
    if (!symmetric) sym_bytes = 0;
    return GPUML_OK;
  }

  // The points (resident, or their first tile), the streams and every buffer.
  gpuml_status load() {
    // Every value staged is checked (gm_neighbour_ops.checks_staged_values): the data's
    // rows here or in the reference tiles, the queries' in their tiles (load_queries).
    sg.check = sg2.check = true;
    sg.rows = p.raw_rows;
    GM_TRY(ctx.alloc(&sg.raw, (size_t)p.raw_rows * (size_t)d, "the staging buffer"));
    if (p.gemm && !rp) GM_TRY(ctx.alloc(&centre, (size_t)d, "the centre"));
    if (rp) centre = rp->centre;
    R.host = data; R.ld = n; R.d = d; R.gemm = p.gemm; R.centre = centre; R.split = p.split;
    Q.host = query; Q.ld = m; Q.d = d; Q.gemm = p.gemm; Q.centre = centre; Q.split = p.split;
    R.half = Q.half = p.half;
    if (p.half) GM_TRY(ctx.alloc(&half_scale, 3, "the fp16 scale"));
    if (p.half_tile) {
      char *ws = nullptr;
      GM_TRY(ctx.alloc(&ws, kHalfWorkspace, "the fp16 GEMM's workspace"));
      half_ws = ws;
      GM_TRY(ctx.alloc(&half_max, 1, "the fp16 tiles' largest value"));
      GM_TRY(ctx.check(cudaMemsetAsync(half_max, 0, sizeof(unsigned), ctx.stream()),
                       "clearing the fp16 tiles' largest value"));
    }
    if (rp) {  // loaded when the index was built
      R.x = (In *)rp->x;
      R.p = (T *)rp->p;
      R.norm = (T *)rp->norm;
      R.h = rp->h;
      R.h_exp = rp->h_exp;
      R.cap = R.count = n;
      R.first = 0;
    } else {
      GM_TRY(alloc_points(ctx, R, p.resident ? n : p.rt));
      if (p.gemm && p.resident)
        GM_TRY(load_resident_with_centre(ctx, sg, R, self ? nullptr : query, m, centre));
      else if (p.gemm)
        GM_TRY(compute_centre<In>(ctx, sg, data, n, self ? nullptr : query, m, d, centre));
      else if (p.resident)
        GM_TRY(load_points(ctx, sg, R, 0, n));
    }

    main_s = sel_s = up_s = ctx.stream();
    if (overlap) {
      GM_TRY(ctx.new_stream(&sel_s));
      for (int b = 0; b < 2; b++) {
        GM_TRY(ctx.new_event(&g_done[b]));
        GM_TRY(ctx.new_event(&s_done[b]));
      }
      GM_TRY(ctx.new_event(&sel_end));
    }
    Qb[0] = Qb[1] = Q;
    sg2.rows = p.raw_rows;
    sg2.pinned_base = 2;  // the ring's other two slots: both buffers upload in one call
    if (prefetch) {
      GM_TRY(ctx.new_stream(&up_s));
      for (int b = 0; b < 2; b++) {
        GM_TRY(ctx.new_event(&q_ready[b]));
        GM_TRY(ctx.new_event(&q_free[b]));
        GM_TRY(alloc_points(ctx, Qb[b], p.qt));
      }
      GM_TRY(ctx.alloc(&sg2.raw, (size_t)p.raw_rows * (size_t)d, "the staging buffer"));
    }
    if (p.tile) {
      // (fp16 tiles in T-sized buffers of half the length)
      const size_t tile = p.half_tile ? ((size_t)rt * (size_t)qt * 2 + sizeof(T) - 1) / sizeof(T)
                                      : (size_t)rt * (size_t)qt;
      GM_TRY(ctx.alloc(&G2[0], tile, "the distance tile"));
      if (overlap) GM_TRY(ctx.alloc(&G2[1], tile, "the second distance tile"));
    }
    G = G2[0];
    GM_TRY(ctx.alloc(&Ld, QK, "the candidate lists"));
    GM_TRY(ctx.alloc(&Li, QK, "the candidate lists"));
    Pd = Ld;  // the fused kernel's partial lists (one set per reference split)
    Pi = Li;
    splits = p.fused ? fused_splits(p, n, qt, &fused_per) : 1;
    if (splits > 1) {
      GM_TRY(ctx.alloc(&Pd, QK * (size_t)splits, "the partial candidate lists"));
      GM_TRY(ctx.alloc(&Pi, QK * (size_t)splits, "the partial candidate lists"));
    }
    if (!p.small) {
      GM_TRY(ctx.alloc(&Cd, QK, "the selected candidates"));
      GM_TRY(ctx.alloc(&Ci, QK, "the selected candidates"));
    }
    GM_TRY(ctx.alloc(&Rd, QK, "the exact distances"));
    if (big_final) {
      GM_TRY(ctx.alloc(&T1d, QK, "sorting space"));
      GM_TRY(ctx.alloc(&T1i, QK, "sorting space"));
    }
    if (p.screen) {
      const size_t slots = (size_t)screen_slots(p.K);
      GM_TRY(ctx.alloc(&screen_thr, (size_t)qt, "the screening thresholds"));
      GM_TRY(ctx.alloc(&screen_count, (size_t)qt, "the screening queues"));
      GM_TRY(ctx.alloc(&screen_d, (size_t)qt * slots, "the screening queues"));
      GM_TRY(ctx.alloc(&screen_q, (size_t)qt * slots, "the screening queues"));
      GM_TRY(ctx.alloc(&screen_flag, 1, "the screening flag"));
      GM_TRY(ctx.check(cudaMemsetAsync(screen_count, 0, (size_t)qt * sizeof(int), ctx.stream()),
                       "clearing the screening queues"));
      GM_TRY(ctx.check(cudaMemsetAsync(screen_flag, 0, sizeof(int), ctx.stream()),
                       "clearing the screening flag"));
    }
    if (p.certify) {
      GM_TRY(ctx.alloc(&max_norm_bits, 1, "the largest norm"));
      GM_TRY(ctx.check(cudaMemsetAsync(max_norm_bits, 0, sizeof(unsigned), ctx.stream()),
                       "clearing the largest norm"));
      GM_TRY(ctx.alloc(&fail_d, (size_t)qt, "certificate flags"));
      if (!fail_h.alloc((size_t)qt) || !recheck.alloc((size_t)m))
        return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate certificate flags");
    }
    // The whole m x k result stays on the device when it fits (one copy at the end);
    // otherwise each query tile's part is copied out as it is done.
    const size_t out_bytes = (size_t)k * (8 + sizeof(In));
    full_out = plan_bytes(p, n, d, k, self, qt, nullptr) + sym_bytes +
                   ((size_t)mq - (size_t)qt) * out_bytes <=
               ctx.budget();
    const size_t out_rows = full_out ? (size_t)mq : (size_t)qt;
    // Lists copied out tile by tile reach the caller's arrays before the later query
    // tiles are staged: their values are checked here first, so that a call failing on
    // a non-finite value leaves the outputs untouched (gpuml.h). (The data, and the
    // queries of a self-search, are all staged before the first tile is written.)
    if (!full_out && !keep_idx && query != data && sg2.check &&
        gm_rows_non_finite(query, m, q_begin, mq, d, sizeof(In)))
      return staged_non_finite(ctx);
    if (keep_idx) {
      if (!full_out) {
        lists_fit = false;
        return GPUML_OK;
      }
      GM_TRY(ctx.alloc_held(*keep_idx, &out_idx, out_rows * (size_t)k, "the neighbour indices"));
      GM_TRY(ctx.alloc_held(*keep_dist, &out_dist, out_rows * (size_t)k,
                            "the neighbour distances"));
    } else {
      GM_TRY(ctx.alloc(&out_idx, out_rows * (size_t)k, "the neighbour indices"));
      GM_TRY(ctx.alloc(&out_dist, out_rows * (size_t)k, "the neighbour distances"));
    }
    if (big_final) {
      GM_TRY(ctx.alloc(&offsets, (size_t)qt + 1, "segment offsets"));
      HostArray<int64_t> h_off;
      if (!h_off.alloc((size_t)qt + 1))
        return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate segment offsets");
      for (int64_t i = 0; i <= qt; i++) h_off.p[i] = i * p.K;
      GM_TRY(ctx.check(cudaMemcpyAsync(offsets, h_off.p, ((size_t)qt + 1) * 8,
                                       cudaMemcpyHostToDevice, ctx.stream()),
                       "copying segment offsets"));
      GM_TRY(ctx.sync("copying segment offsets"));
      cub_bytes = p.cub_bytes;
      char *tmp = nullptr;
      GM_TRY(ctx.alloc(&tmp, cub_bytes, "sorting space"));
      cub_tmp = tmp;
    }
    return GPUML_OK;
  }

  // Queues the load of the query tile at q0 into slot b on the `up` stream, once the
  // tile that used the slot before is done with it.
  gpuml_status load_queries(int64_t q0, int b) {
    const int64_t qn = q_end - q0 < qt ? q_end - q0 : qt;
    GM_TRY(ctx.check(cudaStreamWaitEvent(up_s, q_free[b], 0), "cudaStreamWaitEvent"));
    GM_TRY(load_points(ctx, sg2, Qb[b], q0, qn, up_s));
    return ctx.check(cudaEventRecord(q_ready[b], up_s), "cudaEventRecord");
  }

  gpuml_status interrupted() {
    return gm_interrupted(opt) ? gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "kNN search interrupted")
                               : GPUML_OK;
  }

  // A distance tile as the selections read it (fp16 in the half pass's tiles).
  TileView<T> view(const T *tile) const {
    TileView<T> v;
    v.g = tile;
    if constexpr (sizeof(T) == 4) {
      if (p.half_tile) {
        v.scale = half_scale + 2;
        v.gmax = half_max;
      }
    }
    return v;
  }

  // The distance tile G (ldg) of the an points of A at a0 against the bn points of B at
  // b0, in the plan's GEMM form; on the main stream.
  gpuml_status tile_gemm(const PointSet<In, T> &A, int64_t a0, int64_t an,
                         const PointSet<In, T> &B, int64_t b0, int64_t bn, T *tile,
                         int64_t ldg) {
    if constexpr (sizeof(T) == 4) {
      if (p.half_tile)
        return half_gemm.run(ctx, A.h_at(a0), an, B.h_at(b0), bn, d, half_scale,
                             reinterpret_cast<__half *>(tile), ldg, half_ws, kHalfWorkspace);
      if (p.half)
        return gemm_tile_half(ctx, A.h_at(a0), an, B.h_at(b0), bn, d, half_scale, tile, ldg);
    }
    return gemm_tile_any<T>(ctx, p.split, p.plain, A.p_at(a0), an, B.p_at(b0), bn, d, tile, ldg);
  }

  // The half tiles' scale for the sets A and B (their fp16 scales found on the device),
  // on the main stream before their first tile.
  gpuml_status set_half_scale(const PointSet<In, T> &A, const PointSet<In, T> &B) {
    if (!p.half) return GPUML_OK;
    int ld2d = 0;
    while (((int64_t)1 << ld2d) < d) ld2d++;
    half_scale_kernel<<<1, 1, 0, main_s>>>(A.h_exp, B.h_exp, (int)p.half_tile, ld2d, half_scale);
    return ctx.launched("the fp16 scale");
  }

  // Each query's K candidates for the query tile at q0 (the fused kernel, or distance
  // tiles over the references with a selection after each); *cand: where they are.
  gpuml_status candidates(const PointSet<In, T> &Qs, int64_t q0, int64_t qn, int64_t **cand) {
    const size_t qK = (size_t)qn * (size_t)K;
    const In *xq = Qs.x_at(q0);
    const T *nq = p.gemm ? Qs.norm_at(q0) : nullptr;
    *cand = Li;  // each query's K candidates after the last tile
    if (p.fused) {
      GM_TRY(fused_lists<T, In>(ctx, Qs, q0, qn, R, n, d, self, K, splits, fused_per,
                                Pd, Pi, Ld, Li));
      return interrupted();
    }
    if constexpr (sizeof(T) == 4) {
      if (p.screen) return screened_candidates(Qs, q0, qn);
    }
    GM_TRY(set_half_scale(R, Qs));
    for (int64_t r0 = 0; r0 < n; r0 += rt) {
      const int64_t rn = n - r0 < rt ? n - r0 : rt;
      GM_TRY(load_points(ctx, sg, R, r0, rn));
      if (p.certify && q0 == q_begin) {  // every reference passes here in the first query tile
        max_norm_kernel<<<grid_1d(rn, 256) < 1024u ? grid_1d(rn, 256) : 1024u, 256, 0,
                          ctx.stream()>>>((const float *)R.norm_at(r0), rn, max_norm_bits);
        GM_TRY(ctx.launched("the largest norm"));
      }
      const int fresh = r0 == 0;
      const In *xr = R.x_at(r0);
      const T *nr = p.gemm ? R.norm_at(r0) : nullptr;
      if (overlap) {
        // GEMM into one buffer (once the selection two steps back is done with it) while
        // the selection of the other runs on its own stream.
        const int b = (int)(gemm_count++ % 2);
        GM_TRY(ctx.check(cudaStreamWaitEvent(main_s, s_done[b], 0), "cudaStreamWaitEvent"));
        GM_TRY(tile_gemm(R, r0, rn, Qs, q0, qn, G2[b], rn));
        GM_TRY(ctx.order(main_s, sel_s, g_done[b]));
        GM_TRY(small_select<T, In>(ctx, sel_s, true, view(G2[b]), rn, qn, nr, nq, xr, xq, d, r0, q0,
                                   self, Ld, Li, K, fresh));
        GM_TRY(ctx.check(cudaEventRecord(s_done[b], sel_s), "cudaEventRecord"));
      } else if (p.small) {
        if (p.gemm) GM_TRY(tile_gemm(R, r0, rn, Qs, q0, qn, G, rn));
        GM_TRY(small_select<T, In>(ctx, main_s, p.gemm, view(G), rn, qn, nr, nq, xr, xq, d, r0, q0,
                                   self, Ld, Li, K, fresh));
      } else {
        if (p.gemm) GM_TRY(tile_gemm(R, r0, rn, Qs, q0, qn, G, rn));
        if (fresh) {
          fill_list_kernel<T><<<grid_1d((int64_t)qK, 256), 256, 0, ctx.stream()>>>(Ld, Li,
                                                                                  (int64_t)qK);
          GM_TRY(ctx.launched("initialising the candidate lists"));
        }
        if (!p.gemm) GM_TRY(direct_tile<T, In>(ctx, xr, rn, xq, qn, d, G, rn, self, r0, q0));
        select_large_kernel<T, In><<<(unsigned)qn, kSelectThreads, 0, ctx.stream()>>>(
            Ld, Li, p.K, G, rn, r0, p.gemm, nr, nq, xr, xq, d, q0, self, Cd, Ci);
        GM_TRY(ctx.launched("kNN radix selection"));
        if (r0 + rn >= n && !p.certify) {
          // The last tile: the candidates need no order (the exact distances decide it).
          *cand = Ci;
        } else if (!big_final) {
          GM_TRY(sort_segments<T>(ctx, Cd, Ci, p.K, qn, Ld, Li));
        } else {
          size_t bytes = cub_bytes;
          GM_TRY(ctx.check(cub::DeviceSegmentedSort::StableSortPairs(
                               cub_tmp, bytes, Cd, Ld, Ci, Li, (int64_t)qK, qn, offsets,
                               offsets + 1, ctx.stream()),
                           "sorting candidates (cub::DeviceSegmentedSort)"));
        }
      }
      GM_TRY(interrupted());
    }
    if (overlap) GM_TRY(ctx.order(sel_s, main_s, sel_end));  // the lists are complete
    return GPUML_OK;
  }

  // The screened search of a query tile (p.screen; the references resident, the plain
  // pass, all on the main stream): the first reference tile through the GEMM and the
  // selection, which leaves each query's threshold; then chunks of references that double
  // in length, each screened into the queues and merged, or done again through the GEMM
  // tiles when a queue overflowed (the queues then discarded: every pair is offered to
  // its list once either way).
  gpuml_status screened_candidates(const PointSet<In, T> &Qs, int64_t q0, int64_t qn) {
    const In *xq = Qs.x_at(q0);
    const T *pq = Qs.p_at(q0), *nq = Qs.norm_at(q0);
    if (p.certify && q0 == q_begin) {  // the references are all resident
      max_norm_kernel<<<grid_1d(n, 256) < 1024u ? grid_1d(n, 256) : 1024u, 256, 0,
                        main_s>>>((const float *)R.norm_at(0), n, max_norm_bits);
      GM_TRY(ctx.launched("the largest norm"));
    }
    // GEMM tiles and their selection for references [r0, r0 + rn), the thresholds kept.
    auto tiles = [&](int64_t r0, int64_t rn) -> gpuml_status {
      for (int64_t t0 = r0; t0 < r0 + rn; t0 += rt) {
        const int64_t tn = min64(rt, r0 + rn - t0);
        GM_TRY(tile_gemm(R, t0, tn, Qs, q0, qn, G, tn));
        GM_TRY(small_select<T, In>(ctx, main_s, true, view(G), tn, qn, R.norm_at(t0), nq, R.x_at(t0),
                                   xq, d, t0, q0, self, Ld, Li, K, t0 == 0, nullptr,
                                   screen_thr));
      }
      return GPUML_OK;
    };
    const int64_t first = min64(rt, n);
    GM_TRY(tiles(0, first));
    ColumnFeed<T> feed;
    feed.thr = screen_thr;
    feed.count = screen_count;
    feed.slot_d = screen_d;
    feed.slot_q = screen_q;
    feed.slots = screen_slots(p.K);
    const int64_t knob = env_int("GPUML_CUDA_KNN_SCREEN_CHUNK");
    const int64_t longest = knob ? knob : kScreenChunkMax;
    for (int64_t r0 = first, len = first; r0 < n; r0 += len, len = min64(2 * len, longest)) {
      len = min64(len, n - r0);
      GM_TRY(screen_chunk<In>(ctx, main_s, R.p_at(r0), len, pq, qn, d, R.norm_at(r0), nq,
                              R.x_at(r0), xq, r0, q0, self, feed, screen_flag));
      int overflow = 0;
      GM_TRY(ctx.check(cudaMemcpyAsync(&overflow, screen_flag, sizeof(int),
                                       cudaMemcpyDeviceToHost, main_s),
                       "copying the screening flag"));
      GM_TRY(ctx.sync("screening references"));
      screened_chunks++;
      if (!overflow) {
        // the queries own the queues: the chunk's references are the entries
        GM_TRY(column_merge<T, In>(ctx, main_s, TileView<T>{}, qn, len, nq, R.norm_at(r0), xq,
                                   R.x_at(r0), d, r0, feed, Ld, Li, K));
      } else {
        redone_chunks++;
        GM_TRY(ctx.check(cudaMemsetAsync(screen_count, 0, (size_t)qn * sizeof(int), main_s),
                         "clearing the screening queues"));
        GM_TRY(ctx.check(cudaMemsetAsync(screen_flag, 0, sizeof(int), main_s),
                         "clearing the screening flag"));
        GM_TRY(tiles(r0, len));
      }
      GM_TRY(interrupted());
    }
    return GPUML_OK;
  }

  // precision auto: each query's certificate (certify_kernel), to the host.
  gpuml_status certify(const PointSet<In, T> &Qs, int64_t q0, int64_t qn) {
    const int64_t available = n - (self ? 1 : 0);
    certify_kernel<<<grid_1d(qn, 256), 256, 0, ctx.stream()>>>(
        (const float *)Ld, K, (int)k, qn, (const float *)Qs.norm_at(q0), max_norm_bits, d,
        (int)p.plain, p.half ? R.h_exp : nullptr, p.half ? Qs.h_exp : nullptr,
        p.half_tile ? half_scale : nullptr, half_max, p.K >= available,
        recheck_all, fail_d);
    GM_TRY(ctx.launched("certifying the candidates"));
    return ctx.check(cudaMemcpyAsync(fail_h.p, fail_d, (size_t)qn, cudaMemcpyDeviceToHost,
                                     ctx.stream()),
                     "copying the certificates");
  }

  // After the tile's sync: the queries whose lists were not certified.
  void note_uncertified(int64_t q0, int64_t qn) {
    for (int64_t i = 0; i < qn; i++)
      if (fail_h.p[i]) recheck.p[recheck_count++] = q0 + i;
  }

  // The exact distances of the candidates (from the points as given), the final order by
  // (distance, index), the tile's output.
  gpuml_status finish_tile(const PointSet<In, T> &Qs, int64_t q0, int64_t qn, int64_t *cand) {
    const size_t qK = (size_t)qn * (size_t)K;
    const In *xq = Qs.x_at(q0);
    fill_double_kernel<<<grid_1d((int64_t)qK, 256), 256, 0, ctx.stream()>>>(
        Rd, (int64_t)qK, HUGE_VAL);
    GM_TRY(ctx.launched("initialising exact distances"));
    const int64_t rerank_step = p.resident ? n : rt;  // resident: one pass over all rows
    for (int64_t r0 = ((n - 1) / rerank_step) * rerank_step; r0 >= 0; r0 -= rerank_step) {
      const int64_t rn = n - r0 < rerank_step ? n - r0 : rerank_step;
      GM_TRY(load_points(ctx, sg, R, r0, rn));  // last tile first: it is still loaded
      GM_TRY(rerank<In>(ctx, cand, p.K, qn, R.x_at(r0), r0, rn, xq, d, Rd));
    }
    if (!big_final) {
      GM_TRY(final_sort<In>(ctx, Rd, cand, p.K, qn, k, out_idx + (full_out ? q0 - q_begin : 0),
                            out_dist + (full_out ? q0 - q_begin : 0), full_out ? mq : qn));
    } else {
      size_t bytes = cub_bytes;
      GM_TRY(ctx.check(cub::DeviceSegmentedSort::StableSortPairs(
                           cub_tmp, bytes, cand, T1i, Rd, T1d, (int64_t)qK, qn, offsets,
                           offsets + 1, ctx.stream()),
                       "sorting neighbours by index (cub::DeviceSegmentedSort)"));
      bytes = cub_bytes;
      GM_TRY(ctx.check(cub::DeviceSegmentedSort::StableSortPairs(
                           cub_tmp, bytes, T1d, Rd, T1i, Li, (int64_t)qK, qn, offsets,
                           offsets + 1, ctx.stream()),
                       "sorting neighbours by distance (cub::DeviceSegmentedSort)"));
      write_output_kernel<In><<<grid_1d(qn * k, 256), 256, 0, ctx.stream()>>>(
          Rd, Li, p.K, qn, k, out_idx + (full_out ? q0 - q_begin : 0),
          out_dist + (full_out ? q0 - q_begin : 0), full_out ? mq : qn);
      GM_TRY(ctx.launched("writing the neighbours"));
    }
    return GPUML_OK;
  }

  // A query tile's neighbours to the host, when the result does not stay on the device.
  gpuml_status copy_tile(int64_t q0, int64_t qn) {
    if (full_out) return GPUML_OK;
    GM_TRY(ctx.check(cudaMemcpy2DAsync(index + (q0 - q_begin), (size_t)mq * 8, out_idx, (size_t)qn * 8,
                                       (size_t)qn * 8, (size_t)k, cudaMemcpyDeviceToHost,
                                       ctx.stream()),
                     "copying neighbour indices to the host"));
    return ctx.check(cudaMemcpy2DAsync(dist + (q0 - q_begin), (size_t)mq * sizeof(In), out_dist,
                                       (size_t)qn * sizeof(In), (size_t)qn * sizeof(In),
                                       (size_t)k, cudaMemcpyDeviceToHost, ctx.stream()),
                     "copying neighbour distances to the host");
  }

  // The symmetric schedule of a self-search: the distance tile of query block I against
  // the points of a later block feeds both the block's lists (row-wise, as in
  // candidates()) and the later points' lists (column-wise: ColumnFeed in select.cuh), so
  // only the tiles on and above the diagonal are computed (about half the GEMM work and
  // half the tile traffic). First the diagonal tile of every block (each point's list
  // from its own block: the thresholds the column side starts from), then block by
  // block the tiles of the points after it; a block's lists are complete after its own
  // row (the earlier rows fed them column-wise) and are certified, re-ranked and written
  // as candidates() + finish_tile() do for a query tile. Every pair is offered once to
  // each of its two lists, the same values of the same GEMM forms, so the lists hold the
  // K smallest by (value, index) as the row-by-row path's do: the certificate and the
  // fp64 re-ranking give the same answer. (The value of a pair may differ in the last
  // bits from the one the row-by-row path computes with the roles of the two points
  // swapped: the GEMM sums in another order. Precision auto's bound holds for any order;
  // single and double precision, which carry no certificate, may then order a near tie
  // within their rounding differently, as the CPU backend may.)
  gpuml_status run_symmetric() {
    const size_t nK = (size_t)n * (size_t)K;
    GM_TRY(ctx.alloc(&sym_Ld, nK, "the candidate lists of every point"));
    GM_TRY(ctx.alloc(&sym_Li, nK, "the candidate lists of every point"));
    GM_TRY(ctx.alloc(&sym_thr, (size_t)n, "the candidate lists' thresholds"));
    GM_TRY(ctx.alloc(&slot_count, (size_t)rt, "the column queues"));
    GM_TRY(ctx.alloc(&slot_d, (size_t)rt * kColumnSlots, "the column queues"));
    GM_TRY(ctx.alloc(&slot_q, (size_t)rt * kColumnSlots, "the column queues"));
    GM_TRY(ctx.check(cudaMemsetAsync(slot_count, 0, (size_t)rt * sizeof(int), main_s),
                     "clearing the column queues"));
    if (p.certify) {  // the largest norm of all the points, before any certificate
      max_norm_kernel<<<grid_1d(n, 256) < 1024u ? grid_1d(n, 256) : 1024u, 256, 0, main_s>>>(
          (const float *)R.norm_at(0), n, max_norm_bits);
      GM_TRY(ctx.launched("the largest norm"));
    }
    GM_TRY(set_half_scale(R, R));
    // A tile G (rn x qn: the points at r0 against the block at q0) into buffer b, on the
    // main stream once the selection that used b before is done.
    auto gemm = [&](int64_t r0, int64_t rn, int64_t q0, int64_t qn, int b) -> gpuml_status {
      GM_TRY(ctx.check(cudaStreamWaitEvent(main_s, s_done[b], 0), "cudaStreamWaitEvent"));
      GM_TRY(tile_gemm(R, r0, rn, R, q0, qn, G2[b], rn));
      return ctx.order(main_s, sel_s, g_done[b]);
    };
    // 1. The diagonal tiles: each block's lists from its own points, and their K-th
    // values as the thresholds of the column side.
    for (int64_t q0 = 0; q0 < n; q0 += qt) {
      const int64_t qn = min64(qt, n - q0);
      const int b = (int)(gemm_count++ % 2);
      GM_TRY(gemm(q0, qn, q0, qn, b));
      GM_TRY(small_select<T, In>(ctx, sel_s, true, view(G2[b]), qn, qn, R.norm_at(q0), R.norm_at(q0),
                                 R.x_at(q0), R.x_at(q0), d, q0, q0, 1, sym_Ld + (size_t)q0 * K,
                                 sym_Li + (size_t)q0 * K, K, 1, nullptr, sym_thr + q0));
      GM_TRY(ctx.check(cudaEventRecord(s_done[b], sel_s), "cudaEventRecord"));
      GM_TRY(interrupted());
    }
    GM_TRY(ctx.trace("knn cuda: symmetric search, diagonal tiles queued"));
    // 2. Block by block, the tiles of the points after it.
    ColumnFeed<T> feed;
    feed.count = slot_count;
    feed.slot_d = slot_d;
    feed.slot_q = slot_q;
    feed.slots = kColumnSlots;
    for (int64_t q0 = 0; q0 < n; q0 += qt) {
      const int64_t qn = min64(qt, n - q0);
      for (int64_t r0 = q0 + qn; r0 < n; r0 += rt) {
        const int64_t rn = min64(rt, n - r0);
        const int b = (int)(gemm_count++ % 2);
        GM_TRY(gemm(r0, rn, q0, qn, b));
        feed.thr = sym_thr + r0;
        GM_TRY(small_select<T, In>(ctx, sel_s, true, view(G2[b]), rn, qn, R.norm_at(r0),
                                   R.norm_at(q0), R.x_at(r0), R.x_at(q0), d, r0, q0, 1,
                                   sym_Ld + (size_t)q0 * K, sym_Li + (size_t)q0 * K, K, 0,
                                   &feed, nullptr));
        GM_TRY(column_merge<T, In>(ctx, sel_s, view(G2[b]), rn, qn, R.norm_at(r0), R.norm_at(q0),
                                   R.x_at(r0), R.x_at(q0), d, q0, feed,
                                   sym_Ld + (size_t)r0 * K, sym_Li + (size_t)r0 * K, K));
        GM_TRY(ctx.check(cudaEventRecord(s_done[b], sel_s), "cudaEventRecord"));
        GM_TRY(interrupted());
      }
      GM_TRY(ctx.order(sel_s, main_s, sel_end));  // the block's lists are complete
      Ld = sym_Ld + (size_t)q0 * K;
      Li = sym_Li + (size_t)q0 * K;
      if (p.certify) GM_TRY(certify(R, q0, qn));
      GM_TRY(finish_tile(R, q0, qn, Li));
      GM_TRY(copy_tile(q0, qn));
      GM_TRY(ctx.sync("kNN search"));
      if (p.certify) note_uncertified(q0, qn);
      if (q0 + qn < n) gm_progress(opt, "knn", q0 + qn, mq);
    }
    return ctx.trace("knn cuda: symmetric search");
  }

  gpuml_status run() {
    GM_TRY(plan());
    GM_TRY(load());
    if (!lists_fit) return GPUML_OK;
    GM_TRY(ctx.trace("knn cuda: plan, buffers, references loaded"));
    if (symmetric) {
      GM_TRY(run_symmetric());
      return copy_out();
    }
    if (prefetch) GM_TRY(load_queries(q_begin, 0));
    for (int64_t q0 = q_begin, tile = 0; q0 < q_end; q0 += qt, tile++) {
      const int64_t qn = q_end - q0 < qt ? q_end - q0 : qt;
      const int slot = (int)(tile % 2);
      if (prefetch)
        GM_TRY(ctx.check(cudaStreamWaitEvent(main_s, q_ready[slot], 0), "cudaStreamWaitEvent"));
      const PointSet<In, T> &Qs = p.q_view ? R : Qb[slot];
      int64_t *cand = nullptr;
      GM_TRY(candidates(Qs, q0, qn, &cand));
      GM_TRY(ctx.trace("knn cuda: a query tile's candidates"));
      if (p.certify) GM_TRY(certify(Qs, q0, qn));
      GM_TRY(finish_tile(Qs, q0, qn, cand));
      GM_TRY(ctx.trace("knn cuda: its certificate and exact re-ranking"));
      if (prefetch) {
        // This slot's queries are no longer needed once the work queued so far is done;
        // the next tile loads into the other slot meanwhile.
        GM_TRY(ctx.check(cudaEventRecord(q_free[slot], main_s), "cudaEventRecord"));
        if (q0 + qt < q_end) GM_TRY(load_queries(q0 + qt, 1 - slot));
      }
      GM_TRY(copy_tile(q0, qn));
      GM_TRY(ctx.sync("kNN search"));
      if (p.certify) note_uncertified(q0, qn);
      // the last tile's report waits for the copy and the re-checks (knn_run)
      if (q0 + qn < q_end) gm_progress(opt, "knn", q0 + qn - q_begin, mq);
    }
    GM_TRY(ctx.trace("knn cuda: query tiles"));
    if (p.screen && gm_trace_on()) {
      char mark[96];
      snprintf(mark, sizeof mark, "knn cuda: %lld chunks screened, %lld done again as tiles",
               (long long)screened_chunks, (long long)redone_chunks);
      gm_trace(mark);
    }
    return copy_out();
  }

  // The whole lists to the host, when they stayed on the device for it.
  gpuml_status copy_out() {
    if (!full_out || keep_idx) return GPUML_OK;  // (each tile synced: the lists are final)
    // through the page-locked ring: the caller's fresh pages fault in on all threads
    GM_TRY(download(ctx, index, out_idx, (size_t)mq * (size_t)k * 8,
                    "copying neighbour indices to the host"));
    GM_TRY(download(ctx, dist, out_dist, (size_t)mq * (size_t)k * sizeof(In),
                    "copying neighbour distances to the host"));
    return ctx.trace("knn cuda: lists to the host");
  }
};

template <typename T, typename In>
gpuml_status knn_run(const In *data, int64_t n, int64_t d, const In *query, int64_t m,
                     int64_t k, int64_t *index, In *dist, const gpuml_options *opt,
                     int64_t *rechecked, const ResidentPoints *rp = nullptr,
                     bool allow_plain = true);

// The fp64 GEMM form (centred points and norms in double) of an index's resident points,
// computed on the device from its raw points, which it shares (x and the centre are
// borrowed: release_view frees only what was made here). False, with nothing held, when
// it does not fit in half the memory budget (the caller uploads the data instead).
bool fp64_view(const ResidentPoints &src, const gpuml_options *opt, ResidentPoints *view) {
  *view = src;
  view->fp32 = false;
  view->split = false;
  view->p = view->norm = nullptr;
  view->bytes = 0;
  Context ctx{"knn:cuda"};
  if (ctx.init(opt, 0) != GPUML_OK) return false;
  const size_t p_bytes = (size_t)src.n * (size_t)src.d * 8, norm_bytes = (size_t)src.n * 8;
  if (p_bytes + norm_bytes > ctx.budget() / 2) return false;
  if (cudaMalloc(&view->p, p_bytes) != cudaSuccess || cudaMalloc(&view->norm, norm_bytes) != cudaSuccess) {
    cudaGetLastError();
    release_view(*view);
    return false;
  }
  const int64_t count = src.n * src.d;
  const unsigned grid = grid_1d(count, 256) < 65536u * 8 ? grid_1d(count, 256) : 65536u * 8;
  centre_points_kernel<double, double><<<grid, 256, 0, ctx.stream()>>>(
      (const double *)src.x, count, src.d, src.centre, (double *)view->p, false);
  norm_kernel<double><<<grid_1d(src.n * 32, 256), 256, 0, ctx.stream()>>>(
      (double *)view->p, src.n, src.d, (double *)view->norm, false);
  if (ctx.launched("the index's fp64 form") != GPUML_OK ||
      ctx.sync("the index's fp64 form") != GPUML_OK) {
    release_view(*view);
    return false;
  }
  return true;
}

// The queries listed in `rows` (of the m x d query matrix, or of the data in a
// self-search), searched again in T without the plain pass (knn_run with opt): query
// rows[i]'s k neighbours into row i of the count x k lists index and dist (column-major).
// In a self-search each is a query against all n points for k + 1 neighbours, its own
// index then dropped (or, when duplicates with smaller indices push it beyond k + 1, the
// last one): the first k of the others in the order (distance, index). rp (may be NULL):
// the references resident on the device, searched instead of uploading the data again.
// *in_fp64: the queries that search searched again in fp64.
template <typename T, typename In>
gpuml_status search_rows(const In *data, int64_t n, int64_t d, const In *query, int64_t m,
                         int64_t k, const int64_t *rows, int64_t count, int64_t *index,
                         In *dist, const gpuml_options *opt, const ResidentPoints *rp,
                         int64_t *in_fp64) {
  const bool self = query == nullptr;
  const In *src = self ? data : query;
  const int64_t ld = self ? n : m, kk = self ? k + 1 : k;
  HostArray<In> sub, sub_dist;
  HostArray<int64_t> sub_idx;
  if (!sub.alloc((size_t)count * (size_t)d) || !sub_idx.alloc((size_t)count * (size_t)kk) ||
      !sub_dist.alloc((size_t)count * (size_t)kk))
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the queries to search again");
  for (int64_t t = 0; t < d; t++)
    for (int64_t i = 0; i < count; i++)
      sub.p[i + t * count] = src[rows[i] + t * ld];
  gpuml_options o = *opt;
  o.verbose = 0;  // the search re-checked reports its completion once, after this
  GM_TRY((knn_run<T, In>(data, n, d, sub.p, count, kk, sub_idx.p, sub_dist.p, &o, in_fp64, rp,
                         false)));
  for (int64_t i = 0; i < count; i++) {
    const int64_t row = rows[i];
    for (int64_t j = 0, out = 0; j < kk && out < k; j++) {
      const int64_t nb = sub_idx.p[i + j * count];
      if (self && nb == row) continue;
      index[i + out * count] = nb;
      dist[i + out * count] = sub_dist.p[i + j * count];
      out++;
    }
  }
  return GPUML_OK;
}

// The rows a certified search could not certify, searched again into the count x k lists
// index and dist: after the plain pass by the split pass (search_rows in T, the same
// resident references; in precision auto it certifies again and searches its own
// failures in fp64), after the split pass of precision auto with the fp64 GEMM (an
// index's fp64 form made on the device when it fits, rather than uploading the data
// again). *in_fp64: the queries searched in fp64.
template <typename T, typename In>
gpuml_status redo_rows(const In *data, int64_t n, int64_t d, const In *query, int64_t m,
                       int64_t k, const int64_t *rows, int64_t count, int64_t *index, In *dist,
                       const gpuml_options *opt, const ResidentPoints *rp, bool after_plain,
                       int64_t *in_fp64) {
  *in_fp64 = 0;
  if (after_plain) {
    if (gm_trace_on()) {
      char mark[96];
      snprintf(mark, sizeof mark, "knn cuda: %lld queries not certified by the plain pass",
               (long long)count);
      gm_trace(mark);
    }
    return search_rows<T, In>(data, n, d, query, m, k, rows, count, index, dist, opt, rp,
                              in_fp64);
  }
  if constexpr (sizeof(In) == 8 && sizeof(T) == 4) {
    ResidentPoints view;
    const bool on_device = rp && rp->gemm && fp64_view(*rp, opt, &view);
    gpuml_options o = *opt;
    o.precision = GPUML_PRECISION_DOUBLE;
    const gpuml_status st = search_rows<double, double>(data, n, d, query, m, k, rows, count,
                                                        index, dist, &o,
                                                        on_device ? &view : nullptr, nullptr);
    if (on_device) release_view(view);
    *in_fp64 = count;
    return st;
  }
  return gm_fail(GPUML_ERR_CUDA, "knn:cuda", "internal: recheck outside precision auto");
}

template <typename T, typename In>
gpuml_status knn_run(const In *data, int64_t n, int64_t d, const In *query, int64_t m,
                     int64_t k, int64_t *index, In *dist, const gpuml_options *opt,
                     int64_t *rechecked, const ResidentPoints *rp, bool allow_plain) {
  if (rechecked) *rechecked = 0;
  HostArray<int64_t> rows;
  int64_t count = 0;
  bool after_plain = false;
  {
    KnnSearch<T, In> search(data, n, d, query, m, k, index, dist, opt, rp);
    search.allow_plain = allow_plain;
    GM_TRY(search.run());
    count = search.recheck_count;
    after_plain = search.p.plain;
    rows.p = search.recheck.p;  // kept past the search, whose device resources go now
    search.recheck.p = nullptr;
  }
  // "knn" done once the lists are final on the host (their copy and re-checks included);
  // a self-search is called with m = 0 and lists every point
  const int64_t rows_out = query ? m : n;
  if (count > 0) {
    HostArray<int64_t> sub_idx;
    HostArray<In> sub_dist;
    if (!sub_idx.alloc((size_t)count * (size_t)k) || !sub_dist.alloc((size_t)count * (size_t)k))
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the re-checked lists");
    int64_t in_fp64 = 0;
    GM_TRY((redo_rows<T, In>(data, n, d, query, rows_out, k, rows.p, count, sub_idx.p,
                             sub_dist.p, opt, rp, after_plain, &in_fp64)));
    if (rechecked) *rechecked = in_fp64;
    for (int64_t i = 0; i < count; i++)
      for (int64_t t = 0; t < k; t++) {
        index[rows.p[i] + t * rows_out] = sub_idx.p[i + t * count];
        dist[rows.p[i] + t * rows_out] = sub_dist.p[i + t * count];
      }
  }
  gm_progress(opt, "knn", rows_out, rows_out);
  return GPUML_OK;
}

// Row rows[i] of the m x k lists (index, dist) replaced by row i of the count x k ones.
__global__ void replace_rows_kernel(const int64_t *__restrict__ rows, int64_t count, int64_t k,
                                    const int64_t *__restrict__ sub_idx,
                                    const double *__restrict__ sub_dist, int64_t m,
                                    int64_t *__restrict__ index, double *__restrict__ dist) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= count * k) return;
  const int64_t i = e % count, t = e / count, at = rows[i] + t * m;
  index[at] = sub_idx[e];
  dist[at] = sub_dist[e];
}

// The lists of the self-search's queries [begin, end) in compute type T (their rows
// only, end - begin x k): knn_run's search and re-checks, the lists left in the held
// blocks and the re-checked rows replaced there.
template <typename T>
gpuml_status self_lists(const double *data, int64_t n, int64_t d, int64_t k, int64_t begin,
                        int64_t end, const gpuml_options *opt, HeldBlock &held_idx,
                        HeldBlock &held_dist, bool *fits) {
  *fits = false;
  HostArray<int64_t> rows;
  int64_t count = 0;
  bool after_plain = false;
  {
    KnnSearch<T, double> search(data, n, d, nullptr, 0, k, nullptr, nullptr, opt);
    search.only_rows(begin, end);
    search.keep_idx = &held_idx;
    search.keep_dist = &held_dist;
    GM_TRY(search.run());
    if (!search.lists_fit) return GPUML_OK;
    count = search.recheck_count;
    after_plain = search.p.plain;
    rows.p = search.recheck.p;
    search.recheck.p = nullptr;
  }
  *fits = true;
  if (count > 0) {
    const size_t ck = (size_t)count * (size_t)k;
    HostArray<int64_t> sub_idx;
    HostArray<double> sub_dist;
    if (!sub_idx.alloc(ck) || !sub_dist.alloc(ck))
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the re-checked lists");
    int64_t in_fp64 = 0;
    GM_TRY((redo_rows<T, double>(data, n, d, nullptr, n, k, rows.p, count, sub_idx.p,
                                 sub_dist.p, opt, nullptr, after_plain, &in_fp64)));
    for (int64_t i = 0; i < count; i++) rows.p[i] -= begin;  // the block's own rows
    Context ctx{"knn:cuda"};
    GM_TRY(ctx.init(opt, 0));
    int64_t *rows_d = nullptr, *idx_d = nullptr;
    double *dist_d = nullptr;
    GM_TRY(ctx.alloc(&rows_d, (size_t)count, "the re-checked rows"));
    GM_TRY(ctx.alloc(&idx_d, ck, "the re-checked lists"));
    GM_TRY(ctx.alloc(&dist_d, ck, "the re-checked lists"));
    GM_TRY(ctx.check(cudaMemcpyAsync(rows_d, rows.p, (size_t)count * 8, cudaMemcpyHostToDevice,
                                     ctx.stream()), "copying the re-checked rows"));
    GM_TRY(ctx.check(cudaMemcpyAsync(idx_d, sub_idx.p, ck * 8, cudaMemcpyHostToDevice,
                                     ctx.stream()), "copying the re-checked lists"));
    GM_TRY(ctx.check(cudaMemcpyAsync(dist_d, sub_dist.p, ck * 8, cudaMemcpyHostToDevice,
                                     ctx.stream()), "copying the re-checked lists"));
    replace_rows_kernel<<<grid_1d((int64_t)ck, 256), 256, 0, ctx.stream()>>>(
        rows_d, count, k, idx_d, dist_d, end - begin, (int64_t *)held_idx.get(),
        (double *)held_dist.get());
    GM_TRY(ctx.launched("replacing the re-checked lists"));
    GM_TRY(ctx.sync("replacing the re-checked lists"));
  }
  return GPUML_OK;
}

gpuml_status block_lists(const double *data, int64_t n, int64_t d, int64_t k, int64_t begin,
                         int64_t end, const gpuml_options *opt, HeldBlock &index,
                         HeldBlock &dist, bool *fits) {
  gpuml_status st =
      opt->precision == GPUML_PRECISION_SINGLE || certified_search<float, double>(opt, d)
          ? self_lists<float>(data, n, d, k, begin, end, opt, index, dist, fits)
          : self_lists<double>(data, n, d, k, begin, end, opt, index, dist, fits);
  if (st || !*fits) {
    index.release();
    dist.release();
  }
  return st;
}

// A self-search split by query rows over the shards of a plan: each shard's device
// searches its block against all the points and keeps its lists; they are then gathered
// on the first device.
struct SplitSelfSearch {
  const double *data;
  int64_t n, d, k;
  const gm_shard_plan *plan;
  std::unique_ptr<HeldBlock[]> idx, dist;
  std::unique_ptr<bool[]> fits;

  static gpuml_status shard(void *self, int s, const gpuml_options *opt) {
    SplitSelfSearch &w = *(SplitSelfSearch *)self;
    return block_lists(w.data, w.n, w.d, w.k, gm_shard_start(w.n, w.plan->count, s),
                       gm_shard_start(w.n, w.plan->count, s + 1), opt, w.idx[s], w.dist[s],
                       &w.fits[s]);
  }

  // The blocks into whole n x k lists on the first device (first: the options naming it),
  // by peer copies (each block's rows of every column); *fits false, nothing held, when
  // they do not fit there beside the first block.
  gpuml_status gather(const gpuml_options *first, HeldBlock &index, HeldBlock &distances,
                      bool *gathered) {
    *gathered = false;
    {
      Context ctx{"knn:cuda"};
      GM_TRY(ctx.init(first, 0));
      const size_t nk = (size_t)n * (size_t)k;
      if (nk * 16 > ctx.budget()) return GPUML_OK;
      int64_t *to_idx = nullptr;
      double *to_dist = nullptr;
      GM_TRY(ctx.alloc_held(index, &to_idx, nk, "the neighbour indices"));
      GM_TRY(ctx.alloc_held(distances, &to_dist, nk, "the neighbour distances"));
      for (int s = 0; s < plan->count; s++) {
        const int64_t a = gm_shard_start(n, plan->count, s),
                      rows = gm_shard_start(n, plan->count, s + 1) - a;
        const int device = plan->devices[s % plan->ndevices];
        for (int part = 0; part < 2; part++) {
          void *src = part ? dist[s].get() : idx[s].get();
          void *dst = part ? (void *)(to_dist + a) : (void *)(to_idx + a);
          cudaError_t e;
          if (device == first->device) {
            e = cudaMemcpy2DAsync(dst, (size_t)n * 8, src, (size_t)rows * 8, (size_t)rows * 8,
                                  (size_t)k, cudaMemcpyDeviceToDevice, ctx.stream());
          } else {
            cudaMemcpy3DPeerParms copy = {};
            copy.srcPtr = make_cudaPitchedPtr(src, (size_t)rows * 8, (size_t)rows * 8, (size_t)k);
            copy.srcDevice = device;
            copy.dstPtr = make_cudaPitchedPtr(dst, (size_t)n * 8, (size_t)rows * 8, (size_t)k);
            copy.dstDevice = first->device;
            copy.extent = make_cudaExtent((size_t)rows * 8, (size_t)k, 1);
            e = cudaMemcpy3DPeerAsync(&copy, ctx.stream());
          }
          GM_TRY(ctx.check(e, "gathering the neighbour lists"));
        }
      }
      // done before the blocks go back to their devices' pools
      GM_TRY(ctx.sync("gathering the neighbour lists"));
    }
    *gathered = true;
    return GPUML_OK;
  }
};

}  // namespace

gpuml_status knn_self_lists(const double *data, int64_t n, int64_t d, int64_t k,
                            const gpuml_options *opt, HeldBlock &index, HeldBlock &dist,
                            bool *fits) {
  *fits = false;
  gm_shard_plan plan;
  GM_TRY(gm_shard_plan_make(opt, n, &plan));
  gpuml_options first = *opt;
  first.device = plan.devices[0];
  first.ndevices = 0;
  if (plan.count == 1) {
    GM_TRY(block_lists(data, n, d, k, 0, n, &first, index, dist, fits));
    if (*fits) gm_progress(opt, "knn", n, n);
  } else {
    SplitSelfSearch split{data, n, d, k, &plan, nullptr, nullptr, nullptr};
    split.idx.reset(new (std::nothrow) HeldBlock[plan.count]);
    split.dist.reset(new (std::nothrow) HeldBlock[plan.count]);
    split.fits.reset(new (std::nothrow) bool[plan.count]());
    if (!split.idx || !split.dist || !split.fits)
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the shards' records");
    GM_TRY(gm_shards_run(&plan, opt, SplitSelfSearch::shard, &split, "knn"));
    bool all_fit = true;
    for (int s = 0; s < plan.count; s++) all_fit = all_fit && split.fits[s];
    if (all_fit) GM_TRY(split.gather(&first, index, dist, fits));
    if (!*fits) {  // (the blocks go back as split ends)
      index.release();
      dist.release();
    }
  }
  return GPUML_OK;
}

}  // namespace gm

extern "C" gpuml_status gm_cuda_knn(const gm_matrix *dm, const gm_matrix *qm, int64_t k,
                                    int64_t *index, void *dist, const gpuml_options *opt,
                                    int64_t *rechecked) {
  const void *data = dm->values, *query = qm ? qm->values : nullptr;
  const int64_t n = dm->rows, d = dm->cols, m = qm ? qm->rows : 0;
  if (rechecked) *rechecked = 0;
  if (dm->dtype == GM_F32)
    return gm::knn_run<float, float>((const float *)data, n, d, (const float *)query, m, k,
                                     index, (float *)dist, opt, rechecked);
  if (opt->precision == GPUML_PRECISION_SINGLE ||
      gm::certified_search<float, double>(opt, d))
    return gm::knn_run<float, double>((const double *)data, n, d, (const double *)query, m, k,
                                      index, (double *)dist, opt, rechecked);
  return gm::knn_run<double, double>((const double *)data, n, d, (const double *)query, m, k,
                                     index, (double *)dist, opt, rechecked);
}

// ---- the kNN index's resident points -------------------------------------------------

namespace gm {
namespace {

void free_resident(ResidentPoints *rp) {
  if (!rp) return;
  int prev = -1;
  const bool restore = cudaGetDevice(&prev) == cudaSuccess;
  if (cudaSetDevice(rp->device) == cudaSuccess) {
    cudaFree(rp->x);
    cudaFree(rp->p);
    cudaFree(rp->norm);
    cudaFree(rp->centre);
    cudaFree(rp->h);
    cudaFree(rp->h_exp);
  }
  if (restore) cudaSetDevice(prev);
  cudaGetLastError();
  delete rp;
}

// Loads the n x d data as the search's reference set (KnnSearch::load with the data
// resident), into memory of the index's own.
template <typename T, typename In>
gpuml_status build_resident(const In *data, int64_t n, int64_t d, const gpuml_options *opt,
                            ResidentPoints *rp) {
  rp->device = opt->device;
  rp->fp32 = sizeof(T) == 4;
  rp->n = n;
  rp->d = d;
  rp->gemm = d >= kGemmMinDim;
  const char *split_knob = getenv("GPUML_CUDA_KNN_SPLIT");
  rp->split = rp->gemm && sizeof(T) == 4 && !(split_knob && strcmp(split_knob, "0") == 0);
  Context ctx{"knn:cuda"};
  GM_TRY(ctx.init(opt, 0));
  const size_t width = rp->split ? 4 * (size_t)split_block(d) : (size_t)d;
  const size_t x_bytes = (size_t)n * (size_t)d * sizeof(In);
  const size_t p_bytes = rp->gemm ? (size_t)n * width * sizeof(T) : 0;
  const size_t norm_bytes = rp->gemm ? (size_t)n * sizeof(T) : 0;
  // the half pass's fp16 copy (its 12.5% of the split layout's bytes), only where a
  // search can take that pass: not where the screen serves the plain pass instead (by
  // default d <= kScreenMaxDim). A search of an index without it keeps the TF32 GEMM.
  const bool half = rp->split && half_pass() && plain_pass<T, In>(opt, d) &&
                    ctx.cc_major() >= 7 && !screen_serves<In>(d, ctx.cc_major());
  const size_t h_bytes = half ? (size_t)n * (size_t)half_width(d) * 2 : 0;
  const size_t need = x_bytes + p_bytes + norm_bytes + h_bytes + (size_t)d * 8;
  if (need > ctx.budget())
    return gm_fail(GPUML_ERR_NOMEM, "knn:cuda",
                   "the index needs %.1f MB of GPU memory and %.1f MB are available: free GPU "
                   "memory, raise gpu_memory_limit or build it with backend \"cpu\"",
                   (double)need / 1e6, (double)ctx.budget() / 1e6);
  ctx.device().trim(0);  // the pool's cached blocks give way to the index's own memory
  auto own = [&](void **ptr, size_t bytes) -> gpuml_status {
    if (bytes == 0) return GPUML_OK;
    GM_TRY(ctx.check(cudaMalloc(ptr, bytes), "allocating the index"));
    rp->bytes += bytes;
    return GPUML_OK;
  };
  GM_TRY(own(&rp->x, x_bytes));
  GM_TRY(own(&rp->p, p_bytes));
  if (rp->gemm) GM_TRY(zero_split_padding(ctx, (T *)rp->p, n, d, rp->split));
  GM_TRY(own(&rp->norm, norm_bytes));
  if (rp->gemm) GM_TRY(own((void **)&rp->centre, (size_t)d * 8));
  if (half) {
    GM_TRY(own((void **)&rp->h, h_bytes));
    GM_TRY(own((void **)&rp->h_exp, 2 * sizeof(int)));
  }
  Staging<In> sg;
  sg.check = true;  // every row staged once, checked (gm_neighbour_ops.checks_staged_values)
  size_t raw_bytes = ctx.budget() / 8 < ((size_t)64 << 20) ? ctx.budget() / 8 : ((size_t)64 << 20);
  sg.rows = staging_rows<In>(raw_bytes, d, n);
  GM_TRY(ctx.alloc(&sg.raw, (size_t)sg.rows * (size_t)d, "the staging buffer"));
  PointSet<In, T> R;
  R.host = data; R.ld = n; R.d = d; R.gemm = rp->gemm; R.split = rp->split;
  R.centre = rp->centre;
  R.x = (In *)rp->x; R.p = (T *)rp->p; R.norm = (T *)rp->norm;
  R.half = half; R.h = rp->h; R.h_exp = rp->h_exp;
  R.cap = n;
  if (rp->gemm)
    GM_TRY(load_resident_with_centre(ctx, sg, R, (const In *)nullptr, 0, rp->centre));
  else
    GM_TRY(load_points(ctx, sg, R, 0, n));
  return ctx.sync("loading the index");
}

}  // namespace
}  // namespace gm

// Double data only (the index's host copy); the compute type as gm_cuda_knn picks it.
extern "C" gpuml_status gm_cuda_knn_resident_build(const gm_matrix *data, const gpuml_options *opt,
                                                   void **state, size_t *bytes) {
  *state = nullptr;
  *bytes = 0;
  if (data->dtype != GM_F64)
    return gm_fail(GPUML_ERR_ARG, "knn:badData", "internal: an index holds double data");
  gm::ResidentPoints *rp = new (std::nothrow) gm::ResidentPoints;
  if (!rp) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the index");
  const double *x = (const double *)data->values;
  const bool fp32 = opt->precision == GPUML_PRECISION_SINGLE ||
                    gm::certified_search<float, double>(opt, data->cols);
  gpuml_status st = fp32 ? gm::build_resident<float, double>(x, data->rows, data->cols, opt, rp)
                         : gm::build_resident<double, double>(x, data->rows, data->cols, opt, rp);
  if (st) {
    gm::free_resident(rp);
    return st;
  }
  *state = rp;
  *bytes = rp->bytes;
  return GPUML_OK;
}

extern "C" gpuml_status gm_cuda_knn_resident_search(const void *state, const gm_matrix *dm,
                                                    const gm_matrix *qm, int64_t k,
                                                    int64_t *index, void *dist,
                                                    const gpuml_options *opt,
                                                    int64_t *rechecked) {
  const gm::ResidentPoints *rp = (const gm::ResidentPoints *)state;
  const double *data = (const double *)dm->values, *query = qm ? (const double *)qm->values : nullptr;
  const int64_t m = qm ? qm->rows : 0;
  if (rechecked) *rechecked = 0;
  if (rp->fp32)
    return gm::knn_run<float, double>(data, dm->rows, dm->cols, query, m, k, index,
                                      (double *)dist, opt, rechecked, rp);
  return gm::knn_run<double, double>(data, dm->rows, dm->cols, query, m, k, index,
                                     (double *)dist, opt, rechecked, rp);
}

extern "C" void gm_cuda_knn_resident_free(void *state) {
  gm::free_resident((gm::ResidentPoints *)state);
}
