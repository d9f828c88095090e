## -*- texinfo -*-
## @deftypefn {} {@var{rank} =} gpu_mpi_rank ()
## The rank of this process in @code{MPI_COMM_WORLD}, 0 to @code{gpu_mpi_size () - 1}.
##
## For a job started as @code{mpirun -np @var{N} octave script.m}, in which every rank
## calls @code{gpu_mpi_knn}, @code{gpu_mpi_gmm} or @code{gpu_mpi_dpc} on its own rows.
## The first call of any @code{gpu_mpi_*} function starts MPI when nothing has started
## it; gpuml then finalises it when Octave exits (or at @code{gpu_mpi_finalize}).  Run
## outside @command{mpirun}, the process is a job of one rank.  A gpuml built without
## MPI (see @code{gpuml_info ().mpi}) answers with an error saying so.
##
## @strong{Example}
##
## @example
## @group
## ## mpirun -np 3 octave --no-gui -q --eval "pkg load gpuml; my_script"
## rank = gpu_mpi_rank ();  size = gpu_mpi_size ();
## printf ("rank %d of %d\n", rank, size);
## @end group
## @end example
##
## @seealso{gpu_mpi_size, gpu_mpi_finalize, gpu_mpi_knn, gpu_mpi_gmm, gpu_mpi_dpc}
## @end deftypefn

function rank = gpu_mpi_rank ()

  if (nargin != 0)
    print_usage ();
  endif
  try
    rank = gpuml_mpi_mex ("start");
  catch err
    gpuml_rethrow (err, "gpu_mpi_rank", "gpuml_mpi_mex");
  end_try_catch

endfunction


%!testif ; gpuml_info ().mpi
%! r = gpu_mpi_rank ();
%! assert (isscalar (r) && r >= 0 && r < gpu_mpi_size () && r == round (r));

%!testif ; ! gpuml_info ().mpi
%! fail ("gpu_mpi_rank ()", "built without MPI");

%!error <called with too many inputs> gpu_mpi_rank (1)
