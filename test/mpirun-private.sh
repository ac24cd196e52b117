#!/bin/sh
#===- test/mpirun-private.sh - mpirun with a session directory of its own -===#
#
# usage: mpirun-private.sh MPIRUN [ARGS...]
#
# OpenMPI 4 keeps the session files of every job of a user under one shared
# directory (<tmp>/ompi.<host>.<uid>) and removes it when it is empty at the
# end of a job. A job that ends while another one starts can remove it under
# the other's feet, whose ranks then fail in orte_init ("A call to mkdir was
# unable to create the desired directory"; open-mpi/ompi#8510). The test
# suite starts several mpiruns at once, so each gets a base directory of its
# own. exec keeps the launcher's pid, so timeouts still stop the job; the
# empty directory stays in $TMPDIR (lit's own temporary directory in tests).
#
#===-----------------------------------------------------------------------===#
set -eu
base=$(mktemp -d "${TMPDIR:-/tmp}/hpc-mpirun.XXXXXX")
OMPI_MCA_orte_tmpdir_base="$base"
export OMPI_MCA_orte_tmpdir_base
exec "$@"
