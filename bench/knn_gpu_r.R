# GPU machine: gpu_knn() as an R user sees it (R double matrices in, R matrices out,
# transfers included), in the three precisions, and the answers compared:
#   first  the first gpu_knn() of a fresh R session (its own Rscript: library(gpuml), the
#          data made, then the one call timed), precision "auto";
#   warm   the best of 3 calls in one session after a first one, per precision.
# precision "auto" must give exactly the "double" answer (identical indices and
# distances) and the CPU's on a subset of queries; "rechecked" is the number of queries
# the certificate sent back to fp64.
#   Rscript bench/knn_gpu_r.R [--only case1,case2]
#   Rscript bench/knn_gpu_r.R --first NAME        (one fresh-session first call)
suppressPackageStartupMessages(library(gpuml))
args <- commandArgs(trailingOnly = TRUE)
arg_value <- function(name, default = NULL) {
  at <- match(name, args)
  if (is.na(at) || at == length(args)) default else args[[at + 1L]]
}
uniform <- function(n, d, seed = 1) {
  set.seed(seed)
  matrix(runif(n * d), n, d)
}
cases <- list(
  self_1e6x128_k10 = list(n = 1e6, d = 128, k = 10, target = 3.0),
  self_65536x128_k16 = list(n = 65536, d = 128, k = 16, target = 0.030)
)

first <- arg_value("--first")
if (!is.null(first)) {
  cs <- cases[[first]]
  x <- uniform(cs$n, cs$d)
  t <- system.time(r <- gpu_knn(x, k = cs$k, backend = "cuda"))[["elapsed"]]
  cat(sprintf("FIRST %s %.4f rechecked %.0f\n", first, t, r$rechecked))
  quit(save = "no")
}

info <- gpuml_info()
cat(sprintf("gpuml %s on %s (compute capability %s), CUDA %s\n", info$version,
            info$device_name, info$compute_capability, info$cuda_runtime))
names_run <- names(cases)
only <- arg_value("--only")
if (!is.null(only)) names_run <- intersect(strsplit(only, ",")[[1]], names_run)
rscript <- file.path(R.home("bin"), "Rscript")
script <- normalizePath(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]))
rows <- list()
for (name in names_run) {
  cs <- cases[[name]]
  out <- suppressWarnings(system2(rscript, c(shQuote(script), "--first", name),
                                  stdout = TRUE, stderr = TRUE))
  hit <- grep("^FIRST ", out, value = TRUE)
  if (!length(hit)) cat(out, sep = "\n")
  first_s <- if (length(hit)) as.numeric(strsplit(hit[1], " ")[[1]][3]) else NA_real_
  x <- uniform(cs$n, cs$d)
  res <- list()
  warm <- c()
  for (p in c("auto", "double", "single")) {
    invisible(gpu_knn(x, k = cs$k, backend = "cuda", precision = p))
    warm[[p]] <- min(replicate(3, system.time(
      res[[p]] <- gpu_knn(x, k = cs$k, backend = "cuda", precision = p))[["elapsed"]]))
  }
  same <- identical(res$auto$nn.index, res$double$nn.index) &&
    identical(res$auto$nn.dist, res$double$nn.dist)
  single_diff <- sum(res$single$nn.index != res$double$nn.index)
  q <- x[seq_len(500), , drop = FALSE]
  a <- gpu_knn(x, q, k = cs$k + 1, backend = "cuda")
  b <- gpu_knn(x, q, k = cs$k + 1, backend = "cpu")
  cpu_same <- identical(a$nn.index, b$nn.index) && identical(a$nn.dist, b$nn.dist)
  cat(sprintf(paste0("USER %s first %.4f auto %.4f double %.4f single %.4f target %.3f ",
                     "rechecked %.0f auto==double %s single_index_diffs %d cpu==cuda(500 q) %s\n"),
              name, first_s, warm[["auto"]], warm[["double"]], warm[["single"]], cs$target,
              res$auto$rechecked, same, single_diff, cpu_same))
  rows[[name]] <- list(first = first_s, warm = warm, target = cs$target,
                       rechecked = res$auto$rechecked, same = same, cpu = cpu_same,
                       n = nrow(x))
  rm(x, res)
  invisible(gc())
}
cat("\n| case (from R, double input) | first call, auto (s) | warm auto (s) | warm double (s) | warm single (s) | double / auto | target (s) | rechecked | auto == double | == CPU (500 queries) |\n")
cat("|---|---|---|---|---|---|---|---|---|---|\n")
for (name in names(rows)) {
  r <- rows[[name]]
  cat(sprintf("| %s | %.4g | %.4g | %.4g | %.4g | %.2f | <= %g | %.0f of %d | %s | %s |\n", name,
              r$first, r$warm[["auto"]], r$warm[["double"]], r$warm[["single"]],
              r$warm[["double"]] / r$warm[["auto"]], r$target, r$rechecked, r$n, r$same, r$cpu))
}
