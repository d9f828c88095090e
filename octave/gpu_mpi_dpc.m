## -*- texinfo -*-
## @deftypefn  {} {@var{clusters} =} gpu_mpi_dpc (@var{X}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{clusters}, @var{info}] =} gpu_mpi_dpc (@dots{})
## Density peaks clustering across the ranks of an MPI job: @code{gpu_dpc} on the rows
## of all ranks, each rank holding a block of them.
##
## For a job started as @code{mpirun -np @var{N} octave script.m}: every rank calls
## @code{gpu_mpi_dpc} with its own rows (@code{MPI_COMM_WORLD}; MPI starts at the first
## call, see @code{gpu_mpi_rank}).  The global data are the ranks' blocks one after
## another in rank order.  The rows are gathered on every rank (each holds all the
## points); the density pass and then the delta pass are split into one part per rank,
## and the parts meet on every rank.  Every value is that of @code{gpu_dpc} on all the
## rows in one process, bit for bit; at most 2^31 - 1 rows over all ranks.
##
## @strong{Inputs}
##
## @table @var
## @item X
## This rank's rows (none on some ranks is allowed); the same number of columns on
## every rank.  Integer, logical and single input are computed in double precision.
## @end table
##
## @strong{Options}: @qcode{"dc"}, @qcode{"gaussian"}, @qcode{"gaussian_cutoff"},
## @qcode{"k"}, @qcode{"rho"}, @qcode{"delta"}, @qcode{"seed"}, @qcode{"backend"} and
## @qcode{"verbose"}, as for @code{gpu_dpc}, the same on every rank (every rank on the
## same backend).  The estimate of @qcode{"dc"} draws its sample with rank 0's seed.
## The fit cannot be interrupted (one rank cannot stop alone).
##
## The option @qcode{"devices"} places each rank: @qcode{"local"} (the default, also
## @code{[]}) runs it on one GPU of its host, its number among the host's ranks modulo
## the host's GPUs (@code{mpirun -np 4} on a host of 4 GPUs uses each GPU once, 8 ranks
## two on each; a host without GPUs counts as one); device numbers such as @code{[0 1]}
## or @qcode{"all"} name those devices, on every rank, as for @code{gpu_dpc}.  Another
## value (say @qcode{"locall"} or @code{-1}) is an error on every rank; on the CPU
## backend the value is checked and then ignored, with the same results.
##
## @strong{Outputs}
##
## @table @var
## @item clusters
## The cluster of each of this rank's rows, or @code{[]} without a selection of
## centres.
##
## @item info
## As for @code{gpu_dpc}: @code{rho}, @code{delta}, @code{gamma}, @code{nearest} and
## @code{halo} of this rank's rows, @code{nearest} and @code{peaks} as global 1-based
## rows (@code{peaks}, @code{dc} the same on every rank), and @code{rows}: the global
## rows of this rank's rows.
## @end table
##
## An error on one rank is the same error on every rank.  A gpuml built without MPI
## (see @code{gpuml_info ().mpi}) answers with an error saying so.
##
## @strong{Example}
##
## @example
## @group
## ## every rank: mpirun -np 3 octave --no-gui -q --eval "pkg load gpuml; script"
## rank = gpu_mpi_rank ();
## randn ("state", 1);
## X = [randn(200, 2); randn(200, 2) + 5; [randn(200, 1), randn(200, 1) + 7]];
## mine = (rank * 200 + 1):((rank + 1) * 200);
## [clusters, info] = gpu_mpi_dpc (X(mine,:), "k", 3);
## info.rows([1 end])'
##   @result{} 201   400   # on rank 1
## @end group
## @end example
##
## @seealso{gpu_dpc, gpu_dpc_clusters, gpu_mpi_rank, gpu_mpi_knn, gpu_mpi_gmm}
## @end deftypefn

function [clusters, info] = gpu_mpi_dpc (X, varargin)

  if (nargin < 1)
    print_usage ();
  endif
  [X, params, opts] = gpuml_dpc_args ("gpu_mpi_dpc", X, varargin,
                                      struct ("seed", [], "backend", "auto",
                                              "verbose", false, "devices", "local"));
  try
    [rho, delta, nearest, gamma, dc, backend, peaks, clusters, halo, rows] = ...
      gpuml_mpi_mex ("dpc", X, params, gpuml_seed (opts.seed), opts.backend, opts.verbose,
                     opts.devices);
  catch err
    gpuml_rethrow (err, "gpu_mpi_dpc", "gpuml_mpi_mex");
  end_try_catch
  info = struct ("rho", rho, "delta", delta, "nearest", nearest, "gamma", gamma,
                 "dc", dc, "dc_estimated", isempty (opts.dc),
                 "gaussian", logical (opts.gaussian), "peaks", peaks, "halo", halo,
                 "backend", backend, "rows", rows);

endfunction


## Outside mpirun the job has one rank: the fit is gpu_dpc's (tests/mpi/octave_mpi.m runs
## three ranks).
%!testif ; gpuml_info ().mpi
%! randn ("state", 23);
%! X = [randn(150, 2); randn(150, 2) + 6];
%! [c1, i1] = gpu_mpi_dpc (X, "dc", 0.5, "k", 2, "backend", "cpu");
%! [c0, i0] = gpu_dpc (X, "dc", 0.5, "k", 2, "backend", "cpu");
%! assert (isequal (c1, c0) && isequal (i1.peaks, i0.peaks) && isequal (i1.halo, i0.halo));
%! assert (isequal (i1.rho, i0.rho) && isequal (i1.delta, i0.delta));
%! assert (isequaln (i1.nearest, i0.nearest) && isequal (i1.gamma, i0.gamma));
%! assert (i1.rows, (1:300)');
%! [c1, i1] = gpu_mpi_dpc (X, "backend", "cpu", "seed", 3);
%! [~, i0] = gpu_dpc (X, "backend", "cpu", "seed", 3);
%! assert (isempty (c1) && i1.dc_estimated && isequal (i1.rho, i0.rho));

%!testif ; ! gpuml_info ().mpi
%! fail ("gpu_mpi_dpc (randn (20, 2))", "built without MPI");

## bad input: gpu_dpc's errors, k against all ranks' rows
%!testif ; gpuml_info ().mpi
%! fail ('gpu_mpi_dpc (randn (20, 2), "dc", 0.5, "k", 30)', "k");
%! fail ('gpu_mpi_dpc (randn (20, 2), "dc", -1)', "dc");
%! fail ('gpu_mpi_dpc ([1 2; Inf 4; 5 6], "dc", 1)', "Inf");
%! fail ('gpu_mpi_dpc (randn (20, 2), "gaussian", "yes")', "true or false");
%! try
%!   gpu_mpi_dpc ({1, 2});
%!   error ("test:noError", "no error raised");
%! catch err
%!   assert (err.identifier, "gpuml:dpc:badType");
%! end_try_catch
## devices: "local" (the default), numbers and "all" give the same fit on the CPU
%!testif ; gpuml_info ().mpi
%! randn ("state", 25);
%! X = [randn(60, 2); randn(60, 2) + 6];
%! [c0, i0] = gpu_mpi_dpc (X, "dc", 0.5, "k", 2, "backend", "cpu");
%! for dev = {"local", [], 0, "all"}
%!   [c1, i1] = gpu_mpi_dpc (X, "dc", 0.5, "k", 2, "backend", "cpu", "devices", dev{1});
%!   assert (isequal (c1, c0) && isequal (i1.rho, i0.rho) && isequal (i1.delta, i0.delta));
%! endfor
%!testif ; gpuml_info ().mpi
%! fail ('gpu_mpi_dpc (randn (20, 2), "devices", "locall")', 'unknown devices "locall"');
%! fail ('gpu_mpi_dpc (randn (20, 2), "devices", -1)', "-1");
%!error <Invalid call> gpu_mpi_dpc ()
