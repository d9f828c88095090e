## -*- texinfo -*-
## @deftypefn  {} {@var{Ynew} =} gpu_tsne_transform (@var{X}, @var{Y}, @var{Xnew})
## @deftypefnx {} {@var{Ynew} =} gpu_tsne_transform (@dots{}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{Ynew}, @var{info}] =} gpu_tsne_transform (@dots{})
## Place the rows of @var{Xnew} into the t-SNE embedding @var{Y} that
## @code{gpu_tsne} gave for the data @var{X}; the points of @var{Y} stay put.
##
## Each new point gets affinities to its 3 * perplexity nearest rows of @var{X}
## (a small perplexity), starts at the median of their places and moves for
## @code{max_iter} iterations, attracted by those neighbours and repelled by all
## of @var{Y}, never by the other new points: a point's place does not depend on
## the others given with it.  The neighbours are found among the rows of @var{X}
## as given: give the same (reduced) data to @code{gpu_tsne} and here.
##
## @strong{Options} (name/value pairs)
##
## @table @asis
## @item @qcode{"perplexity"}
## Default 5; 3 * perplexity must not exceed the rows of @var{X}.
## @item @qcode{"max_iter"}
## Iterations, default 250 (0: the starting places).
## @item @qcode{"learning_rate"}, @qcode{"momentum"}, @qcode{"max_step_norm"}
## @qcode{"auto"} (1), 0.8 and 5.
## @item @qcode{"method"}
## @qcode{"auto"} (exact while new x training points <= 2.5e7), @qcode{"exact"}
## or @qcode{"fft"}.
## @item @qcode{"init"}
## @qcode{"median"} (default) or @qcode{"weighted"} (the affinity-weighted mean
## of the neighbours' places).
## @item @qcode{"df"}
## The degrees of freedom the fit used (default 1).
## @item @qcode{"backend"}, @qcode{"verbose"}
## As for @code{gpu_tsne}.
## @end table
##
## @var{info} has fields @code{backend}, @code{method} and @code{neighbours}.
##
## @strong{Example}
##
## @example
## @group
## X = [randn(200, 10); randn(200, 10) + 6];
## Y = gpu_tsne (X, "perplexity", 20);
## Ynew = gpu_tsne_transform (X, Y, [randn(5, 10); randn(5, 10) + 6]);
## @end group
## @end example
##
## @seealso{gpu_tsne}
## @end deftypefn

function [Ynew, info] = gpu_tsne_transform (X, Y, Xnew, varargin)

  if (nargin < 3)
    print_usage ();
  endif
  defaults = struct ("perplexity", 5, "max_iter", 250, "learning_rate", "auto",
                     "momentum", 0.8, "max_step_norm", 5, "method", "auto",
                     "init", "median", "df", 1, "backend", "auto", "verbose", false);
  [opts, given] = gpuml_parse_options ("gpu_tsne_transform", defaults, varargin);
  out_single = isa (Xnew, "single");
  X = as_double (X);
  Y = as_double (Y);
  Xnew = as_double (Xnew);
  params = {};
  for i = 1:2:numel (given)
    if (! any (strcmp (given{i}, {"backend", "verbose"})))
      params(end+1:end+2) = given(i:i+1);
    endif
  endfor
  try
    [Ynew, backend, method, k] = gpuml_tsne_transform_mex (X, Y, Xnew, params, opts.backend,
                                                           opts.verbose);
  catch err
    gpuml_rethrow (err, "gpu_tsne_transform", "gpuml_tsne_transform_mex");
  end_try_catch
  if (out_single)
    Ynew = single (Ynew);
  endif
  info = struct ("backend", backend, "method", method, "neighbours", k);

endfunction

function a = as_double (a)
  if ((isnumeric (a) || islogical (a)) && ! issparse (a) && ! iscomplex (a))
    a = double (a);
  endif
endfunction


%!shared X, Y, labels, B
%! B = getenv ("GPUML_TEST_BACKEND");
%! if (isempty (B))
%!   B = "auto";
%! endif
%! randn ("state", 3);
%! X = [randn(60, 6); randn(60, 6) + 8; randn(60, 6) - 8];
%! labels = kron ((1:3)', ones (60, 1));
%! Y = gpu_tsne (X, "perplexity", 15, "max_iter", 400, "seed", 1, "backend", B);

## new points land among their class; training points where they are
%!test
%! randn ("state", 4);
%! Xnew = [randn(10, 6); randn(10, 6) + 8; randn(10, 6) - 8];
%! for method = {"exact", "fft"}
%!   [Ynew, info] = gpu_tsne_transform (X, Y, Xnew, "method", method{1}, "backend", B);
%!   assert (size (Ynew), [30 2]);
%!   assert (info.method, method{1});
%!   idx = gpu_knn (Y, Ynew, 5, "backend", "cpu");
%!   assert (mode (labels(idx), 2), kron ((1:3)', ones (10, 1)));
%!   again = gpu_tsne_transform (X, Y, X(1:20, :), "method", method{1}, "backend", B);
%!   assert (median (sqrt (sum ((again - Y(1:20, :)) .^ 2, 2))) < 0.01 * max (range (Y)));
%! endfor
%! assert (class (gpu_tsne_transform (X, Y, single (Xnew(1:3, :)), "backend", B)), "single");

%!error id=gpuml:tsne:badColumns gpu_tsne_transform (X, Y, X(:, 1:5))
%!error id=gpuml:tsne:noTrainingData gpu_tsne_transform ([], Y, X)
%!error id=gpuml:tsne:badPerplexity gpu_tsne_transform (X, Y, X, "perplexity", 61)
%!error id=gpuml:tsne:badDf gpu_tsne_transform (X, Y, X, "df", 0)
%!error <Invalid call> gpu_tsne_transform (X, Y)
