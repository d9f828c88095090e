test_that("gpuml_info describes the build", {
  info <- gpuml_info()
  expect_s3_class(info, "gpuml_info")
  expect_true(all(c("version", "openmp", "threads", "cuda_compiled", "cuda_runtime",
                    "device_count", "device_name", "device_memory_gb",
                    "cuda_message") %in% names(info)))
  expect_identical(info$version, as.character(utils::packageVersion("gpuml")))
  expect_type(info$openmp, "logical")
  expect_true(info$threads >= 1L)
  expect_type(info$cuda_compiled, "logical")
  expect_type(info$mpi, "logical")
  if (!isTRUE(info$mpi)) {
    expect_error(gpu_mpi_rank(), "built without MPI")
    expect_error(gpu_mpi_knn(matrix(1:4, 2), k = 1), "built without MPI")
  }
  expect_true(is.integer(info$device_count) && info$device_count >= 0L)
  if (!isTRUE(info$cuda_compiled)) {
    expect_identical(info$device_count, 0L)
    expect_true(is.na(info$cuda_runtime))
    expect_match(info$cuda_message, "without CUDA")
  }
  if (info$device_count == 0L) {
    expect_true(is.na(info$device_name))
    expect_true(is.na(info$device_memory_gb))
  } else {
    expect_true(nzchar(info$device_name))
    expect_gt(info$device_memory_gb, 0)
  }
  expect_output(print(info), paste("gpuml", as.character(utils::packageVersion("gpuml"))))
  expect_output(print(info), "CPU backend")
})
