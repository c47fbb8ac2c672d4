'use strict';
// Preloaded with `node -r` to make this process look like another platform,
// for the tests of what happens where the ABI is not supported:
//   CUSTOMLABELS_FAKE_PLATFORM=darwin|win32|...  process.platform
//   CUSTOMLABELS_FAKE_ARCH=riscv64|...           process.arch
//   CUSTOMLABELS_FAKE_LIBC=musl                   a musl loader in /proc/self/maps

const fs = require('node:fs');

const { CUSTOMLABELS_FAKE_PLATFORM: platform, CUSTOMLABELS_FAKE_ARCH: arch, CUSTOMLABELS_FAKE_LIBC: libc } = process.env;
if (platform) Object.defineProperty(process, 'platform', { value: platform });
if (arch) Object.defineProperty(process, 'arch', { value: arch });
if (libc === 'musl') {
  const read = fs.readFileSync;
  fs.readFileSync = function (file, ...rest) {
    if (file === '/proc/self/maps') {
      return '7f0000000000-7f0000001000 r-xp 00000000 00:00 1 /lib/ld-musl-x86_64.so.1\n';
    }
    return read.call(this, file, ...rest);
  };
}
