## -*- texinfo -*-
## @deftypefn {} {} run_tests
## Run the %!test blocks of every gpu*.m file next to this script (the gpuml
## Octave layer) and print one final line
## @samp{Octave: @var{N} passed, @var{N} failed}.  Failures are printed in full
## above it.  When run by @code{octave --eval} (without @option{--persist}),
## Octave exits with status 1 when any test failed or a file could not be
## tested, 0 otherwise; an interactive session is left running.
##
## Run from the repository root after @code{make}:
##
## @example
## octave --no-gui --norc -q --eval "addpath('build/octave'); addpath('octave'); run_tests"
## @end example
## @end deftypefn

function run_tests ()

  here = fileparts (mfilename ("fullpath"));
  files = dir (fullfile (here, "gpu*.m"));
  names = sort ({files.name});
  passed = 0;
  failed = 0;
  for i = 1:numel (names)
    [~, name] = fileparts (names{i});
    try
      [n, nmax] = test (name, "quiet", stdout);
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
  printf ("Octave: %d passed, %d failed\n", passed, failed);
  fflush (stdout);
  ## Exit with a status only when run by "octave --eval ..." without --persist,
  ## never from an interactive session.
  args = argv ();
  if (failed > 0 && any (strcmp (args, "--eval")) && ! any (strcmp (args, "--persist")))
    exit (1);
  endif

endfunction
