// The build found no MPI: the MPI communicator is refused with what to install.
#include <cstdlib>

#include "core/error.h"
#include "dist/mpi_communicator.h"

namespace lt::dist {

bool mpi_available() {
  return false;
}

std::unique_ptr<Communicator> make_mpi_communicator() {
  LT_FAIL(
      "this leantune was built without MPI; install OpenMPI (`make deps`: openmpi-bin, libopenmpi-dev) "
      "and rebuild");
}

std::unique_ptr<Communicator> make_mpi_communicator_of_first(int) {
  return make_mpi_communicator();
}

void mpi_abort_all(int exit_code) {
  std::exit(exit_code);
}

}  // namespace lt::dist
