## -*- texinfo -*-
## @deftypefn  {} {@var{idx} =} gpu_mpi_knn (@var{data})
## @deftypefnx {} {@var{idx} =} gpu_mpi_knn (@var{data}, @var{query})
## @deftypefnx {} {@var{idx} =} gpu_mpi_knn (@var{data}, @var{query}, @var{k})
## @deftypefnx {} {@var{idx} =} gpu_mpi_knn (@dots{}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{idx}, @var{dist}, @var{info}] =} gpu_mpi_knn (@dots{})
## Exact @var{k} nearest neighbours across the ranks of an MPI job: @code{gpu_knn} on
## the rows of all ranks, each rank holding a block of them.
##
## For a job started as @code{mpirun -np @var{N} octave script.m}: every rank calls
## @code{gpu_mpi_knn} with its own rows (@code{MPI_COMM_WORLD}; MPI starts at the first
## call, see @code{gpu_mpi_rank}).  The global data are the ranks' blocks one after
## another in rank order: row @var{i} of rank @var{r} is global row @var{i} plus the
## rows of the ranks before it.  The answer is that of @code{gpu_knn} on all the rows
## in one process, bit for bit: the ranks' lists are merged by (distance, index).
##
## @strong{Inputs}
##
## @table @var
## @item data
## This rank's @var{n}-by-@var{d} rows (@var{n} may be 0 on some ranks); @var{d} the
## same on every rank.  Computed in double precision (single, integer and logical
## input are converted).
##
## @item query
## @var{m}-by-@var{d} queries, the same on every rank: each rank gets the neighbours of
## every query among all ranks' rows.  Omitted or @code{[]}: the data against itself;
## each rank gets the neighbours of its own rows among all ranks' rows, each row
## excluded by index.  The blocks then travel around a ring of the ranks, so a rank
## holds one other block at a time.
##
## @item k
## Number of neighbours, at most the global number of rows (minus one for a
## self-search).  Default 10.  The same on every rank.
## @end table
##
## @strong{Options}: @qcode{"backend"}, @qcode{"precision"}, @qcode{"metric"} and
## @qcode{"verbose"}, as for @code{gpu_knn}; the same on every rank.
##
## The option @qcode{"devices"} places each rank: @qcode{"local"} (the default, also
## @code{[]}) runs it on one GPU of its host, its number among the host's ranks modulo
## the host's GPUs (@code{mpirun -np 4} on a host of 4 GPUs uses each GPU once, 8 ranks
## two on each; a host without GPUs counts as one); device numbers such as @code{[0 1]}
## or @qcode{"all"} name those devices, on every rank, as for @code{gpu_knn}.  Another
## value (say @qcode{"locall"} or @code{-1}) is an error on every rank; on the CPU
## backend the value is checked and then ignored, with the same results.
##
## @strong{Outputs}
##
## @table @var
## @item idx
## @var{m}-by-@var{k} global 1-based row numbers (@var{m}: the queries, or this rank's
## rows for a self-search), as @code{gpu_knn} gives them on all the rows.
##
## @item dist
## The matching distances (double), ascending along each row; ties by the smaller
## global row.
##
## @item info
## Struct with fields @code{backend} (the backend that ran on this rank) and
## @code{rechecked}.
## @end table
##
## An error on one rank (a bad @var{k}, ranks that disagree on @var{d}, @var{k} or the
## form of the call) is the same error on every rank.  A gpuml built without MPI (see
## @code{gpuml_info ().mpi}) answers with an error saying so.
##
## @strong{Example}
##
## @example
## @group
## ## every rank: mpirun -np 3 octave --no-gui -q --eval "pkg load gpuml; script"
## rank = gpu_mpi_rank ();  size = gpu_mpi_size ();
## rand ("state", 1);  X = rand (900, 5);          # the same X on every rank here
## mine = (rank * 300 + 1):((rank + 1) * 300);     # this rank's rows
## [idx, dist] = gpu_mpi_knn (X(mine,:), [], 10);  # global rows of X
## isequal (idx, gpu_knn (X, [], 10)(mine,:))
##   @result{} 1
## @end group
## @end example
##
## @seealso{gpu_knn, gpu_mpi_rank, gpu_mpi_size, gpu_mpi_gmm, gpu_mpi_dpc}
## @end deftypefn

function [idx, dist, info] = gpu_mpi_knn (data, varargin)

  if (nargin < 1)
    print_usage ();
  endif
  [query, k, args] = gpuml_knn_args (varargin);
  opts = gpuml_parse_options ("gpu_mpi_knn",
                              struct ("backend", "auto", "precision", "auto",
                                      "metric", "euclidean", "verbose", false,
                                      "devices", "local"),
                              args);
  [data, query] = gpuml_double (data, query);
  try
    [idx, dist, backend, rechecked] = gpuml_mpi_mex ("knn", data, query, k, opts.backend,
                                                     opts.verbose, opts.precision,
                                                     opts.metric, opts.devices);
  catch err
    gpuml_rethrow (err, "gpu_mpi_knn", "gpuml_mpi_mex");
  end_try_catch
  info = struct ("backend", backend, "rechecked", rechecked);

endfunction


## Outside mpirun the job has one rank: the answers are gpu_knn's (tests/mpi/octave_mpi.m
## runs three ranks).
%!testif ; gpuml_info ().mpi
%! rand ("state", 21);
%! X = round (4 * rand (80, 3)) / 4;  Q = round (8 * rand (7, 3)) / 8;  # exact in single
%! [i1, d1, info] = gpu_mpi_knn (X, [], 6, "backend", "cpu");
%! [i0, d0] = gpu_knn (X, [], 6, "backend", "cpu");
%! assert (isequal (i1, i0) && isequal (d1, d0));
%! assert (info.backend, "cpu");
%! [i1, d1] = gpu_mpi_knn (single (X), Q, 5, "backend", "cpu");
%! [i0, d0] = gpu_knn (X, Q, 5, "backend", "cpu");
%! assert (isequal (i1, i0) && isequal (d1, d0) && isa (d1, "double"));
%! assert (size (gpu_mpi_knn (X)), [80 10]);

%!testif ; ! gpuml_info ().mpi
%! fail ("gpu_mpi_knn ([1 2; 3 4], [], 1)", "built without MPI");

## bad input: the same errors as gpu_knn, k against all ranks' rows
%!testif ; gpuml_info ().mpi
%! fail ('gpu_mpi_knn ([1 2; 3 4; 5 6], [], 3, "backend", "cpu")', "k");
%! try
%!   gpu_mpi_knn ({1, 2}, [], 1);
%!   error ("test:noError", "no error raised");
%! catch err
%!   assert (err.identifier, "gpuml:knn:badType");
%!   assert (strncmp (err.message, "gpu_mpi_knn: ", 13));
%! end_try_catch
%! fail ('gpu_mpi_knn ([1 2; 3 4], [1 2 3], 1)', "column");
%! fail ('gpu_mpi_knn ([1 2; NaN 4; 5 6], [], 1, "backend", "cpu")', "NaN");
%! fail ('gpu_mpi_knn ([1 2; 3 4], [], 1.5)', "whole number");
%! fail ('gpu_mpi_knn ([1 2; 3 4], [], 1, "metric", "manhattan")', "metric");

## devices: "local" (the default), numbers and "all" give the same answers on the CPU
%!testif ; gpuml_info ().mpi
%! X = [0 0; 1 0; 0 2; 3 3; 1 1];
%! i0 = gpu_mpi_knn (X, [], 2, "backend", "cpu");
%! for dev = {"local", "LOCAL", [], 0, [1 0], "all"}
%!   assert (isequal (gpu_mpi_knn (X, [], 2, "backend", "cpu", "devices", dev{1}), i0));
%! endfor
%!testif ; gpuml_info ().mpi
%! for bad = {"locall", -1, [0 0], {0}}
%!   try
%!     gpu_mpi_knn ([1 2; 3 4], [], 1, "devices", bad{1});
%!     error ("test:noError", "no error raised");
%!   catch err
%!     want = {"gpuml:badDevice", "gpuml:badOption"}{1 + iscell (bad{1})};
%!     assert (err.identifier, want);
%!   end_try_catch
%! endfor
%!error <Invalid call> gpu_mpi_knn ()
