## -*- texinfo -*-
## @deftypefn  {} {@var{ix} =} gpu_knn_index (@var{data})
## @deftypefnx {} {@var{ix} =} gpu_knn_index (@var{data}, @var{name}, @var{value}, @dots{})
## Build a kNN index of the rows of @var{data} for repeated exact searches with
## @code{gpu_knn (@var{ix}, @var{query}, @var{k})}.
##
## The index holds the data prepared for the search: on the GPU it stays resident
## in the GPU's memory, so that each search uploads only its queries.  A search of
## the index gives exactly the answer of @code{gpu_knn} on @var{data} with the
## index's backend, precision and metric.  @var{data} may be changed or cleared
## after the build: the index keeps a copy.
##
## The index holds memory (on the GPU too) until @code{gpu_knn_free (@var{ix})},
## @code{clear all} or @code{clear functions}, or the end of the session.  Clearing
## the variable @var{ix} does @emph{not} free it.  An index used after it was freed
## is an error.
##
## @strong{Inputs}
##
## @table @var
## @item data
## @var{n}-by-@var{d} matrix of reference points, one per row.  Values must be
## finite.  The index works in double precision: single, integer and logical
## matrices are converted to double.
## @end table
##
## @strong{Options} (name/value pairs; names are case-insensitive)
##
## @table @asis
## @item @qcode{"metric"}
## @qcode{"euclidean"} (default) or @qcode{"cosine"} (1 - cos; a row of zeros is
## an error), as for @code{gpu_knn}.
##
## @item @qcode{"backend"}
## @qcode{"auto"} (default: CUDA when available and a self-search of @var{data}
## is large enough to gain, else CPU), @qcode{"cpu"} or @qcode{"cuda"}.
##
## @item @qcode{"precision"}
## How the GPU computes: @qcode{"auto"} (default), @qcode{"double"} or
## @qcode{"single"}, as for @code{gpu_knn}.
##
## @item @qcode{"verbose"}
## @code{true} to print progress (default @code{false}).
## @end table
##
## @strong{Output}
##
## @var{ix} is a struct that names the index: field @code{id} (the index itself
## lives in the gpuml MEX file), and, as built, @code{rows} and @code{cols} (the
## size of @var{data}), @code{metric}, @code{backend} (@qcode{"cpu"} or
## @qcode{"cuda"}), @code{device} (the CUDA device, -1 on the CPU),
## @code{precision} (that of the arithmetic: @qcode{"double"}, also for
## @qcode{"auto"}, which gives the double-precision answer; or @qcode{"single"}),
## @code{host_bytes} and @code{device_bytes} (the memory it holds) and
## @code{build_seconds}.  Copies of @var{ix} name the same index.
##
## @strong{Example}
##
## @example
## @group
## data = [0 0; 1 0; 0 2; 5 5];
## ix = gpu_knn_index (data);
## [idx, dist] = gpu_knn (ix, [0.2 0.1; 4 4], 2)
##   @result{} idx =
##        1   2
##        4   3
##   @result{} dist =
##        0.2236   0.8062
##        1.4142   4.4721
## gpu_knn (ix, [], 1)'               # each point's nearest other point
##   @result{} 2   1   1   3
## gpu_knn_free (ix);
## @end group
## @end example
##
## @seealso{gpu_knn, gpu_knn_free}
## @end deftypefn

function ix = gpu_knn_index (data, varargin)

  if (nargin < 1)
    print_usage ();
  endif
  opts = gpuml_parse_options ("gpu_knn_index",
                              struct ("metric", "euclidean", "backend", "auto",
                                      "precision", "auto", "verbose", false),
                              varargin);
  data = gpuml_double (data);   # the core's index is double only
  try
    [id, info] = gpuml_knn_index_mex ("build", data, opts.backend, opts.verbose,
                                      opts.precision, opts.metric);
  catch err
    gpuml_rethrow (err, "gpu_knn_index", "gpuml_knn_index_mex");
  end_try_catch
  ## gpu_knn recognises an index by the field gpuml_knn_index.
  ix = struct ("gpuml_knn_index", true, "id", id);
  for f = fieldnames (info)'
    ix.(f{1}) = info.(f{1});
  endfor

endfunction


## Backend for the correctness tests: GPUML_TEST_BACKEND ("cpu", "cuda"), else "auto"
%!shared B
%! B = getenv ("GPUML_TEST_BACKEND");
%! if (isempty (B))
%!   B = "auto";
%! endif

## An index search gives exactly what gpu_knn gives on the same data with the
## index's backend, precision and metric: self and query searches, both metrics,
## several k and d
%!test
%! rand ("state", 41);  randn ("state", 41);
%! for metric = {"euclidean", "cosine"}
%!   for d = [2 3 40]
%!     data = randn (300, d);  query = randn (50, d);
%!     ix = gpu_knn_index (data, "metric", metric{1}, "backend", B);
%!     unwind_protect
%!       assert (ix.metric, metric{1});
%!       same = {"backend", ix.backend, "metric", metric{1}};
%!       for k = [1 6 20]
%!         [idx, dist, info] = gpu_knn (ix, [], k);
%!         [ri, rd, rinfo] = gpu_knn (data, [], k, same{:});
%!         assert (isequal (idx, ri) && isequal (dist, rd));
%!         assert (info.backend, rinfo.backend);
%!         [idx, dist] = gpu_knn (ix, query, k);
%!         [ri, rd] = gpu_knn (data, query, k, same{:});
%!         assert (isequal (idx, ri) && isequal (dist, rd));
%!       endfor
%!       ## k defaults to 10; query omitted is a self-search
%!       assert (isequal (gpu_knn (ix), gpu_knn (data, [], 10, same{:})));
%!     unwind_protect_cleanup
%!       gpu_knn_free (ix);
%!     end_unwind_protect
%!   endfor
%! endfor

## ties by the smaller index and exact duplicates, on integer grid data
%!test
%! [a, b] = meshgrid (0:9, 0:7);
%! data = [a(:) b(:); a(1:5)' b(1:5)'];
%! ix = gpu_knn_index (data, "backend", B);
%! [idx, dist] = gpu_knn (ix, [], 8);
%! [ri, rd] = gpu_knn (data, [], 8, "backend", ix.backend);
%! assert (isequal (idx, ri) && isequal (dist, rd));
%! assert (idx(1, 1), 81);
%! assert (dist(1, 1), 0);
%! [idx, dist] = gpu_knn (ix, [3 2; 4.5 4.5], 6);
%! assert (dist(1,:), [0 1 1 1 1 sqrt(2)]);
%! assert (idx(1,2:5), sort (idx(1,2:5)));
%! gpu_knn_free (ix);

## the fields of the index; the data may change after the build
%!test
%! rand ("state", 42);
%! data = rand (30, 4);
%! ix = gpu_knn_index (data, "backend", "cpu", "metric", "COSINE");
%! assert (ix.gpuml_knn_index);
%! assert ([ix.rows ix.cols], [30 4]);
%! assert (ix.metric, "cosine");
%! assert (ix.backend, "cpu");
%! assert (ix.device, -1);
%! assert (ix.precision, "double");
%! assert (ix.host_bytes >= 30 * 4 * 8);
%! assert (ix.device_bytes, 0);
%! assert (ix.build_seconds >= 0);
%! expected = gpu_knn (data, [], 3, "metric", "cosine", "backend", "cpu");
%! data(:) = 1;
%! assert (gpu_knn (ix, [], 3), expected);
%! gpu_knn_free (ix);
%! ix = gpu_knn_index (rand (5, 2));
%! assert (ix.metric, "euclidean");
%! assert (any (strcmp (ix.backend, {"cpu", "cuda"})));
%! gpu_knn_free (ix);

## several indexes alive at once, searched in turn; freeing one leaves the others
%!test
%! rand ("state", 43);  randn ("state", 43);
%! X = {randn(100, 3), randn(80, 5), randn(120, 2)};
%! metrics = {"euclidean", "cosine", "euclidean"};
%! before = numel (gpuml_knn_index_mex ("list"));
%! for i = 1:3
%!   ix(i) = gpu_knn_index (X{i}, "metric", metrics{i}, "backend", B);
%! endfor
%! assert (numel (unique ([ix.id])), 3);
%! assert (numel (gpuml_knn_index_mex ("list")), before + 3);
%! for round = 1:2
%!   for i = [3 1 2]
%!     assert (gpu_knn (ix(i), [], 4),
%!             gpu_knn (X{i}, [], 4, "metric", metrics{i}, "backend", ix(i).backend));
%!   endfor
%! endfor
%! assert (gpu_knn_free (ix(2)));
%! assert (gpu_knn (ix(1), X{1}(1:5,:), 2),
%!         gpu_knn (X{1}, X{1}(1:5,:), 2, "backend", ix(1).backend));
%! assert (gpu_knn (ix(3), [], 1), gpu_knn (X{3}, [], 1, "backend", ix(3).backend));
%! assert (gpu_knn_free (ix), [true false true]);
%! assert (numel (gpuml_knn_index_mex ("list")), before);

## using an index after gpu_knn_free is an error, and so is a copy of it
%!test
%! ix = gpu_knn_index (rand (10, 2), "backend", B);
%! copy = ix;
%! gpu_knn_free (ix);
%! try
%!   gpu_knn (copy, [], 1);
%!   error ("test:noError", "no error raised");
%! catch err
%!   assert (err.identifier, "gpuml:knn:badIndex");
%!   assert (err.message, ["gpu_knn: this kNN index no longer exists (freed with ", ...
%!                         "gpu_knn_free, or the MEX file was cleared): build it ", ...
%!                         "again with gpu_knn_index"]);
%! end_try_catch

## clearing the MEX file (as clear all and clear functions do) frees every index
%!test
%! ix1 = gpu_knn_index (rand (10, 2), "backend", B);
%! ix2 = gpu_knn_index (rand (12, 3), "backend", B, "metric", "cosine");
%! clear -f gpuml_knn_index_mex
%! assert (isempty (gpuml_knn_index_mex ("list")));
%! fail ("gpu_knn (ix1, [], 1)", "no longer exists");
%! fail ("gpu_knn (ix2, rand (2, 3), 1)", "no longer exists");
%! ## ids are not reused: a new index is not reached through an old id
%! ix3 = gpu_knn_index (rand (10, 2), "backend", B);
%! assert (ix3.id != ix1.id && ix3.id != ix2.id);
%! fail ("gpu_knn (ix1, [], 1)", "no longer exists");
%! assert (gpu_knn_free (ix3));

## the query must have the index's columns; k as for gpu_knn
%!test
%! ix = gpu_knn_index (rand (6, 2), "backend", B);
%! unwind_protect
%!   fail ("gpu_knn (ix, rand (3, 4), 1)", "query has 4 columns but the index has 2");
%!   try
%!     gpu_knn (ix, rand (3, 1), 1);
%!     error ("test:noError", "no error raised");
%!   catch err
%!     assert (err.identifier, "gpuml:knn:dimMismatch");
%!   end_try_catch
%!   fail ("gpu_knn (ix, [], 6)", "k = 6 exceeds the 5 other points");
%!   fail ("gpu_knn (ix, rand (2, 2), 7)", "k = 7 exceeds the 6 data points");
%!   fail ("gpu_knn (ix, [], 0)", "k = 0 must be at least 1");
%!   fail ("gpu_knn (ix, [], 1.5)", "whole number");
%!   fail ("gpu_knn (ix, [0 NaN], 1)", "query contains NA/NaN");
%!   fail ("gpu_knn (ix, zeros (0, 2), 1)", "query has no rows");
%!   ## the index's backend, precision and metric are not the search's
%!   fail ("gpu_knn (ix, [], 1, 'backend', 'cpu')", "'backend' belongs to gpu_knn_index");
%!   fail ("gpu_knn (ix, [], 1, 'Metric', 'cosine')", "'metric' belongs to gpu_knn_index");
%!   fail ("gpu_knn (ix, [], 1, 'precision', 'double')", "'precision' belongs to gpu_knn_index");
%!   ## integer and single queries are taken as double
%!   assert (gpu_knn (ix, int8 ([1 1]), 2), gpu_knn (ix, [1 1], 2));
%!   [~, dist] = gpu_knn (ix, single ([1 1]), 2);
%!   assert (class (dist), "double");
%! unwind_protect_cleanup
%!   gpu_knn_free (ix);
%! end_unwind_protect

## single and integer data are indexed as double
%!test
%! rand ("state", 44);
%! data = single (rand (40, 3));
%! ix = gpu_knn_index (data, "backend", B);
%! [idx, dist] = gpu_knn (ix, [], 3);
%! assert (class (dist), "double");
%! assert (isequal (idx, gpu_knn (double (data), [], 3, "backend", ix.backend)));
%! gpu_knn_free (ix);
%! ix = gpu_knn_index (int16 ([0 0; 1 0; 0 2; 5 5]));
%! assert (gpu_knn (ix, [], 1), [2; 1; 1; 3]);
%! gpu_knn_free (ix);

## verbose prints progress, and only when asked
%!test
%! ix = gpu_knn_index (rand (50, 2), "backend", "cpu");
%! out = evalc ('gpu_knn (ix, [], 3, "verbose", true);');
%! assert (! isempty (strfind (out, "gpuml knn")));
%! out = evalc ('gpu_knn (ix, [], 3);');
%! assert (isempty (out));
%! gpu_knn_free (ix);

## the example of the help text
%!test
%! data = [0 0; 1 0; 0 2; 5 5];
%! ix = gpu_knn_index (data);
%! [idx, dist] = gpu_knn (ix, [0.2 0.1; 4 4], 2);
%! assert (idx, [1 2; 4 3]);
%! assert (dist, [sqrt(0.05) sqrt(0.65); sqrt(2) sqrt(20)], -1e-15);
%! assert (gpu_knn (ix, [], 1)', [2 1 1 3]);
%! gpu_knn_free (ix);

## with a GPU, a CUDA index keeps its data on the device and agrees with gpu_knn
%!testif ; gpuml_info ().device_count > 0
%! rand ("state", 45);  randn ("state", 45);
%! data = randn (3000, 32);  query = randn (400, 32);
%! for metric = {"euclidean", "cosine"}
%!   for p = {"auto", "double", "single"}
%!     ix = gpu_knn_index (data, "backend", "cuda", "metric", metric{1}, "precision", p{1});
%!     assert (ix.backend, "cuda");
%!     assert (ix.device >= 0);
%!     assert (ix.device_bytes > 0);
%!     same = {"backend", "cuda", "metric", metric{1}, "precision", p{1}};
%!     [idx, dist] = gpu_knn (ix, query, 15);
%!     [ri, rd] = gpu_knn (data, query, 15, same{:});
%!     assert (isequal (idx, ri) && isequal (dist, rd));
%!     [idx, dist] = gpu_knn (ix, [], 15);
%!     [ri, rd] = gpu_knn (data, [], 15, same{:});
%!     assert (isequal (idx, ri) && isequal (dist, rd));
%!     gpu_knn_free (ix);
%!   endfor
%! endfor

## the backend "cuda" without a GPU is an error, and leaves no index behind
%!testif ; gpuml_info ().device_count == 0
%! before = numel (gpuml_knn_index_mex ("list"));
%! fail ('gpu_knn_index (rand (5, 2), "backend", "cuda")', "cuda");
%! assert (numel (gpuml_knn_index_mex ("list")), before);

## bad data and options
%!error id=gpuml:knn:nonFinite gpu_knn_index ([1 2; NaN 4; 5 6])
%!error <data contains NA/NaN at row 2, column 1> gpu_knn_index ([1 2; NaN 4; 5 6])
%!error id=gpuml:knn:zeroRow gpu_knn_index ([1 2; 0 0], "metric", "cosine")
%!error <row 2 of the data is all zeros> gpu_knn_index ([1 2; 0 0], "metric", "cosine")
%!error id=gpuml:knn:badData gpu_knn_index (zeros (0, 2))
%!error id=gpuml:knn:badType gpu_knn_index ({1, 2})
%!error id=gpuml:knn:badType gpu_knn_index (rand (3, 2) + 1i)
%!error id=gpuml:knn:badType gpu_knn_index (sparse (rand (3, 2)))
%!error id=gpuml:badMetric gpu_knn_index (rand (5, 2), "metric", "hamming")
%!error id=gpuml:badBackend gpu_knn_index (rand (5, 2), "backend", "gpu")
%!error id=gpuml:badPrecision gpu_knn_index (rand (5, 2), "precision", "half")
%!error id=gpuml:badOption gpu_knn_index (rand (5, 2), "k", 3)
%!error id=gpuml:badOption gpu_knn_index (rand (5, 2), "verbose", "yes")
%!error <^gpu_knn_index: unknown metric> gpu_knn_index (rand (5, 2), "metric", "hamming")
%!error <Invalid call> gpu_knn_index ()
