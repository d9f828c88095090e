## demo_tsne.m: t-SNE of Fashion-MNIST with gpuml, in GNU Octave.
##
## Embeds Fashion-MNIST images in two dimensions with gpu_tsne and writes the
## embedding (x, y, label) to a text file; when Octave has a graphics toolkit it
## also draws it coloured by label into a PNG.
##
## Run from the repository root after `make`:
##
##   octave --no-gui --norc -q vignettes/demo_tsne.m
##
## Environment variables:
##   GPUML_FASHION_MNIST  directory of the .gz files (default /usr/share/datasets/fashion-mnist)
##   GPUML_DEMO_BACKEND   "auto" (default), "cpu" or "cuda"
##   GPUML_DEMO_TSNE_N    images (default: 70,000 with a GPU, 10,000 on the CPU)
##   GPUML_DEMO_OUT       output stem (default build/tsne_fashion_mnist_octave)

1;  # a script file

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
info = gpuml_info ();
gpu = ! strcmp (backend, "cpu") && info.device_count > 0;
if (gpu)
  default_n = "70000";
else
  default_n = "10000";
endif
n = str2double (env_or ("GPUML_DEMO_TSNE_N", default_n));
stem = env_or ("GPUML_DEMO_OUT", fullfile (root, "build", "tsne_fashion_mnist_octave"));

t0 = tic ();
## IDX stores image after image: as 784 x N each column is one image.
[test_images, test_labels] = read_fashion_mnist (data_dir, "test");
[train_images, train_labels] = read_fashion_mnist (data_dir, "train");
images = [test_images; train_images];
labels = [test_labels; train_labels];
X = double (images(1:n,:)) / 255;
labels = double (labels(1:n));
printf ("read %d images in %.1f s\n", n, toc (t0));

[Y, tinfo] = gpu_tsne (X, "seed", 42, "backend", backend);
printf ("t-SNE: %s on %s, KL divergence %.4f, %.1f s (affinities %.1f s)\n", tinfo.method,
        tinfo.backend, tinfo.itercosts(end), sum (tinfo.seconds), tinfo.seconds(1));
idx = gpu_knn (Y, [], 10);
printf ("10-NN label accuracy in the embedding: %.1f%%\n",
        100 * mean (mode (labels(idx), 2) == labels));

dlmwrite ([stem ".txt"], [Y labels], " ");
printf ("wrote %s.txt\n", stem);
if (isempty (available_graphics_toolkits ()))
  printf ("no graphics toolkit in this Octave: no PNG\n");
else
  f = figure ("visible", "off");
  names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", ...
           "Sneaker", "Bag", "Ankle boot"};
  colours = gpuml_palette (10);
  hold on;
  for c = 0:9
    in = labels == c;
    scatter (Y(in,1), Y(in,2), 4, colours(c + 1, :), "filled");
  endfor
  hold off;
  legend (names, "location", "eastoutside");
  axis equal;
  title (sprintf ("Fashion-MNIST, %d images", n));
  print (f, [stem ".png"], "-dpng");
  printf ("wrote %s.png\n", stem);
endif
