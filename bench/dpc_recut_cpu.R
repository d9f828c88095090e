# dpc_clusters() and the plots of a large density peaks fit, from R, CPU backend: a fit of n
# points (2-D, a mixture of 10 Gaussians; n from the command line, default 10^6), then
# recuts with k = 10 and with thresholds (with and without the kept index) and the
# decision graph drawn to png and pdf. `Rscript bench/dpc_recut_cpu.R 1e7`; the figures
# are in bench/RESULTS.md.
suppressPackageStartupMessages(library(gpuml))
args <- commandArgs(TRUE)
n <- if (length(args)) as.numeric(args[1]) else 1e6
set.seed(1)
k <- 10
centres <- matrix(runif(2 * k, 0, 20), k, 2)
lab <- sample.int(k, n, replace = TRUE)
x <- centres[lab, ] + matrix(rnorm(2 * n), n, 2)
tm <- function(expr) { gc(); t0 <- proc.time()[["elapsed"]]; v <- force(expr); list(v = v, s = proc.time()[["elapsed"]] - t0) }
f <- tm(gpu_dpc(x, k = 5, backend = "cpu"))
cat(sprintf("n = %g: fit (k = 5) %.2f s\n", n, f$s))
fit <- f$v
for (r in 1:3) {
  c1 <- tm(dpc_clusters(fit, k = 10))
  cat(sprintf("  dpc_clusters(fit, k = 10) %.3f s\n", c1$s))
}
c2 <- tm(dpc_clusters(fit, rho = quantile(fit$rho, 0.9), delta = 3))
cat(sprintf("  dpc_clusters(fit, rho, delta) %.3f s (%d centres)\n", c2$s, length(c2$v$peaks)))
old <- fit; old$index <- NULL
c3 <- tm(dpc_clusters(old, k = 10))
cat(sprintf("  dpc_clusters(fit without its index, k = 10) %.3f s\n", c3$s))
cat(sprintf("  identical to the recut with the index: %s\n", identical(c3$v$clusters, c1$v$clusters) && identical(c3$v$halo, c1$v$halo)))
fit10 <- c1$v
for (dev in c("png", "pdf")) for (r in 1:2) {
  f0 <- tempfile(fileext = paste0(".", dev))
  p <- tm({ if (dev == "png") png(f0, 800, 800) else pdf(f0); plot(fit10); dev.off() })
  cat(sprintf("  plot(fit) decision graph to %s %.3f s (%.0f kB)\n", dev, p$s, file.size(f0) / 1024))
}
p <- tm({ png(tempfile(fileext = ".png"), 800, 800); plot(fit10, type = "clusters"); dev.off() })
cat(sprintf("  plot(fit, type = 'clusters') to png %.3f s\n", p$s))

cat(sprintf("  check: clusters hash %.0f, halo %d, peaks %s\n", sum(as.numeric(fit10$clusters) * (seq_along(fit10$clusters) %% 1000003)), sum(fit10$halo), paste(fit10$peaks, collapse = " ")))
