# The default start of gpu_gmm() against mclust's, on random mixtures neither package's
# tests have seen: varied n (some above mclust's 2,000-row subset), d, G, weights,
# shapes and separation. For each data set both fit their defaults (G = 1:9, every
# model); a fit counts as worse when its BIC is below mclust's by more than 2e-6
# relative (1e-6 in the log-likelihood of the same model and G). Also counted: the
# cells of the BIC table (G x model) where gpuml's fit is worse than mclust's.
#   Rscript bench/gmm_start.R [count = 24] [first seed = 1]
suppressPackageStartupMessages({
  library(gpuml)
  library(mclust)
})
args <- commandArgs(trailingOnly = TRUE)
count <- if (length(args) >= 1) as.integer(args[1]) else 24L
first <- if (length(args) >= 2) as.integer(args[2]) else 1L

mixture <- function(seed) {
  set.seed(seed)
  d <- sample(c(2, 3, 4, 6, 8, 10), 1)
  G <- sample(2:6, 1)
  n <- sample(c(400, 800, 1500, 3000, 5000), 1)
  w <- rgamma(G, 2)
  w <- w / sum(w)
  sep <- runif(1, 1.5, 5)
  cl <- sample(G, n, replace = TRUE, prob = w)
  x <- matrix(0, n, d)
  for (k in seq_len(G)) {
    shape <- sample(c("full", "diag", "spherical"), 1)
    A <- switch(shape,
                full = matrix(rnorm(d * d), d) / sqrt(d) + diag(runif(d, 0.3, 1), d),
                diag = diag(runif(d, 0.3, 1.5), d),
                spherical = diag(runif(1, 0.3, 1.5), d))
    rows <- which(cl == k)
    x[rows, ] <- sweep(matrix(rnorm(length(rows) * d), ncol = d) %*% A, 2,
                       rnorm(d, sd = sep), "+")
  }
  list(x = x, label = cl, d = d, G = G, n = n, sep = sep)
}

cat("| seed | n | d | G | gpuml | mclust | BIC rel. diff | worse | cells worse | seconds gpuml | seconds mclust |\n")
cat("|---|---|---|---|---|---|---|---|---|---|---|\n")
worse <- 0L
cells_worse <- 0L
cells <- 0L
for (seed in first:(first + count - 1L)) {
  m <- mixture(seed)
  t1 <- system.time(a <- gpu_gmm(m$x, backend = "cpu"))[["elapsed"]]
  t2 <- system.time(b <- Mclust(m$x, verbose = FALSE))[["elapsed"]]
  rel <- (a$bic - b$bic) / abs(b$bic)
  bad <- rel < -2e-6
  worse <- worse + bad
  A <- unclass(a$BIC)
  B <- b$BIC[rownames(A), colnames(A)]
  both <- !is.na(A) & !is.na(B)
  cw <- sum((A[both] - B[both]) / abs(B[both]) < -2e-6)
  cells_worse <- cells_worse + cw
  cells <- cells + sum(both)
  cat(sprintf("| %d | %d | %d | %d | %s,%d | %s,%d | %+.1e | %s | %d of %d | %.2f | %.2f |\n", seed,
              m$n, m$d, m$G, a$modelName, a$G, b$modelName, b$G, rel, if (bad) "yes" else "no",
              cw, sum(both), t1, t2))
}
cat(sprintf("\nfits worse than mclust's: %d of %d; cells worse: %d of %d\n", worse, count,
            cells_worse, cells))
