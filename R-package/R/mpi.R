# Functions for a job started as `mpirun -np N Rscript script.R`: every rank calls them
# with its own rows, over MPI_COMM_WORLD, and gets the answer of one process on all the
# rows. MPI starts with the first call when nobody has started it; gpuml then finalises
# it at R's exit (or at gpu_mpi_finalize()). A package built without MPI says so.
# `devices` follows the core's rule for MPI calls (gpuml_mpi_options_set_devices):
# "local" (each rank on a GPU of its host), device numbers or "all".

# The session's MPI state: its finaliser ends MPI at R's exit when gpuml started it.
mpi_session <- new.env(parent = emptyenv())

mpi_start <- function() {
  info <- .Call(gpuml_r_mpi_start)
  if (isTRUE(info$started))
    reg.finalizer(mpi_session, function(e) .Call(gpuml_r_mpi_finalize), onexit = TRUE)
  info
}

gpu_mpi_rank <- function() mpi_start()$rank

gpu_mpi_size <- function() mpi_start()$size

gpu_mpi_finalize <- function() invisible(.Call(gpuml_r_mpi_finalize))

gpu_mpi_knn <- function(data, query = NULL, k = 10, backend = "auto", precision = "auto",
                        metric = "euclidean", verbose = FALSE, devices = "local") {
  if (!is.numeric(k) || length(k) != 1L || !is.finite(k) || k != round(k))
    stop("k must be a single whole number", call. = FALSE)
  verbose <- as_flag(verbose, "verbose")
  data <- as_double_matrix(data, "data")
  if (!is.null(query)) query <- as_double_matrix(query, "query")
  mpi_start()
  res <- .Call(gpuml_r_mpi_knn, data, query, as.double(k), as_backend(backend),
               as_word(precision, "precision"), as_word(metric, "metric"), verbose,
               gpuml_threads(), as_devices(devices))
  structure(res, class = "gpu_knn")
}

gpu_mpi_dpc <- function(x, dc = NULL, gaussian = FALSE, k = NULL, rho = NULL, delta = NULL,
                        gaussian_cutoff = 0, seed = NULL, backend = "auto", verbose = FALSE,
                        devices = "local") {
  x <- as_double_matrix(x, "x")
  verbose <- as_flag(verbose, "verbose")
  params <- dpc_params(dc, if (missing(gaussian)) NULL else gaussian, k, rho, delta,
                       gaussian_cutoff)
  seed <- as_seed(seed)
  mpi_start()
  res <- .Call(gpuml_r_mpi_dpc, x, params, seed, as_backend(backend), verbose,
               gpuml_threads(), as_devices(devices))
  fit <- list(rho = res$rho, delta = res$delta, nearest = res$nearest, gamma = res$gamma,
              rows = res$rows, dc = res$dc, dc_estimated = is.null(dc),
              gaussian = isTRUE(as_flag(gaussian, "gaussian")),
              gaussian_cutoff = gaussian_cutoff, backend = res$backend,
              peaks = NULL, clusters = NULL, halo = NULL)
  if (!is.null(res$cut)) {
    fit$peaks <- res$cut$peaks
    fit$clusters <- res$cut$clusters
    fit$halo <- res$cut$halo
  }
  structure(fit, class = "gpu_mpi_dpc")
}

print.gpu_mpi_dpc <- function(x, ...) {
  cat(sprintf("Density peaks clustering over MPI: this rank's %d row%s (backend: %s)\n",
              length(x$rho), if (length(x$rho) == 1L) "" else "s", x$backend))
  cat(sprintf("  dc = %.4g (%s), %s kernel\n", x$dc,
              if (isTRUE(x$dc_estimated)) "estimated" else "given",
              if (isTRUE(x$gaussian)) "Gaussian" else "cutoff"))
  if (is.null(x$peaks)) cat("  no centres chosen (give k, or rho and delta)\n")
  else cat(sprintf("  %d cluster%s; centres (global rows): %s\n", length(x$peaks),
                   if (length(x$peaks) == 1L) "" else "s",
                   paste(utils::head(x$peaks, 10L), collapse = " ")))
  invisible(x)
}

gpu_mpi_gmm <- function(data, G = 1:9, modelNames = NULL, init = "hc", max_iter = 1000,
                        tol = 1e-5, reg = 0, n_init = 1, seed = NULL, verbose = FALSE,
                        backend = "auto", devices = "local") {
  cl <- match.call()
  data <- as_double_matrix(data, "data")
  params <- gmm_params(cl, environment(), modelNames)
  seed <- as_seed(seed)
  verbose <- as_flag(verbose, "verbose")
  mpi_start()
  res <- .Call(gpuml_r_mpi_gmm_fit, data, params, seed, as_backend(backend), verbose,
               gpuml_threads(), as_devices(devices))
  gmm_fit_object(res, data, cl, seed, verbose)
}
