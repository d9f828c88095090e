/* The metrics of kNN, distances and the kNN index on top of the backends' Euclidean
 * distances (core/metric.c). */
#ifndef GPUML_METRIC_H
#define GPUML_METRIC_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The rows as the backends search them: x itself for the Euclidean metric; for cosine a
 * new copy (*owned, which the caller frees) of each row scaled to unit length, "<stage>:
 * zeroRow" naming the first row of zeros (1-based). `what` names x in messages. */
gpuml_status gm_metric_rows(const gm_matrix *x, gpuml_metric metric, const char *what,
                            const char *stage, gm_matrix *out, void **owned);

/* The backends' Euclidean distances of unit rows (squared or not) turned into the
 * metric's distances, in place; nothing to do for the Euclidean metric. */
void gm_metric_finish(void *values, size_t count, gm_dtype dtype, gpuml_metric metric,
                      int squared);

/* Restores the order (distance, index) of m lists of k (column-major) after a monotone
 * change of the distances that may have made unequal distances equal. */
void gm_knn_order_ties(int64_t *index, void *dist, int64_t m, int64_t k, gm_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif
