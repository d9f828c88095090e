gpuml_info <- function() {
  structure(.Call(gpuml_r_info), class = "gpuml_info")
}

print.gpuml_info <- function(x, ...) {
  cat(sprintf("gpuml %s\n", x$version))
  cat(sprintf("  CPU backend : OpenMP %s, %d thread%s\n",
              if (isTRUE(x$openmp)) "on" else "off", x$threads,
              if (identical(x$threads, 1L)) "" else "s"))
  if (!isTRUE(x$cuda_compiled)) {
    cat("  CUDA backend: not built\n")
  } else {
    cat(sprintf("  CUDA backend: built (runtime %s, driver %s), %d device%s\n",
                x$cuda_runtime, if (is.na(x$cuda_driver)) "none" else x$cuda_driver,
                x$device_count, if (x$device_count == 1L) "" else "s"))
    cat(sprintf("  device code : %s\n", x$cuda_architectures))
    if (x$device_count > 0)
      cat(sprintf("  device 0    : %s (compute %s, %.1f GiB)\n", x$device_name,
                  x$compute_capability, x$device_memory_gb))
  }
  cat(sprintf("  MPI         : %s\n", if (isTRUE(x$mpi))
    "built (gpu_mpi_knn, gpu_mpi_gmm under mpirun)" else "not built"))
  if (!is.na(x$cuda_message)) cat(sprintf("  note        : %s\n", x$cuda_message))
  invisible(x)
}
