# t-SNE (gpu_tsne) with Rtsne's argument names where they mean the same, and its
# print, summary and plot methods. The arguments a user gives go to the core by name; the
# core holds the defaults (the signature shows them) and checks every value.

gpu_tsne <- function(X, dims = 2, perplexity = 30, max_iter = 1000, pca = TRUE,
                     initial_dims = 50, init = "pca", learning_rate = "auto",
                     exaggeration = 12, stop_lying_iter = 250, method = "auto",
                     seed = NULL, verbose = FALSE, backend = "auto", momentum = 0.5,
                     final_momentum = 0.8, mom_switch_iter = 250, max_step_norm = 5,
                     df = 1, keep_data = TRUE, is_distance = FALSE, nn_index = NULL,
                     nn_dist = NULL, devices = getOption("gpuml.devices")) {
  # the input: data (rows), a distance matrix or dist object, or neighbour lists
  input <- if (!is.null(nn_index) || !is.null(nn_dist)) "neighbours"
           else if (isTRUE(is_distance)) "distance" else "data"
  nn <- NULL
  if (input == "neighbours") {
    if (is.null(nn_index) || is.null(nn_dist))
      stop("nn_index and nn_dist must be given together (as gpu_knn() returns them)",
           call. = FALSE)
    X <- as_double_matrix(nn_index, "nn_index")  # 1-based indices, converted by the glue
    nn <- as_double_matrix(nn_dist, "nn_dist")
  } else {
    if (input == "distance" && inherits(X, "dist")) X <- as.matrix(X)
    X <- as_double_matrix(X, "X")
  }
  params <- given_args(match.call(), environment(),
                       c("dims", "perplexity", "max_iter", "pca", "initial_dims", "init",
                         "learning_rate", "exaggeration", "stop_lying_iter", "method",
                         "momentum", "final_momentum", "mom_switch_iter", "max_step_norm",
                         "df"))
  if (length(params$perplexity) > 1L) {  # multiscale: the core's list of perplexities
    params$perplexities <- params$perplexity
    params$perplexity <- NULL
  }
  init_y <- NULL
  if (!is.null(params$init) && !is.character(params$init)) {
    init_y <- as_double_matrix(params$init, "init")  # the user's start
    params$init <- NULL
  }
  seed <- as_seed(seed)
  started <- proc.time()[["elapsed"]]
  res <- .Call(gpuml_r_tsne, X, params, init_y, seed, as_backend(backend),
               as_flag(verbose, "verbose"), gpuml_threads(), input, nn, as_devices(devices))
  elapsed <- proc.time()[["elapsed"]] - started
  if (input != "neighbours" && !is.null(rownames(X))) rownames(res$Y) <- rownames(X)
  used <- res$settings  # what the core ran with, its defaults included
  structure(list(Y = res$Y, itercosts = res$itercosts, costs_at = as.integer(res$costs_at),
                 N = nrow(X), origD = if (input == "data") ncol(X) else NA_integer_,
                 input = input, dims = as.integer(used[["dims"]]),
                 perplexity = if (!is.null(params$perplexities)) params$perplexities
                              else used[["perplexity"]],
                 neighbours = as.integer(res$neighbours),
                 max_iter = as.integer(used[["max_iter"]]), pca = as.logical(used[["pca"]]),
                 initial_dims = as.integer(used[["initial_dims"]]),
                 init = if (!is.null(init_y)) "user" else c("pca", "random")[used[["init"]] + 1],
                 eta = res$learning_rate, exaggeration_factor = used[["exaggeration"]],
                 stop_lying_iter = as.integer(used[["stop_lying_iter"]]),
                 mom_switch_iter = as.integer(used[["mom_switch_iter"]]),
                 momentum = used[["momentum"]], final_momentum = used[["final_momentum"]],
                 df = used[["df"]],
                 method = res$method, seed = seed, backend = res$backend, time = elapsed,
                 time_affinities = res$time_affinities,
                 time_optimisation = res$time_optimisation,
                 X = if (isTRUE(keep_data) && input == "data") X),  # for predict()
            class = "gpu_tsne")
}

# New points placed into the fitted embedding (gpuml_tsne_transform): the fit's points
# stay where they are. The core holds the defaults the signature shows.
predict.gpu_tsne <- function(object, newdata, perplexity = 5, max_iter = 250,
                             learning_rate = "auto", momentum = 0.8, max_step_norm = 5,
                             method = "auto", init = "median", backend = "auto",
                             verbose = FALSE, ...) {
  if (missing(newdata))
    stop("newdata is required: the fit's own embedding is in $Y", call. = FALSE)
  newdata <- as_double_matrix(newdata, "newdata")
  params <- given_args(match.call(), environment(),
                       c("perplexity", "max_iter", "learning_rate", "momentum",
                         "max_step_norm", "method", "init"))
  if (!is.null(object$df)) params$df <- object$df
  res <- .Call(gpuml_r_tsne_transform, object$X, object$Y, newdata, params,
               as_backend(backend), as_flag(verbose, "verbose"), gpuml_threads())
  Y <- res$Y
  rownames(Y) <- rownames(newdata)
  Y
}

print.gpu_tsne <- function(x, ...) {
  from <- if (is.null(x$input) || x$input == "data") sprintf("%d variables", x$origD)
          else if (x$input == "distance") "from distances" else "from neighbour lists"
  cat(sprintf("t-SNE embedding of %d points (%s) in %d dimension%s\n", x$N, from, x$dims,
              if (x$dims == 1L) "" else "s"))
  cat(sprintf("  perplexity %s (%d neighbours), %d iterations, method %s, backend %s%s\n",
              paste(x$perplexity, collapse = ", "), x$neighbours, x$max_iter, x$method, x$backend,
              if (!is.null(x$df) && x$df != 1) sprintf(", df %g", x$df) else ""))
  cat(sprintf("  KL divergence %.4f; %.2f s (affinities %.2f s, optimisation %.2f s)\n",
              x$itercosts[length(x$itercosts)], x$time, x$time_affinities,
              x$time_optimisation))
  invisible(x)
}

summary.gpu_tsne <- function(object, ...) {
  structure(list(N = object$N, origD = object$origD, dims = object$dims,
                 settings = c(perplexity = max(object$perplexity), neighbours = object$neighbours,
                              max_iter = object$max_iter, eta = object$eta,
                              exaggeration = object$exaggeration_factor,
                              stop_lying_iter = object$stop_lying_iter,
                              momentum = object$momentum,
                              final_momentum = object$final_momentum,
                              mom_switch_iter = object$mom_switch_iter, df = object$df),
                 pca = object$pca, initial_dims = object$initial_dims, init = object$init,
                 method = object$method, backend = object$backend, seed = object$seed,
                 kl = stats::setNames(object$itercosts, object$costs_at),
                 ranges = apply(object$Y, 2, range), time = object$time),
            class = "summary.gpu_tsne")
}

print.summary.gpu_tsne <- function(x, ...) {
  cat(sprintf("t-SNE: %d points, %d variables -> %d dimension%s (method %s, backend %s, %.2f s)\n",
              x$N, x$origD, x$dims, if (x$dims == 1L) "" else "s", x$method, x$backend,
              x$time))
  cat(sprintf("PCA first: %s; initialisation: %s; seed %.0f\n",
              if (x$pca) sprintf("yes, to %d dimensions", x$initial_dims) else "no",
              x$init, x$seed))
  cat("Settings:\n")
  print(x$settings)
  cat("KL divergence by iteration:\n")
  print(round(x$kl, 4))
  cat("Range of each coordinate:\n")
  r <- x$ranges
  dimnames(r) <- list(c("min", "max"), paste0("Y", seq_len(ncol(r))))
  print(r)
  invisible(x)
}

plot.gpu_tsne <- function(x, labels = NULL, col = NULL, pch = 19, cex = 0.5,
                          legend = !is.null(labels), main = "t-SNE", ...) {
  Y <- x$Y
  if (!is.null(labels)) {
    if (length(labels) != nrow(Y))
      stop(sprintf("labels has %d values but the embedding has %d points", length(labels),
                   nrow(Y)), call. = FALSE)
    labels <- as.factor(labels)
    palette <- gpuml_palette(nlevels(labels))
    if (is.null(col)) col <- unname(palette[as.integer(labels)])
  }
  if (is.null(col)) col <- "grey30"
  show_legend <- isTRUE(legend) && !is.null(labels) && nlevels(labels) <= 30L && x$dims < 3L
  if (show_legend) {
    old <- legend_margin(levels(labels))
    on.exit(graphics::par(mai = old), add = TRUE)
  }
  if (x$dims == 1L) {
    jitter <- 0.8 * ((seq_len(nrow(Y)) * 0.6180339887) %% 1) - 0.4  # spread, not random
    graphics::plot(Y[, 1], jitter, col = col, pch = pch, cex = cex, yaxt = "n",
                   xlab = "Y1", ylab = "", main = main, ylim = c(-0.5, 0.5),
                   ...)
  } else if (x$dims == 2L) {
    graphics::plot(Y[, 1], Y[, 2], col = col, pch = pch, cex = cex, xlab = "Y1",
                   ylab = "Y2", main = main, asp = 1, ...)
  } else {
    graphics::pairs(Y, col = col, pch = pch, cex = cex, labels = c("Y1", "Y2", "Y3"),
                    main = main, ...)
  }
  if (show_legend) legend_outside(levels(labels), palette, pch)
  invisible(x)
}
