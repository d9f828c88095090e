## -*- texinfo -*-
## @deftypefn  {} {} gpu_knn_free (@var{ix})
## @deftypefnx {} {@var{freed} =} gpu_knn_free (@var{ix})
## Free the kNN index @var{ix} built by @code{gpu_knn_index}, and the memory it
## holds on the host and the GPU.
##
## Every copy of @var{ix} names the same index: after the call, searching any of
## them is an error.  Freeing an index that is already gone (freed before, or
## by @code{clear all} or @code{clear functions}) does nothing.  @var{ix} may be
## a struct array of indexes; @var{freed} (logical, the size of @var{ix}) is true
## for each index that was still alive.
##
## @strong{Example}
##
## @example
## @group
## ix = gpu_knn_index (rand (100, 3));
## idx = gpu_knn (ix, rand (5, 3), 4);
## gpu_knn_free (ix);
## freed = gpu_knn_free (ix)
##   @result{} freed = 0
## @end group
## @end example
##
## @seealso{gpu_knn_index, gpu_knn}
## @end deftypefn

function freed = gpu_knn_free (ix)

  if (nargin != 1)
    print_usage ();
  endif
  if (! (isstruct (ix) && isfield (ix, "gpuml_knn_index") && isfield (ix, "id")))
    error ("gpuml:knn:badIndex", "gpu_knn_free: not a kNN index: build one with gpu_knn_index");
  endif
  alive = false (size (ix));
  for i = 1:numel (ix)
    try
      alive(i) = gpuml_knn_index_mex ("free", ix(i).id);
    catch err
      gpuml_rethrow (err, "gpu_knn_free", "gpuml_knn_index_mex");
    end_try_catch
  endfor
  ## Print nothing for a plain call "gpu_knn_free (ix)".
  if (nargout > 0)
    freed = alive;
  endif

endfunction


## freed once: true, then false; the memory goes (the list of live indexes)
%!test
%! before = numel (gpuml_knn_index_mex ("list"));
%! ix = gpu_knn_index (rand (20, 3));
%! assert (numel (gpuml_knn_index_mex ("list")), before + 1);
%! assert (gpu_knn_free (ix), true);
%! assert (numel (gpuml_knn_index_mex ("list")), before);
%! assert (gpu_knn_free (ix), false);
%! fail ("gpu_knn (ix, [], 1)", "no longer exists");

## a plain call prints nothing
%!test
%! ix = gpu_knn_index (rand (20, 3));
%! assert (isempty (evalc ("gpu_knn_free (ix)")));

## a struct array of indexes, one of them freed before
%!test
%! ix = [gpu_knn_index(rand (9, 2)), gpu_knn_index(rand (7, 2)), gpu_knn_index(rand (8, 2))];
%! gpu_knn_free (ix(2));
%! assert (gpu_knn_free (ix), [true false true]);
%! assert (gpu_knn_free (ix'), [false; false; false]);

## the example of the help text
%!test
%! ix = gpu_knn_index (rand (100, 3));
%! idx = gpu_knn (ix, rand (5, 3), 4);
%! gpu_knn_free (ix);
%! assert (gpu_knn_free (ix), false);

%!error id=gpuml:knn:badIndex gpu_knn_free (rand (3))
%!error id=gpuml:knn:badIndex gpu_knn_free (struct ("id", 1))
%!error <not a kNN index> gpu_knn_free ("ix")
%!error <Invalid call> gpu_knn_free ()
