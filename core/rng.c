#include <math.h>
#include "rng.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void gm_rng_seed(gm_rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t gm_rng_next(gm_rng *r) {
  uint64_t *s = r->s;
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double gm_rng_uniform(gm_rng *r) { return (double)(gm_rng_next(r) >> 11) * 0x1.0p-53; }

int64_t gm_rng_below(gm_rng *r, int64_t n) {
  const uint64_t un = (uint64_t)n;
  const uint64_t limit = UINT64_MAX - UINT64_MAX % un;  /* reject the biased tail */
  uint64_t v;
  do v = gm_rng_next(r);
  while (v >= limit);
  return (int64_t)(v % un);
}

double gm_rng_normal(gm_rng *r) {
  double u, v, s;
  do {
    u = 2 * gm_rng_uniform(r) - 1;
    v = 2 * gm_rng_uniform(r) - 1;
    s = u * u + v * v;
  } while (s >= 1 || s == 0);
  return u * sqrt(-2 * log(s) / s);
}
