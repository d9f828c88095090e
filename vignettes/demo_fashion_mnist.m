## demo_fashion_mnist.m: 10-nearest-neighbour classification of Fashion-MNIST with
## gpuml, in GNU Octave.
##
## Reads the 60,000 training and 10,000 test images (28 x 28, gzipped IDX files of
## Debian's dataset-fashion-mnist), projects them on the first 50 principal
## components of the training set, finds the 10 nearest training images of every
## test image with gpu_knn, and classifies each test image by majority vote.
##
## Run from the repository root after `make`:
##
##   octave --no-gui --norc -q vignettes/demo_fashion_mnist.m
##
## Environment variables:
##   GPUML_FASHION_MNIST  directory of the four .gz files
##                        (default /usr/share/datasets/fashion-mnist)
##   GPUML_DEMO_BACKEND   "auto" (default), "cpu" or "cuda"
##   GPUML_DEMO_NTRAIN, GPUML_DEMO_NTEST  use the first N images only (default: all)
##
## The whole data set (60,000 training x 10,000 test images) takes 6-20 s on 2 CPU
## cores without a GPU (the kNN search 3-14 s, depending on the machine's load), so
## no subset is needed.  Expected test accuracy: 85.9%.

1;  # a script file, not a function file

function v = env_or (name, default)
  v = getenv (name);
  if (isempty (v))
    v = default;
  endif
endfunction

## ---- Set-up ---------------------------------------------------------------------

here = fileparts (mfilename ("fullpath"));
root = fileparts (here);
## gpuml is an Octave package: `make install` installs it for everyone (make demo runs
## this with the tree's own build loaded)
if (! exist ("gpu_knn"))
  pkg load gpuml
endif

data_dir = env_or ("GPUML_FASHION_MNIST", "/usr/share/datasets/fashion-mnist");
backend = env_or ("GPUML_DEMO_BACKEND", "auto");
ntrain = str2double (env_or ("GPUML_DEMO_NTRAIN", "Inf"));
ntest = str2double (env_or ("GPUML_DEMO_NTEST", "Inf"));
classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", ...
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
k = 10;
ncomp = 50;

info = gpuml_info ();
printf ("gpuml %s: ", info.version);
if (info.device_count > 0)
  printf ("GPU %s\n", info.device_name);
else
  printf ("no GPU (%s); CPU with %d OpenMP threads\n", info.cuda_message, info.max_threads);
endif

## ---- Data -----------------------------------------------------------------------

t_start = tic ();
t0 = tic ();
[train, train_labels] = read_fashion_mnist (data_dir, "train", ntrain);
[test, test_labels] = read_fashion_mnist (data_dir, "test", ntest);
printf ("read %d training and %d test images of %d pixels in %.1f s\n",
        rows (train), rows (test), columns (train), toc (t0));

## ---- PCA to 50 dimensions (eigenvectors of the training covariance) -------------

t0 = tic ();
train = double (train) / 255;
test = double (test) / 255;
mu = mean (train, 1);
train = train - mu;
test = test - mu;
C = (train' * train) / (rows (train) - 1);
[V, L] = eig ((C + C') / 2);
[ev, order] = sort (diag (L), "descend");
V = V(:, order(1:ncomp));
train_pc = train * V;
test_pc = test * V;
printf ("PCA: %d components keep %.1f%% of the variance (%.1f s)\n",
        ncomp, 100 * sum (ev(1:ncomp)) / sum (ev), toc (t0));
clear train test C

## ---- 10-NN classification ---------------------------------------------------------

t0 = tic ();
[idx, dist, knn_info] = gpu_knn (train_pc, test_pc, k, "backend", backend);
knn_time = toc (t0);

## Majority vote; a tie between classes goes to the one with the nearer neighbour
## (each vote also carries a weight below 1/k that decreases with the rank).
votes = zeros (rows (test_pc), numel (classes));
neighbour_labels = train_labels(idx);
if (isrow (neighbour_labels))  # one test image
  neighbour_labels = neighbour_labels(:)';
endif
for j = 1:k
  at = sub2ind (size (votes), (1:rows (votes))', neighbour_labels(:,j) + 1);
  votes(at) += 1 + (k - j + 1) / (k * (k + 1));
endfor
[~, predicted] = max (votes, [], 2);
predicted -= 1;
accuracy = mean (predicted == test_labels);

printf ("%d-NN search of %d test images among %d training images (%d dimensions): ",
        k, rows (test_pc), rows (train_pc), ncomp);
printf ("%.2f s on backend \"%s\"\n", knn_time, knn_info.backend);
printf ("test accuracy: %.2f%% (%.1f s in all)\n", 100 * accuracy, toc (t_start));

printf ("\nper class:\n");
for c = 0:numel (classes) - 1
  in_class = test_labels == c;
  printf ("  %-12s %6.2f%%  (%d images)\n", classes{c + 1},
          100 * mean (predicted(in_class) == c), sum (in_class));
endfor
