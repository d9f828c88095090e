# Fashion-MNIST (Xiao, Rasul and Vollgraf 2017) in the IDX format of the original
# distribution, as installed by Debian's dataset-fashion-mnist package.

fashion_mnist_classes <- c("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")

read_fashion_mnist <- function(path = "/usr/share/datasets/fashion-mnist",
                               subset = c("train", "test"), n = NULL) {
  subset <- match.arg(subset)
  if (!is.character(path) || length(path) != 1L || is.na(path))
    stop("path must be one directory name", call. = FALSE)
  if (!is.null(n) && (!is.numeric(n) || length(n) != 1L || !is.finite(n) ||
                      n < 1 || n != round(n)))
    stop("n must be NULL or a single positive whole number", call. = FALSE)
  stem <- if (subset == "train") "train" else "t10k"
  images <- idx_file(path, paste0(stem, "-images-idx3-ubyte"))
  labels <- idx_file(path, paste0(stem, "-labels-idx1-ubyte"))
  x <- read_idx(images, 3L, n)
  y <- read_idx(labels, 1L, n)
  if (nrow(x) != length(y))
    stop(sprintf("%s holds %d images but %s holds %d labels", images, nrow(x), labels,
                 length(y)), call. = FALSE)
  list(x = x, y = factor(fashion_mnist_classes[y + 1L], levels = fashion_mnist_classes))
}

# The file `name` or `name.gz` in `path`, or an error that says what is missing.
idx_file <- function(path, name) {
  candidates <- file.path(path, c(paste0(name, ".gz"), name))
  found <- candidates[file.exists(candidates)]
  if (!length(found))
    stop(sprintf(paste0("Fashion-MNIST file %s(.gz) not found in %s: install Debian's ",
                        "dataset-fashion-mnist package or pass the directory holding ",
                        "the IDX files as `path`"), name, sQuote(path, FALSE)),
         call. = FALSE)
  found[1L]
}

# Reads an IDX file of unsigned bytes with `ndim` dimensions (1: labels, 3: images);
# returns a vector of labels or an n x (rows * cols) double matrix, one image a row.
read_idx <- function(file, ndim, n = NULL) {
  con <- gzfile(file, "rb")  # also reads uncompressed files
  on.exit(close(con))
  header <- readBin(con, "integer", n = 1L + ndim, size = 4L, endian = "big")
  if (length(header) != 1L + ndim || header[1L] != 2048L + ndim)
    stop(sprintf("%s is not an IDX file of unsigned bytes with %d dimension%s", file,
                 ndim, if (ndim == 1L) "" else "s"), call. = FALSE)
  count <- header[2L]
  if (!is.null(n)) count <- min(count, as.integer(n))
  width <- if (ndim > 1L) prod(header[-(1:2)]) else 1L
  bytes <- readBin(con, "raw", n = as.double(count) * width)
  if (length(bytes) != count * width)
    stop(sprintf("%s is truncated: expected %.0f bytes of data, found %.0f", file,
                 as.double(count) * width, as.double(length(bytes))), call. = FALSE)
  values <- as.integer(bytes)
  if (ndim == 1L) return(values)
  # Each image is stored row by row, one after the other: transpose into n x width.
  x <- t(matrix(as.double(values), nrow = width, ncol = count))
  x
}
