# Gaussian mixtures demo (`make demo`): Old Faithful, then the 60,000 Fashion-MNIST
# training images in ten principal components, with BIC and classification plots
# written to build/gmm-demo.pdf (or $GPUML_DEMO_DIR/gmm-demo.pdf).
suppressPackageStartupMessages(library(gpuml))
options(width = 160)
out_dir <- Sys.getenv("GPUML_DEMO_DIR", "build")
dir.create(out_dir, showWarnings = FALSE, recursive = TRUE)
pdf_file <- file.path(out_dir, "gmm-demo.pdf")
pdf(pdf_file, width = 7, height = 5.5)

t0 <- proc.time()[["elapsed"]]
fit <- gpu_gmm(faithful)
print(fit)
cat(sprintf("faithful, G = 1:9, all 14 models: %.2f s\n\n", proc.time()[["elapsed"]] - t0))
plot(fit)
plot(fit, "classification", data = faithful)
plot(fit, "uncertainty", data = faithful)
if (requireNamespace("mclust", quietly = TRUE)) {
  suppressPackageStartupMessages(library(mclust))
  m <- Mclust(faithful, verbose = FALSE)
  cat(sprintf("mclust chooses %s, G = %d with loglik %.4f; gpuml %s, G = %d with loglik %.4f\n\n",
              m$modelName, m$G, m$loglik, fit$modelName, fit$G, fit$loglik))
}

train <- read_fashion_mnist(subset = "train")
centred <- sweep(train$x, 2, colMeans(train$x))
pc <- centred %*% eigen(crossprod(centred), symmetric = TRUE)$vectors[, 1:10]
colnames(pc) <- paste0("PC", 1:10)
t0 <- proc.time()[["elapsed"]]
fm <- gpu_gmm(pc, G = c(5, 10, 15), modelNames = "VVV")
elapsed <- proc.time()[["elapsed"]] - t0
print(fm)
cat(sprintf("Fashion-MNIST 60,000 x 10, G = 5, 10, 15: %.1f s on backend \"%s\" (%d iterations for G = %d)\n",
            elapsed, fm$backend, fm$n_iter, fm$G))
plot(fm)
plot(fm, "classification", data = pc)
short <- factor(train$y, labels = abbreviate(sub("/.*", "", levels(train$y)), 6))
print(table(short, component = fm$classification))
dev.off()
cat(sprintf("plots written to %s\n", pdf_file))
