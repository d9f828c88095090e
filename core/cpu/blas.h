/* The BLAS and LAPACK routines core/ calls (Fortran interface, 32-bit integers). The trailing
 * size_t arguments are the hidden lengths of the character arguments. */
#ifndef GPUML_BLAS_H
#define GPUML_BLAS_H
#include <stddef.h>

void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b,
            const int *ldb, const double *beta, double *c, const int *ldc, size_t transa_len,
            size_t transb_len);

void dsyrk_(const char *uplo, const char *trans, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *beta,
            double *c, const int *ldc, size_t uplo_len, size_t trans_len);

void dgemv_(const char *trans, const int *m, const int *n, const double *alpha,
            const double *a, const int *lda, const double *x, const int *incx,
            const double *beta, double *y, const int *incy, size_t trans_len);

void dtrsm_(const char *side, const char *uplo, const char *transa, const char *diag,
            const int *m, const int *n, const double *alpha, const double *a, const int *lda,
            double *b, const int *ldb, size_t side_len, size_t uplo_len, size_t transa_len,
            size_t diag_len);

/* LAPACK */
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info,
             size_t uplo_len);
void dtrtri_(const char *uplo, const char *diag, const int *n, double *a, const int *lda,
             int *info, size_t uplo_len, size_t diag_len);
void dsyevr_(const char *jobz, const char *range, const char *uplo, const int *n, double *a,
             const int *lda, const double *vl, const double *vu, const int *il, const int *iu,
             const double *abstol, int *m, double *w, double *z, const int *ldz, int *isuppz,
             double *work, const int *lwork, int *iwork, const int *liwork, int *info,
             size_t jobz_len, size_t range_len, size_t uplo_len);

/* Holds a multi-threaded BLAS to one thread until gm_blas_serial_end(the returned
 * value); see blas.c. */
int gm_blas_serial_begin(void);
void gm_blas_serial_end(int previous);

#endif
