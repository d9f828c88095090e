## -*- texinfo -*-
## @deftypefn {} {@var{seed} =} gpuml_seed (@var{seed})
## The seed of a call, one rule for every algorithm: the user's number, or, when
## @var{seed} is empty, one drawn from Octave's generator (@code{rand}), so that
## @code{rand ("seed", @dots{})} or @code{rand ("state", @dots{})} decide the result.
## The C core checks the value (a whole number in [0, 2^53)).
##
## Private helper of the gpuml wrappers.
## @end deftypefn

function seed = gpuml_seed (seed)
  if (isempty (seed))
    seed = floor (rand () * 2^31);
  elseif (! (isnumeric (seed) && isscalar (seed) && isreal (seed)))
    error ("gpuml:badSeed", "seed must be empty or a single whole number");
  endif
  seed = double (seed);
endfunction
