## -*- texinfo -*-
## @deftypefn  {} {@var{D} =} gpu_dist (@var{X})
## @deftypefnx {} {@var{D} =} gpu_dist (@var{X}, @var{Y})
## @deftypefnx {} {@var{D} =} gpu_dist (@dots{}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{D}, @var{info}] =} gpu_dist (@dots{})
## Euclidean (or cosine) distances between the rows of @var{X}, or between the
## rows of @var{X} and those of @var{Y}, on the GPU when there is one and on the
## CPU (OpenMP) otherwise, with the same results.
##
## @strong{Inputs}
##
## @table @var
## @item X
## @var{n}-by-@var{d} matrix: one point per row, one variable per column.  Double
## or single; integer and logical matrices are converted to double.  Values must be
## finite.
##
## @item Y
## @var{m}-by-@var{d} matrix with the same number of columns as @var{X}.  Omitted
## or @code{[]}: @var{X} against itself.  If either input is single, both are taken
## as single.
## @end table
##
## @strong{Options} (name/value pairs; names are case-insensitive)
##
## @table @asis
## @item @qcode{"metric"}
## @qcode{"euclidean"} (default) or @qcode{"cosine"}:
## @code{1 - dot (@var{x}, @var{y}) / (norm (@var{x}) * norm (@var{y}))}, in
## [0, 2].  A row of zeros has no direction, so it is an error with the cosine
## metric.
##
## @item @qcode{"squared"}
## @code{true} to return squared Euclidean distances (default @code{false}; an
## error with the cosine metric).
##
## @item @qcode{"backend"}
## @qcode{"auto"} (default: CUDA when available and the problem is large enough
## to gain, else CPU), @qcode{"cpu"} or @qcode{"cuda"} (an error when gpuml has no
## usable GPU).
##
## @item @qcode{"verbose"}
## @code{true} to print progress (default @code{false}).
## @end table
##
## @strong{Outputs}
##
## @table @var
## @item D
## @var{n}-by-@var{m} matrix (@var{n}-by-@var{n} for @var{X} alone) with
## @code{@var{D}(i, j) = norm (@var{X}(i,:) - @var{Y}(j,:))} (or the cosine
## distance of the two rows), of the class of the inputs.  Never negative or NaN; exactly 0 for identical rows.  For @var{X} alone
## @var{D} is exactly symmetric with a zero diagonal.
##
## @item info
## Struct with field @code{backend}: the backend that ran, @qcode{"cpu"} or
## @qcode{"cuda"}.
## @end table
##
## The full @var{n}-by-@var{m} matrix is returned, so memory grows as
## @var{n}*@var{m}; for nearest neighbours use @code{gpu_knn}, which never holds
## it.  Press Ctrl-C to interrupt a long computation.
##
## @strong{Example}
##
## @example
## @group
## X = [0 0; 3 4; 6 8];
## D = gpu_dist (X)
##   @result{} D =
##        0    5   10
##        5    0    5
##       10    5    0
## D2 = gpu_dist (X, [0 0], "squared", true, "backend", "cpu")
##   @result{} D2 =
##         0
##        25
##       100
## C = gpu_dist ([1 0; 0 2; 3 3], "metric", "cosine")
##   @result{} C =
##        0        1.0000   0.2929
##        1.0000   0        0.2929
##        0.2929   0.2929   0
## @end group
## @end example
##
## @seealso{gpu_knn, gpuml_info}
## @end deftypefn

function [D, info] = gpu_dist (X, varargin)

  if (nargin < 1)
    print_usage ();
  endif

  Y = [];
  args = varargin;
  if (! isempty (args) && ! ischar (args{1}))
    Y = args{1};
    args(1) = [];
  endif
  opts = gpuml_parse_options ("gpu_dist",
                              struct ("metric", "euclidean", "squared", false,
                                      "backend", "auto", "verbose", false),
                              args);
  [X, Y] = gpuml_float (X, Y);
  try
    [D, backend] = gpuml_dist_mex (X, Y, opts.squared, opts.backend, opts.verbose,
                                   opts.metric);
  catch err
    gpuml_rethrow (err, "gpu_dist", "gpuml_dist_mex");
  end_try_catch
  info = struct ("backend", backend);

endfunction


## Backend for the correctness tests: GPUML_TEST_BACKEND ("cpu", "cuda"), else "auto"
%!shared B
%! B = getenv ("GPUML_TEST_BACKEND");
%! if (isempty (B))
%!   B = "auto";
%! endif

%!function D = brute_dist (X, Y)
%!  D = zeros (rows (X), rows (Y));
%!  for j = 1:rows (Y)
%!    D(:,j) = sqrt (sum ((X - Y(j,:)) .^ 2, 2));
%!  endfor
%!endfunction

%!function D = brute_cosine (X, Y)
%!  unit = @(x) x ./ sqrt (sum (x .^ 2, 2));
%!  D = 1 - unit (X) * unit (Y)';
%!endfunction

## X alone and X against Y, against a brute-force computation
%!test
%! rand ("state", 1);  randn ("state", 1);
%! X = rand (40, 5);
%! assert (gpu_dist (X, "backend", B), brute_dist (X, X), -1e-12);
%! assert (gpu_dist (X, "backend", "cpu"), brute_dist (X, X), -1e-12);

%!test
%! rand ("state", 2);  randn ("state", 2);
%! X = randn (30, 7);  Y = randn (20, 7);
%! assert (gpu_dist (X, Y, "backend", B), brute_dist (X, Y), -1e-12);
%! assert (gpu_dist (Y, X, "backend", B), brute_dist (Y, X), -1e-12);

## squared
%!test
%! rand ("state", 3);  randn ("state", 3);
%! X = rand (25, 4);  Y = rand (9, 4);
%! assert (gpu_dist (X, "squared", true, "backend", B), brute_dist (X, X) .^ 2, -1e-12);
%! assert (gpu_dist (X, Y, "Squared", true, "backend", B), brute_dist (X, Y) .^ 2, -1e-12);
%! assert (gpu_dist (X, Y, "squared", false, "backend", B), brute_dist (X, Y), -1e-12);

## large d (the GEMM form) against brute force
%!test
%! rand ("state", 4);  randn ("state", 4);
%! X = randn (60, 200);  Y = randn (35, 200);
%! assert (gpu_dist (X, "backend", B), brute_dist (X, X), -1e-11);
%! assert (gpu_dist (X, Y, "backend", B), brute_dist (X, Y), -1e-11);

## data near 1e4: no loss to cancellation, no negative or NaN values
%!test
%! rand ("state", 5);  randn ("state", 5);
%! for d = [1 3 50]
%!   X = 1e4 + rand (50, d);  Y = 1e4 + rand (20, d);
%!   D = gpu_dist (X, "backend", B);
%!   assert (D, brute_dist (X, X), 1e-9);
%!   assert (gpu_dist (X, Y, "backend", B), brute_dist (X, Y), 1e-9);
%!   assert (all (D(:) >= 0) && ! any (isnan (D(:))));
%!   D2 = gpu_dist (X, Y, "squared", true, "backend", B);
%!   assert (all (D2(:) >= 0));
%!   assert (D2, brute_dist (X, Y) .^ 2, 1e-8);
%! endfor

## duplicate rows give exactly 0
%!test
%! rand ("state", 6);  randn ("state", 6);
%! for d = [2 50]
%!   X = rand (10, d);
%!   X = [X; X(3,:); 1e4 + X(1:2,:); 1e4 + X(1:2,:)];
%!   D = gpu_dist (X, "backend", B);
%!   assert (D(3, 11), 0);
%!   assert (D(11, 3), 0);
%!   assert (D(12, 14), 0);
%!   assert (D(13, 15), 0);
%!   E = gpu_dist (X, X([3 12],:), "squared", true, "backend", B);
%!   assert (E([3 11], 1), [0; 0]);
%!   assert (E([12 14], 2), [0; 0]);
%! endfor

## X alone: exactly symmetric with a zero diagonal
%!test
%! rand ("state", 7);  randn ("state", 7);
%! for d = [3 100]
%!   X = 1e4 * randn (1500, d);
%!   D = gpu_dist (X, "backend", B);
%!   assert (size (D), [1500 1500]);
%!   assert (isequal (D, D.'));
%!   assert (all (diag (D) == 0));
%! endfor

## the example of the help text
%!test
%! X = [0 0; 3 4; 6 8];
%! assert (gpu_dist (X), [0 5 10; 5 0 5; 10 5 0]);
%! assert (gpu_dist (X, [0 0], "squared", true, "backend", "cpu"), [0; 25; 100]);

## single in, single out; integer and logical inputs are taken as double
%!test
%! rand ("state", 8);  randn ("state", 8);
%! X = rand (20, 3);  Y = rand (6, 3);
%! Ds = gpu_dist (single (X), single (Y));
%! assert (class (Ds), "single");
%! assert (double (Ds), brute_dist (X, Y), 1e-5);
%! assert (class (gpu_dist (single (X), Y)), "single");
%! assert (class (gpu_dist (X, single (Y))), "single");
%! assert (class (gpu_dist (single (X))), "single");
%! Xi = int32 ([0 0; 3 4; 6 8]);
%! assert (gpu_dist (Xi), [0 5 10; 5 0 5; 10 5 0]);
%! assert (gpu_dist (uint8 ([1 2; 3 4]), [1 2]), [0; sqrt(8)]);
%! assert (gpu_dist (logical ([1 0; 0 1])), [0 sqrt(2); sqrt(2) 0]);

## cosine against brute force: X alone (exactly symmetric, zero diagonal) and X
## against Y, small and large d, double and single
%!test
%! rand ("state", 10);  randn ("state", 10);
%! for d = [2 3 150]
%!   X = randn (45, d);  Y = 1e3 * randn (25, d);
%!   D = gpu_dist (X, "metric", "cosine", "backend", B);
%!   assert (D, brute_cosine (X, X), 1e-12);
%!   assert (isequal (D, D.') && all (diag (D) == 0));
%!   assert (all (D(:) >= 0 & D(:) <= 2));
%!   assert (gpu_dist (X, Y, "metric", "COSINE", "backend", B), brute_cosine (X, Y), 1e-12);
%!   Ds = gpu_dist (single (X), single (Y), "metric", "cosine", "backend", B);
%!   assert (class (Ds), "single");
%!   assert (double (Ds), brute_cosine (X, Y), 1e-5);
%! endfor
%! ## the length of a row does not count
%! assert (gpu_dist ([1 1; 2 0], [5 5; -3 0], "metric", "cosine"), [0 1+sqrt(0.5); 1-sqrt(0.5) 2], 1e-15);
%! assert (gpu_dist (X, "metric", "euclidean"), gpu_dist (X));

## the cosine example of the help text
%!assert (gpu_dist ([1 0; 0 2; 3 3], "metric", "cosine"), [0 1 1-sqrt(0.5); 1 0 1-sqrt(0.5); 1-sqrt(0.5) 1-sqrt(0.5) 0], 1e-15)

## one row, one column
%!assert (gpu_dist ([1 2 3]), 0)
%!assert (gpu_dist ([1; 4; 6]), [0 3 5; 3 0 2; 5 2 0])
%!assert (gpu_dist ([1 2], [4 6]), 5)

## the backend that ran
%!test
%! [D, info] = gpu_dist (rand (5, 2), "backend", "cpu");
%! assert (info.backend, "cpu");
%! [D, info] = gpu_dist (rand (5, 2));
%! assert (any (strcmp (info.backend, {"cpu", "cuda"})));
%! [D, info] = gpu_dist (rand (5, 2), "backend", "AUTO");
%! assert (any (strcmp (info.backend, {"cpu", "cuda"})));

## verbose prints progress
%!test
%! out = evalc ('gpu_dist (rand (50, 2), "verbose", true, "backend", "cpu");');
%! assert (! isempty (strfind (out, "gpuml dist")));
%! out = evalc ('gpu_dist (rand (50, 2), "verbose", false);');
%! assert (isempty (out));

## with a GPU, the CUDA backend gives the CPU's answers
%!testif ; gpuml_info ().device_count > 0
%! rand ("state", 9);  randn ("state", 9);
%! for d = [3 100]
%!   X = 1e4 + randn (700, d);  Y = randn (300, d);
%!   [D, info] = gpu_dist (X, "backend", "cuda");
%!   assert (info.backend, "cuda");
%!   assert (D, gpu_dist (X, "backend", "cpu"), -1e-10);
%!   assert (isequal (D, D.') && all (diag (D) == 0));
%!   assert (gpu_dist (X, Y, "backend", "cuda"), gpu_dist (X, Y, "backend", "cpu"), -1e-10);
%!   assert (gpu_dist (single (Y), "backend", "cuda"), gpu_dist (single (Y), "backend", "cpu"), -1e-4);
%! endfor

## the backend "cuda" without a GPU is an error
%!testif ; gpuml_info ().device_count == 0
%! try
%!   gpu_dist (rand (5, 2), "backend", "cuda");
%!   error ("test:noError", "no error raised");
%! catch err
%!   assert (err.identifier, "gpuml:dist:noCuda");
%!   assert (! isempty (strfind (err.message, "cuda")));
%! end_try_catch

## bad input
%!error id=gpuml:dist:nonFinite gpu_dist ([1 2; NaN 4])
%!error id=gpuml:dist:nonFinite gpu_dist ([1 2; 3 4], [Inf 0])
%!error id=gpuml:dist:nonFinite gpu_dist (single ([1 2; 3 -Inf]))
%!error <row 2, column 1> gpu_dist ([1 2; NaN 4])
%!error id=gpuml:dist:dimMismatch gpu_dist (rand (5, 3), rand (4, 2))
%!error id=gpuml:dist:badData gpu_dist (zeros (0, 3))
%!error id=gpuml:dist:badData gpu_dist (rand (5, 3), zeros (0, 3))
%!error id=gpuml:badBackend gpu_dist (rand (5, 2), "backend", "opencl")
%!error <^gpu_dist: unknown backend "opencl"> gpu_dist (rand (5, 2), "backend", "opencl")
%!error id=gpuml:badOption gpu_dist (rand (5, 2), "backend", 1)
%!error id=gpuml:badOption gpu_dist (rand (5, 2), "squared", "yes")
%!error id=gpuml:badOption gpu_dist (rand (5, 2), "sqaured", true)
%!error id=gpuml:badOption gpu_dist (rand (5, 2), "squared")
%!error id=gpuml:badMetric gpu_dist (rand (5, 2), "metric", "cityblock")
%!error <unknown metric "cityblock"> gpu_dist (rand (5, 2), "metric", "cityblock")
%!error id=gpuml:badOption gpu_dist (rand (5, 2), "metric", 1)
%!error id=gpuml:dist:zeroRow gpu_dist ([1 2; 0 0; 3 4], "metric", "cosine")
%!error id=gpuml:dist:zeroRow gpu_dist ([1 2; 3 4], [0 0], "metric", "cosine")
%!error <row 2 of the .* all zeros> gpu_dist ([1 2; 0 0; 3 4], "metric", "cosine")
%!error id=gpuml:dist:badSquared gpu_dist (rand (5, 2), "metric", "cosine", "squared", true)
%!error id=gpuml:dist:badType gpu_dist ([1 2; 3 4] + 1i)
%!error id=gpuml:dist:badType gpu_dist (sparse ([1 2; 3 4]))
%!error id=gpuml:dist:badType gpu_dist ({1, 2})
%!error id=gpuml:dist:badType gpu_dist (rand (3, 2, 2))
%!error <Invalid call> gpu_dist ()
