/*
 * Inspecting an ELF file on disk for the thread-locals readers look for:
 * its loadable segments, its PT_TLS header, the Custom Label ABI's two
 * exported symbols, OTEP 4947's otel_thread_ctx_v1 and, for a shared
 * object, the relocations through which its code reaches each variable.
 *
 * The file belongs to the target and may be anything, so every read is a
 * bounded pread() into a fixed buffer: nothing here allocates.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "elfinfo.h"

#define SYMBOL_VERSION "custom_labels_abi_version"
#define SYMBOL_SET "custom_labels_current_set"
#define SYMBOL_OTEL "otel_thread_ctx_v1"
#define SYMBOL_NODEJS "otel_thread_ctx_nodejs_v1"
#define SYMBOL_ALS_HANDLE "custom_labels_als_handle"
#define SYMBOL_ALS_HASH "custom_labels_als_identity_hash"
#define SYMBOL_LAYOUT "custom_labels_v8_layout"
#define MAX_SECTIONS 65536
#define MAX_HASH_STEPS 1000000
#define CHUNK 256 /* symbols or relocations per read */

static int fail(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
  return -1;
}

/* Reads exactly len bytes at off; false at end of file or on error. */
static bool read_at(int fd, uint64_t off, void *buf, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += (size_t)n;
  }
  return true;
}

typedef struct {
  int fd;
  uint64_t sym_off, sym_count; /* .dynsym */
  uint64_t str_off, str_size;  /* its string table */
} symtab_t;

/* Whether the NUL-terminated name at `st_name` equals `name`. */
static bool name_is(const symtab_t *tab, uint32_t st_name, const char *name) {
  char buf[64];
  size_t want = strlen(name) + 1;
  if (want > sizeof(buf) || st_name >= tab->str_size || tab->str_size - st_name < want) return false;
  if (!read_at(tab->fd, tab->str_off + st_name, buf, want)) return false;
  return memcmp(buf, name, want) == 0;
}

static bool read_symbol(const symtab_t *tab, uint64_t index, Elf64_Sym *sym) {
  if (index >= tab->sym_count) return false;
  return read_at(tab->fd, tab->sym_off + index * sizeof(Elf64_Sym), sym, sizeof(*sym));
}

static uint32_t gnu_hash(const char *name) {
  uint32_t h = 5381;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = h * 33 + *p;
  return h;
}

/*
 * Looks `name` up through .gnu.hash, the way the dynamic loader does; a few
 * small reads instead of a scan of every symbol (node exports ~75,000).
 * Returns 1 found, 0 absent, -1 when the table is unusable.
 */
static int lookup_gnu_hash(const symtab_t *tab, uint64_t hash_off, uint64_t hash_size,
                           const char *name, Elf64_Sym *sym, uint64_t *index) {
  uint32_t header[4];
  if (hash_size < sizeof(header) || !read_at(tab->fd, hash_off, header, sizeof(header))) return -1;
  uint32_t nbuckets = header[0], symoffset = header[1], bloom_size = header[2];
  if (nbuckets == 0) return 0;
  uint64_t buckets_off = sizeof(header) + (uint64_t)bloom_size * 8;
  uint64_t chain_off = buckets_off + (uint64_t)nbuckets * 4;
  if (chain_off > hash_size) return -1;
  uint32_t h = gnu_hash(name);
  uint32_t bucket;
  if (!read_at(tab->fd, hash_off + buckets_off + (uint64_t)(h % nbuckets) * 4, &bucket, 4)) return -1;
  if (bucket == 0) return 0;
  if (bucket < symoffset) return -1;
  for (uint64_t i = bucket, steps = 0; steps < MAX_HASH_STEPS; i++, steps++) {
    uint32_t chain;
    uint64_t at = chain_off + (i - symoffset) * 4;
    if (at + 4 > hash_size || !read_at(tab->fd, hash_off + at, &chain, 4)) return -1;
    if ((chain | 1) == (h | 1)) {
      if (!read_symbol(tab, i, sym)) return -1;
      if (name_is(tab, sym->st_name, name)) {
        *index = i;
        return 1;
      }
    }
    if (chain & 1) return 0;
  }
  return -1;
}

/* Finds `name` by reading every dynamic symbol, CHUNK at a time. */
static int lookup_linear(const symtab_t *tab, const char *name, Elf64_Sym *sym, uint64_t *index) {
  Elf64_Sym chunk[CHUNK];
  for (uint64_t base = 0; base < tab->sym_count; base += CHUNK) {
    uint64_t n = tab->sym_count - base < CHUNK ? tab->sym_count - base : CHUNK;
    if (!read_at(tab->fd, tab->sym_off + base * sizeof(Elf64_Sym), chunk, n * sizeof(Elf64_Sym)))
      return -1;
    for (uint64_t i = 0; i < n; i++) {
      if (chunk[i].st_name != 0 && name_is(tab, chunk[i].st_name, name)) {
        *sym = chunk[i];
        *index = base + i;
        return 1;
      }
    }
  }
  return 0;
}

static int lookup(const symtab_t *tab, uint64_t hash_off, uint64_t hash_size, const char *name,
                  Elf64_Sym *sym, uint64_t *index) {
  if (hash_size != 0) {
    int found = lookup_gnu_hash(tab, hash_off, hash_size, name, sym, index);
    if (found >= 0) return found;
  }
  return lookup_linear(tab, name, sym, index);
}

/* A variable whose relocations are looked for, with its .dynsym index. */
typedef struct {
  cld_elf_tls_symbol_t *sym;
  uint64_t index;
} wanted_t;

/* Records the first relocation of each kind that reaches the variable. */
static void match_relocation(const cld_arch_t *arch, const Elf64_Rela *r, wanted_t *w) {
  cld_elf_tls_symbol_t *v = w->sym;
  uint64_t type = ELF64_R_TYPE(r->r_info);
  uint64_t sym = ELF64_R_SYM(r->r_info);
  /*
   * Normally the relocation names the symbol.  A linker that binds it
   * locally leaves the symbol out and puts its offset in the addend; a
   * DTPMOD relocation has no addend to tell variables apart, so only the
   * named form is taken for it.
   */
  bool named = sym == w->index;
  bool by_addend = sym == 0 && (uint64_t)r->r_addend == v->value;
  if (type == arch->r_tlsdesc && !v->has_desc && (named || by_addend)) {
    v->has_desc = true;
    v->desc_offset = r->r_offset;
    v->desc_var_offset = (named ? v->value : 0) + (uint64_t)r->r_addend;
  } else if (type == arch->r_tpoff && !v->has_tpoff && (named || by_addend)) {
    v->has_tpoff = true;
    v->tpoff_offset = r->r_offset;
  } else if (type == arch->r_dtpmod && !v->has_dtpmod && named) {
    v->has_dtpmod = true;
    v->dtpmod_offset = r->r_offset;
  }
}

/* Scans one SHT_RELA section for the relocations of the wanted variables. */
static bool scan_relocations(int fd, const Elf64_Shdr *rela, const cld_arch_t *arch,
                             wanted_t *wanted, size_t nwanted) {
  Elf64_Rela chunk[CHUNK];
  uint64_t count = rela->sh_size / sizeof(Elf64_Rela);
  for (uint64_t base = 0; base < count; base += CHUNK) {
    uint64_t n = count - base < CHUNK ? count - base : CHUNK;
    if (!read_at(fd, rela->sh_offset + base * sizeof(Elf64_Rela), chunk, n * sizeof(Elf64_Rela)))
      return false;
    for (uint64_t i = 0; i < n; i++)
      for (size_t k = 0; k < nwanted; k++) match_relocation(arch, &chunk[i], &wanted[k]);
  }
  return true;
}

/* Looks up a thread-local's symbol; 1 found, 0 absent, -1 unreadable table. */
static int lookup_variable(const symtab_t *tab, uint64_t hash_off, uint64_t hash_size,
                           const char *name, cld_elf_tls_symbol_t *v, uint64_t *index) {
  Elf64_Sym sym;
  int found = lookup(tab, hash_off, hash_size, name, &sym, index);
  if (found <= 0) return found;
  if (sym.st_shndx == SHN_UNDEF) return 0;
  v->found = true;
  v->value = sym.st_value;
  v->size = sym.st_size;
  v->type = ELF64_ST_TYPE(sym.st_info);
  return 1;
}

int cld_elf_inspect(int fd, const cld_arch_t *arch, cld_elf_t *elf, char *why, size_t why_size) {
  memset(elf, 0, sizeof(*elf));
  Elf64_Ehdr eh;
  if (!read_at(fd, 0, &eh, sizeof(eh)) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return fail(why, why_size, "not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return fail(why, why_size, "not a 64-bit little-endian ELF file");
  if (eh.e_machine != arch->e_machine)
    return fail(why, why_size, "ELF machine %u is not %s", eh.e_machine, arch->name);
  if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
    return fail(why, why_size, "ELF type %u is neither an executable nor a shared object", eh.e_type);
  elf->e_type = eh.e_type;

  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return fail(why, why_size, "unexpected program header size");
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (!read_at(fd, eh.e_phoff + (uint64_t)i * sizeof(ph), &ph, sizeof(ph)))
      return fail(why, why_size, "truncated program headers");
    if (ph.p_type == PT_LOAD && elf->nloads < CLD_ELF_MAX_LOADS) {
      cld_segment_t *seg = &elf->loads[elf->nloads++];
      seg->vaddr = ph.p_vaddr;
      seg->offset = ph.p_offset;
      seg->filesz = ph.p_filesz;
      seg->memsz = ph.p_memsz;
    } else if (ph.p_type == PT_TLS) {
      elf->has_tls = true;
      elf->tls_vaddr = ph.p_vaddr;
      elf->tls_memsz = ph.p_memsz;
      elf->tls_align = ph.p_align;
    }
  }

  /* Section headers: .dynsym, its strings, .gnu.hash, and the RELA tables. */
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr))
    return fail(why, why_size, "no section headers (stripped with sstrip?)");
  uint64_t shnum = eh.e_shnum;
  if (shnum == 0) {
    /* Extended numbering: the real count is in section 0's sh_size. */
    Elf64_Shdr first;
    if (!read_at(fd, eh.e_shoff, &first, sizeof(first))) return fail(why, why_size, "truncated section headers");
    shnum = first.sh_size;
  }
  if (shnum > MAX_SECTIONS) return fail(why, why_size, "too many sections (%llu)", (unsigned long long)shnum);

  symtab_t tab = {.fd = fd};
  uint64_t dynsym_index = 0, hash_off = 0, hash_size = 0;
  bool have_dynsym = false;
  for (uint64_t i = 0; i < shnum && !have_dynsym; i++) {
    Elf64_Shdr sh;
    if (!read_at(fd, eh.e_shoff + i * sizeof(sh), &sh, sizeof(sh))) return fail(why, why_size, "truncated section headers");
    if (sh.sh_type != SHT_DYNSYM) continue;
    Elf64_Shdr str;
    if (sh.sh_link >= shnum || !read_at(fd, eh.e_shoff + (uint64_t)sh.sh_link * sizeof(str), &str, sizeof(str)))
      return fail(why, why_size, "bad .dynsym string table link");
    tab.sym_off = sh.sh_offset;
    tab.sym_count = sh.sh_size / sizeof(Elf64_Sym);
    tab.str_off = str.sh_offset;
    tab.str_size = str.sh_size;
    dynsym_index = i;
    have_dynsym = true;
  }
  if (!have_dynsym) return 0; /* exports nothing at all */
  for (uint64_t i = 0; i < shnum; i++) {
    Elf64_Shdr sh;
    if (!read_at(fd, eh.e_shoff + i * sizeof(sh), &sh, sizeof(sh))) return fail(why, why_size, "truncated section headers");
    if (sh.sh_type == SHT_GNU_HASH && sh.sh_link == dynsym_index) {
      hash_off = sh.sh_offset;
      hash_size = sh.sh_size;
    }
  }

  Elf64_Sym sym;
  uint64_t index;
  wanted_t wanted[3];
  size_t nwanted = 0;
  int found = lookup(&tab, hash_off, hash_size, SYMBOL_VERSION, &sym, &index);
  if (found < 0) return fail(why, why_size, "unreadable dynamic symbol table");
  if (found == 1 && sym.st_shndx != SHN_UNDEF) {
    elf->has_version = true;
    elf->version_value = sym.st_value;
    elf->version_size = sym.st_size;
    elf->version_type = ELF64_ST_TYPE(sym.st_info);
    found = lookup_variable(&tab, hash_off, hash_size, SYMBOL_SET, &elf->set, &index);
    if (found < 0) return fail(why, why_size, "unreadable dynamic symbol table");
    if (found == 1) wanted[nwanted++] = (wanted_t){&elf->set, index};
    if (found == 1) found = lookup_variable(&tab, hash_off, hash_size, SYMBOL_NODEJS, &elf->nodejs, &index);
    if (found < 0) return fail(why, why_size, "unreadable dynamic symbol table");
    if (elf->nodejs.found) wanted[nwanted++] = (wanted_t){&elf->nodejs, index};
    if (elf->nodejs.found) {
      uint64_t unused;
      if (lookup_variable(&tab, hash_off, hash_size, SYMBOL_ALS_HANDLE, &elf->als_handle, &unused) < 0 ||
          lookup_variable(&tab, hash_off, hash_size, SYMBOL_ALS_HASH, &elf->als_hash, &unused) < 0)
        return fail(why, why_size, "unreadable dynamic symbol table");
    }
  }
  found = lookup_variable(&tab, hash_off, hash_size, SYMBOL_OTEL, &elf->otel, &index);
  if (found < 0) return fail(why, why_size, "unreadable dynamic symbol table");
  if (found == 1) wanted[nwanted++] = (wanted_t){&elf->otel, index};
  found = lookup(&tab, hash_off, hash_size, SYMBOL_LAYOUT, &sym, &index);
  if (found < 0) return fail(why, why_size, "unreadable dynamic symbol table");
  if (found == 1 && sym.st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym.st_info) == STT_OBJECT) {
    elf->has_layout = true;
    elf->layout_value = sym.st_value;
    elf->layout_size = sym.st_size;
  }

  /* A PIE main executable is ET_DYN too; the caller decides whether it needs these. */
  if (eh.e_type != ET_DYN || nwanted == 0) return 0;
  for (uint64_t i = 0; i < shnum; i++) {
    Elf64_Shdr sh;
    if (!read_at(fd, eh.e_shoff + i * sizeof(sh), &sh, sizeof(sh))) return fail(why, why_size, "truncated section headers");
    if (sh.sh_type != SHT_RELA || sh.sh_link != dynsym_index) continue;
    /* An unreadable table is skipped: the relocation may be in another. */
    scan_relocations(fd, &sh, arch, wanted, nwanted);
  }
  return 0;
}

bool cld_elf_bias(const cld_elf_t *elf, uint64_t map_start, uint64_t map_offset,
                  uint64_t page_size, uint64_t *bias) {
  /*
   * The loader maps the segments in order of address, so the file's lowest
   * mapping comes from the PT_LOAD with the lowest p_vaddr, mapped from the
   * page that holds its p_offset.  (Any other mapping can be ambiguous: two
   * segments may start in the same file page.)
   */
  const cld_segment_t *first = NULL;
  for (size_t i = 0; i < elf->nloads; i++)
    if (first == NULL || elf->loads[i].vaddr < first->vaddr) first = &elf->loads[i];
  if (first == NULL || map_offset != (first->offset & ~(page_size - 1))) return false;
  *bias = cld_load_bias(map_start, map_offset, first->vaddr, first->offset);
  return true;
}
