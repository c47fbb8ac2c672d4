'use strict';
// Whether this process runs under a user-mode emulator (qemu-user), as
// .ci/arm64 runs the suite: an arm64 Node.js on an x86-64 machine.
//
// How it is told: qemu-user answers /proc/self/exe (and /proc/PID/exe for
// its own PID) with the emulated program, but not the same link reached
// through /proc/thread-self/ or /proc/self/task/TID/, where the kernel's
// answer shows through: the emulator's own binary.  os.machine() cannot
// tell (qemu-user reports the emulated machine, aarch64), and an
// environment variable would also be believed by a native process it leaks
// into.  .ci/arm64 checks that this says true before it runs the suite, so
// a qemu that hid these links too would stop the run there, not let tests
// that cannot work under emulation fail.
//
// What cannot work under emulation: qemu-user implements neither ptrace
// nor process_vm_readv (both fail with ENOSYS in the emulated program), so
// neither customlabels-dump nor gdb can read a live process.

const fs = require('node:fs');
const path = require('node:path');

function emulatorPath() {
  for (const link of ['/proc/thread-self/exe', `/proc/self/task/${process.pid}/exe`]) {
    try {
      const exe = fs.readlinkSync(link);
      if (/^qemu-/.test(path.basename(exe))) return exe;
    } catch {
      // Not Linux, or no such link: not qemu-user either.
    }
  }
  return null;
}

const emulator = emulatorPath();
const emulated = emulator !== null;

// The C compiler that builds for this process's architecture: the
// machine's own gcc, or under emulation the cross compiler for the
// emulated architecture (Debian: gcc-aarch64-linux-gnu).
const cc = emulated ? { arm64: 'aarch64-linux-gnu-gcc', x64: 'x86_64-linux-gnu-gcc' }[process.arch] : 'gcc';
// The same for C++ (Debian: g++-aarch64-linux-gnu).
const cxx = emulated ? { arm64: 'aarch64-linux-gnu-g++', x64: 'x86_64-linux-gnu-g++' }[process.arch] : 'g++';

// Why a test cannot run under emulation.
const why = {
  dump: 'customlabels-dump reads a live process with ptrace and process_vm_readv, which qemu-user does not implement',
  gdb: 'gdb attaches with ptrace, which qemu-user does not implement',
  npm: 'npm and its install scripts run on the host\'s x86-64 Node here, so they see the x86-64 platform, not the emulated one',
};

// Skips the running test, or from a hook its whole describe, under
// emulation, and says why (test/helpers/needs.js: in the run's summary too).
function skipUnderEmulation(ctx, reason) {
  if (!emulated) return;
  require('./needs').feature(ctx, 'under emulation', `under emulation, ${reason}`);
}

module.exports = { emulated, emulator, cc, cxx, why, skipUnderEmulation };
