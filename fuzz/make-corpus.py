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
  frame/    frame_fuzz.c's layout and a memory image of a thread in frame
            mode: the discovery struct, the frame (a JSMap), its hash
            table, the store object and its record, well-formed and broken.
  otel/     what otel_fuzz.c reads: ProcessContext payloads, memory images
            of otel_thread_ctx_v1 and its record, memory images of an
            OTEL_CTX header and payload, and lines of /proc/PID/maps.

  python3 fuzz/make-corpus.py          # every target
  python3 fuzz/make-corpus.py otel     # some targets only
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
F_OTEL, F_TPOFF, F_DTPMOD = 32, 64, 128
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

    # otel_thread_ctx_v1: no version; in a shared object also initial-exec
    # and legacy global-dynamic GOT entries.
    tp_base = 0x7f0000001000
    img = Image(TLS_BASE)
    write('tlsdesc', 'otel-exe-static',
          tls_seed(F_OTEL | F_IS_EXE | F_HAS_TLS, img, tls=(0x1000, 16, 16), set_value=8,
                   tps=(tp_base, 0)))
    img = Image(TLS_BASE)
    got = img.alloc(8)
    img.u64(got, -432)
    write('tlsdesc', 'otel-lib-initial-exec',
          tls_seed(F_OTEL | F_HAS_TLS | F_TPOFF, img, desc_offset=got - TLS_BASE, tps=(tp_base, 0)))
    img = Image(TLS_BASE)
    got = img.alloc(8)
    img.u64(got, 0x1234)
    write('tlsdesc', 'otel-lib-initial-exec-not-an-offset',
          tls_seed(F_OTEL | F_HAS_TLS | F_TPOFF, img, desc_offset=got - TLS_BASE, tps=(tp_base, 0)))
    for arch, flag in (('x86_64', 0), ('aarch64', F_AARCH64)):
        img = Image(TLS_BASE)
        got = img.alloc(16)
        img.u64(got, 3)      # module id
        img.u64(got + 8, 8)  # offset in the module's block
        block = img.alloc(16)
        img.u64(block + 8, 0x12345000)
        tp1 = dtv_thread(img, flag == F_AARCH64, 4, 5, 3, block)
        tp2 = dtv_thread(img, flag == F_AARCH64, 2, 5, 1, 0)
        write('tlsdesc', f'{arch}-otel-lib-global-dynamic',
              tls_seed(flag | F_OTEL | F_HAS_TLS | F_DTPMOD, img, set_value=8, tls=(0x1000, 16, 8),
                       desc_offset=got - TLS_BASE, tps=(tp1, tp2)))
    img = Image(TLS_BASE)
    write('tlsdesc', 'otel-lib-no-relocation', tls_seed(F_OTEL | F_HAS_TLS, img))


# ---------------------------------------------------------------------------
# OpenTelemetry (otel_fuzz.c): protobuf payloads written from the encoding
# rules, records and headers in memory images at 0x10000.

OTEL_BASE = 0x10000


def pb_varint(v):
    v &= 0xffffffffffffffff
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7f | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pb_tag(field, wire):
    return pb_varint(field << 3 | wire)


def pb_len(field, data):
    if isinstance(data, str):
        data = data.encode()
    return pb_tag(field, 2) + pb_varint(len(data)) + data


def any_string(s):
    return pb_len(1, s)


def any_int(v):
    return pb_tag(3, 0) + pb_varint(v)


def any_bool(b):
    return pb_tag(2, 0) + pb_varint(1 if b else 0)


def any_double(d):
    return pb_tag(4, 1) + struct.pack('<d', d)


def any_array(values):
    return pb_len(5, b''.join(pb_len(1, v) for v in values))


def any_kvlist(pairs):
    return pb_len(6, b''.join(pb_len(1, keyvalue(k, v)) for k, v in pairs))


def keyvalue(key, any_value):
    return pb_len(1, key) + pb_len(2, any_value)


def process_context(resource, attributes, schema='tlsdesc_v1_dev', keys=('http.route', 'http.method', 'user.id')):
    out = pb_len(1, b''.join(pb_len(1, keyvalue(k, v)) for k, v in resource))
    if schema is not None:
        out += pb_len(2, keyvalue('threadlocal.schema_version', any_string(schema)))
    if keys is not None:
        out += pb_len(2, keyvalue('threadlocal.attribute_key_map', any_array([any_string(k) for k in keys])))
    for k, v in attributes:
        out += pb_len(2, keyvalue(k, v))
    return out


def otel_record(trace, span, valid, flags, entries, attrs_size=None):
    data = b''.join(bytes([k, len(v)]) + v for k, v in entries)
    size = len(data) if attrs_size is None else attrs_size
    return bytes.fromhex(trace) + bytes.fromhex(span) + bytes([valid, flags]) + struct.pack('<H', size) + data


TRACE, SPAN = '0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331'


def record_image(record, pointer=None):
    """otel_thread_ctx_v1 at 0x10000, the record right after it."""
    return struct.pack('<Q', OTEL_BASE + 8 if pointer is None else pointer) + record


def header_image(payload, version=2, published=1234, size=None, pointer=None, signature=b'OTEL_CTX'):
    """An OTEL_CTX header at 0x10000, the payload right after it."""
    size = len(payload) if size is None else size
    pointer = OTEL_BASE + 32 if pointer is None else pointer
    return signature + struct.pack('<IIQQ', version, size, published, pointer) + payload


def otel_seeds():
    resource = [('service.name', any_string('checkout')), ('process.pid', any_int(4242))]
    full = process_context(resource, [('deployment.environment.name', any_string('prod'))])
    write('otel', 'payload', full)
    write('otel', 'payload-other-schema', process_context(resource, [], schema='tls_v1'))
    write('otel', 'payload-no-threadlocal', process_context(resource, [], schema=None, keys=None))
    # Frame mode's schema with its V8 layout keys, and one key that is not an integer.
    nodejs_layout = [('threadlocal.js_object_record_offset', any_int(40)), ('threadlocal.tagged_size', any_int(8)),
                     ('threadlocal.js_map_table_offset', any_int(24)),
                     ('threadlocal.ordered_hash_map_header_size', any_int(16))]
    write('otel', 'payload-nodejs', process_context(resource, nodejs_layout, schema='nodejs_v1_dev'))
    write('otel', 'payload-nodejs-bad-key',
          process_context(resource, nodejs_layout + [('threadlocal.tagged_size', any_string('8'))],
                          schema='nodejs_v1_dev'))
    write('otel', 'payload-300-keys', process_context([], [], keys=[f'k{i}' for i in range(300)]))
    write('otel', 'payload-key-map-not-strings',
          process_context([], [('threadlocal.attribute_key_map', any_array([any_string('a'), any_int(1)]))],
                          keys=None))
    write('otel', 'payload-values', process_context([
        ('int', any_int(-42)), ('bool', any_bool(True)), ('double', any_double(0.1)),
        ('nan', any_double(float('nan'))), ('inf', any_double(float('-inf'))),
        ('bytes', pb_len(7, b'\x01\xab')), ('none', b''),
        ('array', any_array([any_string('a'), any_int(1), any_array([])])),
        ('kvlist', any_kvlist([('k', any_string('v')), ('n', any_kvlist([]))])),
        ('oneof', any_string('first') + any_int(2)),
        ('bad utf-8', any_string(b'\xff\xc3(\x1b[31m'.decode('latin-1'))),
    ], []))
    unknown = (pb_tag(7, 5) + b'\0' * 4 + pb_tag(8, 1) + b'\0' * 8 + pb_tag(9, 0) + pb_varint(300) +
               pb_tag(10, 3) + pb_tag(1, 0) + pb_varint(1) + pb_tag(11, 3) + pb_tag(11, 4) + pb_tag(10, 4))
    write('otel', 'payload-unknown-fields', unknown + full + unknown)
    for depth in (16, 17):
        value = any_string('leaf')
        for _ in range(depth - 1):
            value = any_array([value])
        write('otel', f'payload-nested-{depth}', process_context([('deep', value)], []))
    write('otel', 'payload-truncated', full[:len(full) // 2])
    write('otel', 'payload-group-unclosed', pb_tag(10, 3) + pb_tag(1, 0) + pb_varint(1))
    write('otel', 'payload-varint-overlong', pb_tag(1, 0) + b'\xff' * 10 + b'\x01')

    entries = [(0, b'/a'), (7, b'x'), (0, b'/b'), (2, b'u-9'), (200, b'zz')]
    write('otel', 'record', record_image(otel_record(TRACE, SPAN, 1, 1, entries)))
    # A last entry that claims 9 bytes where 3 are left.
    trailing = otel_record(TRACE, SPAN, 1, 1, entries)
    size = struct.unpack_from('<H', trailing, 26)[0] + 5
    trailing = trailing[:26] + struct.pack('<H', size) + trailing[28:] + b'\x01\x09abc'
    write('otel', 'record-trailing', record_image(trailing))
    write('otel', 'record-invalid', record_image(otel_record(TRACE, SPAN, 2, 1, entries)))
    write('otel', 'record-no-span', record_image(otel_record('00' * 16, '00' * 8, 1, 0, [(1, b'POST')])))
    write('otel', 'record-cut', record_image(otel_record(TRACE, SPAN, 1, 1,
                                                         [(i % 3, bytes([0x61 + i]) * 200) for i in range(4)])))
    write('otel', 'record-attrs-unreadable', record_image(otel_record(TRACE, SPAN, 1, 1, [], attrs_size=100)))
    write('otel', 'record-bytes', record_image(otel_record(TRACE, SPAN, 1, 3, [(2, b'a"b\n\xff\xc2\x9b')])))
    write('otel', 'record-null', struct.pack('<Q', 0))
    write('otel', 'record-unmapped', struct.pack('<Q', 0xdead0000))

    write('otel', 'header', header_image(full))
    write('otel', 'header-updating', header_image(full, published=0))
    write('otel', 'header-version-1', header_image(full, version=1))
    write('otel', 'header-no-signature', header_image(full, signature=b'\0' * 8))
    write('otel', 'header-size-0', header_image(full, size=0))
    write('otel', 'header-size-huge', header_image(full, size=70000))
    write('otel', 'header-payload-unmapped', header_image(full, pointer=0xdead0000))
    write('otel', 'maps-memfd', b'7f0000000000-7f0000010000 rw-p 00000000 00:01 1234 /memfd:OTEL_CTX (deleted)\n')
    write('otel', 'maps-anon', b'7f0000000000-7f0000010000 rw-p 00000000 00:00 0 [anon:OTEL_CTX]\n')
    write('otel', 'maps-exec', b'7f0000000000-7f0000010000 r-xp 00000000 00:01 1234 /memfd:OTEL_CTX\n')


FRAME_BASE = 0x10000
FRAME_TOKEN = 0xEC9EB507FB5D7903


def smi(v):
    return (v & 0xffffffff) << 32


def frame_layout(field=32, token=FRAME_TOKEN, version=1, tagged=8):
    return struct.pack('<10IQ', version, 48, tagged, 0x18, 0x10, 24, field, field + 8, 24, 32, token)


def frame_image(*, cped=True, buckets=2, hash_=5, key_matches=True, token=FRAME_TOKEN, undefined_frame=False,
                chain_loop=False, field=32):
    """A thread in frame mode whose store holds a set, as frame.c walks it."""
    img = bytearray(0x800)
    put = lambda at, v: struct.pack_into('<Q', img, at, v & 0xffffffffffffffff)
    b = FRAME_BASE
    undefined = b + 0x201
    put(0x00, b + 0x100 if cped else 0)       # cped_slot
    put(0x08, b + 0x108)                       # als_handle
    put(0x10, hash_)                           # identity hash (int32) + pad
    put(0x18, undefined)                       # undefined
    put(0x100, undefined if undefined_frame else b + 0x301)  # the frame
    put(0x108, b + 0x401)                      # the AsyncLocalStorage object
    put(0x300 + 0x18, b + 0x501)               # the JSMap's table
    counts = 0x510
    put(counts, smi(1))
    put(counts + 8, smi(0))
    put(counts + 16, smi(buckets))
    first = counts + 24
    for i in range(max(buckets, 0) if buckets < 16 else 0):
        put(first + 8 * i, smi(-1))
    if 0 < buckets < 16:
        put(first + 8 * (hash_ & (buckets - 1)), smi(0))
        entry = first + 8 * buckets
        put(entry, b + 0x401 if key_matches else b + 0x409)
        put(entry + 8, b + 0x601)
        put(entry + 16, smi(0) if chain_loop else smi(-1))
    put(0x600 + field - 1 + 1, b + 0x700)      # internal field (value - 1 + field)
    put(0x700 + 24, b + 0x780)                 # the set pointer
    put(0x700 + 32, token)
    return bytes(img)


def frame_seed(layout, image, *, no_layout=False, nodejs=0):
    return layout + bytes([1 if no_layout else 0]) + struct.pack('<Q', nodejs) + image


def frame_seeds():
    write('frame', 'set', frame_seed(frame_layout(), frame_image()))
    write('frame', 'set-node22', frame_seed(frame_layout(field=24), frame_image(field=24)))
    write('frame', 'gate-closed', frame_seed(frame_layout(), frame_image(cped=False)))
    write('frame', 'no-layout', frame_seed(frame_layout(), frame_image(), no_layout=True))
    write('frame', 'bad-layout', frame_seed(frame_layout(version=2, tagged=4), frame_image()))
    write('frame', 'no-context', frame_seed(frame_layout(), frame_image(undefined_frame=True)))
    write('frame', 'not-in-frame', frame_seed(frame_layout(), frame_image(key_matches=False)))
    write('frame', 'chain-loop', frame_seed(frame_layout(), frame_image(key_matches=False, chain_loop=True)))
    write('frame', 'bad-token', frame_seed(frame_layout(), frame_image(token=1)))
    write('frame', 'odd-buckets', frame_seed(frame_layout(), frame_image(buckets=3)))
    write('frame', 'many-buckets', frame_seed(frame_layout(), frame_image(buckets=1 << 30)))
    write('frame', 'outside', frame_seed(frame_layout(), frame_image(), nodejs=0x7f0))


def main():
    seeds = {'elf': elf_seeds, 'tlsdesc': tlsdesc_seeds, 'labels': labels_seeds, 'otel': otel_seeds,
             'frame': frame_seeds}
    for name in sys.argv[1:] or seeds:
        seeds[name]()


if __name__ == '__main__':
    main()
