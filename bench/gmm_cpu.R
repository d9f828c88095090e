# CPU benchmark: Gaussian mixtures, gpuml against mclust::Mclust (VVV, the full
# covariance model), side by side in one run on the same data. `make bench`; paste
# the table into bench/RESULTS.md.
#   - random normal data, n = 10,000, d = 10, G = 10 (issue 6's case: no cluster
#     structure, so EM creeps and the iteration count decides);
#   - ten separated clusters of the same size;
#   - Old Faithful with G = 1:9.
# gpuml runs with its defaults (tol = 1e-8, up to 1000 iterations), with mclust's
# tolerance (tol = 1e-5) and on one thread; mclust with its defaults (hierarchical
# clustering start, tol 1e-5). The loglik column is each fit's log-likelihood.
suppressPackageStartupMessages(library(gpuml))
if (!requireNamespace("mclust", quietly = TRUE)) stop("the benchmark needs mclust")
suppressPackageStartupMessages(library(mclust))

timed <- function(expr) {
  t0 <- proc.time()[["elapsed"]]
  value <- force(expr)
  list(value = value, seconds = proc.time()[["elapsed"]] - t0)
}

row <- function(case, tool, r, base, iter) {
  cat(sprintf("| %s | %s | %.2f | %s | %.2f | %s |\n", case, tool, r$seconds,
              if (is.null(base)) "1" else sprintf("%.1fx", r$seconds / base),
              r$value$loglik, iter))
}

set.seed(1)
centres <- matrix(rnorm(10 * 10, sd = 6), 10)
cases <- list(
  list(label = "random normal n = 10000, d = 10, G = 10",
       x = matrix(rnorm(1e4 * 10), ncol = 10), G = 10),
  list(label = "10 clusters n = 10000, d = 10, G = 10",
       x = centres[rep(1:10, each = 1000), ] + matrix(rnorm(1e4 * 10), ncol = 10), G = 10),
  list(label = "faithful n = 272, d = 2, G = 1:9", x = as.matrix(faithful), G = 1:9))

info <- gpuml_info()
cat(sprintf("threads: %d; BLAS: %s; mclust %s\n\n", info$threads, extSoftVersion()[["BLAS"]],
            packageVersion("mclust")))
cat("| case | tool | seconds | mclust / tool | loglik | iterations |\n|---|---|---|---|---|---|\n")
for (cs in cases) {
  m <- timed(Mclust(cs$x, G = cs$G, modelNames = "VVV", verbose = FALSE))
  row(cs$label, "mclust::Mclust (VVV)", m, NULL, "-")
  fits <- list(
    `gpuml (cpu, defaults)` = function() gpu_gmm(cs$x, G = cs$G, seed = 1, backend = "cpu"),
    `gpuml (cpu, tol = 1e-5)` = function() gpu_gmm(cs$x, G = cs$G, seed = 1, tol = 1e-5,
                                                   backend = "cpu"),
    `gpuml (cpu, 1 thread)` = function() {
      old <- options(gpuml.threads = 1)
      on.exit(options(old))
      gpu_gmm(cs$x, G = cs$G, seed = 1, backend = "cpu")
    })
  for (name in names(fits)) {
    r <- timed(fits[[name]]())
    cat(sprintf("| %s | %s | %.2f | %.1fx | %.2f | %d |\n", cs$label, name, r$seconds,
                m$seconds / r$seconds, r$value$loglik, r$value$n_iter))
  }
}
