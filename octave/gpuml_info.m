## -*- texinfo -*-
## @deftypefn {} {@var{s} =} gpuml_info ()
## What gpuml was built with and which GPU it found.
##
## Never fails for lack of a GPU: without one, @code{device_count} is 0 and
## @code{cuda_message} says why CUDA cannot be used.
##
## @strong{Output}
##
## A scalar struct @var{s} with the fields:
##
## @table @code
## @item version
## gpuml version, e.g. @qcode{"0.1.0"}.
## @item openmp
## @code{true} when the CPU backend was built with OpenMP.
## @item max_threads
## OpenMP threads available to the CPU backend.
## @item cuda_compiled
## @code{true} when the CUDA backend was built.
## @item cuda_runtime_version
## CUDA runtime version (e.g. 12040 for 12.4); 0 when not built.
## @item cuda_driver_version
## CUDA driver version; 0 when there is no driver.
## @item device_count
## Number of CUDA devices found (0 when none, or when CUDA was not built).
## @item device_name
## Name of device 0, @qcode{""} when none.
## @item compute_capability
## [@var{major}, @var{minor}] of device 0, [0, 0] when none.
## @item device_memory
## Total memory of device 0 in bytes.
## @item cuda_message
## Why CUDA is unusable, @qcode{""} when it is usable (no device, or a GPU this
## build has no device code for).
## @item cuda_architectures
## The device code built, e.g. @qcode{"sm_75 sm_80 sm_86 sm_89 sm_90 compute_90"}.
## @item compiler
## The C compiler that built the library.
## @item environment
## The environment variables gpuml reads: a cell array, name and meaning per row.
## @item mpi
## @code{true} when the package was built with MPI (@code{gpu_mpi_knn},
## @code{gpu_mpi_gmm}, @code{gpu_mpi_dpc} under @command{mpirun}); without it those
## functions give an error saying so.
## @end table
##
## @strong{Example}
##
## @example
## @group
## s = gpuml_info ();
## if (s.device_count > 0)
##   printf ("GPU: %s, %.1f GiB\n", s.device_name, s.device_memory / 2^30);
## else
##   printf ("CPU only (%d threads): %s\n", s.max_threads, s.cuda_message);
## endif
## @end group
## @end example
##
## @seealso{gpu_knn, gpu_dist, gpu_mpi_rank}
## @end deftypefn

function s = gpuml_info ()

  if (nargin != 0)
    print_usage ();
  endif
  try
    s = gpuml_info_mex ();
  catch err
    gpuml_rethrow (err, "gpuml_info", "gpuml_info_mex");
  end_try_catch

endfunction


%!test
%! s = gpuml_info ();
%! assert (isstruct (s) && isscalar (s));
%! fields = {"version", "openmp", "max_threads", "cuda_compiled", ...
%!           "cuda_runtime_version", "cuda_driver_version", "device_count", ...
%!           "device_name", "compute_capability", "device_memory", "cuda_message"};
%! assert (all (isfield (s, fields)));
%! assert (ischar (s.version) && ! isempty (s.version));
%! assert (isfield (s, "mpi") && islogical (s.mpi) && isscalar (s.mpi));
%! assert (islogical (s.openmp) && islogical (s.cuda_compiled));
%! assert (s.max_threads >= 1);
%! assert (s.device_count >= 0 && s.device_count == round (s.device_count));
%! assert (size (s.compute_capability), [1 2]);
%! if (s.device_count == 0)
%!   assert (! isempty (s.cuda_message));
%!   assert (s.device_name, "");
%! else
%!   assert (s.cuda_compiled);
%!   assert (! isempty (s.device_name));
%!   assert (s.device_memory > 0);
%! endif
%! if (! s.cuda_compiled)
%!   assert (s.device_count, 0);
%!   assert (s.cuda_runtime_version, 0);
%! endif

%!error <called with too many inputs> gpuml_info (1)
