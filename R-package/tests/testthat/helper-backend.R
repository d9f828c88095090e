# The backend the suite runs on: GPUML_TEST_BACKEND ("cpu" by default; "cuda" or
# "auto" to rerun everything on a GPU machine). Tests that ask for the CUDA backend are
# skipped where no device can be used.
test_backend <- function() {
  backend <- tolower(Sys.getenv("GPUML_TEST_BACKEND", "cpu"))
  if (!backend %in% c("cpu", "cuda", "auto"))
    stop("GPUML_TEST_BACKEND must be \"cpu\", \"cuda\" or \"auto\", not \"", backend, "\"")
  if (backend == "cuda") skip_if_no_cuda()
  backend
}

has_cuda_device <- function() {
  info <- gpuml_info()
  isTRUE(info$cuda_compiled) && info$device_count > 0
}

skip_if_no_cuda <- function() {
  if (!has_cuda_device()) skip("no usable CUDA device in this build/machine")
}

# A peer package (FNN, mclust, Rtsne, densityClust ...) or data set (Fashion-MNIST) that a
# comparison needs. With GPUML_REQUIRE_PEERS=1 (make check, and so CI) a missing one
# fails the test instead of skipping it, so that no peer check vanishes silently.
peers_required <- function() identical(Sys.getenv("GPUML_REQUIRE_PEERS"), "1")

skip_if_no_peer <- function(pkg) {
  if (requireNamespace(pkg, quietly = TRUE)) return(invisible(TRUE))
  if (peers_required())
    stop(sprintf("the peer package %s is required (GPUML_REQUIRE_PEERS=1): install r-cran-%s",
                 pkg, tolower(pkg)), call. = FALSE)
  skip(paste(pkg, "is not installed"))
}

skip_if_no_data <- function(file, what) {
  if (file.exists(file)) return(invisible(TRUE))
  if (peers_required())
    stop(sprintf("%s is required (GPUML_REQUIRE_PEERS=1): %s is missing", what, file),
         call. = FALSE)
  skip(paste(what, "is not installed"))
}

# Brute-force references, computed in R in the direct form (differences first, summed
# in dimension order), which is exact up to the last bits even far from the origin.
dist_ref <- function(x, y = x, squared = FALSE) {
  x <- as.matrix(x)
  y <- as.matrix(y)
  d2 <- matrix(0, nrow(x), nrow(y))
  for (j in seq_len(ncol(x))) d2 <- d2 + outer(x[, j], y[, j], "-")^2
  if (squared) d2 else sqrt(d2)
}

# k nearest neighbours ordered by distance, then by index; `query = NULL` is a
# self-search excluding each point by index.
knn_ref <- function(data, query = NULL, k) {
  self <- is.null(query)
  d2 <- dist_ref(if (self) data else query, data, squared = TRUE)
  m <- nrow(d2)
  index <- matrix(0L, m, k)
  dist <- matrix(0, m, k)
  for (i in seq_len(m)) {
    cand <- seq_len(ncol(d2))
    if (self) cand <- cand[-i]
    o <- cand[order(d2[i, cand], cand)][seq_len(k)]
    index[i, ] <- o
    dist[i, ] <- sqrt(d2[i, o])
  }
  list(nn.index = index, nn.dist = dist)
}
