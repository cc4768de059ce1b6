/* dlopen_check LIB SYMBOL...: opens LIB with RTLD_NOW | RTLD_LOCAL (every undefined symbol must resolve
 * now, as the core requires) and checks each SYMBOL is exported and looks like its plugin table: a non-NULL
 * name first, and for tuttiTransport_v1 a plausible size and version. Exit 0 only when all pass. */
#include <tutti/transport.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s LIB SYMBOL...\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "FAIL %s: dlopen: %s\n", argv[1], dlerror());
    return 1;
  }
  int failures = 0;
  for (int i = 2; i < argc; ++i) {
    void* sym = dlsym(lib, argv[i]);
    if (!sym) {
      fprintf(stderr, "FAIL %s: symbol %s not exported\n", argv[1], argv[i]);
      ++failures;
      continue;
    }
    const char* name = NULL;
    if (strcmp(argv[i], TUTTI_TRANSPORT_SYMBOL) == 0) {
      const tuttiTransport_v1_t* t = sym;
      if (t->size < sizeof(tuttiTransport_v1_t) || t->version != TUTTI_TRANSPORT_ABI_VERSION) {
        fprintf(stderr, "FAIL %s: %s has size %zu version %u\n", argv[1], argv[i], t->size, t->version);
        ++failures;
        continue;
      }
      name = t->name;
    } else {
      name = *(const char* const*)sym; /* net, tuner and profiler tables all start with `const char* name` */
    }
    if (!name || !*name) {
      fprintf(stderr, "FAIL %s: %s has no name\n", argv[1], argv[i]);
      ++failures;
      continue;
    }
    printf("ok %s %s name=%s\n", argv[1], argv[i], name);
  }
  dlclose(lib);
  return failures ? 1 : 0;
}
