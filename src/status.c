/*
 * What the user is told: the messages of cl_status_t (src/internal.h), in
 * words a user of the JavaScript API understands (src/addon.c throws them,
 * after "customlabels: " and what was being done), and which warnings the
 * process has given.
 */
#include "internal.h"

const char *cl__strerror(int status) {
  switch ((cl_status_t)status) {
    case CL_OK: return "no error";
    case CL_ENOMEM: return "out of memory";
    case CL_ETOOBIG:
      return "the OpenTelemetry process context would not fit in its 64 KiB mapping";
    case CL_EFULL:
      return "the OpenTelemetry thread context has 256 label keys already, as many as it can name";
    case CL_EINVAL:
      return "a key is empty or longer than 255 bytes, a value is longer than 4096 bytes, "
             "or a resource attribute's key starts with \"threadlocal.\", which the "
             "OpenTelemetry process context keeps for itself";
    case CL_EDISABLED:
      return "the OpenTelemetry thread context is not enabled (enableThreadContext() enables it)";
    case CL_ETOOMANY:
      return "the OpenTelemetry process context would hold more than 128 resource attributes";
    case CL_EBUDGET:
      return "the resource attributes would take more than 48 KiB of the OpenTelemetry "
             "process context";
    case CL_EBUSY: return "this thread's label arena has its memory already";
  }
  return "an error this version of customlabels does not know";
}

/*
 * The warnings the process has given, one bit each (cl__warning_t).  Some
 * warnings are about the process, not about one environment: whether the
 * module is in dynamic TLS (a module's TLS is static or dynamic for as long
 * as it is loaded, and cl__stay_loaded() makes that the life of the
 * process), and how CUSTOMLABELS_PUBLISH, which every thread reads from
 * the same environment, was taken.  Worker environment data cannot say
 * that once: a worker started before the first warning, or by a thread
 * that never loaded the package, inherits nothing.  So this word, the only
 * mutable global here besides the thread-locals, is what makes each of
 * them once per process rather than once per worker.
 */
static unsigned warnings_given;

bool cl__claim_warning(cl__warning_t which) {
  return (__atomic_fetch_or(&warnings_given, (unsigned)which, __ATOMIC_RELAXED) & (unsigned)which) == 0;
}
