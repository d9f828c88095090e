/* The fourteen covariance models of the mixtures, with mclust's names: the covariance
 * of component k is Sigma_k = lambda_k D_k A_k D_k' (Banfield & Raftery 1993; Celeux &
 * Govaert 1995), each letter saying whether the volume lambda, the shape A (diagonal,
 * det 1) and the orientation D (orthogonal) are Equal across components, Variable, or
 * the Identity. The engines (gmm.h) compute the unconstrained statistics, n_k and the
 * scatter W_k = sum_i z_ik (x_i - mu_k)(x_i - mu_k)' (as W_k / n_k); this file turns them
 * into each model's maximum-likelihood covariances, on the host, for both backends.
 *
 * Closed forms: EII, VII, EEI, EVI, VVI, EEE, EEV, EVV, VVV. Iterative (alternating
 * the volumes/shapes and the rest, each step lowering the M-step objective
 *   F = sum_k n_k log|Sigma_k| + tr(W_k Sigma_k^-1)):
 *  - VEI, VEE, VEV: lambda_k = tr(W_k B^-1) / (n_k d), then the common B (shape, or
 *    shape and orientation) = sum_k W_k / lambda_k scaled to det 1;
 *  - EVE, VVE: the shapes are closed forms given D; D itself by sweeps of plane
 *    rotations, each the exact minimiser of sum_k tr(W_k D M_k D') over its angle
 *    with M_k = (lambda_k A_k)^-1 fixed (in the spirit of Flury and Gautschi's
 *    algorithm for common principal components): a few sweeps where the
 *    majorise-minimise step of Browne & McNicholas (2014) took hundreds of steps.
 * The iterative models start from the previous EM iteration's values (a GEM step: F
 * falls at every step, so the log-likelihood never decreases) and iterate until F
 * changes by less than GM_MSTEP_TOL relatively: far below what the EM test (tol on
 * the log-likelihood) can see. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "blas.h"
#include "gmm.h"
#include "params.h"

#define GM_MSTEP_TOL 1e-10
#define GM_MSTEP_MAX_ITER 500
/* Sweeps of rotations per M-step (EVE, VVE): each costs G d^3; the orientation, kept from
 * one EM iteration to the next, converges over the iterations (a GEM step either way). */
#define GM_MSTEP_MAX_SWEEPS 3

/* mclust's order. */
static const struct {
  const char *name;
  gm_gmm_structure structure;
} model_table[GPUML_GMM_N_MODELS] = {
    {"EII", GM_GMM_SPHERICAL_STRUCTURE}, {"VII", GM_GMM_SPHERICAL_STRUCTURE},
    {"EEI", GM_GMM_DIAGONAL_STRUCTURE},  {"VEI", GM_GMM_DIAGONAL_STRUCTURE},
    {"EVI", GM_GMM_DIAGONAL_STRUCTURE},  {"VVI", GM_GMM_DIAGONAL_STRUCTURE},
    {"EEE", GM_GMM_FULL_STRUCTURE},      {"VEE", GM_GMM_FULL_STRUCTURE},
    {"EVE", GM_GMM_FULL_STRUCTURE},      {"VVE", GM_GMM_FULL_STRUCTURE},
    {"EEV", GM_GMM_FULL_STRUCTURE},      {"VEV", GM_GMM_FULL_STRUCTURE},
    {"EVV", GM_GMM_FULL_STRUCTURE},      {"VVV", GM_GMM_FULL_STRUCTURE}};

int gm_gmm_valid_model(int model) { return model >= 0 && model < GPUML_GMM_N_MODELS; }

gm_gmm_structure gm_gmm_model_structure(gpuml_gmm_covariance model) {
  return gm_gmm_valid_model((int)model) ? model_table[model].structure : GM_GMM_FULL_STRUCTURE;
}

const char *gpuml_gmm_model_name(gpuml_gmm_covariance model, int64_t d) {
  if (!gm_gmm_valid_model((int)model)) return "";
  /* In one dimension every model is one of mclust's two univariate ones. */
  if (d == 1) return model_table[model].name[0] == 'E' ? "E" : "V";
  return model_table[model].name;
}

/* Names a user may give, with what they mean (gpuml_gmm_parse_covariance and the
 * "models" parameter). */
const char *const gm_gmm_model_names[] = {"EII", "VII", "EEI", "VEI", "EVI", "VVI", "EEE",
                                          "VEE", "EVE", "VVE", "EEV", "VEV", "EVV", "VVV",
                                          "full", "diag", "spherical", "E", "V", NULL};
const int gm_gmm_model_values[] = {
    GPUML_GMM_EII, GPUML_GMM_VII, GPUML_GMM_EEI, GPUML_GMM_VEI, GPUML_GMM_EVI,
    GPUML_GMM_VVI, GPUML_GMM_EEE, GPUML_GMM_VEE, GPUML_GMM_EVE, GPUML_GMM_VVE,
    GPUML_GMM_EEV, GPUML_GMM_VEV, GPUML_GMM_EVV, GPUML_GMM_VVV, GPUML_GMM_VVV,
    GPUML_GMM_VVI, GPUML_GMM_VII, GPUML_GMM_EII, GPUML_GMM_VII};

gpuml_status gpuml_gmm_parse_covariance(const char *name, gpuml_gmm_covariance *out) {
  for (int i = 0; name && gm_gmm_model_names[i]; i++)
    if (gm_same_name(name, gm_gmm_model_names[i])) {
      *out = (gpuml_gmm_covariance)gm_gmm_model_values[i];
      return GPUML_OK;
    }
  return gm_fail(GPUML_ERR_ARG, "gmm:badModel",
                 "unknown covariance model \"%s\": use one of mclust's EII, VII, EEI, VEI, EVI, "
                 "VVI, EEE, VEE, EVE, VVE, EEV, VEV, EVV, VVV (or \"full\", \"diag\", "
                 "\"spherical\" for VVV, VVI, VII; \"E\", \"V\" for EII, VII)",
                 name ? name : "(null)");
}

/* mclust's counts of the covariance parameters (nVarParams). */
static int64_t variance_params(gpuml_gmm_covariance model, int64_t G, int64_t d) {
  const int64_t rot = d * (d - 1) / 2;
  switch (model) {
    case GPUML_GMM_EII: return 1;
    case GPUML_GMM_VII: return G;
    case GPUML_GMM_EEI: return d;
    case GPUML_GMM_VEI: return G + (d - 1);
    case GPUML_GMM_EVI: return 1 + G * (d - 1);
    case GPUML_GMM_VVI: return G * d;
    case GPUML_GMM_EEE: return d + rot;
    case GPUML_GMM_VEE: return G + (d - 1) + rot;
    case GPUML_GMM_EVE: return 1 + G * (d - 1) + rot;
    case GPUML_GMM_VVE: return G * d + rot;
    case GPUML_GMM_EEV: return 1 + (d - 1) + G * rot;
    case GPUML_GMM_VEV: return G + (d - 1) + G * rot;
    case GPUML_GMM_EVV: return 1 + G * (d - 1) + G * rot;
    case GPUML_GMM_VVV: return G * (d + rot);
  }
  return 0;
}

int64_t gpuml_gmm_npar(gpuml_gmm_covariance model, int64_t G, int64_t d) {
  if (d == 1) model = model_table[model].name[0] == 'E' ? GPUML_GMM_EII : GPUML_GMM_VII;
  return (G - 1) + G * d + variance_params(model, G, d);
}

int64_t gpuml_gmm_models_tried(int64_t n, int64_t d, const gpuml_gmm_params *params,
                               gpuml_gmm_covariance *models) {
  if (params && params->n_models > 0) {
    const int64_t count =
        params->n_models < GPUML_GMM_N_MODELS ? params->n_models : GPUML_GMM_N_MODELS;
    for (int64_t i = 0; i < count; i++) models[i] = params->models[i];
    return count;
  }
  int64_t count = 0;
  for (int m = 0; m < GPUML_GMM_N_MODELS; m++) {
    /* mclust's rule: E and V in one dimension; only the spherical and diagonal models
     * when there are no more rows than columns. */
    if (d == 1 && m != GPUML_GMM_EII && m != GPUML_GMM_VII) continue;
    if (n <= d && model_table[m].structure == GM_GMM_FULL_STRUCTURE) continue;
    models[count++] = (gpuml_gmm_covariance)m;
  }
  return count;
}

/* ---- M-step --------------------------------------------------------------------------- */

void gm_gmm_mstep_free(gm_gmm_mstep *s) {
  if (!s) return;
  free(s->W);
  free(s->vec);
  free(s->val);
  free(s->psi);
  free(s->scale);
  free(s->lambda);
  free(s->matrices);
  free(s->shape);
  free(s->work);
  free(s->iwork);
  memset(s, 0, sizeof *s);
}

int gm_gmm_mstep_alloc(gm_gmm_mstep *s, int64_t d, int64_t gmax) {
  memset(s, 0, sizeof *s);
  s->d = d;
  s->gmax = gmax;
  const size_t dd = (size_t)d * (size_t)d, K = (size_t)gmax;
  s->W = gm_alloc(dd * K, sizeof(double));
  s->vec = gm_alloc(dd * K, sizeof(double));
  s->val = gm_alloc((size_t)d * K, sizeof(double));
  s->psi = gm_alloc((size_t)d * K, sizeof(double));
  s->scale = gm_alloc((size_t)d * K, sizeof(double));
  s->lambda = gm_alloc(K, sizeof(double));
  s->matrices = gm_alloc(5 * dd, sizeof(double));
  s->shape = gm_alloc((size_t)d, sizeof(double));
  s->lwork = (int)(40 * d + 5 * d * d + 64);
  s->work = gm_alloc((size_t)s->lwork + (size_t)d, sizeof(double));
  s->iwork = gm_alloc((size_t)(12 * d + 8), sizeof(int));
  if (!s->W || !s->vec || !s->val || !s->psi || !s->scale || !s->lambda ||
      !s->matrices || !s->shape || !s->work || !s->iwork) {
    gm_gmm_mstep_free(s);
    return 0;
  }
  s->D = s->matrices;
  s->B = s->matrices + dd;
  s->Binv = s->matrices + 2 * dd;
  s->a = s->matrices + 3 * dd;
  s->tmp = s->matrices + 4 * dd;
  return 1;
}

/* Eigenvalues (descending) and eigenvectors (columns, in the same order) of the
 * symmetric d x d matrix A (not changed; A may not be s->a). Returns 0 on success. */
static int sym_eigen(gm_gmm_mstep *s, const double *A, double *val, double *vec) {
  const int d = (int)s->d, lwork = s->lwork, liwork = 10 * d + 8;
  memcpy(s->a, A, (size_t)d * (size_t)d * sizeof(double));
  double *ascending = s->work + s->lwork;
  int found = 0, info = 0, il = 1, iu = d;
  const double vl = 0, vu = 0, abstol = 0;
  dsyevr_("V", "A", "U", &d, s->a, &d, &vl, &vu, &il, &iu, &abstol, &found, ascending, vec, &d,
          s->iwork + liwork, s->work, &lwork, s->iwork, &liwork, &info, 1, 1, 1);
  if (info != 0 || found != d) return 1;
  for (int j = 0; j < d; j++) val[j] = ascending[d - 1 - j];
  for (int j = 0; j < d / 2; j++)
    for (int i = 0; i < d; i++) {
      const double t = vec[i + j * d];
      vec[i + j * d] = vec[i + (d - 1 - j) * d];
      vec[i + (d - 1 - j) * d] = t;
    }
  return 0;
}

/* out = V diag(v) V' (d x d, V column-major). */
static void compose(int64_t d, const double *V, const double *v, double scale, double *out) {
  for (int64_t b = 0; b < d; b++)
    for (int64_t a = 0; a <= b; a++) {
      double s = 0;
      for (int64_t j = 0; j < d; j++) s += V[a + j * d] * v[j] * V[b + j * d];
      out[a + b * d] = out[b + a * d] = s * scale;
    }
}

/* The geometric mean of v[0..d-1] (0 when one is 0, NaN when one is negative). */
static double geometric_mean(const double *v, int64_t d, int64_t stride) {
  double s = 0;
  for (int64_t j = 0; j < d; j++) s += log(v[j * stride]);
  return exp(s / (double)d);
}

/* out = D' W D (d x d; tmp: d x d scratch). */
static void rotate_into(int64_t d, const double *D, const double *W, double *tmp, double *out) {
  for (int64_t j = 0; j < d; j++)
    for (int64_t a = 0; a < d; a++) {
      double t = 0;
      for (int64_t b = 0; b < d; b++) t += W[a + b * d] * D[b + j * d];
      tmp[a + j * d] = t;
    }
  for (int64_t l = 0; l < d; l++)
    for (int64_t j = 0; j <= l; j++) {
      double t = 0;
      for (int64_t a = 0; a < d; a++) t += D[a + j * d] * tmp[a + l * d];
      out[j + l * d] = out[l + j * d] = t;
    }
}

/* Columns j and l of A (`rows` rows, leading dimension ld) turned by (c, s):
 * a_j <- c a_j + s a_l, a_l <- -s a_j + c a_l. */
static void turn_columns(double *A, int64_t rows, int64_t ld, int64_t j, int64_t l, double c,
                         double s) {
  for (int64_t a = 0; a < rows; a++) {
    const double x = A[a + j * ld], y = A[a + l * ld];
    A[a + j * ld] = c * x + s * y;
    A[a + l * ld] = -s * x + c * y;
  }
}

/* One sweep of plane rotations of the common orientation D (EVE, VVE): for each pair of
 * columns (j, l), the angle t that minimises sum_k tr(W_k D M_k D') with the other
 * columns and M_k = diag(scale[k d ..]) fixed. In terms of R_k = D' W_k D that sum
 * changes by P cos 2t + Q sin 2t with P = sum_k (m_kj - m_kl)(R_k[jj] - R_k[ll]) / 2 and
 * Q = sum_k (m_kj - m_kl) R_k[jl], least at (cos 2t, sin 2t) = -(P, Q) / |(P, Q)|: the
 * exact minimiser, so the objective never rises. R_k follow each rotation. Returns the
 * number of rotations made. */
static int64_t orientation_sweep(gm_gmm_mstep *s, int64_t G, const int *active,
                                 const double *scale, double *R) {
  const int64_t d = s->d, dd = d * d;
  int64_t turned = 0;
  /* A rotation lowers the objective by P + |(P, Q)|; one that gains less than this share
   * of it is skipped (near ties, the angle is arbitrary and the gain nothing). */
  double objective = 0;
  for (int64_t k = 0; k < G; k++)
    if (active[k])
      for (int64_t j = 0; j < d; j++) objective += scale[k * d + j] * R[k * dd + j + j * d];
  const double least_gain = 1e-13 * fabs(objective);
  for (int64_t j = 0; j < d; j++)
    for (int64_t l = j + 1; l < d; l++) {
      double P = 0, Q = 0;
      for (int64_t k = 0; k < G; k++) {
        if (!active[k]) continue;
        const double *Rk = R + k * dd, m = scale[k * d + j] - scale[k * d + l];
        P += m * (Rk[j + j * d] - Rk[l + l * d]) / 2;
        Q += m * Rk[j + l * d];
      }
      const double r = hypot(P, Q);
      if (!(r > 0) || !(P + r > least_gain)) continue;
      const double cos2 = -P / r, sin2 = -Q / r;
      double c, sn;
      if (cos2 >= 0) {
        c = sqrt((1 + cos2) / 2);
        sn = sin2 / (2 * c);
      } else {
        sn = (sin2 < 0 ? -1 : 1) * sqrt((1 - cos2) / 2);
        c = sin2 / (2 * sn);
      }
      if (fabs(sn) < 1e-15) continue;
      turned++;
      turn_columns(s->D, d, d, j, l, c, sn);
      for (int64_t k = 0; k < G; k++) {
        if (!active[k]) continue;
        double *Rk = R + k * dd;
        turn_columns(Rk, d, d, j, l, c, sn); /* R J */
        for (int64_t q = 0; q < d; q++) {    /* J' (R J): the rows */
          const double x = Rk[j + q * d], y = Rk[l + q * d];
          Rk[j + q * d] = c * x + sn * y;
          Rk[l + q * d] = -sn * x + c * y;
        }
      }
    }
  return turned;
}

/* Fills Sigma_k for every active k; a covariance that cannot be formed (a singular
 * scatter where the model divides by its determinant) is left NaN, so that the factor
 * step reports the component as not positive definite. */
static void model_mstep(gm_gmm_mstep *s, gpuml_gmm_covariance model, int64_t G,
                        const double *nk, const int *active, double *cov, double reg);

gpuml_status gm_gmm_model_mstep(gm_gmm_mstep *s, gpuml_gmm_covariance model, int64_t G,
                                const double *nk, const int *active, double *cov, double reg) {
  /* The LAPACK calls here are on d x d matrices: a threaded BLAS would spend far more
   * on waking its threads than on the work. */
  const int blas_threads = gm_blas_serial_begin();
  model_mstep(s, model, G, nk, active, cov, reg);
  gm_blas_serial_end(blas_threads);
  return GPUML_OK;
}

static void model_mstep(gm_gmm_mstep *s, gpuml_gmm_covariance model, int64_t G,
                        const double *nk, const int *active, double *cov, double reg) {
  const int64_t d = s->d, dd = d * d;
  double N = 0;
  int64_t count = 0;
  for (int64_t k = 0; k < G; k++)
    if (active[k]) {
      N += nk[k];
      count++;
      double *W = s->W + k * dd;
      for (int64_t e = 0; e < dd; e++) W[e] = cov[k * dd + e] * nk[k];
    }
  if (!count) return;
  double *B = s->B;
  switch (model) {
    case GPUML_GMM_VVV:
    case GPUML_GMM_VVI:
      break; /* the engine's statistics are the estimates */
    case GPUML_GMM_EII:
    case GPUML_GMM_VII:
    case GPUML_GMM_EEI:
    case GPUML_GMM_EEE: {
      memset(B, 0, (size_t)dd * sizeof(double));
      for (int64_t k = 0; k < G; k++)
        if (active[k])
          for (int64_t e = 0; e < dd; e++) B[e] += s->W[k * dd + e];
      for (int64_t k = 0; k < G; k++) {
        if (!active[k]) continue;
        double *S = cov + k * dd;
        if (model == GPUML_GMM_EEE) {
          for (int64_t e = 0; e < dd; e++) S[e] = B[e] / N;
        } else if (model == GPUML_GMM_EEI) {
          memset(S, 0, (size_t)dd * sizeof(double));
          for (int64_t j = 0; j < d; j++) S[j + j * d] = B[j + j * d] / N;
        } else {
          const double *W = model == GPUML_GMM_EII ? B : s->W + k * dd;
          const double n_used = model == GPUML_GMM_EII ? N : nk[k];
          double t = 0;
          for (int64_t j = 0; j < d; j++) t += W[j + j * d];
          memset(S, 0, (size_t)dd * sizeof(double));
          for (int64_t j = 0; j < d; j++) S[j + j * d] = t / (n_used * (double)d);
        }
      }
      break;
    }
    case GPUML_GMM_EVI: {
      double total = 0;
      for (int64_t k = 0; k < G; k++)
        if (active[k]) {
          s->lambda[k] = geometric_mean(s->W + k * dd, d, d + 1);
          total += s->lambda[k];
        }
      for (int64_t k = 0; k < G; k++) {
        if (!active[k]) continue;
        double *S = cov + k * dd;
        const double *W = s->W + k * dd;
        memset(S, 0, (size_t)dd * sizeof(double));
        for (int64_t j = 0; j < d; j++) S[j + j * d] = total / N * W[j + j * d] / s->lambda[k];
      }
      break;
    }
    case GPUML_GMM_EVV: {
      double total = 0;
      for (int64_t k = 0; k < G; k++)
        if (active[k]) {
          double *val = s->val + k * d;
          if (sym_eigen(s, s->W + k * dd, val, s->vec + k * dd)) val[d - 1] = NAN;
          s->lambda[k] = val[d - 1] > 0 ? geometric_mean(val, d, 1) : NAN;
          total += s->lambda[k];
        }
      for (int64_t k = 0; k < G; k++)
        if (active[k])
          for (int64_t e = 0; e < dd; e++) cov[k * dd + e] = total / N * s->W[k * dd + e] / s->lambda[k];
      break;
    }
    case GPUML_GMM_EEV:
    case GPUML_GMM_VEV: {
      /* W_k = L_k Omega_k L_k'; the shape A is common, sum_k Omega_k / lambda_k scaled. */
      double *A = s->tmp;  /* d: the common shape times its volume */
      for (int64_t k = 0; k < G; k++)
        if (active[k] && sym_eigen(s, s->W + k * dd, s->val + k * d, s->vec + k * dd))
          for (int64_t j = 0; j < d; j++) s->val[k * d + j] = NAN;
      for (int64_t j = 0; j < d; j++) {
        A[j] = 0;
        for (int64_t k = 0; k < G; k++)
          if (active[k]) A[j] += s->val[k * d + j];
      }
      if (model == GPUML_GMM_EEV) {
        for (int64_t k = 0; k < G; k++)
          if (active[k]) compose(d, s->vec + k * dd, A, 1 / N, cov + k * dd);
        break;
      }
      double g = geometric_mean(A, d, 1);
      for (int64_t j = 0; j < d; j++) A[j] = s->warm ? s->shape[j] : A[j] / g;
      double last = INFINITY;
      for (int it = 0; it < GM_MSTEP_MAX_ITER; it++) {
        double F = 0;
        for (int64_t k = 0; k < G; k++) {
          if (!active[k]) continue;
          double t = 0;
          for (int64_t j = 0; j < d; j++) t += s->val[k * d + j] / A[j];
          s->lambda[k] = t / (nk[k] * (double)d);
          F += nk[k] * (double)d * log(s->lambda[k]);
        }
        for (int64_t j = 0; j < d; j++) {
          A[j] = 0;
          for (int64_t k = 0; k < G; k++)
            if (active[k]) A[j] += s->val[k * d + j] / s->lambda[k];
        }
        g = geometric_mean(A, d, 1);
        for (int64_t j = 0; j < d; j++) A[j] /= g;
        if (!isfinite(F) || fabs(last - F) <= GM_MSTEP_TOL * fabs(F)) break;
        last = F;
      }
      /* the lambdas belong to the shape before its last update: recompute them */
      for (int64_t k = 0; k < G; k++) {
        if (!active[k]) continue;
        double t = 0;
        for (int64_t j = 0; j < d; j++) t += s->val[k * d + j] / A[j];
        s->lambda[k] = t / (nk[k] * (double)d);
      }
      memcpy(s->shape, A, (size_t)d * sizeof(double));
      s->warm = isfinite(A[0]);
      for (int64_t k = 0; k < G; k++)
        if (active[k]) compose(d, s->vec + k * dd, A, s->lambda[k], cov + k * dd);
      break;
    }
    case GPUML_GMM_VEI:
    case GPUML_GMM_VEE: {
      /* B: the common shape (and orientation for VEE), det 1. */
      const int full = model == GPUML_GMM_VEE;
      if (!s->warm) { /* else B holds the last M-step's shape */
        memset(B, 0, (size_t)dd * sizeof(double));
        for (int64_t k = 0; k < G; k++)
          if (active[k])
            for (int64_t e = 0; e < dd; e++)
              if (full || e % (d + 1) == 0) B[e] += s->W[k * dd + e];
      }
      double *Binv = s->Binv, *val = s->val, *vec = s->vec;
      double last = INFINITY;
      for (int it = 0; it < GM_MSTEP_MAX_ITER; it++) {
        /* B / |B|^(1/d) and its inverse */
        double logdet = 0;
        if (full) {
          if (sym_eigen(s, B, val, vec) || !(val[d - 1] > 0)) {
            for (int64_t k = 0; k < G; k++)
              if (active[k])
                for (int64_t e = 0; e < dd; e++) cov[k * dd + e] = NAN;
            return;
          }
          for (int64_t j = 0; j < d; j++) logdet += log(val[j]);
          const double g = exp(logdet / (double)d);
          double *inv = s->tmp;
          for (int64_t j = 0; j < d; j++) inv[j] = g / val[j];
          compose(d, vec, inv, 1, Binv);
          for (int64_t e = 0; e < dd; e++) B[e] /= g;
        } else {
          for (int64_t j = 0; j < d; j++) logdet += log(B[j + j * d]);
          const double g = exp(logdet / (double)d);
          memset(Binv, 0, (size_t)dd * sizeof(double));
          for (int64_t j = 0; j < d; j++) {
            B[j + j * d] /= g;
            Binv[j + j * d] = 1 / B[j + j * d];
          }
        }
        double F = 0;
        for (int64_t k = 0; k < G; k++) {
          if (!active[k]) continue;
          const double *W = s->W + k * dd;
          double t = 0;
          if (full)
            for (int64_t e = 0; e < dd; e++) t += W[e] * Binv[e];
          else
            for (int64_t j = 0; j < d; j++) t += W[j + j * d] * Binv[j + j * d];
          s->lambda[k] = t / (nk[k] * (double)d);
          F += nk[k] * (double)d * log(s->lambda[k]);
        }
        const int done = !isfinite(F) || fabs(last - F) <= GM_MSTEP_TOL * fabs(F);
        last = F;
        if (done || it == GM_MSTEP_MAX_ITER - 1) break;
        memset(B, 0, (size_t)dd * sizeof(double));
        for (int64_t k = 0; k < G; k++)
          if (active[k])
            for (int64_t e = 0; e < dd; e++)
              if (full || e % (d + 1) == 0) B[e] += s->W[k * dd + e] / s->lambda[k];
      }
      for (int64_t k = 0; k < G; k++)
        if (active[k])
          for (int64_t e = 0; e < dd; e++) cov[k * dd + e] = s->lambda[k] * B[e];
      s->warm = isfinite(B[0]);
      break;
    }
    case GPUML_GMM_EVE:
    case GPUML_GMM_VVE: {
      const int equal_volume = model == GPUML_GMM_EVE;
      if (!s->warm) {
        /* The eigenvectors of the pooled scatter. */
        memset(B, 0, (size_t)dd * sizeof(double));
        for (int64_t k = 0; k < G; k++)
          if (active[k])
            for (int64_t e = 0; e < dd; e++) B[e] += s->W[k * dd + e];
        if (sym_eigen(s, B, s->val, s->D)) {
          for (int64_t k = 0; k < G; k++)
            if (active[k])
              for (int64_t e = 0; e < dd; e++) cov[k * dd + e] = NAN;
          return;
        }
        s->warm = 1;
      }
      /* R_k = D' W_k D, kept up to date through the rotations of D. */
      double *R = s->vec;
      for (int64_t k = 0; k < G; k++)
        if (active[k]) rotate_into(d, s->D, s->W + k * dd, s->tmp, R + k * dd);
      /* psi[k d + j] = R_k[j, j]; scale = M_k (the inverse variances). */
      double *psi = s->psi, *scale = s->scale;
      double last = INFINITY, volume = 1;
      for (int it = 0; it < GM_MSTEP_MAX_ITER; it++) {
        double F = 0, total = 0;
        for (int64_t k = 0; k < G; k++) {
          if (!active[k]) continue;
          for (int64_t j = 0; j < d; j++) psi[k * d + j] = R[k * dd + j + j * d];
          if (equal_volume) {
            s->lambda[k] = geometric_mean(psi + k * d, d, 1);
            total += s->lambda[k];
          } else {
            for (int64_t j = 0; j < d; j++) F += nk[k] * log(psi[k * d + j] / nk[k]);
          }
        }
        if (equal_volume) {
          volume = total / N;
          F = N * (double)d * log(volume);
        }
        for (int64_t k = 0; k < G; k++) {
          if (!active[k]) continue;
          for (int64_t j = 0; j < d; j++)
            scale[k * d + j] = equal_volume ? s->lambda[k] / (volume * psi[k * d + j])
                                            : nk[k] / psi[k * d + j];
        }
        const int done = !isfinite(F) || fabs(last - F) <= GM_MSTEP_TOL * fabs(F);
        last = F;
        if (done || it == GM_MSTEP_MAX_SWEEPS) break;
        if (!orientation_sweep(s, G, active, scale, R)) break; /* no rotation left */
      }
      for (int64_t k = 0; k < G; k++) {
        if (!active[k]) continue;
        for (int64_t j = 0; j < d; j++) s->tmp[j] = 1 / scale[k * d + j];
        compose(d, s->D, s->tmp, 1, cov + k * dd);
      }
      break;
    }
  }
  if (reg > 0)
    for (int64_t k = 0; k < G; k++)
      if (active[k])
        for (int64_t j = 0; j < d; j++) cov[k * dd + j + j * d] += reg;
  return;
}
