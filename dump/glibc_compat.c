/*
 * The glibc customlabels-dump needs: 2.28 (RHEL 8 and its rebuilds; Debian
 * 11 has 2.31), not the glibc it was built on.  A program linked against
 * glibc 2.34 or later asks for two things older glibc does not have:
 *
 * __libc_start_main@GLIBC_2.34.  crt1's _start (Scrt1.o) calls it, and
 * from 2.34 on passes no init function: that glibc runs the program's
 * constructors itself, which older glibc does not, so 2.34 gave the
 * function a new version (bminor/glibc 035c012e32c11e84d64905efaf55e74f704d3668,
 * csu/libc-start.c, "Starting with glibc 2.34, the init parameter is always
 * NULL").  This file defines a __libc_start_main of the program's own,
 * which _start's call binds to before libc's: it calls the version every
 * glibc has (GLIBC_2.2.5 on x86-64, GLIBC_2.17 on aarch64) with an init
 * that does what crt1 code did before 2.34 (bminor/glibc
 * 007f8306a3944bdee42c0f15ac849dc8132d67f1, csu/elf-init.c, for
 * dynamically linked programs): _init, then the .init_array.  glibc 2.34
 * and later call an init that is given instead of running the constructors
 * themselves (the same csu/libc-start.c), so they run once on either.
 *
 * stat64 and fstat64@GLIBC_2.33.  Before 2.33 these were wrappers, linked
 * into each program from libc_nonshared.a, around __xstat64 and
 * __fxstat64, which on 64-bit Linux make the system call straight into the
 * caller's struct: on x86-64 and aarch64 glibc's struct stat64 is the
 * kernel's struct stat (bminor/glibc 04277e02d7f54d3582bebcf8386b317018cd5e1d,
 * sysdeps/unix/sysv/linux/wordsize-64/xstat.c and fxstat.c, used by x86-64;
 * sysdeps/unix/sysv/linux/generic/xstat.c, used by aarch64, which calls
 * newfstatat).  This file defines them as those same system calls.  Not
 * through __xstat64@GLIBC_2.2.5: AddressSanitizer's runtime defines an
 * unversioned __xstat64, and ld 2.40 writes a corrupt dynamic symbol for a
 * versioned reference that a shared library defines unversioned
 * (.ci/sanitize builds the reader with it).
 *
 * test/glibc.test.js checks the highest version the built file asks for.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__GLIBC__) && (defined(__x86_64__) || defined(__aarch64__))

#if defined(__x86_64__)
#define CL_GLIBC_BASE "GLIBC_2.2.5"
#else
#define CL_GLIBC_BASE "GLIBC_2.17"
#endif

#define CL_HIDDEN __attribute__((visibility("hidden")))

typedef int (*cl_main_fn)(int, char **, char **);
typedef void (*cl_init_fn)(int, char **, char **);

/* libc's, under a name of this file's, bound to the old version. */
int cl_libc_start_main(cl_main_fn main, int argc, char **argv, cl_init_fn init, void (*fini)(void),
                       void (*rtld_fini)(void), void *stack_end);
__asm__(".symver cl_libc_start_main,__libc_start_main@" CL_GLIBC_BASE);

/* Provided by the linker (the .init_array bounds) and by crti.o (_init). */
extern CL_HIDDEN cl_init_fn __init_array_start[];
extern CL_HIDDEN cl_init_fn __init_array_end[];
extern CL_HIDDEN void _init(void);

static void run_constructors(int argc, char **argv, char **envp) {
  _init();
  size_t count = (size_t)(__init_array_end - __init_array_start);
  for (size_t i = 0; i < count; i++) __init_array_start[i](argc, argv, envp);
}

CL_HIDDEN int __libc_start_main(cl_main_fn main, int argc, char **argv, void (*init)(void),
                                void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
  (void)init;
  return cl_libc_start_main(main, argc, argv, run_constructors, fini, rtld_fini, stack_end);
}

CL_HIDDEN int stat64(const char *restrict path, struct stat64 *restrict buf) {
  return (int)syscall(SYS_newfstatat, AT_FDCWD, path, buf, 0);
}

CL_HIDDEN int fstat64(int fd, struct stat64 *buf) {
  return (int)syscall(SYS_fstat, fd, buf);
}

#endif
