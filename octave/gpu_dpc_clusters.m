## -*- texinfo -*-
## @deftypefn  {} {@var{clusters} =} gpu_dpc_clusters (@var{X}, @var{info}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{clusters}, @var{info}] =} gpu_dpc_clusters (@dots{})
## Choose the centres of a density peaks fit again, without recomputing the densities:
## after looking at the decision graph (@code{plot (info.rho, info.delta, ".")}), try
## several cuts cheaply.
##
## @var{X} and @var{info} are the data and the second output of @code{gpu_dpc}.
## Options: @qcode{"k"} (the number of clusters) or both @qcode{"rho"} and
## @qcode{"delta"} (thresholds), and @qcode{"backend"}, @qcode{"verbose"} as for
## @code{gpu_dpc} (the halo needs one pass over the pairs within @var{info}.dc).
## Returns the cluster of every point and @var{info} with new @code{peaks} and
## @code{halo}.
##
## @example
## @group
## randn ("state", 2);
## X = [randn(100, 3); randn(100, 3) + 6];
## [~, info] = gpu_dpc (X);
## c2 = gpu_dpc_clusters (X, info, "k", 2);
## c3 = gpu_dpc_clusters (X, info, "k", 3);
## accumarray ([c2, c3], 1)
## @end group
## @end example
##
## @seealso{gpu_dpc}
## @end deftypefn

function [clusters, info] = gpu_dpc_clusters (X, info, varargin)

  if (nargin < 2)
    print_usage ();
  endif
  if (! isstruct (info) || ! all (isfield (info, {"rho", "delta", "nearest", "dc"})))
    error ("gpuml:dpc:badInput",
           "gpu_dpc_clusters: info must be the second output of gpu_dpc");
  endif
  [opts, given] = gpuml_parse_options ("gpu_dpc_clusters",
                                       struct ("k", [], "rho", [], "delta", [],
                                               "backend", info.backend, "verbose", false),
                                       varargin);
  X = gpuml_double (X);
  params = {};
  for i = 1:2:numel (given)
    if (any (strcmp (given{i}, {"k", "rho", "delta"})) && ! isempty (given{i+1}))
      params(end+1:end+2) = given(i:i+1);
    endif
  endfor
  try
    [peaks, clusters, halo, backend] = ...
      gpuml_dpc_cut_mex (X, info.dc, info.rho, info.delta, info.nearest, params,
                         opts.backend, opts.verbose);
  catch err
    gpuml_rethrow (err, "gpu_dpc_clusters", "gpuml_dpc_cut_mex");
  end_try_catch
  info.peaks = peaks;
  info.halo = halo;

endfunction


## recutting gives what gpu_dpc gives with the same selection
%!test
%! randn ("state", 51);
%! X = [randn(120, 2); randn(120, 2) + 5; [randn(120, 1), randn(120, 1) + 7]];
%! [~, info] = gpu_dpc (X, "dc", 0.8);
%! for k = 1:4
%!   [c, info2] = gpu_dpc_clusters (X, info, "k", k);
%!   [cr, infor] = gpu_dpc (X, "dc", 0.8, "k", k);
%!   assert (c, cr);
%!   assert (info2.peaks, infor.peaks);
%!   assert (info2.halo, infor.halo);
%!   assert (info2.rho, info.rho);
%! endfor
%! r = min (infor.rho(infor.peaks(1:3))) - 0.5;
%! dl = min (infor.delta(infor.peaks(1:3))) * 0.99;
%! c = gpu_dpc_clusters (X, info, "rho", r, "delta", dl, "backend", "cpu");
%! assert (max (c), 3);

%!error id=gpuml:dpc:badSelection gpu_dpc_clusters (rand (10, 2), nthargout (2, @gpu_dpc, rand (10, 2)))
%!error id=gpuml:dpc:badInput gpu_dpc_clusters (rand (10, 2), struct ("rho", 1))
%!error id=gpuml:dpc:badInput gpu_dpc_clusters (rand (9, 2), nthargout (2, @gpu_dpc, rand (10, 2)), "k", 2)
%!error <Invalid call> gpu_dpc_clusters (rand (10, 2))
