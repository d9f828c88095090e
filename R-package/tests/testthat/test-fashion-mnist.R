fm_path <- "/usr/share/datasets/fashion-mnist"

write_idx <- function(file, magic, dims, bytes) {
  con <- gzfile(file, "wb")
  on.exit(close(con))
  writeBin(as.integer(c(magic, dims)), con, size = 4, endian = "big")
  writeBin(as.raw(bytes), con)
}

test_that("a missing directory or file is a clear error", {
  empty <- tempfile("fm")
  dir.create(empty)
  on.exit(unlink(empty, recursive = TRUE))
  expect_error(read_fashion_mnist(empty), "train-images-idx3-ubyte\\(.gz\\) not found")
  expect_error(read_fashion_mnist(empty, "test"), "t10k-images-idx3-ubyte\\(.gz\\) not found")
  expect_error(read_fashion_mnist(empty, "validation"), "should be one of")
  expect_error(read_fashion_mnist(empty, n = 0), "n must be NULL")
})

test_that("IDX files are read into images by row and labelled factors", {
  dir <- tempfile("fm")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE))
  # three 2 x 2 images: pixel values 1..12 stored image by image, row by row
  write_idx(file.path(dir, "t10k-images-idx3-ubyte.gz"), 2051L, c(3L, 2L, 2L), 1:12)
  write_idx(file.path(dir, "t10k-labels-idx1-ubyte.gz"), 2049L, 3L, c(9, 0, 3))
  fm <- read_fashion_mnist(dir, "test")
  expect_identical(fm$x, matrix(as.double(1:12), 3, byrow = TRUE))
  expect_identical(as.character(fm$y), c("Ankle boot", "T-shirt/top", "Dress"))
  expect_identical(nlevels(fm$y), 10L)
  fm2 <- read_fashion_mnist(dir, "test", n = 2)
  expect_identical(fm2$x, fm$x[1:2, ])
  expect_identical(fm2$y, fm$y[1:2])
  # a file of the wrong kind, and a truncated one
  write_idx(file.path(dir, "train-images-idx3-ubyte.gz"), 2049L, c(3L, 2L, 2L), 1:12)
  write_idx(file.path(dir, "train-labels-idx1-ubyte.gz"), 2049L, 3L, c(1, 2, 3))
  expect_error(read_fashion_mnist(dir, "train"), "not an IDX file")
  write_idx(file.path(dir, "train-images-idx3-ubyte.gz"), 2051L, c(3L, 2L, 2L), 1:10)
  expect_error(read_fashion_mnist(dir, "train"), "truncated")
})

test_that("the installed Fashion-MNIST test set reads", {
  skip_if_no_data(file.path(fm_path, "t10k-labels-idx1-ubyte.gz"), "Fashion-MNIST")
  fm <- read_fashion_mnist(fm_path, "test", n = 100)
  expect_identical(dim(fm$x), c(100L, 784L))
  expect_true(is.double(fm$x))
  expect_true(all(fm$x >= 0 & fm$x <= 255))
  expect_identical(length(fm$y), 100L)
  expect_identical(levels(fm$y)[c(1, 10)], c("T-shirt/top", "Ankle boot"))
  expect_identical(as.character(fm$y[1]), "Ankle boot")
})
