'use strict';
// Another OpenTelemetry process context (OTEP 4719) in this process.  A
// process should have one OTEL_CTX mapping; a second writer (dd-trace maps
// its own through @datadog/libdatadog's process discovery, whether or not
// DD_TRACE_OTEL_CTX_ENABLED is set) makes each reader pick one, and they do
// not pick the same:
//   - the OpenTelemetry eBPF profiler reads every matching mapping and keeps
//     the last one in /proc/PID/maps order
//     (open-telemetry/opentelemetry-ebpf-profiler
//     processmanager/processinfo.go, SynchronizeProcess, at
//     b442421a32ccfa07a527084c7c93b0f2b260b28f);
//   - the Datadog Agent keeps the first (DataDog/datadog-agent
//     pkg/security/resolvers/process/otel_tls.go, loadTLSCandidateObjects,
//     at 02248160ea9ab5eafd330f90fc656df0b74e6b52).
// A reader that holds the other writer's context gets its resource and
// key map, not ours: it decodes none of customlabels' attributes, or
// decodes them under that map's names.  Said once per process, as a
// warning, when enableThreadContext() finds one, and after a native module
// loads once the context is ours (lib/addon.js onLoad).  Only this file's
// own checks read /proc/self/maps; nothing polls.

const fs = require('node:fs');
const { warnOnce } = require('./warnings');

const CODE = 'CUSTOMLABELS_OTHER_PROCESS_CONTEXT';
const NAMES = new Set(['/memfd:OTEL_CTX', '/memfd:OTEL_CTX (deleted)', '[anon_shmem:OTEL_CTX]', '[anon:OTEL_CTX]']);
const DOCS = 'the package\'s docs/readers.md, "Beside dd-trace"';

// The OTEL_CTX mappings and the native modules of /proc/self/maps:
// { contexts: [{ start, name }] in maps order, files: Set of paths }.
function scan() {
  const contexts = [];
  const files = new Set();
  for (const line of fs.readFileSync('/proc/self/maps', 'utf8').split('\n')) {
    const m = /^([0-9a-f]+)-[0-9a-f]+ (\S{4}) \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (!m) continue;
    if (NAMES.has(m[3]) && m[2][2] !== 'x') contexts.push({ start: Number.parseInt(m[1], 16), name: m[3] });
    else if (m[3].endsWith('.node')) files.add(m[3]);
  }
  return { contexts, files };
}

// Who mapped the other context, where a loaded module says so.
function publisherOf(files) {
  const list = [...files];
  if (list.some((f) => /[\\/]@datadog[\\/]libdatadog[^\\/]*[\\/]/.test(f) && /process_discovery/.test(f))) {
    return 'dd-trace (through @datadog/libdatadog\'s process discovery)';
  }
  if (list.some((f) => /[\\/]@datadog[\\/]/.test(f))) return 'a Datadog library (@datadog/...)';
  return 'another library in this process';
}

const hex = (a) => `0x${a.toString(16)}`;

// Warns once where an OTEL_CTX mapping other than ours (at `ours`, the
// header this package published) is mapped.  Returns the warning's text,
// or null.  Never throws.
function checkOtherContexts(ours) {
  try {
    if (!ours || process.platform !== 'linux') return null;
    const { contexts, files } = scan();
    const others = contexts.filter((c) => c.start !== ours);
    if (others.length === 0 || !contexts.some((c) => c.start === ours)) return null;
    const first = contexts[0].start === ours ? 'customlabels\'' : 'the other';
    const last = contexts[contexts.length - 1].start === ours ? 'customlabels\'' : 'the other';
    const pprof = [...files].some((f) => /dd_pprof[^\\/]*\.node$/.test(f));
    const message = `This process has ${others.length === 1 ? 'another OpenTelemetry process context' : `${others.length} other OpenTelemetry process contexts`} ` +
      `besides customlabels' (${others.map((c) => `${c.name} at ${hex(c.start)}`).join(', ')}; customlabels' at ${hex(ours)}), ` +
      `mapped by ${publisherOf(files)}. A profiler reads one OTEL_CTX mapping per process: the OpenTelemetry eBPF profiler ` +
      `takes the last in /proc/PID/maps, here ${last}; the Datadog Agent the first, here ${first}. A profiler that takes ` +
      'the other one reads its resource attributes and key map, not customlabels\': it decodes no customlabels label ' +
      `from the thread context, or decodes them under the other map's key names${pprof
        ? '; @datadog/pprof (dd_pprof.node) also defines otel_thread_ctx_nodejs_v1, and the Datadog Agent reads the first mapped file that does'
        : ''}. customlabels-dump reads customlabels' own. Labels through the Custom Label ABI (Parca Agent) are not affected. See ${DOCS}`;
    warnOnce(CODE, message);
    return message;
  } catch {
    return null;
  }
}

module.exports = { checkOtherContexts, scan, CODE };
