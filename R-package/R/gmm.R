# Gaussian mixture models fitted by EM on the GPU or the CPU. The C core validates
# every value and does all the computing; these wrappers convert types and shape the
# results like mclust's.

# One whole number (or a vector of them, `single = FALSE`) as a double.
as_whole_numbers <- function(x, what, single = TRUE) {
  if (!is.numeric(x) || (single && length(x) != 1L) || !length(x) || anyNA(x) ||
      any(!is.finite(x)) || any(x != round(x)))
    stop(sprintf("%s must be %s", what,
                 if (single) "a single whole number" else "a vector of whole numbers"),
         call. = FALSE)
  as.double(x)
}

gpu_gmm <- function(data, G = 1:9, covariance = "full", max_iter = 1000, tol = 1e-8,
                    reg = 1e-6, n_init = 1, seed = NULL, verbose = FALSE,
                    backend = "auto") {
  cl <- match.call()
  data <- as_double_matrix(data, "data")
  params <- given_args(cl, environment(), c("G", "covariance", "max_iter", "tol", "reg", "n_init"))
  seed <- as_seed(seed)
  verbose <- as_flag(verbose, "verbose")
  res <- .Call(gpuml_r_gmm_fit, data, params, seed, as_backend(backend), verbose,
               gpuml_threads())
  G <- res$G_tried
  vars <- colnames(data)
  d <- ncol(data)
  mean <- res$mean
  dimnames(mean) <- list(vars, NULL)
  sigma <- res$sigma
  dimnames(sigma) <- list(vars, vars, NULL)
  z <- res$z
  rownames(z) <- rownames(data)
  classification <- res$classification
  names(classification) <- rownames(data)
  uncertainty <- res$uncertainty
  names(uncertainty) <- rownames(data)
  bic <- res$bic
  names(bic) <- format(G, trim = TRUE)
  fit <- structure(list(
    call = cl, n = nrow(data), d = d, G = res$G, covariance = res$covariance,
    modelName = res$modelName,
    parameters = list(pro = res$pro, mean = mean,
                      variance = list(modelName = res$modelName, d = d, G = res$G,
                                      sigma = sigma)),
    z = z, classification = classification, uncertainty = uncertainty,
    loglik = res$loglik, bic = bic, df = res$df, n_iter = res$n_iter,
    converged = res$converged, backend = res$backend, seed = seed),
    class = "gpu_gmm")
  if (verbose)
    message(sprintf("gmm: G = %d (%s) chosen by BIC = %.6g; loglik %.6g after %d iteration%s%s on %s",
                    fit$G, fit$modelName, max(bic, na.rm = TRUE), fit$loglik, fit$n_iter,
                    if (fit$n_iter == 1L) "" else "s",
                    if (fit$converged) "" else " (not converged)", fit$backend))
  fit
}

print.gpu_gmm <- function(x, digits = getOption("digits") - 3L, ...) {
  cat(sprintf("Gaussian mixture model (gpuml): %d component%s, %s covariance (%s)\n", x$G,
              if (x$G == 1L) "" else "s", x$covariance, x$modelName))
  cat(sprintf("fitted by EM on %s: %d iteration%s, %s; n = %d, d = %d\n", x$backend,
              x$n_iter, if (x$n_iter == 1L) "" else "s",
              if (x$converged) "converged" else "not converged (max_iter reached)", x$n, x$d))
  cat(sprintf("log-likelihood %s, df %d, BIC %s\n", format(x$loglik, digits = digits + 3L),
              as.integer(x$df), format(max(x$bic, na.rm = TRUE), digits = digits + 3L)))
  cat("mixing proportions:\n")
  print(round(x$parameters$pro, digits), ...)
  if (length(x$bic) > 1L) {
    cat("BIC by G:\n")
    print(round(x$bic, 2L), ...)
  }
  invisible(x)
}

summary.gpu_gmm <- function(object, ...) {
  structure(list(G = object$G, covariance = object$covariance, modelName = object$modelName,
                 n = object$n, d = object$d, loglik = object$loglik, df = object$df,
                 bic = max(object$bic, na.rm = TRUE), BIC = object$bic,
                 pro = object$parameters$pro, mean = object$parameters$mean,
                 variance = object$parameters$variance$sigma,
                 classification = table(factor(object$classification,
                                               levels = seq_len(object$G))),
                 n_iter = object$n_iter, converged = object$converged,
                 backend = object$backend),
            class = "summary.gpu_gmm")
}

print.summary.gpu_gmm <- function(x, digits = getOption("digits") - 3L, ...) {
  cat(sprintf("Gaussian mixture model (gpuml) fitted by EM on %s\n", x$backend))
  cat(sprintf("%s (%s covariance) with %d component%s\n\n", x$modelName, x$covariance, x$G,
              if (x$G == 1L) "" else "s"))
  print(data.frame(`log-likelihood` = x$loglik, n = x$n, df = as.integer(x$df), BIC = x$bic,
                   iterations = x$n_iter, converged = x$converged, check.names = FALSE),
        row.names = FALSE, digits = digits + 3L)
  cat("\nClustering table:\n")
  print(x$classification)
  cat("\nMixing proportions:\n")
  print(round(x$pro, digits))
  cat("\nMeans:\n")
  print(round(x$mean, digits))
  if (length(x$BIC) > 1L) {
    cat("\nBIC by G:\n")
    print(round(x$BIC, 2L))
  }
  invisible(x)
}

predict.gpu_gmm <- function(object, newdata, backend = "auto", ...) {
  if (missing(newdata))
    stop("newdata is required: gpu_gmm() keeps no copy of the data (the fit's own ",
         "classification is in $classification)", call. = FALSE)
  newdata <- as_double_matrix(newdata, "newdata")
  p <- object$parameters
  res <- .Call(gpuml_r_gmm_predict, as.double(p$pro), matrix(as.double(p$mean), object$d),
               array(as.double(p$variance$sigma), c(object$d, object$d, object$G)),
               object$covariance, newdata, as_backend(backend), FALSE, gpuml_threads())
  z <- res$z
  rownames(z) <- rownames(newdata)
  classification <- res$classification
  names(classification) <- rownames(newdata)
  list(classification = classification, z = z, uncertainty = res$uncertainty,
       backend = res$backend)
}

# Points of the ellipse {x : (x - mu)' S^-1 (x - mu) = qchisq(level, 2)}.
gmm_ellipse <- function(mu, S, level = 0.95, points = 120L) {
  e <- eigen(S, symmetric = TRUE)
  a <- seq(0, 2 * pi, length.out = points)
  r <- sqrt(stats::qchisq(level, 2))
  t(mu + r * e$vectors %*% (sqrt(pmax(e$values, 0)) * rbind(cos(a), sin(a))))
}

plot.gpu_gmm <- function(x, what = c("BIC", "classification", "uncertainty"), data = NULL,
                         dimens = c(1L, 2L), ...) {
  what <- match.arg(what)
  G <- x$G
  cols <- gpuml_palette(G)
  if (what == "BIC") {
    g <- as.numeric(names(x$bic))
    o <- order(g)
    best <- which.max(x$bic)
    graphics::plot(g[o], x$bic[o], type = "b", pch = 16, xlab = "number of components G",
                   ylab = "BIC", main = sprintf("BIC, %s covariance (%s)", x$covariance,
                                                x$modelName), xaxt = "n", ...)
    graphics::axis(1, at = g)
    graphics::points(g[best], x$bic[best], pch = 1, cex = 2.2, col = "red", lwd = 2)
    return(invisible(x))
  }
  if (is.null(data))
    stop(sprintf("plot(fit, what = \"%s\") needs the data the model was fitted to: pass data = ...",
                 what), call. = FALSE)
  data <- as_double_matrix(data, "data")
  if (nrow(data) != length(x$classification) || ncol(data) != x$d)
    stop(sprintf("data is %d x %d but the model was fitted to %d x %d data", nrow(data),
                 ncol(data), length(x$classification), x$d), call. = FALSE)
  dimens <- as_whole_numbers(dimens, "dimens", single = FALSE)
  if (x$d == 1L) dimens <- 1
  if (any(dimens < 1 | dimens > x$d) || length(dimens) > 2L)
    stop(sprintf("dimens must name one or two of the %d columns", x$d), call. = FALSE)
  cls <- x$classification
  if (length(dimens) == 1L) {
    v <- data[, dimens]
    if (what == "classification") {
      graphics::stripchart(split(v, factor(cls, levels = seq_len(G))), method = "jitter",
                           col = cols, pch = 16, xlab = colnames(data)[dimens],
                           ylab = "component", main = "classification", ...)
    } else {
      graphics::plot(v, x$uncertainty, col = cols[cls], pch = 16,
                     xlab = if (is.null(colnames(data))) "x" else colnames(data)[dimens],
                     ylab = "uncertainty", main = "classification uncertainty", ...)
    }
    return(invisible(x))
  }
  xy <- data[, dimens, drop = FALSE]
  labs <- if (is.null(colnames(data))) paste0("x", dimens) else colnames(data)[dimens]
  if (what == "classification") {
    graphics::plot(xy, col = cols[cls], pch = c(16, 17, 15, 18, 3, 4, 8, 1, 2)[(cls - 1L) %% 9L + 1L],
                   cex = 0.7, xlab = labs[1], ylab = labs[2],
                   main = sprintf("classification, G = %d", G), ...)
  } else {
    u <- x$uncertainty
    size <- 0.3 + 2.2 * sqrt(u / max(u, .Machine$double.eps))
    graphics::plot(xy, col = grDevices::gray(0.75 * (1 - u / max(u, .Machine$double.eps))),
                   pch = 16, cex = size, xlab = labs[1], ylab = labs[2],
                   main = "classification uncertainty (larger, darker: more uncertain)", ...)
  }
  sigma <- x$parameters$variance$sigma
  mean <- x$parameters$mean
  for (k in seq_len(G)) {
    graphics::lines(gmm_ellipse(mean[dimens, k], sigma[dimens, dimens, k]), col = cols[k],
                    lwd = 1.5)
    graphics::points(mean[dimens[1], k], mean[dimens[2], k], pch = 3, cex = 1.6, lwd = 2,
                     col = cols[k])
  }
  invisible(x)
}
