//===- CommunicatorTest.cpp - MPI's Communicator under mpirun ------------===//
//
// CommunicatorChecks.h's checks on MPI's implementation of the interface
// (MpiGroupComm, host memory): over a 1-D mesh, over no axes, and over one
// and both axes (in either order) of a 2-D mesh. NcclTest.cpp runs the same
// checks on NCCL's. Then the peer wait's pings (PeerWait.h): a census that
// ends before the answers come leaves no receive behind for them (the late
// answers would land in freed memory: ASan's report in the sanitizer
// subset, which runs this under mpirun -n 2). Run by ctest under mpirun
// -n 2 and -n 4.
//
//===----------------------------------------------------------------------===//

#include "CommunicatorChecks.h"

#include "comm/MpiComm.h"
#include "comm/PeerWait.h"

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
  if (size == 4) {
    // Two levels on nodes of 2 ranks: over a 1-D mesh (each node's members
    // consecutive), and over b, a of a 2 x 2 mesh, where group indices 0
    // and 2 are node 0's (the blocks of a node are not consecutive).
    MpiComm line({{"x", 4, "inter_node"}}, MPI_COMM_WORLD);
    checkCommunicator(line.communicator({0}, 2), "mpi", "mesh x, two levels", host);
    expect(&line.communicator({0}, 2) != &line.communicator({0}),
           "the two-level communicator is not the flat one");
    MpiComm grid({{"a", 2, "inter_node"}, {"b", 2, "intra_node"}}, MPI_COMM_WORLD);
    checkCommunicator(grid.communicator({1, 0}, 2), "mpi", "mesh a x b, over b, a, two levels",
                      host);
    // b's members share a node: no second level to run over.
    bool refused = false;
    try {
      grid.communicator({1}, 2);
    } catch (const Error &e) {
      refused = std::string(e.what()).find("do not lie on several nodes") != std::string::npos;
    }
    expect(refused, "a group on one node has no two levels");
  }
}

void barrier(const char *what) {
  MPI_Request r;
  checkMpi(MPI_Ibarrier(MPI_COMM_WORLD, &r), "MPI_Ibarrier");
  waitCollective(r, what, MPI_COMM_WORLD);
}

/// Rank 0 asks and gives up at once; the others answer while they wait in
/// the barriers, after rank 0 has destroyed that census. A second census
/// then waits for every answer (the late ones of the first come meanwhile).
void checkCensus() {
  startPeerWait(MPI_COMM_WORLD, "hpcrt-communicator-test");
  if (worldRank() == 0) {
    Census early;
    expect(early.asked(), "a census after startPeerWait asks");
  }
  barrier("the barrier after the early census");
  if (worldRank() == 0) {
    Census c;
    bool answered = pollFor(60, [&] { return c.silent().empty(); });
    expect(answered, "every rank answers the second census");
  }
  barrier("the barrier after the second census");
  finishPeerWait();
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    run(size);
    checkCensus();
  } catch (const std::exception &e) {
    fprintf(stderr, "FAIL (rank %d): %s\n", worldRank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int rc = reportChecks("communicator", size);
  MPI_Finalize();
  return rc;
}
