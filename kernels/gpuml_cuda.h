/* The C interface of kernels/ as core/ sees it. core/ includes this only when
 * configure found CUDA (GPUML_HAVE_CUDA). Every function checks each CUDA call and
 * reports failures through gm_fail(); none aborts. */
#ifndef GPUML_CUDA_H
#define GPUML_CUDA_H

#include "gpuml.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills the cuda_* and device fields of *info. Returns the number of usable devices;
 * 0 with info->cuda_message saying why when there are none. */
int gpuml_cuda_query(gpuml_info *info);

#ifdef __cplusplus
}
#endif

#endif
