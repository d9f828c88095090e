## The Octave package's MPI functions, run as
##   mpirun -np 3 octave-cli --eval "pkg load gpuml; addpath ('tests/mpi'); octave_mpi ()"
## (by tests/run-all.sh): every rank makes the same data, keeps its block of rows (uneven)
## and calls gpu_mpi_knn / gpu_mpi_gmm / gpu_mpi_dpc on it; the answers must be those of
## gpu_knn / gpu_gmm / gpu_dpc on all the rows in one process (kNN and density peaks
## identical; mixtures: the same model, G and labels, log-likelihood, means and BIC table
## within 1e-10 relative), as tests/mpi/r_mpi.R asks of R. Then bad input, which must be
## the same error on every rank, the devices of each rank, and the end of MPI. Each rank prints its counts as
## "Octave-MPI-<rank>: N passed, N failed".

function octave_mpi ()

  global passed failed rank
  passed = 0;
  failed = 0;
  rank = gpu_mpi_rank ();
  size = gpu_mpi_size ();
  check (gpuml_info ().mpi, "gpuml_info () reports MPI");
  check (size == 3, "three ranks");

  rand ("state", 11);
  x = round (rand (600, 3) * 4) / 4;  # a coarse grid: ties and duplicates
  q = rand (25, 3);
  mine = block (rows (x), rank, size);
  [wi, wd] = gpu_knn (x, [], 8, "backend", "cpu");
  [si, sd, info] = gpu_mpi_knn (x(mine,:), [], 8, "backend", "cpu");
  check (isequal (si, wi(mine,:)), "self kNN indices");
  check (isequal (sd, wd(mine,:)), "self kNN distances");
  check (strcmp (info.backend, "cpu"), "kNN backend");
  [wi, wd] = gpu_knn (x, q, 8, "backend", "cpu");
  [si, sd] = gpu_mpi_knn (x(mine,:), q, 8, "backend", "cpu");
  check (isequal (si, wi) && isequal (sd, wd), "query kNN");
  ## rank 0 without rows, and single input (searched in double)
  none = block (rows (x), rank, size, true);
  [wi, wd] = gpu_knn (x, [], 5, "backend", "cpu");
  [si, sd] = gpu_mpi_knn (single (x(none,:)), [], 5, "backend", "cpu");
  check (isequal (si, wi(none,:)) && isequal (sd, wd(none,:)), "self kNN, rank 0 without rows");
  expect_error (@() gpu_mpi_knn (x(mine,:), [], 600, "backend", "cpu"), "gpuml:knn:badK",
                "k >= n");
  expect_error (@() gpu_mpi_knn (x(mine,1:2 + (rank != 1)), [], 3, "backend", "cpu"),
                "gpuml:mpi:mismatch", "kNN: ranks disagree on the columns");
  expect_error (@() gpu_mpi_knn (x(mine,:), q, 3 + (rank == 2), "backend", "cpu"),
                "gpuml:mpi:mismatch", "kNN: ranks disagree on k");
  expect_error (@() gpu_mpi_knn ({x(mine,:)}, [], 3), "gpuml:knn:badType",
                "kNN: a cell is a type error");

  randn ("state", 12);  rand ("state", 12);
  y = [randn(300, 2); randn(300, 2) + 5](randperm (600),:);
  mine = block (rows (y), rank, size);
  o = {"modelNames", {"VVV", "EEI"}, "backend", "cpu"};
  [l1, one] = gpu_gmm (y, 1:3, o{:}, "seed", 7);
  ## each rank draws its own seed when none is given: the fit uses rank 0's
  seed = [];
  if (rank == 0)
    seed = 7;
  endif
  [ls, spread] = gpu_mpi_gmm (y(mine,:), 1:3, o{:}, "seed", seed);
  check (strcmp (spread.modelName, one.modelName) && spread.G == one.G, "gmm: model and G");
  check (isequal (ls, l1(mine)), "gmm: labels");
  check (close (spread.loglik, one.loglik), "gmm: log-likelihood");
  check (close (spread.means, one.means) && close (spread.weights, one.weights)
         && close (spread.covariances, one.covariances), "gmm: parameters");
  check (isequal (isnan (spread.bic), isnan (one.bic))
         && close (spread.bic(! isnan (one.bic)), one.bic(! isnan (one.bic))), "gmm: BIC table");
  check (close (spread.z, one.z(mine,:)), "gmm: z of this rank's rows");
  expect_error (@() gpu_mpi_gmm (y(mine,:), 601, "backend", "cpu"), "gpuml:gmm:badG",
                "gmm: G > n");
  expect_error (@() gpu_mpi_gmm (y(mine,1:1 + (rank != 2)), 2, "backend", "cpu"),
                "gpuml:mpi:mismatch", "gmm: ranks disagree on the columns");
  expect_error (@() gpu_mpi_gmm (y(none,:), 2, "backend", "cpu"), "", "gmm: a rank without rows");
  expect_error (@() gpu_mpi_gmm ("abc", 2), "gpuml:gmm:badType", "gmm: a string is a type error");

  randn ("state", 13);  rand ("state", 13);
  z = [randn(250, 2); round(rand(251, 2) * 8) / 2 + 6];
  mine = block (rows (z), rank, size);
  [c1, one] = gpu_dpc (z, "dc", 0.5, "k", 2, "backend", "cpu");
  [cs, spread] = gpu_mpi_dpc (z(mine,:), "dc", 0.5, "k", 2, "backend", "cpu");
  check (isequal (spread.rows, mine(:)), "dpc: this rank's rows");
  check (isequal (spread.rho, one.rho(mine)) && isequal (spread.delta, one.delta(mine))
         && isequal (spread.gamma, one.gamma(mine)), "dpc: rho, delta and gamma");
  check (isequaln (spread.nearest, one.nearest(mine)), "dpc: nearest (global rows, NaN for the densest)");
  check (isequal (spread.peaks, one.peaks) && spread.dc == one.dc, "dpc: the peaks");
  check (isequal (cs, c1(mine)) && isequal (spread.halo, one.halo(mine)),
         "dpc: clusters and halo");
  seed = [];
  if (rank == 0)
    seed = 3;
  endif
  [cs, dens] = gpu_mpi_dpc (z(mine,:), "backend", "cpu", "seed", seed);
  [~, one] = gpu_dpc (z, "backend", "cpu", "seed", 3);
  check (isequal (dens.rho, one.rho(mine)) && isempty (cs) && isempty (dens.peaks)
         && dens.dc_estimated, "dpc: dc estimated with rank 0's seed, densities only");
  none = block (rows (z), rank, size, true);
  [cs, spread] = gpu_mpi_dpc (z(none,:), "dc", 0.5, "k", 2, "backend", "cpu", "gaussian", true);
  [c1, one] = gpu_dpc (z, "dc", 0.5, "k", 2, "backend", "cpu", "gaussian", true);
  check (isequal (spread.rows, none(:)), "dpc: rank 0 without rows");
  check (isequal (spread.rho, one.rho(none)) && isequal (cs, c1(none)),
         "dpc: Gaussian kernel, rank 0 without rows");
  expect_error (@() gpu_mpi_dpc (z(mine,:), "dc", 0.5, "k", 600, "backend", "cpu"),
                "gpuml:dpc:badK", "dpc: k > n");
  expect_error (@() gpu_mpi_dpc (z(mine,1:1 + (rank != 0)), "dc", 0.5, "backend", "cpu"),
                "gpuml:mpi:mismatch", "dpc: ranks disagree on the columns");
  expect_error (@() gpu_mpi_dpc (z(mine,:), "dc", -1, "backend", "cpu"), "gpuml:dpc:badDc",
                "dpc: dc <= 0");

  ## devices: "local" (the default: the rank's number on its host modulo the host's
  ## GPUs), [], a number and "all" give the same answers on the CPU; a bad value is an
  ## error on every rank, also when one rank alone gives it
  rand ("state", 14);
  w = rand (120, 3);
  mine = block (rows (w), rank, size);
  [i0, d0] = gpu_mpi_knn (w(mine,:), [], 5, "backend", "cpu");
  [l0, m0] = gpu_mpi_gmm (w(mine,:), 1:2, "modelNames", "VVV", "seed", 5, "backend", "cpu");
  [c0, p0] = gpu_mpi_dpc (w(mine,:), "dc", 0.3, "k", 2, "backend", "cpu");
  for dev = {"local", [], 0, "all"}
    what = ["devices " shown(dev{1})];
    [i1, d1] = gpu_mpi_knn (w(mine,:), [], 5, "backend", "cpu", "devices", dev{1});
    check (isequal (i1, i0) && isequal (d1, d0), ["kNN, " what]);
    [l1, m1] = gpu_mpi_gmm (w(mine,:), 1:2, "modelNames", "VVV", "seed", 5, "backend", "cpu",
                            "devices", dev{1});
    check (isequal (l1, l0) && m1.loglik == m0.loglik, ["gmm, " what]);
    [c1, p1] = gpu_mpi_dpc (w(mine,:), "dc", 0.3, "k", 2, "backend", "cpu", "devices", dev{1});
    check (isequal (c1, c0) && isequal (p1.rho, p0.rho) && isequal (p1.delta, p0.delta),
           ["dpc, " what]);
  endfor
  check (isequal (gpu_mpi_knn (w(mine,:), [], 5, "devices", "local"), i0),
         "kNN, backend auto and devices \"local\"");
  for bad = {"locall", -1}
    what = ["devices " shown(bad{1})];
    expect_error (@() gpu_mpi_knn (w(mine,:), [], 5, "backend", "cpu", "devices", bad{1}),
                  "gpuml:badDevice", ["kNN, " what]);
    expect_error (@() gpu_mpi_gmm (w(mine,:), 1, "backend", "cpu", "devices", bad{1}),
                  "gpuml:badDevice", ["gmm, " what]);
    expect_error (@() gpu_mpi_dpc (w(mine,:), "dc", 0.3, "backend", "cpu", "devices", bad{1}),
                  "gpuml:badDevice", ["dpc, " what]);
  endfor
  try
    gpu_mpi_knn (w(mine,:), [], 5, "backend", "cpu", "devices", {"local", "locall"}{1 + (rank == 2)});
    check (false, "\"locall\" on rank 2 alone: no error");
  catch err
    check (strcmp (err.identifier, "gpuml:badDevice") && ! isempty (strfind (err.message, "locall"))
           && (rank == 2 || ! isempty (strfind (err.message, "rank 2"))),
           ["\"locall\" on rank 2 alone: " err.message]);
  end_try_catch

  ## clearing the functions does not end MPI; gpu_mpi_finalize does, once
  clear functions
  check (gpu_mpi_size () == size, "MPI survives clear functions");
  check (gpu_mpi_finalize () && ! gpu_mpi_finalize (), "gpu_mpi_finalize ends MPI once");
  expect_error (@() gpu_mpi_rank (), "gpuml:mpi:finalized", "no MPI after gpu_mpi_finalize");

  ## one write, so that the ranks' lines do not interleave in mpirun's output
  fputs (stdout, sprintf ("Octave-MPI-%d: %d passed, %d failed\n", rank, passed, failed));
  fflush (stdout);

endfunction

function check (ok, what)
  global passed failed rank
  if (isscalar (ok) && ok)
    passed += 1;
  else
    failed += 1;
    fputs (stdout, sprintf ("FAIL rank %d: %s\n", rank, what));
  endif
endfunction

## An error with this identifier ("": any error) and a message naming gpuml's function.
function expect_error (f, id, what)
  global rank
  try
    f ();
    check (false, [what ": no error"]);
  catch err
    ok = (isempty (id) || strcmp (err.identifier, id)) && strncmp (err.message, "gpu_", 4);
    if (! ok)
      fputs (stdout, sprintf ("rank %d, %s: got %s: %s\n", rank, what, err.identifier,
                              err.message));
    endif
    check (ok, what);
  end_try_catch
endfunction

## Rank r's rows of n: blocks of sizes 1 : 2 : 3 ...; without_first: rank 0 gets none and
## the others split the rows 1 : 2 ...
function idx = block (n, r, size, without_first)
  if (nargin > 3 && without_first)
    if (r == 0)
      idx = zeros (1, 0);
    else
      idx = block (n, r - 1, size - 1);
    endif
    return;
  endif
  ends = floor (n * cumsum (1:size) / sum (1:size));
  starts = [0, ends(1:end-1)] + 1;
  idx = starts(r+1):ends(r+1);
endfunction

## A value of an option as a message shows it.
function s = shown (v)
  if (ischar (v))
    s = ['"' v '"'];
  else
    s = mat2str (v);
  endif
endfunction

## Equal within 1e-10 relative to the largest magnitude.
function ok = close (a, b)
  ok = isequal (size (a), size (b)) && max (abs (a(:) - b(:))) <= 1e-10 * max (1, max (abs (b(:))));
endfunction
