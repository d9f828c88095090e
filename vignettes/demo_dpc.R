# Density peaks section of `make demo`: the 10,000 Fashion-MNIST test images, projected
# on their first 20 principal components, clustered by density peaks into 10 clusters;
# the decision graph and the clusters are drawn to a PDF file (GPUML_DEMO_PLOT, default
# build/dpc_demo.pdf).
suppressPackageStartupMessages(library(gpuml))
set.seed(1)  # the dc estimate samples 2,000 of the 10,000 points

t0 <- proc.time()[["elapsed"]]
fm <- read_fashion_mnist(subset = "test")
centre <- colMeans(fm$x)
rotation <- eigen(crossprod(sweep(fm$x, 2, centre)), symmetric = TRUE)$vectors[, 1:20]
pc <- sweep(fm$x, 2, centre) %*% rotation
cat(sprintf("read and projected %d images on 20 principal components in %.1f s\n",
            nrow(pc), proc.time()[["elapsed"]] - t0))

t0 <- proc.time()[["elapsed"]]
fit <- gpu_dpc(pc, k = 10)
cat(sprintf("density peaks (rho, delta, 10 clusters, halo): %.2f s on backend \"%s\"\n",
            proc.time()[["elapsed"]] - t0, fit$backend))
print(fit)

# Each cluster's most common class, and how pure the clusters are.
tab <- table(cluster = fit$clusters, class = as.integer(fm$y))
major <- levels(fm$y)[as.integer(colnames(tab))[apply(tab, 1, which.max)]]
purity <- sum(apply(tab, 1, max)) / length(fm$y)
print(data.frame(cluster = seq_along(fit$peaks), size = rowSums(tab),
                 halo = tabulate(fit$clusters[fit$halo], length(fit$peaks)),
                 main_class = major, share = round(apply(tab, 1, max) / rowSums(tab), 2)),
      row.names = FALSE)
cat(sprintf("purity (share of images in their cluster's main class): %.1f%%\n", 100 * purity))

# Recutting is cheap: no densities are recomputed.
t0 <- proc.time()[["elapsed"]]
five <- dpc_clusters(fit, k = 5)
cat(sprintf("recut into 5 clusters in %.2f s: sizes %s\n", proc.time()[["elapsed"]] - t0,
            paste(tabulate(five$clusters), collapse = " ")))

out <- Sys.getenv("GPUML_DEMO_PLOT", if (dir.exists("build")) "build/dpc_demo.pdf" else
                  file.path(tempdir(), "dpc_demo.pdf"))
grDevices::pdf(out, width = 10, height = 5)
graphics::par(mfrow = c(1, 2))
plot(fit)
plot(fit, type = "clusters")
invisible(grDevices::dev.off())
cat(sprintf("decision graph and clusters drawn to %s\n", out))
