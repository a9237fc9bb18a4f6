// gpuherd-shim: the supervisor of one job (see exec/shim.h).
#include "exec/shim.h"

int main(int argc, char** argv) { return gpuherd::exec::ShimMain(argc, argv); }
