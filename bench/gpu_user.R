# The README's GPU headline figures from R, as users call gpuml: R double matrices in,
# R results out, backend = "cuda". For every case:
#   first  the first call of a fresh R session (its own Rscript process: library(gpuml),
#          the data made, then the one call timed; CUDA context, handles and module
#          loading included);
#   warm   the best of 3 calls in one session after that first one.
# Per-iteration costs of EM come from fits of many iterations (5 and 105 at tol = 0, best
# of 3 each): (t105 - t5) / 100, never from the difference of two single runs.
#
#   Rscript bench/gpu_user.R [--data DIR] [--only case1,case2] [--skip case1,...] [--repeat N]
#   Rscript bench/gpu_user.R --case NAME [--data DIR]    (one fresh-session first call)
# DIR holds Fashion-MNIST's four IDX .gz files (default: /usr/share/datasets/fashion-mnist,
# else ./bench-data). Prints "USER <case> first <s> warm <s>" lines and a table last.
suppressPackageStartupMessages(library(gpuml))

args <- commandArgs(trailingOnly = TRUE)
arg_value <- function(name, default = NULL) {
  at <- match(name, args)
  if (is.na(at) || at == length(args)) default else args[[at + 1L]]
}
data_dir <- arg_value("--data", "")
if (!nzchar(data_dir) || !dir.exists(data_dir))
  data_dir <- if (dir.exists("/usr/share/datasets/fashion-mnist"))
    "/usr/share/datasets/fashion-mnist" else "bench-data"

fashion <- function() {
  tr <- read_fashion_mnist(data_dir, subset = "train")
  te <- read_fashion_mnist(data_dir, subset = "test")
  rbind(tr$x, te$x)
}

# Each case: data() makes the input (not timed), run(x) is the call users make.
uniform <- function(n, d, seed = 1) {
  set.seed(seed)
  matrix(runif(n * d), n, d)
}
mixture <- function(n, d, G, seed = 1) {
  set.seed(seed)
  centres <- matrix(rnorm(G * d, sd = 4), G, d)
  labels <- sample.int(G, n, replace = TRUE)
  centres[labels, ] + matrix(rnorm(n * d), n, d)
}
blobs2 <- function(n, d, seed = 1) {
  set.seed(seed)
  G <- 10
  centres <- matrix(runif(G * d, 0, 10), G, d)
  labels <- sample.int(G, n, replace = TRUE)
  centres[labels, ] + matrix(rnorm(n * d, sd = 0.4), n, d)
}
em_iteration <- function(x, G, model) {
  # seconds per EM iteration from fits of 5 and 105 iterations (tol 0), best of 3 each
  fit_time <- function(iters) {
    min(replicate(3, system.time(gpu_gmm(x, G = G, modelNames = model, max_iter = iters,
                                         init = "kmeans++", seed = 1,
                                         tol = 0, backend = "cuda"))[["elapsed"]]))
  }
  (fit_time(105) - fit_time(5)) / 100
}

cases <- list(
  knn_1e6x128_k10 = list(data = function() uniform(1e6, 128),
                         run = function(x) gpu_knn(x, k = 10, backend = "cuda"),
                         target = 3.0),
  knn_65536x128_k16 = list(data = function() uniform(65536, 128),
                           run = function(x) gpu_knn(x, k = 16, backend = "cuda"),
                           target = 0.030),
  tsne_fmnist70k = list(data = fashion,
                        run = function(x) gpu_tsne(x, seed = 1, backend = "cuda"),
                        target = 1.0),
  tsne_1e6x50 = list(data = function() mixture(1e6, 50, 20),
                     run = function(x) gpu_tsne(x, pca = FALSE, seed = 1, backend = "cuda"),
                     target = 12),
  gmm_iter_1e6x50_G16_VVV = list(data = function() mixture(1e6, 50, 16),
                                 run = function(x) em_iteration(x, 16, "VVV"),
                                 target = 0.004, per_iteration = TRUE),
  gmm_default_1e6x50 = list(data = function() mixture(1e6, 50, 5),
                            run = function(x) gpu_gmm(x, backend = "cuda"),
                            target = 60),
  dpc_1e6x2 = list(data = function() blobs2(1e6, 2),
                   run = function(x) gpu_dpc(x, backend = "cuda"),
                   target = 0.060),
  dpc_1e6x2_k5 = list(data = function() blobs2(1e6, 2),
                      run = function(x) gpu_dpc(x, k = 5, backend = "cuda"),
                      target = 0.1),
  dpc_1e7x2_k10 = list(data = function() blobs2(1e7, 2),
                       run = function(x) gpu_dpc(x, k = 10, backend = "cuda"),
                       target = 0.5),
  dpc_2.4e7x3_k10 = list(data = function() blobs2(2.4e7, 3),
                         run = function(x) gpu_dpc(x, k = 10, backend = "cuda"),
                         target = 1.5),
  dpc_1e6x5_k10 = list(data = function() uniform(1e6, 5),
                       run = function(x) gpu_dpc(x, k = 10, backend = "cuda"),
                       target = 2.0)
)

time_call <- function(case, x) {
  if (isTRUE(case$per_iteration)) return(case$run(x))
  system.time(case$run(x))[["elapsed"]]
}

one <- arg_value("--case")
if (!is.null(one)) {
  # a fresh session's first call
  case <- cases[[one]]
  if (is.null(case)) stop("unknown case ", one)
  x <- case$data()
  t <- tryCatch(time_call(case, x), error = function(e) {
    message(one, ": ", conditionMessage(e))
    NA_real_
  })
  cat(sprintf("FIRST %s %.4f\n", one, t))
  quit(save = "no")
}

names_run <- names(cases)
only <- arg_value("--only")
if (!is.null(only)) names_run <- intersect(strsplit(only, ",")[[1]], names_run)
skip <- arg_value("--skip")
if (!is.null(skip)) names_run <- setdiff(names_run, strsplit(skip, ",")[[1]])

repeats <- as.integer(arg_value("--repeat", "3"))
info <- gpuml_info()
cat(sprintf("gpuml %s on %s (compute capability %s, %.0f GB), CUDA %s\n", info$version,
            info$device_name, info$compute_capability, info$device_memory_gb,
            info$cuda_runtime))
rscript <- file.path(R.home("bin"), "Rscript")
script <- normalizePath(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]))
rows <- list()
for (name in names_run) {
  case <- cases[[name]]
  out <- suppressWarnings(system2(rscript, c(shQuote(script), "--case", name, "--data",
                                             shQuote(data_dir)), stdout = TRUE, stderr = TRUE))
  hit <- grep("^FIRST ", out, value = TRUE)
  first <- if (length(hit)) as.numeric(strsplit(hit[1], " ")[[1]][3]) else NA_real_
  if (!length(hit)) cat(out, sep = "\n")
  x <- case$data()
  warm <- tryCatch({
    time_call(case, x)  # this session's own first call, not reported
    min(replicate(repeats, time_call(case, x)))
  }, error = function(e) {
    message(name, ": ", conditionMessage(e))
    NA_real_
  })
  rm(x)
  invisible(gc())
  cat(sprintf("USER %s first %.4f warm %.4f target %.4f\n", name, first, warm, case$target))
  rows[[name]] <- c(first = first, warm = warm, target = case$target)
}
cat(sprintf("\n| case (from R, double input) | first call of a session (s) | warm, best of %d (s) | target (s) |\n", repeats))
cat("|---|---|---|---|\n")
for (name in names(rows)) {
  r <- rows[[name]]
  unit <- if (isTRUE(cases[[name]]$per_iteration)) " per iteration" else ""
  cat(sprintf("| %s | %.4g | %.4g | <= %g%s |\n", name, r[["first"]], r[["warm"]],
              r[["target"]], unit))
}
