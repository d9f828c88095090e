## -*- texinfo -*-
## @deftypefn {} {@var{ended} =} gpu_mpi_finalize ()
## Finalise MPI now, when gpuml started it; @var{ended} is @code{true} then, and
## @code{false} when there was nothing of gpuml's to end (MPI never started, started by
## someone else, already finalised, or a gpuml built without MPI).
##
## Not needed in a script: MPI that gpuml started is finalised when Octave exits.  After
## it, MPI cannot start again in this Octave session: the @code{gpu_mpi_*} functions
## give an error.
##
## @seealso{gpu_mpi_rank, gpu_mpi_size}
## @end deftypefn

function ended = gpu_mpi_finalize ()

  if (nargin != 0)
    print_usage ();
  endif
  try
    ended = gpuml_mpi_mex ("finalize");
  catch err
    gpuml_rethrow (err, "gpu_mpi_finalize", "gpuml_mpi_mex");
  end_try_catch

endfunction


## Not called here: the session's other tests still use MPI (tests/mpi/octave_mpi.m
## finalises a job of three ranks).
%!testif ; ! gpuml_info ().mpi
%! assert (gpu_mpi_finalize (), false);

%!error <called with too many inputs> gpu_mpi_finalize (1)
