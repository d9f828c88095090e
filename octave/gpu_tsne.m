## -*- texinfo -*-
## @deftypefn  {} {@var{Y} =} gpu_tsne (@var{X})
## @deftypefnx {} {@var{Y} =} gpu_tsne (@var{X}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{Y}, @var{info}] =} gpu_tsne (@dots{})
## t-SNE embedding of the rows of @var{X} in 1, 2 or 3 dimensions, on the GPU when
## there is one and on the CPU (OpenMP) otherwise.
##
## The affinities come from each point's exact 3 * perplexity nearest neighbours
## (a Gaussian bisected to the perplexity, symmetrised, kept sparse).  The
## repulsion is exact (all pairs; on the CPU each pair in single precision, summed
## in double) for small data and computed by FFT-accelerated interpolation
## (Linderman et al., 2019), linear in the number of points, for large data.  The optimisation is the reference one: early exaggeration,
## momentum, gains, step-length limit.  The same data, options, seed and backend
## give exactly the same @var{Y}.
##
## @strong{Input}
##
## @table @var
## @item X
## @var{n}-by-@var{d} matrix, one point per row (at least 4), finite values.
## Integer, logical and single matrices are computed in double; @var{Y} has the
## class of @var{X} (single in, single out).
## @end table
##
## @strong{Options} (name/value pairs, names case-insensitive)
##
## @table @asis
## @item @qcode{"dims"}
## 1, 2 (default) or 3.
## @item @qcode{"perplexity"}
## Default 30; 3 * perplexity must not exceed @var{n} - 1.  A vector (up to 8
## values) gives multiscale affinities: the mean of each perplexity's, over the
## 3 * max (perplexity) nearest neighbours.
## @item @qcode{"max_iter"}
## Iterations, default 1000.
## @item @qcode{"pca"}, @qcode{"initial_dims"}
## When @code{pca} is true (default) and @var{X} has more than
## @code{initial_dims} (default 50) columns, reduce it to that many principal
## components first.
## @item @qcode{"init"}
## @qcode{"pca"} (default: the first principal components scaled to standard
## deviation 1e-4), @qcode{"random"} or an @var{n}-by-@code{dims} matrix.
## @item @qcode{"learning_rate"}
## @qcode{"auto"} (default: max (200, @var{n} / 12)) or a positive number; it
## applies to a quarter of the gradient of the KL divergence, as in Rtsne.
## @item @qcode{"exaggeration"}, @qcode{"stop_lying_iter"}
## P is multiplied by @code{exaggeration} (default 12) for the first
## @code{stop_lying_iter} (default 250) iterations.
## @item @qcode{"method"}
## @qcode{"auto"} (default: exact up to 10000 points, FFT above),
## @qcode{"exact"} or @qcode{"fft"}.
## @item @qcode{"seed"}
## A whole number for the random initialisation; @code{[]} (default) draws one
## from @code{rand}, so that @code{rand ("seed", @dots{})} decides the result.
## @item @qcode{"momentum"}, @qcode{"final_momentum"}, @qcode{"mom_switch_iter"}
## 0.5, then 0.8 from iteration 250.
## @item @qcode{"max_step_norm"}
## The farthest a point moves in one iteration (default 5; 0: no limit).
## @item @qcode{"is_distance"}
## @code{true}: @var{X} is a square matrix of distances; each point's
## 3 * perplexity nearest others give the affinities ("pca" init starts at random).
## @item @qcode{"nn_index"}, @qcode{"nn_dist"}
## Instead of @var{X} (give @code{[]}), each point's neighbours (1-based, the point
## left out) and their distances, @var{n}-by-@var{k} as @code{gpu_knn} returns
## them; @var{k} must be at least 3 * perplexity.
## @item @qcode{"df"}
## Degrees of freedom of the heavy-tailed output kernel (Kobak et al., 2019),
## q_ij ~ (1 + |y_i - y_j|^2 / df)^(-df): 1 (default) is the usual t-SNE kernel,
## smaller values (e.g. 0.5) give heavier tails and finer clusters.  Positive.
## @item @qcode{"backend"}
## @qcode{"auto"} (default), @qcode{"cpu"} or @qcode{"cuda"}.
## @item @qcode{"verbose"}
## @code{true} prints each stage and, every 50 iterations, the KL divergence.
## @item @qcode{"devices"}
## The CUDA devices to spread the optimisation over: @code{[]} (default: one device),
## device numbers such as @code{[0 1]}, or @qcode{"all"}. The neighbours and P are built
## on the first device; each device moves a block of the points while holding all their
## places, and the embedding is one device's, bit for bit. On the CPU backend the list is
## checked and then ignored.
## @end table
##
## @strong{Outputs}
##
## @table @var
## @item Y
## @var{n}-by-@code{dims} embedding (centred).
## @item info
## Struct with fields @code{itercosts} (KL divergence after iterations 50, 100,
## @dots{} and the last), @code{costs_at} (those iterations), @code{backend},
## @code{method}, @code{learning_rate}, @code{neighbours}, @code{seed} and
## @code{seconds} (affinities, optimisation).
## @end table
##
## Press Ctrl-C to interrupt a long run.
##
## @strong{Example}
##
## @example
## @group
## X = [randn(100, 10); randn(100, 10) + 8];
## [Y, info] = gpu_tsne (X, "perplexity", 20, "max_iter", 300);
## plot (Y(:,1), Y(:,2), ".");
## info.itercosts(end)    # the final KL divergence
## @end group
## @end example
##
## @seealso{gpu_knn, gpuml_info}
## @end deftypefn

function [Y, info] = gpu_tsne (X, varargin)

  if (nargin < 1)
    print_usage ();
  endif
  defaults = struct ("dims", 2, "perplexity", 30, "max_iter", 1000, "pca", true,
                     "initial_dims", 50, "init", "pca", "learning_rate", "auto",
                     "exaggeration", 12, "stop_lying_iter", 250, "method", "auto",
                     "seed", [], "verbose", false, "backend", "auto", "momentum", 0.5,
                     "final_momentum", 0.8, "mom_switch_iter", 250, "max_step_norm", 5,
                     "df", 1, "is_distance", false, "nn_index", [], "nn_dist", [],
                     "devices", []);
  [opts, given] = gpuml_parse_options ("gpu_tsne", defaults, varargin);
  out_single = isa (X, "single");
  if ((isnumeric (X) || islogical (X)) && ! issparse (X) && ! iscomplex (X))
    X = double (X);
  endif
  ## the parameters the user gave go to the core by name (it holds the defaults); the
  ## seed, backend and verbosity are options of the call, a start matrix its own argument
  params = {};
  init_y = [];
  for i = 1:2:numel (given)
    switch (given{i})
      case {"seed", "verbose", "backend", "is_distance", "nn_index", "nn_dist", "devices"}
      case "init"
        if (ischar (given{i+1}))
          params(end+1:end+2) = given(i:i+1);
        elseif (isnumeric (given{i+1}) || islogical (given{i+1}))
          init_y = double (given{i+1});
        else
          error ("gpuml:tsne:badInit", "gpu_tsne: init must be \"pca\", \"random\" or a matrix");
        endif
      case "perplexity"
        if (isnumeric (given{i+1}) && numel (given{i+1}) > 1)
          params(end+1:end+2) = {"perplexities", given{i+1}};  # multiscale
        else
          params(end+1:end+2) = given(i:i+1);
        endif
      otherwise
        params(end+1:end+2) = given(i:i+1);
    endswitch
  endfor
  ## the input: data, a distance matrix, or neighbour lists (then X is [])
  input = "data";
  nn_dist = [];
  if (! isempty (opts.nn_index) || ! isempty (opts.nn_dist))
    if (isempty (opts.nn_index) || isempty (opts.nn_dist))
      error ("gpuml:tsne:badNeighbours",
             "gpu_tsne: nn_index and nn_dist must be given together (as gpu_knn returns them)");
    endif
    input = "neighbours";
    X = double (opts.nn_index);
    nn_dist = double (opts.nn_dist);
  elseif (opts.is_distance)
    input = "distance";
  endif
  seed = gpuml_seed (opts.seed);
  try
    [Y, costs, backend, method, eta, k, seconds, costs_at] = ...
      gpuml_tsne_mex (X, params, init_y, seed, opts.backend, opts.verbose, input, nn_dist,
                      opts.devices);
  catch err
    gpuml_rethrow (err, "gpu_tsne", "gpuml_tsne_mex");
  end_try_catch
  if (out_single)
    Y = single (Y);
  endif
  info = struct ("itercosts", costs,
                 "costs_at", costs_at,
                 "backend", backend, "method", method, "learning_rate", eta,
                 "neighbours", k, "seed", seed, "seconds", seconds);

endfunction


%!shared B
%! B = getenv ("GPUML_TEST_BACKEND");
%! if (isempty (B))
%!   B = "auto";
%! endif

## Three separated blobs and a 1-NN check in the embedding.
%!function [X, labels] = blobs (n_each, d)
%!  randn ("state", 1);
%!  X = [randn(n_each, d); randn(n_each, d); randn(n_each, d)];
%!  X(n_each+1:2*n_each, 1) += 12;
%!  X(2*n_each+1:end, 2) += 12;
%!  labels = kron ((1:3)', ones (n_each, 1));
%!endfunction
%!function acc = one_nn_accuracy (Y, labels)
%!  idx = gpu_knn (double (Y), [], 1, "backend", "cpu");
%!  acc = mean (labels(idx) == labels);
%!endfunction

## structure, separation, KL going down
%!test
%! [X, labels] = blobs (40, 8);
%! [Y, info] = gpu_tsne (X, "perplexity", 15, "max_iter", 500, "backend", B);
%! assert (size (Y), [120 2]);
%! assert (class (Y), "double");
%! assert (all (isfinite (Y(:))));
%! assert (abs (mean (Y)) < 1e-10);
%! assert (one_nn_accuracy (Y, labels), 1);
%! assert (numel (info.itercosts), 10);
%! assert (info.costs_at', 50:50:500);
%! assert (info.itercosts(10) < info.itercosts(5));
%! assert (info.method, "exact");
%! assert (info.learning_rate, 200);
%! assert (info.neighbours, 45);
%! assert (any (strcmp (info.backend, {"cpu", "cuda"})));
%! assert (size (info.seconds), [1 2]);

## the FFT method, 1 and 3 dimensions, a single input
%!test
%! [X, labels] = blobs (40, 8);
%! [Y, info] = gpu_tsne (single (X), "perplexity", 15, "max_iter", 300, "method", "fft",
%!                       "stop_lying_iter", 100, "mom_switch_iter", 100, "backend", B);
%! assert (class (Y), "single");
%! assert (info.method, "fft");
%! assert (one_nn_accuracy (Y, labels), 1);
%! Y = gpu_tsne (X, "dims", 1, "perplexity", 15, "max_iter", 500, "backend", B);
%! assert (size (Y), [120 1]);
%! Y = gpu_tsne (X, "dims", 3, "perplexity", 15, "max_iter", 500, "backend", B);
%! assert (size (Y), [120 3]);
%! assert (one_nn_accuracy (Y, labels), 1);

## reproducible: a seed, or the state of rand
%!test
%! X = blobs (30, 5);
%! a = gpu_tsne (X, "perplexity", 10, "max_iter", 60, "init", "random", "seed", 3, "backend", B);
%! b = gpu_tsne (X, "perplexity", 10, "max_iter", 60, "init", "random", "seed", 3, "backend", B);
%! c = gpu_tsne (X, "perplexity", 10, "max_iter", 60, "init", "random", "seed", 4, "backend", B);
%! assert (isequal (a, b));
%! assert (! isequal (a, c));
%! rand ("seed", 5);  a = gpu_tsne (X, "perplexity", 10, "max_iter", 60, "init", "random", "backend", B);
%! rand ("seed", 5);  b = gpu_tsne (X, "perplexity", 10, "max_iter", 60, "init", "random", "backend", B);
%! assert (isequal (a, b));

## a user start; duplicated points
%!test
%! X = blobs (30, 5);
%! start = reshape (linspace (-1, 1, 180), 90, 2);
%! Y = gpu_tsne (X, "perplexity", 10, "max_iter", 1, "init", start, "learning_rate", 1e-12);
%! assert (Y, start - mean (start), 1e-9);
%! Y = gpu_tsne ([X; repmat(X(1,:), 20, 1)], "perplexity", 10, "max_iter", 100);
%! assert (all (isfinite (Y(:))));

## verbose prints the KL every 50 iterations
%!test
%! X = blobs (30, 5);
%! out = evalc ('gpu_tsne (X, "perplexity", 10, "max_iter", 100, "verbose", true);');
%! assert (! isempty (strfind (out, "iteration 50/100, KL divergence")));
%! assert (! isempty (strfind (out, "iteration 100/100")));
%! out = evalc ('gpu_tsne (X, "perplexity", 10, "max_iter", 20);');
%! assert (isempty (out));

## bad input
%!error <perplexity = 30 is too large for 20 points> gpu_tsne (rand (20, 3))
%!error id=gpuml:tsne:badPerplexity gpu_tsne (rand (20, 3), "perplexity", 7)
%!error id=gpuml:tsne:badPerplexity gpu_tsne (rand (20, 3), "perplexity", 0)
%!error id=gpuml:tsne:tooFewPoints gpu_tsne (rand (3, 3), "perplexity", 1)
%!error id=gpuml:tsne:nonFinite gpu_tsne ([rand(20, 3); NaN 1 1], "perplexity", 5)
%!error <contains Inf at row 2, column 3> gpu_tsne ([rand(1, 3); 1 1 Inf; rand(20, 3)], "perplexity", 5)
%!error id=gpuml:tsne:badDims gpu_tsne (rand (20, 3), "perplexity", 5, "dims", 4)
%!error id=gpuml:tsne:badDims gpu_tsne (rand (20, 3), "perplexity", 5, "dims", 0)
%!error id=gpuml:tsne:badParameter gpu_tsne (rand (20, 3), "perplexity", 5, "method", "bh")
%!error id=gpuml:tsne:badParameter gpu_tsne (rand (20, 3), "perplexity", 5, "init", "spectral")
%!error id=gpuml:tsne:badInit gpu_tsne (rand (20, 3), "perplexity", 5, "init", zeros (19, 2))
%!error id=gpuml:tsne:badInit gpu_tsne (rand (20, 3), "perplexity", 5, "init", [zeros(19, 2); NaN 0])
%!error id=gpuml:tsne:badParameter gpu_tsne (rand (20, 3), "perplexity", 5, "max_iter", 0)
%!error id=gpuml:tsne:badDf gpu_tsne (rand (20, 3), "perplexity", 5, "df", 0)
%!error id=gpuml:tsne:badDistance gpu_tsne (rand (20, 19), "perplexity", 5, "is_distance", true)
%!error id=gpuml:tsne:badNeighbours gpu_tsne ([], "nn_index", ones (20, 15), "perplexity", 5)

## multiscale perplexities
%!test
%! [X, labels] = blobs (40, 8);
%! [Y, info] = gpu_tsne (X, "perplexity", [5 15], "max_iter", 500, "backend", B);
%! assert (info.neighbours, 45);
%! assert (one_nn_accuracy (Y, labels), 1);

## distances and neighbour lists give the data's embedding
%!test
%! X = blobs (30, 5);
%! args = {"perplexity", 10, "max_iter", 100, "init", "random", "seed", 3, "backend", B};
%! Y = gpu_tsne (X, args{:});
%! D = gpu_dist (X, "backend", "cpu");
%! assert (gpu_tsne (D, "is_distance", true, args{:}), Y, 1e-6 * max (abs (Y(:))));
%! [idx, dist] = gpu_knn (X, [], 30, "backend", "cpu");
%! assert (isequal (gpu_tsne ([], "nn_index", idx, "nn_dist", dist, args{:}), Y));
%!error id=gpuml:tsne:badDf gpu_tsne (rand (20, 3), "perplexity", 5, "df", -1)
%!error id=gpuml:tsne:badParameter gpu_tsne (rand (20, 3), "perplexity", 5, "momentum", 1)
%!error id=gpuml:badSeed gpu_tsne (rand (20, 3), "perplexity", 5, "seed", -1)
%!error id=gpuml:tsne:badParameter gpu_tsne (rand (20, 3), "perplexity", 5, "learning_rate", "fast")
%!error id=gpuml:tsne:badParameter gpu_tsne (rand (20, 3), "perplexity", "high")
%!error id=gpuml:badOption gpu_tsne (rand (20, 3), "theta", 0.5)
%!error id=gpuml:badBackend gpu_tsne (rand (20, 3), "perplexity", 5, "backend", "gpu")
%!error id=gpuml:tsne:badType gpu_tsne ({1, 2})
%!error <Invalid call> gpu_tsne ()

## devices: checked by the core, ignored on the CPU; the optimiser over shards
## (GPUML_SHARDS, the development knob that stands for several devices) gives one
## shard's embedding bit for bit
%!error <listed twice> gpu_tsne (rand (40, 3), "perplexity", 5, "backend", "cpu", "devices", [1 1])
%!test
%! randn ("seed", 3);
%! X = [randn(100, 4); randn(100, 4) + 5];
%! [Y1, i1] = gpu_tsne (X, "perplexity", 10, "max_iter", 100, "seed", 2, "backend", B);
%! unwind_protect
%!   setenv ("GPUML_SHARDS", "3");
%!   [Y2, i2] = gpu_tsne (X, "perplexity", 10, "max_iter", 100, "seed", 2, "backend", B,
%!                        "devices", "all");
%! unwind_protect_cleanup
%!   unsetenv ("GPUML_SHARDS");
%! end_unwind_protect
%! assert (isequal (Y2, Y1) && isequal (i2.itercosts, i1.itercosts));
