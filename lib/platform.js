'use strict';
// Where the Custom Label ABI can be published: Linux with glibc, on x86-64
// or aarch64.  Decided from what the running Node reports, so the install
// script (scripts/install.js), the loader (lib/native.js) and the reader's
// launcher (bin/customlabels-dump.js) agree.

// The C library this process runs on: 'glibc', 'musl' or 'unknown', from
// the dynamic loader mapped into it (reading /proc/self/maps takes well
// under a millisecond; Node's diagnostic report, which also names the glibc
// version, takes tens).
function libc() {
  if (process.platform !== 'linux') return 'unknown';
  let maps;
  try {
    maps = require('node:fs').readFileSync('/proc/self/maps', 'latin1');
  } catch {
    return 'unknown';
  }
  if (/\/ld-musl-[^/\n]*$/m.test(maps)) return 'musl';
  if (/\/(ld-linux[^/\n]*|libc\.so\.6)$/m.test(maps)) return 'glibc';
  return 'unknown';
}

// null where the ABI is supported, else why not (one sentence, no period).
function unsupportedReason() {
  const { platform, arch } = process;
  if (platform !== 'linux' || (arch !== 'x64' && arch !== 'arm64')) {
    return `the Custom Label ABI needs Linux on x86-64 or aarch64, not ${platform}/${arch}`;
  }
  const c = libc();
  if (c !== 'glibc') return `the Custom Label ABI needs glibc's TLS descriptors, and this Node runs on ${c === 'musl' ? 'musl' : 'a C library other than glibc'}`;
  return null;
}

module.exports = { unsupportedReason, libc };
