/* The version, how the library was built, and the environment variables it reads. */
#include <stdio.h>
#include <string.h>
#include "backend.h"

const char *gpuml_version(void) { return GPUML_VERSION; }

/* Every environment variable gpuml reads, in one place (the README lists the same). */
static const struct {
  const char *name, *meaning;
} env_table[] = {
    {"GPUML_GPU_MEMORY_LIMIT", "bytes of device memory a call may use (K/M/G suffixes); "
                               "default 80% of the free memory"},
    {"GPUML_CUDA_POOL_CACHE", "bytes of device memory kept cached between calls (K/M/G); "
                              "default a quarter of the device"},
    {"GPUML_SHARDS", "development: split the work of several devices (kNN references, the "
                     "mixtures' rows, the density passes, t-SNE's points) into this many "
                     "logical shards"},
    {"GPUML_SHARD_THREADS", "development: run the shards on this many host threads (the "
                            "runner of several devices, on one device or the CPU)"},
    {"GPUML_CUDA_TILE", "development: tiles of at most this many rows, data not resident"},
    {"GPUML_CUDA_REF_TILE", "development: reference tile rows with the data resident"},
    {"GPUML_CUDA_QUERY_TILE", "development: query tile rows with the data resident"},
    {"GPUML_CUDA_KNN_SELECT", "development: \"general\" forces the radix selection for every k"},
    {"GPUML_CUDA_KNN_FUSED", "development: 0 takes the tile-by-tile kNN path instead of the "
                             "fused kernel"},
    {"GPUML_CUDA_FUSED_SPLIT", "development: the fused kNN kernel with the references split "
                               "into blocks of this many"},
    {"GPUML_CUDA_KNN_SPLIT", "development: 0 uses plain SGEMM instead of the split TF32 GEMM "
                             "for fp32"},
    {"GPUML_CUDA_KNN_SYMMETRIC", "development: 0 takes the row-by-row path instead of the "
                                 "symmetric schedule of a one-device self-search (tiles on "
                                 "and above the diagonal feed both points' lists; the default)"},
    {"GPUML_CUDA_KNN_RECHECK", "development: \"all\" certifies no kNN list: every query of "
                               "the plain TF32 pass goes to the split pass, and in precision "
                               "auto then to the fp64 re-check"},
    {"GPUML_CUDA_KNN_PLAIN", "development: 0 skips the certified plain TF32 candidate pass of "
                             "fp32 kNN (the split TF32 pass at once)"},
    {"GPUML_CUDA_KNN_HALF", "development: 0 keeps the plain candidate pass's GEMM in TF32 "
                            "instead of fp16"},
    {"GPUML_CUDA_KNN_HALF_TILE", "development: 0 has the plain candidate pass's fp16 GEMM "
                                 "write fp32 distance tiles instead of fp16 ones"},
    {"GPUML_CUDA_KNN_RERANK", "development: \"thread\" computes the kNN candidates' exact "
                              "distances a thread per candidate instead of staging their rows "
                              "through shared memory"},
    {"GPUML_CUDA_KNN_SCREEN", "development: 0 turns off the fused TF32 screen of the kNN "
                              "search (d <= 128, the references resident); \"all\" takes it "
                              "at any d. Read when a kNN index is built too: the index keeps "
                              "the fp16 copy only where the screen does not serve"},
    {"GPUML_CUDA_KNN_SCREEN_SLOTS", "development: queue entries per query of the kNN screen "
                                    "(small values force its overflow path)"},
    {"GPUML_CUDA_KNN_SCREEN_CHUNK", "development: the longest chunk of references the kNN "
                                    "screen takes at once"},
    {"GPUML_GMM_FUSED", "development: 1 takes the fused FMA kernels of the full-covariance "
                        "mixture steps instead of the tensor-core kernels or the GEMM path"},
    {"GPUML_GMM_DMMA", "development: 0 never takes the tensor-core (fp64 DMMA) kernels of "
                       "the full-covariance mixture steps, which are the default where they "
                       "apply (d <= 64, sm_80 code); 1 takes them even with GPUML_GMM_FUSED=1"},
    {"GPUML_DPC_CELLS", "development: \"mean\" gives density peaks' cutoff density the mean "
                        "density's cells that delta and the halo walk, instead of its own"},
    {"GPUML_DPC_CELLS_PER_POINT", "development: the cap of the cutoff density's own cells, "
                                  "per point (default: the backend's, 2 on the CPU, 4 on "
                                  "the GPU)"},
    {"GPUML_DPC_POINTS_PER_CELL", "development: the points in a typical point's cell that "
                                  "the cutoff density's own cells aim at (default 16 up to "
                                  "3-d, 8 above; 20 in 3-d on the GPU)"},
    {"GPUML_CUDA_DPC_LANES", "development: 0 has the GPU's screened cutoff count test one "
                             "point a step against the lanes' points instead of the points "
                             "across the lanes; \"search\" has the lanes find their points "
                             "by stepping through the segments instead of counting bits "
                             "(the same counts)"},
    {"GPUML_CUDA_DPC_LOCKSTEP", "development: 0 has each warp of the GPU's screened cutoff "
                                "count walk its own item's rows instead of the block's "
                                "warps walking the rows of their items' boxes together "
                                "(the same counts)"},
    {"GPUML_CUDA_DPC_SYM", "development: 0 has the GPU's screened cutoff count (on one device "
                           "or over several devices' parts) test each pair of crossed cells "
                           "from both cells' items instead of once, from the lower cell, for "
                           "both (the same counts)"},
    {"GPUML_CUDA_DPC_ROW_TABLE", "development: 0 has the GPU's symmetric cutoff count "
                                 "classify each row from its offsets (two fp64 square "
                                 "roots a row) instead of reading the pass's table of the "
                                 "rows' classes (the same counts)"},
    {"GPUML_TOUCH_PAGES", "development: 0 leaves the pages of a GPU fit's results to the "
                          "copies that fill them instead of faulting them in on a thread of "
                          "their own while the device works (the same results)"},
    {"GPUML_CUDA_DPC_ITEMS", "development: \"cells\" lays the items of the GPU's screened "
                             "cutoff count out cell by cell instead of the cells' first "
                             "items before the rest (the same counts)"},
    {"GPUML_CUDA_DPC_SUB_CELLS", "development: 0 keeps the points of a cell of the GPU's "
                                 "cutoff density in index order instead of the Morton "
                                 "order of its sub-cells (the same counts)"},
    {"GPUML_CUDA_DPC_DELTA_CELLS", "development: \"mean\" walks density peaks' delta on the "
                                   "GPU over the mean density's cells from ring 0, instead "
                                   "of the first rings over the cutoff density's own cells "
                                   "(up to 6-d; the same answers)"},
    {"GPUML_CUDA_DPC_RINGS", "development: the rings a thread walks for density peaks' delta "
                             "before a warp takes the point (0: every point past its cell)"},
    {"GPUML_DPC_FP32", "development: 0 turns off the fp32 screen of density peaks' cutoff "
                       "count on the CPU (every tested pair in fp64; the same counts)"},
    {"GPUML_CUDA_DPC_FP32", "development: 0 turns off the fp32 screen of density peaks' "
                            "cutoff count on the GPU (every tested pair in fp64; the same "
                            "counts)"},
    {"GPUML_CUDA_DPC_ASSIGN", "development: \"all\" labels every fit's clusters on the GPU, "
                              "\"host\" none (default: from 2^20 points)"},
    {"GPUML_CUDA_PAGEABLE", "development: 1 uploads straight from pageable memory instead of "
                            "the page-locked ring (for comparisons)"},
    {"GPUML_TRACE", "development: 1 writes each traced step of a call and its wall time to "
                    "stderr (the GPU's work waited for at each step)"},
    {"GPUML_TEST_BACKENDS", "tests: the backends the C tests run (\"cpu\", \"cuda\", \"cpu,cuda\")"},
    {"GPUML_TEST_BACKEND", "tests: the backend of the R tests, and the C tests' older form"},
    {"GPUML_TEST_PRECISION", "tests: \"auto\", \"double\" or \"single\""},
    {"GPUML_REQUIRE_PEERS", "tests: 1 makes a missing peer package or data set a failure"},
    {"GPUML_BENCH_SKIP_LARGE", "benchmarks: 1 skips the largest kNN case"},
};

const char *gpuml_env_name(int i) {
  return i >= 0 && i < (int)(sizeof env_table / sizeof env_table[0]) ? env_table[i].name : NULL;
}

const char *gpuml_env_meaning(int i) {
  return i >= 0 && i < (int)(sizeof env_table / sizeof env_table[0]) ? env_table[i].meaning
                                                                     : NULL;
}

gpuml_status gpuml_build_info(gpuml_build *build) {
  gm_clear_error();
  if (!build) return gm_fail(GPUML_ERR_ARG, "badArgument", "build must not be NULL");
  memset(build, 0, sizeof *build);
  snprintf(build->version, sizeof build->version, "%s", GPUML_VERSION);
#if defined(__VERSION__)
  snprintf(build->compiler, sizeof build->compiler, "%s", __VERSION__);
#endif
#if defined(_OPENMP)
  build->openmp = _OPENMP;
#endif
  const gm_backend *cuda = gm_backend_get(GPUML_BACKEND_CUDA);
  if (cuda) {
    build->cuda_compiled = 1;
    build->cuda_runtime_built = cuda->runtime_built;
    snprintf(build->cuda_architectures, sizeof build->cuda_architectures, "%s",
             cuda->architectures ? cuda->architectures : "");
  }
#if defined(GPUML_HAVE_MPI)
  build->mpi = 1;
#endif
  return GPUML_OK;
}
