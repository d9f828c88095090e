# CPU benchmark of density peaks on the cell index (issue 16), from R as users call it:
# uniform data made in R (not timed), gpu_dpc(x, ..., backend = "cpu") timed whole (the
# dc estimate, the index, rho, delta, and with k the centres, clusters and halo), best
# of `reps` calls after one warm-up call. Then n = 10^7 in 2-d with k = 10 once, with the
# peak memory of the R process (O(n): an n x n distance object would be 400 TB).
#   Rscript bench/dpc_index_cpu.R [reps]
suppressPackageStartupMessages(library(gpuml))
args <- commandArgs(trailingOnly = TRUE)
reps <- if (length(args)) as.integer(args[1]) else 3L

peak_mb <- function() {
  status <- readLines("/proc/self/status")
  as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", grep("^VmHWM", status, value = TRUE))) / 1024
}
best_of <- function(f, reps) {
  f()
  min(vapply(seq_len(reps), function(i) {
    gc()
    system.time(f())[["elapsed"]]
  }, numeric(1)))
}

info <- gpuml_info()
cat(sprintf("threads: %d; load average before: %s\n\n", info$threads,
            paste(readLines("/proc/loadavg"), collapse = " ")))
cat("| case | seconds (best of", reps, ") | dc |\n|---|---|---|\n")
cases <- list(
  list(label = "10^6 x 2, dc estimated, no cut", n = 1e6, d = 2, dc = NULL, k = NULL),
  list(label = "10^6 x 2, dc estimated, k = 5 (clusters and halo)", n = 1e6, d = 2, dc = NULL, k = 5),
  list(label = "2 x 10^5 x 5, dc = 0.05, no cut", n = 2e5, d = 5, dc = 0.05, k = NULL))
for (cs in cases) {
  set.seed(1)
  x <- matrix(runif(cs$n * cs$d), cs$n, cs$d)
  fit <- NULL
  s <- best_of(function() fit <<- gpu_dpc(x, dc = cs$dc, k = cs$k, backend = "cpu"), reps)
  cat(sprintf("| %s | %.2f | %.4g |\n", cs$label, s, fit$dc))
  rm(x, fit)
  invisible(gc())
}

set.seed(1)
n <- 1e7
x <- matrix(runif(2 * n), n, 2)
before <- peak_mb()
s <- system.time(fit <- gpu_dpc(x, k = 10, backend = "cpu"))[["elapsed"]]
cat(sprintf("| 10^7 x 2, dc estimated, k = 10 (one call) | %.2f | %.4g |\n", s, fit$dc))
cat(sprintf("\npeak memory of the R process: %.0f MB (%.0f MB before the call; the data %.0f MB)\n",
            peak_mb(), before, object.size(x) / 2^20))
s <- system.time(fit2 <- dpc_clusters(fit, k = 5))[["elapsed"]]
cat(sprintf("dpc_clusters(fit, k = 5) at 10^7: %.2f s\n", s))
