backend <- function() test_backend()
mclust_models <- c("EII", "VII", "EEI", "VEI", "EVI", "VVI", "EEE", "VEE", "EVE", "VVE", "EEV",
                   "VEV", "EVV", "VVV")

test_that("gpu_gmm returns an mclust-like object", {
  fit <- gpu_gmm(faithful, G = 1:4, modelNames = "VVV", seed = 1, backend = backend())
  expect_s3_class(fit, "gpu_gmm")
  expect_identical(fit$G, 2L)
  expect_identical(fit$modelName, "VVV")
  expect_named(fit$parameters, c("pro", "mean", "variance"))
  expect_equal(sum(fit$parameters$pro), 1, tolerance = 1e-12)
  expect_identical(dim(fit$parameters$mean), c(2L, 2L))
  expect_identical(rownames(fit$parameters$mean), c("eruptions", "waiting"))
  expect_identical(dim(fit$parameters$variance$sigma), c(2L, 2L, 2L))
  expect_identical(dim(fit$z), c(272L, 2L))
  expect_equal(rowSums(fit$z), rep(1, 272), tolerance = 1e-12, ignore_attr = TRUE)
  expect_true(is.integer(fit$classification) && all(fit$classification %in% 1:2))
  expect_equal(unname(fit$uncertainty), unname(1 - apply(fit$z, 1, max)), tolerance = 1e-14)
  expect_s3_class(fit$BIC, "gpu_gmm_bic")
  expect_identical(dimnames(fit$BIC), list(c("1", "2", "3", "4"), "VVV"))
  expect_identical(which.max(fit$BIC), 2L)
  expect_identical(fit$bic, max(fit$BIC))
  expect_equal(fit$bic, 2 * fit$loglik - fit$df * log(272), tolerance = 1e-12)
  expect_identical(fit$df, 11)
  expect_true(fit$converged && fit$n_iter >= 1)
  if (backend() != "auto") expect_identical(fit$backend, backend())
  s <- fit$parameters$variance$sigma
  for (k in 1:2) expect_identical(s[, , k], t(s[, , k]))
})

test_that("faithful: the same fit as mclust's VVV model", {
  skip_if_no_peer("mclust")
  fit <- gpu_gmm(faithful, G = 1:4, modelNames = "VVV", seed = 1, backend = backend())
  m <- mclust_fit(faithful, 1:4)
  expect_identical(fit$G, m$G)
  expect_gte(fit$loglik, m$loglik - 1e-6 * abs(m$loglik))
  expect_equal(fit$loglik, m$loglik, tolerance = 1e-6)
  expect_equal(fit$bic, m$bic, tolerance = 1e-6)
  expect_gte(adjusted_rand(fit$classification, m$classification), 0.99)
})

test_that("separated mixtures are recovered, at least as well as by mclust", {
  for (case in list(list(n = 1200, d = 3, G = 3), list(n = 2000, d = 6, G = 4))) {
    mx <- gmm_mixture(case$n, case$d, case$G, seed = case$d)
    for (cov in c("full", "diag", "spherical")) {
      fit <- gpu_gmm(mx$x, G = case$G, modelNames = cov, seed = 2, backend = backend())
      expect_gte(adjusted_rand(fit$classification, mx$label), 0.95)
      expect_true(fit$converged)
    }
    if (requireNamespace("mclust", quietly = TRUE)) {
      fit <- gpu_gmm(mx$x, G = case$G, modelNames = "VVV", seed = 2, backend = backend())
      m <- mclust_fit(mx$x, case$G)
      expect_gte(fit$loglik, m$loglik - 1e-3 * abs(m$loglik))
    }
  }
})

test_that("BIC picks the true number of components", {
  for (cov in c("full", "diag", "spherical")) {
    mx <- gmm_mixture(900, 2, 3, spread = 40, seed = 11, shape = cov)
    fit <- gpu_gmm(mx$x, G = 1:6, modelNames = cov, seed = 4, backend = backend())
    expect_identical(fit$G, 3L)
    expect_false(anyNA(fit$BIC))
    expect_gte(adjusted_rand(fit$classification, mx$label), 0.95)
  }
})

test_that("diag and spherical covariances have their form and mclust's names", {
  mx <- gmm_mixture(600, 3, 2, seed = 5)
  fd <- gpu_gmm(mx$x, G = 2, modelNames = "diag", seed = 1, backend = backend())
  fs <- gpu_gmm(mx$x, G = 2, modelNames = "Spherical", seed = 1, backend = backend())
  expect_identical(c(fd$modelName, fs$modelName), c("VVI", "VII"))
  for (k in 1:2) {
    sd <- fd$parameters$variance$sigma[, , k]
    expect_identical(sd[upper.tri(sd)], rep(0, 3))
    ss <- fs$parameters$variance$sigma[, , k]
    expect_equal(ss, diag(ss[1, 1], 3))
  }
  expect_identical(c(fd$df, fs$df), c(1 + 6 + 6, 1 + 6 + 2))
})

test_that("predict gives the fitted classification and z on the training data", {
  mx <- gmm_mixture(800, 4, 3, seed = 6)
  fit <- gpu_gmm(mx$x, G = 3, seed = 3, backend = backend())
  p <- predict(fit, mx$x, backend = backend())
  expect_identical(p$classification, unname(fit$classification))
  expect_equal(p$z, fit$z, tolerance = 1e-10, ignore_attr = TRUE)
  expect_equal(p$uncertainty, unname(fit$uncertainty), tolerance = 1e-10)
  q <- t(fit$parameters$mean)
  expect_identical(predict(fit, q)$classification, 1:3)
  expect_identical(predict(fit, as.data.frame(q[2, , drop = FALSE]))$classification, 2L)
  expect_error(predict(fit), "newdata is required")
  expect_error(predict(fit, q[, 1:2]), "newdata has 2 columns but the model has 4")
  expect_error(predict(fit, rbind(q, NA)), "NA/NaN at row 4")
})

test_that("a seed makes fits reproducible; set.seed() is honoured", {
  mx <- gmm_mixture(1000, 3, 4, spread = 6, seed = 7)
  a <- gpu_gmm(mx$x, G = 4, seed = 10, backend = backend())
  b <- gpu_gmm(mx$x, G = 4, seed = 10, backend = backend())
  a$call <- b$call <- NULL
  expect_identical(a, b)
  set.seed(99)
  c1 <- gpu_gmm(mx$x, G = 4, backend = backend())
  set.seed(99)
  c2 <- gpu_gmm(mx$x, G = 4, backend = backend())
  expect_identical(c1$seed, c2$seed)
  expect_identical(c1$parameters, c2$parameters)
  old <- options(gpuml.threads = 1)
  on.exit(options(old))
  d1 <- gpu_gmm(mx$x, G = 4, seed = 10, backend = backend())
  expect_identical(d1$parameters, a$parameters)
  expect_identical(d1$z, a$z)
  big <- gmm_mixture(50000, 6, 4, spread = 6, seed = 8)$x  # large enough to be threaded
  b1 <- gpu_gmm(big, G = 4, seed = 1, tol = 0, max_iter = 10, backend = backend())
  options(gpuml.threads = 2)
  b2 <- gpu_gmm(big, G = 4, seed = 1, tol = 0, max_iter = 10, backend = backend())
  expect_identical(b1$parameters, b2$parameters)
  expect_identical(b1$z, b2$z)
  many <- gpu_gmm(mx$x, G = 4, seed = 10, n_init = 4, backend = backend())
  expect_gte(many$loglik, a$loglik)
  # one model: a G fitted alone is the same fit as within a list (with several models
  # the best fits may be refined from the other models' partitions)
  one <- gpu_gmm(mx$x, G = 3, modelNames = "VVV", backend = backend())
  list_fit <- gpu_gmm(mx$x, G = 3:4, modelNames = "VVV", backend = backend())
  expect_identical(unname(list_fit$BIC["3", ]), unname(one$BIC["3", ]))
})

test_that("print, summary and plot work", {
  fit <- gpu_gmm(faithful, G = 1:3, seed = 1, backend = backend())
  expect_output(print(fit), "Gaussian mixture model \\(gpuml\\): EEE with 3 components")
  expect_output(print(fit), "Top models by BIC")
  expect_output(print(fit$BIC), "Top 3 models based on the BIC criterion")
  s <- summary(fit)
  expect_s3_class(s, "summary.gpu_gmm")
  expect_output(print(s), "Clustering table")
  expect_equal(sum(s$classification), 272)
  pdf(NULL)
  on.exit(dev.off())
  expect_identical(plot(fit), fit)
  expect_silent(plot(fit, "classification", data = faithful))
  expect_silent(plot(fit, "uncertainty", data = faithful, dimens = c(2, 1)))
  expect_error(plot(fit, "classification"), "needs the data")
  expect_error(plot(fit, "classification", data = faithful[1:10, ]), "was fitted to 272 x 2")
  one_d <- gpu_gmm(faithful$waiting, G = 2, seed = 1, backend = backend())
  expect_silent(plot(one_d, "classification", data = faithful$waiting))
  expect_silent(plot(one_d, "uncertainty", data = faithful$waiting))
})

test_that("verbose reports the fits and the model chosen", {
  out <- capture.output(fit <- gpu_gmm(faithful, G = 1:3, seed = 1, verbose = TRUE,
                                       backend = "cpu"), type = "message")
  expect_match(out, "^gmm: 42/42 \\(100%\\)$", all = FALSE)
  expect_match(out, "^gmm: EEE with G = 3 chosen by BIC", all = FALSE)
  quiet <- capture.output(q <- gpu_gmm(faithful, G = 2, seed = 1, backend = "cpu"), type = "message")
  expect_length(quiet, 0)
})

test_that("gpu_gmm reports bad input clearly", {
  x <- as.matrix(faithful)
  expect_error(gpu_gmm(x[1:5, ], G = 6), "G = 6 exceeds the 5 rows of the data")
  expect_error(gpu_gmm(x, G = 0), "G = 0 must be at least 1")
  expect_error(gpu_gmm(x, G = 2.5), "G must be whole numbers")
  expect_error(gpu_gmm(x, G = c(1, NA)), "G must be whole numbers")
  bad <- x
  bad[5, 2] <- NA
  expect_error(gpu_gmm(bad, G = 2), "data contains NA/NaN at row 5, column 2")
  bad[5, 2] <- Inf
  expect_error(gpu_gmm(bad, G = 2), "data contains Inf at row 5, column 2")
  wide <- matrix(rnorm(8 * 10), 8)
  expect_error(gpu_gmm(wide, G = 1, modelNames = "VVV"), "need more than 10 rows.*EEI")
  # mclust's rule: with n <= d only the spherical and diagonal models are tried
  w <- gpu_gmm(wide, G = 1, backend = backend())
  expect_identical(colnames(w$BIC), c("EII", "VII", "EEI", "VEI", "EVI", "VVI"))
  expect_s3_class(gpu_gmm(wide, G = 1, modelNames = "VVV", reg = 1, backend = backend()), "gpu_gmm")
  expect_error(gpu_gmm(x, G = 2, modelNames = "XYZ"),
               "\"XYZ\" is not known.*\"EII\", \"VII\", \"EEI\", \"VEI\", \"EVI\", \"VVI\", \"EEE\", \"VEE\", \"EVE\", \"VVE\", \"EEV\", \"VEV\", \"EVV\", \"VVV\"")
  expect_error(gpu_gmm(x, G = 2, modelNames = c("EEE", "EEE")), "EEE is given twice")
  expect_error(gpu_gmm(x, G = 2, modelNames = 3), "modelNames must be NULL or a character vector")
  expect_error(gpu_gmm(x, G = 2, init = "random"), "init")
  expect_identical(gpu_gmm(x, G = 2, modelNames = "VVI", backend = backend())$modelName, "VVI")
  expect_error(gpu_gmm(x, G = 2, tol = -1), "tol = -1 must be")
  expect_error(gpu_gmm(x, G = 2, reg = -1), "reg = -1 must be")
  expect_error(gpu_gmm(x, G = 2, max_iter = 0), "max_iter = 0 must be at least 1")
  expect_error(gpu_gmm(x, G = 2, n_init = 0), "n_init = 0 must be at least 1")
  expect_error(gpu_gmm(x, G = 2, seed = -1), "seed = -1 must be a whole number")
  expect_error(gpu_gmm(x, G = 2, backend = "gpu"), "unknown backend \"gpu\"")
  expect_error(gpu_gmm(letters, G = 2), "data must be numeric")
  expect_error(gpu_gmm(matrix(c(1, 1, 2, 2), 4, 1), G = 3, init = "kmeans++"),
               "exceeds the 2 distinct rows")
  expect_error(gpu_gmm(matrix(c(1, 1, 2, 2), 4, 1), G = 3), "singular")
  # a G that cannot be fitted gets an NA BIC; the others are still compared
  fit <- gpu_gmm(matrix(c(1, 1, 2, 2), 4, 1), G = 1:3, reg = 0.01, init = "kmeans++",
                 backend = backend())
  expect_true(all(is.na(fit$BIC["3", ])) && !anyNA(fit$BIC[1:2, ]))
  expect_identical(colnames(fit$BIC), c("E", "V"))
  expect_identical(dim(gpu_gmm(x, G = 2, backend = backend())$z), c(272L, 2L))
})

test_that("backend = \"cuda\" without a device is a clear error", {
  if (has_cuda_device()) skip("a CUDA device is present")
  expect_error(gpu_gmm(faithful, G = 2, backend = "cuda"), "cuda.*not available")
  expect_identical(gpu_gmm(faithful, G = 2, backend = "auto")$backend, "cpu")
})

test_that("the CUDA backend agrees with the CPU backend", {
  skip_if_no_cuda()
  for (case in list(list(n = 3000, d = 2, G = 3), list(n = 4000, d = 30, G = 5))) {
    mx <- gmm_mixture(case$n, case$d, case$G, spread = 8, seed = case$d)
    for (cov in mclust_models) {
      g <- gpu_gmm(mx$x, G = case$G, modelNames = cov, seed = 5, tol = 0, max_iter = 30,
                   backend = "cuda")
      h <- gpu_gmm(mx$x, G = case$G, modelNames = cov, seed = 5, tol = 0, max_iter = 30,
                   backend = "cpu")
      expect_identical(g$backend, "cuda")
      expect_lt(abs(g$loglik - h$loglik) / abs(h$loglik), 1e-8)
      expect_equal(g$parameters$mean, h$parameters$mean, tolerance = 1e-6)
      expect_identical(predict(g, mx$x, backend = "cuda")$classification,
                       unname(g$classification))
    }
    g <- gpu_gmm(mx$x, G = 1:6, seed = 5, backend = "cuda")
    h <- gpu_gmm(mx$x, G = 1:6, seed = 5, backend = "cpu")
    expect_identical(c(g$G, g$modelName), c(h$G, h$modelName))
    expect_lt(max(abs(g$BIC - h$BIC) / abs(h$BIC), na.rm = TRUE), 1e-7)
    expect_lt(abs(g$loglik - h$loglik) / abs(h$loglik), 1e-8)
  }
})

test_that("every model matches mclust's fit from the same start", {
  skip_if_no_peer("mclust")
  # n <= 2000: mclust's hierarchical start uses every row, as gpuml's does
  mx <- gmm_mixture(700, 3, 3, spread = 6, seed = 21)
  for (m in mclust_models) {
    fit <- gpu_gmm(mx$x, G = 3, modelNames = m, backend = backend())
    ref <- mclust_fit(mx$x, 3, m)
    expect_identical(fit$modelName, m)
    expect_identical(fit$df, as.numeric(ref$df))
    expect_gte(fit$loglik, ref$loglik - 1e-6 * abs(ref$loglik))
    # the same optimum, unless gpuml's is better (mclust's VVE stops short here)
    if (fit$loglik - ref$loglik < 1e-6 * abs(ref$loglik))
      expect_gte(adjusted_rand(fit$classification, ref$classification), 0.99)
  }
})

test_that("BIC picks mclust's model and G on data made from a known model", {
  skip_if_no_peer("mclust")
  # one shared covariance: EEE
  set.seed(3)
  S <- matrix(c(2, 0.8, 0.3, 0.8, 1, 0.2, 0.3, 0.2, 0.5), 3)
  cl <- rep(1:3, c(300, 250, 200))
  centres <- matrix(c(0, 0, 0, 6, 1, -2, -3, 7, 3), 3)
  x <- t(centres[, cl]) + matrix(rnorm(750 * 3), ncol = 3) %*% chol(S)
  fit <- gpu_gmm(x, backend = backend())
  suppressPackageStartupMessages(require("mclust", quietly = TRUE, character.only = TRUE))
  ref <- mclust::Mclust(x, verbose = FALSE)
  expect_identical(c(fit$modelName, as.character(fit$G)), c(ref$modelName, as.character(ref$G)))
  expect_identical(fit$modelName, "EEE")
  expect_gte(fit$bic, ref$bic - 2e-6 * abs(ref$bic))
  expect_identical(dim(fit$BIC), c(9L, 14L))
  expect_identical(colnames(fit$BIC), mclust_models)
  # cell by cell as good as mclust's where both start alike (n <= 2000), up to the true
  # G (beyond it the fits of superfluous components end in one local optimum or another)
  common <- unclass(fit$BIC)[1:3, colnames(ref$BIC)]
  both <- !is.na(ref$BIC[1:3, ]) & !is.na(common)
  expect_identical(sum(both), 42L)
  expect_true(all(common[both] >= ref$BIC[1:3, ][both] - 2e-6 * abs(ref$BIC[1:3, ][both])))
  expect_identical(dim(fit$parameters$variance$sigma), c(3L, 3L, 3L))
  pdf(NULL)
  on.exit(dev.off())
  expect_identical(plot(fit, "BIC"), fit)
  expect_output(print(summary(fit)), "Best BIC values")
})

test_that("the default start is deterministic and needs no seed", {
  mx <- gmm_mixture(900, 4, 3, spread = 5, seed = 31)
  a <- gpu_gmm(mx$x, G = 2:4, modelNames = c("VVV", "EVE"), seed = 1, backend = backend())
  b <- gpu_gmm(mx$x, G = 2:4, modelNames = c("VVV", "EVE"), seed = 2, backend = backend())
  expect_identical(unclass(a$BIC), unclass(b$BIC))
  k <- gpu_gmm(mx$x, G = 3, modelNames = "VVV", init = "kmeans++", seed = 1, backend = backend())
  expect_identical(k$G, 3L)
})
