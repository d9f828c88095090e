# The hierarchical start of the mixtures (core/gmm_hc.c) against mclust's
# hclass(hc(X, "VVV", use = "SVD"), 1:9): the adjusted Rand index of each partition and
# the times side by side. The C side is the CSV mode of the test program
# (build/tests/test_gmm_hc --csv IN OUT GMAX [THREADS]), which times gm_gmm_hc alone.
#   Rscript bench/gmm_hc_check.R [path/to/test_gmm_hc] [threads]
# Run from the top of the tree after make. ARI = 1 for every G means the same partitions.
# Last run (mclust 6.0.0, 2-core machine shared with other builds, 1 and 2 threads alike):
# ARI 1 for G = 1..9 on every case but rounded_ties (576 of 800 rows repeated: exact
# ties, ordered by rounding noise in mclust; see core/gmm_hc.c), where G = 2.. differ.
suppressMessages(library(mclust))
args <- commandArgs(trailingOnly = TRUE)
prog <- if (length(args) >= 1) args[1] else "build/tests/test_gmm_hc"
threads <- if (length(args) >= 2) as.integer(args[2]) else 2L
if (!file.exists(prog)) stop(prog, " is missing: run make first")
G <- 1:9

# n points of a mixture of k Gaussians in d dimensions: centres uniform in a cube of side
# `spread`, covariances A A' (A lower triangular, diagonal in [0.5, 1.5]), group sizes in
# proportion to `sizes`.
mixture <- function(n, d, sizes, spread, seed) {
  set.seed(seed)
  k <- length(sizes)
  counts <- as.vector(table(factor(sample(k, n, TRUE, prob = sizes), levels = 1:k)))
  do.call(rbind, lapply(1:k, function(g) {
    A <- matrix(0, d, d)
    A[lower.tri(A)] <- runif(d * (d - 1) / 2, -0.5, 0.5)
    diag(A) <- runif(d, 0.5, 1.5)
    centre <- runif(d, 0, spread)
    sweep(matrix(rnorm(counts[g] * d), counts[g], d) %*% t(A), 2, centre, "+")
  }))
}

run_c <- function(X, gmax) {
  inp <- tempfile(fileext = ".csv")
  out <- tempfile(fileext = ".csv")
  write.table(format(X, digits = 17), inp, sep = ",", row.names = FALSE, col.names = FALSE,
              quote = FALSE)
  res <- system2(prog, c("--csv", inp, out, gmax, threads), stdout = TRUE)
  labels <- as.matrix(read.csv(out, header = FALSE))
  secs <- as.numeric(sub(".*seconds ", "", res[length(res)]))
  unlink(c(inp, out))
  list(labels = labels, seconds = secs)
}

compare <- function(name, X) {
  X <- as.matrix(X)
  storage.mode(X) <- "double"
  # the C side reads the same doubles: round-trip through 17 significant digits
  X <- matrix(as.numeric(format(X, digits = 17)), nrow(X))
  tm <- system.time(h <- hc(X, modelName = "VVV", use = "SVD"))[["elapsed"]]
  ref <- hclass(h, G)
  c_run <- run_c(X, max(G))
  ari <- sapply(G, function(g) adjustedRandIndex(ref[, g], c_run$labels[, g]))
  first <- which(ari < 1)
  data.frame(data = name, n = nrow(X), d = ncol(X), dups = sum(duplicated(X)),
             ARI = paste(formatC(ari, format = "f", digits = 3), collapse = " "),
             min_ARI = min(ari), first_diff_G = if (length(first)) min(first) else NA,
             mclust_s = round(tm, 3), gpuml_s = round(c_run$seconds, 3))
}

cases <- list(
  sep_d2 = mixture(1000, 2, c(1, 1, 1, 1), 40, 1),
  ovl_d2 = mixture(1500, 2, c(1, 2, 3, 2, 1), 8, 2),
  sep_d6_unequal = mixture(1200, 6, c(1, 3, 8), 40, 3),
  ovl_d6 = mixture(2000, 6, c(1, 1, 1, 1, 1, 1), 6, 4),
  sep_d10_unequal = mixture(2000, 10, c(1, 4, 10), 40, 5),
  ovl_d10 = mixture(1500, 10, c(2, 1, 1, 1), 5, 6),
  d50 = mixture(600, 50, c(1, 2), 10, 7),
  rounded_ties = round(mixture(800, 3, c(1, 2, 2), 6, 8)),  # many equal rows: exact ties
  constant_col = cbind(mixture(500, 4, c(1, 1, 1), 8, 9), 2.5),
  faithful = faithful,
  iris = iris[, 1:4]
)
cat(sprintf("mclust %s, %d thread(s) for gpuml, %s\n", packageVersion("mclust"), threads,
            R.version.string))
res <- do.call(rbind, lapply(names(cases), function(nm) compare(nm, cases[[nm]])))
print(res[, c("data", "n", "d", "dups", "min_ARI", "first_diff_G", "mclust_s", "gpuml_s")],
      row.names = FALSE)
cat("\nARI for G = 1..9:\n")
for (i in seq_len(nrow(res))) cat(sprintf("  %-16s %s\n", res$data[i], res$ARI[i]))

# Times at m = 2000 rows for d = 2, 10, 50 (mclust at d = 50 only when asked: it is slow).
cat("\nTimes at 2000 rows (seconds):\n")
for (d in c(2, 10, 50)) {
  X <- mixture(2000, d, c(1, 2, 3), 10, 10 + d)
  c_run <- run_c(X, 9)
  tm <- if (d < 50 || Sys.getenv("GMM_HC_MCLUST_D50") == "1")
    system.time(hc(X, modelName = "VVV", use = "SVD"))[["elapsed"]] else NA
  cat(sprintf("  d = %2d  gpuml %.3f  mclust %s\n", d, c_run$seconds,
              if (is.na(tm)) "(not run)" else sprintf("%.3f", tm)))
}
