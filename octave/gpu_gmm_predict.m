## -*- texinfo -*-
## @deftypefn  {} {@var{labels} =} gpu_gmm_predict (@var{model}, @var{X})
## @deftypefnx {} {@var{labels} =} gpu_gmm_predict (@dots{}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{labels}, @var{z}, @var{uncertainty}] =} gpu_gmm_predict (@dots{})
## Classify the rows of @var{X} with a Gaussian mixture @var{model} fitted by
## @code{gpu_gmm}, on the GPU or the CPU.
##
## @var{X} must have the columns the model was fitted to.  @var{labels} (m-by-1)
## is the component of largest posterior probability of each row, @var{z}
## (m-by-G) the posterior probabilities and @var{uncertainty} (m-by-1) one minus
## the largest of them.  The model's own data give back its labels and @code{z}.
##
## Options: @qcode{"backend"} (@qcode{"auto"}, @qcode{"cpu"} or @qcode{"cuda"})
## and @qcode{"verbose"}, as for @code{gpu_gmm}.
##
## @strong{Example}
##
## @example
## @group
## randn ("state", 2);
## X = [randn(100, 2); randn(100, 2) + 5];
## [~, model] = gpu_gmm (X, 2, "seed", 1);
## labels = gpu_gmm_predict (model, [0 0; 5 5; 0.2 -0.1]);
## labels(1) == labels(3) && labels(1) != labels(2)
##   @result{} 1
## @end group
## @end example
##
## @seealso{gpu_gmm}
## @end deftypefn

function [labels, z, uncertainty] = gpu_gmm_predict (model, X, varargin)

  if (nargin < 2)
    print_usage ();
  endif
  if (! isstruct (model) || ! all (isfield (model, {"weights", "means", "covariances", "modelName"})))
    error ("gpuml:gmm:badModel",
           "gpu_gmm_predict: model must be the second output of gpu_gmm");
  endif
  opts = gpuml_parse_options ("gpu_gmm_predict",
                              struct ("backend", "auto", "verbose", false), varargin);
  if ((isnumeric (X) || islogical (X)) && ! issparse (X))
    X = double (X);
  endif
  try
    [labels, z, uncertainty] = gpuml_gmm_predict_mex (model.weights, model.means,
                                                      model.covariances, model.modelName,
                                                      X, opts.backend, opts.verbose);
  catch err
    gpuml_rethrow (err, "gpu_gmm_predict", "gpuml_gmm_predict_mex");
  end_try_catch

endfunction


%!shared X, model, labels
%! randn ("state", 21);
%! X = [randn(150, 3); randn(100, 3) * 0.5 + 4; randn(120, 3) + [8 0 -3]];
%! [labels, model] = gpu_gmm (X, 3, "seed", 2);

## the training data give back the fit's labels, z and uncertainty
%!test
%! [l, z, u] = gpu_gmm_predict (model, X);
%! assert (l, labels);
%! assert (z, model.z, 1e-10);
%! assert (u, model.uncertainty, 1e-10);

## each component's mean is classified to that component
%!assert (gpu_gmm_predict (model, model.means), (1:3)')

## with a GPU, the CUDA backend gives the same classes
%!testif ; gpuml_info ().device_count > 0
%! assert (gpu_gmm_predict (model, X, "backend", "cuda"), labels);

## the example of the help text
%!test
%! randn ("state", 2);
%! Y = [randn(100, 2); randn(100, 2) + 5];
%! [~, m] = gpu_gmm (Y, 2, "seed", 1);
%! l = gpu_gmm_predict (m, [0 0; 5 5; 0.2 -0.1]);
%! assert (l(1) == l(3) && l(1) != l(2));

%!error id=gpuml:gmm:dimMismatch gpu_gmm_predict (model, X(:, 1:2))
%!error id=gpuml:gmm:nonFinite gpu_gmm_predict (model, [X(1:3,:); NaN 0 0])
%!error id=gpuml:gmm:badModel gpu_gmm_predict (struct ("a", 1), X)
%!error id=gpuml:gmm:badModel gpu_gmm_predict (setfield (model, "weights", [0 0.5 0.5]), X)
%!error id=gpuml:gmm:badModel gpu_gmm_predict (setfield (model, "weights", [0.5 0.5]), X)
%!error id=gpuml:badOption gpu_gmm_predict (model, X, "covariance", "diag")
%!error <Invalid call> gpu_gmm_predict (model)
