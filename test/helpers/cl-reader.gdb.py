# An external Custom Label ABI v1 reader, run inside gdb attached to a live
# process:  gdb -nx -batch -p PID -x test/helpers/cl-reader.gdb.py
#
# It reads the process the way a profiler does, with none of the addon's own
# code: it finds customlabels.node in /proc/PID/maps, finds the
# R_X86_64_TLSDESC relocation of custom_labels_current_set in the ELF file,
# reads the TLS descriptor at load base + GOT offset, and for each thread
# reads the pointer at thread pointer + descriptor argument and decodes the
# custom_labels_labelset_t it points to (count entries, NULL keys skipped,
# the first entry of a key wins).
#
# Configuration, from gdb's environment:
#   CL_MODE     "snapshot" (default): decode every thread's set once.
#               "otel": the OpenTelemetry formats instead: find the OTEL_CTX
#               mapping in /proc/PID/maps and decode its header and protobuf
#               payload (OTEP 4719), and decode the OTEP 4947 record that
#               every thread's otel_thread_ctx_v1 points at, found through
#               its own TLSDESC relocation in the same way.
#               "watch": hardware watchpoint on one thread's slot; record and
#               decode every new value until the process exits.
#   CL_OUT      file to write the JSON result to (required).
#   CL_TID      watch mode: the thread (LWP) whose slot to watch; default the
#               main thread.
#   CL_MAX_HITS watch mode: stop watching (and detach) after this many hits.
#
# Lines starting with "CL-READY " (watch mode, once the watchpoint is in) and
# "CL-DONE" are printed on stdout for the test to synchronise on.

import json
import os
import re
import struct
import sys
import traceback

import gdb

NAME_RE = re.compile(r"(libcustomlabels.*\.so|customlabels\.node)$")
SYMBOL = "custom_labels_current_set"
VERSION_SYMBOL = "custom_labels_abi_version"

EM_X86_64 = 62
EM_AARCH64 = 183
R_X86_64_TLSDESC = 36
R_AARCH64_TLSDESC = 1031
PT_LOAD = 1
PT_TLS = 7
SHT_RELA = 4
SHT_DYNSYM = 11

# Sanity bounds while decoding, so that garbage cannot make the reader loop
# or allocate without end; a real set is far smaller.
MAX_COUNT = 4096
MAX_STRING = 1 << 16


def u64(b, off=0):
    return struct.unpack_from("<Q", b, off)[0]


def s64(b, off=0):
    return struct.unpack_from("<q", b, off)[0]


# --------------------------------------------------------------------------
# ELF: just what a reader needs, parsed from the file's bytes.

def parse_elf(path, symbol=SYMBOL):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise RuntimeError("%s: not a little-endian ELF64 file" % path)
    (e_type, e_machine, _v, _entry, e_phoff, e_shoff, _flags, _ehsize,
     e_phentsize, e_phnum, e_shentsize, e_shnum, _shstrndx) = struct.unpack_from(
        "<HHIQQQIHHHHHH", data, 16)
    phdrs = []
    for i in range(e_phnum):
        p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, p_align = \
            struct.unpack_from("<IIQQQQQQ", data, e_phoff + i * e_phentsize)
        phdrs.append(dict(type=p_type, offset=p_offset, vaddr=p_vaddr,
                          filesz=p_filesz, memsz=p_memsz, align=p_align))
    shdrs = []
    for i in range(e_shnum):
        (sh_name, sh_type, _shflags, sh_addr, sh_offset, sh_size, sh_link,
         _info, _align, sh_entsize) = struct.unpack_from(
            "<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)
        shdrs.append(dict(type=sh_type, addr=sh_addr, offset=sh_offset,
                          size=sh_size, link=sh_link, entsize=sh_entsize))

    def cstr(off):
        return data[off:data.index(b"\0", off)].decode("latin-1")

    dynsym_index = next(i for i, s in enumerate(shdrs) if s["type"] == SHT_DYNSYM)
    dynsym = shdrs[dynsym_index]
    strtab = shdrs[dynsym["link"]]
    symbols = []
    for i in range(dynsym["size"] // 24):
        st_name, st_info, _other, st_shndx, st_value, st_size = struct.unpack_from(
            "<IBBHQQ", data, dynsym["offset"] + i * 24)
        symbols.append(dict(name=cstr(strtab["offset"] + st_name), type=st_info & 0xf,
                            bind=st_info >> 4, shndx=st_shndx, value=st_value,
                            size=st_size))

    want_type = {EM_X86_64: R_X86_64_TLSDESC, EM_AARCH64: R_AARCH64_TLSDESC}.get(e_machine)
    tlsdesc = []
    for s in shdrs:
        if s["type"] != SHT_RELA or s["link"] != dynsym_index:
            continue
        for off in range(s["offset"], s["offset"] + s["size"], 24):
            r_offset, r_info, r_addend = struct.unpack_from("<QQq", data, off)
            if (r_info & 0xffffffff) == want_type and symbols[r_info >> 32]["name"] == symbol:
                tlsdesc.append(dict(offset=r_offset, addend=r_addend))
    if len(tlsdesc) != 1:
        raise RuntimeError("%s: expected one TLSDESC relocation for %s, found %d"
                           % (path, symbol, len(tlsdesc)))
    return dict(machine=e_machine, type=e_type, phdrs=phdrs, symbols=symbols,
                tlsdesc=tlsdesc[0],
                pt_tls=[p for p in phdrs if p["type"] == PT_TLS])


# --------------------------------------------------------------------------
# The live process.

def mappings(pid):
    result = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split(None, 5)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].strip() if len(parts) > 5 else ""
            # A file replaced on disk (say, rebuilt) after it was mapped.
            path = path[:-len(" (deleted)")] if path.endswith(" (deleted)") else path
            result.append(dict(start=start, end=end, perms=parts[1],
                               offset=int(parts[2], 16), path=path))
    return result


def find_module(pid, symbol=SYMBOL):
    maps = mappings(pid)
    paths = sorted({m["path"] for m in maps if NAME_RE.search(m["path"])})
    if len(paths) != 1:
        raise RuntimeError("expected one customlabels.node mapping, found %r" % (paths,))
    path = paths[0]
    zero_map = min((m for m in maps if m["path"] == path and m["offset"] == 0),
                   key=lambda m: m["start"])
    zero = zero_map["start"]
    # The file that is mapped, even if the path now names another one.
    mapped = "/proc/%d/map_files/%x-%x" % (pid, zero_map["start"], zero_map["end"])
    elf = parse_elf(mapped if os.path.exists(mapped) else path, symbol)
    first_load = min((p for p in elf["phdrs"] if p["type"] == PT_LOAD),
                     key=lambda p: p["offset"])
    page = 4096
    base = zero - (first_load["vaddr"] & ~(page - 1))
    return path, elf, base, maps


def read(inferior, addr, size):
    return bytes(inferior.read_memory(addr, size))


def read_string(inferior, length, buf):
    if buf == 0:
        return None, "NULL buf"
    if length > MAX_STRING:
        return None, "length %d too large" % length
    raw = read(inferior, buf, length) if length else b""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return raw.hex(), "invalid UTF-8"


def decode_set(inferior, ptr):
    """What a profiler attributes a sample to, plus what it had to skip."""
    if ptr == 0:
        return None
    # storage and count; never capacity, which means nothing to a reader.
    header = read(inferior, ptr, 16)
    storage, count = u64(header, 0), u64(header, 8)
    out = dict(storage=storage, count=count, labels={},
               nullKeys=0, duplicates=0, errors=[])
    if count > MAX_COUNT:
        out["errors"].append("count %d too large" % count)
        return out
    entries = read(inferior, storage, 32 * count) if count else b""
    seen = set()
    for i in range(count):
        klen, kbuf, vlen, vbuf = struct.unpack_from("<QQQQ", entries, 32 * i)
        if kbuf == 0:
            out["nullKeys"] += 1
            continue
        if klen > MAX_STRING:
            out["errors"].append("entry %d: key length %d" % (i, klen))
            continue
        kraw = read(inferior, kbuf, klen)
        if kraw in seen:
            out["duplicates"] += 1  # the first entry of a key wins
            continue
        seen.add(kraw)
        try:
            key = kraw.decode("utf-8")
        except UnicodeDecodeError:
            out["errors"].append("entry %d: key is not UTF-8" % i)
            key = kraw.hex()
        value, err = read_string(inferior, vlen, vbuf)
        if err:
            out["errors"].append("entry %d: value %s" % (i, err))
        out["labels"][key] = value
    return out


def thread_pointer(machine):
    reg = "$fs_base" if machine == EM_X86_64 else "$tpidr"
    return int(gdb.parse_and_eval(reg)) & 0xFFFFFFFFFFFFFFFF


def symbol_at(addr):
    text = gdb.execute("info symbol 0x%x" % addr, to_string=True).strip()
    return None if text.startswith("No symbol") else text


def threadlib_address():
    """Where gdb, through libthread_db, says this thread's variable is."""
    try:
        return int(gdb.parse_and_eval("(unsigned long)&" + SYMBOL))
    except gdb.error:
        return None


def module_info(inferior, symbol=SYMBOL):
    pid = inferior.pid
    path, elf, base, maps = find_module(pid, symbol)
    desc_addr = base + elf["tlsdesc"]["offset"]
    words = read(inferior, desc_addr, 16)
    resolver, arg = u64(words, 0), s64(words, 8)
    resolver_map = next((m["path"] for m in maps if m["start"] <= resolver < m["end"]), None)
    version_sym = next(s for s in elf["symbols"] if s["name"] == VERSION_SYMBOL and s["shndx"])
    version_live = struct.unpack("<I", read(inferior, base + version_sym["value"], 4))[0]
    return dict(path=path, base=base, machine=elf["machine"],
                gotOffset=elf["tlsdesc"]["offset"], addend=elf["tlsdesc"]["addend"],
                descriptor=desc_addr, resolver=resolver, resolverSymbol=symbol_at(resolver),
                resolverMapping=resolver_map, arg=arg,
                ptTlsMemsz=[p["memsz"] for p in elf["pt_tls"]],
                abiVersionLive=version_live)


def slot_of(module, tp):
    # Static TLS: the descriptor's argument is the thread-pointer offset.
    return tp + module["arg"]


def each_thread(inferior, module, field, decode, threadlib=False):
    """One entry a thread: its slot of `module`'s variable, the pointer
    there, and decode(inferior, pointer) as `field` (or the error)."""
    threads = []
    for thread in sorted(inferior.threads(), key=lambda t: t.ptid[1]):
        thread.switch()
        tp = thread_pointer(module["machine"])
        slot = slot_of(module, tp)
        entry = dict(tid=thread.ptid[1], name=thread.name, threadPointer=tp, slot=slot)
        if threadlib:
            entry["threadlibSlot"] = threadlib_address()
        try:
            ptr = u64(read(inferior, slot, 8))
            entry["pointer"] = ptr
            entry[field] = decode(inferior, ptr)
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            entry["error"] = repr(e)
        threads.append(entry)
    return threads


def snapshot(inferior, module):
    return dict(threads=each_thread(inferior, module, "set", decode_set, threadlib=True))


STORE_RE = re.compile(r"^\s*(v?movs?[dq]?|mov[lqwb]?)\s+[^,]+,\s*(\S*\(.*\)|0x[0-9a-f]+)\s*$")


def store_before(pc, slot):
    """The instruction that ends at pc and stores to memory: what a data
    watchpoint stops after.  x86 cannot be decoded backwards unambiguously,
    so every start from pc-15 to pc-1 that decodes to exactly one store
    instruction ending at pc is a candidate, with its length and first byte
    (a REX prefix, 0x40-0x4f, tells a candidate that is another one less its
    prefix)."""
    arch = gdb.selected_frame().architecture()
    inferior = gdb.selected_inferior()
    found = []
    for k in range(1, 16):
        try:
            insn = arch.disassemble(pc - k, count=1)[0]
        except gdb.error:
            continue
        if insn["length"] == k and STORE_RE.match(insn["asm"]):
            first = bytes(inferior.read_memory(pc - k, 1))[0]
            found.append(dict(asm=insn["asm"].strip(), length=k, first=first))
    return found


def watch(inferior, module):
    want = int(os.environ.get("CL_TID") or inferior.pid)
    max_hits = int(os.environ.get("CL_MAX_HITS") or 100000)
    target = next((t for t in inferior.threads() if t.ptid[1] == want), None)
    if target is None:
        raise RuntimeError("no thread %d" % want)
    target.switch()
    slot = slot_of(module, thread_pointer(module["machine"]))
    initial = u64(read(inferior, slot, 8))
    gdb.execute("set can-use-hw-watchpoints 1")
    text = gdb.execute("watch -l *(unsigned long *)0x%x" % slot, to_string=True)
    if not text.startswith("Hardware watchpoint"):
        raise RuntimeError("no hardware watchpoint: %r" % text)
    wp = gdb.breakpoints()[-1]

    state = dict(exited=None, stop=None)
    gdb.events.exited.connect(lambda e: state.update(
        exited=dict(code=getattr(e, "exit_code", None))))

    def on_stop(event):
        state["stop"] = event
    gdb.events.stop.connect(on_stop)

    hits = []
    pcs = {}
    other = []
    sys.stdout.write("CL-READY " + json.dumps(dict(slot=slot, initial=initial)) + "\n")
    sys.stdout.flush()
    aborted = 0
    while len(hits) < max_hits:
        state["stop"] = None
        try:
            gdb.execute("continue", to_string=True)
        except gdb.error as e:
            # gdb 13 aborts a continue when one of the process's threads
            # starts or ends while it resumes them; the process stands
            # stopped, and continuing again resumes it (a store made
            # meanwhile still stops at the watchpoint).  Anything else, or
            # the same 500 times in a row, is a finding.  (V8's compiler
            # and GC helper threads start and end more often on a loaded
            # machine: 20 in a row were seen there, so what counts is
            # aborts in a row, with room to spare.)
            if state["exited"] is None and str(e) == "Command aborted." and aborted < 500:
                aborted += 1
                continue
            if state["exited"] is None:
                other.append("continue: %s" % e)
            break
        aborted = 0
        if state["exited"] is not None:
            break
        event = state["stop"]
        if not (isinstance(event, gdb.BreakpointEvent) and wp in event.breakpoints):
            other.append("stop: %r" % (event,))
            continue
        thread = gdb.selected_thread()
        pc = int(gdb.parse_and_eval("$pc")) & 0xFFFFFFFFFFFFFFFF
        if pc not in pcs:
            # Which code stored: a builtin in the node binary, the addon, or
            # JIT code (an anonymous mapping).
            where = next((m for m in mappings(inferior.pid) if m["start"] <= pc < m["end"]), None)
            pcs[pc] = dict(count=0, symbol=symbol_at(pc),
                           mapping=where["path"] if where else None,
                           perms=where["perms"] if where else None,
                           instruction=store_before(pc, slot))
        pcs[pc]["count"] += 1
        value = u64(read(inferior, slot, 8))
        hit = dict(value=value, tid=thread.ptid[1], pc=pc)
        try:
            hit["set"] = decode_set(inferior, value)
        except Exception as e:  # noqa: BLE001 - unreadable memory is a finding
            hit["error"] = repr(e)
        hits.append(hit)
    if state["exited"] is None:
        # Hit cap or unexpected stop: leave the process running as it was.
        wp.delete()
    return dict(slot=slot, initial=initial, watchpoint=text.strip(), hits=hits,
                pcs=[dict(pc=pc, **v) for pc, v in pcs.items()], other=other,
                exited=state["exited"])


# --------------------------------------------------------------------------
# The OpenTelemetry formats (OTEP 4719 and 4947), decoded from their texts.

OTEL_SYMBOL = "otel_thread_ctx_v1"
OTEL_MAPPING_NAMES = ("/memfd:OTEL_CTX", "/memfd:OTEL_CTX (deleted)",
                      "[anon_shmem:OTEL_CTX]", "[anon:OTEL_CTX]")


def pb_fields(data):
    """(field number, wire type, value) of a protobuf message: value is an
    int for varints and fixed-size fields, bytes for length-delimited."""
    out = []
    i = 0
    while i < len(data):
        key, i = pb_varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = pb_varint(data, i)
        elif wire == 1:
            value, i = u64(data, i), i + 8
        elif wire == 2:
            n, i = pb_varint(data, i)
            if i + n > len(data):
                raise RuntimeError("protobuf: field %d runs past the end" % field)
            value, i = data[i:i + n], i + n
        elif wire == 5:
            value, i = struct.unpack_from("<I", data, i)[0], i + 4
        else:
            raise RuntimeError("protobuf: wire type %d" % wire)
        out.append((field, wire, value))
    return out


def pb_varint(data, i):
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            return value, i


def pb_any(data):
    """An AnyValue: a string, or a list for an array_value."""
    for field, _wire, value in pb_fields(data):
        if field == 1:
            return value.decode("utf-8")
        if field == 5:
            return [pb_any(v) for f, _w, v in pb_fields(value) if f == 1]
        return dict(field=field, value=value if isinstance(value, int) else value.hex())
    return None


def pb_keyvalues(data, number):
    """The KeyValue fields `number` of a message, as [key, value] pairs in order."""
    pairs = []
    for field, _wire, value in pb_fields(data):
        if field != number:
            continue
        key = val = None
        for f, _w, v in pb_fields(value):
            if f == 1:
                key = v.decode("utf-8")
            elif f == 2:
                val = pb_any(v)
        pairs.append([key, val])
    return pairs


def process_context(inferior):
    found = [m for m in mappings_raw(inferior.pid) if m["name"] in OTEL_MAPPING_NAMES]
    if len(found) != 1:
        return dict(error="expected one OTEL_CTX mapping, found %r" % ([m["name"] for m in found],))
    m = found[0]
    for _attempt in range(3):
        header = read(inferior, m["start"], 32)
        signature = header[:8]
        version, size = struct.unpack_from("<II", header, 8)
        published, payload_ptr = u64(header, 16), u64(header, 24)
        if published == 0:
            continue
        payload = read(inferior, payload_ptr, size) if 0 < size <= 65536 else b""
        if u64(read(inferior, m["start"] + 16, 8)) != published:
            continue
        resource = b"".join(v for f, _w, v in pb_fields(payload) if f == 1)
        return dict(mapping=m["name"], perms=m["perms"], size=m["end"] - m["start"],
                    signature=signature.decode("latin-1"), version=version,
                    payloadSize=size, publishedAt=published, payload=payload.hex(),
                    resource=pb_keyvalues(resource, 1), attributes=pb_keyvalues(payload, 2))
    return dict(error="the process context kept changing")


def mappings_raw(pid):
    result = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split(None, 5)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            result.append(dict(start=start, end=end, perms=parts[1],
                               name=parts[5].strip() if len(parts) > 5 else ""))
    return result


def decode_record(inferior, ptr):
    if ptr == 0:
        return None
    header = read(inferior, ptr, 28)
    size = struct.unpack_from("<H", header, 26)[0]
    attrs_raw = read(inferior, ptr + 28, min(size, 640 - 28)) if size else b""
    attrs = []
    i = 0
    while i + 2 <= len(attrs_raw):
        index, length = attrs_raw[i], attrs_raw[i + 1]
        if i + 2 + length > len(attrs_raw):
            break
        attrs.append([index, attrs_raw[i + 2:i + 2 + length].decode("utf-8", "replace")])
        i += 2 + length
    return dict(address=ptr, bytes=(header + attrs_raw).hex(), traceId=header[:16].hex(),
                spanId=header[16:24].hex(), valid=header[24], flags=header[25],
                attrsSize=size, attrs=attrs)


def otel_snapshot(inferior):
    module = module_info(inferior, OTEL_SYMBOL)
    threads = each_thread(inferior, module, "record", decode_record)
    return dict(otelModule=module, threads=threads, processContext=process_context(inferior))


def main():
    out_path = os.environ["CL_OUT"]
    result = dict(ok=False)
    try:
        gdb.execute("set pagination off")
        gdb.execute("set confirm off")
        gdb.execute("set print thread-events off")
        # Node's own signals are none of our business: never stop on them.
        gdb.execute("handle all nostop noprint pass", to_string=True)
        inferior = gdb.selected_inferior()
        if inferior.pid == 0:
            raise RuntimeError("gdb is not attached to a process (is ptrace allowed? "
                               "see /proc/sys/kernel/yama/ptrace_scope)")
        result["pid"] = inferior.pid
        module = module_info(inferior)
        result["module"] = module
        mode = os.environ.get("CL_MODE", "snapshot")
        if mode == "snapshot":
            result.update(snapshot(inferior, module))
        elif mode == "watch":
            result.update(watch(inferior, module))
        elif mode == "otel":
            result.update(otel_snapshot(inferior))
        else:
            raise RuntimeError("unknown CL_MODE %r" % mode)
        result["ok"] = True
    except Exception as e:  # noqa: BLE001 - reported to the test
        result["error"] = "%s\n%s" % (e, traceback.format_exc())
    with open(out_path + ".tmp", "w") as f:
        json.dump(result, f)
    os.rename(out_path + ".tmp", out_path)
    sys.stdout.write("CL-DONE\n")
    sys.stdout.flush()


main()
