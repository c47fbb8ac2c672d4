/* The messages of cl_status_t (customlabels.h), in words a user of the
 * JavaScript API understands: src/addon.c throws them, after
 * "customlabels: " and what was being done. */
#include "customlabels.h"

const char *cl_strerror(int status) {
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
