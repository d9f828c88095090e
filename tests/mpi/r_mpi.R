# The R package's MPI functions, run as `mpirun -np 3 R -f tests/mpi/r_mpi.R` (by
# tests/run-all.sh): every rank makes the same data, keeps its block of rows (uneven) and
# calls gpu_mpi_knn / gpu_mpi_gmm / gpu_mpi_dpc on it; the answers must be those of
# gpu_knn / gpu_gmm / gpu_dpc on all the rows in one process (kNN and density peaks
# identical; mixtures: the same model, G and classification, log-likelihood within 1e-10
# relative). Each rank prints its counts as
# "R-MPI-<rank>: N passed, N failed".
library(gpuml)
rank <- gpu_mpi_rank()
size <- gpu_mpi_size()
passed <- 0L
failed <- 0L
check <- function(ok, what) {
  if (isTRUE(ok)) {
    passed <<- passed + 1L
  } else {
    failed <<- failed + 1L
    cat(sprintf("FAIL rank %d: %s\n", rank, what))
  }
}

# Rank r's rows of n: blocks of sizes 1 : 2 : 3 ...
block <- function(n) {
  ends <- floor(n * cumsum(seq_len(size)) / sum(seq_len(size)))
  starts <- c(0, ends[-size]) + 1
  if (starts[rank + 1] > ends[rank + 1]) integer(0) else starts[rank + 1]:ends[rank + 1]
}

set.seed(11)
x <- matrix(round(runif(600 * 3) * 4) / 4, 600)  # a coarse grid: ties and duplicates
q <- matrix(runif(25 * 3), 25)
mine <- block(nrow(x))
check(gpuml_info()$mpi, "gpuml_info() reports MPI")

whole <- gpu_knn(x, k = 8, backend = "cpu")
spread <- gpu_mpi_knn(x[mine, , drop = FALSE], k = 8, backend = "cpu")
check(identical(spread$nn.index, whole$nn.index[mine, , drop = FALSE]), "self kNN indices")
check(identical(spread$nn.dist, whole$nn.dist[mine, , drop = FALSE]), "self kNN distances")
whole_q <- gpu_knn(x, q, k = 8, backend = "cpu")
spread_q <- gpu_mpi_knn(x[mine, , drop = FALSE], q, k = 8, backend = "cpu")
check(identical(spread_q$nn.index, whole_q$nn.index), "query kNN indices")
check(identical(spread_q$nn.dist, whole_q$nn.dist), "query kNN distances")
bad_k <- tryCatch(gpu_mpi_knn(x[mine, , drop = FALSE], k = 600, backend = "cpu"),
                  error = conditionMessage)
check(is.character(bad_k) && grepl("k", bad_k), "k >= n is an error on every rank")

set.seed(12)
y <- rbind(matrix(rnorm(300 * 2), 300), matrix(rnorm(300 * 2, 5), 300))[sample(600), ]
mine <- block(nrow(y))
one <- gpu_gmm(y, G = 1:3, modelNames = c("VVV", "EEI"), seed = 7, backend = "cpu")
# each rank draws its own seed when none is given: the fit uses rank 0's
spread <- gpu_mpi_gmm(y[mine, , drop = FALSE], G = 1:3, modelNames = c("VVV", "EEI"),
                      seed = if (rank == 0) 7 else NULL, backend = "cpu")
check(identical(spread$modelName, one$modelName) && identical(spread$G, one$G), "model and G")
check(identical(unname(spread$classification), unname(one$classification[mine])),
      "classification")
check(abs(spread$loglik - one$loglik) <= 1e-10 * abs(one$loglik), "log-likelihood")
check(isTRUE(all.equal(spread$parameters$mean, one$parameters$mean, tolerance = 1e-10)),
      "means")
check(isTRUE(all.equal(unclass(spread$BIC), unclass(one$BIC), tolerance = 1e-10)), "BIC table")

set.seed(13)
z <- rbind(matrix(rnorm(250 * 2), 250), matrix(round(runif(251 * 2) * 8) / 2 + 6, 251))
mine <- block(nrow(z))
one <- gpu_dpc(z, dc = 0.5, k = 2, backend = "cpu")
spread <- gpu_mpi_dpc(z[mine, , drop = FALSE], dc = 0.5, k = 2, backend = "cpu")
check(identical(spread$rows, mine), "dpc: this rank's rows")
check(identical(spread$rho, one$rho[mine]) && identical(spread$delta, one$delta[mine]) &&
        identical(spread$gamma, one$gamma[mine]), "dpc: rho, delta and gamma")
check(identical(spread$nearest, one$nearest[mine]), "dpc: nearest (global rows)")
check(identical(spread$peaks, one$peaks), "dpc: the peaks (global rows)")
check(identical(unname(spread$clusters), unname(one$clusters[mine])) &&
        identical(unname(spread$halo), unname(one$halo[mine])), "dpc: clusters and halo")
dens <- gpu_mpi_dpc(z[mine, , drop = FALSE], backend = "cpu", seed = if (rank == 0) 3 else NULL)
check(identical(dens$rho, gpu_dpc(z, backend = "cpu", seed = 3)$rho[mine]) && is.null(dens$peaks),
      "dpc: dc estimated with rank 0's seed, densities only")
bad <- tryCatch(gpu_mpi_dpc(z[mine, , drop = FALSE], dc = 0.5, k = 600, backend = "cpu"),
                error = conditionMessage)
check(is.character(bad) && grepl("k", bad), "dpc: k > n is an error on every rank")

# devices: "local" (the default: the rank's number on its host modulo the host's GPUs),
# a number or "all" give the same answers on the CPU; a bad value is an error on every
# rank
set.seed(14)
w <- matrix(runif(120 * 3), 120)
mine <- block(nrow(w))
part <- w[mine, , drop = FALSE]
nn0 <- gpu_mpi_knn(part, k = 5, backend = "cpu")
gm0 <- gpu_mpi_gmm(part, G = 1:2, modelNames = "VVV", seed = 5, backend = "cpu")
dp0 <- gpu_mpi_dpc(part, dc = 0.3, k = 2, backend = "cpu")
for (dev in list("local", 0, "all", NULL)) {
  what <- if (is.null(dev)) "NULL" else format(dev)
  nn <- gpu_mpi_knn(part, k = 5, backend = "cpu", devices = dev)
  check(identical(nn$nn.index, nn0$nn.index) && identical(nn$nn.dist, nn0$nn.dist) &&
          nn$backend == "cpu", paste("kNN with devices =", what))
  gm <- gpu_mpi_gmm(part, G = 1:2, modelNames = "VVV", seed = 5, backend = "cpu", devices = dev)
  check(identical(gm$loglik, gm0$loglik) && identical(gm$classification, gm0$classification),
        paste("mixtures with devices =", what))
  dp <- gpu_mpi_dpc(part, dc = 0.3, k = 2, backend = "cpu", devices = dev)
  check(identical(dp$rho, dp0$rho) && identical(dp$delta, dp0$delta) &&
          identical(dp$peaks, dp0$peaks), paste("density peaks with devices =", what))
}
check(identical(gpu_mpi_knn(part, k = 5, devices = "local")$nn.index, nn0$nn.index),
      "kNN with backend auto and devices = \"local\"")
for (bad in list("locall", -1, c(0, 0))) {
  what <- paste(format(bad), collapse = " ")
  e1 <- tryCatch(gpu_mpi_knn(part, k = 5, backend = "cpu", devices = bad), error = conditionMessage)
  e2 <- tryCatch(gpu_mpi_gmm(part, G = 1, backend = "cpu", devices = bad), error = conditionMessage)
  e3 <- tryCatch(gpu_mpi_dpc(part, dc = 0.3, backend = "cpu", devices = bad),
                 error = conditionMessage)
  says <- if (identical(bad, "locall")) "\"locall\".*\"local\"" else "device"
  check(is.character(e1) && grepl(says, e1) && identical(e1, e2) && identical(e1, e3),
        paste("devices =", what, "is an error:", e1))
}
# a bad value on one rank alone: the error of every rank, naming that rank
alone <- tryCatch(gpu_mpi_knn(part, k = 5, backend = "cpu",
                              devices = if (rank == size - 1) "locall" else "local"),
                  error = conditionMessage)
check(is.character(alone) && grepl("locall", alone) &&
        (rank == size - 1 || grepl(sprintf("rank %d", size - 1), alone)),
      paste("\"locall\" on the last rank alone:", alone))
check(inherits(tryCatch(gpu_mpi_knn(part, k = 5, devices = TRUE), error = identity), "error"),
      "devices = TRUE is an error")

cat(sprintf("R-MPI-%d: %d passed, %d failed\n", rank, passed, failed))
