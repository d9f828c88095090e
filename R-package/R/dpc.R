# Density peaks clustering (Rodriguez and Laio, Science 2014). The C core computes and
# validates; these wrappers coerce types, keep the data for recutting, and plot.

# The selection (k, or the thresholds rho and delta) and dc as the core takes them by
# name; NULL means not given.
dpc_params <- function(dc = NULL, gaussian = NULL, k = NULL, rho = NULL, delta = NULL,
                       gaussian_cutoff = NULL) {
  params <- list(dc = dc, k = k, rho = rho, delta = delta, gaussian_cutoff = gaussian_cutoff)
  if (!is.null(gaussian))
    params$kernel <- if (isTRUE(as_flag(gaussian, "gaussian"))) "gaussian" else "cutoff"
  params[!vapply(params, is.null, logical(1))]
}

gpu_dpc <- function(x, dc = NULL, gaussian = FALSE, k = NULL, rho = NULL, delta = NULL,
                    gaussian_cutoff = 0, seed = NULL, backend = "auto", verbose = FALSE,
                    devices = getOption("gpuml.devices")) {
  x <- as_double_matrix(x, "x")
  verbose <- as_flag(verbose, "verbose")
  params <- dpc_params(dc, if (missing(gaussian)) NULL else gaussian, k, rho, delta,
                       gaussian_cutoff)
  seed <- as_seed(seed)
  res <- .Call(gpuml_r_dpc, x, params, seed, as_backend(backend), verbose, gpuml_threads(),
               as_devices(devices))
  fit <- structure(list(rho = res$rho, delta = res$delta, nearest = res$nearest,
                        gamma = res$gamma, order = res$order, dc = res$dc, dc_estimated = is.null(dc),
                        gaussian = isTRUE(as_flag(gaussian, "gaussian")),
                        gaussian_cutoff = gaussian_cutoff, backend = res$backend, x = x, seed = seed,
                        peaks = NULL, clusters = NULL, halo = NULL, k = NULL,
                        threshold = NULL),
                   class = "gpu_dpc")
  # the cell index of the halo (n (d + 2) doubles; none where the halo runs on distance
  # tiles), built by the first dpc_clusters() and kept here for the next: an environment,
  # so that the copies of the fit share it; a fit that is never recut does not pay for it
  fit$index <- new.env(parent = emptyenv())
  if (!is.null(res$cut)) fit <- dpc_store_cut(fit, res$cut, k, rho, delta)
  if (verbose)
    message(sprintf("dpc: %d points, dc = %.4g%s, on %s", nrow(x), fit$dc,
                    if (fit$dc_estimated) " (estimated)" else "", fit$backend))
  fit
}

dpc_store_cut <- function(fit, cut, k, rho, delta) {
  names_of <- rownames(fit$x)
  fit$peaks <- cut$peaks
  fit$clusters <- cut$clusters
  fit$halo <- cut$halo
  if (!is.null(names_of)) names(fit$clusters) <- names(fit$halo) <- names_of
  fit$k <- if (!is.null(k)) as.integer(k) else NULL
  fit$threshold <- if (is.null(k)) c(rho = rho, delta = delta) else NULL
  fit
}

dpc_clusters <- function(fit, k = NULL, rho = NULL, delta = NULL, backend = fit$backend,
                         verbose = FALSE) {
  if (!inherits(fit, "gpu_dpc"))
    stop("fit must be the result of gpu_dpc()", call. = FALSE)
  verbose <- as_flag(verbose, "verbose")
  index <- fit$index
  if (is.environment(index)) {
    if (is.null(index$ptr)) index$ptr <- .Call(gpuml_r_dpc_index, fit$x, fit$dc, gpuml_threads())
    index <- index$ptr
  }
  cut <- .Call(gpuml_r_dpc_cut, fit$x, fit$dc, fit$rho, fit$delta, fit$nearest, fit$order,
               index, dpc_params(k = k, rho = rho, delta = delta), as_backend(backend), verbose,
               gpuml_threads())
  dpc_store_cut(fit, cut, k, rho, delta)
}

print.gpu_dpc <- function(x, ...) {
  n <- length(x$rho)
  cat(sprintf("Density peaks clustering of %d point%s in %d dimension%s (backend: %s)\n",
              n, if (n == 1L) "" else "s", ncol(x$x), if (ncol(x$x) == 1L) "" else "s",
              x$backend))
  cat(sprintf("  dc = %.4g (%s), %s kernel\n", x$dc,
              if (isTRUE(x$dc_estimated)) "estimated: about 2% of the points within dc"
              else "given", if (isTRUE(x$gaussian)) "Gaussian" else "cutoff"))
  cat(sprintf("  rho in [%.4g, %.4g], delta in [%.4g, %.4g]\n", min(x$rho), max(x$rho),
              min(x$delta), max(x$delta)))
  if (is.null(x$clusters)) {
    cat("  no centres chosen: look at plot(fit) and call dpc_clusters(fit, k = ) or",
        "dpc_clusters(fit, rho = , delta = )\n")
  } else {
    how <- if (!is.null(x$k)) sprintf("k = %d", x$k)
           else sprintf("rho > %.4g and delta > %.4g", x$threshold[["rho"]],
                        x$threshold[["delta"]])
    sizes <- tabulate(x$clusters, nbins = length(x$peaks))
    cat(sprintf("  %d cluster%s (%s), sizes %s\n", length(x$peaks),
                if (length(x$peaks) == 1L) "" else "s", how,
                paste(utils::head(sizes, 10L), collapse = " ")),
        if (length(sizes) > 10L) sprintf("  ... %d more clusters\n", length(sizes) - 10L))
    cat(sprintf("  %d halo point%s\n", sum(x$halo), if (sum(x$halo) == 1L) "" else "s"))
  }
  invisible(x)
}

summary.gpu_dpc <- function(object, ...) {
  res <- list(n = length(object$rho), d = ncol(object$x), dc = object$dc,
              gaussian = object$gaussian, backend = object$backend,
              rho = summary(object$rho), delta = summary(object$delta), clusters = NULL)
  if (!is.null(object$clusters)) {
    p <- object$peaks
    size <- tabulate(object$clusters, nbins = length(p))
    halo <- tabulate(object$clusters[object$halo], nbins = length(p))
    res$clusters <- data.frame(cluster = seq_along(p), centre = p, size = size,
                               core = size - halo, halo = halo, rho = object$rho[p],
                               delta = object$delta[p], gamma = object$gamma[p])
  }
  structure(res, class = "summary.gpu_dpc")
}

print.summary.gpu_dpc <- function(x, ...) {
  cat(sprintf("Density peaks clustering: %d points, %d dimension%s, dc = %.4g, %s kernel, backend %s\n",
              x$n, x$d, if (x$d == 1L) "" else "s", x$dc,
              if (isTRUE(x$gaussian)) "Gaussian" else "cutoff", x$backend))
  cat("rho:\n")
  print(x$rho, ...)
  cat("delta:\n")
  print(x$delta, ...)
  if (is.null(x$clusters)) {
    cat("no centres chosen (dpc_clusters() chooses them)\n")
  } else {
    cat("clusters (centre: row of the data; core and halo points):\n")
    print(x$clusters, row.names = FALSE, ...)
  }
  invisible(x)
}


# The points a plot draws, so that the plots stay instant at 10^7 points: all up to
# max_points, else max_points of them evenly spaced by row (a systematic sample: no
# random numbers drawn, the same rows every time), and always the peaks and the
# candidate centres (the `candidates` largest gamma, ranked by the core). Returns the
# rows, the candidates and a sentence saying what was drawn.
dpc_plot_rows <- function(x, max_points, candidates = 100L) {
  n <- length(x$rho)
  if (!is.numeric(max_points) || length(max_points) != 1L || is.na(max_points) ||
      max_points < 1)
    stop("max_points must be a positive number", call. = FALSE)
  top <- .Call(gpuml_r_dpc_rank, x$rho, x$delta, min(n, candidates), gpuml_threads())
  if (n <= max_points)
    return(list(rows = seq_len(n), candidates = top, note = ""))
  sample <- unique(round(seq(1, n, length.out = max_points)))
  list(rows = sort(unique(c(sample, top, x$peaks))), candidates = top,
       note = sprintf("%s of %s points (evenly spaced rows) and the %d largest gamma",
                      format(length(sample), big.mark = ","), format(n, big.mark = ","),
                      length(top)))
}

plot.gpu_dpc <- function(x, y = NULL, type = c("decision", "clusters"), max_points = 20000,
                         ...) {
  type <- match.arg(type)
  drawn <- dpc_plot_rows(x, max_points)
  rows <- drawn$rows
  sampled <- if (nzchar(drawn$note)) paste0("drawn: ", drawn$note) else NULL
  if (type == "decision") {
    graphics::plot(x$rho[rows], x$delta[rows], xlab = expression(rho ~ "(local density)"),
                   ylab = expression(delta ~ "(distance to a denser point)"),
                   main = "Decision graph", sub = sampled, pch = 20, col = "grey40", ...)
    # the candidate centres (largest gamma = rho * delta) stand out of the sample
    top <- drawn$candidates
    graphics::points(x$rho[top], x$delta[top], pch = 20, col = "black")
    if (!is.null(x$peaks)) {
      col <- gpuml_palette(length(x$peaks))
      graphics::points(x$rho[x$peaks], x$delta[x$peaks], pch = 21, bg = col, cex = 1.8)
      graphics::text(x$rho[x$peaks], x$delta[x$peaks], seq_along(x$peaks), pos = 3,
                     cex = 0.8)
      if (!is.null(x$threshold))
        graphics::abline(v = x$threshold[["rho"]], h = x$threshold[["delta"]], lty = 2,
                         col = "grey60")
    }
    return(invisible(x))
  }
  if (is.null(x$clusters))
    stop("no clusters yet: choose centres with dpc_clusters(fit, k = ) first",
         call. = FALSE)
  data <- if (is.null(y)) x$x else as_double_matrix(y, "y")
  if (nrow(data) != length(x$clusters))
    stop(sprintf("the data have %d rows but the fit has %d points", nrow(data),
                 length(x$clusters)), call. = FALSE)
  lab <- colnames(data)
  data <- data[rows, , drop = FALSE]
  clusters <- x$clusters[rows]
  halo <- x$halo[rows]
  peaks <- match(x$peaks, rows)
  if (ncol(data) == 1L) {
    data <- cbind(data, 0)
    lab <- c(if (is.null(lab)) "x" else lab[1L], "")
  } else if (ncol(data) > 2L) {
    # More than two variables: the first two principal components.
    data <- stats::prcomp(data)$x[, 1:2, drop = FALSE]
    lab <- c("PC1", "PC2")
  }
  if (is.null(lab)) lab <- c("x1", "x2")
  col <- gpuml_palette(length(x$peaks))[clusters]
  graphics::plot(data[, 1], data[, 2], type = "n", xlab = lab[1], ylab = lab[2],
                 main = sprintf("%d clusters, %d halo points", length(x$peaks), sum(x$halo)),
                 sub = sampled, ...)
  if (any(halo))
    graphics::points(data[halo, 1], data[halo, 2], pch = 1, cex = 0.6,
                     col = grDevices::adjustcolor(col[halo], alpha.f = 0.6))
  graphics::points(data[!halo, 1], data[!halo, 2], pch = 20, col = col[!halo])
  graphics::points(data[peaks, 1], data[peaks, 2], pch = 23, cex = 1.8, bg = "white",
                   col = "black", lwd = 2)
  invisible(x)
}
