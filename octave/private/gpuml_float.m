## -*- texinfo -*-
## @deftypefn {} {[@var{x}, @var{y}] =} gpuml_float (@var{x}, @var{y})
## Convert the inputs of a gpuml function to the floating-point class the C core
## takes.  Integer and logical matrices become double; when either input is single,
## both become single (as Octave's own arithmetic does).  Everything else (complex,
## sparse, char, cell...) is left for the MEX gateway to reject with an error id.
##
## Private helper of the gpuml wrappers.
## @end deftypefn

function [x, y] = gpuml_float (x, y)

  if (nargin < 2)
    y = [];
  endif
  x = widen (x);
  y = widen (y);
  if (isa (x, "single") && isa (y, "double") && ! is_self (y))
    y = single (y);
  elseif (isa (y, "single") && isa (x, "double") && ! is_self (y))
    x = single (x);
  endif

endfunction

function x = widen (x)
  if ((isinteger (x) || islogical (x)) && ! issparse (x))
    x = double (x);
  endif
endfunction

## [] (0 x 0) stands for "the data itself" and keeps its class.
function tf = is_self (y)
  tf = isnumeric (y) && all (size (y) == 0);
endfunction
