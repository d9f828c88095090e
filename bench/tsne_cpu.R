# CPU benchmark: t-SNE, gpuml (backend "cpu") against Rtsne (Barnes-Hut, theta 0.5,
# 2 threads), side by side in one run on the same input: Fashion-MNIST slices (the
# first n training images, pixels / 255, PCA to 50 dimensions by prcomp, given to both
# with pca = FALSE), perplexity 30, 1000 iterations. Quality next to time: the KL
# divergence each reports, 10-NN label accuracy in the embedding (leave-one-out
# majority vote) and 10-NN preservation (share of each point's 10 nearest neighbours in
# the 50-dimensional input kept among its 10 nearest in the embedding).
#   R_LIBS=build/Rlib Rscript bench/tsne_cpu.R [n ...]     (default: 5000 10000)
suppressPackageStartupMessages(library(gpuml))
args <- commandArgs(trailingOnly = TRUE)
sizes <- if (length(args)) as.integer(args) else c(5000L, 10000L)
have_rtsne <- requireNamespace("Rtsne", quietly = TRUE)

knn_sets <- function(x, k = 10) gpu_knn(x, k = k, backend = "cpu")$nn.index
preservation <- function(a, b) mean(rowSums(t(vapply(seq_len(nrow(a)), function(i)
  a[i, ] %in% b[i, ], logical(ncol(a)))))) / ncol(a)
label_accuracy <- function(idx, labels) {
  lab <- as.integer(labels)
  votes <- matrix(lab[idx], nrow(idx))
  mean(apply(votes, 1, function(v) {
    counts <- tabulate(v, nbins = max(lab))
    best <- which(counts == max(counts))
    v[match(TRUE, v %in% best)]
  }) == lab)
}
timed <- function(expr) {
  t0 <- proc.time()[["elapsed"]]
  value <- force(expr)
  list(value = value, seconds = proc.time()[["elapsed"]] - t0)
}

info <- gpuml_info()
cat(sprintf("gpuml %s, %d OpenMP threads; Rtsne %s; BLAS: %s\n\n", info$version, info$threads,
            if (have_rtsne) as.character(utils::packageVersion("Rtsne")) else "not installed",
            extSoftVersion()[["BLAS"]]))
cat("| n | tool | seconds | KL | 10-NN accuracy | 10-NN preservation | gpuml speed-up |\n")
cat("|---|---|---|---|---|---|---|\n")
fm <- read_fashion_mnist(subset = "train", n = max(sizes))
for (n in sizes) {
  x <- prcomp(fm$x[seq_len(n), ] / 255, rank. = 50)$x
  labels <- fm$y[seq_len(n)]
  reference <- knn_sets(x)
  ours <- timed(gpu_tsne(x, pca = FALSE, backend = "cpu", seed = 1))
  row <- function(tool, seconds, kl, y, ratio)
    cat(sprintf("| %d | %s | %.1f | %.3f | %.4f | %.4f | %s |\n", n, tool, seconds, kl,
                label_accuracy(knn_sets(y), labels), preservation(reference, knn_sets(y)), ratio))
  row(sprintf("gpuml (cpu, %s)", ours$value$method), ours$seconds,
      tail(ours$value$itercosts, 1), ours$value$Y, "1")
  if (have_rtsne) {
    set.seed(1)
    theirs <- timed(Rtsne::Rtsne(x, pca = FALSE, num_threads = 2))
    row("Rtsne (theta 0.5, 2 threads)", theirs$seconds, tail(theirs$value$itercosts, 1),
        theirs$value$Y, sprintf("%.2fx", theirs$seconds / ours$seconds))
  }
}
