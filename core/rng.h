/* A small seeded random number generator shared by the randomised algorithms
 * (k-means++ seeding, random initial embeddings, dc sampling). xoshiro256** seeded
 * through splitmix64: the same seed gives the same stream on every platform, so runs
 * are reproducible and both backends start from the same state. Not thread-safe:
 * one generator per thread of work. */
#ifndef GPUML_RNG_H
#define GPUML_RNG_H
#include <stdint.h>

typedef struct {
  uint64_t s[4];
} gm_rng;

void gm_rng_seed(gm_rng *r, uint64_t seed);
uint64_t gm_rng_next(gm_rng *r);
/* Uniform on [0, 1) with 53 random bits. */
double gm_rng_uniform(gm_rng *r);
/* Uniform integer in [0, n) without modulo bias; n >= 1. */
int64_t gm_rng_below(gm_rng *r, int64_t n);
/* Standard normal (Marsaglia's polar method; no cached second value, so the stream
 * depends only on the number of calls). */
double gm_rng_normal(gm_rng *r);

#endif
