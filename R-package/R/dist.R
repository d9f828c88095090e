gpu_dist <- function(x, y = NULL, squared = FALSE, backend = "auto", metric = "euclidean",
                     verbose = FALSE) {
  x <- as_double_matrix(x, "x")
  if (!is.null(y)) {
    y <- as_double_matrix(y, "y")
  }
  squared <- as_flag(squared, "squared")
  verbose <- as_flag(verbose, "verbose")
  res <- .Call(gpuml_r_dist, x, y, squared, as_word(metric, "metric"), as_backend(backend),
               verbose, gpuml_threads())
  if (verbose) message(sprintf("dist: %d x %d on %s", nrow(res$dist), ncol(res$dist),
                               res$backend))
  out <- res$dist
  rn <- rownames(x)
  cn <- if (is.null(y)) rn else rownames(y)
  if (!is.null(rn) || !is.null(cn)) dimnames(out) <- list(rn, cn)
  out
}
