backend <- function() test_backend()

brute_cosine <- function(a, b) {
  na <- sqrt(rowSums(a^2))
  nb <- sqrt(rowSums(b^2))
  1 - (a %*% t(b)) / outer(na, nb)
}

test_that("cosine kNN matches a brute force in R", {
  set.seed(31)
  x <- matrix(rnorm(400 * 6), ncol = 6)
  q <- matrix(rnorm(25 * 6), ncol = 6)
  r <- gpu_knn(x, q, k = 5, metric = "cosine", backend = backend())
  full <- brute_cosine(q, x)
  for (i in seq_len(nrow(q))) {
    o <- order(full[i, ], seq_len(nrow(x)))[1:5]
    expect_identical(r$nn.index[i, ], o)
    expect_equal(r$nn.dist[i, ], full[i, o], tolerance = 1e-12)
  }
  s <- gpu_knn(x, k = 4, metric = "cosine", backend = backend())
  self <- brute_cosine(x, x)
  diag(self) <- Inf
  expect_identical(s$nn.index, t(apply(self, 1, function(v) order(v)[1:4])))
  expect_equal(gpu_knn(x, q, k = 5, metric = "COSINE", backend = "cpu")$nn.index, r$nn.index)
})

test_that("cosine distances match a brute force and keep the symmetric form", {
  set.seed(32)
  x <- matrix(runif(60 * 9), ncol = 9)
  y <- matrix(rnorm(20 * 9), ncol = 9)
  expect_equal(gpu_dist(x, y, metric = "cosine", backend = backend()), brute_cosine(x, y),
               tolerance = 1e-12, ignore_attr = TRUE)
  d <- gpu_dist(x, metric = "cosine", backend = backend())
  expect_identical(d, t(d))
  expect_true(all(diag(d) == 0))
  expect_true(all(d >= 0 & d <= 2))
})

test_that("cosine and metric errors are clear", {
  x <- matrix(rnorm(30), ncol = 3)
  x[4, ] <- 0
  expect_error(gpu_knn(x, k = 2, metric = "cosine", backend = backend()),
               "row 4 of the data is all zeros")
  expect_error(gpu_dist(x, metric = "cosine", backend = backend()), "row 4 of the x")
  expect_error(gpu_knn(x, k = 2, metric = "manhattan"), "unknown metric \"manhattan\"")
  expect_error(gpu_dist(x[-4, ], squared = TRUE, metric = "cosine"),
               "Euclidean metric only")
  expect_error(gpu_knn(x, k = 2, metric = c("cosine", "euclidean")), "metric must be one string")
})

test_that("an index gives the plain search's answers", {
  set.seed(33)
  for (d in c(3, 20)) {
    x <- matrix(rnorm(1200 * d), ncol = d)
    q <- matrix(rnorm(70 * d), ncol = d)
    for (metric in c("euclidean", "cosine")) {
      ix <- gpu_knn_index(x, metric = metric, backend = backend())
      expect_s3_class(ix, "gpu_knn_index")
      a <- gpu_knn(ix, q, k = 6)
      b <- gpu_knn(x, q, k = 6, metric = metric, backend = backend())
      expect_identical(a$nn.index, b$nn.index)
      expect_identical(a$nn.dist, b$nn.dist)
      expect_identical(a$backend, b$backend)
      expect_identical(predict(ix, q, k = 6)$nn.index, b$nn.index)
      s <- predict(ix, k = 8)
      expect_identical(s$nn.index, gpu_knn(x, k = 8, metric = metric, backend = backend())$nn.index)
      expect_output(print(ix), sprintf("kNN index of 1200 points in %d dimensions, metric %s", d, metric))
      expect_true(gpu_free(ix))
    }
  }
})

test_that("an index's errors and lifetime", {
  set.seed(34)
  x <- matrix(rnorm(300 * 4), ncol = 4)
  ix <- gpu_knn_index(x, backend = backend())
  expect_error(gpu_knn(ix, matrix(0, 2, 3), k = 2), "query has 3 columns but the index has 4")
  expect_error(gpu_knn(ix, k = 300), "exceeds the 299 other points")
  expect_error(gpu_knn(ix, k = 2, backend = "cpu"), "backend belongs to the index")
  expect_error(gpu_knn(ix, k = 2, metric = "cosine", precision = "single"),
               "precision, metric belong to the index")
  expect_error(gpu_knn_index(x, metric = "taxicab"), "unknown metric")
  bad <- x
  bad[2, 3] <- NA
  expect_error(gpu_knn_index(bad), "NA/NaN at row 2, column 3")
  expect_true(gpu_free(ix))
  expect_false(gpu_free(ix))
  expect_error(gpu_knn(ix, k = 2), "no longer exists")
  expect_output(print(ix), "freed")
  expect_error(gpu_free(x), "takes a kNN index")
  # a saved and restored index comes back empty
  f <- tempfile(fileext = ".rds")
  saveRDS(gpu_knn_index(x, backend = backend()), f)
  expect_error(predict(readRDS(f), k = 2), "no longer exists")
  unlink(f)
  # many at once, then dropped and collected: nothing left behind, nothing crashes
  many <- lapply(1:20, function(i) gpu_knn_index(x + i, backend = backend()))
  expect_identical(gpu_knn(many[[20]], x[1:3, ] + 20, k = 1)$nn.index[, 1], 1:3)
  rm(many)
  invisible(gc())
  expect_identical(gpu_knn(gpu_knn_index(x, backend = backend()), x[5, , drop = FALSE], k = 1)$nn.index[1, 1], 5L)
})

test_that("a GPU index gives the CPU backend's answers (cosine too)", {
  skip_if_no_cuda()
  set.seed(35)
  x <- matrix(rnorm(3000 * 40), ncol = 40)
  q <- matrix(rnorm(200 * 40), ncol = 40)
  for (metric in c("euclidean", "cosine")) {
    ix <- gpu_knn_index(x, metric = metric, backend = "cuda")
    a <- gpu_knn(ix, q, k = 12)
    b <- gpu_knn(x, q, k = 12, metric = metric, backend = "cpu")
    expect_identical(a$backend, "cuda")
    expect_identical(a$nn.index, b$nn.index)
    expect_equal(a$nn.dist, b$nn.dist, tolerance = 1e-12)
    expect_identical(predict(ix, k = 5)$nn.index, gpu_knn(x, k = 5, metric = metric, backend = "cpu")$nn.index)
    gpu_free(ix)
  }
})

test_that("the index holds its own view of the data: changing or removing the matrix does not touch it", {
  set.seed(36)
  x <- matrix(rnorm(500 * 3), ncol = 3)
  keep <- x + 0
  q <- matrix(rnorm(20 * 3), ncol = 3)
  ix <- gpu_knn_index(x, backend = backend())
  x[1:250, ] <- 1e6
  x[, 2] <- 0
  ref <- gpu_knn(keep, q, k = 4, backend = backend())
  expect_identical(gpu_knn(ix, q, k = 4)$nn.index, ref$nn.index)
  rm(x)
  invisible(gc())
  expect_identical(gpu_knn(ix, q, k = 4)$nn.index, ref$nn.index)
  expect_identical(predict(ix, k = 3)$nn.index, gpu_knn(keep, k = 3, backend = backend())$nn.index)
})
