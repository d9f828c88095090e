# Type coercion shared by the wrappers. Validation of values (NA/NaN/Inf, sizes, k,
# backend names) is the C core's job; these helpers only produce the types it takes.

# A numeric (double) matrix from a matrix, data frame or vector; `what` names the
# argument in messages.
as_double_matrix <- function(x, what) {
  if (is.null(x))
    stop(sprintf("%s must be numeric, not NULL", what), call. = FALSE)
  if (is.data.frame(x)) {
    ok <- vapply(x, function(col) is.numeric(col) || is.logical(col), logical(1))
    if (!all(ok))
      stop(sprintf("%s must be numeric: column%s %s %s not numeric", what,
                   if (sum(!ok) > 1) "s" else "",
                   paste(sQuote(names(x)[!ok], FALSE), collapse = ", "),
                   if (sum(!ok) > 1) "are" else "is"), call. = FALSE)
    x <- as.matrix(x)
  } else if (!is.matrix(x) && length(dim(x)) == 2L) {
    x <- as.matrix(x)  # e.g. a Matrix object
  }
  if (!is.numeric(x) && !is.logical(x))
    stop(sprintf("%s must be numeric (a numeric matrix, data frame or vector), not %s",
                 what, class(x)[1L]), call. = FALSE)
  if (is.null(dim(x))) {
    x <- matrix(x, ncol = 1L, dimnames = if (!is.null(names(x))) list(names(x), NULL))
  } else if (length(dim(x)) != 2L) {
    stop(sprintf("%s must be a matrix, not a %d-dimensional array", what,
                 length(dim(x))), call. = FALSE)
  }
  if (storage.mode(x) != "double") storage.mode(x) <- "double"
  x
}

as_backend <- function(backend) {
  if (!is.character(backend) || length(backend) != 1L || is.na(backend))
    stop("backend must be one string: \"auto\", \"cpu\" or \"cuda\"", call. = FALSE)
  backend
}

# One string, for an argument whose words the core checks (precision, ...).
as_word <- function(x, what) {
  if (!is.character(x) || length(x) != 1L || is.na(x))
    stop(sprintf("%s must be one string", what), call. = FALSE)
  x
}

as_flag <- function(x, what) {
  if (!(is.logical(x) || is.numeric(x)) || length(x) != 1L || is.na(x))
    stop(sprintf("%s must be TRUE or FALSE", what), call. = FALSE)
  as.logical(x)
}

# The arguments among `names` that the caller gave, as a named list for the core, which
# holds every default: an argument left out is not passed, so the core's default applies
# (the defaults shown in the function's signature are the core's; a test holds them so).
given_args <- function(call, env, names) {
  given <- intersect(names(call)[-1L], names)
  mget(given, envir = env)
}

# The core's default parameters of an algorithm ("tsne", "gmm", "dpc"), by name.
core_defaults <- function(algo) .Call(gpuml_r_params_defaults, algo)

# The seed of a call, one rule for every algorithm: the user's number, or one drawn from
# R's generator so that set.seed() decides the result. The core checks the value.
as_seed <- function(seed) {
  if (is.null(seed)) return(as.double(sample.int(.Machine$integer.max, 1L)))
  if (!is.numeric(seed) || length(seed) != 1L || is.na(seed))
    stop("seed must be NULL or a single whole number", call. = FALSE)
  as.double(seed)
}

# The CUDA devices of a call (argument `devices`, default option gpuml.devices): NULL
# (the one device), device numbers, or "all". The core checks the values, and ignores a
# list on the CPU backend.
as_devices <- function(devices) {
  if (is.null(devices)) return(NULL)
  if (is.character(devices) && length(devices) == 1L) return(devices)
  if (is.numeric(devices) && length(devices) >= 1L) return(as.double(devices))
  stop("devices must be NULL, CUDA device numbers (e.g. c(0, 1)) or \"all\"", call. = FALSE)
}

# OpenMP threads for the CPU backend: option gpuml.threads, 0 = the OpenMP default.
gpuml_threads <- function() {
  th <- getOption("gpuml.threads", 0L)
  if (!is.numeric(th) || length(th) != 1L || is.na(th) || th < 0)
    stop("option gpuml.threads must be 0 (the OpenMP default) or a positive number",
         call. = FALSE)
  as.integer(th)
}
