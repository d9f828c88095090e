## demo_dpc.m: density peaks clustering of the Fashion-MNIST test images with gpuml, in
## GNU Octave.
##
## Reads the 10,000 test images (Debian's dataset-fashion-mnist), projects them on
## their first 20 principal components, clusters them into 10 clusters with gpu_dpc,
## prints each cluster's main class, recuts into 5 clusters with gpu_dpc_clusters, and
## draws the decision graph to a PNG file.
##
## Run from the repository root after `make`:
##
##   octave --no-gui --norc -q vignettes/demo_dpc.m
##
## Environment variables:
##   GPUML_FASHION_MNIST  directory of the .gz files (default /usr/share/datasets/fashion-mnist)
##   GPUML_DEMO_BACKEND   "auto" (default), "cpu" or "cuda"
##   GPUML_DEMO_PLOT      the PNG file (default build/dpc_decision_graph.png)

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
data_dir = env_or ("GPUML_FASHION_MNIST", "/usr/share/datasets/fashion-mnist");
backend = env_or ("GPUML_DEMO_BACKEND", "auto");
plot_file = env_or ("GPUML_DEMO_PLOT", fullfile (root, "build", "dpc_decision_graph.png"));
classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", ...
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

rand ("state", 1);  # the dc estimate samples 2,000 of the 10,000 points
t0 = tic ();
[X, labels] = read_fashion_mnist (data_dir, "test");
X = X - mean (X, 1);
[V, L] = eig (X' * X);
[~, order] = sort (diag (L), "descend");
PC = X * V(:, order(1:20));
printf ("read and projected %d images on 20 principal components in %.1f s\n",
        rows (PC), toc (t0));

t0 = tic ();
[clusters, info] = gpu_dpc (PC, "k", 10, "backend", backend);
printf ("density peaks (dc = %.4g, 10 clusters, halo): %.2f s on backend \"%s\"\n",
        info.dc, toc (t0), info.backend);
counts = accumarray ([clusters, labels + 1], 1, [10, 10]);
[share, main] = max (counts, [], 2);
printf ("\n cluster   size   halo   main class    share\n");
for c = 1:10
  printf (" %7d %6d %6d   %-12s %5.2f\n", c, sum (counts(c,:)),
          sum (info.halo(clusters == c)), classes{main(c)}, share(c) / sum (counts(c,:)));
endfor
printf ("purity: %.1f%%\n", 100 * sum (share) / rows (PC));

t0 = tic ();
five = gpu_dpc_clusters (PC, info, "k", 5);
printf ("recut into 5 clusters in %.2f s: sizes %s\n", toc (t0),
        num2str (accumarray (five, 1)'));

if (isempty (available_graphics_toolkits ()))
  printf ("no graphics toolkit in this Octave: the decision graph is not drawn\n");
else
  h = figure ("visible", "off");
  plot (info.rho, info.delta, ".", "color", [0.5 0.5 0.5]);
  hold on;
  plot (info.rho(info.peaks), info.delta(info.peaks), "o", "markersize", 8,
        "markerfacecolor", "r");
  xlabel ("rho (local density)");
  ylabel ("delta (distance to a denser point)");
  title ("Decision graph: Fashion-MNIST test set, 20 principal components");
  try
    print (h, plot_file, "-dpng");
    printf ("decision graph drawn to %s\n", plot_file);
  catch err
    printf ("could not draw the decision graph (%s)\n", err.message);
  end_try_catch
  close (h);
endif
