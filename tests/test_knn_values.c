#define _POSIX_C_SOURCE 200809L /* clock_gettime (check.h) */
/* C tests of the check for NA, NaN and Inf in kNN's input that the CUDA backend's staging
 * copy can make (core/options.c, gm_pack_rows):
 *   1. host only (runs everywhere): the core's checking copy gm_pack_rows and its scan
 *      gm_rows_non_finite copy bit for bit as a plain copy does and flag every class of
 *      non-finite value (both infinities, quiet and signalling NaNs, R's NA, any payload)
 *      at every position of a block, and nothing outside it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "internal.h" /* gm_pack_rows, gm_rows_non_finite */

static uint64_t rng_state = 4242;
static uint64_t next_bits(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return rng_state;
}

/* ---- 1. the core's checking copy, on the host ------------------------------------------ */

/* The non-finite classes, as bits. */
static const uint64_t bad64[] = {
    0x7ff0000000000000ULL, /* +Inf */
    0xfff0000000000000ULL, /* -Inf */
    0x7ff8000000000000ULL, /* quiet NaN */
    0xfff8000000000000ULL, /* the x86 default NaN (sign set) */
    0x7ff00000000007a2ULL, /* R's NA_real_ */
    0x7ff0000000000001ULL, /* signalling NaN, the smallest payload */
    0x7fffffffffffffffULL, /* NaN, every payload bit */
    0xffffffffffffffffULL};
static const uint32_t bad32[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                                 0x7f8007a2u, 0x7f800001u, 0x7fffffffu, 0xffffffffu};
/* Finite values at the edges of the test: zeros, denormals, the smallest normal, the
 * largest finite (every exponent bit but the lowest), one. */
static const uint64_t edge64[] = {0x0000000000000000ULL, 0x8000000000000000ULL,
                                  0x0000000000000001ULL, 0x800fffffffffffffULL,
                                  0x0010000000000000ULL, 0x7fefffffffffffffULL,
                                  0xffefffffffffffffULL, 0x7fe0000000000000ULL,
                                  0x3ff0000000000000ULL};
static const uint32_t edge32[] = {0x00000000u, 0x80000000u, 0x00000001u,
                                  0x807fffffu, 0x00800000u, 0x7f7fffffu,
                                  0xff7fffffu, 0x7f000000u, 0x3f800000u};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Random finite values of `item` bytes (8, 4, or any other size: random bytes), with the
 * edge values sprinkled in. */
static void fill_finite(unsigned char *x, size_t count, size_t item) {
  for (size_t i = 0; i < count; i++) {
    unsigned char *at = x + i * item;
    if (item == 8) {
      uint64_t u = next_bits();
      if ((u & 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL) u ^= 0x0010000000000000ULL;
      if (i % 7 == 3) u = edge64[(i / 7) % COUNT(edge64)];
      memcpy(at, &u, 8);
    } else if (item == 4) {
      uint32_t u = (uint32_t)(next_bits() >> 32);
      if ((u & 0x7f800000u) == 0x7f800000u) u ^= 0x00800000u;
      if (i % 7 == 3) u = edge32[(i / 7) % COUNT(edge32)];
      memcpy(at, &u, 4);
    } else {
      for (size_t b = 0; b < item; b++) at[b] = (unsigned char)(next_bits() >> 56);
    }
  }
}

static void put_bits(unsigned char *x, size_t at, size_t item, int which) {
  if (item == 8) memcpy(x + at * 8, &bad64[which], 8);
  else memcpy(x + at * 4, &bad32[which], 4);
}

/* Packs rows [r0, r0 + rn) of the ld x d matrix x and compares with a plain copy, bit for
 * bit, with guard bytes after the block; returns gm_pack_rows's flag (-1: the copy is
 * wrong) and checks that gm_rows_non_finite agrees. */
static int pack_and_compare(const unsigned char *x, int64_t ld, int64_t r0, int64_t rn,
                            int64_t d, size_t item, const char *label) {
  const size_t bytes = (size_t)rn * (size_t)d * item, guard = 64;
  unsigned char *out = malloc(bytes + guard), *ref = malloc(bytes);
  memset(out, 0xa5, bytes + guard);
  for (int64_t j = 0; j < d; j++)
    memcpy(ref + (size_t)j * (size_t)rn * item, x + ((size_t)j * (size_t)ld + (size_t)r0) * item,
           (size_t)rn * item);
  const int flag = gm_pack_rows(x, ld, r0, rn, d, item, out);
  int ok = memcmp(out, ref, bytes) == 0;
  for (size_t b = 0; b < guard; b++) ok = ok && out[bytes + b] == 0xa5;
  const int scan = gm_rows_non_finite(x, ld, r0, rn, d, item);
  CHECK(ok, "%s: the packed block differs from a plain copy", label);
  CHECK((flag != 0) == (scan != 0), "%s: gm_pack_rows says %d, gm_rows_non_finite %d", label,
        flag, scan);
  free(out);
  free(ref);
  return ok ? flag : -1;
}

/* Blocks of several shapes (one value; vector tails; a block of a larger matrix; blocks
 * above a megabyte, packed on all threads): finite values copy exactly and are not
 * flagged; each non-finite class at each position class of the block is flagged and
 * copied exactly (payloads kept); values outside the block are not looked at. */
static void test_pack_rows(void) {
  static const int64_t shapes[][4] = {/* ld, d, r0, rn */
                                      {1, 1, 0, 1},         {37, 5, 3, 29},
                                      {1000, 3, 0, 1000},   {257, 17, 100, 157},
                                      {70000, 3, 1000, 60000}, {8, 300, 2, 5}};
  static const size_t items[] = {8, 4};
  for (size_t it = 0; it < COUNT(items); it++) {
    const size_t item = items[it];
    for (size_t sh = 0; sh < COUNT(shapes); sh++) {
      int64_t ld = shapes[sh][0], d = shapes[sh][1], r0 = shapes[sh][2], rn = shapes[sh][3];
      if (item == 4 && ld == 70000) {  /* over a megabyte in floats too */
        ld = 140000;
        rn = 120000;
      }
      unsigned char *x = malloc((size_t)ld * (size_t)d * item);
      fill_finite(x, (size_t)ld * (size_t)d, item);
      char label[160];
      snprintf(label, sizeof label, "pack %zu-byte rows %lld..%lld of %lld x %lld, finite", item,
               (long long)r0, (long long)(r0 + rn - 1), (long long)ld, (long long)d);
      CHECK(pack_and_compare(x, ld, r0, rn, d, item, label) == 0, "%s: flagged", label);
      /* positions: first, last, middle, first row of the last column, last row of the
       * first column (as row, column of the block) */
      const int64_t pos[][2] = {{0, 0}, {rn - 1, d - 1}, {rn / 2, d / 2}, {0, d - 1}, {rn - 1, 0}};
      for (size_t b = 0; b < COUNT(bad64); b++)
        for (size_t p = 0; p < COUNT(pos); p++) {
          const size_t at = (size_t)(r0 + pos[p][0]) + (size_t)pos[p][1] * (size_t)ld;
          unsigned char keep[8];
          memcpy(keep, x + at * item, item);
          put_bits(x, at, item, (int)b);
          snprintf(label, sizeof label,
                   "pack %zu-byte rows of %lld x %lld, class %zu at block row %lld, column %lld",
                   item, (long long)ld, (long long)d, b, (long long)pos[p][0], (long long)pos[p][1]);
          CHECK(pack_and_compare(x, ld, r0, rn, d, item, label) == 1, "%s: not flagged", label);
          memcpy(x + at * item, keep, item);
        }
      /* just outside the block: not part of the copy, not flagged */
      for (int side = 0; side < 2; side++) {
        const int64_t row = side ? r0 + rn : r0 - 1;
        if (row < 0 || row >= ld) continue;
        const size_t at = (size_t)row + (size_t)(d / 2) * (size_t)ld;
        unsigned char keep[8];
        memcpy(keep, x + at * item, item);
        put_bits(x, at, item, 2);
        snprintf(label, sizeof label, "pack %zu-byte rows, NaN in row %lld outside the block",
                 item, (long long)row);
        CHECK(pack_and_compare(x, ld, r0, rn, d, item, label) == 0, "%s: flagged", label);
        memcpy(x + at * item, keep, item);
      }
      free(x);
    }
    /* Every position of columns of 1 to 67 values (the vector loops' heads and tails). */
    int64_t wrong = 0;
    unsigned char *x = malloc(67 * item), *out = malloc(67 * item);
    for (int64_t len = 1; len <= 67; len++) {
      fill_finite(x, (size_t)len, item);
      if (gm_pack_rows(x, len, 0, len, 1, item, out) || gm_rows_non_finite(x, len, 0, len, 1, item))
        wrong++;
      for (int64_t i = 0; i < len; i++)
        for (size_t b = 0; b < COUNT(bad64); b++) {
          unsigned char keep[8];
          memcpy(keep, x + (size_t)i * item, item);
          put_bits(x, (size_t)i, item, (int)b);
          if (!gm_pack_rows(x, len, 0, len, 1, item, out) || memcmp(out, x, (size_t)len * item) ||
              !gm_rows_non_finite(x, len, 0, len, 1, item))
            wrong++;
          memcpy(x + (size_t)i * item, keep, item);
        }
    }
    CHECK(wrong == 0, "pack %zu-byte columns of 1..67 values: %lld cases wrong", item,
          (long long)wrong);
    free(x);
    free(out);
  }
  /* Other sizes are copied as they are, unchecked. */
  unsigned char x[40 * 2], out[20 * 2];
  fill_finite(x, 40, 2);
  const int flag = gm_pack_rows(x, 10, 5, 5, 4, 2, out);
  int same = 1;
  for (int j = 0; j < 4; j++) same = same && memcmp(out + j * 10, x + (j * 10 + 5) * 2, 10) == 0;
  CHECK(flag == 0 && same, "pack 2-byte rows: flag %d, copy %s", flag, same ? "exact" : "wrong");
}

int main(void) {
  harness_init();
  RUN(test_pack_rows);
  return check_summary("C");
}
