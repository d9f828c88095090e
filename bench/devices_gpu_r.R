# GPU machine with several devices: the calls as an R user makes them (R double matrices
# in, results out) on the first 1, 2 and 4 devices (argument `devices`), each the best of
# --reps calls after an untimed warm-up in the same session, the answers compared with
# one device's:
#   knn   gpu_knn(x, k = 10), x 10^6 x 128 uniform (the kNN issue's headline case)
#   tsne  gpu_tsne(x, pca = FALSE), x 10^6 x 50 (30 Gaussian blobs), FFT, 1000 iterations
#   gmm   gpu_gmm(x, G = 16, modelNames = "VVV", max_iter = 25, tol = 0), x 10^6 x 50
#   Rscript bench/devices_gpu_r.R [--only knn,tsne,gmm] [--reps R] [--scale F]
# --scale F divides every n by F (with --backend cpu: a check of this script here).
suppressPackageStartupMessages(library(gpuml))
args <- commandArgs(trailingOnly = TRUE)
arg_value <- function(name, default = NULL) {
  at <- match(name, args)
  if (is.na(at) || at == length(args)) default else args[[at + 1L]]
}
only <- strsplit(arg_value("--only", "knn,tsne,gmm"), ",")[[1]]
reps <- as.integer(arg_value("--reps", "2"))
scale <- as.numeric(arg_value("--scale", "1"))
backend <- arg_value("--backend", "cuda")
info <- gpuml_info()
ndev <- if (backend == "cuda") info$device_count else 1L
counts <- c(1L, 2L, 4L)
counts <- counts[counts <= max(1L, ndev)]
cat(sprintf("R %s, gpuml %s, backend %s, %d device(s)\n", getRversion(), info$version,
            backend, ndev))

blobs <- function(n, d, centres, seed) {
  set.seed(seed)
  mu <- matrix(rnorm(centres * d, sd = 8), centres, d)
  mu[rep_len(seq_len(centres), n), ] + matrix(rnorm(n * d), n, d)
}
timed <- function(f) {
  f()  # warm-up: the devices' contexts, the first launches
  best <- Inf
  out <- NULL
  for (r in seq_len(reps)) {
    t <- system.time(out <- f())[["elapsed"]]
    best <- min(best, t)
  }
  list(seconds = best, value = out)
}
rows <- list()
report <- function(case, devices, seconds, one, answer) {
  rows[[length(rows) + 1L]] <<- data.frame(case = case, devices = devices,
                                           seconds = seconds, speedup = one / seconds,
                                           answer = answer)
  cat(sprintf("RESULT %s devices %d: %.3f s (speed-up %.2fx; %s)\n", case, devices, seconds,
              one / seconds, answer))
}
run_case <- function(case, call, same) {
  ref <- NULL
  one <- NA
  for (c in counts) {
    devs <- if (backend == "cuda") seq_len(c) - 1 else NULL
    r <- timed(function() call(devs))
    if (is.null(ref)) {
      ref <- r$value
      one <- r$seconds
      answer <- "reference"
    } else {
      answer <- same(ref, r$value)
    }
    report(case, c, r$seconds, one, answer)
  }
}

if ("knn" %in% only) {
  n <- round(1e6 / scale)
  set.seed(1)
  x <- matrix(runif(n * 128), n, 128)
  run_case(sprintf("knn_%dx128_k10", n),
           function(devs) gpu_knn(x, k = 10, backend = backend, devices = devs),
           function(a, b) if (identical(a$nn.index, b$nn.index) &&
                              identical(a$nn.dist, b$nn.dist)) "identical" else "DIFFERENT")
  rm(x)
}
if ("tsne" %in% only) {
  n <- round(1e6 / scale)
  x <- blobs(n, 50, 30, 6)
  run_case(sprintf("tsne_%dx50", n),
           function(devs) gpu_tsne(x, pca = FALSE, method = "fft", seed = 11,
                                   backend = backend, devices = devs),
           function(a, b) sprintf("%d of %d coordinates differ; kNN and P %.2f s",
                                  sum(a$Y != b$Y), length(a$Y), b$time_affinities))
  rm(x)
}
if ("gmm" %in% only) {
  n <- round(1e6 / scale)
  x <- blobs(n, 50, 16, 7)
  run_case(sprintf("gmm_%dx50_G16_VVV_25iter", n),
           function(devs) gpu_gmm(x, G = 16, modelNames = "VVV", max_iter = 25, tol = 0,
                                  seed = 5, backend = backend, devices = devs),
           function(a, b) sprintf("loglik rel. difference %.1e",
                                  abs(a$loglik - b$loglik) / abs(a$loglik)))
}
cat("\n")
print(do.call(rbind, rows), row.names = FALSE, digits = 4)
