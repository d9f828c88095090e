gpu_knn <- function(data, query = NULL, k = 10, backend = "auto", precision = "auto",
                    metric = "euclidean", verbose = FALSE,
                    devices = getOption("gpuml.devices")) {
  if (!is.numeric(k) || length(k) != 1L || !is.finite(k) || k != round(k))
    stop("k must be a single whole number", call. = FALSE)
  verbose <- as_flag(verbose, "verbose")
  if (inherits(data, "gpu_knn_index")) {
    fixed <- c("backend", "precision", "metric")[c(!missing(backend), !missing(precision),
                                                   !missing(metric))]
    if (length(fixed))
      stop(sprintf("%s belong%s to the index: give %s to gpu_knn_index()",
                   paste(fixed, collapse = ", "), if (length(fixed) == 1L) "s" else "",
                   if (length(fixed) == 1L) "it" else "them"), call. = FALSE)
    if (!missing(devices))
      stop("an index lives on one device: devices do not apply to its searches",
           call. = FALSE)
    if (!is.null(query)) query <- as_double_matrix(query, "query")
    res <- .Call(gpuml_r_knn_index_search, data$ptr, query, as.double(k), verbose,
                 gpuml_threads())
  } else {
    data <- as_double_matrix(data, "data")
    if (!is.null(query)) query <- as_double_matrix(query, "query")
    res <- .Call(gpuml_r_knn, data, query, as.double(k), as_backend(backend),
                 as_word(precision, "precision"), as_word(metric, "metric"), verbose,
                 gpuml_threads(), as_devices(devices))
  }
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

gpu_knn_index <- function(data, metric = "euclidean", backend = "auto", precision = "auto",
                          verbose = FALSE) {
  data <- as_double_matrix(data, "data")
  verbose <- as_flag(verbose, "verbose")
  ptr <- .Call(gpuml_r_knn_index_build, data, as_backend(backend),
               as_word(precision, "precision"), as_word(metric, "metric"), verbose,
               gpuml_threads())
  ix <- structure(list(ptr = ptr), class = "gpu_knn_index")
  if (verbose) print(ix)
  ix
}

predict.gpu_knn_index <- function(object, newdata = NULL, k = 10, verbose = FALSE, ...) {
  gpu_knn(object, newdata, k = k, verbose = verbose)
}

print.gpu_knn_index <- function(x, ...) {
  info <- .Call(gpuml_r_knn_index_info, x$ptr)
  if (is.null(info)) {
    cat("kNN index (freed, or restored from a saved session: build it again)\n")
  } else {
    cat(sprintf("kNN index of %.0f points in %.0f dimensions, metric %s, on %s%s\n",
                info$rows, info$cols, info$metric, info$backend,
                if (info$backend == "cuda") sprintf(" (device %d)", info$device) else ""))
    held <- c(if (info$device_bytes > 0) sprintf("%.1f MB on the device", info$device_bytes / 1e6),
              if (info$host_bytes >= 1e5) sprintf("%.1f MB copied on the host", info$host_bytes / 1e6))
    cat(sprintf("%sbuilt in %.3f s\n",
                if (length(held)) paste0(paste(held, collapse = ", "), "; ") else "",
                info$build_seconds))
  }
  invisible(x)
}

gpu_free <- function(x) {
  if (!inherits(x, "gpu_knn_index"))
    stop("gpu_free() takes a kNN index (from gpu_knn_index())", call. = FALSE)
  invisible(.Call(gpuml_r_knn_index_free, x$ptr))
}
