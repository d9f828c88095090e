## -*- texinfo -*-
## @deftypefn  {} {@var{labels} =} gpu_mpi_gmm (@var{X})
## @deftypefnx {} {@var{labels} =} gpu_mpi_gmm (@var{X}, @var{K})
## @deftypefnx {} {@var{labels} =} gpu_mpi_gmm (@dots{}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{labels}, @var{model}] =} gpu_mpi_gmm (@dots{})
## Gaussian mixtures across the ranks of an MPI job: @code{gpu_gmm} on the rows of all
## ranks, each rank holding a block of them.
##
## For a job started as @code{mpirun -np @var{N} octave script.m}: every rank calls
## @code{gpu_mpi_gmm} with its own rows (@code{MPI_COMM_WORLD}; MPI starts at the first
## call, see @code{gpu_mpi_rank}) and gets the same model.  Each rank runs EM on its
## rows and the ranks' M-step statistics are combined in rank order, so every rank has
## the same bits; the starts see the same rows on every rank.  The fit is that of
## @code{gpu_gmm} on all the rows in one process up to the order of the sums: the same
## model, @var{G} and labels, log-likelihoods equal to about 1e-10 relative.
##
## @strong{Inputs}
##
## @table @var
## @item X
## This rank's rows, at least one on every rank; the same number of columns on every
## rank.  Single, integer and logical matrices are converted to double.
##
## @item K
## The numbers of components to try, from 1 to the global number of rows; default
## @code{1:9}.
## @end table
##
## @strong{Options}: @qcode{"modelNames"}, @qcode{"init"}, @qcode{"max_iter"},
## @qcode{"tol"}, @qcode{"reg"}, @qcode{"n_init"}, @qcode{"seed"}, @qcode{"backend"}
## and @qcode{"verbose"}, as for @code{gpu_gmm}, the same on every rank (every rank on
## the same backend).  The seed is rank 0's: each rank may draw its own (the default,
## from @code{rand}) and the ranks still fit one model.  Progress is each rank's; the
## fit cannot be interrupted (one rank cannot stop alone).
##
## The option @qcode{"devices"} places each rank: @qcode{"local"} (the default, also
## @code{[]}) runs it on one GPU of its host, its number among the host's ranks modulo
## the host's GPUs (@code{mpirun -np 4} on a host of 4 GPUs uses each GPU once, 8 ranks
## two on each; a host without GPUs counts as one); device numbers such as @code{[0 1]}
## or @qcode{"all"} name those devices, on every rank, as for @code{gpu_gmm}.  Another
## value (say @qcode{"locall"} or @code{-1}) is an error on every rank; on the CPU
## backend the value is checked and then ignored, with the same results.
##
## @strong{Outputs}
##
## @table @var
## @item labels
## The component of each of this rank's rows (1 to G).
##
## @item model
## As for @code{gpu_gmm}, the same on every rank, but for @code{z} and
## @code{uncertainty}, which are this rank's rows.
## @end table
##
## An error on one rank is the same error on every rank.  A gpuml built without MPI
## (see @code{gpuml_info ().mpi}) answers with an error saying so.
##
## @strong{Example}
##
## @example
## @group
## ## every rank: mpirun -np 2 octave --no-gui -q --eval "pkg load gpuml; script"
## rank = gpu_mpi_rank ();
## randn ("state", 1);  X = [randn(200, 2); randn(100, 2) + 6];  # the same X everywhere
## mine = (rank * 150 + 1):((rank + 1) * 150);
## [labels, model] = gpu_mpi_gmm (X(mine,:), 1:4, "seed", 1);
## model.G
##   @result{} 2
## @end group
## @end example
##
## @seealso{gpu_gmm, gpu_gmm_predict, gpu_mpi_rank, gpu_mpi_knn, gpu_mpi_dpc}
## @end deftypefn

function [labels, model] = gpu_mpi_gmm (X, varargin)

  if (nargin < 1)
    print_usage ();
  endif
  [X, params, opts] = gpuml_gmm_args ("gpu_mpi_gmm", X, varargin,
                                      struct ("seed", [], "backend", "auto",
                                              "verbose", false, "devices", "local"));
  try
    [labels, model] = gpuml_mpi_mex ("gmm", X, params, gpuml_seed (opts.seed),
                                     opts.backend, opts.verbose, opts.devices);
  catch err
    gpuml_rethrow (err, "gpu_mpi_gmm", "gpuml_mpi_mex");
  end_try_catch

endfunction


## Outside mpirun the job has one rank: the fit is gpu_gmm's (tests/mpi/octave_mpi.m runs
## three ranks).
%!testif ; gpuml_info ().mpi
%! randn ("state", 22);
%! X = [randn(120, 2); randn(80, 2) + 5];
%! o = {"modelNames", {"VVV", "EII"}, "seed", 4, "backend", "cpu"};
%! [l1, m1] = gpu_mpi_gmm (X, 1:3, o{:});
%! [l0, m0] = gpu_gmm (X, 1:3, o{:});
%! assert (isequal (l1, l0) && strcmp (m1.modelName, m0.modelName) && m1.G == m0.G);
%! assert (m1.loglik, m0.loglik, 1e-10 * abs (m0.loglik));
%! assert (m1.bic, m0.bic, -1e-10);
%! assert (size (m1.z), [200 m1.G]);

%!testif ; ! gpuml_info ().mpi
%! fail ("gpu_mpi_gmm (randn (20, 2), 2)", "built without MPI");

## bad input: gpu_gmm's errors, G against all ranks' rows
%!testif ; gpuml_info ().mpi
%! fail ("gpu_mpi_gmm (randn (5, 2), 6)", "G = 6 exceeds the 5 rows");
%! fail ("gpu_mpi_gmm ([1 2; NaN 4; 5 6; 7 8], 1)", "NaN");
%! fail ('gpu_mpi_gmm (randn (20, 2), 2, "modelNames", "XYZ")', "XYZ");
%! fail ('gpu_mpi_gmm (randn (20, 2), 2, "seed", -1)', "seed");
%! try
%!   gpu_mpi_gmm ({1, 2}, 1);
%!   error ("test:noError", "no error raised");
%! catch err
%!   assert (err.identifier, "gpuml:gmm:badType");
%! end_try_catch
## devices: "local" (the default), numbers and "all" give the same fit on the CPU
%!testif ; gpuml_info ().mpi
%! randn ("state", 24);
%! X = [randn(40, 2); randn(30, 2) + 5];
%! [l0, m0] = gpu_mpi_gmm (X, 1:2, "modelNames", "VVV", "seed", 2, "backend", "cpu");
%! for dev = {"local", [], 0, "all"}
%!   [l1, m1] = gpu_mpi_gmm (X, 1:2, "modelNames", "VVV", "seed", 2, "backend", "cpu",
%!                           "devices", dev{1});
%!   assert (isequal (l1, l0) && m1.loglik == m0.loglik);
%! endfor
%!testif ; gpuml_info ().mpi
%! fail ('gpu_mpi_gmm (randn (20, 2), 2, "devices", "locall")', 'unknown devices "locall"');
%! fail ('gpu_mpi_gmm (randn (20, 2), 2, "devices", -1)', "-1");
%!error id=gpuml:badOption gpu_mpi_gmm (randn (20, 2), 2, "iterations", 5)
%!error <Invalid call> gpu_mpi_gmm ()
