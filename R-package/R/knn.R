gpu_knn <- function(data, query = NULL, k = 10, backend = "auto", precision = "auto",
                    verbose = FALSE) {
  data <- as_double_matrix(data, "data")
  if (!is.null(query)) {
    query <- as_double_matrix(query, "query")
  }
  if (!is.numeric(k) || length(k) != 1L || !is.finite(k) || k != round(k))
    stop("k must be a single whole number", call. = FALSE)
  verbose <- as_flag(verbose, "verbose")
  res <- .Call(gpuml_r_knn, data, query, as.double(k), as_backend(backend),
               as_word(precision, "precision"), verbose, gpuml_threads())
  if (verbose) message(sprintf("knn: %d queries, k = %d on %s%s", nrow(res$nn.index),
                               ncol(res$nn.index), res$backend,
                               if (res$rechecked > 0)
                                 sprintf(" (%.0f rechecked in fp64)", res$rechecked)
                               else ""))
  structure(res, class = "gpu_knn")
}

print.gpu_knn <- function(x, n = 6L, ...) {
  m <- nrow(x$nn.index)
  k <- ncol(x$nn.index)
  cat(sprintf("Exact %d-nearest neighbours of %d point%s (backend: %s)\n", k, m,
              if (m == 1L) "" else "s", x$backend))
  show <- seq_len(min(n, m))
  if (length(show)) {
    cat("nn.index:\n")
    print(x$nn.index[show, , drop = FALSE], ...)
    cat("nn.dist:\n")
    print(x$nn.dist[show, , drop = FALSE], ...)
    if (m > length(show)) cat(sprintf("... %d more rows\n", m - length(show)))
  }
  invisible(x)
}
