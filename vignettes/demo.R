# gpuml's main demo (`make demo`): 10-NN classification of the Fashion-MNIST test set
# (10,000 images) from the training set (60,000), after PCA to 50 dimensions.
suppressPackageStartupMessages(library(gpuml))
print(gpuml_info())

t0 <- proc.time()[["elapsed"]]
train <- read_fashion_mnist(subset = "train")
test <- read_fashion_mnist(subset = "test")
cat(sprintf("read %d training and %d test images (%d pixels) in %.1f s\n",
            nrow(train$x), nrow(test$x), ncol(train$x), proc.time()[["elapsed"]] - t0))

# PCA from the training set alone: the top 50 eigenvectors of the pixel covariance.
t0 <- proc.time()[["elapsed"]]
centre <- colMeans(train$x)
scatter <- crossprod(sweep(train$x, 2, centre))
rotation <- eigen(scatter, symmetric = TRUE)$vectors[, 1:50]
train_pc <- sweep(train$x, 2, centre) %*% rotation
test_pc <- sweep(test$x, 2, centre) %*% rotation
cat(sprintf("PCA to 50 dimensions in %.1f s\n", proc.time()[["elapsed"]] - t0))

t0 <- proc.time()[["elapsed"]]
nn <- gpu_knn(train_pc, test_pc, k = 10)
knn_time <- proc.time()[["elapsed"]] - t0

# Majority vote over the 10 neighbours' labels; ties go to the nearer neighbour's label.
votes <- matrix(as.integer(train$y)[nn$nn.index], nrow = nrow(nn$nn.index))
predicted <- apply(votes, 1, function(v) {
  counts <- tabulate(v, nbins = nlevels(train$y))
  best <- which(counts == max(counts))
  v[match(TRUE, v %in% best)]
})
accuracy <- mean(predicted == as.integer(test$y))
cat(sprintf("10-NN on %d x 50 against %d x 50: %.2f s on backend \"%s\"\n",
            nrow(test_pc), nrow(train_pc), knn_time, nn$backend))
cat(sprintf("test accuracy: %.2f%%\n", 100 * accuracy))
print(table(predicted = factor(levels(train$y)[predicted], levels(train$y)),
            actual = test$y)[, 1:5])
