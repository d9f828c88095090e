## -*- texinfo -*-
## @deftypefn  {} {[@var{x}, @var{labels}] =} read_fashion_mnist ()
## @deftypefnx {} {[@var{x}, @var{labels}] =} read_fashion_mnist (@var{path}, @var{subset}, @var{n})
## Read Fashion-MNIST (Xiao, Rasul and Vollgraf 2017) from its IDX files, plain or
## gzipped, as Debian's dataset-fashion-mnist package installs them.
##
## @var{path} is the folder (default @qcode{"/usr/share/datasets/fashion-mnist"}),
## @var{subset} @qcode{"train"} (60,000 images, the default) or @qcode{"test"} (10,000),
## @var{n} the number of images to read (default all).  @var{x} is n x 784 (double,
## pixel values 0 to 255, one image a row), @var{labels} the classes 0 to 9 (n x 1):
## T-shirt/top, Trouser, Pullover, Dress, Coat, Sandal, Shirt, Sneaker, Bag, Ankle boot.
## @seealso{gpu_knn, gpu_tsne}
## @end deftypefn

function [x, labels] = read_fashion_mnist (path = "/usr/share/datasets/fashion-mnist",
                                           subset = "train", n = Inf)
  if (! ischar (path) || ! isrow (path))
    error ("gpuml:badArgument", "read_fashion_mnist: PATH must be a folder name");
  endif
  switch (subset)
    case "train"
      stem = "train";
    case "test"
      stem = "t10k";
    otherwise
      error ("gpuml:badArgument", "read_fashion_mnist: SUBSET must be \"train\" or \"test\"");
  endswitch
  if (! (isnumeric (n) && isscalar (n) && n >= 1 && (isinf (n) || n == fix (n))))
    error ("gpuml:badArgument", "read_fashion_mnist: N must be a positive whole number");
  endif
  [x, dims] = read_idx (idx_file (path, [stem "-images-idx3-ubyte"]), n);
  x = reshape (x, dims(2) * dims(3), [])';
  if (nargout > 1)
    labels = read_idx (idx_file (path, [stem "-labels-idx1-ubyte"]), n);
    if (numel (labels) != rows (x))
      error ("gpuml:badData", "read_fashion_mnist: %d images but %d labels", rows (x),
             numel (labels));
    endif
  endif
endfunction

function file = idx_file (path, name)
  for f = {fullfile(path, [name ".gz"]), fullfile(path, name)}
    if (exist (f{1}, "file"))
      file = f{1};
      return;
    endif
  endfor
  error ("gpuml:noData", ["read_fashion_mnist: %s(.gz) not found in %s: install ", ...
                          "Debian's dataset-fashion-mnist package or pass the folder"], name, path);
endfunction

## The first n items of an IDX file of unsigned bytes (a column), and its dimensions.
function [v, dims] = read_idx (file, n)
  tmp = "";
  if (numel (file) > 3 && strcmp (file(end-2:end), ".gz"))
    tmp = tempname ();
    mkdir (tmp);
    out = gunzip (file, tmp);
    file = out{1};
  endif
  unwind_protect
    fid = fopen (file, "r", "ieee-be");
    if (fid < 0)
      error ("gpuml:noData", "read_fashion_mnist: cannot open %s", file);
    endif
    unwind_protect
      magic = fread (fid, 4, "uint8")';
      if (numel (magic) != 4 || any (magic(1:3) != [0 0 8]))
        error ("gpuml:badData", "read_fashion_mnist: %s is not an IDX file of bytes", file);
      endif
      dims = fread (fid, magic(4), "uint32")';
      count = min (dims(1), n);
      v = fread (fid, count * prod (dims(2:end)), "uint8=>double");
      if (numel (v) != count * prod (dims(2:end)))
        error ("gpuml:badData", "read_fashion_mnist: %s is truncated", file);
      endif
    unwind_protect_cleanup
      fclose (fid);
    end_unwind_protect
  unwind_protect_cleanup
    if (! isempty (tmp))
      confirm_recursive_rmdir (false, "local");
      rmdir (tmp, "s");
    endif
  end_unwind_protect
endfunction

%!test
%! fm = "/usr/share/datasets/fashion-mnist";
%! if (exist (fullfile (fm, "t10k-labels-idx1-ubyte.gz"), "file"))
%!   [x, y] = read_fashion_mnist (fm, "test", 50);
%!   assert (size (x), [50, 784]);
%!   assert (size (y), [50, 1]);
%!   assert (all (y >= 0 & y <= 9));
%!   assert (min (x(:)) >= 0 && max (x(:)) <= 255);
%! endif
%!error <SUBSET> read_fashion_mnist ("/tmp", "validation")
%!error <not found> read_fashion_mnist (tempname ())
