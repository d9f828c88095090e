## -*- texinfo -*-
## @deftypefn {} {[@var{x}, @var{y}] =} gpuml_double (@var{x}, @var{y})
## Convert the inputs of a gpuml function that computes in double precision only:
## integer, logical and single matrices become double (@var{y} @code{[]} stays
## @code{[]}).  Everything else (complex, sparse, char, cell...) is left for the MEX
## gateway to reject with an error id.
##
## Private helper of the gpuml wrappers.
## @end deftypefn

function [x, y] = gpuml_double (x, y)

  if (nargin < 2)
    y = [];
  endif
  [x, y] = gpuml_float (x, y);
  if (isa (x, "single"))
    x = double (x);
  endif
  if (isa (y, "single"))
    y = double (y);
  endif

endfunction
