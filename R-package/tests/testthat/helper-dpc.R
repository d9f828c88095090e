# Density peaks written from the definitions in ?gpu_dpc, over the full distance
# matrix (small data only): rho by the cutoff (d < dc) or Gaussian kernel, delta to the
# nearest point above in the order (rho, then the smaller index), the halo of the paper.
dpc_ref <- function(x, dc, gaussian = FALSE, gaussian_cutoff = 0) {
  d <- dist_ref(x)
  n <- nrow(d)
  diag(d) <- NA
  w <- exp(-(d / dc)^2)
  if (gaussian_cutoff > 0) w[d >= gaussian_cutoff * dc] <- 0
  rho <- if (gaussian) rowSums(w, na.rm = TRUE) else rowSums(d < dc, na.rm = TRUE)
  diag(d) <- 0
  delta <- numeric(n)
  nearest <- integer(n)
  for (i in seq_len(n)) {
    above <- which(rho > rho[i] | (rho == rho[i] & seq_len(n) < i))
    if (length(above) == 0L) {
      delta[i] <- max(d[i, ])
      nearest[i] <- NA_integer_
    } else {
      o <- above[order(d[i, above], above)][1L]
      delta[i] <- d[i, o]
      nearest[i] <- o
    }
  }
  list(rho = rho, delta = delta, nearest = nearest, gamma = rho * delta)
}

halo_ref <- function(x, dc, rho, clusters) {
  d <- dist_ref(x)
  border <- numeric(max(clusters))
  for (c in seq_along(border)) {
    inside <- which(clusters == c)
    outside <- which(clusters != c)
    near <- d[inside, outside, drop = FALSE] <= dc
    avg <- outer(rho[inside], rho[outside], "+") / 2
    if (any(near)) border[c] <- max(avg[near])
  }
  rho < border[clusters]
}

# Three well separated Gaussian blobs in d dimensions, with their labels.
dpc_blobs <- function(n_each = 150, d = 2, sd = 0.6) {
  centres <- rbind(c(0, 0), c(6, 0), c(3, 6))
  x <- do.call(rbind, lapply(1:3, function(c) {
    m <- matrix(rnorm(n_each * d, sd = sd), n_each, d)
    m[, 1:2] <- sweep(m[, 1:2, drop = FALSE], 2, centres[c, ], "+")
    m
  }))
  list(x = x, label = rep(1:3, each = n_each))
}

# Clusterings equal up to the numbering of the clusters.
same_partition <- function(a, b) {
  t <- table(a, b)
  nrow(t) == ncol(t) && all(rowSums(t > 0) == 1) && all(colSums(t > 0) == 1)
}
