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

function x = read_idx_gz (file)
  ## One gzipped IDX file of unsigned bytes, as a column vector.
  tmp = tempname ();
  mkdir (tmp);
  unwind_protect
    out = gunzip (file, tmp);
    fid = fopen (out{1}, "r", "ieee-be");
    if (fid < 0)
      error ("demo:read", "cannot open %s", out{1});
    endif
    unwind_protect
      magic = fread (fid, 4, "uint8")';
      if (numel (magic) != 4 || any (magic(1:3) != [0 0 8]))
        error ("demo:read", "%s is not an IDX file of unsigned bytes", file);
      endif
      dims = fread (fid, magic(4), "uint32")';
      x = fread (fid, prod (dims), "uint8=>double");
      if (numel (x) != prod (dims))
        error ("demo:read", "%s is truncated", file);
      endif
    unwind_protect_cleanup
      fclose (fid);
    end_unwind_protect
  unwind_protect_cleanup
    confirm_recursive_rmdir (false, "local");
    rmdir (tmp, "s");
  end_unwind_protect
endfunction

function v = env_or (name, default)
  v = getenv (name);
  if (isempty (v))
    v = default;
  endif
endfunction

here = fileparts (mfilename ("fullpath"));
root = fileparts (here);
for p = {fullfile(root, "octave"), fullfile(root, "build", "octave")}
  if (isfolder (p{1}))
    addpath (p{1});
  endif
endfor
if (! exist ("gpuml_dpc_mex"))
  error ("demo:build", "gpuml's MEX files were not found: run `make` first");
endif
data_dir = env_or ("GPUML_FASHION_MNIST", "/usr/share/datasets/fashion-mnist");
backend = env_or ("GPUML_DEMO_BACKEND", "auto");
plot_file = env_or ("GPUML_DEMO_PLOT", fullfile (root, "build", "dpc_decision_graph.png"));
classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", ...
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

rand ("state", 1);  # the dc estimate samples 2,000 of the 10,000 points
t0 = tic ();
X = reshape (read_idx_gz (fullfile (data_dir, "t10k-images-idx3-ubyte.gz")), 784, [])';
labels = read_idx_gz (fullfile (data_dir, "t10k-labels-idx1-ubyte.gz"));
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
