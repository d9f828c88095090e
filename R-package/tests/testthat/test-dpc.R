backend <- function() test_backend()

test_that("gpu_dpc returns the documented structure, and prints, summarises, plots", {
  set.seed(30)
  b <- dpc_blobs()
  fit <- gpu_dpc(b$x, k = 3, backend = backend())
  expect_s3_class(fit, "gpu_dpc")
  expect_true(all(c("rho", "delta", "nearest", "gamma", "dc", "backend", "peaks",
                    "clusters", "halo", "x") %in% names(fit)))
  n <- nrow(b$x)
  expect_length(fit$rho, n)
  expect_true(is.integer(fit$nearest) && sum(is.na(fit$nearest)) == 1L)
  expect_true(is.integer(fit$clusters) && all(fit$clusters %in% 1:3))
  expect_true(is.logical(fit$halo) && length(fit$halo) == n)
  expect_identical(fit$gamma, fit$rho * fit$delta)
  expect_identical(length(fit$peaks), 3L)
  expect_identical(fit$clusters[fit$peaks], 1:3)
  expect_false(is.unsorted(rev(fit$gamma[fit$peaks])))
  if (backend() != "auto") expect_identical(fit$backend, backend())
  expect_output(print(fit), "Density peaks clustering of 450 points in 2 dimensions")
  expect_output(print(fit), "3 clusters \\(k = 3\\)")
  s <- summary(fit)
  expect_s3_class(s, "summary.gpu_dpc")
  expect_identical(s$clusters$centre, fit$peaks)
  expect_identical(sum(s$clusters$size), n)
  expect_output(print(s), "clusters")
  bare <- gpu_dpc(b$x, backend = backend())
  expect_null(bare$clusters)
  expect_output(print(bare), "no centres chosen")
  pdf(NULL)
  on.exit(dev.off())
  expect_invisible(plot(fit))
  expect_invisible(plot(fit, type = "clusters"))
  expect_invisible(plot(fit, b$x, type = "clusters"))
  expect_invisible(plot(gpu_dpc(cbind(b$x, b$x[, 1]), k = 3, backend = backend()),
                        type = "clusters"))
  expect_error(plot(bare, type = "clusters"), "no clusters yet")
  # Large fits draw a subset: evenly spaced rows, the peaks and the candidates.
  drawn <- gpuml:::dpc_plot_rows(fit, 20)
  rows <- drawn$rows
  expect_true(length(rows) < length(fit$rho) && all(fit$peaks %in% rows))
  expect_true(which.max(fit$gamma) %in% rows)
  # the candidates: the 100 largest gamma, in the order of the centres by k
  expect_identical(drawn$candidates,
                   order(-fit$gamma, -fit$rho, seq_along(fit$rho))[1:100])
  expect_true(all(drawn$candidates %in% rows))
  expect_match(drawn$note, sprintf("20 of %d points", length(fit$rho)))
  expect_identical(dpc_clusters(fit, k = 7)$peaks, drawn$candidates[1:7])
  expect_invisible(plot(fit, max_points = 20))
  expect_invisible(plot(fit, type = "clusters", max_points = 20))
  expect_error(plot(fit, max_points = 0), "max_points")
})

test_that("the plots of a large fit draw a sample, the candidates and the peaks", {
  set.seed(44)
  n <- 200000
  x <- matrix(runif(2 * n), n, 2)
  fit <- gpu_dpc(x, dc = 0.004, k = 4, backend = backend())
  drawn <- gpuml:::dpc_plot_rows(fit, 20000)
  expect_lte(length(drawn$rows), 20000 + 100 + 4)
  expect_true(all(c(fit$peaks, drawn$candidates) %in% drawn$rows))
  expect_match(drawn$note, "20,000 of 200,000 points")
  pdf(NULL)
  on.exit(dev.off())
  expect_invisible(plot(fit))
  expect_invisible(plot(fit, type = "clusters"))
})

test_that("the truncated Gaussian follows its definition and the exact sum's bound", {
  set.seed(43)
  for (d in c(1, 2, 3, 9, 20)) {
    x <- matrix(rnorm(300 * d), ncol = d)
    dc <- 0.15 * sqrt(d)
    exact <- gpu_dpc(x, dc = dc, gaussian = TRUE, backend = backend())
    for (cutoff in c(1, 3)) {
      fit <- gpu_dpc(x, dc = dc, gaussian = TRUE, gaussian_cutoff = cutoff, backend = backend())
      ref <- dpc_ref(x, dc, TRUE, cutoff)
      expect_equal(fit$rho, ref$rho, tolerance = 1e-10)
      expect_identical(fit$nearest, ref$nearest)
      expect_equal(fit$delta, ref$delta, tolerance = 1e-14)
      dropped <- rowSums(dist_ref(x) >= cutoff * dc)
      lost <- exact$rho - fit$rho
      expect_true(all(lost >= -1e-10 * exact$rho))
      expect_true(all(lost <= dropped * exp(-cutoff^2) + 1e-10 * exact$rho))
      expect_identical(fit$gaussian_cutoff, cutoff)
    }
  }
  x <- matrix(rnorm(40), ncol = 2)
  expect_error(gpu_dpc(x, gaussian = TRUE, gaussian_cutoff = -1),
               "gaussian_cutoff = -1 must be a finite number >= 0")
  expect_error(gpu_dpc(x, gaussian = TRUE, gaussian_cutoff = NaN),
               "gaussian_cutoff = -?nan must be a finite number >= 0")
})

test_that("rho and delta follow the definitions, both kernels, grid and tiles", {
  set.seed(31)
  for (d in c(1, 2, 3, 5, 20)) {
    x <- matrix(rnorm(250 * d), ncol = d)
    for (g in c(FALSE, TRUE)) {
      dc <- 0.4 * sqrt(d)
      fit <- gpu_dpc(x, dc = dc, gaussian = g, backend = backend())
      ref <- dpc_ref(x, dc, g)
      if (g) expect_equal(fit$rho, ref$rho, tolerance = 1e-10) else expect_identical(fit$rho, ref$rho)
      expect_identical(fit$nearest, ref$nearest)
      expect_equal(fit$delta, ref$delta, tolerance = 1e-14)
    }
  }
})

test_that("rho equals densityClust's (cutoff, Gaussian) and delta with the Gaussian kernel", {
  skip_if_no_peer("densityClust")
  set.seed(32)
  x <- matrix(rnorm(400 * 3), ncol = 3)
  dd <- dist(x)
  for (dc in c(0.5, 1)) {
    ref <- densityClust::densityClust(dd, dc = dc, gaussian = FALSE)
    fit <- gpu_dpc(x, dc = dc, backend = backend())
    expect_equal(fit$rho, ref$rho, ignore_attr = TRUE)
    # densityClust's "higher density" is strictly higher rho, with no order among equal
    # densities, so delta agrees where no equal densities are involved: with the
    # Gaussian kernel.
    ref <- densityClust::densityClust(dd, dc = dc, gaussian = TRUE)
    fit <- gpu_dpc(x, dc = dc, gaussian = TRUE, backend = backend())
    expect_equal(fit$rho, ref$rho, tolerance = 1e-12, ignore_attr = TRUE)
    expect_equal(fit$delta, ref$delta, tolerance = 1e-12, ignore_attr = TRUE)
    # ... and so do the centres and clusters chosen by the same thresholds.
    fit <- dpc_clusters(fit, k = 3)
    rmin <- min(fit$rho[fit$peaks]) * (1 - 1e-9)
    dmin <- min(fit$delta[fit$peaks]) * (1 - 1e-9)
    cl <- densityClust::findClusters(ref, rho = rmin, delta = dmin)
    expect_identical(as.integer(cl$peaks), fit$peaks)
    expect_identical(as.integer(cl$clusters), fit$clusters)
  }
})

test_that("separated blobs are recovered, by k and by thresholds", {
  set.seed(33)
  for (d in c(2, 4, 30)) {
    b <- dpc_blobs(d = d)
    fit <- gpu_dpc(b$x, k = 3, backend = backend())
    expect_true(same_partition(fit$clusters, b$label))
    # the decision graph: the three centres lie far above the other dense points
    dense <- fit$rho >= min(fit$rho[fit$peaks])
    others <- setdiff(which(dense), fit$peaks)
    if (d <= 4) expect_gt(min(fit$delta[fit$peaks]) / max(fit$delta[others]), 2)
    dmin <- min(fit$delta[fit$peaks]) * 0.99
    thr <- gpu_dpc(b$x, rho = min(fit$rho[fit$peaks]) - 0.5, delta = dmin,
                   backend = backend())
    expect_identical(thr$clusters, fit$clusters)
    expect_identical(thr$threshold, c(rho = min(fit$rho[fit$peaks]) - 0.5, delta = dmin))
    recut <- dpc_clusters(fit, k = 3)
    expect_identical(recut$clusters, fit$clusters)
    expect_identical(recut$halo, fit$halo)
  }
})

test_that("dpc_clusters recuts without recomputing, and the halo follows the paper", {
  set.seed(34)
  b <- dpc_blobs(n_each = 100, sd = 1.6)
  fit <- gpu_dpc(b$x, dc = 1, backend = backend())
  for (k in 1:4) {
    cut <- dpc_clusters(fit, k = k)
    expect_identical(cut$rho, fit$rho)
    expect_identical(length(cut$peaks), k)
    expect_identical(cut$k, as.integer(k))
    expect_identical(cut$clusters, gpu_dpc(b$x, dc = 1, k = k, backend = backend())$clusters)
    # every point is in its nearest denser point's cluster, centres excepted
    inner <- setdiff(seq_along(cut$clusters), cut$peaks)
    expect_identical(cut$clusters[inner], cut$clusters[cut$nearest[inner]])
    expect_identical(cut$halo, halo_ref(b$x, 1, fit$rho, cut$clusters))
  }
  expect_gt(sum(dpc_clusters(fit, k = 3)$halo), 0)
  expect_identical(sum(dpc_clusters(fit, k = 1)$halo), 0L)
})

test_that("a recut equals a fresh fit with the same k or thresholds, with or without the kept order", {
  set.seed(35)
  b <- dpc_blobs(n_each = 300, sd = 1.2)
  fit <- gpu_dpc(b$x, backend = backend())
  # the kept density order: densest first, equal densities by index
  expect_identical(fit$order, order(-fit$rho, seq_along(fit$rho)))
  expect_null(fit$index$ptr)  # the halo's index: built by the first recut, not the fit
  thr <- c(rho = unname(quantile(fit$rho, 0.8)), delta = 1)
  for (sel in list(list(k = 2), list(k = 5), list(rho = thr[["rho"]], delta = thr[["delta"]]))) {
    fresh <- do.call(gpu_dpc, c(list(b$x, dc = fit$dc, backend = backend()), sel))
    old <- fit
    old$order <- NULL  # a fit saved before the order was kept
    old$index <- NULL  # nor its index: the recut builds one for the halo
    wrong <- fit
    wrong$order <- rev(fit$order)  # not the density order: the recut sorts again
    restored <- unserialize(serialize(fit, NULL))  # the index's pointer comes back empty
    for (f in list(fit, old, wrong, restored, fit)) {
      cut <- do.call(dpc_clusters, c(list(f), sel))
      expect_identical(cut$peaks, fresh$peaks)
      expect_identical(cut$clusters, fresh$clusters)
      expect_identical(cut$halo, fresh$halo)
    }
  }
  expect_identical(typeof(fit$index$ptr), "externalptr")  # kept for the next recut
})

test_that("tie-heavy data: integer grid points and duplicates", {
  grid <- as.matrix(expand.grid(1:15, 1:12))
  for (dc in c(1, 1.5, 2.5)) {
    fit <- gpu_dpc(grid, dc = dc, backend = backend())
    ref <- dpc_ref(grid, dc)
    expect_identical(fit$rho, ref$rho)
    expect_identical(fit$nearest, ref$nearest)
    expect_identical(fit$delta, ref$delta)
  }
  # dc = 1: no neighbour is strictly closer, so all densities are 0 and the order is
  # the row order
  expect_identical(gpu_dpc(grid, dc = 1, backend = backend())$rho, rep(0, nrow(grid)))
  cube <- as.matrix(expand.grid(0:5, 0:5, 0:4, 0:2))
  fit <- gpu_dpc(cube, dc = 1.8, k = 4, backend = backend())
  ref <- dpc_ref(cube, 1.8)
  expect_identical(fit$rho, ref$rho)
  expect_identical(fit$nearest, ref$nearest)
  set.seed(35)
  dup <- matrix(sample(0:4, 400, replace = TRUE), ncol = 2)
  fit <- gpu_dpc(dup, dc = 1.2, backend = backend())
  ref <- dpc_ref(dup, 1.2)
  expect_identical(fit$rho, ref$rho)
  expect_identical(fit$nearest, ref$nearest)
  expect_true(any(fit$delta == 0))
})

test_that("the dc estimate: the 2% quantile, reproducible with set.seed", {
  set.seed(36)
  x <- matrix(rnorm(300 * 2), ncol = 2)
  dd <- sort(as.vector(dist(x)))
  fit <- gpu_dpc(x, backend = backend())
  expect_identical(fit$dc, dd[ceiling(0.02 * length(dd))])
  expect_true(fit$dc_estimated)
  expect_lt(abs(mean(fit$rho) / 299 - 0.02), 0.002)
  big <- matrix(runif(5000 * 2), ncol = 2)
  set.seed(1)
  a <- gpu_dpc(big, backend = backend())$dc
  set.seed(1)
  b <- gpu_dpc(big, backend = backend())$dc
  c <- gpu_dpc(big, backend = backend())$dc
  expect_identical(a, b)
  expect_lt(abs(c / a - 1), 0.05)
  expect_lt(abs(mean(gpu_dpc(big, dc = a, backend = backend())$rho) / 4999 - 0.02), 0.002)
})

test_that("bad input is a clear error, raised before computing", {
  x <- matrix(rnorm(40), 20)
  bad <- x
  bad[5, 2] <- NA
  expect_error(gpu_dpc(bad), "x contains NA/NaN at row 5, column 2")
  bad[5, 2] <- Inf
  expect_error(gpu_dpc(bad), "x contains Inf at row 5, column 2")
  expect_error(gpu_dpc(x, dc = 0), "dc = 0 must be a positive finite distance")
  expect_error(gpu_dpc(x, dc = -1), "dc = -1 must be a positive")
  expect_error(gpu_dpc(x, dc = Inf), "positive finite")
  expect_error(gpu_dpc(x, dc = NA), "must be a positive finite distance")
  expect_error(gpu_dpc(x, dc = c(1, 2)), "dc must be a single value")
  expect_error(gpu_dpc(x, dc = "large"), "dc must be a number or \"auto\"")
  expect_error(gpu_dpc(x, k = 21), "k = 21 exceeds the 20 points")
  expect_error(gpu_dpc(x, k = 0), "k = 0 must be at least 1")
  expect_error(gpu_dpc(x, k = 2.5), "k must be a whole number")
  expect_error(gpu_dpc(x, k = 2, rho = 1), "either k or the rho and delta thresholds")
  expect_error(gpu_dpc(x, rho = 1), "give both the rho and the delta threshold")
  expect_error(gpu_dpc(x, delta = 1), "only delta was given")
  expect_error(gpu_dpc(x, rho = 1e6, delta = 1e6), "lower the thresholds")
  expect_error(gpu_dpc(x[1, , drop = FALSE]), "at least 2 points")
  expect_error(gpu_dpc(matrix(numeric(0), 0, 2)), "x has no rows")
  expect_error(gpu_dpc(letters), "x must be numeric")
  expect_error(gpu_dpc(x, gaussian = NA), "gaussian must be TRUE or FALSE")
  expect_error(gpu_dpc(x, backend = "gpu"), "unknown backend \"gpu\"")
  expect_error(gpu_dpc(matrix(1, 5, 2)), "identical")
  fit <- gpu_dpc(x)
  expect_error(dpc_clusters(fit), "no selection of centres")
  expect_error(dpc_clusters(fit, k = 3, delta = 1), "not both")
  expect_error(dpc_clusters(list(), k = 2), "fit must be the result of gpu_dpc")
  expect_identical(length(dpc_clusters(fit, k = 20)$peaks), 20L)
})

test_that("backend = \"cuda\" without a device is a clear error", {
  if (has_cuda_device()) skip("a CUDA device is present")
  x <- matrix(rnorm(40), 20)
  expect_error(gpu_dpc(x, backend = "cuda"), "cuda.*not available")
  expect_identical(gpu_dpc(x, backend = "auto")$backend, "cpu")
})

test_that("the CUDA backend agrees with the CPU backend", {
  skip_if_no_cuda()
  set.seed(37)
  cases <- list(matrix(rnorm(3000 * 2), ncol = 2), matrix(rnorm(2000 * 3), ncol = 3),
                matrix(rnorm(1500 * 7), ncol = 7), matrix(rnorm(1500 * 40), ncol = 40),
                as.matrix(expand.grid(1:40, 1:30)))
  for (x in cases) {
    for (g in c(FALSE, TRUE)) {
      # Above 2,000 points dc comes from a sample drawn with R's RNG: the same seed
      # for both calls, so that both use the same dc.
      set.seed(5)
      gpu <- gpu_dpc(x, gaussian = g, k = 3, backend = "cuda")
      set.seed(5)
      cpu <- gpu_dpc(x, gaussian = g, k = 3, backend = "cpu")
      expect_identical(gpu$backend, "cuda")
      expect_identical(gpu$dc, cpu$dc)
      if (g) {
        # Gaussian densities agree to rounding (sums of exp in another order), so two
        # points with nearly equal rho may swap places in the density order: their
        # nearest denser point can differ, nothing else.
        expect_equal(gpu$rho, cpu$rho, tolerance = 1e-10)
        same <- which(gpu$nearest == cpu$nearest | (is.na(gpu$nearest) & is.na(cpu$nearest)))
        expect_gte(length(same), 0.999 * nrow(x))
        expect_equal(gpu$delta[same], cpu$delta[same], tolerance = 1e-14)
        expect_gte(mean(gpu$clusters == cpu$clusters), 0.99)
      } else {
        expect_identical(gpu$rho, cpu$rho)
        expect_identical(gpu$nearest, cpu$nearest)
        expect_equal(gpu$delta, cpu$delta, tolerance = 1e-14)
        expect_identical(gpu$clusters, cpu$clusters)
        expect_identical(gpu$halo, cpu$halo)
      }
    }
  }
})

test_that("verbose reports each pass and the backend", {
  set.seed(38)
  x <- matrix(rnorm(10000 * 2), ncol = 2)
  out <- capture.output(fit <- gpu_dpc(x, k = 2, backend = "cpu", verbose = TRUE),
                        type = "message")
  for (stage in c("dpc rho", "dpc delta", "dpc halo"))
    expect_match(out, sprintf("^%s: 10000/10000 \\(100%%\\)$", stage), all = FALSE)
  expect_match(out, "^dpc: 10000 points, dc = .* \\(estimated\\), on cpu$", all = FALSE)
  quiet <- capture.output(invisible(gpu_dpc(x, dc = 0.1, backend = "cpu")), type = "message")
  expect_length(quiet, 0)
})
