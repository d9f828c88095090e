# Adjusted Rand index of two labellings (Hubert and Arabie 1985).
adjusted_rand <- function(a, b) {
  tab <- table(a, b)
  pairs <- function(v) sum(v * (v - 1) / 2)
  total <- pairs(length(a))
  index <- pairs(tab)
  rows <- pairs(rowSums(tab))
  cols <- pairs(colSums(tab))
  expected <- rows * cols / total
  top <- (rows + cols) / 2
  if (top == expected) return(1)
  (index - expected) / (top - expected)
}

# n points from G well separated Gaussian clusters in d dimensions of unequal sizes,
# with covariances of the given shape ("full": correlated, "diag", "spherical");
# returns list(x, label).
gmm_mixture <- function(n, d, G, spread = 30, seed = 1, shape = "full") {
  set.seed(seed)
  sizes <- as.vector(rmultinom(1, n, prob = seq_len(G)))
  label <- rep(seq_len(G), sizes)
  x <- matrix(0, n, d)
  for (k in seq_len(G)) {
    A <- switch(shape,
      full = matrix(runif(d * d, -0.5, 0.5), d) * lower.tri(diag(d)) + diag(runif(d, 0.5, 1.5), d),
      diag = diag(runif(d, 0.5, 1.5), d),
      spherical = diag(runif(1, 0.5, 1.5), d))
    centre <- runif(d, 0, spread)
    rows <- which(label == k)
    x[rows, ] <- sweep(matrix(rnorm(length(rows) * d), ncol = d) %*% t(A), 2, centre, "+")
  }
  list(x = x, label = label)
}

# mclust's fit of one model (mclust must be attached for Mclust() to find its helpers).
mclust_fit <- function(x, G, model = "VVV") {
  suppressPackageStartupMessages(require("mclust", quietly = TRUE, character.only = TRUE))
  mclust::Mclust(x, G = G, modelNames = model, verbose = FALSE)
}
