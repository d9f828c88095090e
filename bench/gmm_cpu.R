# CPU benchmark: Gaussian mixtures, gpuml against mclust::Mclust side by side in one
# run on the same data. `make bench`; paste the table into bench/RESULTS.md.
#   - mclust's default: every model, G = 1:9, on a 5-component mixture, n = 10,000,
#     d = 10 (the issue's case: gpu_gmm(X) against Mclust(X));
#   - random normal data, n = 10,000, d = 10, G = 10, VVV (no cluster structure, so EM
#     creeps and the iteration count decides);
#   - ten separated clusters of the same size, VVV;
#   - Old Faithful with the defaults.
# Both run with their defaults (hierarchical start, tol 1e-5); gpuml also on one
# thread. The loglik column is each fit's log-likelihood, BIC the chosen fit's.
suppressPackageStartupMessages(library(gpuml))
if (!requireNamespace("mclust", quietly = TRUE)) stop("the benchmark needs mclust")
suppressPackageStartupMessages(library(mclust))

# Elapsed seconds, and the CPU seconds (user + system, all threads) of this process: on a
# shared machine the second shows what the work cost whatever else ran.
timed <- function(expr) {
  t0 <- proc.time()
  value <- force(expr)
  t <- proc.time() - t0
  list(value = value, seconds = t[["elapsed"]], cpu = t[["user.self"]] + t[["sys.self"]])
}

set.seed(5)
mix <- local({
  n <- 10000; d <- 10; G <- 5
  cl <- sample(G, n, TRUE, prob = c(0.35, 0.25, 0.2, 0.12, 0.08))
  x <- matrix(0, n, d)
  for (k in 1:G) {
    A <- matrix(rnorm(d * d), d) / sqrt(d) + diag(d) * 0.7
    idx <- which(cl == k)
    x[idx, ] <- sweep(matrix(rnorm(length(idx) * d), ncol = d) %*% A, 2, rnorm(d, sd = 3), "+")
  }
  x
})
set.seed(1)
centres <- matrix(rnorm(10 * 10, sd = 6), 10)
cases <- list(
  list(label = "5-component mixture n = 10000, d = 10, defaults (G = 1:9, 14 models)",
       x = mix, G = 1:9, models = NULL),
  list(label = "random normal n = 10000, d = 10, G = 10, VVV",
       x = matrix(rnorm(1e4 * 10), ncol = 10), G = 10, models = "VVV"),
  list(label = "10 clusters n = 10000, d = 10, G = 10, VVV",
       x = centres[rep(1:10, each = 1000), ] + matrix(rnorm(1e4 * 10), ncol = 10), G = 10,
       models = "VVV"),
  list(label = "faithful n = 272, d = 2, defaults", x = as.matrix(faithful), G = 1:9,
       models = NULL))

info <- gpuml_info()
cat(sprintf("threads: %d; BLAS: %s; mclust %s\n\n", info$threads, extSoftVersion()[["BLAS"]],
            packageVersion("mclust")))
cat(sprintf("load average before: %s\n\n", paste(readLines("/proc/loadavg", warn = FALSE), collapse = " ")))
cat("| case | tool | seconds | CPU seconds | mclust / tool | model, G | loglik | BIC |\n|---|---|---|---|---|---|---|---|\n")
for (cs in cases) {
  m <- timed(Mclust(cs$x, G = cs$G, modelNames = cs$models, verbose = FALSE))
  cat(sprintf("| %s | mclust::Mclust | %.2f | %.2f | 1 | %s, %d | %.2f | %.2f |\n", cs$label,
              m$seconds, m$cpu, m$value$modelName, m$value$G, m$value$loglik, m$value$bic))
  fits <- list(
    `gpuml (cpu)` = function() gpu_gmm(cs$x, G = cs$G, modelNames = cs$models, backend = "cpu"),
    `gpuml (cpu, 1 thread)` = function() {
      old <- options(gpuml.threads = 1)
      on.exit(options(old))
      gpu_gmm(cs$x, G = cs$G, modelNames = cs$models, backend = "cpu")
    })
  for (name in names(fits)) {
    r <- timed(fits[[name]]())
    cat(sprintf("| %s | %s | %.2f | %.2f | %.1fx | %s, %d | %.2f | %.2f |\n", cs$label, name,
                r$seconds, r$cpu, m$seconds / r$seconds, r$value$modelName, r$value$G,
                r$value$loglik, r$value$bic))
  }
}
