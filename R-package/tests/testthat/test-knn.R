backend <- function() test_backend()

expect_knn_equal <- function(got, ref, tolerance = 1e-10) {
  expect_identical(got$nn.index, ref$nn.index)
  expect_equal(got$nn.dist, ref$nn.dist, tolerance = tolerance)
}

test_that("gpu_knn returns the documented structure", {
  set.seed(10)
  x <- matrix(rnorm(50 * 3), ncol = 3)
  r <- gpu_knn(x, k = 4, backend = backend())
  expect_s3_class(r, "gpu_knn")
  expect_type(r, "list")
  expect_named(r, c("nn.index", "nn.dist", "backend", "rechecked"))
  expect_true(is.numeric(r$rechecked) && length(r$rechecked) == 1 && r$rechecked >= 0)
  expect_true(is.integer(r$nn.index) && is.matrix(r$nn.index))
  expect_true(is.double(r$nn.dist) && is.matrix(r$nn.dist))
  expect_equal(dim(r$nn.index), c(50L, 4L))
  expect_equal(dim(r$nn.dist), c(50L, 4L))
  expect_true(r$backend %in% c("cpu", "cuda"))
  if (backend() != "auto") expect_identical(r$backend, backend())
  expect_true(all(r$nn.index >= 1 & r$nn.index <= 50))
  expect_false(any(r$nn.index == seq_len(50)))
  expect_true(all(t(apply(r$nn.dist, 1, diff)) >= 0))
  expect_output(print(r), "Exact 4-nearest neighbours of 50 points")
  expect_output(print(r), "44 more rows")
  expect_output(print(r, n = 50), "nn.dist")
})

test_that("self-search matches the brute force for several dimensions", {
  set.seed(11)
  for (d in c(1, 2, 3, 20, 50)) {
    x <- matrix(rnorm(250 * d), ncol = d)
    expect_knn_equal(gpu_knn(x, k = 7, backend = backend()), knn_ref(x, k = 7))
  }
})

test_that("query search matches the brute force for several dimensions", {
  set.seed(12)
  for (d in c(1, 2, 3, 20, 50)) {
    x <- matrix(rnorm(300 * d), ncol = d)
    q <- matrix(rnorm(40 * d), ncol = d)
    expect_knn_equal(gpu_knn(x, q, k = 9, backend = backend()), knn_ref(x, q, k = 9))
  }
})

test_that("results agree with FNN::get.knn and FNN::get.knnx", {
  skip_if_no_peer("FNN")
  set.seed(13)
  for (d in c(1, 2, 3, 20, 50)) {
    x <- matrix(runif(400 * d), ncol = d)
    q <- matrix(runif(60 * d), ncol = d)
    f <- FNN::get.knn(x, k = 10, algorithm = "brute")
    g <- gpu_knn(x, k = 10, backend = backend())
    expect_identical(g$nn.index, f$nn.index)
    expect_equal(g$nn.dist, f$nn.dist, tolerance = 1e-10)
    fx <- FNN::get.knnx(x, q, k = 10)
    gx <- gpu_knn(x, q, k = 10, backend = backend())
    expect_identical(gx$nn.index, fx$nn.index)
    expect_equal(gx$nn.dist, fx$nn.dist, tolerance = 1e-10)
  }
})

test_that("a larger search (several blocks) matches FNN", {
  skip_if_no_peer("FNN")
  set.seed(14)
  x <- matrix(rnorm(3000 * 20), ncol = 20)
  q <- matrix(rnorm(700 * 20), ncol = 20)
  gx <- gpu_knn(x, q, k = 25, backend = backend())
  fx <- FNN::get.knnx(x, q, k = 25)
  expect_identical(gx$nn.index, fx$nn.index)
  expect_equal(gx$nn.dist, fx$nn.dist, tolerance = 1e-10)
})

test_that("self is excluded by index: duplicated rows are each other's neighbours", {
  for (d in c(2, 30)) {
    set.seed(15)
    x <- matrix(rnorm(80 * d), ncol = d)
    x[33, ] <- x[12, ]
    r <- gpu_knn(x, k = 3, backend = backend())
    expect_identical(r$nn.index[12, 1], 33L)
    expect_identical(r$nn.index[33, 1], 12L)
    expect_identical(r$nn.dist[c(12, 33), 1], c(0, 0))
    expect_true(all(r$nn.dist[c(12, 33), 2] > 0))
    # three copies: each one's two nearest are the other two, smaller index first
    x[70, ] <- x[12, ]
    r <- gpu_knn(x, k = 3, backend = backend())
    expect_identical(r$nn.index[12, 1:2], c(33L, 70L))
    expect_identical(r$nn.index[33, 1:2], c(12L, 70L))
    expect_identical(r$nn.index[70, 1:2], c(12L, 33L))
    expect_identical(r$nn.dist[c(12, 33, 70), 1:2], matrix(0, 3, 2))
    # a query equal to a data point finds it at distance 0
    rq <- gpu_knn(x, x[c(12, 5), , drop = FALSE], k = 4, backend = backend())
    expect_identical(rq$nn.index[1, 1:3], c(12L, 33L, 70L))
    expect_identical(rq$nn.index[2, 1], 5L)
    expect_identical(rq$nn.dist[, 1], c(0, 0))
  }
})

test_that("ties are broken by the smaller index (integer grid data)", {
  grid <- as.matrix(expand.grid(1:7, 1:6))
  storage.mode(grid) <- "integer"
  for (k in c(1, 4, 9)) {
    expect_knn_equal(gpu_knn(grid, k = k, backend = backend()), knn_ref(grid, k = k))
  }
  q <- matrix(c(3.5, 3.5, 1, 1, 0, 0), ncol = 2, byrow = TRUE)
  expect_knn_equal(gpu_knn(grid, q, k = 6, backend = backend()), knn_ref(grid, q, k = 6))
  # the point (2, 2) has four neighbours at distance 1
  r <- gpu_knn(grid, k = 4, backend = backend())
  i <- which(grid[, 1] == 2 & grid[, 2] == 2)
  expect_identical(r$nn.dist[i, ], rep(1, 4))
  expect_identical(r$nn.index[i, ], sort(r$nn.index[i, ]))
})

test_that("ties are broken by the smaller index in higher dimensions", {
  set.seed(16)
  for (d in c(3, 20, 64)) {
    x <- matrix(sample(0:2, 200 * d, replace = TRUE), ncol = d)
    expect_knn_equal(gpu_knn(x, k = 15, backend = backend()), knn_ref(x, k = 15))
    q <- matrix(sample(0:2, 20 * d, replace = TRUE), ncol = d)
    expect_knn_equal(gpu_knn(x, q, k = 15, backend = backend()), knn_ref(x, q, k = 15))
  }
})

test_that("k = 1, k = n - 1 (self) and k = n (query) work", {
  set.seed(17)
  x <- matrix(rnorm(60 * 4), ncol = 4)
  q <- matrix(rnorm(5 * 4), ncol = 4)
  expect_knn_equal(gpu_knn(x, k = 1, backend = backend()), knn_ref(x, k = 1))
  expect_knn_equal(gpu_knn(x, q, k = 1, backend = backend()), knn_ref(x, q, k = 1))
  full <- gpu_knn(x, k = 59, backend = backend())
  expect_knn_equal(full, knn_ref(x, k = 59))
  expect_true(all(apply(full$nn.index, 1, function(r) length(unique(r))) == 59))
  expect_knn_equal(gpu_knn(x, q, k = 60, backend = backend()), knn_ref(x, q, k = 60))
  two <- gpu_knn(matrix(c(0, 3), 2), k = 1, backend = backend())
  expect_identical(two$nn.index, matrix(c(2L, 1L), 2))
  expect_identical(two$nn.dist, matrix(c(3, 3), 2))
  # k as an integer or a whole double
  expect_identical(gpu_knn(x, k = 3L, backend = backend()),
                   gpu_knn(x, k = 3, backend = backend()))
})

test_that("integer matrices, data frames and vectors are accepted", {
  set.seed(18)
  xi <- matrix(sample(1:1000, 300, replace = TRUE), ncol = 3)
  ref <- gpu_knn(xi * 1.0, k = 5, backend = backend())
  expect_identical(gpu_knn(xi, k = 5, backend = backend()), ref)
  expect_identical(gpu_knn(as.data.frame(xi), k = 5, backend = backend()), ref)
  q <- data.frame(a = c(10L, 500L), b = c(20, 400), c = c(30L, 600L))
  expect_identical(gpu_knn(xi, q, k = 5, backend = backend()),
                   gpu_knn(xi * 1.0, as.matrix(q) * 1.0, k = 5, backend = backend()))
  v <- c(0, 10, 1, 12, 4)
  r <- gpu_knn(v, k = 2, backend = backend())
  expect_identical(r$nn.index, matrix(c(3L, 4L, 1L, 2L, 3L, 5L, 5L, 5L, 5L, 1L), 5))
  expect_equal(r$nn.dist, matrix(c(1, 2, 1, 2, 3, 4, 6, 3, 8, 4), 5))
})

test_that("gpu_knn reports bad input clearly", {
  set.seed(19)
  x <- matrix(rnorm(30), 10)
  bad <- x
  bad[4, 3] <- NA
  expect_error(gpu_knn(bad, k = 2), "data contains NA/NaN at row 4, column 3")
  bad[4, 3] <- NaN
  expect_error(gpu_knn(bad, k = 2), "NA/NaN at row 4, column 3")
  bad[4, 3] <- Inf
  expect_error(gpu_knn(bad, k = 2), "data contains Inf at row 4, column 3")
  expect_error(gpu_knn(x, bad, k = 2), "query contains Inf at row 4, column 3")
  expect_error(gpu_knn(x, k = 0), "k = 0 must be at least 1")
  expect_error(gpu_knn(x, k = -3), "k = -3 must be at least 1")
  expect_error(gpu_knn(x, k = 10), "k = 10 exceeds the 9 other points")
  expect_error(gpu_knn(x, x[1:2, ], k = 11), "k = 11 exceeds the 10 data points")
  expect_error(gpu_knn(x, k = 1e15), "exceeds the 9 other points")
  expect_error(gpu_knn(matrix(1, 1, 2), k = 1), "exceeds the 0 other points")
  expect_error(gpu_knn(x, matrix(0, 2, 2), k = 1), "query has 2 columns but data has 3")
  expect_error(gpu_knn(x, k = 2, backend = "fast"), "unknown backend \"fast\"")
  expect_error(gpu_knn(x, k = 2, backend = NA_character_), "backend must be one string")
  expect_error(gpu_knn(letters, k = 2), "data must be numeric")
  expect_error(gpu_knn(x, letters[1:3], k = 2), "query must be numeric")
  expect_error(gpu_knn(data.frame(a = 1:3, f = factor(c("u", "v", "w"))), k = 1),
               "data must be numeric.*'f'")
  expect_error(gpu_knn(list(1, 2), k = 1), "data must be numeric")
  expect_error(gpu_knn(matrix(numeric(0), 0, 3), k = 1), "data has no rows")
  expect_error(gpu_knn(x, matrix(numeric(0), 0, 3), k = 1), "query has no rows")
  expect_error(gpu_knn(matrix(numeric(0), 5, 0), k = 1), "data has no columns")
  expect_error(gpu_knn(x, k = NA), "k must be a single whole number")
  expect_error(gpu_knn(x, k = 2.5), "k must be a single whole number")
  expect_error(gpu_knn(x, k = c(1, 2)), "k must be a single whole number")
  expect_error(gpu_knn(x, k = "3"), "k must be a single whole number")
  expect_error(gpu_knn(x, k = 2, verbose = "yes"), "verbose must be TRUE or FALSE")
  # the session survives and later calls work
  expect_identical(dim(gpu_knn(x, k = 2)$nn.index), c(10L, 2L))
})

test_that("backend = \"cuda\" without a device is a clear error", {
  if (has_cuda_device()) skip("a CUDA device is present")
  x <- matrix(rnorm(20), 10)
  expect_error(gpu_knn(x, k = 2, backend = "cuda"), "cuda.*not available")
  expect_error(gpu_knn(x, x, k = 2, backend = "cuda"), "cuda")
  # auto falls back to the CPU
  expect_identical(gpu_knn(x, k = 2, backend = "auto")$backend, "cpu")
})

test_that("the CUDA backend agrees with the CPU backend", {
  skip_if_no_cuda()
  set.seed(20)
  for (d in c(1, 3, 20, 50)) {
    x <- matrix(rnorm(2000 * d), ncol = d)
    q <- matrix(rnorm(300 * d), ncol = d)
    g <- gpu_knn(x, k = 10, backend = "cuda")
    expect_identical(g$backend, "cuda")
    expect_knn_equal(g, gpu_knn(x, k = 10, backend = "cpu"))
    expect_knn_equal(gpu_knn(x, q, k = 10, backend = "cuda"),
                     gpu_knn(x, q, k = 10, backend = "cpu"))
  }
  grid <- as.matrix(expand.grid(1:12, 1:12, 1:3))
  expect_knn_equal(gpu_knn(grid, k = 20, backend = "cuda"),
                   gpu_knn(grid, k = 20, backend = "cpu"))
})

test_that("verbose reports progress and the backend", {
  set.seed(21)
  x <- matrix(rnorm(1200 * 2), ncol = 2)
  out <- capture.output(r <- gpu_knn(x, k = 3, backend = "cpu", verbose = TRUE),
                        type = "message")
  done <- as.integer(sub("^knn: ([0-9]+)/1200 .*$", "\\1",
                          grep("^knn: [0-9]+/1200 \\([0-9]+%\\)$", out, value = TRUE)))
  expect_gt(length(done), 0)
  expect_false(is.unsorted(done, strictly = TRUE))
  expect_identical(done[length(done)], 1200L)
  expect_match(out, "^knn: 1200 queries, k = 3 on cpu$", all = FALSE)
  expect_identical(r$nn.index, gpu_knn(x, k = 3, backend = "cpu")$nn.index)
  quiet <- capture.output(r2 <- gpu_knn(x, k = 3, backend = "cpu"), type = "message")
  expect_length(quiet, 0)
})

test_that("precision: auto, double and single give the exact answer; bad names are errors", {
  set.seed(22)
  x <- matrix(rnorm(1500 * 24), ncol = 24)
  q <- matrix(rnorm(100 * 24), ncol = 24)
  ref <- knn_ref(x, q, k = 6)
  for (p in c("auto", "double", "single", "AUTO")) {
    r <- gpu_knn(x, q, k = 6, backend = backend(), precision = p)
    expect_knn_equal(r, ref)
  }
  expect_identical(gpu_knn(x, k = 5, backend = "cpu", precision = "single")$rechecked, 0)
  expect_error(gpu_knn(x, k = 5, precision = "half"),
               "unknown precision \"half\": use \"auto\", \"double\" or \"single\"")
  expect_error(gpu_knn(x, k = 5, precision = c("auto", "double")), "precision must be one string")
  expect_error(gpu_knn(x, k = 5, precision = NA_character_), "precision must be one string")
})

test_that("precision auto on the GPU: the fp64 answer, near ties rechecked in fp64", {
  skip_if_no_cuda()
  set.seed(23)
  x <- matrix(runif(4000 * 40), ncol = 40)
  a <- gpu_knn(x, k = 12, backend = "cuda", precision = "auto")
  b <- gpu_knn(x, k = 12, backend = "cuda", precision = "double")
  expect_identical(a$nn.index, b$nn.index)
  expect_identical(a$nn.dist, b$nn.dist)
  expect_knn_equal(a, gpu_knn(x, k = 12, backend = "cpu"))
  expect_lt(a$rechecked, 40)
  # 30 points around point 1 at distances 1 + j 1e-12: fp32 cannot order them
  y <- matrix(runif(300 * 32), ncol = 32)
  u <- matrix(rnorm(30 * 32), ncol = 32)
  u <- u / sqrt(rowSums(u^2))
  y[2:31, ] <- sweep(u * (1 + (1:30) * 1e-12), 2, y[1, ], "+")
  r <- gpu_knn(y, k = 10, backend = "cuda")
  expect_gte(r$rechecked, 1)
  expect_knn_equal(r, knn_ref(y, k = 10))
  expect_identical(r$nn.index[1, ], 2:11)
})
