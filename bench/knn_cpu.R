# CPU benchmark: exact kNN, gpuml against FNN (kd-tree) and RANN (kd-tree), side by side
# in one run on the same data. `make bench`; paste the table into bench/RESULTS.md.
suppressPackageStartupMessages(library(gpuml))
have <- function(p) requireNamespace(p, quietly = TRUE)

timed <- function(expr) {
  t0 <- proc.time()[["elapsed"]]
  value <- force(expr)
  list(value = value, seconds = proc.time()[["elapsed"]] - t0)
}

row <- function(case, tool, seconds, ratio, agree) {
  cat(sprintf("| %s | %s | %.2f | %s | %s |\n", case, tool, seconds, ratio, agree))
}

cases <- list(list(n = 20000, d = 50, k = 10), list(n = 20000, d = 2, k = 10),
              list(n = 10000, d = 784, k = 10))
info <- gpuml_info()
cat(sprintf("threads: %d; BLAS: %s\n\n", info$threads, extSoftVersion()[["BLAS"]]))
cat("| case | tool | seconds | gpuml speed-up | same neighbours |\n|---|---|---|---|---|\n")
for (cs in cases) {
  set.seed(1)
  x <- matrix(rnorm(cs$n * cs$d), cs$n, cs$d)
  label <- sprintf("self-kNN n = %d, d = %d, k = %d", cs$n, cs$d, cs$k)
  ours <- timed(gpu_knn(x, k = cs$k, backend = "cpu"))
  row(label, "gpuml (cpu)", ours$seconds, "1", "-")
  peers <- list()
  if (have("FNN")) peers$`FNN::get.knn (kd_tree)` <- function() FNN::get.knn(x, k = cs$k, algorithm = "kd_tree")
  if (have("RANN")) peers$`RANN::nn2` <- function() {
    r <- RANN::nn2(x, k = cs$k + 1)
    list(nn.index = r$nn.idx[, -1, drop = FALSE])
  }
  for (name in names(peers)) {
    res <- timed(peers[[name]]())
    agree <- mean(res$value$nn.index == ours$value$nn.index)
    row(label, name, res$seconds, sprintf("%.1fx", res$seconds / ours$seconds),
        sprintf("%.4f", agree))
  }
}
