'use strict';
// The two ways the readers of test/readers/ reach a process: every reader
// is written over `read(address, length) -> Buffer` (BigInt address) and a
// thread pointer, as an eBPF program is over bpf_probe_read_user and the
// task's saved register.
//
// - inside(): this process's own memory through /proc/self/mem.  Used
//   under qemu-user, where neither ptrace nor process_vm_readv exists; the
//   thread pointers then come from the threads themselves
//   (test/fixtures/tp_addon.c).
// - outside(pid): another process through ptrace_probe.c (ptrace for the
//   thread pointer, process_vm_readv for memory), synchronously over two
//   FIFOs so that the readers stay plain functions.

const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function inside() {
  const fd = fs.openSync('/proc/self/mem', 'r');
  return {
    read(address, length) {
      const buf = Buffer.alloc(length);
      const n = length ? fs.readSync(fd, buf, 0, length, Number(address)) : 0;
      if (n !== length) throw new Error(`read of ${length} bytes at 0x${address.toString(16)} got ${n}`);
      return buf;
    },
    close() {
      fs.closeSync(fd);
    },
  };
}

// ptrace_probe.c, built once per test process into a temporary directory
// removed at exit: { file, dir } (`dir` takes outside()'s FIFOs too).
let built = null;
function probe() {
  if (built) return built;
  const { cc } = require('../../helpers/emulation');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-probe-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'ptrace_probe');
  execFileSync(cc, ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-Werror', '-o', file, path.join(__dirname, 'ptrace_probe.c')]);
  built = { file, dir };
  return built;
}

// Starts the probe on `pid`; `dir` is a temporary directory for the FIFOs.
function outside(probe, pid, dir) {
  const commands = path.join(dir, `commands-${pid}`);
  const replies = path.join(dir, `replies-${pid}`);
  execFileSync('mkfifo', [commands, replies]);
  const child = spawn(probe, [String(pid), commands, replies], { stdio: ['ignore', 'inherit', 'inherit'] });
  // Opened in the probe's order: its reads of commands wait for this end.
  const cmd = fs.openSync(commands, 'w');
  const rep = fs.openSync(replies, 'r');
  let pending = Buffer.alloc(0);

  function ask(line) {
    fs.writeSync(cmd, `${line}\n`);
    for (;;) {
      const nl = pending.indexOf(10);
      if (nl >= 0) {
        const answer = pending.subarray(0, nl).toString('latin1');
        pending = pending.subarray(nl + 1);
        if (answer.startsWith('ok')) return answer.slice(3);
        const err = new Error(`ptrace_probe ${line}: ${answer}`);
        err.errno = Number(answer.split(' ')[1]);
        throw err;
      }
      const chunk = Buffer.alloc(1 << 16);
      const n = fs.readSync(rep, chunk, 0, chunk.length, null);
      if (n === 0) throw new Error(`ptrace_probe ${line}: the probe closed its replies`);
      pending = Buffer.concat([pending, chunk.subarray(0, n)]);
    }
  }

  return {
    read(address, length) {
      return Buffer.from(ask(`read ${address.toString(16)} ${length}`), 'hex');
    },
    stop: (tid) => ask(`stop ${tid}`),
    threadPointer: (tid) => BigInt(`0x${ask(`tp ${tid}`)}`),
    cont: (tid) => ask(`cont ${tid}`),
    close() {
      fs.closeSync(cmd);
      fs.closeSync(rep);
      return new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
    },
  };
}

// A view of `mem` that reads each 4 KiB page once: for a process whose
// threads are all stopped, whose memory therefore does not change, it
// returns the same bytes with fewer round trips to the probe.  A page that
// cannot be read whole is read as asked.
function paged(mem) {
  const PAGE = 4096n;
  const pages = new Map();
  const page = (n) => {
    if (!pages.has(n)) {
      try {
        pages.set(n, mem.read(n * PAGE, Number(PAGE)));
      } catch {
        pages.set(n, null);
      }
    }
    return pages.get(n);
  };
  return {
    read(address, length) {
      const parts = [];
      for (let a = address, left = length; left > 0;) {
        const p = page(a / PAGE);
        const at = Number(a % PAGE);
        const n = Math.min(left, Number(PAGE) - at);
        if (p === null) return mem.read(address, length);
        parts.push(p.subarray(at, at + n));
        a += BigInt(n);
        left -= n;
      }
      return Buffer.concat(parts, length);
    },
  };
}

// /proc/PID/maps as the profilers parse it: start, end, permissions, file
// offset, device, inode and path (which may be empty, or a pseudo-name such
// as [anon:OTEL_CTX], or end in " (deleted)").
function maps(pid) {
  return fs.readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n').filter(Boolean).map((line) => {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) ([0-9a-f]+) (\S+) (\d+)\s*(.*)$/.exec(line);
    return {
      start: BigInt(`0x${m[1]}`), end: BigInt(`0x${m[2]}`), perms: m[3], offset: BigInt(`0x${m[4]}`),
      device: m[5], inode: Number(m[6]), path: m[7],
    };
  });
}

// A reader's inside(ctx), as support/harness.js calls it in the target:
// its readProcess over this process's own memory.
function readingSelf(readProcess) {
  return (ctx) => {
    const mem = inside();
    try {
      return readProcess({ pid: process.pid, mem, ...ctx });
    } finally {
      mem.close();
    }
  };
}

module.exports = { inside, probe, outside, paged, maps, readingSelf };
