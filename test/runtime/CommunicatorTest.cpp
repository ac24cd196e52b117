//===- CommunicatorTest.cpp - MPI's Communicator under mpirun ------------===//
//
// CommunicatorChecks.h's checks on MPI's implementation of the interface
// (MpiGroupComm, host memory): over a 1-D mesh, over no axes, and over one
// and both axes (in either order) of a 2-D mesh. NcclTest.cpp runs the same
// checks on NCCL's. Run by ctest under mpirun -n 2 and -n 4.
//
//===----------------------------------------------------------------------===//

#include "CommunicatorChecks.h"

#include "comm/MpiComm.h"

using namespace hpcrt;
using namespace hpcrt::comm;
using namespace hpcrt::test;

namespace {

void run(int size) {
  HostMemory host;
  {
    MpiComm mpi({{"x", size, "intra_node"}}, MPI_COMM_WORLD);
    checkCommunicator(mpi.communicator({0}), "mpi", "mesh x", host);
    checkCommunicator(mpi.communicator({}), "mpi", "no axes", host);
    expect(&mpi.communicator({0}) == &mpi.communicator({0}), "one communicator per group");
  }
  if (size % 2 == 0 && size > 2) {
    MpiComm mpi({{"a", 2, "inter_node"}, {"b", size / 2, "intra_node"}}, MPI_COMM_WORLD);
    checkCommunicator(mpi.communicator({1}), "mpi", "mesh a x b, over b", host);
    checkCommunicator(mpi.communicator({0, 1}), "mpi", "mesh a x b, over a, b", host);
    checkCommunicator(mpi.communicator({1, 0}), "mpi", "mesh a x b, over b, a", host);
  }
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    run(size);
  } catch (const std::exception &e) {
    fprintf(stderr, "FAIL (rank %d): %s\n", worldRank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int rc = reportChecks("communicator", size);
  MPI_Finalize();
  return rc;
}
