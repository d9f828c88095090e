## -*- texinfo -*-
## @deftypefn  {} {@var{idx} =} gpu_knn (@var{data})
## @deftypefnx {} {@var{idx} =} gpu_knn (@var{data}, @var{query})
## @deftypefnx {} {@var{idx} =} gpu_knn (@var{data}, @var{query}, @var{k})
## @deftypefnx {} {@var{idx} =} gpu_knn (@dots{}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{idx}, @var{dist}, @var{info}] =} gpu_knn (@dots{})
## @deftypefnx {} {[@var{idx}, @var{dist}, @var{info}] =} gpu_knn (@var{ix}, @var{query}, @var{k})
## Exact @var{k} nearest neighbours (Euclidean or cosine distance) of each row of
## @var{query} among the rows of @var{data}, on the GPU when there is one and on
## the CPU (OpenMP) otherwise, with the same results.
##
## The search is brute force and exact.  The @var{m}-by-@var{n} distance matrix is
## never held in memory, so large problems fit; any @var{k} up to the number of
## data points is allowed.
##
## @strong{Inputs}
##
## @table @var
## @item data
## @var{n}-by-@var{d} matrix of reference points, one per row.  Double or single;
## integer and logical matrices are converted to double.  Values must be finite.
##
## @item query
## @var{m}-by-@var{d} matrix of query points with the same number of columns.
## Omitted or @code{[]}: search @var{data} against itself; each point is then
## excluded from its own neighbours by its index (a duplicate row is still found,
## at distance 0), and @var{k} can be at most @var{n} - 1.  If either input is
## single, both are taken as single.
##
## @item k
## Number of neighbours, 1 <= @var{k} <= @var{n} (@var{n} - 1 for a self-search).
## Default 10.
##
## @item ix
## In place of @var{data}: a kNN index built by @code{gpu_knn_index}, which keeps
## the data prepared (on the GPU: resident in its memory) for repeated searches.
## @var{query} must have the index's number of columns, or be @code{[]} to search
## the indexed data against itself.  The answers are those of @code{gpu_knn} on
## the indexed data with the index's backend, precision and metric, which are
## therefore options of @code{gpu_knn_index}, not of the search (only
## @qcode{"verbose"} is taken).  The search is in double precision: a single
## @var{query} is converted to double.
## @end table
##
## @strong{Options} (name/value pairs; names are case-insensitive)
##
## @table @asis
## @item @qcode{"backend"}
## @qcode{"auto"} (default: CUDA when available and the problem is large enough
## to gain, else CPU), @qcode{"cpu"} or @qcode{"cuda"} (an error when gpuml has no
## usable GPU).
##
## @item @qcode{"precision"}
## How the GPU computes for double input (the CPU always works in double):
## @qcode{"auto"} (default) gives exactly the double-precision answer, from
## tensor-core candidates whose rounding error is bounded for each query: first
## plain TF32 (multiplied in fp16 where that is exact and faster, the sums then
## kept in fp16, a rounding the bound covers), then, for the
## queries its wider bound cannot settle, TF32 split in two parts
## (single-precision accuracy); a query that neither bound settles (near
## ties, many duplicates) is searched again in double precision.  @qcode{"double"}
## computes in double throughout (the same answer, slower); @qcode{"single"} takes
## the two tensor-core passes without the last step: the single-precision answer.
## Single input always runs in single precision.
##
## @item @qcode{"metric"}
## @qcode{"euclidean"} (default): @code{norm (@var{x} - @var{y})}; or
## @qcode{"cosine"}: @code{1 - dot (@var{x}, @var{y}) / (norm (@var{x}) * norm (@var{y}))},
## in [0, 2], the same for every positive multiple of a row.  A row of zeros has no
## direction, so it is an error with the cosine metric.
##
## @item @qcode{"verbose"}
## @code{true} to print progress (default @code{false}).
##
## @item @qcode{"devices"}
## The CUDA devices to spread the search over: @code{[]} (default: one device),
## device numbers such as @code{[0 1]}, or @qcode{"all"}.  The references are split
## over the devices and the lists merged exactly: for double input (precision
## @qcode{"auto"} or @qcode{"double"}) the answer is that of one device; in single
## precision each device centres its own rows, so two neighbours whose distances differ
## by a float rounding may come in the other order.
## Numbers must be whole, 0 or more and distinct (else an error); a device that does
## not exist is an error on CUDA.  On the CPU backend the list is checked and then
## ignored, so that a script written for a GPU host runs unchanged without one.  Not
## for an index (an index lives on one device).
## @end table
##
## @strong{Outputs}
##
## @table @var
## @item idx
## @var{m}-by-@var{k} double matrix of 1-based row indices into @var{data}:
## @code{@var{idx}(i, j)} is the @var{j}-th nearest neighbour of query @var{i}.
##
## @item dist
## @var{m}-by-@var{k} matrix of the matching distances, sorted ascending along each
## row, of the class of the inputs (single in, single out).  Equal distances are
## ordered by the smaller index, so results are deterministic.
##
## @item info
## Struct with fields @code{backend}: the backend that ran, @qcode{"cpu"} or
## @qcode{"cuda"}; and @code{rechecked}: the number of queries searched again in
## double precision (@qcode{"precision"} @qcode{"auto"} on the GPU; 0 otherwise).
## @end table
##
## Press Ctrl-C to interrupt a long search.
##
## @strong{Example}
##
## @example
## @group
## data = [0 0; 1 0; 0 2; 5 5];
## [idx, dist] = gpu_knn (data, [0.2 0.1; 4 4], 2)
##   @result{} idx =
##        1   2
##        4   3
##   @result{} dist =
##        0.2236   0.8062
##        1.4142   4.4721
##
## ## each point's nearest other point, on the CPU
## [idx, dist, info] = gpu_knn (data, [], 1, "backend", "cpu");
## idx'
##   @result{} 2   1   1   3
## info.backend
##   @result{} cpu
##
## ## the same search through an index, then a query of it
## ix = gpu_knn_index (data, "backend", "cpu");
## isequal (gpu_knn (ix, [], 1), idx)
##   @result{} 1
## gpu_knn (ix, [4 4], 2)
##   @result{} 4   3
## gpu_knn_free (ix);
##
## ## cosine distance: the direction of a row, not its length
## gpu_knn ([1 0; 10 1; 0 3], [3 0.1], 2, "metric", "cosine")
##   @result{} 1   2
## gpu_knn ([1 0; 10 1; 0 3], [3 0.1], 2)
##   @result{} 1   3
## @end group
## @end example
##
## @seealso{gpu_knn_index, gpu_knn_free, gpu_dist, gpuml_info}
## @end deftypefn

function [idx, dist, info] = gpu_knn (data, varargin)

  if (nargin < 1)
    print_usage ();
  endif

  [query, k, args] = gpuml_knn_args (varargin);  # before the first option name
  [opts, given] = gpuml_parse_options ("gpu_knn",
                                       struct ("backend", "auto", "precision", "auto",
                                               "metric", "euclidean", "verbose", false,
                                               "devices", []),
                                       args);
  if (isstruct (data) && isscalar (data) && isfield (data, "gpuml_knn_index"))
    ## The index fixes how it is searched; silently ignoring these would mislead.
    if (any (strcmp (given(1:2:end), "devices")))
      error ("gpuml:badOption",
             "gpu_knn: an index lives on one device: 'devices' does not apply to its searches");
    endif
    fixed = intersect (given(1:2:end), {"backend", "precision", "metric"});
    if (! isempty (fixed))
      error ("gpuml:badOption",
             "gpu_knn: '%s' belongs to gpu_knn_index: an index is searched with the backend, precision and metric it was built with",
             fixed{1});
    endif
    query = gpuml_double (query);
    try
      [idx, dist, backend, rechecked] = gpuml_knn_index_mex ("search", data.id, query, k,
                                                             opts.verbose);
    catch err
      gpuml_rethrow (err, "gpu_knn", "gpuml_knn_index_mex");
    end_try_catch
  else
    [data, query] = gpuml_float (data, query);
    try
      [idx, dist, backend, rechecked] = gpuml_knn_mex (data, query, k, opts.backend,
                                                       opts.verbose, opts.precision,
                                                       opts.metric, opts.devices);
    catch err
      gpuml_rethrow (err, "gpu_knn", "gpuml_knn_mex");
    end_try_catch
  endif
  info = struct ("backend", backend, "rechecked", rechecked);

endfunction


## Backend for the correctness tests: GPUML_TEST_BACKEND ("cpu", "cuda"), else "auto"
%!shared B
%! B = getenv ("GPUML_TEST_BACKEND");
%! if (isempty (B))
%!   B = "auto";
%! endif

## Brute force: all distances, then a stable sort, so that equal distances keep
## index order.  self: each point excluded by index.
%!function [idx, dist] = brute_knn (data, query, k, self)
%!  m = rows (query);
%!  idx = zeros (m, k);  dist = zeros (m, k);
%!  for i = 1:m
%!    d = sqrt (sum ((data - query(i,:)) .^ 2, 2));
%!    if (self)
%!      d(i) = Inf;
%!    endif
%!    [s, o] = sort (d);
%!    idx(i,:) = o(1:k);
%!    dist(i,:) = s(1:k);
%!  endfor
%!endfunction

## Cosine distance by brute force: 1 - cos, self excluded by index.
%!function [idx, dist] = brute_knn_cosine (data, query, k, self)
%!  unit = @(x) x ./ sqrt (sum (x .^ 2, 2));
%!  D = 1 - unit (query) * unit (data)';
%!  if (self)
%!    D(1:rows (D)+1:end) = Inf;
%!  endif
%!  [s, o] = sort (D, 2);
%!  idx = o(:,1:k);
%!  dist = s(:,1:k);
%!endfunction

## against brute force, query and self-search, d = 1, 2, 3, 50
%!test
%! rand ("state", 11);  randn ("state", 11);
%! for d = [1 2 3 50]
%!   data = randn (300, d);  query = randn (70, d);
%!   for k = [1 5 17]
%!     [idx, dist] = gpu_knn (data, query, k, "backend", B);
%!     [bi, bd] = brute_knn (data, query, k, false);
%!     assert (idx, bi);
%!     assert (dist, bd, -1e-12);
%!     [idx, dist] = gpu_knn (data, [], k, "backend", "cpu");
%!     [bi, bd] = brute_knn (data, data, k, true);
%!     assert (idx, bi);
%!     assert (dist, bd, -1e-12);
%!   endfor
%! endfor

## sorted ascending, right sizes and classes
%!test
%! rand ("state", 12);  randn ("state", 12);
%! [idx, dist] = gpu_knn (rand (200, 4), rand (30, 4), 25, "backend", B);
%! assert (size (idx), [30 25]);
%! assert (size (dist), [30 25]);
%! assert (class (idx), "double");
%! assert (class (dist), "double");
%! assert (all (all (diff (dist, 1, 2) >= 0)));
%! assert (all (idx(:) >= 1 & idx(:) <= 200 & idx(:) == round (idx(:))));

## ties broken by the smaller index, on integer grid data
%!test
%! [a, b] = meshgrid (0:6, 0:5);
%! data = [a(:) b(:)];
%! for d = [2 3]
%!   if (d == 3)
%!     data = [data, mod(1:rows (data), 3)'];
%!   endif
%!   [idx, dist] = gpu_knn (data, [], 8, "backend", B);
%!   [bi, bd] = brute_knn (data, data, 8, true);
%!   assert (idx, bi);
%!   assert (dist, bd);
%!   query = [0 0 0; 3 2 1; 2.5 2.5 0; 6 5 2](:,1:d);
%!   [idx, dist] = gpu_knn (data, query, 12, "backend", B);
%!   [bi, bd] = brute_knn (data, query, 12, false);
%!   assert (idx, bi);
%!   assert (dist, bd);
%! endfor
%! ## the four points at distance 1 from (3, 2), in index order
%! [idx, dist] = gpu_knn ([a(:) b(:)], [3 2], 5);
%! assert (dist, [0 1 1 1 1]);
%! assert (idx(1), 21);
%! assert (idx(2:5), sort (idx(2:5)));

## large d on integer data: the GEMM path keeps exact ties in index order
%!test
%! rand ("state", 13);  randn ("state", 13);
%! data = floor (3 * rand (150, 60));
%! data(50,:) = data(7,:);  data(120,:) = data(7,:);
%! [idx, dist] = gpu_knn (data, [], 10, "backend", B);
%! [bi, bd] = brute_knn (data, data, 10, true);
%! assert (idx, bi);
%! assert (dist, bd, -1e-12);
%! assert (idx(7, 1:2), [50 120]);
%! assert (dist(7, 1:2), [0 0]);

## self excluded by index, not by distance: duplicate rows find each other
%!test
%! rand ("state", 14);  randn ("state", 14);
%! data = rand (20, 3);
%! data = [data; data(5,:); data(5,:); data(9,:)];
%! [idx, dist] = gpu_knn (data, [], 3, "backend", B);
%! assert (all (idx(:) != repmat ((1:23)', 3, 1)));
%! assert (idx(5, 1:2), [21 22]);
%! assert (idx(21, 1:2), [5 22]);
%! assert (idx(22, 1:2), [5 21]);
%! assert (idx(9, 1), 23);
%! assert (idx(23, 1), 9);
%! assert (dist([5 21 22], 1:2), zeros (3, 2));
%! assert (dist([9 23], 1), [0; 0]);

## k = 1, k = n - 1 (self), k = n (query)
%!test
%! rand ("state", 15);  randn ("state", 15);
%! data = rand (12, 2);  query = rand (4, 2);
%! [idx, dist] = gpu_knn (data, [], 1, "backend", B);
%! [bi, bd] = brute_knn (data, data, 1, true);
%! assert (idx, bi);
%! assert (dist, bd, -1e-12);
%! [idx, dist] = gpu_knn (data, [], 11, "backend", B);
%! [bi, bd] = brute_knn (data, data, 11, true);
%! assert (idx, bi);
%! assert (dist, bd, -1e-12);
%! assert (sort (idx, 2), cell2mat (arrayfun (@(i) setdiff (1:12, i), (1:12)', "UniformOutput", false)));
%! [idx, dist] = gpu_knn (data, query, 12, "backend", B);
%! [bi, bd] = brute_knn (data, query, 12, false);
%! assert (idx, bi);
%! assert (dist, bd, -1e-12);
%! assert (sort (idx, 2), repmat (1:12, 4, 1));

## two points, one query point, one column
%!assert (gpu_knn ([1; 2], [], 1), [2; 1])
%!assert (gpu_knn ([5], [3], 1), 1)
%!test
%! [idx, dist] = gpu_knn ([0; 10; 4; 7], [6], 3);
%! assert (idx, [4 3 2]);
%! assert (dist, [1 2 4]);

## k defaults to 10; query omitted or [] is a self-search
%!test
%! rand ("state", 16);  randn ("state", 16);
%! data = rand (30, 3);
%! idx = gpu_knn (data);
%! assert (size (idx), [30 10]);
%! assert (idx, gpu_knn (data, [], 10));
%! assert (idx, brute_knn (data, data, 10, true));
%! idx = gpu_knn (data, data(1:4,:));
%! assert (size (idx), [4 10]);
%! assert (idx(:,1), (1:4)');
%! assert (gpu_knn (data, "backend", "cpu"), gpu_knn (data));

## the example of the help text
%!test
%! data = [0 0; 1 0; 0 2; 5 5];
%! [idx, dist] = gpu_knn (data, [0.2 0.1; 4 4], 2);
%! assert (idx, [1 2; 4 3]);
%! assert (dist, [sqrt(0.05) sqrt(0.65); sqrt(2) sqrt(20)], -1e-15);
%! [idx, ~, info] = gpu_knn (data, [], 1, "backend", "cpu");
%! assert (idx', [2 1 1 3]);
%! assert (info.backend, "cpu");
%! ix = gpu_knn_index (data, "backend", "cpu");
%! assert (isequal (gpu_knn (ix, [], 1), idx));
%! assert (gpu_knn (ix, [4 4], 2), [4 3]);
%! gpu_knn_free (ix);

## single in, single out, with the same neighbours as double on separated data:
## two far-apart clusters, and only the queries whose 8 nearest distances differ
## by more than single precision can blur (about 1 in 3000 random draws has a gap
## below it, where the order may legitimately differ).
%!test
%! rand ("state", 17);  randn ("state", 17);
%! data = [randn(100, 5); 20 + randn(100, 5)];
%! query = [randn(10, 5); 20 + randn(10, 5)];
%! [idx, dist] = gpu_knn (data, query, 8);
%! separated = all (diff (dist, 1, 2) > 1e-4 * dist(:,2:end), 2);
%! assert (sum (separated) >= 15);
%! [idxs, dists] = gpu_knn (single (data), single (query), 7);
%! assert (class (dists), "single");
%! assert (class (idxs), "double");
%! assert (idxs(separated,:), idx(separated,1:7));
%! assert (double (dists), dist(:,1:7), -1e-5);
%! ## integer coordinates: exact in single too, ties and all
%! data = round (10 * randn (300, 4));  query = round (10 * randn (40, 4));
%! [idx, dist] = gpu_knn (data, query, 9);
%! [idxs, dists] = gpu_knn (single (data), single (query), 9);
%! assert (idxs, idx);
%! assert (dists, single (dist));
%! [idxs, dists] = gpu_knn (single (data), [], 3);
%! assert (class (dists), "single");
%! assert (idxs, gpu_knn (data, [], 3));
%! assert (class (nthargout (2, @gpu_knn, single (data), query, 2)), "single");
%! assert (class (nthargout (2, @gpu_knn, data, single (query), 2)), "single");

## integer and logical classes are taken as double
%!test
%! data = int16 ([0 0; 1 0; 0 2; 5 5]);
%! [idx, dist] = gpu_knn (data, uint8 ([4 4]), 2);
%! assert (idx, [4 3]);
%! assert (dist, [sqrt(2) sqrt(20)], -1e-15);
%! assert (gpu_knn (logical ([1 0; 0 0; 1 1]), [], 1), [2; 1; 1]);
%! assert (gpu_knn ([0 0; 1 1], int8 ([1 1]), int32 (1)), 2);

## the backend that ran; verbose prints progress
%!test
%! [~, ~, info] = gpu_knn (rand (20, 2), [], 3, "backend", "cpu");
%! assert (info, struct ("backend", "cpu", "rechecked", 0));
%! [~, ~, info] = gpu_knn (rand (20, 2), [], 3);
%! assert (any (strcmp (info.backend, {"cpu", "cuda"})));
%! out = evalc ('gpu_knn (rand (50, 2), [], 3, "verbose", true, "backend", "cpu");');
%! assert (! isempty (strfind (out, "gpuml knn")));
%! out = evalc ('gpu_knn (rand (50, 2), [], 3, "VERBOSE", false);');
%! assert (isempty (out));

## with a GPU, the CUDA backend gives the CPU's answers, ties included
## precision: every choice gives the brute-force answer; info counts the rechecks
%!test
%! rand ("seed", 24);
%! x = rand (800, 20);  q = rand (60, 20);
%! [ri, rd] = brute_knn (x, q, 5, false);
%! for p = {"auto", "double", "single"}
%!   [idx, dist, info] = gpu_knn (x, q, 5, "backend", B, "precision", p{1});
%!   assert (idx, ri);
%!   assert (dist, rd, 1e-10);
%!   assert (info.rechecked >= 0 && info.rechecked <= 60);
%! endfor

## precision auto on the GPU: points at distances 1 + j 1e-12 around point 1 (below
## fp32 rounding) are rechecked in fp64 and come back in the exact order
%!testif ; gpuml_info ().device_count > 0
%! rand ("seed", 25);  randn ("seed", 25);
%! y = rand (300, 32);
%! u = randn (30, 32);  u = u ./ sqrt (sum (u .^ 2, 2));
%! y(2:31,:) = y(1,:) + u .* (1 + (1:30)' * 1e-12);
%! [idx, dist, info] = gpu_knn (y, [], 10, "backend", "cuda");
%! [ri, rd] = brute_knn (y, y, 10, true);
%! assert (info.rechecked >= 1);
%! assert (idx, ri);
%! assert (dist, rd, 1e-12);

%!testif ; gpuml_info ().device_count > 0
%! rand ("state", 18);  randn ("state", 18);
%! for d = [2 3 50]
%!   data = randn (3000, d);  query = randn (500, d);
%!   [idx, dist, info] = gpu_knn (data, query, 15, "backend", "cuda");
%!   assert (info.backend, "cuda");
%!   [ci, cd] = gpu_knn (data, query, 15, "backend", "cpu");
%!   assert (idx, ci);
%!   assert (dist, cd, -1e-10);
%!   [idx, dist] = gpu_knn (data, [], 2999, "backend", "cuda");
%!   [ci, cd] = gpu_knn (data, [], 2999, "backend", "cpu");
%!   assert (idx, ci);
%!   assert (dist, cd, -1e-10);
%! endfor
%! [a, b] = meshgrid (0:40, 0:30);
%! grid = [a(:) b(:)];
%! [idx, dist] = gpu_knn (grid, [], 20, "backend", "cuda");
%! [ci, cd] = gpu_knn (grid, [], 20, "backend", "cpu");
%! assert (idx, ci);
%! assert (dist, cd);

## the backend "cuda" without a GPU is an error
%!testif ; gpuml_info ().device_count == 0
%! try
%!   gpu_knn (rand (5, 2), [], 1, "backend", "cuda");
%!   error ("test:noError", "no error raised");
%! catch err
%!   assert (err.identifier, "gpuml:knn:noCuda");
%!   assert (! isempty (strfind (err.message, "cuda")));
%! end_try_catch

## cosine against brute force, query and self-search; the distances of 1 - cos
## computed as |u - v|^2 / 2 of unit rows agree to rounding
%!test
%! rand ("state", 31);  randn ("state", 31);
%! for d = [2 3 40]
%!   data = randn (250, d);  query = randn (60, d);
%!   for k = [1 7]
%!     [idx, dist] = gpu_knn (data, query, k, "metric", "cosine", "backend", B);
%!     [bi, bd] = brute_knn_cosine (data, query, k, false);
%!     assert (idx, bi);
%!     assert (dist, bd, 1e-12);
%!     [idx, dist] = gpu_knn (data, [], k, "metric", "Cosine", "backend", B);
%!     [bi, bd] = brute_knn_cosine (data, data, k, true);
%!     assert (idx, bi);
%!     assert (dist, bd, 1e-12);
%!   endfor
%! endfor

## cosine: the length of a row does not count; distances in [0, 2]
%!test
%! rand ("state", 32);  randn ("state", 32);
%! data = randn (40, 5);
%! scaled = data .* (1 + 99 * rand (40, 1));
%! [idx, dist] = gpu_knn (data, [], 5, "metric", "cosine", "backend", B);
%! [idx2, dist2] = gpu_knn (scaled, [], 5, "metric", "cosine", "backend", B);
%! assert (idx2, idx);
%! assert (dist2, dist, 1e-12);
%! [near, zero] = gpu_knn (data, 2 * data(1:3,:), 1, "metric", "cosine", "backend", B);
%! assert (near, [1; 2; 3]);
%! assert (zero, [0; 0; 0], 1e-12);
%! [~, opposite] = gpu_knn ([1 0; -1 0], [2 0], 2, "metric", "cosine");
%! assert (opposite, [0 2]);
%! assert (all (dist(:) >= 0 & dist(:) <= 2));
%! ## single in, single out
%! [idxs, dists] = gpu_knn (single (data), [], 5, "metric", "cosine");
%! assert (class (dists), "single");
%! assert (double (dists), dist, 1e-5);
%! ## euclidean by name is the default
%! assert (gpu_knn (data, [], 3, "metric", "euclidean"), gpu_knn (data, [], 3));

## the cosine example of the help text
%!assert (gpu_knn ([1 0; 10 1; 0 3], [3 0.1], 2, "metric", "cosine"), [1 2])
%!assert (gpu_knn ([1 0; 10 1; 0 3], [3 0.1], 2), [1 3])

## bad k
%!error id=gpuml:knn:badK gpu_knn (rand (5, 2), [], 0)
%!error id=gpuml:knn:badK gpu_knn (rand (5, 2), rand (2, 2), 0)
%!error id=gpuml:knn:badK gpu_knn (rand (5, 2), [], -3)
%!error id=gpuml:knn:badK gpu_knn (rand (5, 2), [], 5)
%!error <^gpu_knn: k = 5 exceeds the 4 other points> gpu_knn (rand (5, 2), [], 5)
%!error id=gpuml:knn:badK gpu_knn (rand (5, 2), rand (3, 2), 6)
%!error id=gpuml:knn:badK gpu_knn (rand (5, 2), rand (3, 2), 1e12)
%!error id=gpuml:knn:badK gpu_knn (rand (5, 2), [], 2.5)
%!error id=gpuml:knn:badK gpu_knn (rand (5, 2), [], NaN)
%!error id=gpuml:knn:badK gpu_knn (rand (5, 2), [], [1 2])
%!error id=gpuml:knn:badK gpu_knn (rand (5, 2))
## non-finite data or query
%!error id=gpuml:knn:nonFinite gpu_knn ([1 2; NaN 4; 5 6], [], 1)
%!error id=gpuml:knn:nonFinite gpu_knn ([1 2; 3 4; 5 Inf], [], 1)
%!error id=gpuml:knn:nonFinite gpu_knn ([1 2; 3 4], [0 -Inf], 1)
%!error id=gpuml:knn:nonFinite gpu_knn (single ([1 2; 3 4]), single ([0 NaN]), 1)
%!error <query contains NA/NaN at row 1, column 2> gpu_knn ([1 2; 3 4], [0 NaN], 1)
## shapes and types
%!error id=gpuml:knn:dimMismatch gpu_knn (rand (5, 3), rand (2, 2), 1)
%!error id=gpuml:knn:badData gpu_knn (zeros (0, 2), rand (2, 2), 1)
%!error id=gpuml:knn:badData gpu_knn (rand (5, 2), zeros (0, 2), 1)
%!error id=gpuml:knn:badType gpu_knn (rand (5, 2) + 1i, [], 1)
%!error id=gpuml:knn:badType gpu_knn (sparse (rand (5, 2)), [], 1)
%!error id=gpuml:knn:badType gpu_knn ({1, 2}, [], 1)
## options
%!error id=gpuml:badPrecision gpu_knn (rand (5, 2), [], 1, "precision", "half")
%!error <use "auto", "double" or "single"> gpu_knn (rand (5, 2), [], 1, "precision", "half")
%!error id=gpuml:badOption gpu_knn (rand (5, 2), [], 1, "precision", 2)
%!error id=gpuml:badBackend gpu_knn (rand (5, 2), [], 1, "backend", "gpu")
%!error id=gpuml:badOption gpu_knn (rand (5, 2), [], 1, "backend", 2)
%!error id=gpuml:badOption gpu_knn (rand (5, 2), [], 1, "algorithm", "kd_tree")
%!error id=gpuml:badOption gpu_knn (rand (5, 2), [], 1, "backend")
%!error id=gpuml:badOption gpu_knn (rand (5, 2), [], 1, "verbose", "yes")
## metric
%!error id=gpuml:badMetric gpu_knn (rand (5, 2), [], 1, "metric", "manhattan")
%!error <unknown metric "manhattan"> gpu_knn (rand (5, 2), [], 1, "metric", "manhattan")
%!error id=gpuml:badOption gpu_knn (rand (5, 2), [], 1, "metric", 2)
%!error id=gpuml:knn:zeroRow gpu_knn ([1 2; 0 0; 3 4], [], 1, "metric", "cosine")
%!error <row 2 of the data is all zeros> gpu_knn ([1 2; 0 0; 3 4], [], 1, "metric", "cosine")
%!error <row 2 of the query is all zeros> gpu_knn ([1 2; 3 4], [1 1; 0 0], 1, "metric", "cosine")
%!error id=gpuml:knn:zeroRow gpu_knn (single ([1 2; 3 4]), single ([0 0]), 1, "metric", "cosine")
%!error <Invalid call> gpu_knn ()
## devices: checked by the core, ignored on the CPU; the split over shards (GPUML_SHARDS,
## the development knob that stands for several devices) gives the answer of one shard
%!error id=gpuml:badDevice gpu_knn (rand (5, 2), [], 1, "backend", "cpu", "devices", [0 0])
%!error <listed twice> gpu_knn (rand (5, 2), [], 1, "backend", "cpu", "devices", [1 1])
%!error <CUDA ordinals> gpu_knn (rand (5, 2), [], 1, "backend", "cpu", "devices", -1)
%!error <CUDA ordinals> gpu_knn (rand (5, 2), [], 1, "backend", "cpu", "devices", 0.5)
%!error <"all"> gpu_knn (rand (5, 2), [], 1, "backend", "cpu", "devices", "most")
%!error id=gpuml:badOption gpu_knn (rand (5, 2), [], 1, "devices", {0})
%!error <one device> gpu_knn (gpu_knn_index (rand (5, 2), "backend", "cpu"), [], 1, "devices", 0)
%!test
%! data = rand (300, 3);  query = rand (40, 3);
%! [i1, d1] = gpu_knn (data, query, 7, "backend", "cpu");
%! [i2, d2] = gpu_knn (data, query, 7, "backend", "cpu", "devices", [0 1]);
%! [i3, d3] = gpu_knn (data, [], 7, "backend", "cpu", "devices", "all");
%! [i4, d4] = gpu_knn (data, [], 7, "backend", "cpu");
%! assert (isequal (i1, i2) && isequal (d1, d2) && isequal (i3, i4) && isequal (d3, d4));
%!test
%! data = rand (500, 4);  query = rand (60, 4);
%! [iq, dq] = gpu_knn (data, query, 9, "backend", B);
%! [is, ds] = gpu_knn (data, [], 9, "backend", B);
%! unwind_protect
%!   setenv ("GPUML_SHARDS", "5");  setenv ("GPUML_SHARD_THREADS", "2");
%!   [iq5, dq5] = gpu_knn (data, query, 9, "backend", B, "devices", 0);
%!   [is5, ds5] = gpu_knn (data, [], 9, "backend", B, "devices", "all");
%! unwind_protect_cleanup
%!   unsetenv ("GPUML_SHARDS");  unsetenv ("GPUML_SHARD_THREADS");
%! end_unwind_protect
%! assert (isequal (iq5, iq) && isequal (dq5, dq) && isequal (is5, is) && isequal (ds5, ds));
