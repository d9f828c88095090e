# Benchmark of density peaks on the cell index (issue 16), from R as users call it:
# uniform data made in R (not timed), gpu_dpc(x, ..., backend = ) timed whole (the dc
# estimate, the index, rho, delta, and with k the centres, clusters and halo), best of
# `reps` calls after one warm-up call (the first call of the session is printed too).
# On the CPU, then n = 10^7 in 2-d with k = 10 once, with the peak memory of the R
# process (O(n): a distance object would take 400 TB), dpc_clusters() and the plots.
#   Rscript bench/dpc_index_cpu.R [reps]          the CPU rows
#   Rscript bench/dpc_index_cpu.R 3 cuda          issue 16's GPU rows (GPU machine)
suppressPackageStartupMessages(library(gpuml))
args <- commandArgs(trailingOnly = TRUE)
reps <- if (length(args)) as.integer(args[1]) else 3L
backend <- if (length(args) > 1) args[2] else "cpu"

peak_mb <- function() {
  status <- readLines("/proc/self/status")
  as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", grep("^VmHWM", status, value = TRUE))) / 1024
}
# The best elapsed time of reps calls after a warm-up call, and the CPU time (user +
# system, all threads) of that call: on a shared machine the elapsed time carries the
# other jobs' load, the CPU time much less.
best_of <- function(f, reps) {
  first <- system.time(f())[["elapsed"]]
  cat(sprintf("  (first call: %.3f s)\n", first))
  times <- lapply(seq_len(reps), function(i) {
    gc()
    t <- system.time(f())
    c(t[["elapsed"]], t[["user.self"]] + t[["sys.self"]])
  })
  times[[which.min(vapply(times, `[`, numeric(1), 1))]]
}

info <- gpuml_info()
cat(sprintf("threads: %d; load average before: %s\n\n", info$threads,
            paste(readLines("/proc/loadavg"), collapse = " ")))
cat(sprintf("| case | seconds (best of %d) | CPU seconds of that call | dc |\n|---|---|---|---|\n", reps))
cases <- list(
  list(label = "10^6 x 2, dc estimated, no cut", n = 1e6, d = 2, dc = NULL, k = NULL),
  list(label = "10^6 x 2, dc estimated, k = 5 (clusters and halo)", n = 1e6, d = 2, dc = NULL, k = 5),
  list(label = "2 x 10^5 x 5, dc = 0.05, no cut", n = 2e5, d = 5, dc = 0.05, k = NULL))
if (backend != "cpu")
  cases <- c(cases, list(
    list(label = "10^7 x 2, dc estimated, k = 10", n = 1e7, d = 2, dc = NULL, k = 10),
    list(label = "2.4 x 10^7 x 3, dc estimated, k = 10", n = 2.4e7, d = 3, dc = NULL, k = 10),
    list(label = "10^6 x 5, dc estimated, k = 10", n = 1e6, d = 5, dc = NULL, k = 10)))
for (cs in cases) {
  set.seed(1)
  x <- matrix(runif(cs$n * cs$d), cs$n, cs$d)
  fit <- NULL
  s <- best_of(function() fit <<- gpu_dpc(x, dc = cs$dc, k = cs$k, seed = 1, backend = backend), reps)
  cat(sprintf("| %s | %.2f | %.2f | %.4g |\n", cs$label, s[1], s[2], fit$dc))
  rm(x, fit)
  invisible(gc())
}

if (backend != "cpu") quit(save = "no")
set.seed(1)
n <- 1e7
x <- matrix(runif(2 * n), n, 2)
before <- peak_mb()
t <- system.time(fit <- gpu_dpc(x, k = 10, seed = 1, backend = "cpu"))
cat(sprintf("| 10^7 x 2, dc estimated, k = 10 (one call) | %.2f | %.2f | %.4g |\n",
            t[["elapsed"]], t[["user.self"]] + t[["sys.self"]], fit$dc))
cat(sprintf("\npeak memory of the R process: %.0f MB (%.0f MB before the call; the data %.0f MB)\n",
            peak_mb(), before, object.size(x) / 2^20))
s <- system.time(fit2 <- dpc_clusters(fit, k = 5))[["elapsed"]]
cat(sprintf("dpc_clusters(fit, k = 5) at 10^7 (centres, clusters and halo): %.2f s\n", s))
pdf(NULL)
s <- system.time({plot(fit2); plot(fit2, type = "clusters")})[["elapsed"]]
invisible(dev.off())
cat(sprintf("plot(fit) and plot(fit, type = \"clusters\") at 10^7: %.2f s\n", s))
