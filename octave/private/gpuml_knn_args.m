## -*- texinfo -*-
## @deftypefn {} {[@var{query}, @var{k}, @var{args}] =} gpuml_knn_args (@var{args})
## The positional arguments of a kNN search (@code{gpu_knn}, @code{gpu_mpi_knn}):
## @var{query} (default @code{[]}, the data against itself) and @var{k} (default 10),
## which come before the first option name; @var{args} comes back without them.
##
## Private helper of the gpuml wrappers.
## @end deftypefn

function [query, k, args] = gpuml_knn_args (args)

  query = [];
  k = 10;
  if (! isempty (args) && ! ischar (args{1}))
    query = args{1};
    args(1) = [];
    if (! isempty (args) && ! ischar (args{1}))
      k = args{1};
      args(1) = [];
    endif
  endif

endfunction
