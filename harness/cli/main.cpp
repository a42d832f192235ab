#include "harness/cli/cli.h"

int main(int argc, char** argv) { return gmb::run_cli(argc, argv); }
