## -*- texinfo -*-
## @deftypefn {} {[@var{opts}, @var{given}] =} gpuml_parse_options (@var{fname}, @var{defaults}, @var{args})
## Read name/value pairs @var{args} (a cell array) into a copy of the struct
## @var{defaults}; @var{given} holds the pairs the caller gave, with the names as
## @var{defaults} spells them, for the core, which holds the defaults of its
## parameters (those in @var{defaults} serve the help text and the glue's own options).  Names are matched without regard to case; a name that is not a
## field of @var{defaults}, a name that is not a string or a name without a value is
## an error with identifier @code{gpuml:badOption}.  Values are not checked here:
## the MEX gateway converts them and the C core validates them.
##
## Private helper of the gpuml wrappers.
## @end deftypefn

function [opts, given] = gpuml_parse_options (fname, defaults, args)

  opts = defaults;
  given = {};
  known = fieldnames (defaults);
  if (mod (numel (args), 2) != 0)
    error ("gpuml:badOption",
           "%s: options must come in name/value pairs (%s)",
           fname, strjoin (strcat ("'", known, "'"), ", "));
  endif
  for i = 1:2:numel (args)
    name = args{i};
    if (! ischar (name) || ! isrow (name))
      error ("gpuml:badOption",
             "%s: option %d: expected an option name (%s), got a %s",
             fname, (i + 1) / 2, strjoin (strcat ("'", known, "'"), ", "),
             class (name));
    endif
    hit = strcmpi (name, known);
    if (! any (hit))
      error ("gpuml:badOption", "%s: unknown option '%s'; valid options are %s",
             fname, name, strjoin (strcat ("'", known, "'"), ", "));
    endif
    opts.(known{hit}) = args{i+1};
    given(end+1:end+2) = {known{hit}, args{i+1}};
  endfor

endfunction
