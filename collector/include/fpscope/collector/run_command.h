// `fpscope run`: starts a program under the injector, collects its trace into SQLite and exits
// with the program's exit status. The fpscope command line calls run_main() for its `run` verb.
#pragma once

namespace fpscope {

// argv[0] is "run"; the rest are run's own options, then "--", then the program and its arguments.
// Returns the process exit status fpscope should exit with.
int run_main(int argc, char** argv);

}  // namespace fpscope
