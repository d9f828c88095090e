backend <- function() test_backend()

test_that("gpu_dist matches dist() for x alone, for several dimensions", {
  set.seed(1)
  for (d in c(1, 2, 3, 20, 50)) {
    x <- matrix(rnorm(120 * d), ncol = d)
    got <- gpu_dist(x, backend = backend())
    expect_true(is.matrix(got) && is.double(got))
    expect_equal(dim(got), c(120L, 120L))
    expect_equal(got, as.matrix(dist(x)), tolerance = 1e-12, ignore_attr = TRUE)
  }
})

test_that("gpu_dist of x against y matches the brute force", {
  set.seed(2)
  for (d in c(1, 3, 20, 50)) {
    x <- matrix(rnorm(70 * d), ncol = d)
    y <- matrix(rnorm(33 * d), ncol = d)
    got <- gpu_dist(x, y, backend = backend())
    expect_equal(dim(got), c(70L, 33L))
    expect_equal(got, dist_ref(x, y), tolerance = 1e-12)
    expect_equal(gpu_dist(y, x, backend = backend()), t(got), tolerance = 1e-12)
  }
})

test_that("squared = TRUE gives squared distances", {
  set.seed(3)
  for (d in c(2, 30)) {
    x <- matrix(rnorm(40 * d), ncol = d)
    y <- matrix(rnorm(25 * d), ncol = d)
    expect_equal(gpu_dist(x, y, squared = TRUE, backend = backend()),
                 dist_ref(x, y, squared = TRUE), tolerance = 1e-12)
    sq <- gpu_dist(x, squared = TRUE, backend = backend())
    expect_equal(sq, as.matrix(dist(x))^2, tolerance = 1e-12, ignore_attr = TRUE)
    expect_equal(sqrt(sq), gpu_dist(x, backend = backend()), tolerance = 1e-14)
  }
})

test_that("data far from the origin keeps full accuracy, never negative or NaN", {
  set.seed(4)
  for (d in c(3, 20, 50, 200)) {
    x <- 1e4 + matrix(runif(80 * d), ncol = d)
    y <- 1e4 + 0.5 + matrix(runif(30 * d), ncol = d)
    for (sq in c(FALSE, TRUE)) {
      got <- gpu_dist(x, squared = sq, backend = backend())
      ref <- dist_ref(x, squared = sq)
      off <- row(ref) != col(ref)
      expect_false(anyNA(got))
      expect_true(all(got >= 0))
      expect_lt(max(abs(got[off] - ref[off]) / ref[off]), 1e-8)
      expect_identical(diag(got), rep(0, nrow(x)))

      got_xy <- gpu_dist(x, y, squared = sq, backend = backend())
      ref_xy <- dist_ref(x, y, squared = sq)
      expect_false(anyNA(got_xy))
      expect_true(all(got_xy >= 0))
      expect_lt(max(abs(got_xy - ref_xy) / ref_xy), 1e-8)
    }
  }
})

test_that("x alone gives an exactly symmetric matrix with a zero diagonal", {
  set.seed(5)
  for (d in c(2, 40)) {
    x <- matrix(rnorm(150 * d, mean = 3), ncol = d)
    got <- gpu_dist(x, backend = backend())
    expect_identical(got, t(got))
    expect_identical(diag(got), rep(0, 150))
    expect_true(all(got[row(got) != col(got)] > 0))
  }
})

test_that("duplicated rows are at distance exactly 0", {
  set.seed(6)
  for (d in c(3, 25)) {
    x <- matrix(rnorm(60 * d, mean = 100), ncol = d)
    x[c(10, 40, 55), ] <- x[rep(7, 3), ]
    got <- gpu_dist(x, backend = backend())
    expect_identical(got[7, c(10, 40, 55)], rep(0, 3))
    expect_identical(got[40, 55], 0)
    y <- x[c(7, 1, 2), , drop = FALSE]
    got_xy <- gpu_dist(x, y, backend = backend())
    expect_identical(got_xy[c(7, 10, 40, 55), 1], rep(0, 4))
    expect_identical(got_xy[1, 2], 0)
    expect_true(all(got_xy[-c(7, 10, 40, 55), 1] > 0))
  }
})

test_that("gpu_dist handles one row, one column, vectors and names", {
  expect_equal(gpu_dist(matrix(c(1, 2), 1), matrix(c(4, 6), 1), backend = backend()),
               matrix(5, 1, 1))
  expect_equal(gpu_dist(matrix(5, 1, 1), backend = backend()), matrix(0, 1, 1))
  v <- c(a = 1, b = 4, c = 10)
  got <- gpu_dist(v, backend = backend())
  expect_equal(unname(got), abs(outer(v, v, "-")), ignore_attr = TRUE)
  expect_identical(dimnames(got), list(c("a", "b", "c"), c("a", "b", "c")))

  x <- matrix(1:6, 3, dimnames = list(c("p", "q", "r"), NULL))
  y <- matrix(c(0, 0), 1, dimnames = list("origin", NULL))
  got <- gpu_dist(x, y, backend = backend())
  expect_identical(dimnames(got), list(c("p", "q", "r"), "origin"))
  expect_equal(got[, 1], sqrt(c(1 + 16, 4 + 25, 9 + 36)), ignore_attr = TRUE)
  expect_null(dimnames(gpu_dist(unname(x), backend = backend())))
})

test_that("integer, logical and data frame input give the double result", {
  set.seed(7)
  xi <- matrix(sample(-5:5, 90, replace = TRUE), 30)
  ref <- gpu_dist(xi * 1.0, backend = backend())
  expect_identical(gpu_dist(xi, backend = backend()), ref)
  expect_identical(gpu_dist(as.data.frame(xi), backend = backend()), ref)
  df <- data.frame(u = c(0, 3), v = c(0L, 4L), row.names = c("a", "b"))
  expect_identical(gpu_dist(df, backend = backend()),
                   matrix(c(0, 5, 5, 0), 2, dimnames = list(c("a", "b"), c("a", "b"))))
  xl <- matrix(c(TRUE, FALSE, TRUE, TRUE), 2)
  expect_equal(gpu_dist(xl, backend = backend()), matrix(c(0, 1, 1, 0), 2))
})

test_that("the thread count option changes nothing in the result", {
  set.seed(8)
  x <- matrix(rnorm(300 * 20), ncol = 20)
  ref <- gpu_dist(x, backend = "cpu")
  old <- options(gpuml.threads = 1)
  on.exit(options(old))
  expect_identical(gpu_dist(x, backend = "cpu"), ref)
  options(gpuml.threads = -1)
  expect_error(gpu_dist(x), "gpuml.threads")
})

test_that("gpu_dist reports bad input clearly", {
  x <- matrix(rnorm(20), 10)
  bad <- x
  bad[3, 2] <- NA
  expect_error(gpu_dist(bad), "x contains NA/NaN at row 3, column 2")
  bad[3, 2] <- NaN
  expect_error(gpu_dist(bad), "NA/NaN at row 3, column 2")
  bad[3, 2] <- Inf
  expect_error(gpu_dist(bad), "x contains Inf at row 3, column 2")
  bad[3, 2] <- -Inf
  expect_error(gpu_dist(x, bad), "y contains Inf")
  expect_error(gpu_dist(x, matrix(0, 2, 3)), "y has 3 columns but x has 2")
  expect_error(gpu_dist(matrix(numeric(0), 0, 2)), "x has no rows")
  expect_error(gpu_dist(matrix(numeric(0), 3, 0)), "x has no columns")
  expect_error(gpu_dist(x, matrix(numeric(0), 0, 2)), "y has no rows")
  expect_error(gpu_dist(letters), "x must be numeric")
  expect_error(gpu_dist(data.frame(a = 1:3, b = letters[1:3])), "x must be numeric.*'b'")
  expect_error(gpu_dist(x, backend = "gpu"), "unknown backend \"gpu\"")
  expect_error(gpu_dist(x, backend = c("cpu", "cuda")), "backend must be one string")
  expect_error(gpu_dist(x, squared = NA), "squared must be TRUE or FALSE")
  expect_error(gpu_dist(array(1, c(2, 2, 2))), "3-dimensional")
})

test_that("backend = \"cuda\" without a device is a clear error", {
  if (has_cuda_device()) skip("a CUDA device is present")
  expect_error(gpu_dist(matrix(1:4, 2), backend = "cuda"), "cuda.*not available")
  expect_error(gpu_dist(matrix(1:4, 2), backend = "CUDA"), "cuda")
})

test_that("the CUDA backend agrees with the CPU backend", {
  skip_if_no_cuda()
  set.seed(9)
  for (d in c(2, 50)) {
    x <- matrix(rnorm(500 * d), ncol = d)
    y <- matrix(rnorm(200 * d), ncol = d)
    expect_equal(gpu_dist(x, y, backend = "cuda"), gpu_dist(x, y, backend = "cpu"),
                 tolerance = 1e-10)
    g <- gpu_dist(x, backend = "cuda")
    expect_identical(diag(g), rep(0, 500))
    expect_equal(g, gpu_dist(x, backend = "cpu"), tolerance = 1e-10)
  }
})

test_that("verbose reports progress and the backend that ran", {
  out <- capture.output(d <- gpu_dist(matrix(1:6, 3), backend = "cpu", verbose = TRUE),
                        type = "message")
  expect_match(out, "^dist: ([0-9]+)/\\1 \\(100%\\)$", all = FALSE)
  expect_match(out, "^dist: 3 x 3 on cpu$", all = FALSE)
  expect_identical(d, gpu_dist(matrix(1:6, 3), backend = "cpu"))
})
