# CPU benchmark of density peaks: gpuml against densityClust side by side in one run
# on the same data and dc (densityClust timed as a user runs it, distance matrix
# included: densityClust(dist(x), dc)), then n = 100,000 points in O(n) memory, where
# densityClust would need an n x n distance object (40 GB). `make bench` runs it;
# paste the tables into bench/RESULTS.md.
suppressPackageStartupMessages(library(gpuml))
have_dc <- requireNamespace("densityClust", quietly = TRUE)

timed <- function(expr) {
  gc()
  t0 <- proc.time()[["elapsed"]]
  value <- force(expr)
  list(value = value, seconds = proc.time()[["elapsed"]] - t0)
}

# Peak resident memory of this R process so far (Linux), in MB.
peak_mb <- function() {
  status <- readLines("/proc/self/status")
  as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", grep("^VmHWM", status, value = TRUE))) / 1024
}

info <- gpuml_info()
cat(sprintf("threads: %d; BLAS: %s; densityClust %s\n\n", info$threads,
            extSoftVersion()[["BLAS"]],
            if (have_dc) as.character(utils::packageVersion("densityClust")) else "not installed"))

# 1. O(n) memory: first, while the process is still small.
cat("| case | seconds | peak memory of the R process | an n x n distance matrix |\n|---|---|---|---|\n")
for (cs in list(list(n = 1e5, d = 2), list(n = 1e5, d = 3))) {
  set.seed(1)
  x <- matrix(runif(cs$n * cs$d), cs$n, cs$d)
  before <- peak_mb()
  r <- timed(gpu_dpc(x, k = 5, backend = "cpu"))
  cat(sprintf("| gpuml, n = %d, d = %d, dc estimated, k = 5 (rho, delta, clusters, halo) | %.2f | %.0f MB (%.0f MB before; the data %.1f MB) | %.0f GB |\n",
              cs$n, cs$d, r$seconds, peak_mb(), before, object.size(x) / 2^20,
              cs$n^2 * 8 / 1e9))
}

# 2. Side by side with densityClust.
cat("\n| case | tool | seconds | gpuml speed-up | same rho | same delta |\n|---|---|---|---|---|---|\n")
cases <- list(list(n = 5000, d = 50), list(n = 5000, d = 2), list(n = 10000, d = 10))
for (cs in cases) {
  set.seed(1)
  x <- matrix(rnorm(cs$n * cs$d), cs$n, cs$d)
  label <- sprintf("n = %d, d = %d, cutoff", cs$n, cs$d)
  ours <- timed(gpu_dpc(x, backend = "cpu"))  # dc estimated, included in the time
  cat(sprintf("| %s | gpuml (cpu) | %.2f | 1 | - | - |\n", label, ours$seconds))
  if (have_dc) {
    dc <- ours$value$dc
    peer <- timed(densityClust::densityClust(dist(x), dc))
    rho_same <- identical(unname(peer$value$rho), ours$value$rho)
    # densityClust orders equal densities arbitrarily (strict rho only), gpuml by index:
    # compare delta where the point's density is not shared.
    unique_rho <- !(ours$value$rho %in% ours$value$rho[duplicated(ours$value$rho)])
    delta_same <- mean(abs(unname(peer$value$delta) - ours$value$delta)[unique_rho] < 1e-12)
    cat(sprintf("| %s | densityClust(dist(x), dc) | %.2f | %.1fx | %s | %.4f (of %d points with a density of their own) |\n",
                label, peer$seconds, peer$seconds / ours$seconds, rho_same, delta_same,
                sum(unique_rho)))
  }
}
