/* BLAS threading. gpuml runs its GEMM tiles inside its own OpenMP threads, one tile per
 * thread; a multi-threaded BLAS underneath would fight those threads for the cores
 * (measured: 2 threads slower than 1). OpenBLAS is therefore held to one thread for the
 * duration of a call and restored after. Other BLAS libraries lack these symbols, and
 * the weak references leave them alone. */
#include "blas.h"

#if defined(__GNUC__)
extern int openblas_get_num_threads(void) __attribute__((weak));
extern void openblas_set_num_threads(int) __attribute__((weak));
#define GM_HAVE_WEAK 1
#endif

#ifdef GM_HAVE_WEAK
int gm_blas_serial_begin(void) {
  if (!openblas_get_num_threads || !openblas_set_num_threads) return 0;
  int previous = openblas_get_num_threads();
  if (previous > 1) openblas_set_num_threads(1);
  return previous;
}

void gm_blas_serial_end(int previous) {
  if (previous > 1 && openblas_set_num_threads) openblas_set_num_threads(previous);
}
#else
int gm_blas_serial_begin(void) { return 0; }
void gm_blas_serial_end(int previous) { (void)previous; }
#endif
