## -*- texinfo -*-
## @deftypefn {} {[@var{X}, @var{params}, @var{opts}] =} gpuml_gmm_args (@var{fname}, @var{X}, @var{args}, @var{call_options})
## The arguments of a mixture fit (@code{gpu_gmm}, @code{gpu_mpi_gmm}): @var{K} by
## position, then the model's name/value pairs and those of the struct
## @var{call_options} (the call's own options with their defaults: seed, backend,
## verbose, @dots{}).  @var{params}: the model's parameters the user gave, as a cell
## @{name, value, @dots{}@} by the core's names (the core holds their defaults, @var{K} =
## 1:9 among them); @var{opts}: every option, given or default.  Numeric and logical
## @var{X} become double; anything else is left for the gateway to reject.
##
## Private helper of the gpuml wrappers.
## @end deftypefn

function [X, params, opts] = gpuml_gmm_args (fname, X, args, call_options)

  params = {};
  if (! isempty (args) && ! ischar (args{1}))
    params = {"G", args{1}};  # K, given by position
    args(1) = [];
  endif
  defaults = struct ("modelNames", [], "init", "hc", "max_iter", 1000, "tol", 1e-5,
                     "reg", 0, "n_init", 1);
  own = fieldnames (call_options);
  for i = 1:numel (own)
    defaults.(own{i}) = call_options.(own{i});
  endfor
  [opts, given] = gpuml_parse_options (fname, defaults, args);
  if ((isnumeric (X) || islogical (X)) && ! issparse (X))
    X = double (X);
  endif
  for i = 1:2:numel (given)
    if (strcmpi (given{i}, "modelNames"))
      params(end+1:end+2) = {"models", given{i+1}};  # the core's name
    elseif (! any (strcmp (given{i}, own)))
      params(end+1:end+2) = given(i:i+1);
    endif
  endfor

endfunction
