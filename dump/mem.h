/*
 * Reading the target's memory (mem.c), with process_vm_readv.
 */
#ifndef CLD_MEM_H
#define CLD_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads exactly len bytes at addr; returns 0 or an errno value. */
int cld_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int cld_mem_read_u64(pid_t pid, uint64_t addr, uint64_t *value);

#endif
