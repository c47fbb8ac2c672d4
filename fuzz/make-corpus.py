#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into fuzz/corpus/<target>/.

The seeds are checked in; run this again only to change them.  It needs gcc,
and aarch64-linux-gnu-gcc for the aarch64 ELF seeds (skipped without it).

  elf/      small real ELF files that export the ABI, built here for the
            purpose (x86-64 and aarch64: shared objects with a TLSDESC
            relocation, with .gnu.hash or only .hash, PIE and non-PIE
            executables), and copies patched into edge cases.
  tlsdesc/  tlsdesc_fuzz.c's header plus a memory image: static and dynamic
            TLS on both architectures, and the ways a module can be refused.
  labels/   memory images of label sets as labels_fuzz.c reads them,
            well-formed and malformed.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, 'corpus')

ABI_SOURCE = r'''
typedef unsigned int u32;
__attribute__((visibility("default"), used)) const u32 custom_labels_abi_version = VERSION;
__attribute__((visibility("default"))) __thread void *custom_labels_current_set;
#ifdef BIG_TLS
__attribute__((visibility("default"))) __thread char padding[65536];
#endif
__attribute__((visibility("default"))) void publish(void *p) { custom_labels_current_set = p; }
#ifdef EXE
extern void _exit(int) __attribute__((noreturn));
void _start(void) { publish(0); _exit(0); }
#endif
'''


def write(target, name, data):
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), 'wb') as f:
        f.write(data)


# ---------------------------------------------------------------------------
# ELF files

def have(command):
    return shutil.which(command) is not None


def build_elves(tmp):
    """Builds the real files; returns {name: bytes}."""
    source = os.path.join(tmp, 'abi.c')
    with open(source, 'w') as f:
        f.write(ABI_SOURCE)
    # Small files: no build id, no page padding between segments, stripped.
    common = ['-O1', '-DVERSION=1', '-Wl,--build-id=none', '-Wl,-z,max-page-size=4096',
              '-Wl,-z,noseparate-code', '-Wl,-z,norelro', '-s']
    compilers = [('x86_64', 'gcc', '-mtls-dialect=gnu2')]
    if have('aarch64-linux-gnu-gcc'):
        compilers.append(('aarch64', 'aarch64-linux-gnu-gcc', '-mtls-dialect=desc'))
    else:
        print('aarch64-linux-gnu-gcc not found: no aarch64 ELF seeds', file=sys.stderr)
    lib = ['-nostdlib', '-fPIC', '-shared', '-ftls-model=global-dynamic']
    variants = [
        ('lib.so', lib),
        ('lib-sysv-hash.so', lib + ['-Wl,--hash-style=sysv']),
        ('lib-big-tls.so', lib + ['-DBIG_TLS']),
        ('lib-version2.so', lib + ['-UVERSION', '-DVERSION=2']),
        ('pie', ['-DEXE', '-nostartfiles', '-fPIE', '-pie', '-rdynamic']),
        ('exe', ['-DEXE', '-nostartfiles', '-fno-pie', '-no-pie', '-rdynamic']),
    ]
    files = {}
    for arch, cc, dialect in compilers:
        for name, flags in variants:
            out = os.path.join(tmp, f'{arch}-{name}')
            subprocess.run([cc, *common, dialect, *flags, '-o', out, source], check=True)
            with open(out, 'rb') as f:
                files[f'{arch}-{name}'] = f.read()
    return files


def sections(elf):
    shoff, = struct.unpack_from('<Q', elf, 0x28)
    shnum, = struct.unpack_from('<H', elf, 0x3c)
    return [(shoff + i * 64, struct.unpack_from('<IIQQQQIIQQ', elf, shoff + i * 64))
            for i in range(shnum)]


def tlsdesc_with_addend(elf):
    """The TLSDESC relocation rewritten the way a linker that binds the
    variable locally writes it: no symbol, the offset in the addend."""
    elf = bytearray(elf)
    for _, (_, sh_type, _, _, offset, size, *_rest) in sections(elf):
        if sh_type != 4:  # SHT_RELA
            continue
        for at in range(offset, offset + size, 24):
            r_offset, r_info, r_addend = struct.unpack_from('<QQq', elf, at)
            if r_info & 0xffffffff in (36, 1031):  # R_X86_64_TLSDESC, R_AARCH64_TLSDESC
                struct.pack_into('<QQq', elf, at, r_offset, r_info & 0xffffffff, r_addend)
    return bytes(elf)


def extended_numbering(elf):
    """e_shnum 0, the count in section 0's sh_size, as for 65280+ sections."""
    elf = bytearray(elf)
    count = len(sections(elf))
    shoff, = struct.unpack_from('<Q', elf, 0x28)
    struct.pack_into('<H', elf, 0x3c, 0)
    struct.pack_into('<Q', elf, shoff + 32, count)
    return bytes(elf)


def no_section_headers(elf):
    """As sstrip leaves a file: e_shoff, e_shentsize, e_shnum, e_shstrndx 0."""
    elf = bytearray(elf)
    struct.pack_into('<Q', elf, 0x28, 0)
    struct.pack_into('<HHH', elf, 0x3a, 0, 0, 0)
    return bytes(elf)


def gnu_hash_loop(elf):
    """A .gnu.hash whose chain never ends (no word with bit 0 set)."""
    elf = bytearray(elf)
    for _, (_, sh_type, _, _, offset, size, *_rest) in sections(elf):
        if sh_type != 0x6ffffff6:  # SHT_GNU_HASH
            continue
        nbuckets, symoffset, bloom_size, _ = struct.unpack_from('<IIII', elf, offset)
        chain = offset + 16 + bloom_size * 8 + nbuckets * 4
        for at in range(chain, offset + size, 4):
            word, = struct.unpack_from('<I', elf, at)
            struct.pack_into('<I', elf, at, word & ~1)
    return bytes(elf)


def elf_seeds():
    with tempfile.TemporaryDirectory() as tmp:
        files = build_elves(tmp)
    for name, data in sorted(files.items()):
        write('elf', name, data)
    for arch in ('x86_64', 'aarch64'):
        lib = files.get(f'{arch}-lib.so')
        if lib is None:
            continue
        write('elf', f'{arch}-lib-tlsdesc-addend.so', tlsdesc_with_addend(lib))
        write('elf', f'{arch}-lib-extended-numbering.so', extended_numbering(lib))
        write('elf', f'{arch}-lib-no-section-headers.so', no_section_headers(lib))
        write('elf', f'{arch}-lib-gnu-hash-endless-chain.so', gnu_hash_loop(lib))
        write('elf', f'{arch}-lib-truncated.so', lib[:len(lib) // 2])


# ---------------------------------------------------------------------------
# Memory images: a bump allocator over one bytearray at a fixed address.

class Image:
    def __init__(self, base):
        self.base = base
        self.data = bytearray()

    def alloc(self, size, align=8):
        while len(self.data) % align:
            self.data.append(0)
        at = len(self.data)
        self.data.extend(b'\0' * size)
        return self.base + at

    def put(self, data, align=1):
        address = self.alloc(len(data), align)
        self.set(address, data)
        return address

    def set(self, address, data):
        at = address - self.base
        self.data[at:at + len(data)] = data

    def u64(self, address, value):
        self.set(address, struct.pack('<Q', value & 0xffffffffffffffff))


# ---------------------------------------------------------------------------
# Label sets (labels_fuzz.c): the image is at 0x10000; its first word is
# custom_labels_current_set.

LABELS_BASE = 0x10000


def label_set(entries, count=None):
    """entries: (key, value) pairs of bytes, None for a NULL buf, or
    (bytes, claimed_len) to claim another length than the bytes'."""
    img = Image(LABELS_BASE)
    variable = img.alloc(8)
    labelset = img.alloc(24)
    table = img.alloc(32 * len(entries))
    img.u64(variable, labelset)
    img.u64(labelset, table)
    img.u64(labelset + 8, len(entries) if count is None else count)
    img.u64(labelset + 16, len(entries))

    def string(at, s):
        if s is None:
            img.u64(at, 0)
            img.u64(at + 8, 0)
            return
        data, length = s if isinstance(s, tuple) else (s, len(s))
        img.u64(at, length)
        img.u64(at + 8, img.put(data) if data else img.alloc(1))

    for i, (key, value) in enumerate(entries):
        string(table + 32 * i, key)
        string(table + 32 * i + 16, value)
    return bytes(img.data)


def labels_seeds():
    write('labels', 'null', bytes(8))
    write('labels', 'empty', label_set([]))
    write('labels', 'three', label_set([(b'route', b'/checkout'), (b'user', b'42'),
                                        ('ключ'.encode(), 'значение ✓'.encode())]))
    write('labels', 'holes-and-duplicates',
          label_set([(None, b'x'), (b'k', b'first'), (b'k', b'second'), (None, None),
                     (b'z', b'last')]))
    write('labels', 'value-buf-null', label_set([(b'k', None), (b'j', (b'', 5))]))
    write('labels', 'bytes-to-escape',
          label_set([(b'a"b\\c', b'\n\t\r\x00\x1b[31m\x7f'), (b'\xff\xfe', b'\xc3\x28\xe2\x82'),
                     (b'c1', '\u009b2J\u0085'.encode()), (b'', b'empty key'),
                     (b'surrogate', b'\xed\xa0\x80'), (b'max', '\U0010ffff'.encode())]))
    write('labels', 'long-key-and-value',
          label_set([(b'k' * 1500, b'v' * 5000)]))
    # Lengths far beyond what is mapped: the read is cut at the caps, then fails.
    write('labels', 'claimed-lengths-huge',
          label_set([((b'key', 1 << 40), (b'value', 1 << 62))]))
    # 20 distinct keys whose values share one 4096-byte buffer: past 64 KiB per set.
    img = Image(LABELS_BASE)
    variable, labelset = img.alloc(8), img.alloc(24)
    table = img.alloc(32 * 20)
    value = img.put(b'v' * 4096)
    img.u64(variable, labelset)
    img.u64(labelset, table)
    img.u64(labelset + 8, 20)
    for i in range(20):
        img.u64(table + 32 * i, 1)
        img.u64(table + 32 * i + 8, img.put(bytes([0x41 + i])))
        img.u64(table + 32 * i + 16, 4096)
        img.u64(table + 32 * i + 24, value)
    write('labels', 'set-bytes-cap', bytes(img.data))
    # count beyond the cap and beyond what is mapped.
    write('labels', 'count-huge', label_set([(b'a', b'1'), (b'b', b'2')], count=1 << 40))
    write('labels', 'count-300', label_set([(b'k%d' % i, b'v') for i in range(300)]))
    # More warnings than are kept.
    write('labels', 'many-warnings', label_set([(b'k%d' % i, None) for i in range(12)]))
    # Storage that runs off the end of the mapped memory after two entries:
    # the table is the image's last bytes.
    img = Image(LABELS_BASE)
    variable, labelset = img.alloc(8), img.alloc(24)
    strings = [img.put(s) for s in (b'a', b'1', b'b', b'2')]
    table = img.alloc(64)
    img.u64(variable, labelset)
    img.u64(labelset, table)
    img.u64(labelset + 8, 5)
    for i, address in enumerate(strings):
        img.u64(table + 16 * i, 1)
        img.u64(table + 16 * i + 8, address)
    write('labels', 'storage-cut', bytes(img.data))
    # Pointers that lead nowhere.
    img = Image(LABELS_BASE)
    img.u64(img.alloc(8), 0xdead0000)
    write('labels', 'set-unmapped', bytes(img.data))
    img = Image(LABELS_BASE)
    variable, labelset = img.alloc(8), img.alloc(24)
    table = img.alloc(64)
    img.u64(variable, labelset)
    img.u64(labelset, table)
    img.u64(labelset + 8, 2)
    for i, (key, value) in enumerate([(0xbad00000, 0), (0, 0xbad00000)]):
        k = key or img.put(b'key%d' % i)
        v = value or img.put(b'value')
        img.u64(table + 32 * i, 3)
        img.u64(table + 32 * i + 8, k)
        img.u64(table + 32 * i + 16, 5)
        img.u64(table + 32 * i + 24, v)
    write('labels', 'key-and-value-unmapped', bytes(img.data))
    img = Image(LABELS_BASE)
    variable, labelset = img.alloc(8), img.alloc(24)
    img.u64(variable, labelset)
    img.u64(labelset, 0xbad00000)
    img.u64(labelset + 8, 3)
    write('labels', 'storage-unmapped', bytes(img.data))


# ---------------------------------------------------------------------------
# TLS descriptors (tlsdesc_fuzz.c): a header, then an image at 0x10000.
# Load vaddr and offset 0, so the load bias is the image's address and the
# header's addresses are offsets in the image.

TLS_BASE = 0x10000
F_AARCH64, F_IS_EXE, F_HAS_TLS, F_HAS_DESC, F_BAD_MAP = 1, 2, 4, 8, 16
STT_OBJECT, STT_TLS = 1, 6
X86_STATIC = bytes.fromhex('f30f1efa488b4008c3')        # endbr64; mov 8(%rax),%rax; ret
AARCH64_STATIC = bytes.fromhex('5f2403d5000440f9c0035fd6')  # bti c; ldr x0,[x0,#8]; ret
X86_OTHER = bytes.fromhex('f30f1efa554889e5')          # endbr64; push %rbp; mov %rsp,%rbp


def tls_seed(flags, img, *, set_type=STT_TLS, version_value=0, version_size=4, set_value=0,
             tls=(0x1000, 8, 8), desc_offset=0, desc_var_offset=0, tps=(0, 0)):
    tls_vaddr, tls_memsz, tls_align = tls
    header = struct.pack('<BB12Q', flags, set_type, version_value, version_size, set_value,
                         tls_vaddr, tls_memsz, tls_align, desc_offset, desc_var_offset,
                         0, 0, *(t & 0xffffffffffffffff for t in tps))
    return header + bytes(img.data)


def tls_module(version=1):
    img = Image(TLS_BASE)
    version_at = img.put(struct.pack('<I', version), 8)
    return img, version_at - TLS_BASE


def dtv_thread(img, arch_aarch64, length, generation, module, block):
    """A thread pointer whose DTV maps `module` to `block`."""
    tcb = img.alloc(32, 16)
    dtv = img.alloc(16 * (length + 2), 16) + 16  # entry -1 is the length
    img.u64(dtv - 16, length)
    img.u64(dtv, generation)
    img.u64(dtv + 16 * module, block)
    img.u64(tcb + (0 if arch_aarch64 else 8), dtv)
    return tcb


def tlsdesc_seeds():
    for arch, flag, tp_base in (('x86_64', 0, 0x7f0000001000), ('aarch64', F_AARCH64, 0x7f0000001000)):
        aarch64 = flag == F_AARCH64
        img, version = tls_module()
        write('tlsdesc', f'{arch}-exe-static',
              tls_seed(flag | F_IS_EXE | F_HAS_TLS, img, version_value=version,
                       tls=(0x11a8 if aarch64 else 0x1000, 8, 8 if aarch64 else 16),
                       tps=(tp_base, 0)))

        # Static TLS through the resolver glibc installs for it.
        img, version = tls_module()
        code = img.put(AARCH64_STATIC if aarch64 else X86_STATIC, 16)
        desc = img.alloc(16)
        img.u64(desc, code)
        img.u64(desc + 8, 0x30 if aarch64 else -440)
        write('tlsdesc', f'{arch}-lib-static',
              tls_seed(flag | F_HAS_TLS | F_HAS_DESC, img, version_value=version,
                       desc_offset=desc - TLS_BASE, tps=(tp_base, 0)))

        # Dynamic TLS: glibc's argument, and one thread that has the block and
        # one whose DTV predates the module.
        img, version = tls_module()
        code = img.put(X86_OTHER if not aarch64 else bytes(16), 16)
        arg = img.alloc(24)
        img.u64(arg, 2)        # module
        img.u64(arg + 8, 0)    # offset: the variable's, desc_var_offset
        img.u64(arg + 16, 3)   # generation
        desc = img.alloc(16)
        img.u64(desc, code)
        img.u64(desc + 8, arg)
        block = img.alloc(16)
        img.u64(block, 0x12345000)
        tp1 = dtv_thread(img, aarch64, 4, 5, 2, block)
        tp2 = dtv_thread(img, aarch64, 4, 1, 2, 0)
        write('tlsdesc', f'{arch}-lib-dynamic',
              tls_seed(flag | F_HAS_TLS | F_HAS_DESC, img, version_value=version,
                       tls=(0x1000, 65544, 32), desc_offset=desc - TLS_BASE, tps=(tp1, tp2)))

        # A resolver this reader does not know, an argument that looks static.
        img, version = tls_module()
        code = img.put(b'\x90' * 16, 16)
        desc = img.alloc(16)
        img.u64(desc, code)
        img.u64(desc + 8, 0x40 if aarch64 else -0x100)
        write('tlsdesc', f'{arch}-lib-unknown-resolver',
              tls_seed(flag | F_HAS_TLS | F_HAS_DESC, img, version_value=version,
                       desc_offset=desc - TLS_BASE, tps=(tp_base, 0)))

    # Modules refused before any descriptor is read.
    img, version = tls_module(version=2)
    write('tlsdesc', 'version-2', tls_seed(F_IS_EXE | F_HAS_TLS, img, version_value=version))
    img, version = tls_module()
    write('tlsdesc', 'version-size-8',
          tls_seed(F_IS_EXE | F_HAS_TLS, img, version_value=version, version_size=8))
    write('tlsdesc', 'set-not-tls',
          tls_seed(F_IS_EXE | F_HAS_TLS, img, version_value=version, set_type=STT_OBJECT))
    write('tlsdesc', 'no-pt-tls', tls_seed(F_IS_EXE, img, version_value=version))
    write('tlsdesc', 'lib-no-tlsdesc', tls_seed(F_HAS_TLS, img, version_value=version))
    write('tlsdesc', 'mapping-not-first-load',
          tls_seed(F_IS_EXE | F_HAS_TLS | F_BAD_MAP, img, version_value=version))
    write('tlsdesc', 'exe-tls-misaligned',
          tls_seed(F_IS_EXE | F_HAS_TLS, img, version_value=version, tls=(0x1003, 24, 12)))


def main():
    elf_seeds()
    tlsdesc_seeds()
    labels_seeds()


if __name__ == '__main__':
    main()
