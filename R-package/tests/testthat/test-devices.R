# The `devices` argument and option gpuml.devices. On the CPU backend a device list is
# checked and then ignored, so these run everywhere; the split and merge across devices
# is exercised on one device or the CPU by the shard knob GPUML_SHARDS (logical shards),
# whose answers must be those of one shard.

# expr evaluated with GPUML_SHARDS = shards (and GPUML_SHARD_THREADS = threads).
with_shards <- function(shards, threads, expr) {
  old <- Sys.getenv(c("GPUML_SHARDS", "GPUML_SHARD_THREADS"), unset = NA)
  on.exit(for (name in names(old)) {
    if (is.na(old[[name]])) Sys.unsetenv(name) else do.call(Sys.setenv, as.list(old[name]))
  })
  Sys.setenv(GPUML_SHARDS = shards, GPUML_SHARD_THREADS = threads)
  expr
}

test_that("a device list is checked by the core with clear errors", {
  x <- matrix(rnorm(40), 20)
  expect_error(gpu_knn(x, k = 2, backend = "cpu", devices = c(0, 0)), "listed twice")
  expect_error(gpu_knn(x, k = 2, backend = "cpu", devices = -1), "CUDA ordinals")
  expect_error(gpu_knn(x, k = 2, backend = "cpu", devices = 1.5), "CUDA ordinals")
  expect_error(gpu_knn(x, k = 2, backend = "cpu", devices = NA_real_), "CUDA ordinals")
  expect_error(gpu_knn(x, k = 2, backend = "cpu", devices = "most"), "\"all\"")
  expect_error(gpu_knn(x, k = 2, backend = "cpu", devices = 0:16), "0 to 16 devices")
  expect_error(gpu_knn(x, k = 2, backend = "cpu", devices = list(0)), "devices must be")
  expect_error(gpu_gmm(x, G = 2, backend = "cpu", devices = c(1, 1)), "listed twice")
  ix <- gpu_knn_index(x, backend = "cpu")
  expect_error(gpu_knn(ix, k = 2, devices = 0), "one device")
})

test_that("on the CPU a device list is ignored: the same answers", {
  set.seed(1)
  x <- matrix(rnorm(300 * 3), 300)
  q <- matrix(rnorm(40 * 3), 40)
  one <- gpu_knn(x, q, k = 7, backend = "cpu")
  expect_identical(gpu_knn(x, q, k = 7, backend = "cpu", devices = c(0, 1)), one)
  expect_identical(gpu_knn(x, q, k = 7, backend = "cpu", devices = "all"), one)
  old <- options(gpuml.devices = c(1, 0))
  on.exit(options(old))
  expect_identical(gpu_knn(x, q, k = 7, backend = "cpu"), one)
  fit <- gpu_gmm(x, G = 2, modelNames = "VVV", seed = 3, backend = "cpu")
  expect_identical(fit$loglik,
                   gpu_gmm(x, G = 2, modelNames = "VVV", seed = 3, backend = "cpu",
                           devices = NULL)$loglik)
})

test_that("kNN split into shards gives the answer of one shard", {
  set.seed(2)
  x <- matrix(rnorm(500 * 4), 500)
  q <- matrix(rnorm(60 * 4), 60)
  b <- test_backend()
  self <- gpu_knn(x, k = 9, backend = b)
  query <- gpu_knn(x, q, k = 9, backend = b)
  for (threads in c(1, 2)) with_shards(5, threads, {
    expect_identical(gpu_knn(x, k = 9, backend = b, devices = "all")$nn.index, self$nn.index)
    expect_identical(gpu_knn(x, k = 9, backend = b)$nn.dist, self$nn.dist)
    expect_identical(gpu_knn(x, q, k = 9, backend = b, devices = 0), query)
  })
})

test_that("a mixture fitted on shards agrees with the one-shard fit", {
  set.seed(3)
  x <- rbind(matrix(rnorm(200 * 2), 200), matrix(rnorm(200 * 2, 4), 200))
  b <- test_backend()
  one <- gpu_gmm(x, G = 1:3, modelNames = c("VVV", "EII"), seed = 5, backend = b)
  with_shards(3, 2, {
    shards <- gpu_gmm(x, G = 1:3, modelNames = c("VVV", "EII"), seed = 5, backend = b,
                      devices = 0)
  })
  expect_identical(shards$modelName, one$modelName)
  expect_identical(shards$G, one$G)
  expect_identical(shards$classification, one$classification)
  expect_equal(shards$loglik, one$loglik, tolerance = 1e-10)
  expect_equal(shards$parameters$mean, one$parameters$mean, tolerance = 1e-10)
})

test_that("density peaks split into shards give the fit of one shard, bit for bit", {
  set.seed(4)
  x <- rbind(matrix(rnorm(400 * 2), 400), matrix(rnorm(401 * 2, 5), 401))
  lattice <- as.matrix(expand.grid(0:16, 0:16))  # ties everywhere, 289 rows
  b <- test_backend()
  for (case in list(list(x = x, dc = 0.4, k = 2), list(x = lattice, dc = 1.5, k = 3))) {
    one <- gpu_dpc(case$x, dc = case$dc, k = case$k, backend = b)
    for (threads in c(1, 2)) with_shards(3, threads, {
      split <- gpu_dpc(case$x, dc = case$dc, k = case$k, backend = b, devices = 0)
      expect_identical(split$rho, one$rho)
      expect_identical(split$delta, one$delta)
      expect_identical(split$nearest, one$nearest)
      expect_identical(split$peaks, one$peaks)
      expect_identical(split$clusters, one$clusters)
      expect_identical(split$halo, one$halo)
    })
  }
  expect_error(gpu_dpc(x, dc = 0.4, backend = "cpu", devices = c(2, 2)), "listed twice")
  expect_error(gpu_dpc(x, dc = 0.4, backend = "cpu", devices = "some"), "\"all\"")
  expect_identical(gpu_dpc(x, dc = 0.4, backend = "cpu", devices = c(0, 1))$rho,
                   gpu_dpc(x, dc = 0.4, backend = "cpu")$rho)
})

test_that("t-SNE on shards is the one-shard embedding bit for bit", {
  set.seed(5)
  x <- rbind(matrix(rnorm(150 * 4), 150), matrix(rnorm(150 * 4, 5), 150))
  b <- test_backend()
  expect_error(gpu_tsne(x, perplexity = 10, max_iter = 10, backend = "cpu", devices = c(2, 2)),
               "listed twice")
  for (method in c("exact", "fft")) {
    one <- gpu_tsne(x, perplexity = 10, max_iter = 120, seed = 4, backend = b, method = method)
    split <- with_shards(3, 1, gpu_tsne(x, perplexity = 10, max_iter = 120, seed = 4,
                                        backend = b, method = method, devices = "all"))
    expect_identical(split$Y, one$Y)
    expect_identical(split$itercosts, one$itercosts)
  }
})
