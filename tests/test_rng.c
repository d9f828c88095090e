/* The shared random number generator (core/rng.c): reproducible streams, ranges and
 * moments. Internal, so it is tested directly rather than through gpuml.h. */
#include <math.h>
#include <stdint.h>
#include "check.h"
#include "rng.h"

/* Known answers: the generator is xoshiro256** (Blackman and Vigna) seeded through
 * splitmix64. The seeding of state 0 gives splitmix64's published first outputs, and
 * the values after it are the reference algorithm's, worked out apart from this code. */
static void test_known_answers(void) {
  gm_rng r;
  gm_rng_seed(&r, 0);
  const uint64_t state[4] = {0xe220a8397b1dcdafULL, 0x6e789e6aa1b965f4ULL,
                             0x06c45d188009454fULL, 0xf88bb8a8724c81ecULL};
  CHECK(r.s[0] == state[0] && r.s[1] == state[1] && r.s[2] == state[2] && r.s[3] == state[3],
        "seed 0: splitmix64's first four outputs");
  const uint64_t first[5] = {0x99ec5f36cb75f2b4ULL, 0xbf6e1f784956452aULL,
                             0x1a5f849d4933e6e0ULL, 0x6aa594f1262d2d2cULL,
                             0xbba5ad4a1f842e59ULL};
  int same = 1;
  for (int i = 0; i < 5; i++) same &= gm_rng_next(&r) == first[i];
  CHECK(same, "seed 0: xoshiro256** gives the reference stream");
  gm_rng_seed(&r, 0);
  CHECK(gm_rng_uniform(&r) == (double)(first[0] >> 11) * 0x1.0p-53,
        "a uniform value is the top 53 bits of the next output");
}

int main(void) {
  test_known_answers();
  gm_rng a, b;
  gm_rng_seed(&a, 7);
  gm_rng_seed(&b, 7);
  int same = 1;
  for (int i = 0; i < 1000; i++) same &= gm_rng_next(&a) == gm_rng_next(&b);
  CHECK(same, "the same seed gives the same stream");
  gm_rng_seed(&b, 8);
  CHECK(gm_rng_next(&a) != gm_rng_next(&b), "different seeds give different streams");

  const int count = 200000;
  double sum = 0, sum2 = 0, nsum = 0, nsum2 = 0;
  int in_range = 1, below_ok = 1;
  int64_t hist[7] = {0};
  for (int i = 0; i < count; i++) {
    double u = gm_rng_uniform(&a);
    in_range &= u >= 0 && u < 1;
    sum += u;
    sum2 += u * u;
    double z = gm_rng_normal(&a);
    nsum += z;
    nsum2 += z * z;
    int64_t k = gm_rng_below(&a, 7);
    below_ok &= k >= 0 && k < 7;
    if (k >= 0 && k < 7) hist[k]++;
  }
  CHECK(in_range, "uniform values lie in [0, 1)");
  CHECK(fabs(sum / count - 0.5) < 0.005, "uniform mean %g", sum / count);
  CHECK(fabs(sum2 / count - 1.0 / 3) < 0.005, "uniform second moment %g", sum2 / count);
  CHECK(fabs(nsum / count) < 0.01, "normal mean %g", nsum / count);
  CHECK(fabs(nsum2 / count - 1) < 0.02, "normal variance %g", nsum2 / count);
  CHECK(below_ok, "gm_rng_below stays in [0, n)");
  int flat = 1;
  for (int k = 0; k < 7; k++) flat &= fabs(hist[k] / (double)count - 1.0 / 7) < 0.005;
  CHECK(flat, "gm_rng_below is uniform over 0..6");
  return check_summary("C");
}
