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

gpu_gmm <- function(data, G = 1:9, modelNames = NULL, init = "hc", max_iter = 1000,
                    tol = 1e-5, reg = 0, n_init = 1, seed = NULL, verbose = FALSE,
                    backend = "auto", devices = getOption("gpuml.devices")) {
  cl <- match.call()
  data <- as_double_matrix(data, "data")
  params <- gmm_params(cl, environment(), modelNames)
  seed <- as_seed(seed)
  verbose <- as_flag(verbose, "verbose")
  res <- .Call(gpuml_r_gmm_fit, data, params, seed, as_backend(backend), verbose,
               gpuml_threads(), as_devices(devices))
  gmm_fit_object(res, data, cl, seed, verbose)
}

# The parameters of a fit that the caller gave, by the core's names.
gmm_params <- function(cl, env, modelNames) {
  params <- given_args(cl, env, c("G", "init", "max_iter", "tol", "reg", "n_init"))
  if (!is.null(modelNames)) {
    if (!is.character(modelNames) || !length(modelNames) || anyNA(modelNames))
      stop("modelNames must be NULL or a character vector of mclust's model names",
           call. = FALSE)
    params$models <- modelNames
  }
  params
}

# The "gpu_gmm" object of the core's fit `res` of `data`.
gmm_fit_object <- function(res, data, cl, seed, verbose) {
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
  BIC <- res$BIC
  dimnames(BIC) <- list(format(res$G_tried, trim = TRUE), res$models_tried)
  BIC <- structure(BIC, class = "gpu_gmm_bic")
  fit <- structure(list(
    call = cl, n = nrow(data), d = d, G = res$G, modelName = res$modelName,
    parameters = list(pro = res$pro, mean = mean,
                      variance = list(modelName = res$modelName, d = d, G = res$G,
                                      sigma = sigma)),
    z = z, classification = classification, uncertainty = uncertainty,
    loglik = res$loglik, bic = max(unclass(BIC), na.rm = TRUE), BIC = BIC, df = res$df,
    n_iter = res$n_iter, converged = res$converged, backend = res$backend, seed = seed),
    class = "gpu_gmm")
  if (verbose)
    message(sprintf("gmm: %s with G = %d chosen by BIC = %.6g; loglik %.6g after %d iteration%s%s on %s",
                    fit$modelName, fit$G, fit$bic, fit$loglik, fit$n_iter,
                    if (fit$n_iter == 1L) "" else "s",
                    if (fit$converged) "" else " (not converged)", fit$backend))
  fit
}

# The best `n` cells of a BIC table (G x model), largest first, named "model,G".
top_bic <- function(BIC, n = 3L) {
  b <- unclass(BIC)
  o <- order(b, decreasing = TRUE, na.last = NA)[seq_len(min(n, sum(!is.na(b))))]
  stats::setNames(b[o], paste(colnames(b)[col(b)[o]], rownames(b)[row(b)[o]], sep = ","))
}

print.gpu_gmm_bic <- function(x, digits = getOption("digits"), ...) {
  cat("Bayesian Information Criterion (BIC), G x model:\n")
  print(round(unclass(x), 2L), ...)
  cat("\nTop 3 models based on the BIC criterion:\n")
  print(round(top_bic(x), 2L), ...)
  invisible(x)
}

print.gpu_gmm <- function(x, digits = getOption("digits") - 3L, ...) {
  cat(sprintf("Gaussian mixture model (gpuml): %s with %d component%s\n", x$modelName, x$G,
              if (x$G == 1L) "" else "s"))
  cat(sprintf("fitted by EM on %s: %d iteration%s, %s; n = %d, d = %d\n", x$backend,
              x$n_iter, if (x$n_iter == 1L) "" else "s",
              if (x$converged) "converged" else "not converged (max_iter reached)", x$n, x$d))
  cat(sprintf("log-likelihood %s, df %d, BIC %s\n", format(x$loglik, digits = digits + 3L),
              as.integer(x$df), format(x$bic, digits = digits + 3L)))
  cat("mixing proportions:\n")
  print(round(x$parameters$pro, digits), ...)
  if (length(x$BIC) > 1L) {
    cat("Top models by BIC:\n")
    print(round(top_bic(x$BIC), 2L), ...)
  }
  invisible(x)
}

summary.gpu_gmm <- function(object, ...) {
  structure(list(G = object$G, modelName = object$modelName,
                 n = object$n, d = object$d, loglik = object$loglik, df = object$df,
                 bic = object$bic, BIC = object$BIC, top = top_bic(object$BIC),
                 pro = object$parameters$pro, mean = object$parameters$mean,
                 variance = object$parameters$variance$sigma,
                 classification = table(factor(object$classification,
                                               levels = seq_len(object$G))),
                 n_iter = object$n_iter, converged = object$converged,
                 backend = object$backend),
            class = "summary.gpu_gmm")
}

print.summary.gpu_gmm <- function(x, digits = getOption("digits") - 3L, ...) {
  cat(sprintf("Gaussian finite mixture model (gpuml) fitted by EM on %s\n", x$backend))
  cat(sprintf("%s model with %d component%s\n\n", x$modelName, x$G,
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
  if (length(x$top) > 1L) {
    cat("\nBest BIC values:\n")
    print(round(x$top, 2L))
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
               object$modelName, newdata, as_backend(backend), FALSE, gpuml_threads())
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
    B <- unclass(x$BIC)
    g <- as.numeric(rownames(B))
    o <- order(g)
    models <- colnames(B)
    cols_m <- gpuml_palette(length(models))
    pch_m <- c(16, 17, 15, 18, 1, 2, 0, 5, 3, 4, 8, 6, 7, 9)[seq_along(models)]
    rng <- range(B, na.rm = TRUE)
    graphics::matplot(g[o], B[o, , drop = FALSE], type = "b", lty = 1, pch = pch_m,
                      col = cols_m, xlab = "number of components G", ylab = "BIC",
                      ylim = rng, main = sprintf("BIC (best: %s, G = %d)", x$modelName, x$G),
                      xaxt = "n", ...)
    graphics::axis(1, at = g)
    best <- which(B == max(B, na.rm = TRUE), arr.ind = TRUE)[1L, ]
    graphics::points(g[best[1]], B[best[1], best[2]], pch = 1, cex = 2.4, col = "red", lwd = 2)
    graphics::legend("bottomright", legend = models, col = cols_m, pch = pch_m, lty = 1,
                     ncol = if (length(models) > 7L) 2L else 1L, cex = 0.7, bg = "white")
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
