## -*- texinfo -*-
## @deftypefn {} {} gpuml_rethrow (@var{err}, @var{fname}, @var{mexname})
## Rethrow the error @var{err} raised in the MEX gateway @var{mexname} as an error
## of the user-facing function @var{fname}: Octave prefixes MEX error messages with
## the gateway's name, which users never call.  The identifier is kept.
##
## Private helper of the gpuml wrappers.
## @end deftypefn

function gpuml_rethrow (err, fname, mexname)

  msg = err.message;
  prefix = [mexname ": "];
  if (strncmp (msg, prefix, numel (prefix)))
    msg = [fname ": " msg(numel (prefix)+1:end)];
  endif
  rethrow (struct ("message", msg, "identifier", err.identifier, "stack", err.stack));

endfunction
