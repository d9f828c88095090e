## demo_gmm.m: Gaussian mixture models with gpuml, in GNU Octave.
##
## Fits mixtures of 1 to 6 components to three simulated clusters and keeps the
## number of components of largest BIC, then clusters the 10,000 Fashion-MNIST test
## images, projected on their first ten principal components, into ten components
## and compares the components with the kinds of clothing.
##
## Run from the repository root after `make`:
##
##   octave --no-gui --norc -q vignettes/demo_gmm.m
##
## Environment variables:
##   GPUML_FASHION_MNIST  directory of the .gz files
##                        (default /usr/share/datasets/fashion-mnist)
##   GPUML_DEMO_BACKEND   "auto" (default), "cpu" or "cuda"
##
## About 5 s on 2 CPU cores without a GPU.

1;  # a script file, not a function file

function v = env_or (name, default)
  v = getenv (name);
  if (isempty (v))
    v = default;
  endif
endfunction

here = fileparts (mfilename ("fullpath"));
root = fileparts (here);
## gpuml is an Octave package: `make install` installs it for everyone (make demo runs
## this with the tree's own build loaded)
if (! exist ("gpu_knn"))
  pkg load gpuml
endif
backend = env_or ("GPUML_DEMO_BACKEND", "auto");

## ---- Three clusters: BIC chooses the number of components ------------------------

randn ("state", 1);
X = [randn(300, 2) * [1 0.6; 0 0.5];
     randn(200, 2) * 0.7 + [5 3];
     randn(250, 2) * [0.5 0; -0.4 1.2] + [-1 6]];
truth = [ones(300, 1); 2 * ones(200, 1); 3 * ones(250, 1)];
t0 = tic ();
[labels, model] = gpu_gmm (X, 1:6, "seed", 1, "backend", backend);
printf ("three clusters: BIC by K = %s -> K = %d (%.2f s on %s)\n",
        mat2str (round (model.bic)), model.G, toc (t0), model.backend);
disp (accumarray ([truth labels], 1));
printf ("component means:\n");
disp (model.means);

## ---- Fashion-MNIST test images in ten principal components -----------------------

data_dir = env_or ("GPUML_FASHION_MNIST", "/usr/share/datasets/fashion-mnist");
images_file = fullfile (data_dir, "t10k-images-idx3-ubyte.gz");
if (! exist (images_file, "file"))
  printf ("Fashion-MNIST not found in %s: skipping that part\n", data_dir);
  return;
endif
[images, classes] = read_fashion_mnist (data_dir, "test");
images = images / 255;
classes = classes + 1;
images = images - mean (images, 1);
[V, L] = eig (images' * images);
[~, order] = sort (diag (L), "descend");
pc = images * V(:, order(1:10));
t0 = tic ();
[labels, model] = gpu_gmm (pc, 10, "seed", 1, "tol", 1e-6, "backend", backend);
printf ("\nFashion-MNIST, 10,000 x 10: %d components in %.1f s on %s, %d iterations\n",
        model.G, toc (t0), model.backend, model.n_iter);
names = {"T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", ...
         "Sneaker", "Bag", "Boot"};
tab = accumarray ([classes labels], 1, [10 model.G]);
printf ("%-9s %s\n", "", sprintf ("%6d", 1:model.G));
for c = 1:10
  printf ("%-9s %s\n", names{c}, sprintf ("%6d", tab(c,:)));
endfor
