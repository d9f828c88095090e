## -*- texinfo -*-
## @deftypefn  {} {@var{clusters} =} gpu_dpc (@var{X}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{clusters}, @var{info}] =} gpu_dpc (@dots{})
## Density peaks clustering (Rodriguez and Laio, 2014) of the rows of @var{X}, on the
## GPU when there is one and on the CPU (OpenMP) otherwise, with the same results.
##
## Each point gets a local density @var{rho} and the distance @var{delta} to the
## nearest point of higher density.  Cluster centres are the points where both are
## large; every other point joins the cluster of its nearest denser point.  The
## computation is exact and its memory grows linearly with the number of points:
## distances are computed on the fly, never stored as an @var{n}-by-@var{n} matrix.
##
## @strong{Inputs}
##
## @table @var
## @item X
## @var{n}-by-@var{d} matrix, one point per row, @var{n} >= 2.  Double, single,
## integer or logical (computed in double precision).  Values must be finite.
## @end table
##
## @strong{Options} (name/value pairs; names are case-insensitive)
##
## @table @asis
## @item @qcode{"dc"}
## The cutoff distance, a positive number.  Default @code{[]}: estimated as the 2%
## quantile of the pairwise distances (all pairs for @var{n} <= 2000, else the pairs
## among 2000 points drawn with @code{rand}), so that on average about 2% of the
## points lie within @var{dc} of a point.
##
## @item @qcode{"gaussian"}
## @code{false} (default): @var{rho}(i) counts the other points closer than @var{dc};
## @code{true}: @var{rho}(i) = sum over the other points of exp(-(d/@var{dc})^2).
##
## @item @qcode{"gaussian_cutoff"}
## The Gaussian kernel's truncation @var{c}, in units of @var{dc} (finite, >= 0;
## ignored by the cutoff kernel).  0 (default): the exact sum over all other points.
## @var{c} > 0: only the points closer than @var{c} * @var{dc} are summed; each dropped
## weight is below exp(-@var{c}^2) (@var{c} = 3: 1.2e-4), so every @var{rho}(i) is below
## the exact sum by at most the number of points it drops times exp(-@var{c}^2).  In up
## to 8 dimensions the truncated sum runs on the cell index instead of over all pairs.
##
## @item @qcode{"k"}
## The number of clusters: the @var{k} points of largest @var{gamma} = @var{rho} .*
## @var{delta} become the centres.
##
## @item @qcode{"rho"}, @qcode{"delta"}
## Thresholds: the points with @var{rho} > @qcode{rho} and @var{delta} >
## @qcode{delta} become the centres.  Give both, and not together with @qcode{"k"}.
## Without a selection only @var{info} is computed and @var{clusters} is @code{[]};
## choose the centres later with @code{gpu_dpc_clusters}.
##
## @item @qcode{"backend"}
## @qcode{"auto"} (default), @qcode{"cpu"} or @qcode{"cuda"}.
##
## @item @qcode{"verbose"}
## @code{true} to print the progress of each pass (default @code{false}).
##
## @item @qcode{"devices"}
## The CUDA devices to spread the density and delta passes over: @code{[]} (default:
## one device), device numbers such as @code{[0 1]}, or @qcode{"all"}. Each device holds
## all the points and computes a block of them; the fit is one device's, bit for bit.
## On the CPU backend the list is checked and then ignored.
## @end table
##
## @strong{Outputs}
##
## @table @var
## @item clusters
## @var{n}-by-1 cluster numbers 1 .. number of centres, or @code{[]} without a
## selection.  Centres are numbered by decreasing @var{gamma}.
##
## @item info
## Struct with fields @code{rho}, @code{delta}, @code{gamma} (@var{n}-by-1),
## @code{nearest} (@var{n}-by-1 row of the nearest denser point, NaN for the densest
## point), @code{dc}, @code{dc_estimated}, @code{gaussian}, @code{peaks} (rows of the
## centres), @code{halo} (@var{n}-by-1 logical: the halo or border points of the
## paper) and @code{backend} (the backend that ran).
## @end table
##
## "Denser" is a strict order: j is above i when @var{rho}(j) > @var{rho}(i), or the
## densities are equal and j < i.  @var{delta} of the densest point is its largest
## distance to any point.  The cutoff densities and the clusters are exactly the same
## on both backends.  Press Ctrl-C to interrupt a long run.
##
## @strong{Example}
##
## @example
## @group
## randn ("state", 1);
## X = [randn(200, 2); randn(200, 2) + 5; [randn(200, 1), randn(200, 1) + 7]];
## [clusters, info] = gpu_dpc (X, "k", 3);
## accumarray (clusters, 1)'
##   @result{} 200   200   200
## plot (info.rho, info.delta, ".", info.rho(info.peaks), info.delta(info.peaks), "o")
## @end group
## @end example
##
## @seealso{gpu_dpc_clusters, gpu_knn, gpu_dist}
## @end deftypefn

function [clusters, info] = gpu_dpc (X, varargin)

  if (nargin < 1)
    print_usage ();
  endif
  [X, params, opts] = gpuml_dpc_args ("gpu_dpc", X, varargin,
                                      struct ("seed", [], "backend", "auto",
                                              "verbose", false, "devices", []));
  try
    [rho, delta, nearest, gamma, dc, backend, peaks, clusters, halo] = ...
      gpuml_dpc_mex (X, params, gpuml_seed (opts.seed), opts.backend, opts.verbose,
                     opts.devices);
  catch err
    gpuml_rethrow (err, "gpu_dpc", "gpuml_dpc_mex");
  end_try_catch
  info = struct ("rho", rho, "delta", delta, "nearest", nearest, "gamma", gamma,
                 "dc", dc, "dc_estimated", isempty (opts.dc),
                 "gaussian", logical (opts.gaussian), "peaks", peaks, "halo", halo,
                 "backend", backend);

endfunction


%!shared B
%! B = getenv ("GPUML_TEST_BACKEND");
%! if (isempty (B))
%!   B = "auto";
%! endif

## The definitions, over the full distance matrix.
%!function [rho, delta, nearest] = ref_dpc (X, dc, gaussian, gaussian_cutoff = 0)
%!  n = rows (X);
%!  D = sqrt (max (sum (X.^2, 2) + sum (X.^2, 2)' - 2 * (X * X'), 0));
%!  for i = 1:n
%!    for j = 1:n
%!      D(i,j) = sqrt (sum ((X(i,:) - X(j,:)) .^ 2));
%!    endfor
%!  endfor
%!  E = D;  E(1:n+1:end) = Inf;
%!  if (gaussian_cutoff > 0)
%!    E(E >= gaussian_cutoff * dc) = Inf;
%!  endif
%!  if (gaussian)
%!    rho = sum (exp (-(E / dc) .^ 2), 2);
%!  else
%!    rho = sum (E < dc, 2);
%!  endif
%!  delta = zeros (n, 1);  nearest = zeros (n, 1);
%!  for i = 1:n
%!    above = find (rho > rho(i) | (rho == rho(i) & (1:n)' < i));
%!    if (isempty (above))
%!      delta(i) = max (D(i,:));  nearest(i) = NaN;
%!    else
%!      [delta(i), o] = min (D(i, above));
%!      nearest(i) = above(o);
%!    endif
%!  endfor
%!endfunction

## against the definitions: both kernels, cell index (d <= 8) and all pairs
%!test
%! randn ("state", 41);
%! for d = [1 2 4 20]
%!   X = randn (120, d);
%!   for g = [false true]
%!     dc = 0.5 * sqrt (d);
%!     [~, info] = gpu_dpc (X, "dc", dc, "gaussian", g, "backend", B);
%!     [rho, delta, nearest] = ref_dpc (X, dc, g);
%!     if (g)
%!       assert (info.rho, rho, -1e-10);
%!     else
%!       assert (info.rho, rho);
%!     endif
%!     assert (info.nearest, nearest);
%!     assert (info.delta, delta, -1e-13);
%!     assert (info.gamma, info.rho .* info.delta);
%!   endfor
%! endfor

## three separated blobs are recovered; thresholds give the same clusters
%!test
%! randn ("state", 42);
%! X = [randn(150, 2); [randn(150, 1) + 9, randn(150, 1)]; [randn(150, 1) + 4, randn(150, 1) + 9]];
%! label = repelem ((1:3)', 150);
%! [c, info] = gpu_dpc (X, "k", 3, "backend", B);
%! assert (size (c), [450 1]);
%! assert (numel (info.peaks), 3);
%! assert (c(info.peaks), (1:3)');
%! assert (all (diff (info.gamma(info.peaks)) <= 0));
%! T = accumarray ([c, label], 1);
%! assert (sort (T(:))', [zeros(1, 6), 150 150 150]);
%! assert (isnan (info.nearest(info.peaks(1))));
%! assert (islogical (info.halo) && numel (info.halo) == 450);
%! assert (info.dc_estimated);
%! r = min (info.rho(info.peaks)) - 0.5;  dl = min (info.delta(info.peaks)) * 0.99;
%! c2 = gpu_dpc (X, "rho", r, "delta", dl, "backend", B);
%! assert (c2, c);

## integer grid points: ties in distance and density
%!test
%! [a, b] = meshgrid (1:12, 1:9);
%! X = [a(:) b(:)];
%! for dc = [1 1.5 2.5]
%!   [~, info] = gpu_dpc (X, "dc", dc, "backend", B);
%!   [rho, delta, nearest] = ref_dpc (X, dc, false);
%!   assert (info.rho, rho);
%!   assert (info.nearest, nearest);
%!   assert (info.delta, delta);
%! endfor

## single, integer and logical input compute in double
%!test
%! randn ("state", 43);
%! X = round (5 * randn (80, 2));
%! [c, info] = gpu_dpc (X, "dc", 2, "k", 2);
%! [c1, info1] = gpu_dpc (single (X), "dc", 2, "k", 2);
%! [c2, info2] = gpu_dpc (int16 (X), "dc", 2, "k", 2);
%! assert (c1, c);  assert (c2, c);
%! assert (info1.rho, info.rho);  assert (info2.delta, info.delta);
%! assert (class (info1.rho), "double");

## no selection: info only; the estimate is reproducible with the rand state
%!test
%! rand ("state", 44);  randn ("state", 44);
%! X = rand (3000, 2);
%! rand ("state", 1);
%! [c, info] = gpu_dpc (X, "backend", B);
%! assert (isempty (c));
%! assert (isempty (info.peaks) && isempty (info.halo));
%! rand ("state", 1);
%! [~, info2] = gpu_dpc (X, "backend", B);
%! assert (info2.dc, info.dc);
%! assert (abs (mean (info.rho) / 2999 - 0.02) < 0.003);
%! [~, info3] = gpu_dpc (X, "dc", 0.05, "gaussian", true, "backend", "cpu");
%! assert (info3.dc, 0.05);
%! assert (! info3.dc_estimated && info3.gaussian);
%! assert (info3.backend, "cpu");

## the truncated Gaussian: its definition, cell index (d <= 8) and all pairs; bad values
%!test
%! randn ("state", 47);
%! for d = [2 9]
%!   X = randn (150, d);
%!   dc = 0.2 * sqrt (d);
%!   [~, info] = gpu_dpc (X, "dc", dc, "gaussian", true, "gaussian_cutoff", 2, "backend", B);
%!   [rho, delta, nearest] = ref_dpc (X, dc, true, 2);
%!   assert (info.rho, rho, -1e-10);
%!   assert (info.nearest, nearest);
%!   assert (info.delta, delta, -1e-13);
%! endfor
%!error <gaussian_cutoff = -1 must be a finite number>
%! gpu_dpc (randn (20, 2), "gaussian", true, "gaussian_cutoff", -1);

## with a GPU, the CUDA backend gives the CPU's answers
%!testif ; gpuml_info ().device_count > 0
%! randn ("state", 45);
%! for d = [2 3 6 30]
%!   X = randn (2000, d);
%!   for g = [false true]
%!     [c, info] = gpu_dpc (X, "k", 3, "gaussian", g, "backend", "cuda");
%!     [cc, cinfo] = gpu_dpc (X, "dc", info.dc, "k", 3, "gaussian", g, "backend", "cpu");
%!     assert (info.backend, "cuda");
%!     assert (info.rho, cinfo.rho, -1e-10);
%!     assert (info.nearest, cinfo.nearest);
%!     assert (c, cc);
%!     assert (info.halo, cinfo.halo);
%!   endfor
%! endfor

## the backend "cuda" without a GPU is an error
%!testif ; gpuml_info ().device_count == 0
%! try
%!   gpu_dpc (rand (5, 2), "backend", "cuda");
%!   error ("test:noError", "no error raised");
%! catch err
%!   assert (err.identifier, "gpuml:dpc:noCuda");
%! end_try_catch

%!error id=gpuml:dpc:badDc gpu_dpc (rand (10, 2), "dc", 0)
%!error <dc = -1 must be a positive finite distance> gpu_dpc (rand (10, 2), "dc", -1)
%!error id=gpuml:dpc:badDc gpu_dpc (rand (10, 2), "dc", Inf)
%!error id=gpuml:dpc:nonFinite gpu_dpc ([1 2; NaN 3; 4 5])
%!error <x contains Inf at row 2, column 1> gpu_dpc ([1 2; Inf 3; 4 5])
%!error id=gpuml:dpc:badK gpu_dpc (rand (10, 2), "k", 11)
%!error <k = 11 exceeds the 10 points> gpu_dpc (rand (10, 2), "k", 11)
%!error id=gpuml:dpc:badK gpu_dpc (rand (10, 2), "k", 0)
%!error id=gpuml:dpc:badParameter gpu_dpc (rand (10, 2), "k", 1.5)
%!error id=gpuml:dpc:badSelection gpu_dpc (rand (10, 2), "k", 2, "rho", 1)
%!error <only rho was given> gpu_dpc (rand (10, 2), "rho", 1)
%!error id=gpuml:dpc:noCentres gpu_dpc (rand (10, 2), "rho", 100, "delta", 100)
%!error id=gpuml:dpc:badData gpu_dpc ([1 2])
%!error id=gpuml:dpc:badData gpu_dpc (ones (5, 2))
%!error id=gpuml:dpc:badType gpu_dpc ({1, 2})
%!error id=gpuml:dpc:badParameter gpu_dpc (rand (10, 2), "dc", [1 2])
%!error id=gpuml:badOption gpu_dpc (rand (10, 2), "clusters", 3)
%!error id=gpuml:badBackend gpu_dpc (rand (10, 2), "backend", "gpu")
%!error <Invalid call> gpu_dpc ()

## devices: checked by the core, ignored on the CPU; the passes over shards
## (GPUML_SHARDS, the development knob that stands for several devices) give one
## shard's fit bit for bit, ties included
%!error <listed twice> gpu_dpc (rand (20, 2), "dc", 0.3, "backend", "cpu", "devices", [1 1])
%!error <"all"> gpu_dpc (rand (20, 2), "dc", 0.3, "backend", "cpu", "devices", "every")
%!test
%! [gx, gy] = meshgrid (0:12, 0:12);
%! X = [gx(:), gy(:); randn(200, 2) * 2 + 6];
%! [c1, i1] = gpu_dpc (X, "dc", 1.5, "k", 3, "backend", B);
%! unwind_protect
%!   setenv ("GPUML_SHARDS", "3");  setenv ("GPUML_SHARD_THREADS", "2");
%!   [c2, i2] = gpu_dpc (X, "dc", 1.5, "k", 3, "backend", B, "devices", 0);
%! unwind_protect_cleanup
%!   unsetenv ("GPUML_SHARDS");  unsetenv ("GPUML_SHARD_THREADS");
%! end_unwind_protect
%! assert (isequal (c2, c1) && isequal (i2.rho, i1.rho) && isequal (i2.delta, i1.delta));
%! assert (isequaln (i2.nearest, i1.nearest) && isequal (i2.peaks, i1.peaks) && isequal (i2.halo, i1.halo));
