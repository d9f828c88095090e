/* The BLAS routines core/ calls (Fortran interface, 32-bit integers). The trailing
 * size_t arguments are the hidden lengths of the character arguments. */
#ifndef GPUML_BLAS_H
#define GPUML_BLAS_H
#include <stddef.h>

void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b,
            const int *ldb, const double *beta, double *c, const int *ldc, size_t transa_len,
            size_t transb_len);

/* Holds a multi-threaded BLAS to one thread until gm_blas_serial_end(the returned
 * value); see blas.c. */
int gm_blas_serial_begin(void);
void gm_blas_serial_end(int previous);

#endif
