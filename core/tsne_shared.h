/* Pieces of t-SNE that the CPU (core/tsne*.c) and the GPU (kernels/tsne.cu) must
 * compute with the same formulas: the perplexity bisection of one point, the
 * interpolation weights and the kernel of the FFT method. Header-only, so that nvcc
 * compiles the same code for the device. */
#ifndef GPUML_TSNE_SHARED_H
#define GPUML_TSNE_SHARED_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GM_HD __host__ __device__ __forceinline__
#else
#define GM_HD static inline
#endif

/* The bisection stops when |H - log(perplexity)| is below this (nats); the tests ask
 * for 1e-5. */
#define GM_TSNE_ENTROPY_TOL 1e-7
#define GM_TSNE_BISECTION_STEPS 200

/* Interpolation nodes per box and dimension (FIt-SNE's choice, Linderman et al. 2019). */
#define GM_TSNE_NODES 3

/* Conditional affinities p_{j|i} of one point from the squared distances d2[t * stride]
 * (t < k) to its k nearest neighbours: a Gaussian whose precision beta is bisected until
 * the entropy (nats) is log(perplexity). Distances are taken relative to the nearest,
 * so the nearest neighbour always has weight 1 and the sum never underflows (far-away
 * data, or duplicates at distance 0). Writes p[t * stride] (summing to 1) and returns
 * the entropy reached. Where no beta reaches the target (more exact duplicates than
 * the perplexity), the weight goes evenly to the nearest ties. */
GM_HD double gm_tsne_bisect_point(const double *d2, int64_t stride, int64_t k, double log_perp,
                                  double *p) {
  double dmin = d2[0];
  for (int64_t t = 1; t < k; t++) dmin = d2[t * stride] < dmin ? d2[t * stride] : dmin;
  double mean = 0;
  for (int64_t t = 0; t < k; t++) mean += d2[t * stride] - dmin;
  mean /= (double)k;
  double beta = mean > 0 ? 1.0 / mean : 1.0, lo = 0, hi = INFINITY, entropy = 0, sum = 1;
  for (int step = 0; step < GM_TSNE_BISECTION_STEPS; step++) {
    double weighted = 0;
    sum = 0;
    for (int64_t t = 0; t < k; t++) {
      const double e = d2[t * stride] - dmin;
      const double w = exp(-beta * e);
      p[t * stride] = w;
      sum += w;
      weighted += w * e;
    }
    entropy = log(sum) + beta * weighted / sum;
    const double gap = entropy - log_perp;
    if (fabs(gap) < GM_TSNE_ENTROPY_TOL) break;
    if (gap > 0) {
      lo = beta;
      beta = isinf(hi) ? beta * 2 : 0.5 * (lo + hi);
    } else {
      hi = beta;
      beta = 0.5 * (lo + hi);
    }
    if (!isinf(hi) && hi - lo <= 1e-15 * hi) break;
  }
  for (int64_t t = 0; t < k; t++) p[t * stride] /= sum;  /* sum >= 1: the nearest has 1 */
  return entropy;
}

/* Lagrange weights of the GM_TSNE_NODES nodes of a box (at (m + 0.5) / NODES of its
 * width) for a point at relative position t in [0, 1]. */
GM_HD void gm_tsne_lagrange(double t, double *w) {
  const double s0 = 0.5 / GM_TSNE_NODES, s1 = 1.5 / GM_TSNE_NODES, s2 = 2.5 / GM_TSNE_NODES;
  w[0] = (t - s1) * (t - s2) / ((s0 - s1) * (s0 - s2));
  w[1] = (t - s0) * (t - s2) / ((s1 - s0) * (s1 - s2));
  w[2] = (t - s0) * (t - s1) / ((s2 - s0) * (s2 - s1));
}

/* The squared Cauchy kernel 1 / (1 + r^2)^2 whose convolutions give both the repulsive
 * forces and the normalisation Z. */
GM_HD double gm_tsne_kernel2(double r2) {
  const double w = 1.0 / (1.0 + r2);
  return w * w;
}

/* The heavy-tailed kernel (Kobak et al. 2019) with df degrees of freedom:
 * u = 1 / (1 + r^2 / df) and w = u^df, whose convolutions give Z (w) and the repulsive
 * forces (w u). df = 1 is the Cauchy kernel (w = u), computed by the formulas above. */
GM_HD double gm_tsne_heavy_w(double r2, double df) { return pow(1.0 / (1.0 + r2 / df), df); }
GM_HD double gm_tsne_heavy_wu(double r2, double df) {
  const double u = 1.0 / (1.0 + r2 / df);
  return pow(u, df) * u;
}

/* Box and relative position of coordinate y on a grid of `boxes` boxes of width
 * `width` starting at `lo`. */
GM_HD int gm_tsne_box_of(double y, double lo, double width, int boxes, double *t) {
  double u = (y - lo) / width;
  int b = (int)floor(u);
  if (b < 0) b = 0;
  if (b > boxes - 1) b = boxes - 1;
  double r = u - (double)b;
  *t = r < 0 ? 0 : (r > 1 ? 1 : r);
  return b;
}

#endif
