## -*- texinfo -*-
## @deftypefn  {} {} run_octave_tests (@var{dir})
## @deftypefnx {} {} run_octave_tests (@var{dir}, @var{pattern})
## Run the %!test blocks of every gpu*.m file (or those that match @var{pattern}, e.g.
## @qcode{"gpu_mpi_*.m"}) of the folder @var{dir} (the gpuml
## Octave layer, octave/ of the tree), as the loaded gpuml package holds them (run
## @code{pkg load gpuml} first), and print one final line
## @samp{Octave: @var{N} passed, @var{N} failed}.  Failures are printed in full
## above it.  When run by @code{octave --eval} (without @option{--persist}),
## Octave exits with status 1 when any test failed or a file could not be
## tested, 0 otherwise; an interactive session is left running.
##
## Run from the repository root after @code{make}; @code{make check} does, with the
## package installed privately under build/octave-pkg:
##
## @example
## octave --no-gui --norc -q --eval "pkg load gpuml; addpath('tests'); run_octave_tests('octave')"
## @end example
## @end deftypefn

function run_octave_tests (dir_name, pattern)

  if (nargin < 2)
    pattern = "gpu*.m";
  endif
  files = dir (fullfile (dir_name, pattern));
  names = sort ({files.name});
  passed = 0;
  failed = 0;
  skipped = 0;
  for i = 1:numel (names)
    [~, name] = fileparts (names{i});
    try
      [n, nmax, ~, ~, nskip, nrtskip] = test (name, "quiet", stdout);
      skipped += nskip + nrtskip;
      if (nmax == 0)
        printf ("  %s has no tests or was not found\n", name);
        failed += 1;
      endif
      passed += n;
      failed += nmax - n;
      printf ("  %d of %d passed\n", n, nmax);
    catch err
      printf ("  could not run the tests of %s: %s\n", name, err.message);
      failed += 1;
    end_try_catch
  endfor
  if (skipped > 0)
    printf ("Octave: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  else
    printf ("Octave: %d passed, %d failed\n", passed, failed);
  endif
  fflush (stdout);
  ## Exit with a status only when run by "octave --eval ..." without --persist,
  ## never from an interactive session.
  args = argv ();
  if (failed > 0 && any (strcmp (args, "--eval")) && ! any (strcmp (args, "--persist")))
    exit (1);
  endif

endfunction
