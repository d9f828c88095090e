## -*- texinfo -*-
## @deftypefn {} {@var{rgb} =} gpuml_palette (@var{n})
## The qualitative palette of gpuml's plots: @var{n} x 3 RGB values in [0, 1].
## Okabe and Ito's colours (distinguishable with the common colour-vision
## deficiencies; grey for their black) and two more, so that ten classes get ten
## colours; recycled beyond ten.  The R package's @code{gpuml_palette} is the same.
##
## @example
## colormap (gpuml_palette (10));
## @end example
## @end deftypefn

function rgb = gpuml_palette (n)
  if (! (isnumeric (n) && isscalar (n) && n >= 0 && n == fix (n)))
    error ("gpuml:badArgument", "gpuml_palette: N must be a whole number >= 0");
  endif
  base = [230 159 0; 86 180 233; 0 158 115; 240 228 66; 0 114 178; 213 94 0; ...
          204 121 167; 127 127 127; 140 86 75; 23 190 207] / 255;
  rgb = base(mod (0:n-1, rows (base)) + 1, :);
endfunction

%!assert (size (gpuml_palette (10)), [10, 3])
%!assert (gpuml_palette (12)(11,:), gpuml_palette (1))
%!assert (all (all (gpuml_palette (10) >= 0 & gpuml_palette (10) <= 1)))
%!assert (rows (unique (gpuml_palette (10), "rows")), 10)
%!error <whole number> gpuml_palette (-1)
