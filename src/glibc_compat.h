/*
 * The glibc the addon needs: 2.28 (RHEL 8 and its rebuilds; Debian 11 has
 * 2.31), not the glibc it was built on.
 *
 * glibc 2.34 moved dladdr, dlopen, dlsym, dlclose, dlinfo (libdl) and pthread_once
 * (libpthread) into libc.so.6 and gave them a new symbol version,
 * GLIBC_2.34; a file linked against glibc 2.34 or later asks for that
 * version, which older glibc does not have, so it fails to load there.  The
 * versions those functions had before are still in libc.so.6 as
 * compatibility symbols (readelf --dyn-syms /lib/x86_64-linux-gnu/libc.so.6
 * on glibc 2.36: dlopen@GLIBC_2.2.5 beside dlopen@@GLIBC_2.34, dlinfo@
 * GLIBC_2.3.3; on aarch64 all at GLIBC_2.17, its base version).  Each
 * .symver below binds this file's calls to the old version, which every
 * glibc since the architecture's first has.  On glibc before 2.34 the
 * functions are found in libdl.so.2 and libpthread.so.0, so binding.gyp
 * links both by name: they are loaded with the addon even where the
 * process did not load them (on glibc 2.34 and later they are empty).
 *
 * RTLD_DI_TLS_DATA, the one dlinfo request made here, is older than 2.28:
 * bminor/glibc 04277e02d7f54d3582bebcf8386b317018cd5e1d dlfcn/dlinfo.c.
 *
 * Include it in each file that calls one of these functions, after the
 * system headers.  test/glibc.test.js checks the highest version each built
 * file asks for.
 */
#ifndef CL_GLIBC_COMPAT_H
#define CL_GLIBC_COMPAT_H

#if defined(__GLIBC__)
#define CL_SYMVER(name, version) __asm__(".symver " #name "," #name "@" version)
#if defined(__x86_64__)
CL_SYMVER(dladdr, "GLIBC_2.2.5");
CL_SYMVER(dlopen, "GLIBC_2.2.5");
CL_SYMVER(dlsym, "GLIBC_2.2.5");
CL_SYMVER(dlclose, "GLIBC_2.2.5");
CL_SYMVER(dlinfo, "GLIBC_2.3.3");
CL_SYMVER(pthread_once, "GLIBC_2.2.5");
#elif defined(__aarch64__)
CL_SYMVER(dladdr, "GLIBC_2.17");
CL_SYMVER(dlopen, "GLIBC_2.17");
CL_SYMVER(dlsym, "GLIBC_2.17");
CL_SYMVER(dlclose, "GLIBC_2.17");
CL_SYMVER(dlinfo, "GLIBC_2.17");
CL_SYMVER(pthread_once, "GLIBC_2.17");
#endif
#undef CL_SYMVER
#endif

#endif
