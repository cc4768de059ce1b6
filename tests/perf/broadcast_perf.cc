#include "perf_common.h"

int main(int argc, char** argv) { return tutti::perf::perfMain(tutti::perf::Coll::Broadcast, argc, argv); }
