# Embedding quality measures shared by the t-SNE tests and bench/tsne_cpu.R's idea of
# them: both compare an embedding with the data it came from.

# Mean fraction of each point's k nearest neighbours in `x` that are also among its k
# nearest neighbours in `y`.
knn_preservation <- function(x, y, k = 10) {
  a <- gpu_knn(x, k = k, backend = "cpu")$nn.index
  b <- gpu_knn(y, k = k, backend = "cpu")$nn.index
  mean(vapply(seq_len(nrow(a)), function(i) length(intersect(a[i, ], b[i, ])) / k, 0))
}

# Leave-one-out k-NN classification accuracy in `y` (majority vote; ties go to the
# label of the nearer neighbour).
knn_label_accuracy <- function(y, labels, k = 10) {
  idx <- gpu_knn(y, k = k, backend = "cpu")$nn.index
  lab <- as.integer(as.factor(labels))
  votes <- matrix(lab[idx], nrow(idx))
  predicted <- apply(votes, 1, function(v) {
    counts <- tabulate(v, nbins = max(lab))
    best <- which(counts == max(counts))
    v[match(TRUE, v %in% best)]
  })
  mean(predicted == lab)
}

# Three separated Gaussian blobs in d dimensions.
tsne_blobs <- function(n_each = 60, d = 10, seed = 1) {
  set.seed(seed)
  centres <- diag(d)[1:3, ] * 12
  x <- do.call(rbind, lapply(1:3, function(c) sweep(matrix(rnorm(n_each * d), n_each), 2,
                                                    centres[c, ], "+")))
  list(x = x, y = rep(1:3, each = n_each))
}
