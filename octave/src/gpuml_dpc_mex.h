/*
 * gpuml_dpc_mex.h: what the density peaks gateways share: the core's centres, clusters
 * and halo as mxArrays (1-based).
 */
#ifndef GPUML_DPC_MEX_H
#define GPUML_DPC_MEX_H

#include <stdint.h>
#include "gpuml_mex.h"

static inline void gpuml_dpc_mex_cut_outputs(const int64_t *centres, int64_t ncentres,
                                             const int64_t *cluster, const int *halo,
                                             int64_t n, mxArray **peaks, mxArray **clusters,
                                             mxArray **rhalo) {
  *peaks = mxCreateDoubleMatrix((mwSize)ncentres, 1, mxREAL);
  *clusters = mxCreateDoubleMatrix((mwSize)n, 1, mxREAL);
  *rhalo = mxCreateLogicalMatrix((mwSize)n, 1);
  double *pp = mxGetPr(*peaks), *cp = mxGetPr(*clusters);
  mxLogical *hp = mxGetLogicals(*rhalo);
  for (int64_t c = 0; c < ncentres; c++) pp[c] = (double)(centres[c] + 1);
  for (int64_t i = 0; i < n; i++) {
    cp[i] = (double)(cluster[i] + 1);
    hp[i] = halo[i] != 0;
  }
}

static inline int gpuml_dpc_mex_has_selection(const gpuml_dpc_params *p) {
  return p->select.has_k || p->select.has_rho || p->select.has_delta;
}

#endif
