## -*- texinfo -*-
## @deftypefn {} {@var{size} =} gpu_mpi_size ()
## The number of ranks of @code{MPI_COMM_WORLD}: @var{N} in a job started as
## @code{mpirun -np @var{N} octave script.m}, 1 outside @command{mpirun}.
##
## Starts MPI when nothing has started it, as every @code{gpu_mpi_*} function does; a
## gpuml built without MPI answers with an error saying so.
##
## @seealso{gpu_mpi_rank, gpu_mpi_finalize, gpu_mpi_knn, gpu_mpi_gmm, gpu_mpi_dpc}
## @end deftypefn

function size = gpu_mpi_size ()

  if (nargin != 0)
    print_usage ();
  endif
  try
    [~, size] = gpuml_mpi_mex ("start");
  catch err
    gpuml_rethrow (err, "gpu_mpi_size", "gpuml_mpi_mex");
  end_try_catch

endfunction


%!testif ; gpuml_info ().mpi
%! s = gpu_mpi_size ();
%! assert (isscalar (s) && s >= 1 && s == round (s));

%!testif ; ! gpuml_info ().mpi
%! fail ("gpu_mpi_size ()", "built without MPI");

%!error <called with too many inputs> gpu_mpi_size (1)
