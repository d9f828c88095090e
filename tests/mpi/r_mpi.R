# The R package's MPI functions, run as `mpirun -np 3 R -f tests/mpi/r_mpi.R` (by
# tests/run-all.sh): every rank makes the same data, keeps its block of rows (uneven) and
# calls gpu_mpi_knn / gpu_mpi_gmm on it; the answers must be those of gpu_knn / gpu_gmm on
# all the rows in one process (kNN identical; mixtures: the same model, G and
# classification, log-likelihood within 1e-10 relative). Each rank prints its counts as
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

cat(sprintf("R-MPI-%d: %d passed, %d failed\n", rank, passed, failed))
