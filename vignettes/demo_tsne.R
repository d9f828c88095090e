# t-SNE section of `make demo`: a t-SNE embedding of Fashion-MNIST, coloured by label,
# written to a PNG. With a GPU (backend "cuda") all 70,000 images; without one, on the
# CPU, the 10,000 test images (about 15 s on 2 cores).
# Environment: GPUML_DEMO_BACKEND ("auto", "cpu", "cuda"), GPUML_DEMO_TSNE_N (images),
# GPUML_DEMO_OUT (the PNG; default build/tsne_fashion_mnist.png).
suppressPackageStartupMessages(library(gpuml))
backend <- Sys.getenv("GPUML_DEMO_BACKEND", "auto")
gpu <- backend != "cpu" && gpuml_info()$device_count > 0
n <- as.integer(Sys.getenv("GPUML_DEMO_TSNE_N", if (gpu) "70000" else "10000"))
out <- Sys.getenv("GPUML_DEMO_OUT", file.path("build", "tsne_fashion_mnist.png"))

t0 <- proc.time()[["elapsed"]]
train <- read_fashion_mnist(subset = "train")
test <- read_fashion_mnist(subset = "test")
x <- rbind(test$x, train$x)[seq_len(n), , drop = FALSE] / 255
labels <- unlist(list(test$y, train$y))[seq_len(n)]
cat(sprintf("t-SNE of %d Fashion-MNIST images (%d pixels), read in %.1f s\n", n, ncol(x),
            proc.time()[["elapsed"]] - t0))

fit <- gpu_tsne(x, seed = 42, backend = if (gpu) "cuda" else backend, verbose = FALSE)
print(fit)
pcs <- prcomp(x[seq_len(min(n, 5000)), ], rank. = 50)$x
near <- gpu_knn(fit$Y[seq_len(nrow(pcs)), ], k = 10)$nn.index
vote <- apply(matrix(as.integer(labels)[near], nrow(near)), 1,
              function(v) as.integer(names(which.max(table(v)))))
cat(sprintf("10-NN label accuracy in the embedding (first %d points): %.1f%%\n", nrow(pcs),
            100 * mean(vote == as.integer(labels)[seq_len(nrow(pcs))])))

dir.create(dirname(out), showWarnings = FALSE, recursive = TRUE)
grDevices::png(out, width = 1200, height = 1000, res = 120)
plot(fit, labels = labels, cex = if (n > 20000) 0.15 else 0.4,
     main = sprintf("Fashion-MNIST, %d images (gpuml %s, %s, %.1f s)", n, fit$method,
                    fit$backend, fit$time))
invisible(grDevices::dev.off())
cat(sprintf("wrote %s\n", out))
