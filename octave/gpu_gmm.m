## -*- texinfo -*-
## @deftypefn  {} {@var{labels} =} gpu_gmm (@var{X})
## @deftypefnx {} {@var{labels} =} gpu_gmm (@var{X}, @var{K})
## @deftypefnx {} {@var{labels} =} gpu_gmm (@dots{}, @var{name}, @var{value}, @dots{})
## @deftypefnx {} {[@var{labels}, @var{model}] =} gpu_gmm (@dots{})
## Fit a Gaussian mixture model to the rows of @var{X} by EM, in double precision,
## on the GPU when there is one and on the CPU (OpenMP and BLAS) otherwise, with
## the same results.
##
## A mixture is fitted for each number of components in @var{K} and each of
## mclust's covariance models, and the one of largest BIC is kept (BIC = 2 log L -
## p log n with p free parameters counted as mclust counts them; larger is better).
## Each fit starts, as mclust's do, from a model-based agglomerative clustering (VVV
## criterion, SVD-scaled data, at most 2,000 rows chosen deterministically), so the
## default fit needs no seed; @qcode{"init"}, @qcode{"kmeans++"} draws greedy
## k-means++ centres from the seed instead.  A component that collapses (less than
## one point's worth of probability, or a covariance that is not positive definite
## even with @qcode{"reg"}) is restarted at the worst-fitted points; a @var{K} and
## model where that keeps happening, or whose start is singular, gets a NaN BIC.
##
## @strong{Inputs}
##
## @table @var
## @item X
## @var{n}-by-@var{d} data, one observation per row; finite values.  Single,
## integer and logical matrices are converted to double.
##
## @item K
## The numbers of components to try (whole numbers from 1 to @var{n}); default
## @code{1:9}.
## @end table
##
## @strong{Options} (name/value pairs; names are case-insensitive)
##
## @table @asis
## @item @qcode{"modelNames"}
## A name or a cell array of mclust's names: EII, VII, EEI, VEI, EVI, VVI, EEE, VEE,
## EVE, VVE, EEV, VEV, EVV, VVV (@qcode{"full"}, @qcode{"diag"},
## @qcode{"spherical"} are VVV, VVI, VII).  By default all that apply, as mclust:
## the six spherical and diagonal ones when there are no more rows than columns,
## E and V (EII, VII) in one dimension.
##
## @item @qcode{"init"}
## @qcode{"hc"} (default) or @qcode{"kmeans++"}.
##
## @item @qcode{"max_iter"}
## EM iterations of one fit at most (default 1000).
##
## @item @qcode{"tol"}
## Stop when the log-likelihood changes by at most @var{tol} times (1 + its
## absolute value), mclust's test and default (1e-5; 0 runs @qcode{"max_iter"}
## iterations).
##
## @item @qcode{"reg"}
## Added to the diagonal of every covariance matrix (default 0, as mclust).
##
## @item @qcode{"n_init"}
## Starts per @var{K} and model (the first from @qcode{"init"}, the others
## k-means++); the fit of largest log-likelihood is kept (default 1).
##
## @item @qcode{"seed"}
## A whole number >= 0; by default one is drawn from @code{rand}, so that
## @code{rand ("seed", @dots{})} makes fits reproducible.
##
## @item @qcode{"backend"}
## @qcode{"auto"} (default), @qcode{"cpu"} or @qcode{"cuda"}.
##
## @item @qcode{"verbose"}
## @code{true} to print progress (default @code{false}).
##
## @item @qcode{"devices"}
## The CUDA devices to spread each EM pass over: @code{[]} (default: one device),
## device numbers such as @code{[0 1]}, or @qcode{"all"}.  The rows are split over
## the devices and their M-step statistics combined: the fit is one device's up to
## the order of sums.  Numbers must be whole, 0 or more and distinct; on the CPU
## backend the list is checked and then ignored.
## @end table
##
## @strong{Outputs}
##
## @table @var
## @item labels
## @var{n}-by-1 component of largest posterior probability of each row (1 to G).
##
## @item model
## Struct with fields @code{G} (components chosen), @code{modelName} (the model
## chosen), @code{weights} (1-by-G), @code{means} (G-by-d, one row per component),
## @code{covariances} (d-by-d-by-G), @code{z} (n-by-G posterior probabilities),
## @code{uncertainty} (n-by-1, one minus the largest probability), @code{loglik},
## @code{bic} (the BIC table: one row per @var{K} tried, one column per model, NaN
## where a fit failed), @code{K} and @code{modelNames} (its rows and columns),
## @code{n_iter}, @code{converged} and @code{backend}.  Pass it to
## @code{gpu_gmm_predict} to classify new data.
## @end table
##
## Press Ctrl-C to interrupt a long fit.
##
## @strong{Example}
##
## @example
## @group
## randn ("state", 1);
## X = [randn(200, 2); randn(100, 2) + 6];
## [labels, model] = gpu_gmm (X, 1:4);
## model.G
##   @result{} 2
## accumarray (labels, 1)'
##   @result{} 200   100
## @end group
## @end example
##
## @seealso{gpu_gmm_predict, gpu_knn, gpuml_info}
## @end deftypefn

function [labels, model] = gpu_gmm (X, varargin)

  if (nargin < 1)
    print_usage ();
  endif
  [X, params, opts] = gpuml_gmm_args ("gpu_gmm", X, varargin,
                                      struct ("seed", [], "backend", "auto",
                                              "verbose", false, "devices", []));
  try
    [labels, model] = gpuml_gmm_mex (X, params, gpuml_seed (opts.seed), opts.backend,
                                     opts.verbose, opts.devices);
  catch err
    gpuml_rethrow (err, "gpu_gmm", "gpuml_gmm_mex");
  end_try_catch

endfunction


%!shared B
%! B = getenv ("GPUML_TEST_BACKEND");
%! if (isempty (B))
%!   B = "auto";
%! endif

## Adjusted Rand index of two labellings.
%!function r = ari (a, b)
%!  [~, ~, a] = unique (a(:));  [~, ~, b] = unique (b(:));
%!  t = accumarray ([a b], 1);
%!  c2 = @(v) sum (v(:) .* (v(:) - 1) / 2);
%!  total = c2 (numel (a));
%!  e = c2 (sum (t, 2)) * c2 (sum (t, 1)) / total;
%!  top = (c2 (sum (t, 2)) + c2 (sum (t, 1))) / 2;
%!  r = (c2 (t) - e) / (top - e);
%!endfunction

## Separated clusters: correlated ("full"), axis-aligned ("diag") or round ("spherical").
%!function [X, truth] = mixture (n, d, G, spread, state, shape)
%!  randn ("state", state);  rand ("state", state);
%!  sizes = round (n * (1:G) / sum (1:G));  sizes(end) = n - sum (sizes(1:end-1));
%!  X = zeros (n, d);  truth = zeros (n, 1);  r = 0;
%!  for k = 1:G
%!    A = diag (0.5 + rand (d, 1));
%!    if (strcmp (shape, "full"))
%!      A += tril (rand (d) - 0.5, -1);
%!    elseif (strcmp (shape, "spherical"))
%!      A = A(1) * eye (d);
%!    endif
%!    rows = r + (1:sizes(k));
%!    X(rows,:) = randn (sizes(k), d) * A' + spread * rand (1, d);
%!    truth(rows) = k;  r += sizes(k);
%!  endfor
%!endfunction

## classes recovered and the true K chosen, for every covariance structure
%!test
%! names = struct ("full", "VVV", "diag", "VVI", "spherical", "VII");
%! for cov = {"full", "diag", "spherical"}
%!   [X, truth] = mixture (900, 2, 3, 40, 3, cov{1});
%!   [labels, model] = gpu_gmm (X, 1:5, "modelNames", cov{1}, "backend", B);
%!   assert (model.G, 3);
%!   assert (ari (labels, truth) >= 0.95);
%!   assert (model.K, 1:5);
%!   assert (model.modelNames, {names.(cov{1})});
%!   assert (all (isfinite (model.bic)));
%!   [~, best] = max (model.bic);
%!   assert (best, 3);
%!   assert (model.converged);
%!   assert (model.modelName, names.(cov{1}));
%! endfor

## all 14 models by default: a BIC table of K rows and 14 columns; a shared
## covariance is found as EEE
%!test
%! randn ("state", 3);
%! S = [2 0.8 0.3; 0.8 1 0.2; 0.3 0.2 0.5];
%! X = [randn(300, 3) * chol(S); randn(250, 3) * chol(S) + [6 1 -2]; randn(200, 3) * chol(S) + [-3 7 3]];
%! [labels, model] = gpu_gmm (X, 1:5, "backend", B);
%! assert (size (model.bic), [5 14]);
%! assert (model.modelNames, {"EII", "VII", "EEI", "VEI", "EVI", "VVI", "EEE", "VEE", ...
%!                            "EVE", "VVE", "EEV", "VEV", "EVV", "VVV"});
%! assert (model.modelName, "EEE");
%! assert (model.G, 3);
%! [l2, m2] = gpu_gmm (X, 3, "modelNames", {"EEE", "VVV"}, "backend", B);
%! assert (m2.modelNames, {"EEE", "VVV"});
%! assert (m2.bic(1), model.bic(3, 7), 1e-9 * abs (m2.bic(1)));

## the model's fields and sizes
%!test
%! [X, truth] = mixture (500, 3, 2, 30, 4, "full");
%! [labels, model] = gpu_gmm (X, 2, "modelNames", "VVV", "seed", 5, "backend", B);
%! assert (size (labels), [500 1]);
%! assert (all (labels == 1 | labels == 2));
%! assert (model.modelName, "VVV");
%! assert (size (model.weights), [1 2]);
%! assert (sum (model.weights), 1, 1e-12);
%! assert (size (model.means), [2 3]);
%! assert (size (model.covariances), [3 3 2]);
%! assert (size (model.z), [500 2]);
%! assert (sum (model.z, 2), ones (500, 1), 1e-12);
%! assert (model.uncertainty, 1 - max (model.z, [], 2), 1e-14);
%! [~, l] = max (model.z, [], 2);
%! assert (labels, l);
%! for k = 1:2
%!   assert (model.covariances(:,:,k), model.covariances(:,:,k)');
%!   assert (model.means(k,:), mean (X(labels == k,:)), 0.2);
%! endfor
%! npar = 1 + 2 * 3 + 2 * 6;
%! assert (model.bic, 2 * model.loglik - npar * log (500), 1e-8);
%! if (! strcmp (B, "auto"))
%!   assert (model.backend, B);
%! endif

## reproducible with a seed and with rand's state; n_init keeps the best start
%!test
%! [X, truth] = mixture (600, 3, 4, 6, 5, "full");
%! o = {"modelNames", "VVV", "init", "kmeans++", "backend", B};
%! [l1, m1] = gpu_gmm (X, 4, "seed", 7, o{:});
%! [l2, m2] = gpu_gmm (X, 4, "seed", 7, o{:});
%! assert (l1, l2);
%! assert (m1, m2);
%! rand ("seed", 11);  [~, a] = gpu_gmm (X, 4, o{:});
%! rand ("seed", 11);  [~, b] = gpu_gmm (X, 4, o{:});
%! assert (a.loglik, b.loglik);
%! [~, many] = gpu_gmm (X, 4, "seed", 7, "n_init", 3, o{:});
%! assert (many.loglik >= m1.loglik);
%! [~, h1] = gpu_gmm (X, 4, "modelNames", "VVV", "seed", 1, "backend", B);
%! [~, h2] = gpu_gmm (X, 4, "modelNames", "VVV", "seed", 2, "backend", B);
%! assert (h1.loglik, h2.loglik);  # the hierarchical start needs no seed

## diagonal and spherical covariances have their form
%!test
%! [X, truth] = mixture (400, 3, 2, 30, 6, "diag");
%! [~, md] = gpu_gmm (X, 2, "modelNames", "diag", "backend", B);
%! [~, ms] = gpu_gmm (X, 2, "modelNames", "SPHERICAL", "backend", B);
%! assert ({md.modelName, ms.modelName}, {"VVI", "VII"});
%! for k = 1:2
%!   assert (md.covariances(:,:,k), diag (diag (md.covariances(:,:,k))));
%!   assert (ms.covariances(:,:,k), ms.covariances(1,1,k) * eye (3));
%! endfor

## single and integer data are fitted in double
%!test
%! [X, truth] = mixture (300, 2, 2, 30, 8, "full");
%! [l1, m1] = gpu_gmm (X, 2, "seed", 3);
%! [l2, m2] = gpu_gmm (single (X), 2, "seed", 3);
%! assert (l2, l1);
%! assert (class (m2.means), "double");
%! [l3, m3] = gpu_gmm (int32 (round (10 * X)), 2, "seed", 3);
%! assert (ari (l3, truth) >= 0.95);

## verbose prints progress
%!test
%! out = evalc ('gpu_gmm (randn (60, 2), 1:2, "verbose", true, "backend", "cpu");');
%! assert (! isempty (strfind (out, "gpuml gmm")));
%! out = evalc ('gpu_gmm (randn (60, 2), 1:2, "backend", "cpu");');
%! assert (isempty (out));

## with a GPU, the CUDA backend agrees with the CPU from the same start
%!testif ; gpuml_info ().device_count > 0
%! [X, truth] = mixture (3000, 10, 4, 8, 9, "full");
%! for cov = {"VVV", "VVI", "VII", "EVE", "VEV"}
%!   [lg, mg] = gpu_gmm (X, 4, "modelNames", cov{1}, "tol", 0, "max_iter", 30, "backend", "cuda");
%!   [lc, mc] = gpu_gmm (X, 4, "modelNames", cov{1}, "tol", 0, "max_iter", 30, "backend", "cpu");
%!   assert (mg.backend, "cuda");
%!   assert (mg.loglik, mc.loglik, -1e-8);
%!   assert (mg.means, mc.means, 1e-6);
%! endfor

## the backend "cuda" without a GPU is an error
%!testif ; gpuml_info ().device_count == 0
%! try
%!   gpu_gmm (randn (20, 2), 2, "backend", "cuda");
%!   error ("test:noError", "no error raised");
%! catch err
%!   assert (err.identifier, "gpuml:gmm:noCuda");
%! end_try_catch

## bad input
%!error id=gpuml:gmm:badG gpu_gmm (randn (5, 2), 6)
%!error <gpu_gmm: G = 6 exceeds the 5 rows of the data> gpu_gmm (randn (5, 2), 6)
%!error id=gpuml:gmm:badG gpu_gmm (randn (5, 2), 0)
%!error id=gpuml:gmm:badParameter gpu_gmm (randn (5, 2), 1.5)
%!error id=gpuml:gmm:badParameter gpu_gmm (randn (5, 2), [])
%!error id=gpuml:gmm:badG gpu_gmm ([1; 1; 2; 2], 3, "init", "kmeans++")
%!error id=gpuml:gmm:singular gpu_gmm ([1; 1; 2; 2], 3)
%!error id=gpuml:gmm:nonFinite gpu_gmm ([1 2; NaN 4; 5 6; 7 8], 1)
%!error <data contains Inf at row 2, column 1> gpu_gmm ([1 2; Inf 4; 5 6; 7 8], 1)
%!error id=gpuml:gmm:tooFewRows gpu_gmm (randn (5, 8), 1, "modelNames", "VVV")
%!error id=gpuml:gmm:badParameter gpu_gmm (randn (20, 2), 2, "modelNames", "XYZ")
%!error id=gpuml:gmm:badParameter gpu_gmm (randn (20, 2), 2, "init", "random")
%!error id=gpuml:gmm:badTol gpu_gmm (randn (20, 2), 2, "tol", -1)
%!error id=gpuml:gmm:badReg gpu_gmm (randn (20, 2), 2, "reg", -1)
%!error id=gpuml:gmm:badMaxIter gpu_gmm (randn (20, 2), 2, "max_iter", 0)
%!error id=gpuml:gmm:badNInit gpu_gmm (randn (20, 2), 2, "n_init", 0)
%!error id=gpuml:badSeed gpu_gmm (randn (20, 2), 2, "seed", -1)
%!error id=gpuml:gmm:badParameter gpu_gmm (randn (20, 2), 2, "max_iter", "many")
%!error id=gpuml:gmm:badData gpu_gmm (zeros (0, 2), 1)
%!error id=gpuml:gmm:badType gpu_gmm ({1, 2}, 1)
%!error id=gpuml:badBackend gpu_gmm (randn (20, 2), 2, "backend", "gpu")
%!error id=gpuml:badOption gpu_gmm (randn (20, 2), 2, "iterations", 5)
%!error <Invalid call> gpu_gmm ()

## devices: checked by the core, ignored on the CPU; EM over shards (GPUML_SHARDS, the
## development knob that stands for several devices) agrees with the one-shard fit
%!error <listed twice> gpu_gmm (rand (20, 2), 2, "backend", "cpu", "devices", [1 1])
%!error <"all"> gpu_gmm (rand (20, 2), 2, "backend", "cpu", "devices", "every")
%!test
%! [X, truth] = mixture (400, 2, 2, 30, 6, "full");
%! [l1, m1] = gpu_gmm (X, 1:3, "modelNames", {"VVV", "EII"}, "seed", 5, "backend", B);
%! [l2, m2] = gpu_gmm (X, 1:3, "modelNames", {"VVV", "EII"}, "seed", 5, "backend", "cpu", ...
%!                    "devices", [0 1]);
%! if (strcmp (B, "cpu"))
%!   assert (isequal (l1, l2) && m1.loglik == m2.loglik);
%! endif
%! unwind_protect
%!   setenv ("GPUML_SHARDS", "3");  setenv ("GPUML_SHARD_THREADS", "2");
%!   [l3, m3] = gpu_gmm (X, 1:3, "modelNames", {"VVV", "EII"}, "seed", 5, "backend", B, ...
%!                      "devices", 0);
%! unwind_protect_cleanup
%!   unsetenv ("GPUML_SHARDS");  unsetenv ("GPUML_SHARD_THREADS");
%! end_unwind_protect
%! assert (isequal (l3, l1) && strcmp (m3.modelName, m1.modelName) && m3.G == m1.G);
%! assert (m3.loglik, m1.loglik, 1e-10 * abs (m1.loglik));
