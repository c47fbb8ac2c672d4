/* A property the harnesses assert beyond what the sanitizers catch: a
 * failure aborts, which libFuzzer records as a crash with its input. */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond);   \
      abort();                                                                      \
    }                                                                               \
  } while (0)

#endif
