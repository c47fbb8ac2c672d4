/*
 * What differs between the architectures this program reads (arch_*.c):
 * binding.gyp builds the one file for the machine, so nothing here is
 * chosen with #if.
 */
#ifndef CLD_ARCH_H
#define CLD_ARCH_H

#include <stdint.h>
#include <sys/types.h>

#include "tlsmath.h"

/* The architecture this program runs on and reads. */
const cld_arch_t *cld_native_arch(void);
/* The stopped thread's thread pointer; 0 or an errno value. */
int cld_thread_pointer(pid_t tid, uint64_t *tp);

#endif
