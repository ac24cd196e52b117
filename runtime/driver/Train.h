//===- Train.h - the train command ------------------------------*- C++ -*-===//
//
// `./model train ...` runs a train-step program (a manifest with "train")
// for --steps steps: each step loads its batch into the data inputs, feeds
// the step's lr and number, runs the program (which updates the state region
// in place), reads the loss and gradient norm, and logs, evaluates, dumps
// outputs and checkpoints as the flags say. Backend-neutral: it reaches the
// kernels only through the compiled program, and their threads through the
// context's backend (core/Backend.h). See docs/training.md, "The train
// command".
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_TRAIN_H
#define HPCRT_DRIVER_TRAIN_H

#include "Process.h"

namespace hpcrt::driver {

/// `./model train ...` (argv[1] is "train"); returns the exit status.
int trainCommand(int argc, char **argv);

/// The lines `./model info` adds for a train-step program: the state bytes
/// and tensors, and the manifest's train section.
void printTrainInfo(const Context &ctx);

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_TRAIN_H
