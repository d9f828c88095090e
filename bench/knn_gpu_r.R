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
#   --scale F divides every n by F and --backend cpu runs the CPU backend (a quick check
#   of this script on a machine without a GPU).
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
backend <- arg_value("--backend", "cuda")
scale <- as.numeric(arg_value("--scale", "1"))
for (name in names(cases)) cases[[name]]$n <- round(cases[[name]]$n / scale)

first <- arg_value("--first")
if (!is.null(first)) {
  cs <- cases[[first]]
  x <- uniform(cs$n, cs$d)
  t <- system.time(r <- gpu_knn(x, k = cs$k, backend = backend))[["elapsed"]]
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
  out <- suppressWarnings(system2(rscript, c(shQuote(script), "--first", name,
                                             "--backend", backend, "--scale", scale),
                                  stdout = TRUE, stderr = TRUE))
  hit <- grep("^FIRST ", out, value = TRUE)
  if (!length(hit)) cat(out, sep = "\n")
  first_s <- if (length(hit)) as.numeric(strsplit(hit[1], " ")[[1]][3]) else NA_real_
  x <- uniform(cs$n, cs$d)
  res <- list()
  warm <- c(auto = NA_real_, double = NA_real_, single = NA_real_)
  for (p in names(warm)) {
    invisible(gpu_knn(x, k = cs$k, backend = backend, precision = p))
    times <- numeric(3)
    for (rep in 1:3)   # a loop, not replicate(): the result must land in this frame
      times[rep] <- system.time(
        res[[p]] <- gpu_knn(x, k = cs$k, backend = backend, precision = p))[["elapsed"]]
    warm[[p]] <- min(times)
  }
  same <- identical(res$auto$nn.index, res$double$nn.index) &&
    identical(res$auto$nn.dist, res$double$nn.dist)
  single_diff <- sum(res$single$nn.index != res$double$nn.index)
  q <- x[seq_len(min(500, nrow(x))), , drop = FALSE]
  a <- gpu_knn(x, q, k = cs$k + 1, backend = backend)
  b <- gpu_knn(x, q, k = cs$k + 1, backend = "cpu")
  cpu_same <- identical(a$nn.index, b$nn.index) && identical(a$nn.dist, b$nn.dist)
  cat(sprintf(paste0("USER %s first %.4f auto %.4f double %.4f single %.4f target %.3f ",
                     "rechecked %.0f auto==double %s single_index_diffs %d cpu==cuda(500 q) %s\n"),
              name, first_s, warm[["auto"]], warm[["double"]], warm[["single"]], cs$target,
              res$auto$rechecked, same, single_diff, cpu_same))
  # the index: the data prepared once, then 10,000 new queries, against the plain search
  q <- uniform(min(10000, cs$n), cs$d, seed = 2)
  build <- system.time(ix <- gpu_knn_index(x, backend = backend))[["elapsed"]]
  t_plain <- t_index <- numeric(3)
  for (rep in 1:3) {
    t_plain[rep] <- system.time(a <- gpu_knn(x, q, k = cs$k, backend = backend))[["elapsed"]]
    t_index[rep] <- system.time(b <- gpu_knn(ix, q, k = cs$k))[["elapsed"]]
  }
  cat(sprintf(paste0("INDEX %s build %.4f plain %.4f index %.4f (%d queries, k = %d) ",
                     "identical %s\n"), name, build, min(t_plain), min(t_index), nrow(q), cs$k,
              identical(a$nn.index, b$nn.index) && identical(a$nn.dist, b$nn.dist)))
  gpu_free(ix)
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
