/* The shared random number generator (core/rng.c): reproducible streams, ranges and
 * moments. Internal, so it is tested directly rather than through gpuml.h. */
#include <math.h>
#include "check.h"
#include "rng.h"

int main(void) {
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
