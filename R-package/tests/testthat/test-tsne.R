backend <- function() test_backend()

test_that("gpu_tsne returns the documented object", {
  b <- tsne_blobs()
  fit <- gpu_tsne(b$x, perplexity = 15, max_iter = 120, seed = 1, backend = backend())
  expect_s3_class(fit, "gpu_tsne")
  expect_true(is.matrix(fit$Y) && is.double(fit$Y))
  expect_equal(dim(fit$Y), c(180L, 2L))
  expect_true(all(is.finite(fit$Y)))
  expect_length(fit$itercosts, 3L)
  expect_equal(fit$costs_at, c(50L, 100L, 120L))
  expect_true(all(fit$itercosts > 0))
  expect_equal(fit$method, "exact")
  expect_equal(fit$eta, 200)
  expect_equal(fit$neighbours, 45L)
  expect_equal(fit$N, 180L)
  expect_equal(fit$origD, 10L)
  expect_true(fit$backend %in% c("cpu", "cuda"))
  if (backend() != "auto") expect_identical(fit$backend, backend())
  expect_true(fit$time >= fit$time_optimisation)
  expect_equal(colMeans(fit$Y), c(0, 0), tolerance = 1e-10)
  expect_output(print(fit), "t-SNE embedding of 180 points \\(10 variables\\) in 2 dimensions")
  expect_output(print(summary(fit)), "KL divergence by iteration")
  expect_output(print(summary(fit)), "initialisation: pca")
  rownames(b$x) <- paste0("p", seq_len(nrow(b$x)))
  expect_identical(rownames(gpu_tsne(b$x, perplexity = 15, max_iter = 10, backend = backend())$Y),
                   rownames(b$x))
})

test_that("separated blobs stay separated, in 1, 2 and 3 dimensions, both methods", {
  b <- tsne_blobs()
  for (dims in 1:3) for (method in c("exact", "fft")) {
    if (dims == 3 && method == "fft") next  # slow on the CPU; covered by the C tests
    fit <- gpu_tsne(b$x, dims = dims, perplexity = 20, max_iter = 500, method = method,
                    seed = 2, backend = backend())
    expect_equal(fit$method, method)
    expect_equal(ncol(fit$Y), dims)
    # (in 1-D a cluster may be cut in two, each half intact)
    expect_gte(knn_label_accuracy(fit$Y, b$y, k = 5), if (dims == 1) 0.95 else 1)
    expect_lt(fit$itercosts[10], fit$itercosts[5])
  }
})

test_that("a seed, or set.seed(), gives the same embedding", {
  b <- tsne_blobs(seed = 3)
  run <- function(...) gpu_tsne(b$x, perplexity = 10, max_iter = 60, init = "random",
                                backend = backend(), ...)$Y
  expect_identical(run(seed = 7), run(seed = 7))
  expect_false(identical(run(seed = 7), run(seed = 8)))
  set.seed(11); a <- run()
  set.seed(11); c <- run()
  expect_identical(a, c)
  # the PCA start uses no random numbers at all
  set.seed(1); p1 <- gpu_tsne(b$x, perplexity = 10, max_iter = 60, backend = backend())
  set.seed(2); p2 <- gpu_tsne(b$x, perplexity = 10, max_iter = 60, backend = backend())
  expect_identical(p1$Y, p2$Y)
})

test_that("init: a user matrix is the start; PCA scaled to sd 1e-4", {
  b <- tsne_blobs(seed = 4)
  start <- matrix(seq(-1, 1, length.out = 360), 180)
  fit <- gpu_tsne(b$x, perplexity = 10, max_iter = 1, init = start, learning_rate = 1e-12,
                  backend = backend())
  expect_equal(fit$Y, sweep(start, 2, colMeans(start)), tolerance = 1e-9)
  expect_equal(fit$init, "user")
  fit <- gpu_tsne(b$x, perplexity = 10, max_iter = 1, learning_rate = 1e-12,
                  backend = backend())
  pc1 <- prcomp(b$x)$x[, 1]
  expect_gt(abs(cor(fit$Y[, 1], pc1)), 0.99999)
  expect_equal(sd(fit$Y[, 1]), 1e-4, tolerance = 1e-6)
})

test_that("df: 1 is the usual t-SNE; heavier tails (df < 1) keep the clusters apart", {
  b <- tsne_blobs(seed = 12)
  for (method in c("exact", "fft")) {
    run <- function(...) gpu_tsne(b$x, perplexity = 15, max_iter = 300, method = method,
                                  seed = 3, backend = backend(), ...)
    usual <- run()
    expect_identical(run(df = 1)$Y, usual$Y)
    heavy <- run(df = 0.5)
    expect_equal(heavy$df, 0.5)
    expect_false(identical(heavy$Y, usual$Y))
    expect_true(all(is.finite(heavy$Y)) && all(heavy$itercosts > 0))
    expect_gte(knn_label_accuracy(heavy$Y, b$y, k = 5), 0.95)
    expect_output(print(heavy), "df 0.5")
  }
  expect_error(gpu_tsne(b$x, perplexity = 5, df = 0), "df = 0 must be a positive")
  expect_error(gpu_tsne(b$x, perplexity = 5, df = -2), "df = -2 must be a positive")
})

# Majority label of each query point's k nearest points of the reference embedding.
knn_label_transfer <- function(ref, ref_labels, query, k = 10) {
  idx <- gpu_knn(ref, query, k = k, backend = "cpu")$nn.index
  votes <- matrix(ref_labels[idx], nrow(idx))
  apply(votes, 1, function(v) as.integer(names(which.max(table(v)))))
}

test_that("predict places held-out points among their class; training points stay put", {
  set.seed(21)
  centres <- matrix(rnorm(10 * 20, sd = 0.8), 10)
  cloud <- function(n) {
    y <- rep(1:10, length.out = n)
    list(x = centres[y, ] + matrix(rnorm(n * 20), n), y = y)
  }
  train <- cloud(1000)
  test <- cloud(300)
  fit <- gpu_tsne(train$x, max_iter = 400, seed = 1, backend = backend())
  own <- knn_label_accuracy(fit$Y, train$y, k = 10)
  for (method in c("exact", "fft")) {
    Y <- predict(fit, test$x, method = method, backend = backend())
    expect_equal(dim(Y), c(300L, 2L))
    expect_gt(mean(knn_label_transfer(fit$Y, train$y, Y) == test$y), own - 0.05)
    again <- predict(fit, train$x[1:200, ], method = method, backend = backend())
    moved <- sqrt(rowSums((again - fit$Y[1:200, ])^2))
    expect_lt(median(moved), 0.01 * diff(range(fit$Y)))
  }
  # a point's place does not depend on the others placed with it (exact method)
  all <- predict(fit, test$x, method = "exact", backend = backend())
  expect_identical(predict(fit, test$x[11:40, ], method = "exact", backend = backend()),
                   all[11:40, ])
  rownames(test$x) <- paste0("q", 1:300)
  expect_identical(rownames(predict(fit, test$x[1:5, ], backend = backend())), paste0("q", 1:5))
  expect_error(predict(fit, test$x[, 1:19]), "19 columns but the training data 20")
  expect_error(predict(fit), "newdata is required")
  expect_error(predict(fit, test$x, perplexity = 400), "perplexity = 400 is too large")
  lean <- gpu_tsne(train$x, max_iter = 50, keep_data = FALSE, backend = backend())
  expect_null(lean$X)
  expect_error(predict(lean, test$x), "kept no training data")
  heavy <- gpu_tsne(train$x, max_iter = 300, df = 0.6, seed = 1, backend = backend())
  Yh <- predict(heavy, test$x, backend = backend())
  expect_gt(mean(knn_label_transfer(heavy$Y, train$y, Yh) == test$y),
            knn_label_accuracy(heavy$Y, train$y, k = 10) - 0.05)
})

test_that("predict on held-out Fashion-MNIST is as accurate as the fit on its own points", {
  path <- "/usr/share/datasets/fashion-mnist"
  skip_if_no_data(file.path(path, "t10k-images-idx3-ubyte.gz"), "Fashion-MNIST")
  fm <- read_fashion_mnist(path, "test", n = 2500)
  pc <- prcomp(fm$x[1:2000, ] / 255, rank. = 50)
  train <- pc$x
  held_out <- predict(pc, fm$x[2001:2500, ] / 255)
  fit <- gpu_tsne(train, pca = FALSE, max_iter = 500, seed = 1, backend = backend())
  own <- knn_label_accuracy(fit$Y, fm$y[1:2000], k = 10)
  Y <- predict(fit, held_out, backend = backend())
  lab <- as.integer(as.factor(fm$y))
  acc <- mean(knn_label_transfer(fit$Y, lab[1:2000], Y) == lab[2001:2500])
  expect_gt(acc, own - 0.05)
})

test_that("a distance matrix or neighbour lists give the data's embedding", {
  b <- tsne_blobs(seed = 14)
  run <- function(...) gpu_tsne(perplexity = 10, max_iter = 150, init = "random", seed = 3,
                                backend = backend(), ...)
  from_data <- run(X = b$x)
  from_dist <- run(X = dist(b$x), is_distance = TRUE)
  expect_equal(unname(from_dist$Y), from_data$Y, tolerance = 1e-6)
  expect_equal(run(X = as.matrix(dist(b$x)), is_distance = TRUE)$Y, from_dist$Y)
  expect_equal(from_dist$input, "distance")
  expect_output(print(from_dist), "from distances")
  nn <- gpu_knn(b$x, k = 30, backend = "cpu")
  from_nn <- run(nn_index = nn$nn.index, nn_dist = nn$nn.dist)
  expect_identical(from_nn$Y, from_data$Y)
  expect_equal(from_nn$neighbours, 30L)
  expect_error(predict(from_nn, b$x), "kept no training data")
  # PCA has nothing to work from: the start is random, as in Rtsne
  expect_true(all(is.finite(gpu_tsne(dist(b$x), is_distance = TRUE, perplexity = 10,
                                     max_iter = 50, backend = backend())$Y)))
  d <- as.matrix(dist(b$x))
  expect_error(gpu_tsne(d[, -1], is_distance = TRUE, perplexity = 10), "must be square")
  d[3, 5] <- -1
  expect_error(gpu_tsne(d, is_distance = TRUE, perplexity = 10),
               "row 3, column 5 is -1: distances must be finite and non-negative")
  expect_error(gpu_tsne(nn_index = nn$nn.index, nn_dist = nn$nn.dist[, -1], perplexity = 10),
               "nn_index is 180 x 30 but nn_dist 180 x 29")
  expect_error(gpu_tsne(nn_index = nn$nn.index, perplexity = 10), "must be given together")
  expect_error(gpu_tsne(nn_index = nn$nn.index[, 1:20], nn_dist = nn$nn.dist[, 1:20],
                        perplexity = 10), "needs 3 \\* perplexity = 30 neighbours")
  bad <- nn$nn.index
  bad[2, 1] <- 2L
  expect_error(gpu_tsne(nn_index = bad, nn_dist = nn$nn.dist, perplexity = 10),
               "point 2 is listed as its own neighbour")
})

test_that("a vector of perplexities gives multiscale affinities", {
  b <- tsne_blobs(seed = 15)
  run <- function(...) gpu_tsne(b$x, max_iter = 150, seed = 4, backend = backend(), ...)
  multi <- run(perplexity = c(5, 25))
  expect_equal(multi$perplexity, c(5, 25))
  expect_equal(multi$neighbours, 75L)
  expect_output(print(multi), "perplexity 5, 25 \\(75 neighbours\\)")
  expect_false(identical(multi$Y, run(perplexity = 25)$Y))
  # 179 of 180 on the CPU, 178 on an H100 (other summation orders); a wrong P scatters
  # the blobs far below this
  expect_gte(knn_label_accuracy(multi$Y, b$y, k = 5), 0.98)
})

test_that("duplicated points give a finite embedding", {
  b <- tsne_blobs(seed = 5)
  x <- rbind(b$x, b$x[rep(1, 40), ], b$x[1:30, ])
  for (method in c("exact", "fft")) {
    fit <- gpu_tsne(x, perplexity = 10, max_iter = 200, method = method, backend = backend())
    expect_true(all(is.finite(fit$Y)))
    expect_true(all(is.finite(fit$itercosts)))
  }
})

test_that("bad input gets clear errors", {
  b <- tsne_blobs(n_each = 10, seed = 6)
  expect_error(gpu_tsne(b$x, backend = backend()),
               "perplexity = 30 is too large for 30 points.*perplexity <= 9")
  expect_error(gpu_tsne(b$x[1:3, ], perplexity = 1, backend = backend()), "at least 4 points")
  x <- b$x
  x[4, 2] <- NA
  expect_error(gpu_tsne(x, perplexity = 5, backend = backend()), "NA/NaN at row 4, column 2")
  x[4, 2] <- Inf
  expect_error(gpu_tsne(x, perplexity = 5, backend = backend()), "Inf at row 4, column 2")
  expect_error(gpu_tsne(b$x, dims = 4, perplexity = 5), "dims = 4 must be 1, 2 or 3")
  expect_error(gpu_tsne(b$x, dims = 0, perplexity = 5), "dims = 0 must be 1, 2 or 3")
  expect_error(gpu_tsne(b$x, perplexity = -1), "perplexity = -1 must be positive")
  expect_error(gpu_tsne(b$x, perplexity = 5, method = "bh"),
               "method = \"bh\" is not known: use \"auto\", \"exact\" or \"fft\"")
  expect_error(gpu_tsne(b$x, perplexity = 5, init = "spectral"),
               "init = \"spectral\" is not known: use \"pca\" or \"random\"")
  expect_error(gpu_tsne(b$x, perplexity = 5, init = matrix(0, 29, 2)), "init must be a 30 x 2 matrix")
  expect_error(gpu_tsne(b$x, perplexity = 5, learning_rate = -1), "learning_rate = -1 must be positive")
  expect_error(gpu_tsne(b$x, perplexity = 5, learning_rate = "fast"),
               "learning_rate must be a number or \"auto\", not \"fast\"")
  expect_error(gpu_tsne(b$x, perplexity = 5, perplexity2 = 3), "unused argument")
  expect_error(gpu_tsne(b$x, perplexity = c(5, -6)), "perplexity -6 must be positive")
  expect_error(gpu_tsne(b$x, perplexity = c(5, 10)), "largest perplexity, 10, is too large")
  expect_error(gpu_tsne(b$x, perplexity = 5, max_iter = 0), "max_iter = 0 must lie in 1")
  expect_error(gpu_tsne(b$x, perplexity = 5, max_iter = 2.5), "max_iter must be a whole number")
  expect_error(gpu_tsne(b$x, perplexity = 5, momentum = 1), "must lie in \\[0, 1\\)")
  expect_error(gpu_tsne(b$x, perplexity = 5, backend = "gpu"), "backend")
  expect_error(gpu_tsne(b$x, perplexity = 5, seed = -1), "seed = -1 must be a whole number")
  expect_error(gpu_tsne(letters), "numeric")
  if (!has_cuda_device())
    expect_error(gpu_tsne(b$x, perplexity = 5, backend = "cuda"), "not available")
})

test_that("verbose reports stages and the KL while it runs", {
  b <- tsne_blobs(seed = 7)
  out <- capture.output(invisible(gpu_tsne(b$x, perplexity = 10, max_iter = 100,
                                           verbose = TRUE, backend = backend())),
                        type = "message")
  expect_true(any(grepl("^knn done", out)))
  expect_true(any(grepl("^affinities done", out)))
  expect_true(any(grepl("^Iteration 50/100: KL divergence [0-9.]+ \\([0-9.]+ s\\)", out)))
  expect_true(any(grepl("^Iteration 100/100", out)))
  quiet <- capture.output(invisible(gpu_tsne(b$x, perplexity = 10, max_iter = 20,
                                             backend = backend())), type = "message")
  expect_length(quiet, 0)
})

test_that("plot draws the embedding coloured by labels", {
  b <- tsne_blobs(seed = 8)
  file <- tempfile(fileext = ".pdf")
  grDevices::pdf(file)
  on.exit(unlink(file))
  for (dims in 1:3) {
    fit <- gpu_tsne(b$x, dims = dims, perplexity = 10, max_iter = 50, backend = backend())
    expect_identical(plot(fit, labels = letters[b$y]), fit)
    expect_identical(plot(fit), fit)
  }
  expect_error(plot(fit, labels = 1:3), "labels has 3 values but the embedding has 180 points")
  grDevices::dev.off()
  expect_gt(file.size(file), 1000)
})

test_that("quality on a Fashion-MNIST slice is within 2% of Rtsne's", {
  skip_if_no_peer("Rtsne")
  path <- "/usr/share/datasets/fashion-mnist"
  skip_if_no_data(file.path(path, "t10k-images-idx3-ubyte.gz"), "Fashion-MNIST")
  fm <- read_fashion_mnist(path, "test", n = 2000)
  x <- prcomp(fm$x / 255, rank. = 50)$x
  ours <- gpu_tsne(x, pca = FALSE, max_iter = 500, seed = 1, backend = backend())
  set.seed(1)
  theirs <- Rtsne::Rtsne(x, pca = FALSE, max_iter = 500, num_threads = 2)
  q <- c(ours = knn_preservation(x, ours$Y), rtsne = knn_preservation(x, theirs$Y))
  a <- c(ours = knn_label_accuracy(ours$Y, fm$y), rtsne = knn_label_accuracy(theirs$Y, fm$y))
  expect_gt(q[["ours"]], q[["rtsne"]] - 0.02)
  expect_gt(a[["ours"]], a[["rtsne"]] - 0.02)
})

test_that("the CUDA backend reaches the CPU's KL divergence", {
  skip_if_no_cuda()
  b <- tsne_blobs(n_each = 400, d = 20, seed = 9)
  for (method in c("exact", "fft")) {
    g <- gpu_tsne(b$x, perplexity = 30, max_iter = 300, method = method, backend = "cuda")
    c <- gpu_tsne(b$x, perplexity = 30, max_iter = 300, method = method, backend = "cpu")
    expect_equal(g$backend, "cuda")
    expect_equal(g$itercosts, c$itercosts, tolerance = 0.02)
    expect_identical(g$Y, gpu_tsne(b$x, perplexity = 30, max_iter = 300, method = method,
                                   backend = "cuda")$Y)
  }
})
