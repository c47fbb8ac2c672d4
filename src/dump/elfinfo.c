/*
 * Inspecting an ELF file on disk for the ABI: its loadable segments, its
 * PT_TLS header, the two exported symbols and, for a shared object, the
 * TLSDESC relocation of custom_labels_current_set.
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

/* Scans one SHT_RELA section for the TLSDESC relocation of the variable. */
static bool find_tlsdesc(int fd, const Elf64_Shdr *rela, const cld_arch_t *arch,
                         uint64_t set_index, uint64_t set_value, cld_elf_t *elf) {
  Elf64_Rela chunk[CHUNK];
  uint64_t count = rela->sh_size / sizeof(Elf64_Rela);
  for (uint64_t base = 0; base < count; base += CHUNK) {
    uint64_t n = count - base < CHUNK ? count - base : CHUNK;
    if (!read_at(fd, rela->sh_offset + base * sizeof(Elf64_Rela), chunk, n * sizeof(Elf64_Rela)))
      return false;
    for (uint64_t i = 0; i < n; i++) {
      uint64_t type = ELF64_R_TYPE(chunk[i].r_info);
      uint64_t sym = ELF64_R_SYM(chunk[i].r_info);
      if (type != arch->r_tlsdesc) continue;
      /*
       * Normally the relocation names the symbol.  A linker that binds it
       * locally leaves the symbol out and puts its offset in the addend.
       */
      if (sym == set_index || (sym == 0 && (uint64_t)chunk[i].r_addend == set_value)) {
        elf->has_desc = true;
        elf->desc_offset = chunk[i].r_offset;
        elf->desc_var_offset = (sym == 0 ? 0 : set_value) + (uint64_t)chunk[i].r_addend;
        return true;
      }
    }
  }
  return false;
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
  int found = lookup(&tab, hash_off, hash_size, SYMBOL_VERSION, &sym, &index);
  if (found < 0) return fail(why, why_size, "unreadable dynamic symbol table");
  if (found == 0 || sym.st_shndx == SHN_UNDEF) return 0;
  elf->has_version = true;
  elf->version_value = sym.st_value;
  elf->version_size = sym.st_size;
  elf->version_type = ELF64_ST_TYPE(sym.st_info);

  found = lookup(&tab, hash_off, hash_size, SYMBOL_SET, &sym, &index);
  if (found < 0) return fail(why, why_size, "unreadable dynamic symbol table");
  if (found == 0 || sym.st_shndx == SHN_UNDEF) return 0;
  elf->has_set = true;
  elf->set_value = sym.st_value;
  elf->set_size = sym.st_size;
  elf->set_type = ELF64_ST_TYPE(sym.st_info);

  if (eh.e_type != ET_DYN) return 0;
  /* A PIE main executable is ET_DYN too; the caller decides whether it needs this. */
  for (uint64_t i = 0; i < shnum && !elf->has_desc; i++) {
    Elf64_Shdr sh;
    if (!read_at(fd, eh.e_shoff + i * sizeof(sh), &sh, sizeof(sh))) return fail(why, why_size, "truncated section headers");
    if (sh.sh_type != SHT_RELA || sh.sh_link != dynsym_index) continue;
    /* An unreadable table is skipped: the relocation may be in another. */
    find_tlsdesc(fd, &sh, arch, index, elf->set_value, elf);
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
