library(testthat)
library(gpuml)

test_check("gpuml")
