## -*- texinfo -*-
## @deftypefn {} {[@var{X}, @var{params}, @var{opts}] =} gpuml_dpc_args (@var{fname}, @var{X}, @var{args}, @var{call_options})
## The arguments of a density peaks fit (@code{gpu_dpc}, @code{gpu_mpi_dpc}): the fit's
## name/value pairs and those of the struct @var{call_options} (the call's own options
## with their defaults: seed, backend, verbose, @dots{}).  @var{params}: the fit's
## parameters the user gave, as a cell @{name, value, @dots{}@} by the core's names
## (@code{[]} means not given; @qcode{"gaussian"} becomes the kernel's name);
## @var{opts}: every option, given or default.  Integer, logical and single @var{X}
## become double; other classes are left for the gateway to reject.
##
## Private helper of the gpuml wrappers.
## @end deftypefn

function [X, params, opts] = gpuml_dpc_args (fname, X, args, call_options)

  defaults = struct ("dc", [], "gaussian", false, "gaussian_cutoff", [], "k", [],
                     "rho", [], "delta", []);
  own = fieldnames (call_options);
  for i = 1:numel (own)
    defaults.(own{i}) = call_options.(own{i});
  endfor
  [opts, given] = gpuml_parse_options (fname, defaults, args);
  X = gpuml_double (X);
  params = {};
  for i = 1:2:numel (given)
    name = given{i};
    v = given{i+1};
    if (any (strcmp (name, own)) || isempty (v))
      continue;
    endif
    if (strcmp (name, "gaussian"))
      if (! ((islogical (v) || isnumeric (v)) && isscalar (v)))
        error ("gpuml:badOption", "%s: gaussian must be true or false", fname);
      endif
      name = "kernel";
      kernels = {"cutoff", "gaussian"};
      v = kernels{1 + (v != 0)};
    endif
    params(end+1:end+2) = {name, v};
  endfor

endfunction
