# GPU machine: the time of gpu_knn() as an R user sees it (R double matrices in, R
# matrices out, transfers included), CUDA against the CPU backend on a query subset.
suppressPackageStartupMessages(library(gpuml))
print(gpuml_info())
set.seed(1)
n <- 65536; d <- 128; k <- 16
x <- matrix(rnorm(n * d), n, d)
invisible(gpu_knn(x[1:4096, ], k = k, backend = "cuda"))  # warm-up: context, cuBLAS
times <- replicate(3, system.time(r <- gpu_knn(x, k = k, backend = "cuda"))[["elapsed"]])
cat(sprintf("R gpu_knn self n = %d, d = %d, k = %d (fp64, transfers included): median %.3f s\n",
            n, d, k, median(times)))
q <- x[1:2000, ]
a <- gpu_knn(x, q, k = k + 1, backend = "cuda")
b <- gpu_knn(x, q, k = k + 1, backend = "cpu")
cat(sprintf("CUDA vs CPU on 2000 queries: identical indices %s, max |dist diff| %.3g\n",
            identical(a$nn.index, b$nn.index), max(abs(a$nn.dist - b$nn.dist))))
