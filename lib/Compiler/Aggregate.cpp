//===- Aggregate.cpp - the HPCOptPipeline shared library ---------------------===//
//
// HPCOptPipeline is the static HPC-Opt libraries linked whole into one shared
// object (lib/CMakeLists.txt); a shared library needs one source of its own.
//
//===----------------------------------------------------------------------===//
